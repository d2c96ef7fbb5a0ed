"""What a failed grading check raises: :class:`GradingError` and its two kinds.

nbgrader scores a grade cell that raises as failed, and ``course grade`` tells the kinds
apart by the exception's name (:mod:`course_lib.grader.execute`). The classes name
:mod:`course_lib.grading` as their module, the package students import them from, so a
traceback or a doctest shows ``course_lib.grading.GradingError`` wherever it is raised.
"""

from __future__ import annotations

__all__ = ["GradingError", "TamperingDetected", "UnreliableMeasurement"]


class GradingError(AssertionError):
    """A grading check failed; the message says what differs or what was needed."""

    __module__ = "course_lib.grading"  # where students import it from, and what tracebacks show


class TamperingDetected(GradingError):
    """The measuring instruments (clocks, tracemalloc, course_lib) were interfered with.

    The message always starts with ``"Tampering detected:"`` so that a grading report
    can flag the submission.
    """

    __module__ = "course_lib.grading"

    def __init__(self, detail: str) -> None:
        prefix = "Tampering detected:"
        super().__init__(detail if detail.startswith(prefix) else f"{prefix} {detail}")


class UnreliableMeasurement(GradingError):
    """The grading configuration asks for a measurement that cannot be trusted.

    Raised for the instructor, not the student: the inputs are so small that the
    calls take microseconds, where measured ratios move by more than 2x under load.
    """

    __module__ = "course_lib.grading"

