"""Memory and growth: peak traced memory and the exponent of run time, as checks, as partial credit, as numbers.

A peak is measured with :func:`course_lib.memory.peak` (tracemalloc) and cross-checked with
tracemalloc's own counter. Growth is the log-log exponent
(:func:`course_lib.complexity.exponent`) of the fastest call per size in CPU time, every
call on a fresh input, the sizes taken in turn, the CPU time cross-checked with thread CPU
time and the wall clock. :func:`log_points` is the partial-credit rule such cells follow.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from course_lib.grading._checks import (
    _call_candidate, _check_number, _check_sizes, _fmt_seconds, _grading_session, _parse_bytes,
)
from course_lib.grading._errors import GradingError, TamperingDetected, UnreliableMeasurement
from course_lib.grading._state import (
    _CPUS, _exponent, _fmt_bytes, _monotonic_ns, _peak, _process_time, _raise_if_tampered, _thread_time,
    _tm_get, _tm_is_tracing, _tm_start, _tm_stop,
)
from course_lib.grading._values import _same_values

# The public names, then what preview and the verifier use from here.
__all__ = [
    "assert_peak_memory_below", "assert_scaling", "log_points", "peak_memory_points", "scaling_points",
    "measured_exponent", "measured_peak", "_check_points_thresholds", "_exponent_points", "_fitted_exponent",
    "_log_share_points", "_memory_thresholds", "_traced_peak",
]


def assert_peak_memory_below(fn: Callable[..., Any], limit: int | str, /, *args: Any, **kwargs: Any) -> None:
    """Check that ``fn(*args, **kwargs)`` peaks below ``limit`` bytes of traced memory.

    Measured with :func:`course_lib.memory.peak` (tracemalloc, which sees Python
    objects and NumPy buffers). tracemalloc's functions and ``memory.peak`` are
    checked against the ones captured at import, and the peak is cross-checked with
    tracemalloc's own process-wide peak.

    Parameters
    ----------
    fn : callable
        The function to run once.
    limit : int or str
        Bytes, or a string such as ``"50 MB"`` (decimal units B, kB, MB, GB; binary
        KiB, MiB, GiB also accepted).
    *args, **kwargs
        Passed to ``fn``.

    Raises
    ------
    GradingError
        The peak reached the limit (the message gives both), or ``fn`` raised.
    TamperingDetected
        tracemalloc or course_lib.memory was replaced.

    Examples
    --------
    >>> assert_peak_memory_below(lambda n: [0] * n, "1 MB", 1_000)
    >>> assert_peak_memory_below(lambda n: [0] * n, "1 MB", 1_000_000)
    Traceback (most recent call last):
        ...
    course_lib.grading.GradingError: Too much memory: your function's peak traced memory was 8.0 MB; the limit is 1.0 MB.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    limit_bytes = _parse_bytes(limit)
    with _grading_session():
        peak = _traced_peak(fn, args, kwargs)
        if peak >= limit_bytes:
            raise GradingError(
                f"Too much memory: your function's peak traced memory was "
                f"{_fmt_bytes(peak)}; the limit is {_fmt_bytes(limit_bytes)}."
            )


def assert_scaling(
    fn: Callable[[Any], Any],
    make_input: Callable[[int], Any],
    sizes: Sequence[int],
    max_exponent: float,
    *,
    budget: float = 0.2,
    margin: float = 0.1,
    min_call_seconds: float = 1e-3,
) -> None:
    """Check that the run time of ``fn`` grows no faster than ``n ** max_exponent``.

    Times ``fn(make_input(n))`` at each size, every call on a fresh input (unlike
    :func:`course_lib.complexity.doubling`, which reuses one input per size: a
    submission memoising on its input would look O(1) there), taking the sizes in
    turn and keeping the fastest call per size in CPU time (see below), fits the log-log
    exponent with :func:`course_lib.complexity.exponent` and fails when the fitted
    exponent exceeds ``max_exponent + margin``. The margin (0.1 by default) absorbs
    fitting noise: measured in CPU time, the exponents of a pure-Python linear and
    quadratic function came out at 1.03-1.06 and 2.00-2.04 under two busy
    competitors on 2 cores, far from the 1.0 that separates O(n) from O(n^2).

    Parameters
    ----------
    fn : callable
        Called as ``fn(x)`` with ``x = make_input(n)``.
    make_input : callable
        ``make_input(n)`` returns a new, random input of size ``n``.
    sizes : sequence of int
        At least two increasing sizes, e.g. doubling ``[1_000, 2_000, 4_000, 8_000]``.
    max_exponent : float
        The largest acceptable exponent, e.g. 1.5 to accept O(n) and O(n log n) and
        reject O(n^2).
    budget : float, default 0.2
        About the seconds of timed calls per size (3 to 15 calls each).
    margin : float, default 0.1
        Added to ``max_exponent`` before comparing.
    min_call_seconds : float, default 0.001
        Refuse sizes whose largest call takes less than this.

    Raises
    ------
    GradingError
        The exponent is too large (the message has the fitted exponent, the verdict
        and the doubling table), or ``fn`` raised.
    UnreliableMeasurement
        Even the largest size runs in microseconds (instructor: use larger sizes).
    TamperingDetected
        A clock or course_lib's measuring code was replaced.
    """
    for obj, name in ((fn, "fn"), (make_input, "make_input")):
        if not callable(obj):
            raise TypeError(f"{name} must be a function, got {type(obj).__name__}")
    sizes = _check_sizes(sizes)
    _check_number(max_exponent, "max_exponent")
    _check_number(budget, "budget", positive=True)
    _check_number(margin, "margin")
    _check_number(min_call_seconds, "min_call_seconds", positive=True)
    with _grading_session():
        fit, table = _fitted_exponent(fn, make_input, sizes, budget, min_call_seconds)
        allowed = max_exponent + margin
        if not fit.slope <= allowed:
            raise GradingError(
                f"Grows too fast: the fitted exponent is {fit.slope:.2f} ({fit.verdict}); "
                f"this test allows at most {max_exponent:g} (a measured {allowed:.2f} passes). "
                f"Doubling table (CPU seconds per call; ratio to the previous size):\n"
                f"{table.to_string(index=False)}"
            )


def log_points(value: float, full_at: float, zero_at: float, points: float) -> float:
    """Points on a log scale: all of ``points`` at ``full_at``, none at ``zero_at``.

    The rule every partial-credit cell of the course follows, for a measurement that
    needs no timing (a table's deep memory, a count): the credit is linear in
    ``log(value)`` between the two thresholds, clipped to ``[0, points]`` and rounded to
    2 decimals. It works in either direction: ``full_at > zero_at`` when more is better
    (a speed-up, how many times less memory), ``full_at < zero_at`` when less is better
    (a peak in bytes). Make it the last expression of a grade cell with the same
    ``points``, as :func:`speedup_points`; the value is a plain ``float``.

    :func:`speedup_points`, :func:`peak_memory_points` and :func:`scaling_points` apply
    the same rule to what they measure (the first two with their noise margins).

    Parameters
    ----------
    value : float
        The measurement; NaN earns nothing.
    full_at, zero_at : float
        Where the credit is full and where it is zero; positive and different.
    points : float
        The points of the grade cell.

    Examples
    --------
    >>> log_points(8.0, full_at=8, zero_at=4, points=5)
    5.0
    >>> log_points(5.66, full_at=8, zero_at=4, points=5)   # halfway on a log scale
    2.5
    >>> log_points(40e6, full_at=20e6, zero_at=80e6, points=6)  # smaller is better here
    3.0
    """
    _check_points_thresholds(full_at, zero_at, points, increasing=None)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"value must be a number, got {type(value).__name__}")
    return _log_share_points(float(value), float(full_at), float(zero_at), float(points))


def peak_memory_points(fn: Callable[..., Any], full_at: int | str, zero_at: int | str, points: float,
                       /, *args: Any, **kwargs: Any) -> float:
    """Partial credit for peak memory: ``points`` up to ``full_at``, none from ``zero_at``.

    ``fn(*args, **kwargs)`` runs once and its peak traced memory is measured exactly as
    :func:`assert_peak_memory_below` measures it (tracemalloc, its functions and
    ``memory.peak`` checked against the ones captured at import, the peak cross-checked
    with tracemalloc's own counter). The credit is :func:`log_points` of the peak: full
    when it is at most ``full_at`` (so ``assert_peak_memory_below(fn, full_at)`` passes
    exactly when this gives full points, up to the byte at the limit), none at
    ``zero_at`` or more, linear in ``log(peak)`` in between. Memory is not noisy as time
    is, so there is no margin.

    Parameters
    ----------
    fn : callable
        The function to run once.
    full_at, zero_at : int or str
        Bytes, or strings such as ``"20 MB"`` (as for :func:`assert_peak_memory_below`);
        ``full_at`` below ``zero_at``.
    points : float
        The points of the grade cell; make the call its last expression.
    *args, **kwargs
        Passed to ``fn``.

    Returns
    -------
    float
        Points earned, between 0 and ``points``.

    Raises
    ------
    GradingError
        ``fn`` raised.
    TamperingDetected
        tracemalloc or course_lib.memory was replaced.

    Examples
    --------
    >>> peak_memory_points(lambda n: [0] * n, "1 MB", "4 MB", 2, 1_000)
    2.0
    >>> peak_memory_points(lambda n: [0] * n, "1 MB", "4 MB", 2, 250_000)   # 2 MB: halfway
    1.0
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    full, zero = _memory_thresholds(full_at, zero_at, points)
    with _grading_session():
        measured = _traced_peak(fn, args, kwargs)
    return _log_share_points(float(measured), full, zero, float(points))


def scaling_points(
    fn: Callable[[Any], Any],
    make_input: Callable[[int], Any],
    sizes: Sequence[int],
    full_at: float,
    zero_at: float,
    points: float,
    *,
    budget: float = 0.2,
    margin: float = 0.1,
    min_call_seconds: float = 1e-3,
) -> float:
    """Partial credit for growth: ``points`` up to exponent ``full_at``, none from ``zero_at``.

    The exponent is fitted exactly as :func:`assert_scaling` fits it (CPU time, fresh
    inputs, sizes taken in turn, the fastest call per size, the same cross-checks). The
    credit is linear in the exponent, which is itself a slope on a log-log scale, between
    ``full_at + margin`` (full points) and ``zero_at + margin`` (none), so that
    ``assert_scaling(..., max_exponent=full_at)`` passes exactly when this gives full
    points.

    Parameters
    ----------
    fn, make_input, sizes, budget, margin, min_call_seconds
        As for :func:`assert_scaling`.
    full_at : float
        The largest exponent earning all the points (e.g. 1.5: O(n log n) still counts
        as near-linear).
    zero_at : float
        The exponent earning none; above ``full_at`` (e.g. 1.8, below the 2 of O(n^2)).
    points : float
        The points of the grade cell; make the call its last expression.

    Returns
    -------
    float
        Points earned, between 0 and ``points``.

    Raises
    ------
    GradingError
        ``fn`` raised.
    UnreliableMeasurement
        Even the largest size runs in microseconds (instructor: use larger sizes).
    TamperingDetected
        A clock or course_lib's measuring code was replaced.

    Examples
    --------
    With ``full_at=1.5``, ``zero_at=1.8`` and the margin of 0.1, a fitted 1.6 earns all
    the points, 1.9 none, and 1.75 half (the rule applied to the fitted exponent):

    >>> _exponent_points(1.75, full_at=1.5, zero_at=1.8, points=3, margin=0.1)
    1.5
    """
    for obj, name in ((fn, "fn"), (make_input, "make_input")):
        if not callable(obj):
            raise TypeError(f"{name} must be a function, got {type(obj).__name__}")
    sizes = _check_sizes(sizes)
    _check_points_thresholds(full_at, zero_at, points, increasing=False)
    _check_number(budget, "budget", positive=True)
    _check_number(margin, "margin")
    _check_number(min_call_seconds, "min_call_seconds", positive=True)
    with _grading_session():
        fit, _ = _fitted_exponent(fn, make_input, sizes, budget, min_call_seconds)
    return _exponent_points(fit.slope, full_at, zero_at, points, margin)


def measured_exponent(fn: Callable[[Any], Any], make_input: Callable[[int], Any], sizes: Sequence[int],
                      budget: float = 0.2, *, min_call_seconds: float = 1e-3) -> float:
    """The growth exponent of ``fn``'s CPU time over ``sizes`` as the grader fits it, as a number.

    For a test that checks a student's own doubling table or exponent against the
    grader's reading of the same code: fitted exactly as :func:`scaling_points` fits it
    (sizes in turn, fresh inputs, CPU time cross-checked against independent clocks).
    Outside the kernel the verifier times it in the student worker.

    Examples
    --------
    >>> import numpy as np
    >>> slope = measured_exponent(lambda x: np.sort(x), lambda n: np.random.default_rng().random(n),
    ...                           [200_000, 400_000, 800_000])  # doctest: +SKIP
    >>> 0.8 < slope < 1.4  # doctest: +SKIP
    True
    """
    for obj, name in ((fn, "fn"), (make_input, "make_input")):
        if not callable(obj):
            raise TypeError(f"{name} must be a function, got {type(obj).__name__}")
    sizes = _check_sizes(sizes)
    _check_number(budget, "budget", positive=True)
    _check_number(min_call_seconds, "min_call_seconds", positive=True)
    with _grading_session():
        fit, _ = _fitted_exponent(fn, make_input, sizes, budget, min_call_seconds)
    return float(fit.slope)


def measured_peak(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> int:
    """The peak traced memory of one call ``fn(*args, **kwargs)`` as the grader reads it, in bytes.

    For a test that checks a student's own tracemalloc figure against the grader's reading of
    the same function: the figure the student was asked to take (tracemalloc's peak),
    measured as :func:`peak_memory_points` measures it, cross-checked against tracemalloc's own
    counter. While the verifier grades outside the kernel it is the traced peak in the
    student worker. Memory hidden from tracemalloc is a matter for the memory cells
    (:func:`peak_memory_points` counts the sandbox's rise there), not for this agreement.

    Examples
    --------
    >>> 1_000_000 <= measured_peak(bytearray, 1_000_000) < 1_100_000
    True
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    with _grading_session():
        return _traced_peak(fn, args, kwargs)


def _scaling_seconds(
    fn: Callable[[Any], Any], make_input: Callable[[int], Any], sizes: list[int], budget: float,
    clocks: list[float],
) -> list[float]:
    """Fastest single call of ``fn`` at each size in CPU seconds, every call on a new input.

    CPU time (``time.process_time``, all threads of the process) rather than wall
    time: with more runnable processes than cores, a call longer than the
    scheduler's time slice gets preempted and a short one often does not, which
    bends wall-clock exponents upwards (a linear function measured 1.5 to 2.0 under
    two busy competitors on 2 cores), while the CPU time of the work stays put.
    The calls take the sizes in turn (small, large, small, large, ...), so a burst
    of load spreads over all sizes instead of bending one, and the fastest call per
    size is the least disturbed (timeit's advice). Each size gets 3 to 15 calls, as
    many as about ``budget`` seconds allow. ``clocks`` accumulates process CPU,
    thread CPU and wall seconds, cross-checked over all calls together.
    """
    first = [_timed_call(fn, make_input(n), clocks) for n in sizes]  # warm-up (and JIT)
    calls = [max(3, min(15, int(budget / max(t, 1e-9)))) for t in first]
    best = [math.inf] * len(sizes)
    for round_ in range(max(calls)):
        for i, n in enumerate(sizes):
            if round_ < calls[i]:
                best[i] = min(best[i], _timed_call(fn, make_input(n), clocks))
    return best


def _timed_call(fn: Callable[[Any], Any], x: Any, clocks: list[float]) -> float:
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: a collection due to earlier garbage is not this call's
    try:
        m0 = _monotonic_ns()
        h0 = _thread_time()
        t0 = _process_time()
        _call_candidate(fn, (x,))
        t1 = _process_time()
        h1 = _thread_time()
        m1 = _monotonic_ns()
    finally:
        if gc_was_enabled:
            gc.enable()
    clocks[0] += t1 - t0
    clocks[1] += h1 - h0
    clocks[2] += (m1 - m0) / 1e9
    return t1 - t0


def _check_points_thresholds(full_at: Any, zero_at: Any, points: Any, increasing: bool | None) -> None:
    """Positive, different thresholds and points; ``increasing``: full_at above zero_at (None: either)."""
    _check_number(full_at, "full_at", positive=True)
    _check_number(zero_at, "zero_at", positive=True)
    _check_number(points, "points", positive=True)
    if full_at == zero_at:
        raise ValueError(f"full_at and zero_at must differ, got {full_at!r} for both")
    if increasing is True and not zero_at < full_at:
        raise ValueError(f"zero_at must be below full_at (credit grows with the measurement), "
                         f"got zero_at={zero_at!r}, full_at={full_at!r}")
    if increasing is False and not full_at < zero_at:
        raise ValueError(f"full_at must be below zero_at (credit shrinks as the measurement grows), "
                         f"got full_at={full_at!r}, zero_at={zero_at!r}")


def _log_share_points(value: float, full_at: float, zero_at: float, points: float) -> float:
    if not value > 0:  # also catches NaN; a zero peak is the least memory there is
        return float(points) if value == 0 and full_at < zero_at else 0.0
    share = math.log(value / zero_at) / math.log(full_at / zero_at)
    return float(min(points, round(points * min(1.0, max(0.0, share)), 2)))


def _memory_thresholds(full_at: int | str, zero_at: int | str, points: float) -> tuple[float, float]:
    full, zero = float(_parse_bytes(full_at)), float(_parse_bytes(zero_at))
    _check_points_thresholds(full, zero, points, increasing=False)
    return full, zero


def _traced_peak(fn: Callable[..., Any], args: tuple, kwargs: dict) -> int:
    """The peak traced memory of one call, cross-checked against tracemalloc's own counter."""
    _raise_if_tampered()
    started = not _tm_is_tracing()
    if started:
        _tm_start()
    try:
        before = _tm_get()[0]
        try:
            measured = _peak(fn, *args, **kwargs)
        except GradingError:
            raise
        except Exception as exc:
            raise GradingError(f"Your function raised {type(exc).__name__}: {exc}") from exc
        high = _tm_get()[1]
    finally:
        if started and _tm_is_tracing():
            _tm_stop()
    _raise_if_tampered()
    independent = max(0, high - before)
    if abs(measured.peak - independent) > 0.1 * independent + 1_000_000:
        raise TamperingDetected(
            f"the measured peak ({_fmt_bytes(measured.peak)}) disagrees with tracemalloc's "
            f"own counter ({_fmt_bytes(independent)}): the memory measurement was tampered with"
        )
    return int(measured.peak)


def _fitted_exponent(fn: Callable[[Any], Any], make_input: Callable[[int], Any], sizes: list[int], budget: float,
                     min_call_seconds: float) -> tuple[Any, pd.DataFrame]:
    """(fit, doubling table) of ``fn``'s CPU time per call, cross-checked against independent clocks."""
    _raise_if_tampered()
    first, second = make_input(sizes[0]), make_input(sizes[0])
    if _same_values(first, second):
        raise ValueError(
            "make_input(n) returned equal inputs on two calls: a submission that "
            "memoises on its input's value would look O(1). Draw random inputs, e.g. "
            "lambda n: np.random.default_rng().random(n)"
        )
    del first, second
    clocks = [0.0, 0.0, 0.0]  # CPU, this thread's CPU and wall seconds of all timed calls
    seconds = _scaling_seconds(fn, make_input, sizes, budget, clocks)
    cpu, thread, wall = clocks
    # A thread's CPU time is part of the process's, which cannot outrun the wall
    # clock on every core at once.
    if not (thread - 0.02 <= cpu <= wall * _CPUS + 0.02):
        raise TamperingDetected(
            f"the CPU timer measured {_fmt_seconds(cpu)} of calls that took "
            f"{_fmt_seconds(thread)} of thread CPU time and {_fmt_seconds(wall)} of wall "
            f"time by independent clocks: the clock was tampered with"
        )
    table = pd.DataFrame({"n": sizes, "seconds": seconds})
    table["ratio"] = table["seconds"] / table["seconds"].shift(1)
    if seconds[-1] < min_call_seconds:
        raise UnreliableMeasurement(
            f"Unreliable measurement (a grading configuration problem, not your code): "
            f"the largest size n={sizes[-1]:,} takes only {_fmt_seconds(seconds[-1])} per call, "
            f"and at that scale call overhead, not the algorithm, sets the exponent. "
            f"Instructor: use larger sizes, so that the largest call takes at least "
            f"{_fmt_seconds(min_call_seconds)}.\n{table.to_string(index=False)}"
        )
    _raise_if_tampered()
    return _exponent(table), table


def _exponent_points(slope: float, full_at: float, zero_at: float, points: float, margin: float) -> float:
    low, high = full_at + margin, zero_at + margin
    if not slope < high:  # also catches NaN
        return 0.0
    share = (high - slope) / (high - low)
    return float(min(points, round(points * min(1.0, max(0.0, share)), 2)))

