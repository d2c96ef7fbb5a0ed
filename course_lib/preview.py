"""A speed preview for students: the graded speed test's measurement, run now, on this machine.

A hidden speed test runs only when the notebook is graded. So that a student can see
where they stand before submitting, the instructor writes one visible line above the
hidden test, with the student's names and the test's thresholds::

    # Hidden speed test (4 points): at least 10x faster than count_known_slow ...
    preview_speedup(count_known, count_known_slow,
                    make_args=lambda: make_case(n_queries=50_000, seed=None), at_least=10)
    ### BEGIN HIDDEN TESTS
    ...

Run in the student's notebook (or by ``check()``), the line measures the speed-up the
way :func:`course_lib.grading.assert_speedup` does (same correctness checks, fresh
inputs for every call, thread pools pinned, the 1 ms floor) and prints, on stdout, the
ratio, its interval and what it would earn. It never raises for the student's code and
never writes to stderr. While the notebook is graded (``NBGRADER_EXECUTION=autograde``)
it does nothing at all: the grade comes from the hidden test, measured outside the
notebook's kernel, and a preview would only cost time.

The preview is a preview: it runs the student's own copy of the slow version, beside
whatever else this machine is doing, and the graded measurement may differ.

Memory and growth have previews too, written the same way above a hidden
:func:`~course_lib.grading.peak_memory_points` or :func:`~course_lib.grading.scaling_points`
test: :func:`preview_peak_memory` runs the function once under tracemalloc and
:func:`preview_scaling` fits its growth exponent, and each prints the measurement and the
points it would earn.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from course_lib import grading
from course_lib._numba_report import prange_loops
from course_lib.grading import _checks, _memory, _parallel, _speed, _state

__all__ = ["preview_speedup", "preview_parallel", "preview_peak_memory", "preview_scaling"]


def preview_speedup(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    *,
    at_least: float | None = None,
    full_at: float | None = None,
    zero_at: float | None = None,
    points: float | None = None,
    budget: float = 0.5,
    margin: float = 0.1,
    threads: int = 1,
) -> None:
    """Measure ``candidate`` against ``baseline`` now and print what the graded test would say.

    Give the thresholds of the hidden test it previews: ``at_least`` (an all-or-nothing
    :func:`~course_lib.grading.assert_speedup`), or ``full_at``, ``zero_at`` and ``points``
    (a partial-credit :func:`~course_lib.grading.speedup_points`). A wrong setting is the
    instructor's error and raises even while grading, so that ``course release`` catches it.

    Parameters
    ----------
    candidate, baseline, make_args
        As for :func:`~course_lib.grading.assert_speedup`; ``baseline`` is the slow version
        the student was given.
    at_least : float, optional
        The speed-up an all-or-nothing test needs.
    full_at, zero_at, points : float, optional
        A partial-credit test's thresholds and points.
    budget, margin, threads
        As for the graded test (the defaults are its defaults in the shipped notebooks).

    Returns
    -------
    None
        The verdict is printed: a grade cell that returned a number would be read by
        nbgrader as partial credit.

    Examples
    --------
    >>> import os
    >>> os.environ["NBGRADER_EXECUTION"] = "autograde"   # as while grading: no measurement
    >>> preview_speedup(sorted, sorted, lambda: ([3, 1, 2],), at_least=2)
    >>> del os.environ["NBGRADER_EXECUTION"]
    >>> preview_speedup(sorted, sorted, lambda: ([3, 1, 2],), at_least=2, points=4)
    Traceback (most recent call last):
    ...
    ValueError: give either at_least (all or nothing) or full_at, zero_at and points (partial credit), not both
    """
    thresholds = _thresholds(at_least, full_at, zero_at, points)
    settings = _speed._speed_settings(budget, margin, 1e-3, 3, None, None, 1e-9, 0.0, threads)
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        return None
    print(_preview(candidate, baseline, make_args, settings, thresholds))
    return None


def preview_parallel(
    candidate: Callable[..., Any],
    reference: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    workers: int,
    *,
    full_at: float,
    zero_at: float,
    points: float,
    budget: float = 2.0,
    margin: float = 0.1,
    compiled: Any = None,
) -> None:
    """Measure a parallel version now and print what :func:`~course_lib.grading.parallel_points` would give.

    ``candidate(*make_args(), w)`` on ``workers`` workers against itself on one, beside
    ``reference`` (the serial version the student was given), as the graded test measures
    it; with ``compiled``, Numba's report on that kernel is read too, as the test reads it.
    The verdict is printed on stdout, never raised. Does nothing while grading.

    Examples
    --------
    >>> import os
    >>> os.environ["NBGRADER_EXECUTION"] = "autograde"   # as while grading: no measurement
    >>> preview_parallel(lambda x, w: x, lambda x: x, lambda: (1,), 2, full_at=1.3, zero_at=1.1, points=4)
    >>> del os.environ["NBGRADER_EXECUTION"]
    """
    thresholds = _thresholds(None, full_at, zero_at, points)
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        return None
    names = f"{_name(candidate)} on {workers} workers against 1"
    try:
        settings = _parallel._parallel_settings(workers, full_at, zero_at, points, budget, 1.1, 1.25, 1e-9,
                                                0.0, margin, 0.02, 3)
        decision = _speed._Decision(full_at=full_at, zero_at=zero_at, points=points, margin=margin)
        with _checks._grading_session():
            try:
                result = _parallel._measure_parallel(candidate, reference, make_args, settings, decision)
            except _parallel._NoParallelPoints as exc:
                print(f"{_HEADING}: {names}: {exc}: on this measurement 0 of {points:g} points.")
                return None
        if compiled is not None:
            _parallel._require_prange(prange_loops(compiled), _name(compiled))
        earned = _parallel._parallel_points_for(result, settings)
    except grading.UnreliableMeasurement as exc:
        print(f"{_HEADING}: {names}: not measured: {exc}")
        return None
    except grading.GradingError as exc:  # a wrong result, no concurrency, or tampering: 0 points
        print(f"{_HEADING}: {names}: {_first_line(str(exc))}: on this measurement 0 of {points:g} points.")
        return None
    except Exception as exc:  # the student's code raised: say so, never a traceback
        message = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
        print(f"{_HEADING}: {names}: not measured: it raised {message.splitlines()[0]}")
        return None
    full, zero, _ = thresholds
    print(f"{_HEADING}:\n{names}: {result.describe()}.\nThe graded test gives {points:g} points from {full:g}x "
          f"and none at {zero:g}x or below: on this measurement {earned:g} of {points:g} points.")
    return None


def preview_peak_memory(fn: Callable[..., Any], full_at: int | str, zero_at: int | str, points: float,
                        /, *args: Any, **kwargs: Any) -> None:
    """Measure ``fn(*args, **kwargs)``'s peak memory now and print what the graded test would give.

    The visible line above a hidden :func:`~course_lib.grading.peak_memory_points` test,
    with its thresholds: the call runs once under tracemalloc, as the graded test runs it,
    and the peak and the points it would earn are printed on stdout, never raised. Does
    nothing while grading. A wrong setting is the instructor's error and raises.

    Examples
    --------
    >>> preview_peak_memory(lambda n: [0] * n, "1 MB", "4 MB", 2, 250_000)
    Memory preview on this machine (not your grade: the graded test measures again):
    <lambda>: peak traced memory 2.0 MB.
    The graded test gives 2 points up to 1.0 MB and none from 4.0 MB (on a log scale in between): on this measurement 1 of 2 points.
    """
    full, zero = _memory._memory_thresholds(full_at, zero_at, points)
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        return None
    heading, names = _MEMORY_HEADING, _name(fn)
    try:
        with _checks._grading_session():
            measured = _memory._traced_peak(fn, args, kwargs)
    except grading.GradingError as exc:  # the function raised, or tampering: the graded test fails too
        print(f"{heading}: {names}: not measured: {_first_line(str(exc))}")
        return None
    earned = _memory._log_share_points(float(measured), full, zero, float(points))
    print(f"{heading}:\n{names}: peak traced memory {_state._fmt_bytes(measured)}.\n"
          f"The graded test gives {points:g} points up to {_state._fmt_bytes(int(full))} and none from "
          f"{_state._fmt_bytes(int(zero))} (on a log scale in between): on this measurement {earned:g} of "
          f"{points:g} points.")
    return None


def preview_scaling(fn: Callable[[Any], Any], make_input: Callable[[int], Any], sizes: Any, full_at: float,
                    zero_at: float, points: float, *, budget: float = 0.2, margin: float = 0.1) -> None:
    """Fit ``fn``'s growth exponent now and print what the graded test would give.

    The visible line above a hidden :func:`~course_lib.grading.scaling_points` test, with
    its sizes and thresholds: the exponent is fitted as the graded test fits it (CPU time,
    fresh inputs) and printed with the points it would earn, never raised. Does nothing
    while grading. A wrong setting is the instructor's error and raises.

    Examples
    --------
    >>> import os
    >>> os.environ["NBGRADER_EXECUTION"] = "autograde"   # as while grading: no measurement
    >>> preview_scaling(sorted, lambda n: list(range(n, 0, -1)), [1_000, 2_000], 1.5, 1.8, 3)
    >>> del os.environ["NBGRADER_EXECUTION"]
    """
    sizes = _checks._check_sizes(sizes)
    _memory._check_points_thresholds(full_at, zero_at, points, increasing=False)
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        return None
    heading, names = _SCALING_HEADING, _name(fn)
    try:
        with _checks._grading_session():
            fit, _ = _memory._fitted_exponent(fn, make_input, sizes, budget, 1e-3)
    except grading.UnreliableMeasurement as exc:
        print(f"{heading}: {names}: not measured: {_first_line(str(exc))}")
        return None
    except grading.GradingError as exc:
        print(f"{heading}: {names}: not measured: {_first_line(str(exc))}")
        return None
    except Exception as exc:  # make_input or the student's code raised: say so, never a traceback
        message = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
        print(f"{heading}: {names}: not measured: it raised {message.splitlines()[0]}")
        return None
    earned = _memory._exponent_points(fit.slope, full_at, zero_at, points, margin)
    print(f"{heading}:\n{names}: fitted exponent {fit.slope:.2f} ({fit.verdict}), n = {sizes[0]:,} to "
          f"{sizes[-1]:,}, CPU time.\nThe graded test gives {points:g} points up to an exponent of {full_at:g} "
          f"(a measured {full_at + margin:.2f} earns them) and none from {zero_at:g} (a measured "
          f"{zero_at + margin:.2f}): on this measurement {earned:g} of {points:g} points.")
    return None


# --- private helpers -------------------------------------------------------------------------

_HEADING = "Speed preview on this machine (not your grade: the graded test measures again)"
_MEMORY_HEADING = "Memory preview on this machine (not your grade: the graded test measures again)"
_SCALING_HEADING = "Scaling preview on this machine (not your grade: the graded test measures again)"


def _thresholds(at_least: float | None, full_at: float | None, zero_at: float | None,
                points: float | None) -> tuple[float, ...]:
    partial = (full_at, zero_at, points)
    if at_least is not None and all(x is None for x in partial):
        _checks._check_number(at_least, "at_least", positive=True)
        return (float(at_least),)
    if at_least is None and all(x is not None for x in partial):
        for value, name in zip(partial, ("full_at", "zero_at", "points")):
            _checks._check_number(value, name, positive=True)
        if not zero_at < full_at:
            raise ValueError(f"zero_at must be below full_at, got zero_at={zero_at!r}, full_at={full_at!r}")
        return float(full_at), float(zero_at), float(points)
    raise ValueError("give either at_least (all or nothing) or full_at, zero_at and points "
                     "(partial credit), not both")


def _preview(candidate: Callable[..., Any], baseline: Callable[..., Any],
             make_args: Callable[[], tuple[Any, ...]], settings: Any, thresholds: tuple[float, ...]) -> str:
    names = f"{_name(candidate)} against {_name(baseline)}"
    needed = [t * (1.0 - settings.margin) for t in thresholds[:2]]
    if len(thresholds) == 1:
        decision = _speed._Decision(passes_at=needed[0])
    else:
        decision = _speed._Decision(full_at=thresholds[0], zero_at=thresholds[1], points=thresholds[2],
                                    margin=settings.margin)
    try:
        with _checks._grading_session():
            result = _speed._measure_speedup(candidate, baseline, make_args, settings,
                                             fastest=thresholds[0], decision=decision)
    except grading.UnreliableMeasurement as exc:
        return f"{_HEADING}: {names}: not measured: {exc}"
    except grading.GradingError as exc:  # a wrong result, or tampering: the graded test fails too
        return f"{_HEADING}: {names}: not measured: {_first_line(str(exc))}"
    except Exception as exc:  # the student's code raised: say so, never a traceback
        message = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
        return f"{_HEADING}: {names}: not measured: it raised {message.splitlines()[0]}"
    measured = f"{names}: {_checks._fmt_ratio(result.ratio)}x ({result.describe()})."
    if len(thresholds) == 1:
        verdict = ("would pass" if result.ratio >= needed[0] else "would not pass")
        rule = (f"The graded test needs {thresholds[0]:g}x (a measured "
                f"{_checks._fmt_ratio(needed[0])}x passes): on this measurement it {verdict}.")
    else:
        full_at, zero_at, points = thresholds
        earned = _speed._points_for(result.ratio, full_at, zero_at, points, settings.margin)
        rule = (f"The graded test gives {points:g} points from {full_at:g}x and none at {zero_at:g}x or "
                f"below: on this measurement {earned:g} of {points:g} points.")
    return f"{_HEADING}:\n{measured}\n{rule}"


def _first_line(message: str) -> str:
    line = (message.strip().splitlines() or [""])[0].strip().rstrip(":")
    return line[:1].lower() + line[1:]


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__
