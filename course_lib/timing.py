"""Timing you can trust: stage timers, calibrated benchmarks and noise-robust comparisons.

Three tools, from coarse to fine:

``stages()``
    a :class:`Stopwatch` for the named stages of a job, with wall time
    (``perf_counter``) and CPU time (``process_time``) side by side, so you can
    see at a glance whether a stage computes or waits.
``bench(fn, *args)``
    how long one call takes: a calibrated loop count (as ``timeit`` chooses it),
    repeated rounds, and the median, IQR and minimum of the rounds.
``compare(baseline, candidate)``
    how many times faster ``candidate`` is than ``baseline``, measured so that
    the noise of a shared machine mostly cancels: the two sides run in
    interleaved rounds (A B, B A, A B, ...), every round gives one *paired*
    ratio, and the result is the median of those ratios with a
    distribution-free confidence interval.

All timing here reads the clocks captured when this module was imported
(``_perf_counter`` and ``_process_time``), so code that later replaces
``time.perf_counter`` cannot change a measurement; :func:`clock_tampered` says
whether someone tried.
"""

from __future__ import annotations

__all__ = [
    "Stopwatch",
    "stages",
    "BenchResult",
    "bench",
    "Comparison",
    "compare",
    "clock_tampered",
    "limit_threads",
    "thread_settings",
    "steady_allocator",
    "warm_heap",
    "environment",
    "format_environment",
]

import contextlib
import dataclasses
import datetime
import functools
import gc
import importlib.metadata
import itertools
import math
import os
import platform
import statistics
import sys
import time
import timeit
import types
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd

# Captured once, at import. Every measurement below reads these names, never
# ``time.perf_counter``, so a notebook (or a student's solution) that replaces the
# functions in the ``time`` module afterwards cannot speed up its own timings.
_perf_counter = time.perf_counter
_process_time = time.process_time

# Round counts for ``bench`` and ``compare``: enough rounds for a median and an
# interval to mean something, few enough that a large budget stays bounded.
_MIN_ROUNDS = 5
_MAX_ROUNDS = 200
_WALL_FACTOR = 2.0  # compare's rounds stop at this many times the budget in wall time

# ``bench`` aims each round at a tenth of its budget (so about ten rounds fit),
# but never longer than the 0.2 s that ``timeit.Timer.autorange`` aims for.
_BENCH_ROUND_SHARE = 0.1
_AUTORANGE_TARGET = 0.2
# compare's calibration reads a side's loop count twice, in case a one-off cost made the first
# reading slow. When the warm-up call already lasted this many times ``min_round``, one
# calibration call as slow makes the two readings (a one-off stall of one call, as a loaded
# machine gives, no longer fixes the count alone), and the second reading of a half-second
# reference was half a second of grading, in the kernel, in the verifier and in the
# student's own cells, for nothing.
_SURE_ROUNDS = 10

# Calibration aims this much above a round's minimum, so that the confirming round, as
# noisy as the first, still reaches it (see _calibrate).
_CALIBRATION_SPARE = 1.1

# Below this many seconds per call, ratios depend on caches, frequency scaling and
# the scheduler more than on the code: ``compare`` says so in ``Comparison.warning``.
_MICROSECOND_ZONE = 1e-3
_MICROSECOND_WARNING = "ratios of microsecond calls move under load; use larger inputs"


# ---------------------------------------------------------------------------
# Stage timing
# ---------------------------------------------------------------------------


class Stopwatch:
    """Wall and CPU seconds for the named stages of a job.

    Use :func:`stages` to make one, then time each stage with ``with sw(name):``.
    Timing the same name again adds to its total, so a stage inside a loop
    collects all its iterations. Stages do not nest: nested time would be counted
    twice and the shares would no longer add up to 1.

    Wall time minus CPU time is time spent waiting (for the disk, the network, a
    lock, ``sleep``). A stage whose CPU time is close to its wall time computes; a
    stage with little CPU time waits, and a faster algorithm will not help it.

    Examples
    --------
    >>> sw = stages()
    >>> with sw("load"):
    ...     rows = list(range(1000))
    >>> with sw("total"):
    ...     s = sum(rows)
    >>> list(sw.table().index), list(sw.table().columns)
    (['load', 'total'], ['seconds', 'cpu_seconds', 'share'])
    >>> round(float(sw.table()["share"].sum()), 6)
    1.0
    """

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}
        self._cpu_seconds: dict[str, float] = {}
        self._running: str | None = None

    def __call__(self, name: str) -> contextlib.AbstractContextManager[None]:
        """Time one stage: ``with sw("clean"): ...``."""
        if not isinstance(name, str):
            raise TypeError(
                f"a stage name must be a string such as 'load', got {type(name).__name__}"
            )
        if not name.strip():
            raise ValueError("a stage name must not be empty; call it e.g. 'load' or 'clean'")
        return self._stage(name)

    @property
    def seconds(self) -> dict[str, float]:
        """Wall seconds per stage, in the order the stages were first used."""
        return dict(self._seconds)

    @property
    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (all threads of this process) per stage."""
        return dict(self._cpu_seconds)

    @property
    def total(self) -> float:
        """Total wall seconds of all stages."""
        return math.fsum(self._seconds.values())

    def table(self) -> pd.DataFrame:
        """One row per stage: ``seconds``, ``cpu_seconds`` and ``share`` of the total wall time.

        The index is named ``stage`` and keeps the order of first use; there is no
        total row, so ``table["seconds"].sum()`` is the total.
        """
        total = self.total
        names = list(self._seconds)
        frame = pd.DataFrame(
            {
                "seconds": [self._seconds[n] for n in names],
                "cpu_seconds": [self._cpu_seconds[n] for n in names],
                "share": [self._seconds[n] / total if total > 0 else 0.0 for n in names],
            },
            index=pd.Index(names, name="stage", dtype=object),
            columns=["seconds", "cpu_seconds", "share"],
        )
        return frame

    def plot(self, ax: Any = None) -> Any:
        """Horizontal bar chart of wall seconds per stage, CPU seconds drawn inside.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Where to draw; a new figure is made when omitted.

        Returns
        -------
        matplotlib.axes.Axes
        """
        if ax is None:
            import matplotlib.pyplot as plt  # imported here: only plots need it

            _, ax = plt.subplots(figsize=(6, 0.5 + 0.4 * max(1, len(self._seconds))))
        names = list(self._seconds)
        positions = range(len(names))
        ax.barh(positions, [self._seconds[n] for n in names], height=0.7, label="wall")
        ax.barh(
            positions,
            [self._cpu_seconds[n] for n in names],
            height=0.3,
            color="black",
            alpha=0.6,
            label="CPU",
        )
        ax.set_yticks(list(positions), names)
        ax.invert_yaxis()  # first stage on top, the order the job runs in
        ax.set_xlabel("seconds")
        ax.set_title(f"Stage times (total {_fmt_seconds(self.total)} wall)")
        if names:
            ax.legend(loc="lower right")
        return ax

    def __repr__(self) -> str:
        parts = ", ".join(f"{n} {_fmt_seconds(s)}" for n, s in self._seconds.items())
        return f"Stopwatch({parts or 'no stages yet'}; total {_fmt_seconds(self.total)})"

    @contextlib.contextmanager
    def _stage(self, name: str) -> Iterator[None]:
        if self._running is not None:
            raise RuntimeError(
                f"stage {name!r} started inside stage {self._running!r}: stages do not nest, "
                "because nested time would be counted twice; time them one after another"
            )
        self._running = name
        wall0, cpu0 = _perf_counter(), _process_time()
        try:
            yield
        finally:
            # Recorded even when the stage raises, so a failing job still shows
            # where its time went.
            wall, cpu = _perf_counter() - wall0, _process_time() - cpu0
            self._seconds[name] = self._seconds.get(name, 0.0) + wall
            self._cpu_seconds[name] = self._cpu_seconds.get(name, 0.0) + cpu
            self._running = None


def stages() -> Stopwatch:
    """A new :class:`Stopwatch` for timing the named stages of a job.

    Examples
    --------
    >>> sw = stages()
    >>> for _ in range(3):
    ...     with sw("step"):
    ...         pass
    >>> list(sw.seconds)
    ['step']
    """
    return Stopwatch()


# ---------------------------------------------------------------------------
# bench: how long does one call take?
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, repr=False)
class BenchResult:
    """Seconds per call of one function, summarised over rounds.

    Attributes
    ----------
    median, iqr, minimum : float
        Median, interquartile range and minimum of the per-round seconds per call.
        The median is the typical cost; the minimum is the cost with the least
        interference; a large IQR means the machine was noisy.
    rounds : int
        Number of timed rounds.
    loops : int
        Calls per round.
    times : tuple of float
        Seconds per call in each round, in the order measured.
    """

    median: float
    iqr: float
    minimum: float
    rounds: int
    loops: int
    times: tuple[float, ...]

    def __repr__(self) -> str:
        return (
            f"BenchResult(median {_fmt_seconds(self.median)}/call, "
            f"IQR {_fmt_seconds(self.iqr)}, min {_fmt_seconds(self.minimum)}; "
            f"{self.rounds} rounds x {self.loops} loops)"
        )


def bench(fn: Callable[..., Any], *args: Any, budget: float = 1.0, **kwargs: Any) -> BenchResult:
    """Time ``fn(*args, **kwargs)``: calibrated loops, repeated rounds, robust summary.

    One untimed warm-up call comes first (so a JIT such as Numba compiles
    outside the measurement). The loop count is then chosen the way
    ``timeit.Timer.autorange`` chooses it (1, 2, 5, 10, 20, 50, ... calls until
    a round lasts long enough), except that a round aims at a tenth of
    ``budget`` (at most 0.2 s), so about ten rounds fit. Rounds continue while
    the next one still fits in ``budget``, with at least 5 and at most 200.
    The loops run through :class:`timeit.Timer`, which switches garbage
    collection off while timing and back on afterwards.

    Parameters
    ----------
    fn : callable
        The function to time.
    *args, **kwargs
        Passed to ``fn`` on every call.
    budget : float, default 1.0
        Seconds of timed rounds to spend (calibration and warm-up come on top;
        with slow calls the 5-round minimum can exceed it).

    Returns
    -------
    BenchResult

    Examples
    --------
    >>> r = bench(sorted, [3, 1, 2] * 100, budget=0.05)
    >>> r.minimum <= r.median and r.rounds >= 5 and r.loops >= 1
    True
    """
    _check_callable(fn, "fn")
    _check_positive(budget, "budget")
    steady_allocator()
    call = functools.partial(fn, *args, **kwargs) if (args or kwargs) else fn
    timer = timeit.Timer(call, timer=_perf_counter)
    call()  # warm-up, untimed
    loops, _ = _autorange(timer.timeit, min(_AUTORANGE_TARGET, budget * _BENCH_ROUND_SHARE))
    round_seconds = _run_rounds(lambda: timer.timeit(loops), budget, _MIN_ROUNDS)
    times = tuple(t / loops for t in round_seconds)
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return BenchResult(
        median=statistics.median(times),
        iqr=q3 - q1,
        minimum=min(times),
        rounds=len(times),
        loops=loops,
        times=times,
    )


# ---------------------------------------------------------------------------
# compare: how many times faster?
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, repr=False)
class Comparison:
    """The speed-up of ``candidate`` over ``baseline``, measured in paired rounds.

    Attributes
    ----------
    ratio : float
        Median over rounds of time(baseline) / time(candidate) per call; above 1
        means the candidate is faster.
    low, high : float
        Distribution-free confidence interval of that median.
    rounds : int
        Number of paired rounds.
    ratios : tuple of float
        The paired ratio of each round, in the order measured.
    baseline_seconds, candidate_seconds : float
        Median seconds per call of each side.
    loops_baseline, loops_candidate : int
        Calls per round of each side.
    budget : float
        The budget the comparison was given, in seconds.
    warning : str or None
        Set when the faster side takes under 1 ms per call.
    confidence : float
        Confidence level of ``low``/``high``.
    baseline_times, candidate_times : tuple of float
        Seconds per call of each side in each round.
    elapsed : float
        Wall seconds the whole comparison took: warm-up, calibration, input
        generation and checks included.
    """

    ratio: float
    low: float
    high: float
    rounds: int
    ratios: tuple[float, ...]
    baseline_seconds: float
    candidate_seconds: float
    loops_baseline: int
    loops_candidate: int
    budget: float
    warning: str | None = None
    confidence: float = 0.95
    baseline_times: tuple[float, ...] = ()
    candidate_times: tuple[float, ...] = ()
    elapsed: float = math.nan

    def table(self) -> pd.DataFrame:
        """One row per round: ``baseline_s``, ``candidate_s`` (seconds per call) and ``ratio``."""
        n = len(self.ratios)
        frame = pd.DataFrame(
            {
                "baseline_s": list(self.baseline_times) or [math.nan] * n,
                "candidate_s": list(self.candidate_times) or [math.nan] * n,
                "ratio": list(self.ratios),
            },
            index=pd.RangeIndex(1, n + 1, name="round"),
            columns=["baseline_s", "candidate_s", "ratio"],
        )
        return frame

    def __repr__(self) -> str:
        text = (
            f"Comparison(speed-up {_fmt_ratio(self.ratio)}x, "
            f"{self.confidence:.0%} CI [{_fmt_ratio(self.low)}, {_fmt_ratio(self.high)}], "
            f"{self.rounds} rounds; baseline {_fmt_seconds(self.baseline_seconds)}/call, "
            f"candidate {_fmt_seconds(self.candidate_seconds)}/call"
        )
        if self.warning:
            text += f"; warning: {self.warning}"
        return text + ")"


def compare(
    baseline: Callable[..., Any],
    candidate: Callable[..., Any],
    args: tuple[Any, ...] = (),
    make_args: Callable[[], tuple[Any, ...]] | None = None,
    budget: float = 1.0,
    *,
    kwargs: dict[str, Any] | None = None,
    check: Callable[[tuple[Any, ...], Any], Any] | None = None,
    warmup: int = 1,
    min_round: float = 0.02,
    confidence: float = 0.95,
) -> Comparison:
    """How many times faster ``candidate`` is than ``baseline``, robust to a noisy machine.

    What happens, in order:

    1. **Warm-up.** Each side is called ``warmup`` times, untimed, so that
       one-off costs (Numba compiling, caches filling, lazy imports) are never
       counted.
    2. **Calibration.** Each side gets its own loop count: the calls of a round
       too short to count tell how many would last ``min_round`` seconds (with
       10% to spare, at most ten times as many at a step), and the count stands
       once a round lasts that long twice in a row (so a first call that was
       slow for a one-off reason cannot fix the count too low). The
       faster side then gets more calls, so that its part of a round lasts about
       as long as the slower side's, as far as the budget allows: paired sides
       that last alike see the same changes in machine speed.
    3. **Interleaved rounds.** Round 1 times A then B, round 2 B then A, and so
       on. Each round yields one *paired* ratio, time(A)/time(B) per call, taken
       from two measurements a few milliseconds apart: if the machine gets slower
       for a while, both sides of the pair slow down together and the ratio
       hardly moves, and alternating the order cancels any advantage of going
       first or second. Rounds continue while the next one still fits in
       ``budget``, with at least 6 (the fewest that allow a 95% interval; more
       at higher ``confidence``) and at most 200.
    4. **Summary.** ``ratio`` is the median of the paired ratios, so a single
       disturbed round (a competitor process, a garbage collection, a page
       fault) can never decide the result. ``low``/``high`` is a
       distribution-free confidence interval of that median, from binomial order
       statistics: it assumes nothing about the shape of the noise.

    Garbage collection is off inside every timed loop, as in ``timeit``. With
    ``make_args`` the inputs of a round are generated before its loop starts,
    and with ``check`` the results are kept in a preallocated list and checked
    after the loop ends, so neither costs timed time.

    Parameters
    ----------
    baseline, candidate : callable
        The reference and the contender; both are called as ``fn(*args, **kwargs)``.
    args : tuple, default ()
        Positional arguments, the same objects for every call.
    make_args : callable, optional
        Zero-argument function returning a tuple of positional arguments. It is
        called once for *every* call of either side (warm-up and calibration
        included), so no call ever sees an input seen before and caching results
        cannot help. Its own time is not measured but does come on top of
        ``budget`` (up to the wall limit described there). Cannot be combined with ``args``.
    budget : float, default 1.0
        Seconds of timed rounds to spend. Rounds also stop (after the first 6)
        once the rounds' wall time, with inputs made and results checked,
        reaches twice ``budget``.
    kwargs : dict, optional
        Keyword arguments for every call.
    check : callable, optional
        ``check(args_tuple, result)`` is called on every candidate result
        (warm-up and calibration included), outside the timed region; an
        exception it raises propagates, so an ``assert`` inside stops the
        comparison.
    warmup : int, default 1
        Untimed calls of each side before calibration.
    min_round : float, default 0.02
        Minimum seconds of one side's part of a round.
    confidence : float, default 0.95
        Confidence level of the interval ``low``/``high``.

    Returns
    -------
    Comparison

    Notes
    -----
    When the faster side takes under 1 ms per call, ``warning`` is set: the
    ratio then depends on caches, CPU frequency, and thread pools competing for
    cores, which a loaded machine changes; the paired median still protects
    against single bad rounds, but it cannot make the true ratio under load equal
    the ratio on a quiet machine. Larger inputs fix that.

    Examples
    --------
    >>> data = list(range(2000))
    >>> c = compare(sorted, sorted, args=(data,), budget=0.02, min_round=0.002)
    >>> c.rounds >= 6 and c.low <= c.ratio <= c.high
    True
    >>> list(c.table().columns)
    ['baseline_s', 'candidate_s', 'ratio']
    """
    started = _perf_counter()
    _check_callable(baseline, "baseline")
    _check_callable(candidate, "candidate")
    steady_allocator()
    if not isinstance(args, (tuple, list)):
        raise TypeError(
            f"args must be a tuple of positional arguments, got {type(args).__name__}; "
            "for a single argument write args=(x,)"
        )
    if make_args is not None:
        if len(args) > 0:
            raise ValueError(
                "give either args (the same inputs for every call) or make_args "
                "(fresh inputs for every call), not both"
            )
        _check_callable(make_args, "make_args")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"kwargs must be a dict of keyword arguments, got {type(kwargs).__name__}")
    if check is not None:
        _check_callable(check, "check")
    _check_positive(budget, "budget")
    _check_positive(min_round, "min_round")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a whole number of calls >= 0, got {warmup!r}")
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise ValueError(f"confidence must be strictly between 0 and 1, e.g. 0.95, got {confidence!r}")

    # Results are kept (and checked after the loop) only when there is a check;
    # both sides then run the same loop, so the bookkeeping costs them alike.
    keep = check is not None
    fixed = tuple(args)
    sides = (
        _Side(baseline, fixed, make_args, kwargs or {}, keep, check=None),
        _Side(candidate, fixed, make_args, kwargs or {}, keep, check=check),
    )
    # Memory either side frees stays mapped (see warm_heap): what a call costs
    # then does not depend on what this process happened to do before.
    with warm_heap():
        sure = []
        for side in sides:
            # A side whose warm-up calls each lasted _SURE_ROUNDS rounds' minimum needs one
            # calibration reading as slow, not two: the warm-up was the first of the two.
            slow = bool(warmup) and side.run(warmup) / warmup >= _SURE_ROUNDS * min_round
            sure.append(_SURE_ROUNDS * min_round if slow else math.inf)
        calibrated = [_calibrate(side.run, min_round, sure_above=above)
                      for side, above in zip(sides, sure)]
        min_rounds = _min_rounds(confidence)
        loops = _balance([n for n, _ in calibrated], [t for _, t in calibrated], budget, min_rounds)

        base_t: list[float] = []
        cand_t: list[float] = []

        def one_round() -> float:
            # Even rounds go A B, odd rounds B A: the order advantage cancels.
            order = (0, 1) if len(base_t) % 2 == 0 else (1, 0)
            spent = {i: sides[i].run(loops[i]) for i in order}
            base_t.append(spent[0] / loops[0])
            cand_t.append(spent[1] / loops[1])
            return spent[0] + spent[1]

        # Fresh inputs and checked results cost wall time the budget does not count; when
        # they dominate (a 0.2 ms call whose input takes 1 ms to draw) the rounds would
        # take many times the budget. Past the minimum, rounds also stop at twice it.
        _run_rounds(one_round, budget, min_rounds, wall_limit=_WALL_FACTOR * budget)
    return _summary(base_t, cand_t, loops, budget, confidence, started)


def _summary(base_t: list[float] | tuple[float, ...], cand_t: list[float] | tuple[float, ...],
             loops: tuple[int, int] | list[int], budget: float, confidence: float,
             started: float) -> Comparison:
    """The :class:`Comparison` of paired rounds' seconds per call (shared with the grader's
    verifier, which times a student's side in another process)."""
    ratios = tuple(b / c if c > 0 else math.inf for b, c in zip(base_t, cand_t))
    low, ratio, high = _median_ci(ratios, confidence)
    base_s, cand_s = statistics.median(base_t), statistics.median(cand_t)
    warning = None
    if min(base_s, cand_s) < _MICROSECOND_ZONE:
        warning = (
            f"the faster side takes {_fmt_seconds(min(base_s, cand_s))} per call (under 1 ms): "
            + _MICROSECOND_WARNING
        )
    return Comparison(
        ratio=ratio,
        low=low,
        high=high,
        rounds=len(ratios),
        ratios=ratios,
        baseline_seconds=base_s,
        candidate_seconds=cand_s,
        loops_baseline=loops[0],
        loops_candidate=loops[1],
        budget=float(budget),
        warning=warning,
        confidence=float(confidence),
        baseline_times=tuple(base_t),
        candidate_times=tuple(cand_t),
        elapsed=_perf_counter() - started,
    )


# ---------------------------------------------------------------------------
# Clocks and environment
# ---------------------------------------------------------------------------


def clock_tampered() -> bool:
    """True if the clocks are no longer the genuine ones captured at import.

    That is: ``time.perf_counter`` or ``time.process_time`` has been replaced
    since this module was imported, or the captured clocks themselves are not
    the C functions of the ``time`` module (replaced before the import, or
    ``course_lib.timing._perf_counter`` overwritten).

    Examples
    --------
    >>> clock_tampered()
    False
    """
    return not (
        time.perf_counter is _perf_counter
        and time.process_time is _process_time
        and _is_time_builtin(_perf_counter, "perf_counter")
        and _is_time_builtin(_process_time, "process_time")
    )


@contextlib.contextmanager
def limit_threads(threads: int = 1) -> Iterator[int]:
    """Run a block with BLAS/OpenMP pools and Numba's pool set to ``threads`` threads.

    A timing that lets the pools choose measures the neighbours: on a 2-core machine
    with one other busy process, ``np.dot`` of 200,000 floats took 5.3 ms with
    OpenBLAS's two threads and 0.18 ms with one, because the second thread waits for a
    core the neighbour holds. Every timed comparison in this course therefore sets the
    pools, the same for both sides. ``threads`` is capped at the cores this process
    may run on; the block receives the number actually set. Numba is only touched if
    it is already imported (importing it costs half a second).

    Parameters
    ----------
    threads : int, default 1
        Threads for BLAS, OpenMP and Numba's parallel regions.

    Examples
    --------
    >>> import numpy as np
    >>> with limit_threads(1) as n:
    ...     _ = np.ones(1000) @ np.ones(1000)
    >>> n
    1
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a whole number >= 1, got {threads!r}")
    from threadpoolctl import threadpool_limits

    threads = min(threads, _available_cores())
    numba = sys.modules.get("numba")
    before = None
    if numba is not None:
        # First: asking Numba launches its threading layer, which may load an OpenMP
        # runtime (libgomp), and threadpoolctl limits only the libraries loaded when it starts.
        with contextlib.suppress(Exception):  # no threading layer: nothing to limit
            before = numba.get_num_threads()
    with threadpool_limits(limits=threads):
        if before is not None:
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        try:
            yield threads
        finally:
            if before is not None:
                numba.set_num_threads(before)


def thread_settings() -> str:
    """The thread pools as they are now, in a few words, for a report beside a figure.

    Examples
    --------
    >>> with limit_threads(1):
    ...     "1 thread" in thread_settings()
    True
    """
    import threadpoolctl

    pools = sorted({(p.get("user_api", "?"), p.get("num_threads")) for p in threadpoolctl.threadpool_info()})
    parts = [f"{api} {n} thread{'s' if n != 1 else ''}" for api, n in pools]
    numba = sys.modules.get("numba")
    if numba is not None:
        with contextlib.suppress(Exception):
            n = numba.get_num_threads()
            parts.append(f"numba {n} thread{'s' if n != 1 else ''}")
    return ", ".join(parts) or "no thread pools loaded"


def _available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def environment() -> dict[str, Any]:
    """The context a benchmark figure needs next to it.

    Returns
    -------
    dict
        ``cpu`` (model name), ``cores`` (dict: ``logical`` as ``os.cpu_count``
        sees them, ``available`` to this process, ``physical`` when known),
        ``python``, ``platform``, ``versions`` (dict of library versions, None
        when not installed), ``blas`` (list of dicts from
        ``threadpoolctl.threadpool_info()``: library, version, threads),
        ``load_average`` (1, 5 and 15 minute load, or None where the system
        does not report it), ``clock_tampered`` and ``timestamp`` (UTC, ISO 8601).

    Examples
    --------
    >>> env = environment()
    >>> sorted(k for k in env if k in {"cpu", "cores", "blas"})
    ['blas', 'cores', 'cpu']
    """
    # NumPy must be imported for threadpoolctl to see the BLAS it loads.
    import numpy  # noqa: F401
    import threadpoolctl

    return {
        "cpu": _cpu_model(),
        "cores": _cores(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "versions": {name: _version(name) for name in _LIBRARIES},
        "blas": [dict(info) for info in threadpoolctl.threadpool_info()],
        "load_average": _load_average(),
        "clock_tampered": clock_tampered(),
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def format_environment(env: dict[str, Any] | None = None) -> str:
    """:func:`environment` as readable lines, for the top of a benchmark report.

    Parameters
    ----------
    env : dict, optional
        A dict from :func:`environment`; measured now when omitted.

    Examples
    --------
    >>> text = format_environment()
    >>> text.splitlines()[0].startswith("CPU: "), "Load average" in text
    (True, True)
    """
    env = environment() if env is None else env
    cores = env.get("cores") or {}
    if isinstance(cores, dict):
        core_text = f"{cores.get('logical')} logical, {cores.get('available')} available to this process"
        if cores.get("physical"):
            core_text += f", {cores['physical']} physical"
    else:
        core_text = str(cores)
    versions = env.get("versions") or {}
    version_text = ", ".join(f"{k} {v}" for k, v in versions.items() if v) or "unknown"
    blas = env.get("blas") or []
    blas_text = "; ".join(_pool_text(b) for b in blas) or "none loaded"
    load = env.get("load_average")
    load_text = (
        ", ".join(f"{x:.2f}" for x in load) + " (1, 5, 15 min)" if load else "not available"
    )
    lines = [
        f"CPU: {env.get('cpu', 'unknown')}",
        f"Cores: {core_text}",
        f"Python: {env.get('python', 'unknown')}",
        f"Platform: {env.get('platform', 'unknown')}",
        f"Versions: {version_text}",
        f"BLAS: {blas_text}",
        f"Load average: {load_text}",
    ]
    if env.get("clock_tampered"):
        lines.append("Clocks: TAMPERED (time.perf_counter or time.process_time was replaced)")
    lines.append(f"Recorded: {env.get('timestamp', 'unknown')}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Private helpers
# ---------------------------------------------------------------------------

def _pool_text(pool: dict[str, Any]) -> str:
    """One thread pool as "openblas 0.3.27 (blas, 1 thread)": no version when unknown."""
    name = pool.get("internal_api", "?")
    version = pool.get("version")
    threads = pool.get("num_threads", "?")
    unit = "thread" if threads == 1 else "threads"
    label = f"{name} {version}" if version is not None else name
    return f"{label} ({pool.get('user_api', '?')}, {threads} {unit})"


_LIBRARIES = ("numpy", "pandas", "numba", "matplotlib", "threadpoolctl", "line_profiler", "dask",
              "course_lib")


class _Side:
    """One side of a comparison: a function, where its inputs come from, and its check."""

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        make_args: Callable[[], tuple[Any, ...]] | None,
        kwargs: dict[str, Any],
        keep: bool,
        check: Callable[[tuple[Any, ...], Any], Any] | None,
    ) -> None:
        # partial is a C-level wrapper: cheaper per call than a lambda, and the same
        # for both sides, so it cannot tilt the ratio.
        self.fn = functools.partial(fn, **kwargs) if kwargs else fn
        self.call = functools.partial(fn, *args, **kwargs) if (args or kwargs) else fn
        self.args = args
        self.make_args = make_args
        self.keep = keep
        self.check = check

    def run(self, n: int) -> float:
        """Call the function ``n`` times; return the seconds the calls took, and only those."""
        arg_list = None
        if self.make_args is not None:
            arg_list = [self._fresh_args() for _ in range(n)]  # before the clock starts
        results: list[Any] | None = [None] * n if self.keep else None
        seconds = _timed_loop(self.fn, self.call, arg_list, n, results)
        if self.check is not None and results is not None:
            for i, result in enumerate(results):
                self.check(arg_list[i] if arg_list is not None else self.args, result)
        return seconds

    def _fresh_args(self) -> tuple[Any, ...]:
        made = self.make_args()  # type: ignore[misc]
        if not isinstance(made, tuple):
            raise TypeError(
                f"make_args must return a tuple of positional arguments, got "
                f"{type(made).__name__}; for a single argument return (x,), not x"
            )
        return made


# glibc's malloc decides from what a process freed before whether a large block comes
# from mmap or the heap, and when to hand heap memory back; so a NumPy temporary of a
# few MB costs fresh page faults on every call in one process and none in another. Here
# ``np.sqrt(x * x + 1.0).sum()`` over 250,000 floats took 1.6 ms a call in one process
# and 0.7 ms in another that had once freed a 24 MB buffer: a 2x difference in a
# measured ratio that was the processes' history, not the code. Every process that
# measures (compare, bench, the grader's worker and reference) fixes both thresholds.
_MMAP_THRESHOLD = 32 * 2**20  # the largest value glibc's own adaptation reaches on 64-bit
_TRIM_THRESHOLD = 2 * _MMAP_THRESHOLD  # the ratio glibc's adaptation keeps
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # from <malloc.h>
# Filled once, never rebound: course_lib.grading snapshots this module's names and calls a
# rebound one tampering.
_ALLOCATOR: dict[str, bool] = {}


def steady_allocator() -> bool:
    """Fix glibc's malloc thresholds in this process, so timings do not depend on its past.

    Large blocks (up to 32 MiB) then always come from the heap, and the heap is trimmed
    only when 64 MiB are free at its top: what a long-running process settles into. Done
    once per process; returns whether it could be done (glibc only; elsewhere nothing
    changes and ``False`` comes back).

    Examples
    --------
    >>> steady_allocator() in (True, False)
    True
    """
    if "steady" not in _ALLOCATOR:
        try:
            import ctypes

            mallopt = ctypes.CDLL(None).mallopt
            _ALLOCATOR["steady"] = bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(
                mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
        except (OSError, AttributeError):  # not glibc (musl, macOS, Windows)
            _ALLOCATOR["steady"] = False
    return _ALLOCATOR["steady"]


_WARM_HEAP_MIB = 64  # Python objects a reference like sum over x.tolist() for 1M floats churns per call
_FILLER = 400  # bytes of a filler object: 433 with its header, in one of pymalloc's largest size classes
_PIN_EVERY = 1000  # about two fillers kept in each 1 MiB arena (some 2,300 fit in one)
_NO_TRIM = 2**31 - 1  # the largest threshold mallopt takes (a C int): 2 GiB free at the top


@contextlib.contextmanager
def warm_heap(mib: int = _WARM_HEAP_MIB) -> Iterator[None]:
    """Keep the memory this process frees mapped in while the block runs.

    What a call costs should not depend on what the process did before it, yet two
    kinds of freed memory go back to the system, to be faulted in again page by page
    on the next call:

    - CPython takes small objects (floats, ints, tuples) from 1 MiB arenas and unmaps an
      arena as soon as it is empty: ``x.tolist()`` of 250,000 floats is 6 MB of them,
      3,500 page faults per call (measured: 19.6 ms per call against 16.3 ms in a
      process whose history kept its arenas). The block fills ``mib`` MiB of arenas and
      keeps a few objects in each, so they stay mapped.
    - glibc trims the top of its heap once enough is free there: freeing a batch of
      64 MB of inputs gave back the pages the next call's list then faulted in again
      (780 faults per call of 3 MB). The block turns trimming off (glibc only) and puts
      :func:`steady_allocator`'s threshold back after.

    The memory stays resident while the block runs and is given back after it.

    Examples
    --------
    >>> with warm_heap(1):
    ...     total = sum(float(i) for i in range(1000))
    >>> total
    499500.0
    """
    if isinstance(mib, bool) or not isinstance(mib, int) or mib < 0:
        raise ValueError(f"mib must be a whole number of MiB >= 0, got {mib!r}")
    trimming = _set_trim_threshold(_NO_TRIM) if steady_allocator() else False
    fillers = [bytes(_FILLER) for _ in range(mib * 2**20 // (_FILLER + 48))]
    held = fillers[::_PIN_EVERY]  # the rest go now: their pools are free for any object size
    del fillers
    try:
        yield
    finally:
        del held
        if trimming:
            _set_trim_threshold(_TRIM_THRESHOLD)


def _set_trim_threshold(nbytes: int) -> bool:
    try:
        import ctypes

        return bool(ctypes.CDLL(None).mallopt(_M_TRIM_THRESHOLD, nbytes))
    except (OSError, AttributeError):
        return False


def _trim_heap() -> bool:
    """Hand the allocator's free pages back to the system now; whether it could (glibc only)."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        return False
    return True


def _timed_loop(
    fn: Callable[..., Any],
    call: Callable[[], Any],
    arg_list: list[tuple[Any, ...]] | None,
    n: int,
    results: list[Any] | None,
) -> float:
    """The timed region: nothing but the calls (and, with a check, storing results)."""
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: a collection triggered by one side would bill it
    try:
        if arg_list is None and results is None:
            t0 = _perf_counter()
            for _ in itertools.repeat(None, n):
                call()
            t1 = _perf_counter()
        elif arg_list is None:
            t0 = _perf_counter()
            for i in range(n):
                results[i] = call()  # type: ignore[index]
            t1 = _perf_counter()
        elif results is None:
            t0 = _perf_counter()
            for a in arg_list:
                fn(*a)
            t1 = _perf_counter()
        else:
            t0 = _perf_counter()
            for i, a in enumerate(arg_list):
                results[i] = fn(*a)
            t1 = _perf_counter()
    finally:
        if gc_was_enabled:
            gc.enable()
    return t1 - t0


def _autorange(run: Callable[[int], float], target: float) -> tuple[int, float]:
    """Smallest of 1, 2, 5, 10, 20, 50, ... calls whose round lasts ``target`` seconds.

    Returns the count and the seconds per call of its round, as
    ``timeit.Timer.autorange`` does (:func:`bench`; :func:`compare` uses :func:`_calibrate`).

    >>> calls = []
    >>> _autorange(lambda n: calls.append(n) or n * 0.003, 0.02), calls
    ((10, 0.003), [1, 2, 5, 10])
    """
    for power in itertools.count():
        for step in (1, 2, 5):
            n = step * 10**power
            seconds = run(n)
            if seconds >= target:
                return n, seconds / n
    raise AssertionError("unreachable")  # pragma: no cover


def _calibrate(run: Callable[[int], float], target: float, sure_above: float = math.inf) -> tuple[int, float]:
    """The fewest calls whose round lasts ``target`` seconds, twice in a row: count and seconds per call.

    A round that falls short says how many calls would reach the target, and the next
    round tries that many with 10% to spare (at most ten times the last count). The
    1-2-5 steps of ``timeit.Timer.autorange`` (kept by :func:`bench`) overshoot by up to
    2.5 times, and with ``make_args`` every call of a round costs a fresh input: a 1 ms
    kernel whose 20 calls lasted 19.8 ms got 50 calls a round, and its comparison with
    a Python loop on fresh million-element inputs took 8.3-10.3 s; calibrated so, 23-24
    calls and 4.3-4.5 s, the same ratio (median of 6 rounds, 108-110x either way). A single
    call lasting ``sure_above`` seconds or more is taken at once (see ``_SURE_ROUNDS``).

    >>> calls = []
    >>> _calibrate(lambda n: calls.append(n) or n * 0.001, 0.02), calls
    ((22, 0.001), [1, 10, 22, 22])
    """
    n = 1
    while True:
        seconds = run(n)
        if seconds >= target and not (n == 1 and seconds >= sure_above):
            seconds = run(n)  # confirmed by a second reading: a one-off slow round fixes nothing
        if seconds >= target:
            return n, seconds / n
        # (- 1e-9): 10 * 0.02 * 1.1 / 0.01 is 22.000000000000004 in floating point
        wanted = math.ceil(n * target * _CALIBRATION_SPARE / seconds - 1e-9) if seconds > 0 else 10 * n
        n = max(n + 1, min(10 * n, wanted))


def _balance(loops: list[int], per_call: list[float], budget: float, min_rounds: int) -> list[int]:
    """More calls for the faster side, so that both sides of a round last about as long.

    Paired ratios cancel a change in machine speed only if both sides see it:
    when one side's part of a round lasts 100 ms and the other's 20 ms, the
    short part samples a much narrower window of a fluctuating machine. The
    faster side's part is stretched towards the slower side's, but only as far
    as ``min_rounds`` rounds still fit in ``budget``.
    """
    parts = [n * t for n, t in zip(loops, per_call)]
    slow = max(parts)
    target = min(slow, budget / min_rounds - slow)
    # (1 + 1e-9): 0.03 / 0.001 is 29.999999999999996 in floating point
    return [max(n, int(target / t * (1 + 1e-9))) if t > 0 else n for n, t in zip(loops, per_call)]


def _run_rounds(
    one_round: Callable[[], float], budget: float, min_rounds: int, wall_limit: float = math.inf
) -> list[float]:
    """Run rounds while the next one (estimated by the last) still fits in ``budget``.

    At least ``min_rounds`` and at most ``_MAX_ROUNDS``; returns the timed seconds
    of each round. Past ``min_rounds`` the rounds also stop once their wall time
    (timed calls plus whatever each round does untimed) would pass ``wall_limit``.
    """
    spent: list[float] = []
    total = 0.0
    started = _perf_counter()
    last_wall = 0.0
    while len(spent) < _MAX_ROUNDS:
        if len(spent) >= min_rounds and (
            total + spent[-1] > budget or _perf_counter() - started + last_wall > wall_limit
        ):
            break
        round_started = _perf_counter()
        seconds = one_round()
        last_wall = _perf_counter() - round_started
        spent.append(seconds)
        total += seconds
    return spent


def _min_rounds(confidence: float) -> int:
    """Fewest rounds for which [min, max] covers the median with ``confidence``."""
    n = _MIN_ROUNDS
    while 1 - 2 * 0.5**n < confidence:
        n += 1
    return n


def _median_ci(values: tuple[float, ...] | list[float], confidence: float) -> tuple[float, float, float]:
    """(low, median, high): the median and a distribution-free interval for it.

    The count of values below the true median is Binomial(n, 1/2) whatever the
    distribution, so the interval between the k-th smallest and the k-th largest
    value covers the median with probability 1 - 2 P(Binomial(n, 1/2) <= k - 1).
    We take the largest k that keeps that probability at least ``confidence``;
    with too few values for that, the interval is [min, max].
    """
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("need at least one value for a median")
    tail = (1 - confidence) / 2 * 2**n  # allowed mass of each tail, in units of 2**-n
    k, cumulative = 0, 0
    for j in range(n):
        cumulative += math.comb(n, j)
        if cumulative > tail:
            break
        k = j + 1
    k = max(k, 1)
    return xs[k - 1], statistics.median(xs), xs[n - k]


def _check_callable(obj: Any, name: str) -> None:
    if not callable(obj):
        raise TypeError(
            f"{name} must be a function (pass the function itself, e.g. compare(slow, fast), "
            f"not the result of calling it), got {type(obj).__name__}"
        )


def _check_positive(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")


def _is_time_builtin(fn: Any, name: str) -> bool:
    return (
        type(fn) is types.BuiltinFunctionType
        and fn.__name__ == name
        and getattr(getattr(fn, "__self__", None), "__name__", None) == "time"
    )


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def _cores() -> dict[str, int | None]:
    available = None
    if hasattr(os, "sched_getaffinity"):
        available = len(os.sched_getaffinity(0))
    physical = None
    with contextlib.suppress(Exception):
        import psutil  # optional: only it knows physical cores portably

        physical = psutil.cpu_count(logical=False)
    return {"logical": os.cpu_count(), "available": available or os.cpu_count(), "physical": physical}


def _load_average() -> tuple[float, float, float] | None:
    try:
        return tuple(round(x, 2) for x in os.getloadavg())  # type: ignore[return-value]
    except (AttributeError, OSError):
        return None


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _fmt_seconds(seconds: float) -> str:
    """3 significant figures with a unit a person reads at a glance: 84.0 us, 3.10 ms."""
    if not math.isfinite(seconds):
        return str(seconds)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{_sig3(seconds / scale)} {unit}"
    return f"{_sig3(seconds / 1e-9)} ns"


def _fmt_ratio(ratio: float) -> str:
    """A ratio to about three figures; below 0.1, two significant digits, never ``0.00``.

    >>> _fmt_ratio(30.27), _fmt_ratio(0.483), _fmt_ratio(0.057), _fmt_ratio(9.7e-05)
    ('30.3', '0.48', '0.057', '0.000097')
    """
    if math.isfinite(ratio) and 0 < abs(ratio) < 0.1:
        # 1 / 10,000 read "0.00x": a loss that large must show its size.
        return f"{ratio:.{1 - math.floor(math.log10(abs(ratio)))}f}"
    return _sig3(ratio) if math.isfinite(ratio) else str(ratio)


def _sig3(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"
