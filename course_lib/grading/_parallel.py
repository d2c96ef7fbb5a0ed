"""Parallel work: :func:`parallel_points`, and the parts the out-of-kernel verifier shares with it.

The candidate on ``workers`` workers is timed against itself on one, each call's time less
the least any of its working threads waited for a core (sampled from ``/proc`` by
:mod:`course_lib._concurrency`). :mod:`course_lib.grader._remote_parallel` times the same
rounds in the student's worker, with the settings, rounds, result checks and verdict
defined here.
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
from collections.abc import Callable
from typing import Any

from course_lib._numba_report import prange_loops
from course_lib.grading._checks import (
    _call_candidate, _check_number, _cores_text, _fmt_ratio, _fmt_seconds, _fresh_args, _grading_session,
)
from course_lib.grading._errors import GradingError, UnreliableMeasurement
from course_lib.grading._speed import _SETTLED_ROUNDS, _Decision, _median_interval, _points_for, _quick
from course_lib.grading._state import (
    _available_cores, _deepcopy, _ExternalSampler, _limit_threads, _perf_counter, _raise_if_tampered,
    _sampling_available, _thread_settings,
)
from course_lib.grading._values import _describe_signature, _EXACT, _problem, _signature, _Tolerance, _tolerance

# The public name, then what preview and the verifier's twin (grader._remote_parallel) use from here.
__all__ = [
    "parallel_points", "_check_identical", "_check_parallel_result", "_measure_parallel",
    "_NoParallelPoints", "_parallel_points_for", "_parallel_result", "_parallel_rounds",
    "_parallel_settings", "_ParallelRound", "_raise_if_hopeless", "_require_prange",
]


def parallel_points(
    candidate: Callable[..., Any],
    reference: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    workers: int,
    full_at: float,
    zero_at: float,
    points: float,
    budget: float = 2.0,
    *,
    within: float = 1.1,
    min_concurrency: float = 1.25,
    rtol: float = 1e-9,
    atol: float = 0.0,
    margin: float = 0.1,
    min_call_seconds: float = 0.02,
    checks: int = 3,
    compiled: Any = None,
) -> float:
    """Partial credit for parallel work: ``candidate`` on ``workers`` workers against itself on one.

    ``candidate(*args, w)`` is called with the worker count as its last argument. The
    parallel speed-up is the time of ``candidate(*args, 1)`` over the time of
    ``candidate(*args, workers)``: the student's own serial run is the yardstick, so
    the array code is not counted twice. ``reference(*args)`` is the grader's serial
    version, for the results and as a bound on the yardstick.

    1. **Correctness first.** On ``checks`` fresh inputs the one-worker result must
       agree with ``reference`` (``rtol``, ``atol``) and the result on ``workers``
       workers must be *identical* to it: a parallel version that depends on the worker
       count, or on timing, is wrong.
    2. **Measurement.** Interleaved rounds, one call of each side per round (reference,
       one worker, ``workers`` workers; the order alternates), each on a fresh input (the
       reference and the one-worker run share theirs), every result checked. BLAS, OpenMP
       and Numba pools get ``workers`` threads on every side. While each call runs, every
       thread and child process it has is sampled from ``/proc`` (see
       :mod:`course_lib._concurrency`): its CPU time and the time it waited for a core.
       A call's time is its wall time less the least any of its working threads waited,
       so a busy neighbour who holds a core is charged to neither side.
    3. **Verdict.** Per round, ``min(one, within * reference) / parallel``: slowing the
       one-worker run down past ``within`` times the reference earns nothing. The
       speed-up is the median over the rounds; credit is linear in its log between
       ``zero_at`` and ``full_at``, each lowered by ``margin`` (as in
       :func:`speedup_points`).
    4. **Concurrency.** The parallel calls must have had more than one worker at work at
       once: at least ``min_concurrency`` threads or processes running or ready to run
       on average (median over the rounds). Tasks run one after another, or one thread
       that works while others wait, score 0 with a message.
    5. **Numba's own report**, when ``compiled`` names the Numba function whose ``prange``
       loop does the work: its compiled versions must hold a parallel region made from a
       ``prange`` loop (:func:`course_lib._numba_report.prange_loops`). A thread that only
       burns CPU beside a serial kernel passes the count of step 4, not this, and its
       speed-up stays near 1x, which the thresholds should leave without points.

    ``workers`` must be at least 2 and at most the cores this process may use (its CPU
    affinity); otherwise the measurement is refused (:class:`UnreliableMeasurement`):
    a grading worker given one core cannot grade parallel work.

    Parameters
    ----------
    candidate : callable
        The submission, called as ``candidate(*make_args(), w)``.
    reference : callable
        The grader's serial version, called as ``reference(*make_args())``.
    make_args : callable
        Fresh random inputs on every call, as for :func:`assert_speedup`.
    workers : int
        Workers for the parallel side, and threads for the pools of every side.
    full_at, zero_at, points : float
        As for :func:`speedup_points`, for the parallel speed-up.
    budget : float, default 2.0
        Seconds of timed calls (at least 9 rounds, or 6 once both ends of the median's
        interval earn the same grade, all points or none).
    within : float, default 1.1
        The one-worker time counts at most this many times the reference's.
    min_concurrency : float, default 1.25
        Working threads or processes running or ready to run, on average, needed.
    rtol, atol : float
        Tolerances of the one-worker result against the reference's.
    margin : float, default 0.1
        Share of the thresholds forgiven for measurement noise.
    min_call_seconds : float, default 0.02
        Refuse configurations in which a parallel call at ``full_at`` would take less
        (its threads must be sampled several times).
    checks : int, default 3
        Fresh inputs checked before timing (at least 2).
    compiled : Numba function, optional
        The kernel whose ``prange`` loop must have been made parallel by Numba.

    Returns
    -------
    float
        Points earned, between 0 and ``points``.

    Raises
    ------
    GradingError
        A wrong or worker-dependent result, an exception, no concurrency, or (with
        ``compiled``) no parallel ``prange`` loop in Numba's report.
    UnreliableMeasurement
        Fewer than 2 or more than the available cores, calls too short to sample, or a
        system without per-thread accounts.

    Examples
    --------
    With one core to grade on there is nothing to measure:

    >>> import os
    >>> if hasattr(os, "sched_setaffinity"):
    ...     before = os.sched_getaffinity(0)
    ...     os.sched_setaffinity(0, {min(before)})
    ...     try:
    ...         parallel_points(lambda x, w: x, lambda x: x, lambda: (1,), workers=1,
    ...                         full_at=1.5, zero_at=1.1, points=4)
    ...     finally:
    ...         os.sched_setaffinity(0, before)
    ... else:
    ...     raise UnreliableMeasurement("Unreliable measurement ...")
    Traceback (most recent call last):
        ...
    course_lib.grading.UnreliableMeasurement: Unreliable measurement ...
    """
    settings = _parallel_settings(workers, full_at, zero_at, points, budget, within, min_concurrency,
                                  rtol, atol, margin, min_call_seconds, checks)
    decision = _Decision(full_at=full_at, zero_at=zero_at, points=points, margin=margin)
    with _grading_session():
        try:
            result = _measure_parallel(candidate, reference, make_args, settings, decision)
        except _NoParallelPoints:
            return 0.0
    if compiled is not None:
        _require_prange(prange_loops(compiled), getattr(compiled, "__name__", "the kernel"))
    return _parallel_points_for(result, settings)


@dataclasses.dataclass(frozen=True)
class _ParallelSettings:
    workers: int
    full_at: float
    zero_at: float
    points: float
    budget: float
    within: float
    min_concurrency: float
    tolerance: _Tolerance
    margin: float
    min_call_seconds: float
    checks: int


@dataclasses.dataclass(frozen=True)
class _ParallelRound:
    reference: float  # seconds per call on cores of its own (wall less the wait for a core)
    one: float
    many: float
    concurrency: float  # of the parallel call
    working: int  # threads or processes that did the parallel call's work
    waited: float  # share of the parallel call's wall time spent waiting for a core

    def ratio(self, within: float) -> float:
        return min(self.one, within * self.reference) / max(self.many, 1e-12)


@dataclasses.dataclass(frozen=True)
class _ParallelResult:
    ratio: float
    low: float
    high: float
    rounds: int
    reference_seconds: float
    one_seconds: float
    many_seconds: float
    concurrency: float
    working: int
    waited: float
    workers: int
    cores: int
    within: float
    threads: str = ""
    quick: bool = False  # the kernel's short reading while nbgrader autogrades (see _quick_rounds)

    def describe(self) -> str:
        how = (f"a short reading in your kernel while graded (its {self.rounds} checked calls after the first; "
               f"the grade is measured outside your kernel)" if self.quick else
               f"95% interval {_fmt_ratio(self.low)}x to {_fmt_ratio(self.high)}x over {self.rounds} rounds")
        return (
            f"{_fmt_ratio(self.ratio)}x with {self.workers} workers against your own one-worker run, "
            f"{how}; "
            f"per call {_fmt_seconds(self.one_seconds)} on 1 worker, {_fmt_seconds(self.many_seconds)} on "
            f"{self.workers}, the serial reference {_fmt_seconds(self.reference_seconds)} (each less the time "
            f"it waited for a core: {self.waited:.0%} of the parallel calls' wall time); your one-worker "
            f"time counts at most {self.within:g} times the reference's; {_workers_text(self.working)} "
            f"did the parallel work, {self.concurrency:.2f} running or ready to run on average; "
            f"{_cores_text(self.cores)}, thread pools: {self.threads or 'as set'}"
        )


def _workers_text(n: int) -> str:
    return f"{n} thread or process" if n == 1 else f"{n} threads or processes"


def _parallel_settings(
    workers: int, full_at: float, zero_at: float, points: float, budget: float, within: float,
    min_concurrency: float, rtol: float, atol: float, margin: float, min_call_seconds: float, checks: int,
) -> _ParallelSettings:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a whole number >= 1, got {workers!r}")
    cores = _available_cores()
    if workers < 2 or workers > cores:  # first: thresholds computed from workers=1 are not checked
        raise UnreliableMeasurement(
            f"Unreliable measurement (a grading configuration problem, not your code): this notebook "
            f"is graded with {cores} core{'s' if cores != 1 else ''} (its CPU affinity), and a parallel "
            f"speed-up with {workers} worker{'s' if workers != 1 else ''} needs from 2 up to that many. "
            f"Instructor: grade with at least 2 cores per notebook (course grade --workers N gives "
            f"each of N notebooks cores // N)."
        )
    for value, name in ((full_at, "full_at"), (zero_at, "zero_at"), (points, "points"), (budget, "budget"),
                        (within, "within"), (min_concurrency, "min_concurrency"),
                        (min_call_seconds, "min_call_seconds")):
        _check_number(value, name, positive=True)
    if not zero_at < full_at:
        raise ValueError(f"zero_at must be below full_at (credit grows with the speed-up), "
                         f"got zero_at={zero_at!r}, full_at={full_at!r}")
    _check_number(margin, "margin")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin is a share of the threshold in [0, 1), e.g. 0.1, got {margin!r}")
    if isinstance(checks, bool) or not isinstance(checks, int) or checks < 2:
        raise ValueError(f"checks must be a whole number of fresh inputs >= 2, got {checks!r}")
    if not _sampling_available():
        raise UnreliableMeasurement(
            "Unreliable measurement: this system does not report per-thread CPU and wait times "
            "(/proc/PID/task/TID/schedstat, Linux), which grading parallel work needs."
        )
    return _ParallelSettings(workers, float(full_at), float(zero_at), float(points), float(budget),
                             float(within), float(min_concurrency), _tolerance(rtol, atol, True),
                             float(margin), float(min_call_seconds), checks)


_PARALLEL_MIN_ROUNDS = 9   # the median of 9 paired ratios has a 96% interval
# ... but from _SETTLED_ROUNDS on they stop once both ends of the median's interval earn the same
# grade, all points or none (course_lib.grading._speed._SETTLED_ROUNDS).
_PARALLEL_MAX_ROUNDS = 60
_PARALLEL_WALL_FACTOR = 4.0  # rounds stop at this many times the budget in wall time


def _parallel_rounds(
    one_round: Callable[[int], _ParallelRound], settings: _ParallelSettings, decision: _Decision,
) -> list[_ParallelRound]:
    """Rounds until the budget is spent (at least 9); twice as many when too close to call;
    6 when their ratios all earn the same grade, full points or none (:meth:`_Decision.settled`).

    ``one_round(i)`` times one call of each side (the order alternating with ``i``).
    Shared by the kernel's full measurement and the verifier's.
    """
    rounds: list[_ParallelRound] = []
    spent, started = 0.0, _perf_counter()
    limit = 1.0
    while True:
        r = one_round(len(rounds))
        rounds.append(r)
        spent += r.reference + r.one + r.many
        wall = _perf_counter() - started
        if len(rounds) >= _SETTLED_ROUNDS:
            low, _, high = _median_interval([x.ratio(settings.within) for x in rounds])
            if decision.settled(low, high):
                return rounds
        if len(rounds) < _PARALLEL_MIN_ROUNDS:
            continue
        if (spent >= limit * settings.budget or wall >= limit * _PARALLEL_WALL_FACTOR * settings.budget
                or len(rounds) >= limit * _PARALLEL_MAX_ROUNDS):
            if limit != 1.0:  # measured again already
                return rounds
            low, _, high = _median_interval([x.ratio(settings.within) for x in rounds])
            if not decision.undecided(low, high):
                return rounds
            limit = 2.0  # too close to call: measure as long again and decide on all rounds


def _parallel_result(rounds: list[_ParallelRound], settings: _ParallelSettings, threads: str,
                     quick: bool = False) -> _ParallelResult:
    low, ratio, high = _median_interval([r.ratio(settings.within) for r in rounds])
    return _ParallelResult(
        ratio=ratio, low=low, high=high, rounds=len(rounds),
        reference_seconds=statistics.median(r.reference for r in rounds),
        one_seconds=statistics.median(r.one for r in rounds),
        many_seconds=statistics.median(r.many for r in rounds),
        concurrency=statistics.median(r.concurrency for r in rounds),
        working=int(statistics.median_low(r.working for r in rounds)),
        waited=statistics.median(r.waited for r in rounds),
        workers=settings.workers, cores=_available_cores(), within=settings.within, threads=threads,
        quick=quick,
    )


def _parallel_points_for(result: _ParallelResult, settings: _ParallelSettings) -> float:
    """The verdict on a measurement: no concurrency fails; else the log-scale credit."""
    if not result.concurrency >= settings.min_concurrency:
        raise GradingError(
            f"Not parallel: with {settings.workers} workers {_workers_text(result.working)} did the "
            f"work, {result.concurrency:.2f} of them running or ready to run on average, and at least "
            f"{settings.min_concurrency:g} are needed: the tasks did not run at the same time, so there is "
            f"no parallel speed-up to grade ({result.describe()})."
        )
    return _points_for(result.ratio, settings.full_at, settings.zero_at, settings.points, settings.margin)


def _require_prange(loops: int | None, name: str) -> None:
    """No point without Numba's word that a ``prange`` loop of ``name`` runs in parallel."""
    if loops:
        return
    what = ("is not a function compiled by Numba" if loops is None else
            "has no prange loop that Numba made parallel in any of its compiled versions")
    raise GradingError(
        f"Not parallel: {name} {what} (Numba's parallel diagnostics). Compile it with "
        f"@njit(parallel=True) and write its outer loop as a prange.")


class _NoParallelPoints(Exception):
    """No parallel point can be earned (the parallel run is slower than the bound allows)."""


def _raise_if_hopeless(t_reference: float, t_many: float, settings: _ParallelSettings) -> None:
    """Stop before timing when even the best case earns nothing: the one-worker time counts
    at most ``within`` times the reference's, so the speed-up is at most that over the
    parallel time (a pure-Python version would otherwise be timed for minutes). Judged on
    one untimed first call, so only when even twice its speed would earn nothing."""
    best = settings.within * t_reference / max(t_many, 1e-12)
    needed = settings.zero_at * (1.0 - settings.margin)
    if 2.0 * best < needed:
        raise _NoParallelPoints(
            f"no parallel point: with {settings.workers} workers your estimate took {_fmt_seconds(t_many)} "
            f"per call and the serial reference {_fmt_seconds(t_reference)}; your one-worker time counts "
            f"at most {settings.within:g} times the reference's, so the parallel speed-up is at most "
            f"{_fmt_ratio(best)}x, below the {_fmt_ratio(needed)}x that earns a first point")


def _check_identical(many: Any, one: Any, workers: int, k: int) -> None:
    problem = _problem(many, one, _EXACT)
    if problem is not None:
        raise GradingError(
            f"With {workers} workers the result differs from the one with 1 worker on fresh input {k} "
            f"(it must be identical, whatever the number of workers): {problem}")


def _check_parallel_result(result: Any, expected: Any, settings: _ParallelSettings, what: str) -> None:
    problem = _problem(result, expected, settings.tolerance)
    if problem is not None:
        raise GradingError(f"Wrong result {what}: {problem}")


def _measure_parallel(
    candidate: Callable[..., Any], reference: Callable[..., Any], make_args: Callable[[], tuple[Any, ...]],
    settings: _ParallelSettings, decision: _Decision,
) -> _ParallelResult:
    for obj, name in ((candidate, "candidate"), (reference, "reference"), (make_args, "make_args")):
        if not callable(obj):
            raise TypeError(f"{name} must be a function, got {type(obj).__name__}")
    _raise_if_tampered()
    workers = settings.workers
    with _limit_threads(workers), _ExternalSampler() as sampler:
        pools = _thread_settings()

        def timed(fn: Callable[..., Any], args: tuple[Any, ...], is_candidate: bool) -> tuple[float, Any, Any]:
            """(seconds on cores of its own, result, usage) of one call; garbage collection off."""
            enabled = gc.isenabled()
            gc.disable()
            sampler.start()
            t0 = _perf_counter()
            try:
                result = _call_candidate(fn, args) if is_candidate else fn(*args)
            finally:
                used = sampler.stop(max(_perf_counter() - t0, 1e-9))
                if enabled:
                    gc.enable()
            return used.unloaded, result, used

        # 1. Correctness, and a first estimate of each side's time. The parallel run goes
        # before the serial one: when even it is too slow to earn a point, the (slower)
        # serial run is not waited for.
        estimates: list[tuple[float, float, float]] = []
        checked: list[_ParallelRound] = []
        signature: tuple[Any, ...] = ()
        for k in range(1, settings.checks + 1):
            args = _fresh_args(make_args)
            t_ref, expected, _ = timed(reference, _deepcopy(args), False)
            t_many, many, used = timed(candidate, (*_deepcopy(args), workers), True)
            _check_parallel_result(many, expected, settings,
                                   f"with {workers} workers on fresh input {k} of {settings.checks}")
            if k == 1:
                _raise_if_hopeless(t_ref, t_many, settings)
            t_one, one, _ = timed(candidate, (*_deepcopy(args), 1), True)
            _check_parallel_result(one, expected, settings, f"with 1 worker on fresh input {k} of {settings.checks}")
            _check_identical(many, one, workers, k)
            estimates.append((t_ref, t_one, t_many))
            checked.append(_ParallelRound(t_ref, t_one, t_many, used.concurrency, used.workers,
                                          used.waited / used.wall if used.wall > 0 else 0.0))
            signature = _signature(expected)
        one_estimate = min(t for _, t, _ in estimates[1:])
        at_threshold = one_estimate / settings.full_at
        if at_threshold < settings.min_call_seconds:
            raise UnreliableMeasurement(
                f"Unreliable measurement (a grading configuration problem, not your code): one worker takes "
                f"{_fmt_seconds(one_estimate)} per call, so a parallel run at {_fmt_ratio(settings.full_at)}x "
                f"would take {_fmt_seconds(at_threshold)}, too short for its threads to be sampled (at least "
                f"{_fmt_seconds(settings.min_call_seconds)}). Instructor: use larger inputs in make_args.")

        # 2. Interleaved rounds: the reference and one worker on the same input, the parallel
        # run on another (so that no result can be reused), every result checked.
        def one_round(i: int) -> _ParallelRound:
            shared, other = _fresh_args(make_args), _fresh_args(make_args)
            own_copy, pristine = _deepcopy(shared), _deepcopy(other)  # the reference's, before any call
            sides = ("reference", "one", "many") if i % 2 == 0 else ("many", "one", "reference")
            seconds, results, usage = {}, {}, {}
            for side in sides:
                if side == "reference":
                    seconds[side], results[side], usage[side] = timed(reference, own_copy, False)
                elif side == "one":
                    seconds[side], results[side], usage[side] = timed(candidate, (*shared, 1), True)
                else:
                    seconds[side], results[side], usage[side] = timed(candidate, (*other, workers), True)
            for side in ("one", "many"):
                if settings.tolerance.check_dtype and _signature(results[side]) != signature:
                    raise GradingError(f"Wrong result in timed round {i + 1}: expected "
                                       f"{_describe_signature(signature)}, got "
                                       f"{_describe_signature(_signature(results[side]))}")
            _check_parallel_result(results["one"], results["reference"], settings,
                                   f"with 1 worker in timed round {i + 1}")
            _check_parallel_result(results["many"], reference(*pristine), settings,
                                   f"with {workers} workers in timed round {i + 1}")
            many = usage["many"]
            return _ParallelRound(seconds["reference"], seconds["one"], seconds["many"], many.concurrency,
                                  many.workers, many.waited / many.wall if many.wall > 0 else 0.0)

        if _quick():
            # The kernel's short reading while nbgrader autogrades (the stored verdict is the
            # verifier's, see _quick): the checked calls after the first (which may pay for
            # compiling) as its rounds, as a speed cell reads its checks' own timings. Five
            # more interleaved rounds made week 7's two parallel cells 4.4 s and 3.0 s in the
            # kernel (checks included; course grade --profile, 7 December 2026, load about 1).
            _raise_if_tampered()
            return _parallel_result(checked[1:], settings, pools, quick=True)
        rounds = _parallel_rounds(one_round, settings, decision)
    _raise_if_tampered()
    return _parallel_result(rounds, settings, pools)

