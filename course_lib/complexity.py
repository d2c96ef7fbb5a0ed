"""Doubling experiments: read an algorithm's growth rate off measured run times.

Time a function at sizes ``n, 2n, 4n, ...``. If the time doubles each step the work grows
like ``n``; if it quadruples, like ``n^2``. On a log-log plot ``seconds = c * n^k`` is a
straight line of slope ``k``, so a least-squares line through ``(log n, log seconds)``
estimates the exponent from every size at once instead of from one noisy ratio::

    table = complexity.doubling(count_in_list, make_input, sizes=[1_000, 2_000, 4_000])
    fit = complexity.exponent(table)      # Fit(slope=2.01, ..., verdict='about O(n^2)')
    complexity.plot(table, fit)

Size the inputs so each call takes at least a millisecond: below that, timer resolution,
call overhead and a busy machine move the numbers more than the algorithm does. On a
machine shared with other busy processes, ``clock="cpu"`` times CPU time instead of wall
time, which those processes cannot stretch (right for single-threaded code).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Fit", "doubling", "exponent", "plot", "label_sizes"]

# Captured once at import, as course_lib.timing does: a notebook that later rebinds
# ``time.perf_counter`` cannot change what this module measures.
_perf_counter = time.perf_counter
_process_time = time.process_time

_CLOCKS = ("wall", "cpu")

# Most timed rounds per size; the reported time is the fastest, so rounds slowed by
# another process or the scheduler cannot decide the result.
_ROUNDS = 7

_NAMES = {0: "about O(1)", 1: "about O(n)"}


@dataclass(frozen=True)
class Fit:
    """A straight line through ``(log10 n, log10 seconds)``.

    Attributes
    ----------
    slope : float
        The fitted exponent ``k`` in ``seconds ~ c * n^k``.
    intercept : float
        ``log10`` of the seconds the line predicts at ``n = 1`` (that is, ``log10 c``).
    verdict : str
        The nearest whole exponent in words, e.g. ``"about O(n^2)"``.
    """

    slope: float
    intercept: float
    verdict: str

    def seconds(self, n: float | np.ndarray) -> float | np.ndarray:
        """Seconds the fitted line predicts at size ``n`` (extrapolate with care).

        Examples
        --------
        >>> Fit(slope=1.0, intercept=-6.0, verdict="about O(n)").seconds(1_000)
        0.001
        """
        predicted = 10.0 ** (self.intercept + self.slope * np.log10(n))
        return float(predicted) if np.ndim(predicted) == 0 else predicted

    def __str__(self) -> str:
        return f"slope {self.slope:.2f}: {self.verdict}"


def doubling(
    fn: Callable[[Any], Any],
    make_input: Callable[[int], Any],
    sizes: Sequence[int],
    budget: float = 0.2,
    *,
    clock: str = "wall",
) -> pd.DataFrame:
    """Time ``fn(make_input(n))`` at each size ``n`` and compare each time with the last.

    Every input is built first by ``make_input(n)``, outside the timed region (so all
    of them are in memory at once), and ``fn`` is called once untimed on each (a warm-up
    that also calibrates the loop). Then ``fn`` runs in up to seven rounds per size of a
    calibrated number of calls, with garbage collection paused as :mod:`timeit` does.
    The rounds take the sizes in turn (small, large, small, large, ...), so a burst of
    load from another process spreads over all sizes instead of bending one, and the
    time reported is the fastest round's seconds per call: the least disturbed, as
    :mod:`timeit` advises. ``fn`` is called on the same input object each time, so it
    must not change its input (sort a copy, not the list itself).

    Parameters
    ----------
    fn : callable
        Called as ``fn(x)`` with ``x = make_input(n)``.
    make_input : callable
        ``make_input(n)`` returns the input of size ``n``.
    sizes : sequence of int
        At least two positive, strictly increasing sizes; doubling them
        (``1_000, 2_000, 4_000, ...``) makes the ratio column easy to read.
    budget : float, default 0.2
        Roughly the seconds of timed calls spent on each size. A size whose single
        call already takes longer than this is timed from that one (warm-up) call.
    clock : {"wall", "cpu"}, default "wall"
        ``"wall"`` times with ``time.perf_counter``: what a user waits for, but on a
        machine shared with other busy processes long calls are stretched more than
        short ones, which bends the fitted slope upwards. ``"cpu"`` times with
        ``time.process_time``, which counts only the CPU time this process got, so
        other processes cannot stretch it; it suits single-threaded code such as pure
        Python algorithms, but it adds up every thread (multi-threaded NumPy) and
        leaves out waiting (I/O, sleep). Use it for grading on shared machines.

    Returns
    -------
    pandas.DataFrame
        One row per size, columns ``n``, ``seconds`` (per call) and ``ratio`` (seconds
        divided by the previous row's seconds; ``NaN`` in the first row). With doubled
        sizes a ratio near 2 suggests O(n), near 4 O(n^2), near 8 O(n^3).
        ``table.attrs["clock"]`` records the clock used.

    Examples
    --------
    >>> table = doubling(sorted, lambda n: list(range(n, 0, -1)), [1_000, 2_000], budget=0.01)
    >>> list(table.columns)
    ['n', 'seconds', 'ratio']
    >>> table["n"].tolist()
    [1000, 2000]
    >>> bool(table["ratio"].isna().iloc[0])
    True
    """
    _check_callable(fn, "fn")
    _check_callable(make_input, "make_input")
    sizes = _check_sizes(sizes)
    _check_budget(budget)
    if clock not in _CLOCKS:
        raise ValueError(f"clock must be 'wall' (perf_counter) or 'cpu' (process_time), got {clock!r}")
    # Looked up at call time, so tests can substitute a fake clock for the module's.
    timer = _perf_counter if clock == "wall" else _process_time
    seconds = _seconds_per_call(fn, [make_input(n) for n in sizes], budget, timer)
    table = pd.DataFrame({"n": sizes, "seconds": seconds})
    table["ratio"] = table["seconds"] / table["seconds"].shift(1)
    table.attrs["clock"] = clock
    return table


def exponent(
    table_or_fn: pd.DataFrame | Callable[[Any], Any],
    make_input: Callable[[int], Any] | None = None,
    sizes: Sequence[int] | None = None,
    budget: float = 0.2,
    *,
    clock: str = "wall",
) -> Fit:
    """Fit ``log10(seconds) = slope * log10(n) + intercept`` by least squares.

    Give either a table from :func:`doubling` (or any frame with columns ``n`` and
    ``seconds``), or ``fn, make_input, sizes`` to run :func:`doubling` first.

    The verdict names the nearest whole exponent: a slope below 0.5 reads
    ``"about O(1)"``, 0.5 to 1.5 ``"about O(n)"``, 1.5 to 2.5 ``"about O(n^2)"``, and so
    on. O(n log n) has no line of its own: over the sizes people time (n from 10^3 to
    10^6) ``n log n`` has a log-log slope of about 1.1, so it reads ``"about O(n)"``;
    a slope persistently a little above 1 is the hint. Constant factors, caches and
    overheads bend real curves, so read the verdict as evidence, not proof.

    Parameters
    ----------
    table_or_fn : DataFrame or callable
        A doubling table, or the function to time.
    make_input, sizes, budget, clock
        Passed to :func:`doubling` when ``table_or_fn`` is a function.

    Returns
    -------
    Fit
        ``slope``, ``intercept`` and ``verdict``.

    Examples
    --------
    >>> import pandas as pd
    >>> n = [1_000, 2_000, 4_000, 8_000]
    >>> fit = exponent(pd.DataFrame({"n": n, "seconds": [3e-9 * k**2 for k in n]}))
    >>> round(fit.slope, 6), fit.verdict
    (2.0, 'about O(n^2)')
    """
    if isinstance(table_or_fn, pd.DataFrame):
        if make_input is not None or sizes is not None:
            raise TypeError(
                "give either a doubling table or (fn, make_input, sizes), not both: "
                "a table already holds its measurements"
            )
        table = table_or_fn
    elif callable(table_or_fn):
        if make_input is None or sizes is None:
            raise TypeError(
                "to time a function, exponent needs make_input and sizes too, e.g. "
                "exponent(fn, lambda n: list(range(n)), [1_000, 2_000, 4_000])"
            )
        table = doubling(table_or_fn, make_input, sizes, budget, clock=clock)
    else:
        raise TypeError(
            "exponent expects a DataFrame from doubling() or a function to time, "
            f"got {type(table_or_fn).__name__}"
        )
    n, seconds = _check_table(table)
    slope, intercept = np.polyfit(np.log10(n), np.log10(seconds), 1)
    return Fit(slope=float(slope), intercept=float(intercept), verdict=_verdict(float(slope)))


def plot(table: pd.DataFrame, fit: Fit | None = None, ax: Any = None) -> Any:
    """Plot seconds against ``n`` on log-log axes with the fitted line.

    Parameters
    ----------
    table : DataFrame
        From :func:`doubling` (columns ``n`` and ``seconds``).
    fit : Fit, optional
        The line to draw; fitted from ``table`` when omitted.
    ax : matplotlib Axes, optional
        Axes to draw on; a new figure is made when omitted.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"n": [100, 200, 400], "seconds": [1e-3, 2e-3, 4e-3]})
    >>> ax = plot(t)
    >>> ax.get_xscale(), ax.get_yscale()
    ('log', 'log')
    """
    n, seconds = _check_table(table)
    if fit is None:
        fit = exponent(table)
    elif not isinstance(fit, Fit):
        raise TypeError(f"fit must be a Fit from exponent(), got {type(fit).__name__}")
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots()
    ax.loglog(n, seconds, "o", label="measured")
    # Draw the line a little past the measured sizes so its slope is easy to see.
    grid = np.geomspace(n.min() / 1.2, n.max() * 1.2, 50)
    ax.loglog(grid, fit.seconds(grid), "-", label=f"fitted slope {fit.slope:.2f} ({fit.verdict})")
    label_sizes(ax, n)
    ax.set_xlabel("input size n")
    ax.set_ylabel("seconds per call")
    ax.set_title("Doubling experiment (log-log)")
    ax.legend()
    return ax


def label_sizes(ax: Any, sizes: Sequence[Real] | np.ndarray | pd.Index) -> Any:
    """Label a logarithmic x-axis at the measured sizes, and nowhere else.

    Matplotlib labels the minor ticks of a log axis that spans only a decade or two,
    and their labels run into one another ("3x10^4x10^2"); its major ticks alone may
    leave one label ("10^3") on a doubling experiment's range. The sizes themselves,
    written as numbers, are what a reader looks for.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> _ = ax.loglog([250, 500, 1_000], [1, 2, 4])
    >>> _ = label_sizes(ax, [250, 500, 1_000])
    >>> [t.get_text() for t in ax.get_xticklabels()]
    ['250', '500', '1k']
    >>> plt.close(fig)
    """
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    values = sorted({float(v) for v in np.asarray(sizes, dtype=float).ravel()})
    if not values or min(values) <= 0:
        raise ValueError(f"sizes must be positive numbers, got {list(sizes)!r}")
    ax.xaxis.set_major_locator(FixedLocator(values))
    ax.set_xticklabels([_compact(v) for v in values])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    return ax


# --- private helpers -------------------------------------------------------------------


def _seconds_per_call(
    fn: Callable[[Any], Any], inputs: list[Any], budget: float, timer: Callable[[], float]
) -> list[float]:
    # A warm-up call per size pays one-off costs (caches, lazy imports, JIT compilation)
    # and tells roughly how long one call takes, which sets that size's loop count. The
    # budget is wall time whatever the clock: a call that waits costs little CPU time
    # but the user still waits for it.
    warmups = [_time_calls(fn, x, 1, timer) for x in inputs]
    first = [wall for wall, _ in warmups]
    rounds = [0 if t >= budget else max(1, min(_ROUNDS, int(budget / max(t, 1e-9)))) for t in first]
    loops = [max(1, int(budget / (r * max(t, 1e-9)))) if r else 1 for r, t in zip(rounds, first)]
    # A call that alone spends the budget is timed by its warm-up; repeating it only costs time.
    best = [measured if r == 0 else math.inf for r, (_, measured) in zip(rounds, warmups)]
    # Rounds go through the sizes in turn, so a burst of load from another process
    # slows every size a little instead of one size a lot; the fastest round is the
    # one least disturbed (timeit's advice), and the ratios compare like with like.
    for round_ in range(max(rounds)):
        for i, x in enumerate(inputs):
            if round_ < rounds[i]:
                _, measured = _time_calls(fn, x, loops[i], timer)
                best[i] = min(best[i], measured / loops[i])
    return best


def _time_calls(
    fn: Callable[[Any], Any], x: Any, loops: int, timer: Callable[[], float]
) -> tuple[float, float]:
    """Wall seconds (for the budget) and ``timer`` seconds (the measurement) of ``loops`` calls."""
    # Pause the garbage collector as timeit does: a collection triggered by earlier
    # allocations would otherwise land in whichever call happens to be running.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        wall_start, start = _perf_counter(), timer()
        for _ in range(loops):
            fn(x)
        measured, wall = timer() - start, _perf_counter() - wall_start
        return wall, measured
    finally:
        if gc_was_enabled:
            gc.enable()


def _verdict(slope: float) -> str:
    k = max(0, math.floor(slope + 0.5))  # nearest whole exponent; halves round up
    return _NAMES.get(k, f"about O(n^{k})")


def _check_callable(obj: Any, name: str) -> None:
    if not callable(obj):
        raise TypeError(f"{name} must be callable, got {type(obj).__name__}")


def _check_sizes(sizes: Sequence[int]) -> list[int]:
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
        raise TypeError(f"sizes must be a sequence of ints such as [1_000, 2_000, 4_000], got {sizes!r}")
    sizes = list(sizes)
    if len(sizes) < 2:
        raise ValueError(
            f"a doubling experiment needs at least two sizes to compare, got {sizes!r}"
        )
    for n in sizes:
        if isinstance(n, bool) or not isinstance(n, Integral):
            raise TypeError(f"sizes must be whole numbers, got {n!r}")
        if n <= 0:
            raise ValueError(f"sizes must be positive, got {n!r}")
    if any(b <= a for a, b in zip(sizes, sizes[1:])):
        raise ValueError(f"sizes must be strictly increasing, e.g. [1_000, 2_000, 4_000], got {sizes!r}")
    return [int(n) for n in sizes]


def _check_budget(budget: float) -> None:
    if isinstance(budget, bool) or not isinstance(budget, Real):
        raise TypeError(f"budget is a number of seconds, got {budget!r}")
    if not (budget > 0 and math.isfinite(budget)):
        raise ValueError(f"budget must be a positive, finite number of seconds, got {budget!r}")


def _check_table(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"expected a DataFrame from doubling(), got {type(table).__name__}")
    missing = {"n", "seconds"} - set(table.columns)
    if missing:
        raise ValueError(
            f"the table needs columns 'n' and 'seconds' (as doubling() returns); missing {sorted(missing)}"
        )
    n = table["n"].to_numpy(dtype=float)
    seconds = table["seconds"].to_numpy(dtype=float)
    if len(n) < 2:
        raise ValueError("fitting an exponent needs at least two sizes")
    if not (np.all(np.isfinite(n)) and np.all(n > 0)):
        raise ValueError("every n must be positive: a log-log fit takes log(n)")
    if not (np.all(np.isfinite(seconds)) and np.all(seconds > 0)):
        raise ValueError(
            "every time must be positive and finite: a log-log fit takes log(seconds); "
            "a zero time means the call was too quick to measure, so use larger sizes"
        )
    if len(np.unique(n)) < 2:
        raise ValueError("the sizes must differ: a line through one n has no slope")
    return n, seconds


def _compact(n: float) -> str:
    """A size as a short label: 250, 1k, 25k, 1.5M."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:g}{suffix}"
    return f"{n:g}"
