"""An IPython extension loaded into every grading kernel: it stops a flood of printed output at its source.

The grader keeps at most ``CourseExecute.max_output_bytes`` (1 MB) of a cell's output and
drops the rest as it arrives, but without this the kernel still sends all of it: a cell
that prints 200 MB made the kernel hold about 800 MB while ipykernel buffered and sent it
(measured), which a busy machine can push past the memory limit, and the grader spent CPU
decoding messages it then threw away. Here each of ``sys.stdout`` and ``sys.stderr``
forwards at most ``LIMIT`` characters per cell and swallows the rest.

This is a courtesy to honest students whose loops print too much, not a security
boundary: student code can put the streams back, and then only its own kernel pays (the
memory limit and the grader's own cap still hold).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["LIMIT", "load_ipython_extension"]

LIMIT = 4_000_000
"""Characters each stream forwards per cell: above the grader's 1 MB cap, so that cap (and its
note to the student) is what shows."""


def load_ipython_extension(ipython: Any) -> None:
    """Cap ``sys.stdout`` and ``sys.stderr`` of this kernel at :data:`LIMIT` characters per cell."""
    used = {"stdout": 0, "stderr": 0}
    for name in used:
        stream = getattr(sys, name)
        stream.write = _capped(stream.write, name, used)

    def next_cell(*_: Any) -> None:
        for name in used:
            used[name] = 0

    ipython.events.register("pre_run_cell", next_cell)


def _capped(write: Any, name: str, used: dict[str, int]) -> Any:
    def capped_write(text: str) -> int:
        # The length of text is returned even when it is dropped: a caller that checks what
        # write() returns must not loop retrying the rest.
        room = LIMIT - used[name]
        if room > 0:
            write(text[:room])
        used[name] += len(text)
        return len(text)

    return capped_write
