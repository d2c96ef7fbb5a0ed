"""nbgrader as the grader's stages call it: its environment, without its noise, its converters run.

Every stage that reads or writes the gradebook (verify, score, feedback, export, marking)
opens it the same way::

    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        ...

and runs nbgrader's converters (``GenerateAssignment``, ``Autograde``, ``GenerateFeedback``)
with :func:`_run`, their log captured for ``grading/logs``. These helpers live apart from
the stages so that the feedback and the exports can reach nbgrader without importing the
module that grades (see :mod:`course_lib.grader.common`). nbgrader itself is imported only
inside :func:`_run`: importing it takes about two seconds.

Examples
--------
>>> _last_error({"log": "[ERROR] There was an error", "error": "[ERROR] cell 3 timed out"})
'cell 3 timed out'
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from course_lib.grader.common import Course, _environment

__all__: list[str] = []  # the grader's own plumbing: the stages import the private names they use


@contextlib.contextmanager
def _quiet_warnings() -> Iterator[None]:
    """Silence warnings for the block: nbgrader's and nbformat's are not the instructor's business."""
    # nbgrader 0.9 trips SQLAlchemy 2's autoflush warnings on every submission, and nbformat
    # warns about notebooks written by old tools.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _nbgrader_env() -> dict[str, str]:
    """The environment variables nbgrader needs set while it opens or creates a gradebook."""
    # nbgrader runs the `alembic` command when it creates a gradebook, so this environment's
    # scripts folder must be on PATH even when `course` was started without activating it.
    # PYDEVD_...: keeps the kernels' debugger from warning on stderr about frozen modules.
    scripts = os.path.dirname(sys.executable)
    return {"PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")]),
            "PYDEVD_DISABLE_FILE_VALIDATION": "1"}


def _quiet_logger() -> logging.Logger:
    """The logger nbgrader's converters get: it writes nowhere but into the captured log."""
    # nbgrader logs every step; the course command reports results itself, so the log only
    # goes to the buffer that nbgrader's capture_log attaches.
    log = logging.getLogger("course_lib.grader.nbgrading.nbgrader")
    log.propagate = False
    log.setLevel(logging.INFO)
    return log


def _run(course: Course, converter: type, cfg: Any, assignment: str, student: str | None = None,
         **traits: object) -> dict:
    """Run one of nbgrader's converters on ``assignment`` (and ``student``) with ``cfg``, quietly.

    Returns nbgrader's outcome: ``success``, and the ``log`` and ``error`` it wrote.
    """
    from nbgrader import utils as nbutils
    from nbgrader.coursedir import CourseDirectory

    log = _quiet_logger()
    coursedir = CourseDirectory(config=cfg, log=log)
    coursedir.assignment_id = assignment
    if student is not None:
        coursedir.student_id = student
    app = converter(coursedir=coursedir, config=cfg, log=log)
    for name, value in traits.items():
        setattr(app, name, value)
    with _environment(**_nbgrader_env()), _quiet_warnings():
        return nbutils.capture_log(app)


def _append_log(path: Path, step: str, outcome: dict) -> None:
    """Add a converter's outcome to the submission's log (``grading/logs/ASSIGNMENT/STUDENT.log``)."""
    with path.open("a", encoding="utf-8", errors="backslashreplace") as fh:
        fh.write(f"=== nbgrader {step}: {'ok' if outcome['success'] else 'FAILED'}\n")
        fh.write(outcome.get("log", ""))
        fh.write(outcome.get("error", ""))


def _last_error(outcome: dict) -> str:
    """The line of a converter's log that says what went wrong, for a flag or an error message."""
    text = outcome.get("log", "") + "\n" + outcome.get("error", "")
    errors = [line.strip() for line in text.splitlines() if line.startswith("[ERROR]")]
    if errors:
        meaningful = [e for e in errors if "Please see" not in e and "There was an error" not in e]
        return (meaningful or errors)[0].removeprefix("[ERROR]").strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown error"
