"""Week 5's evidence checks: a peak the student measured against the grader's own reading.

Week 5's hidden tests grade the memory figures a student reports (the peak of the provided
whole-file summary, of their own at several chunk sizes, of the provided and their own
database query) against the grader's reading of the same functions. That reading must be
taken where every memory test of the course takes it: in the student's kernel by
``course_lib.grading``, and outside it by the verifier, which measures in the student
worker. Both go through :func:`course_lib.grading.measured_peak` (the verifier replaces
that function while it grades): tracemalloc's peak, the figure the student was asked to
take. Memory hidden from tracemalloc is the memory cells' business (they count the
sandbox's rise), not this agreement's: an honest answer whose untraced memory is large
(SQLite's and the allocator's) must not lose points for reporting its traced peak.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable

__all__ = ["traced_peak_bytes", "agreement_points"]

_FLOOR = 1  # bytes: a peak of 0 reads as 1, so that a factor between two figures exists


def traced_peak_bytes(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> int:
    """The peak traced memory of one call ``fn(*args, **kwargs)``, in bytes, read by the grader.

    Measured by :func:`course_lib.grading.measured_peak`, looked up when called: in a
    notebook's kernel the course's own measurement (tracemalloc, cross-checked), and while
    the verifier grades outside the kernel its replacement, which runs ``fn`` in the student
    worker. A peak of 0 bytes reads as 1 byte.

    Examples
    --------
    >>> used = traced_peak_bytes(bytearray, 1_000_000)  # a million-byte buffer
    >>> 1_000_000 <= used < 1_100_000
    True
    """
    from course_lib import grading  # at call time: the verifier replaces its measuring functions

    return max(_FLOOR, int(grading.measured_peak(fn, *args, **kwargs)))


def agreement_points(claimed: Any, measured: float, full_within: float, zero_beyond: float,
                     points: float, name: str = "the figure") -> float:
    """Points for a figure the student reported, against the grader's reading of the same thing.

    The factor between the two (the larger over the smaller) earns ``points`` up to
    ``full_within``, none from ``zero_beyond``, and in between in proportion to its logarithm
    (:func:`course_lib.grading.log_points`).

    Parameters
    ----------
    claimed : int or float
        What the student reported (NumPy numbers too); anything but a positive, finite number is an
        ``AssertionError`` naming ``name`` (a wrong answer, not a grading error).
    measured : float
        The grader's reading; positive.
    full_within, zero_beyond : float
        Factors, ``1 <= full_within < zero_beyond``.
    points : float
        The most this figure earns.
    name : str
        The figure's name, for the message.

    Examples
    --------
    >>> agreement_points(6.5e6, 6.6e6, 1.5, 3, 2)
    2.0
    >>> agreement_points(13.2e6, 6.6e6, 1.5, 3, 2)   # twice the grader's reading
    1.17
    >>> agreement_points(1e6, 6.6e6, 1.5, 3, 2)
    0.0
    """
    if not 1 <= full_within < zero_beyond:
        raise ValueError(f"need 1 <= full_within < zero_beyond, got {full_within!r} and {zero_beyond!r}")
    if not (isinstance(measured, (int, float)) and measured > 0 and math.isfinite(measured)):
        raise ValueError(f"the grader's reading must be a positive number, got {measured!r}")
    if (isinstance(claimed, bool) or not isinstance(claimed, numbers.Real)
            or not (math.isfinite(claimed) and claimed > 0)):
        raise AssertionError(f"{name} must be a positive number, got {claimed!r}")
    from course_lib.grading import log_points

    claimed = float(claimed)
    factor = max(claimed / measured, measured / claimed)
    return log_points(factor, full_at=full_within, zero_at=zero_beyond, points=points)
