"""Speed-ups: :func:`assert_speedup`, :func:`speedup_points`, :func:`measured_speedup`, and how they measure.

The procedure is the package docstring's (:mod:`course_lib.grading`): correctness on fresh
inputs first, microsecond calls refused, interleaved rounds of
:func:`course_lib.timing.compare` with every timed result checked, a verdict with a margin.
Here too are the cross-check of compare's timer against an independent clock
(``time.monotonic_ns``) over the same calls, the guard that stops a measurement whose
timer was made to stand still, and the rules that parallel work and the out-of-kernel
verifier share: the median's distribution-free interval (:func:`_median_interval`), when
an interval is too wide to grade on (:class:`_Decision`), the log-scale credit
(:func:`_points_for`), and the kernel's short reading while nbgrader autogrades
(:func:`_quick`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from course_lib import timing
from course_lib.grading._checks import (
    _call_candidate, _check_number, _cores_text, _fmt_ratio, _fmt_seconds, _fresh_args, _grading_session,
)
from course_lib.grading._errors import GradingError, TamperingDetected, UnreliableMeasurement
from course_lib.grading._state import (
    _compare, _deepcopy, _default_rng, _limit_threads, _monotonic_ns, _perf_counter, _raise_if_tampered,
    _tampering_problems, _thread_settings, _urandom,
)
from course_lib.grading._values import _describe_signature, _problem, _same_values, _signature, _tolerance

# The public names, then what the package's other modules, preview and the verifier use from here.
__all__ = [
    "assert_speedup", "speedup_points", "measured_speedup", "_Decision", "_Estimate", "_measure_speedup",
    "_median_interval", "_points_for", "_quick", "_refuse_microseconds", "_speed_settings",
    "_SETTLED_ROUNDS",
]


# Verification of timed results: at least this many are checked against the
# reference, however expensive the reference is.
_MIN_VERIFIED = 10


def assert_speedup(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    at_least: float,
    budget: float = 1.0,
    *,
    check: Callable[[Any, Any], Any] | None = None,
    rtol: float = 1e-9,
    atol: float = 0.0,
    margin: float = 0.1,
    min_call_seconds: float = 1e-3,
    checks: int = 3,
    verify_budget: float | None = None,
    threads: int = 1,
) -> None:
    """Check that ``candidate`` agrees with ``baseline`` and is ``at_least`` times faster.

    See the module docstring for the procedure. In short: ``checks`` fresh inputs
    must give the same result on both sides (each side gets its own deep copy);
    then :func:`course_lib.timing.compare` measures the speed-up with fresh inputs
    for every call and every timed result checked; the submission passes when the
    measured speed-up (median of paired rounds) reaches ``at_least * (1 - margin)``.

    Parameters
    ----------
    candidate : callable
        The submission, called as ``candidate(*make_args())``.
    baseline : callable
        The reference implementation, called the same way.
    make_args : callable
        Zero-argument function returning a tuple of positional arguments; it must
        return new, random inputs on every call.
    at_least : float
        The required speed-up, time(baseline) / time(candidate).
    budget : float, default 1.0
        Seconds of timed rounds (input generation and checks come on top, but the
        rounds stop at twice this in wall time once there are enough of them).
    check : callable, optional
        ``check(result, expected)``, raising ``AssertionError`` on a mismatch; by
        default :func:`assert_same` with ``rtol`` and ``atol``.
    rtol, atol : float
        Tolerances of the default check.
    margin : float, default 0.1
        Share of ``at_least`` forgiven for measurement noise.
    min_call_seconds : float, default 0.001
        Refuse configurations in which a candidate at the threshold would take
        less than this per call.
    checks : int, default 3
        Fresh inputs checked for correctness before timing (at least 2).
    verify_budget : float, optional
        Seconds of reference calls spent verifying timed results; ``None`` means
        ``budget``, ``math.inf`` verifies every timed result.
    threads : int, default 1
        Threads for BLAS/OpenMP and Numba during the whole measurement, the same for
        both sides (capped at the cores this process may use). One thread unless the
        cell grades parallel work: a pool that lets a neighbour's load decide how
        fast the student's code runs measures the neighbour.

    Raises
    ------
    GradingError
        Wrong result (before or during timing), an exception in the candidate, or a
        speed-up below what was needed (with the measured ratio and its interval).
    TamperingDetected
        A clock, tracemalloc or course_lib's measuring code was replaced.
    UnreliableMeasurement
        The inputs are too small to measure (an instructor's configuration problem).

    Examples
    --------
    >>> import random
    >>> make_args = lambda: ([random.random() for _ in range(5)],)
    >>> assert_speedup(sorted, sorted, make_args, at_least=2, budget=0.05)
    Traceback (most recent call last):
        ...
    course_lib.grading.UnreliableMeasurement: Unreliable measurement ...
    """
    _check_number(at_least, "at_least", positive=True)
    settings = _speed_settings(budget, margin, min_call_seconds, checks, verify_budget, check, rtol, atol,
                               threads)
    needed = at_least * (1.0 - margin)
    with _grading_session():
        result = _measure_speedup(candidate, baseline, make_args, settings, fastest=at_least,
                                  decision=_Decision(passes_at=needed))
        if not result.ratio >= needed:
            raise GradingError(
                f"Not fast enough: your function measured {_fmt_ratio(result.ratio)}x as fast as "
                f"the reference ({result.describe()}); this test needs a speed-up of "
                f"{_fmt_ratio(at_least)}x (a measured {_fmt_ratio(needed)}x passes, allowing "
                f"{margin:.0%} for measurement noise)."
            )


def speedup_points(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    full_at: float,
    zero_at: float,
    points: float,
    budget: float = 1.0,
    *,
    check: Callable[[Any, Any], Any] | None = None,
    rtol: float = 1e-9,
    atol: float = 0.0,
    margin: float = 0.1,
    min_call_seconds: float = 1e-3,
    checks: int = 3,
    verify_budget: float | None = None,
    threads: int = 1,
) -> float:
    """Partial credit for a speed-up: 0 at ``zero_at``, ``points`` at ``full_at``.

    Correctness comes first, as in :func:`assert_speedup`: a wrong result raises
    :class:`GradingError`, which nbgrader scores as 0 and shows the message. Then
    the credit is linear in ``log(speed-up)`` between the two thresholds (each
    lowered by ``margin``, as in :func:`assert_speedup`, so that
    ``assert_speedup(..., at_least=full_at)`` passes exactly when this gives full
    points), clipped to ``[0, points]`` and rounded to 2 decimals.

    Make this call the last expression of the grade cell and give the cell the same
    ``points``: nbgrader records the value as the cell's score (a number above the
    cell's points is an error in nbgrader). The value is a plain ``float`` because
    nbgrader parses the ``text/plain`` output with ``float()``, which the repr of a
    NumPy scalar (``np.float64(2.5)``) would defeat.

    Parameters
    ----------
    candidate, baseline, make_args, budget, check, rtol, atol, margin,
    min_call_seconds, checks, verify_budget, threads
        As for :func:`assert_speedup`; ``min_call_seconds`` applies to a candidate at
        ``full_at``.
    full_at : float
        Speed-up earning all the points.
    zero_at : float
        Speed-up earning none; must be below ``full_at``.
    points : float
        The points of the grade cell.

    Returns
    -------
    float
        Points earned, between 0 and ``points``.

    Examples
    --------
    With ``zero_at=2``, ``full_at=50`` and the 10% margin the credit runs from a
    measured 1.8x to a measured 45x; 9x lies halfway on a log scale, so it earns half
    the points (this is the rule :func:`speedup_points` applies to its measurement):

    >>> _points_for(9.0, full_at=50, zero_at=2, points=4, margin=0.1)
    2.0
    """
    _check_number(full_at, "full_at", positive=True)
    _check_number(zero_at, "zero_at", positive=True)
    _check_number(points, "points", positive=True)
    if not zero_at < full_at:
        raise ValueError(
            f"zero_at must be below full_at (credit grows with the speed-up), "
            f"got zero_at={zero_at!r}, full_at={full_at!r}"
        )
    settings = _speed_settings(budget, margin, min_call_seconds, checks, verify_budget, check, rtol, atol,
                               threads)
    decision = _Decision(full_at=full_at, zero_at=zero_at, points=points, margin=margin)
    with _grading_session():
        result = _measure_speedup(candidate, baseline, make_args, settings, fastest=full_at, decision=decision)
    return _points_for(result.ratio, full_at, zero_at, points, margin)


def measured_speedup(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    budget: float = 1.0,
    *,
    rtol: float = 1e-9,
    atol: float = 0.0,
    min_call_seconds: float = 1e-3,
    checks: int = 3,
    threads: int = 1,
) -> float:
    """The speed-up of ``candidate`` over ``baseline`` as the grader measures it, as a number.

    For a test that checks a figure the student measured (a speed-up their own tables
    imply) against the grader's reading of the same code: measured exactly as
    :func:`speedup_points` measures (correctness first, on fresh inputs; then side by side),
    and refused the same way when the calls are too short to time (``min_call_seconds``
    applies to the candidate's own calls here: there is no threshold). Outside the kernel
    the verifier measures it in the student worker, as for every speed cell.

    Examples
    --------
    >>> import random
    >>> make_args = lambda: ([random.random() for _ in range(5)],)
    >>> measured_speedup(sorted, sorted, make_args, budget=0.05)
    Traceback (most recent call last):
        ...
    course_lib.grading.UnreliableMeasurement: Unreliable measurement ...
    """
    settings = _speed_settings(budget, 0.0, min_call_seconds, checks, None, None, rtol, atol, threads)
    with _grading_session():
        return float(_measure_speedup(candidate, baseline, make_args, settings, fastest=1.0,
                                      decision=_Decision()).ratio)


@dataclasses.dataclass(frozen=True)
class _SpeedSettings:
    budget: float
    margin: float
    min_call_seconds: float
    checks: int
    verify_budget: float
    comparator: Callable[[Any, Any], str | None]
    default_check: bool
    threads: int = 1


@dataclasses.dataclass(frozen=True)
class _SpeedResult:
    ratio: float
    low: float
    high: float
    rounds: int
    baseline_seconds: float
    candidate_seconds: float
    measurements: int
    threads: str = ""

    def describe(self) -> str:
        if self.measurements == 0:
            return (f"a short reading in your kernel while graded (the fastest of two checked calls per side: "
                    f"reference {_fmt_seconds(self.baseline_seconds)} per call, yours "
                    f"{_fmt_seconds(self.candidate_seconds)}); the grade is measured outside your kernel; "
                    f"{_cores_text()}")
        again = ", measured twice because the first was too close to call" if self.measurements > 1 else ""
        pools = f"; thread pools: {self.threads}" if self.threads else ""
        return (
            f"95% interval {_fmt_ratio(self.low)}x to {_fmt_ratio(self.high)}x over {self.rounds} "
            f"rounds{again}; reference {_fmt_seconds(self.baseline_seconds)} per call, yours "
            f"{_fmt_seconds(self.candidate_seconds)}{pools}; {_cores_text()}"
        )


class _Args(tuple):
    """A tuple of arguments that may carry a pristine copy for the reference.

    compare hands this object to the check but unpacks it into the call, so the
    submission only ever sees the elements, never the copy.
    """


@dataclasses.dataclass
class _Estimate:
    baseline_seconds: float
    candidate_seconds: float
    signature: tuple[Any, ...]


def _speed_settings(
    budget: float, margin: float, min_call_seconds: float, checks: int,
    verify_budget: float | None, check: Callable[[Any, Any], Any] | None, rtol: float, atol: float,
    threads: int = 1,
) -> _SpeedSettings:
    _check_number(budget, "budget", positive=True)
    _check_number(margin, "margin")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin is a share of the threshold in [0, 1), e.g. 0.1, got {margin!r}")
    _check_number(min_call_seconds, "min_call_seconds", positive=True)
    if isinstance(checks, bool) or not isinstance(checks, int) or checks < 2:
        raise ValueError(f"checks must be a whole number of fresh inputs >= 2, got {checks!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a whole number >= 1, got {threads!r}")
    if verify_budget is None:
        verify_budget = float(budget)
    _check_number(verify_budget, "verify_budget", positive=True, finite=False)
    if check is None:
        tol = _tolerance(rtol, atol, True)

        def comparator(result: Any, expected: Any) -> str | None:
            return _problem(result, expected, tol)
    else:
        if not callable(check):
            raise TypeError(f"check must be a function check(result, expected), got {type(check).__name__}")

        def comparator(result: Any, expected: Any) -> str | None:
            try:
                check(result, expected)
            except TamperingDetected:
                raise
            except AssertionError as exc:
                return str(exc) or type(exc).__name__
            return None

    return _SpeedSettings(float(budget), float(margin), float(min_call_seconds), checks,
                          float(verify_budget), comparator, check is None, threads)


def _measure_speedup(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    settings: _SpeedSettings,
    fastest: float,
    decision: _Decision,
) -> _SpeedResult:
    for obj, name in ((candidate, "candidate"), (baseline, "baseline"), (make_args, "make_args")):
        if not callable(obj):
            raise TypeError(f"{name} must be a function, got {type(obj).__name__}")
    _raise_if_tampered()
    with _limit_threads(settings.threads):
        pools = _thread_settings()
        estimate = _check_correctness(candidate, baseline, make_args, settings)
        _refuse_microseconds(estimate, fastest, settings.min_call_seconds)
        if _quick():
            # The kernel's short reading while nbgrader autogrades (the stored verdict is the
            # verifier's): the fastest of the correctness calls after the first, per side.
            _raise_if_tampered()
            ratio = estimate.baseline_seconds / max(estimate.candidate_seconds, 1e-12)
            return _SpeedResult(ratio=ratio, low=ratio, high=ratio, rounds=0,
                                baseline_seconds=estimate.baseline_seconds,
                                candidate_seconds=estimate.candidate_seconds, measurements=0, threads=pools)
        comparisons = [_timed_comparison(candidate, baseline, make_args, settings, estimate)]
        ratios = list(comparisons[0].ratios)
        low, ratio, high = _median_interval(ratios)
        if decision.undecided(low, high):
            # Too close to call: measure again and decide on all the rounds together.
            comparisons.append(_timed_comparison(candidate, baseline, make_args, settings, estimate))
            ratios += comparisons[1].ratios
            low, ratio, high = _median_interval(ratios)
    _raise_if_tampered()
    return _SpeedResult(
        ratio=ratio, low=low, high=high, rounds=len(ratios),
        baseline_seconds=statistics.median(c.baseline_seconds for c in comparisons),
        candidate_seconds=statistics.median(c.candidate_seconds for c in comparisons),
        measurements=len(comparisons), threads=pools,
    )


def _check_correctness(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    settings: _SpeedSettings,
) -> _Estimate:
    inputs = [_fresh_args(make_args) for _ in range(settings.checks)]
    pristine = [_deepcopy(args) for args in inputs]
    if all(_same_values(x, y) for x, y in zip(pristine[0], pristine[1])) and len(pristine[0]) == len(pristine[1]):
        raise ValueError(
            "make_args returned equal inputs on two calls, so a submission that memoises "
            "on its input would win the race without being faster. make_args must draw new "
            "random inputs on every call, e.g. lambda: (rng.random(100_000),)"
        )
    base_t, cand_t = [], []
    signature: tuple[Any, ...] = ()
    for k, (args, reference_args) in enumerate(zip(inputs, pristine), start=1):
        t0 = _perf_counter()
        result = _call_candidate(candidate, args)
        t1 = _perf_counter()
        expected = baseline(*reference_args)
        t2 = _perf_counter()
        cand_t.append(t1 - t0)
        base_t.append(t2 - t1)
        problem = settings.comparator(result, expected)
        if problem is not None:
            raise GradingError(
                f"Wrong result on fresh input {k} of {settings.checks} (checked before any "
                f"timing): {problem}"
            )
        signature = _signature(expected)
    # The first call may include one-off costs (Numba compiling); the rest do not.
    return _Estimate(min(base_t[1:]), min(cand_t[1:]), signature)


def _refuse_microseconds(estimate: _Estimate, fastest: float, min_call_seconds: float) -> None:
    at_threshold = estimate.baseline_seconds * min(1.0, 1.0 / fastest)
    if at_threshold < min_call_seconds:
        needed = min_call_seconds * max(1.0, fastest)
        raise UnreliableMeasurement(
            f"Unreliable measurement (a grading configuration problem, not your code): the "
            f"reference takes {_fmt_seconds(estimate.baseline_seconds)} per call, so a solution "
            f"at the required {_fmt_ratio(fastest)}x would take {_fmt_seconds(at_threshold)}, "
            f"and ratios of calls under {_fmt_seconds(min_call_seconds)} move by more than 2x on "
            f"a busy machine. Instructor: use larger inputs in make_args, so that the reference "
            f"takes at least {_fmt_seconds(needed)} per call (10x that is safer)."
        )


def _timed_comparison(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    settings: _SpeedSettings,
    estimate: _Estimate,
) -> timing.Comparison:
    share = _verify_share(estimate, settings)
    rng = _default_rng(int.from_bytes(_urandom(16), "little"))
    calls = {"checked": 0}
    durations_b: list[int] = []
    durations_c: list[int] = []
    guard = _RunawayGuard(_honest_limit(estimate, settings.budget))
    timed_baseline = _independently_clocked(baseline, durations_b, guard, wrap_errors=False)
    timed_candidate = _independently_clocked(candidate, durations_c, guard, wrap_errors=True)

    def fresh_args() -> _Args:
        args = _Args(_fresh_args(make_args))
        if share >= 1.0 or rng.random() < share:
            args.reference = _deepcopy(tuple(args))  # type: ignore[attr-defined]
        return args

    def check(args: _Args, result: Any) -> None:
        calls["checked"] += 1
        if settings.default_check and _signature(result) != estimate.signature:
            raise GradingError(
                f"Wrong result in timed call {calls['checked']}: expected "
                f"{_describe_signature(estimate.signature)}, got {_describe_signature(_signature(result))}"
            )
        reference_args = getattr(args, "reference", None)
        if reference_args is None:
            return
        problem = settings.comparator(result, baseline(*reference_args))
        if problem is not None:
            raise GradingError(
                f"Wrong result in timed call {calls['checked']} (results are checked during "
                f"timing, not only at first): {problem}"
            )

    started = _monotonic_ns()
    comparison = _compare(timed_baseline, timed_candidate, make_args=fresh_args, budget=settings.budget, check=check)
    elapsed = (_monotonic_ns() - started) / 1e9
    _cross_check_clock(comparison, durations_b, durations_c, elapsed)
    return comparison


def _verify_share(estimate: _Estimate, settings: _SpeedSettings) -> float:
    """Share of timed candidate calls whose values are checked against the reference."""
    t_b = max(estimate.baseline_seconds, 1e-9)
    t_c = max(estimate.candidate_seconds, 1e-9)
    loops = max(1.0, 0.02 / t_c)  # compare's calibration aims at 20 ms rounds
    calls = settings.budget / 2 / t_c + 4 * loops + 1  # rounds, calibration and warm-up
    cost_of_all = calls * t_b
    if cost_of_all <= settings.verify_budget:
        return 1.0
    return min(1.0, max(settings.verify_budget / cost_of_all, _MIN_VERIFIED / calls))


class _RunawayGuard:
    """Stops a measurement whose calls run far beyond any honest budget, if tampered with.

    A timer that was made to stop (a patched timed loop) would make compare's
    calibration grow its loop count for ever; the independent clock notices the calls
    piling up. Past the limit the guard looks for evidence (:func:`_tampering_problems`):
    with none, the machine is merely slow (a busy neighbour can stretch an honest
    measurement several times), so the limit doubles and the measurement goes on,
    bounded by the cell's time limit. Slowness alone is never called tampering.
    """

    def __init__(self, limit_seconds: float) -> None:
        self.limit_ns = int(limit_seconds * 1e9)
        self.total_ns = 0
        self.started = (_monotonic_ns(), _timer_now())

    def add(self, ns: int) -> None:
        self.total_ns += ns
        if self.total_ns > self.limit_ns:
            problems = _tampering_problems()
            independent = (_monotonic_ns() - self.started[0]) / 1e9
            timer = _timer_now() - self.started[1]
            if not timer >= 0.5 * independent:  # also catches NaN
                problems.append(f"compare's timer advanced {timer:.3g} s while an independent clock "
                                f"advanced {independent:.3g} s")
            if problems:
                raise TamperingDetected(
                    f"the timed calls have run for {self.total_ns / 1e9:.1f} s by an independent "
                    f"clock, far beyond the measurement's budget: {'; '.join(problems)}"
                )
            self.limit_ns *= 2


def _timer_now() -> float:
    """What compare's timer reads now: the clock course_lib.timing currently measures with."""
    try:
        return float(vars(timing)["_perf_counter"]())
    except Exception:  # noqa: BLE001 - a broken timer is evidence too
        return float("nan")


def _honest_limit(estimate: _Estimate, budget: float) -> float:
    # Rounds stop at the budget; calibration and warm-up cost a few 20 ms rounds or a
    # few calls; at least 6 rounds are always run. Twice that, plus slack.
    per_round = max(estimate.baseline_seconds, 0.05) + max(estimate.candidate_seconds, 0.05)
    return 2.0 * (budget + 10 * per_round) + 1.0


def _independently_clocked(
    fn: Callable[..., Any], durations: list[int], guard: _RunawayGuard, wrap_errors: bool
) -> Callable[..., Any]:
    record = durations.append
    add = guard.add
    clock = _monotonic_ns

    def clocked(*args: Any) -> Any:
        start = clock()
        try:
            result = fn(*args)
        except GradingError:
            raise
        except Exception as exc:
            if not wrap_errors:
                raise
            raise GradingError(f"Your function raised {type(exc).__name__} while being timed: {exc}") from exc
        spent = clock() - start
        record(spent)
        add(spent)
        return result

    return clocked


def _cross_check_clock(
    comparison: timing.Comparison, durations_b: list[int], durations_c: list[int], elapsed: float
) -> None:
    """Compare the timer's rounds with an independent clock's reading of the same calls.

    The rounds are the last ``rounds * loops`` calls of each side (warm-up and
    calibration come first), and the timer's window around a round's loop contains the
    independent clock's windows around each of its calls: for honest timing the timer's
    total is at least the independent total and exceeds it only by the loop's own
    bookkeeping, however loaded the machine is (a preemption lands inside both windows
    alike). Comparing the same calls matters: the mean over *all* calls, warm-up and
    calibration included, drifted from the rounds' mean by 1.6x under load, which once
    called honest code tampered.
    """
    timed_total = 0.0
    for side, reported_times, loops, durations in (
        ("the reference", comparison.baseline_times, comparison.loops_baseline, durations_b),
        ("your function", comparison.candidate_times, comparison.loops_candidate, durations_c),
    ):
        calls = len(reported_times) * loops
        if not reported_times or len(durations) < calls:
            raise TamperingDetected(f"the timer reported calls of {side} that were never made: the timer "
                                    "was tampered with")
        reported = math.fsum(reported_times) * loops
        independent = sum(durations[len(durations) - calls:]) / 1e9
        timed_total += reported
        agree = (
            math.isfinite(reported)
            and independent <= reported + _CLOCK_SLACK_PER_CALL * calls + 1e-4
            and reported <= _CLOCK_RATIO_LIMIT * independent + _LOOP_COST_PER_CALL * calls + 1e-3
        )
        if not agree:
            raise TamperingDetected(
                f"the timer measured {_fmt_seconds(reported / calls)} per call of {side}, an "
                f"independent clock (time.monotonic_ns) {_fmt_seconds(independent / calls)} for the "
                f"same {calls} calls: the clock was tampered with"
            )
    if timed_total > 1.05 * elapsed + 0.01:
        raise TamperingDetected(
            f"the timer counted {timed_total:.2f} s of timed calls in {elapsed:.2f} s of "
            f"real time: the clock was tampered with"
        )


# Tolerances of the clock cross-check (see benchmarks/honest_tampering.py for the measured
# distributions). Both clocks read CLOCK_MONOTONIC, so the independent total can exceed
# the timer's only by rounding; the timer's excess is the loop's bookkeeping, which a
# preemption can stretch: 1.5x the calls' own time plus 50 us a call was never reached
# by honest code under two busy competitors.
_CLOCK_SLACK_PER_CALL = 1e-6
_CLOCK_RATIO_LIMIT = 1.5
_LOOP_COST_PER_CALL = 50e-6


def _median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(low, median, high): the median and a distribution-free interval for it.

    The number of values below the true median is Binomial(n, 1/2) whatever the
    noise looks like; the k-th smallest to k-th largest value covers the median
    with probability ``1 - 2 P(Binomial(n, 1/2) < k)``.
    """
    xs = sorted(values)
    n = len(xs)
    tail = (1 - confidence) / 2 * 2**n
    k, cumulative = 1, 0
    for j in range(n):
        cumulative += math.comb(n, j)
        if cumulative > tail:
            break
        k = j + 1
    k = max(1, min(k, (n + 1) // 2))
    return xs[k - 1], statistics.median(xs), xs[n - k]


# While nbgrader autogrades a notebook, the score stored for a speed or parallel cell is
# the verifier's, measured outside the kernel; the kernel's own reading is only compared
# with it (a flag when the kernel gave a quarter of the points more). So the kernel takes a
# short one: a cell's correctness checks as always, the ratio read from their own timings
# (see _measure_parallel for a parallel cell's). Each cell is timed in full once per grading.


def _quick() -> bool:
    """Whether these checks run inside a kernel that nbgrader is autograding."""
    return os.environ.get("NBGRADER_EXECUTION") == "autograde"


# A reading whose 95% interval spans more than this share of a cell's points (its two ends
# would be graded that far apart) is too noisy to store: it is measured again, then later in
# the notebook, and if it never settles the student's best reading is stored, flagged.
_UNDECIDED_SHARE = 0.25


# Rounds from which a measurement stops once its grade is settled (_Decision.settled): with 6
# paired ratios, [min, max] covers the median with probability 96.9% (1 - 2/2^6), and more
# rounds would only refine a figure whose grade they cannot change. The verifier's speed
# rounds and the parallel rounds (kernel and verifier) both stop there.
_SETTLED_ROUNDS = 6


@dataclasses.dataclass(frozen=True)
class _Decision:
    """When a measured interval is too wide to grade on.

    A pass/fail check (``passes_at``: the measured ratio that passes) is undecided while its
    interval straddles that ratio; a partial-credit cell while the points its interval's
    two ends would earn differ by more than ``_UNDECIDED_SHARE`` of its points.

    Examples
    --------
    >>> _Decision(full_at=100, zero_at=60, points=4).undecided(50.0, 110.0)
    True
    >>> _Decision(full_at=100, zero_at=60, points=4).undecided(160.0, 200.0)
    False
    """

    passes_at: float | None = None
    full_at: float = 1.0
    zero_at: float = 1.0
    points: float = 0.0
    margin: float = 0.1

    def spread(self, low: float, high: float) -> float:
        """Points between the interval's two ends (0 for a pass/fail check or a bare measurement)."""
        if self.passes_at is not None or not self.points:
            return 0.0
        return (_points_for(high, self.full_at, self.zero_at, self.points, self.margin)
                - _points_for(low, self.full_at, self.zero_at, self.points, self.margin))

    def undecided(self, low: float, high: float) -> bool:
        if self.passes_at is not None:
            return low < self.passes_at <= high
        return self.spread(low, high) > _UNDECIDED_SHARE * self.points + 1e-9

    def settled(self, low: float, high: float) -> bool:
        """Whether both ends of the interval earn the very same grade (so more rounds cannot change it).

        A pass/fail check: both ends on one side of ``passes_at``; a partial-credit cell: both
        ends at full points, or both at none. A bare measurement (no grade) never settles.

        >>> _Decision(full_at=100, zero_at=60, points=4).settled(160.0, 300.0)
        True
        >>> _Decision(full_at=100, zero_at=60, points=4).settled(80.0, 300.0)
        False
        >>> _Decision(passes_at=2.0).settled(2.5, 9.0), _Decision().settled(2.5, 9.0)
        (True, False)
        """
        if self.passes_at is not None:
            return low >= self.passes_at or high < self.passes_at
        if not self.points:
            return False
        ends = [_points_for(x, self.full_at, self.zero_at, self.points, self.margin) for x in (low, high)]
        return ends[0] == ends[1] and ends[0] in (0.0, float(self.points))


def _points_for(ratio: float, full_at: float, zero_at: float, points: float, margin: float) -> float:
    low, high = zero_at * (1.0 - margin), full_at * (1.0 - margin)
    if not ratio > low:  # also catches NaN
        return 0.0
    share = math.log(ratio / low) / math.log(high / low)
    return float(min(points, round(points * min(1.0, max(0.0, share)), 2)))

