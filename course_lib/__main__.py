"""``python -m course_lib`` and the ``course`` command: ``check`` for students, the rest for the instructor.

``course check NOTEBOOK`` (a student's self-check, :mod:`course_lib.check`) needs nothing
but the student environment. Every other command (``release``, ``grade``, ``report``,
``student-repo``, ...) belongs to the instructor's :mod:`course_lib.grader`, which the
student repository leaves out; there they stop with a one-line error instead of a
traceback.

Examples
--------
>>> main(["check", "/no/such/week1.ipynb"])
2
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence

__all__ = ["main"]

_USAGE = "usage: course check NOTEBOOK [--part N]   (python -m course_lib check NOTEBOOK)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``course`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["check"]:
        from course_lib.check import main as check_main

        return check_main(args[1:])
    if importlib.util.find_spec("course_lib.grader") is None:
        # the student repository: only the self-check is there
        what = f"'{args[0]}' is a command for the course team" if args and not args[0].startswith("-") \
            else "the only command here is check"
        print(f"course: {what}; {_USAGE}", file=sys.stderr)
        return 2
    from course_lib.grader.cli import main as instructor_main

    return instructor_main(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
