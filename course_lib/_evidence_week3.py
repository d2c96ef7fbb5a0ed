"""Week 3's graded evidence: a student's doubling table against the grader's own measurement.

Private to the hidden tests of ``solutions/week3``. The student measures how a function's
time grows (a table from :func:`course_lib.complexity.doubling` and the exponent fitted to
it); the hidden test measures the same code at the same sizes while grading and compares:
the table must be well-formed, the exponent must be the one the table gives and agree with
the grader's within a stated amount, and the table's seconds must agree with the grader's
within a stated factor. An exponent typed from theory fails the first check, a table of
another function the second, seconds typed in or in other units the third.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from course_lib._evidence import agreed_checks  # the week's cells import it from here too

__all__ = ["agreed_checks", "doubling_sizes", "grader_exponent", "grader_speedup", "growth_checks",
           "implied_speedup", "largest_seconds", "within_factor"]


def doubling_sizes(table: Any, smallest: int, largest: int) -> list[int] | None:
    """The sizes of a student's doubling table, or None when they break the task's rules.

    The rules: a :class:`pandas.DataFrame` with columns ``n`` and ``seconds``, at least four
    rows, each ``n`` twice the one before, all between ``smallest`` and ``largest``.

    Examples
    --------
    >>> doubling_sizes(pd.DataFrame({"n": [500, 1000, 2000, 4000], "seconds": [1, 4, 16, 64]}),
    ...                500, 8000)
    [500, 1000, 2000, 4000]
    >>> doubling_sizes(pd.DataFrame({"n": [500, 1000, 3000, 4000], "seconds": [1, 4, 16, 64]}),
    ...                500, 8000) is None
    True
    """
    if type(table) is not pd.DataFrame or not {"n", "seconds"} <= set(table.columns) or len(table) < 4:
        return None
    try:
        sizes = [int(n) for n in table["n"].tolist()]
    except (TypeError, ValueError, OverflowError):
        return None
    if sizes != [float(n) for n in table["n"].tolist()]:
        return None  # a size of 1000.5 names is not a size
    doubled = all(later == 2 * earlier for earlier, later in zip(sizes, sizes[1:]))
    return sizes if doubled and smallest <= sizes[0] and sizes[-1] <= largest else None


def grader_exponent(fn: Callable[[Any], Any], make_input: Callable[[int], Any], sizes: Sequence[int],
                    budget: float = 0.2) -> float:
    """The growth exponent the grader fits to ``fn``'s CPU time over ``sizes``.

    :func:`course_lib.grading.measured_exponent`, looked up when called: outside the kernel
    the verifier replaces it, and times ``fn`` in the student worker.

    Examples
    --------
    Sorting grows like n log n, a slope a little above 1 (it measures for a few seconds):

    >>> slope = grader_exponent(sorted, lambda n: list(np.random.default_rng().random(n)),
    ...                         [100_000, 200_000, 400_000])  # doctest: +SKIP
    >>> 0.8 < slope < 1.5  # doctest: +SKIP
    True
    """
    from course_lib import grading

    return grading.measured_exponent(fn, make_input, sizes, budget)


def grader_speedup(candidate: Callable[..., Any], baseline: Callable[..., Any],
                   make_args: Callable[[], tuple], budget: float = 0.3) -> float:
    """The speed-up of ``candidate`` over ``baseline`` the grader measures, on fresh inputs.

    :func:`course_lib.grading.measured_speedup`, looked up when called (outside the kernel
    the verifier replaces it): side by side, a busy machine cancelling out of the ratio, and
    a candidate whose results differ from the baseline's raising
    :class:`course_lib.grading.GradingError` before anything is timed. Calls of 0.1 ms or
    more are timed (give inputs on which every candidate takes milliseconds).

    Examples
    --------
    A baseline doing the same sort three times (it measures for a few seconds):

    >>> def once(values):
    ...     return sorted(values)
    >>> def thrice(values):
    ...     return [sorted(values) for _ in range(3)][0]
    >>> ratio = grader_speedup(once, thrice, lambda: (np.random.default_rng().random(300_000).tolist(),),
    ...                        budget=0.2)  # doctest: +SKIP
    >>> 2 < ratio < 4  # doctest: +SKIP
    True
    """
    from course_lib import grading

    return grading.measured_speedup(candidate, baseline, make_args, budget, min_call_seconds=1e-4)


def implied_speedup(slow_table: Any, fast_table: Any, n: int) -> float:
    """The speed-up at ``n`` that two doubling tables imply: the ratio of their fitted lines.

    Each table's ``(log n, log seconds)`` line is fitted by least squares and read at
    ``n`` (within or beyond the table's sizes); NaN when either table has no sizes or no
    positive seconds.

    Examples
    --------
    >>> slow = pd.DataFrame({"n": [1000, 2000, 4000], "seconds": [0.004, 0.016, 0.064]})
    >>> fast = pd.DataFrame({"n": [2000, 4000, 8000], "seconds": [0.002, 0.004, 0.008]})
    >>> round(implied_speedup(slow, fast, 8000), 6)     # 0.256 s against 0.008 s
    32.0
    """
    lines = [_fitted_line(table) for table in (slow_table, fast_table)]
    if any(line is None for line in lines):
        return math.nan
    (slope_s, icpt_s), (slope_f, icpt_f) = lines
    return float(10 ** ((icpt_s - icpt_f) + (slope_s - slope_f) * math.log10(n)))


def growth_checks(table: Any, exponent: Any, names: tuple[str, str], grader_slope: float,
                  smallest: int, largest: int, slack: float = 0.4) -> dict[str, bool]:
    """Each check of a student's doubling table and exponent, by what it checks: True if it holds.

    Parameters
    ----------
    table, exponent
        The student's doubling table and the exponent they fitted to it.
    names : (str, str)
        What the notebook calls them, for the checks' wording.
    grader_slope : float
        The grader's own exponent for the same code at the same sizes (NaN when the
        table's sizes broke the rules and nothing was measured).
    smallest, largest : int
        The sizes allowed.
    slack : float, default 0.4
        How far the exponent may be from the grader's. An exponent fitted to four sizes is
        itself a noisy reading: the reference's own fit of the provided function (December
        2026, 2-core machine, quiet and beside busy processes) ranged 1.78-2.26 while the
        grader's readings ranged 1.84-2.18, and a reference table at 2.26 beside three
        grader's readings of 1.92 once failed a slack of 0.3. An exponent of the wrong
        growth (1 for 2, 2 for 1) still misses by more than twice this.

    Examples
    --------
    >>> table = pd.DataFrame({"n": [500, 1000, 2000, 4000], "seconds": [0.001, 0.004, 0.016, 0.064]})
    >>> checks = growth_checks(table, 2.0, ("t", "k"), grader_slope=1.9, smallest=500, largest=8000)
    >>> all(checks.values())
    True
    >>> checks = growth_checks(table, 1.0, ("t", "k"), 1.9, 500, 8000)
    >>> [check for check, holds in checks.items() if not holds]
    ['k is the slope fitted to t (within 0.02)', "k is within 0.4 of the grader's exponent (1.90)"]
    """
    table_name, exponent_name = names
    sizes = doubling_sizes(table, smallest, largest)
    seconds = _positive_seconds(table) if sizes else None
    slope = _number(exponent)
    fitted = math.nan
    if seconds is not None:
        fitted = float(np.polyfit(np.log10(sizes), np.log10(seconds), 1)[0])
    return {
        f"{table_name} has columns n and seconds, at least four sizes, each twice the one before, "
        f"from {smallest:,} to {largest:,} names": sizes is not None,
        f"{table_name}'s seconds are positive numbers": seconds is not None,
        f"{exponent_name} is the slope fitted to {table_name} (within 0.02)": abs(slope - fitted) <= 0.02,
        f"{exponent_name} is within {slack:g} of the grader's exponent ({grader_slope:.2f})":
            abs(slope - grader_slope) <= slack,
    }


def largest_seconds(table: Any) -> float:
    """Seconds per call at a doubling table's last (largest) size, or NaN if it has none.

    Examples
    --------
    >>> largest_seconds(pd.DataFrame({"n": [1000, 2000], "seconds": [0.5, 1.5]}))
    1.5
    >>> largest_seconds("not a table")
    nan
    """
    seconds = _positive_seconds(table) if type(table) is pd.DataFrame and len(table) else None
    return seconds[-1] if seconds else math.nan


def within_factor(yours: float, graders: float, factor: float) -> bool:
    """Whether ``yours`` is within ``factor`` of ``graders``, either way (False for NaN or 0).

    Examples
    --------
    >>> within_factor(0.3, 1.0, 4), within_factor(0.2, 1.0, 4), within_factor(float("nan"), 1.0, 4)
    (True, False, False)
    """
    ratio = yours / graders if graders > 0 else math.nan
    return bool(1 / factor <= ratio <= factor)


def _fitted_line(table: Any) -> tuple[float, float] | None:
    """(slope, intercept) of a table's log-log line, or None without two positive sizes."""
    if type(table) is not pd.DataFrame or "n" not in table.columns or len(table) < 2:
        return None
    seconds = _positive_seconds(table)
    try:
        sizes = [float(n) for n in table["n"].tolist()]
    except (AttributeError, TypeError, ValueError):
        return None
    if seconds is None or not all(math.isfinite(n) and n > 0 for n in sizes) or len(set(sizes)) < 2:
        return None
    slope, intercept = np.polyfit(np.log10(sizes), np.log10(seconds), 1)
    return float(slope), float(intercept)


def _positive_seconds(table: pd.DataFrame) -> list[float] | None:
    try:
        seconds = [float(s) for s in table["seconds"].tolist()]
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return seconds if all(math.isfinite(s) and s > 0 for s in seconds) else None


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return math.nan
    return float(value)
