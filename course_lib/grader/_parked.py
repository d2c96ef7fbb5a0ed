"""A notebook's sandboxed kernel kept after its last cell, to be the verifier's student worker.

The verifier (:mod:`course_lib.grader.verification`) needs a process that holds the
student's answers; it used to start a fresh sandboxed worker and run every non-test cell of
the notebook in it again, a sixth of what grading a notebook cost (the reference solutions:
17.7% of their time, 13 s of week 8's 58 s; ``course grade --profile``, 7 December 2026).
The kernel has just run those cells. So ``course grade`` has
:class:`~course_lib.grader._nbpreprocessors.CourseExecute` make the verifier's line before
the kernel starts (two pipes and a results file, handed to the kernel as open descriptors),
and after the last cell send one request that makes the kernel answer on it
(:func:`course_lib.grader._student_worker.serve_kernel`). The kernel is *parked* here,
under the submission's student, assignment and notebook, until the verify stage
(:mod:`course_lib.grader.verify`) takes it and ends it. Nothing about the verifier's rules
changes: the kernel is trusted no more than a worker, its whole sandbox is frozen while the
reference is timed, and a kernel that dies or stops answering is replaced by a fresh worker
that runs the cells again, as before. A kernel that stopped during the notebook (died, timed
out unanswered, past a limit) is never parked.

Examples
--------
>>> link = KernelLink()
>>> len(link.kernel_ends), link.kernel_ends[2] == link.grader_ends[2]
(3, True)
>>> link.close()
>>> take("ana", "week1", "week1") is None
True
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KernelLink", "ParkedKernel", "park", "release", "take"]


class KernelLink:
    """Two pipes and an anonymous results file: the verifier's line to a kernel, made before it starts.

    The kernel inherits :attr:`kernel_ends`, under the same numbers; the grader keeps
    :attr:`grader_ends` for the verifier. The results file is a ``memfd``, as for a fresh
    worker: no path to swap.
    """

    def __init__(self) -> None:
        to_kernel_r, to_kernel = os.pipe()
        from_kernel, from_kernel_w = os.pipe()
        results = os.memfd_create("course-results", 0)
        self.kernel_ends = (to_kernel_r, from_kernel_w, results)
        """(requests in, replies out, results file): the descriptors the kernel inherits."""
        self.grader_ends = (to_kernel, from_kernel, results)
        """(requests out, replies in, results file): the descriptors the verifier inherits."""
        self._open = {to_kernel_r, from_kernel_w, results, to_kernel, from_kernel}

    def started(self) -> None:
        """Close the kernel's ends here once it has them: its death then reads as the pipe's end."""
        self._close(self.kernel_ends[:2])

    def close(self) -> None:
        self._close(sorted(self._open))

    def _close(self, fds: Any) -> None:
        # Each descriptor closed once: closed twice, its number may by then be another file's.
        for fd in fds:
            if fd in self._open:
                self._open.discard(fd)
                with contextlib.suppress(OSError):
                    os.close(fd)


@dataclass
class ParkedKernel:
    """A kernel answering on :attr:`fds` (see the module's docstring); :meth:`end` ends it."""

    fds: tuple[int, int, int]
    """The grader's ends of the line: requests out, replies in, the results file."""
    pid: int
    """The kernel's interpreter, as this machine numbers it (for ``/proc`` readings)."""
    sandbox: dict[str, Any]
    """:meth:`course_lib.grader.sandbox.Sandbox.handle` of the kernel's sandbox."""
    shared: str
    """A folder the kernel's sandbox reads (read-only): the verifier's temporary folder."""
    _end: Callable[[], None] = field(repr=False)
    verifier: Any = None
    """A :class:`~course_lib.grader.verification.StartedVerifier` holding this line, or None."""
    _ended: bool = field(default=False, repr=False)

    def end(self) -> None:
        """Kill the kernel's sandbox and release what it held (once; later calls do nothing).

        A verifier started for the kernel and not used is ended too.
        """
        if self._ended:
            return
        self._ended = True
        try:
            if self.verifier is not None:
                self.verifier.discard()
        finally:
            self._end()


_PARKED: dict[tuple[str, str, str], ParkedKernel] = {}
_LOCK = threading.Lock()  # a grading process may grade several submissions on threads


def park(student: str, assignment: str, notebook: str, kernel: ParkedKernel) -> None:
    """Keep ``kernel`` for the verify stage of ``student``'s ``notebook`` (a kernel parked before is ended)."""
    with _LOCK:
        earlier = _PARKED.pop((student, assignment, notebook), None)
        _PARKED[(student, assignment, notebook)] = kernel
    if earlier is not None:
        earlier.end()


def take(student: str, assignment: str, notebook: str) -> ParkedKernel | None:
    """The kernel parked for this notebook, now the caller's to :meth:`~ParkedKernel.end`; None if none."""
    with _LOCK:
        return _PARKED.pop((student, assignment, notebook), None)


def release(student: str, assignment: str) -> int:
    """End every kernel still parked for this submission (the verify stage did not take it); how many."""
    with _LOCK:
        keys = [key for key in _PARKED if key[:2] == (student, assignment)]
        kernels = [_PARKED.pop(key) for key in keys]
    for kernel in kernels:
        kernel.end()
    return len(kernels)
