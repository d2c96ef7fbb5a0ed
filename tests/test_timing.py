"""Tests for course_lib.timing, on behaviour.

Timing assertions are ratios measured side by side in this process, only where the
true ratio is large (>= 10x), with wide margins: the test machine is a shared, loaded
2-core box. Where a statistical statement is tested (an interval contains 1), the
confidence level is set high enough that a correct implementation essentially never
fails.
"""

from __future__ import annotations

import datetime
import gc
import itertools
import os
import platform
import statistics
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import timing

# ---------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------

# Membership: the same counting loop over a list and over a set. Sized so that the
# fast (set) side takes about 1 ms per call and the true ratio is about 25x here.
HAYSTACK = list(range(100))
HAYSTACK_SET = set(HAYSTACK)
NEEDLES = [(i * 7919) % 200 for i in range(50_000)]  # half of them miss


def count_in_list(needles):
    return sum(1 for x in needles if x in HAYSTACK)


def count_in_set(needles):
    return sum(1 for x in needles if x in HAYSTACK_SET)


def work(n=30_000):
    """Pure-Python CPU work, about 2 ms per call at the default size."""
    return sum(i * i for i in range(n))


def _spin(seconds):
    end = timing._perf_counter() + seconds
    while timing._perf_counter() < end:
        pass


@pytest.fixture(scope="module")
def membership():
    return timing.compare(count_in_list, count_in_set, args=(NEEDLES,), budget=0.5)


# ---------------------------------------------------------------------------
# compare: what it reports
# ---------------------------------------------------------------------------


def test_large_true_ratio_is_reported_with_interval_above_one(membership):
    c = membership
    assert count_in_list(NEEDLES) == count_in_set(NEEDLES)
    assert c.ratio >= 10
    assert c.low > 1
    assert c.low <= c.ratio <= c.high
    assert c.candidate_seconds < c.baseline_seconds


def test_comparison_fields_and_table_agree(membership):
    c = membership
    assert c.rounds >= 6 and len(c.ratios) == c.rounds
    assert c.loops_baseline >= 1 and c.loops_candidate >= 1
    assert c.budget == 0.5
    table = c.table()
    assert list(table.columns) == ["baseline_s", "candidate_s", "ratio"]
    assert len(table) == c.rounds
    assert table.index.name == "round"
    np.testing.assert_allclose(table["baseline_s"] / table["candidate_s"], table["ratio"])
    assert c.ratio == pytest.approx(statistics.median(c.ratios))
    assert c.baseline_seconds == pytest.approx(table["baseline_s"].median())
    # The interval is two of the measured ratios, not a formula on top of them.
    assert c.low in c.ratios and c.high in c.ratios


def test_each_side_is_calibrated_to_the_minimum_round(membership):
    c = membership
    # The set side is ~25x faster, so it needs more calls to fill a round.
    assert c.loops_candidate > c.loops_baseline
    table = c.table()
    # Every round of every side lasted at least about min_round (0.02 s): a slower
    # machine only makes rounds longer, never shorter.
    assert (table["baseline_s"] * c.loops_baseline).min() >= 0.02 * 0.5
    assert (table["candidate_s"] * c.loops_candidate).min() >= 0.02 * 0.5


def test_timed_rounds_stay_within_budget(membership):
    c = membership
    per_round = c.table()["baseline_s"] * c.loops_baseline + c.table()["candidate_s"] * c.loops_candidate
    # A round starts only if the rounds so far plus one more (estimated by the
    # last) fit in the budget, unless the minimum number of rounds is not reached.
    if c.rounds > 6:
        assert per_round.iloc[:-1].sum() <= c.budget


def test_rounds_alternate_the_order_of_the_two_sides():
    log = []
    c = timing.compare(lambda: log.append("A"), lambda: log.append("B"), budget=0.01, min_round=0.001)
    a, b = "A" * c.loops_baseline, "B" * c.loops_candidate
    # The timed rounds are the last calls: A B, B A, A B, ... (warm-up and calibration before).
    expected = "".join(a + b if r % 2 == 0 else b + a for r in range(c.rounds))
    assert "".join(log).endswith(expected)


@pytest.mark.parametrize(
    "loops, per_call, budget, expected",
    [
        ([1, 20], [0.05, 0.001], 1.0, [1, 50]),  # the fast side is stretched to 50 ms
        ([20, 1], [0.001, 0.05], 1.0, [50, 1]),  # whichever side is the fast one
        ([1, 20], [0.05, 0.001], 0.3, [1, 20]),  # 6 rounds of 50 ms + 20 ms barely fit: no room
        ([1, 20], [0.05, 0.001], 0.48, [1, 30]),  # room for 30 ms of the 50
        ([20, 25], [0.001, 0.0008], 1.0, [20, 25]),  # already balanced
    ],
)
def test_faster_side_is_stretched_as_far_as_the_budget_allows(loops, per_call, budget, expected):
    assert timing._balance(loops, per_call, budget, 6) == expected


def test_identical_functions_give_an_interval_containing_one():
    # 99%: a 95% interval misses the truth 1 time in 20 by design; a test must not.
    c = timing.compare(work, work, budget=0.5, confidence=0.99)
    assert c.rounds >= 8  # the fewest rounds for which a 99% interval exists
    assert c.low <= 1 <= c.high
    assert 0.5 < c.ratio < 2


def test_one_disturbed_round_cannot_decide_the_result():
    # The candidate is the baseline, except that once, in the middle of the timed
    # rounds, one call is held up for 0.6 s (as a competing process might do). A
    # ratio of mean times drops under 0.5; the median of paired ratios must not notice.
    start = []

    def hiccup():
        now = timing._perf_counter()
        if not start:
            start.append(now)
        elif len(start) == 1 and now - start[0] > 0.4:
            start.append(now)
            _spin(0.6)
        return work()

    c = timing.compare(work, hiccup, budget=1.0, confidence=0.99)
    assert len(start) == 2, "the hold-up never happened"
    assert min(c.ratios) < 0.3, "the hold-up fell outside the timed rounds"
    assert statistics.mean(c.baseline_times) / statistics.mean(c.candidate_times) < 0.5
    # Both sides do the same work: the median stays near 1. Not within 0.7-1.4, which a
    # fresh-clone `make test` missed once (1.43x over 8 rounds of 2 ms calls, beside the other
    # worker's self-test, load 2.4), but as far from the mean's ratio as the test of two
    # equal sides above allows.
    assert 0.5 < c.ratio < 2


def test_a_slow_side_after_a_slow_warm_up_is_calibrated_with_one_reading():
    calls = {"slow": 0, "stalled": 0}

    def slow():  # 5 ms a call: ten times a 0.5 ms round's minimum
        calls["slow"] += 1
        time.sleep(0.005)

    def stalled_once():  # a one-off stall in its first calibration call, fast otherwise
        calls["stalled"] += 1
        time.sleep(0.005 if calls["stalled"] == 2 else 0.0002)

    c = timing.compare(slow, stalled_once, budget=0.05, min_round=0.0005)
    # warm-up, one calibration call, then the rounds: the warm-up was the first slow reading
    assert c.loops_baseline == 1 and calls["slow"] == 1 + 1 + c.rounds
    # a fast warm-up leaves the stalled reading to be confirmed by a second calibration call
    assert calls["stalled"] >= 1 + 2 + c.rounds * c.loops_candidate


def test_calibration_takes_the_calls_a_short_round_predicts_not_the_next_1_2_5_step():
    # 0.99 ms a call: 20 calls last 19.8 ms, just short of the 20 ms minimum, where the
    # 1-2-5 steps jump to 50 calls a round (each with a fresh input under make_args).
    calls = []

    def run(n):
        calls.append(n)
        return n * 0.00099

    assert timing._calibrate(run, 0.02) == (23, pytest.approx(0.00099))
    assert calls == [1, 10, 23, 23]  # 10 * 0.02 * 1.1 / 9.9 ms = 22.2; confirmed by a second round
    # A round still short after a prediction (the machine sped up) predicts again, and a
    # one-off slow round is never taken without its confirming reading.
    readings = iter([0.001, 0.015, 0.019, 0.05, 0.0185, 0.021, 0.0205])
    counts = []
    assert timing._calibrate(lambda n: counts.append(n) or next(readings), 0.02) == (22, pytest.approx(0.0205 / 22))
    assert counts == [1, 10, 15, 18, 18, 22, 22]


def test_a_comparison_on_fresh_inputs_draws_about_the_inputs_its_rounds_need():
    made = {"n": 0}

    def make_args():
        made["n"] += 1
        return ()

    c = timing.compare(lambda: _spin(0.004), lambda: _spin(0.00099), make_args=make_args, budget=0.05,
                       min_round=0.02, warmup=0)
    # Each side's part of a round lasts the minimum with 10% to spare at most (a busy machine
    # stretches a spin, never shortens it): 23 calls of the candidate, not the 50 that the 1-2-5
    # steps gave, and the calibration drew 1 + 10 + 23 + 23 inputs for it, not 138.
    assert c.loops_candidate <= 23 and c.loops_baseline <= 6
    assert made["n"] - c.rounds * (c.loops_baseline + c.loops_candidate) <= 100


@pytest.mark.parametrize("warmup", [1, 0])
def test_numba_compile_time_is_never_counted(warmup):
    numba = pytest.importorskip("numba")

    @numba.njit
    def jit_sum(a):  # fresh function: its first call compiles
        total = 0.0
        for v in a:
            total += v
        return total

    def py_sum(a):
        total = 0.0
        for v in a:
            total += v
        return total

    durations = []

    def candidate(a):
        t0 = timing._perf_counter()
        result = jit_sum(a)
        durations.append(timing._perf_counter() - t0)
        return result

    x = np.random.default_rng(0).random(200_000)
    c = timing.compare(py_sum, candidate, args=(x,), budget=0.3, min_round=0.002, warmup=warmup)
    assert len(jit_sum.signatures) == 1
    compile_seconds = jit_sum.get_metadata(jit_sum.signatures[0])["timers"]["compiler_lock"]
    # The compiling call was the first one, and the timed rounds are the last
    # rounds * loops calls (see the test on the order of rounds): it is not among them.
    assert durations[0] >= compile_seconds
    assert len(durations) - c.rounds * c.loops_candidate >= 1
    # Without a warm-up the compiling call lands in the calibration, which must
    # not let that one slow call fix the loop count at 1.
    assert min(c.candidate_times) * c.loops_candidate >= 0.002 * 0.5
    assert c.ratio >= 10 and c.low > 1


def test_microsecond_calls_carry_a_warning(membership):
    c = timing.compare(len, len, args=((1, 2, 3),), budget=0.02, min_round=0.002)
    assert c.warning is not None
    assert "ratios of microsecond calls move under load; use larger inputs" in c.warning
    assert "warning" in repr(c)
    fast = min(membership.baseline_seconds, membership.candidate_seconds)
    assert (membership.warning is None) == (fast >= 1e-3)


def test_repr_reads_like_the_documentation():
    c = timing.Comparison(
        ratio=37.2, low=35.9, high=38.4, rounds=21, ratios=(37.2,) * 21,
        baseline_seconds=3.1e-3, candidate_seconds=84.0e-6,
        loops_baseline=7, loops_candidate=250, budget=1.0,
    )
    assert repr(c) == (
        "Comparison(speed-up 37.2x, 95% CI [35.9, 38.4], 21 rounds; "
        "baseline 3.10 ms/call, candidate 84.0 us/call)"
    )


# ---------------------------------------------------------------------------
# compare: fresh inputs and checks
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["value", "id"])
def test_make_args_leaves_nothing_for_a_cache_to_find(key):
    def slow(n):
        return work(n)

    cache = {}
    hits = []

    def memoised(n):
        k = n if key == "value" else id(n)
        if k in cache:
            hits.append(k)
            return cache[k][1]
        result = slow(n)
        cache[k] = (n, result)  # holding n keeps its id from being reused
        return result

    # With the same input every time, the cache makes the candidate look enormously faster...
    cheat = timing.compare(slow, memoised, args=(30_000,), budget=0.2)
    assert cheat.ratio > 10
    # ...with fresh inputs for every call it gains nothing.
    counter = itertools.count()
    cache.clear()
    hits.clear()
    fair = timing.compare(
        slow, memoised, make_args=lambda: (30_000 + next(counter),), budget=0.5, confidence=0.99
    )
    # Not one call was answered from the cache...
    assert hits == []
    # ...so there is no demonstrable gain: the interval reaches down to "no
    # faster" (on a quiet machine the ratio is about 1; on an oversubscribed one,
    # single 20 ms rounds swing widely and the interval widens instead). At 99%,
    # because a 95% interval wrongly excludes 1 one time in 40 on this side.
    assert fair.low <= 1 < cheat.low


def test_every_call_gets_an_input_never_seen_before():
    made = []
    seen = {"baseline": [], "candidate": []}

    def make_args():
        made.append(len(made))
        return (made[-1],)

    def baseline(i):
        seen["baseline"].append(i)
        return work(3_000)

    def candidate(i):
        seen["candidate"].append(i)
        return work(3_000)

    c = timing.compare(baseline, candidate, make_args=make_args, budget=0.05, min_round=0.002)
    every_input = seen["baseline"] + seen["candidate"]
    assert len(every_input) == len(made)  # one make_args call per function call
    assert len(set(every_input)) == len(every_input)  # never the same input twice
    assert len(seen["candidate"]) >= c.rounds * c.loops_candidate + 1  # + warm-up


def test_input_generation_is_not_timed():
    def expensive_inputs():
        work(15_000)  # about 1 ms of work to make the input...
        return (700,)

    def cheap(n):  # ...for a call that takes tens of microseconds
        return work(n)

    making = timing.bench(expensive_inputs, budget=0.05).minimum
    c = timing.compare(cheap, cheap, make_args=expensive_inputs, budget=0.02, min_round=0.001)
    # Minima: a preempted round only ever looks slower, so the fastest round is
    # the one that tells what was inside the clock.
    assert min(c.candidate_times) < making / 4
    assert min(c.baseline_times) < making / 4



def test_slow_inputs_cannot_stretch_the_rounds_past_twice_the_budget():
    # Each input takes 50 ms to make (sleeping, so load does not change it); each
    # side's part of a round is one call of about 0.5-1 ms. A budget of 0.2 s of timed calls
    # would allow ~100 rounds of 2 ms, i.e. 10 s of making inputs. The wall limit
    # (twice the budget) stops the rounds at the minimum instead.
    def slow_inputs():
        time.sleep(0.05)
        return (15_000,)

    # min_round well under one call (0.5 ms quiet, more under load): one call on the side that
    # read slower while calibrating; the other side is balanced to it, so under load (a
    # calibration reading three times the other's, make test beside two self-tests) it may take
    # a few calls.
    c = timing.compare(work, work, make_args=slow_inputs, budget=0.2, min_round=0.0001)
    assert c.rounds == timing._min_rounds(0.95)
    assert min(c.loops_baseline, c.loops_candidate) == 1

@pytest.mark.parametrize("fresh", [True, False])
def test_check_sees_every_candidate_result_and_no_baseline_result(fresh):
    calls = []
    checked = []

    def baseline(i):
        return ("baseline", i)

    def candidate(i):
        calls.append(i)
        return ("candidate", i)

    def check(args, result):
        checked.append((args, result))

    counter = itertools.count()
    options = {"make_args": lambda: (next(counter),)} if fresh else {"args": (7,)}
    c = timing.compare(baseline, candidate, check=check, budget=0.01, min_round=0.001, **options)
    assert len(checked) == len(calls) >= c.rounds * c.loops_candidate + 1
    assert all(result == ("candidate", args[0]) for args, result in checked)
    if not fresh:
        assert {args for args, _ in checked} == {(7,)}


def test_a_failing_check_stops_the_comparison():
    def check(args, result):
        assert result == sum(args[0]), "candidate gives the wrong total"

    with pytest.raises(AssertionError, match="wrong total"):
        timing.compare(sum, lambda xs: sum(xs) + 1, args=([1, 2, 3],), check=check, budget=0.01)


@pytest.mark.parametrize("enabled", [True, False])
def test_gc_is_off_while_timing_and_restored_afterwards(enabled):
    states = []

    def probe():
        states.append(gc.isenabled())

    if not enabled:
        gc.disable()
    try:
        timing.bench(probe, budget=0.01)
        timing.compare(probe, probe, budget=0.01, min_round=0.001)
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
    # Only bench's warm-up call may run with the collector on.
    assert states.count(True) <= 1
    assert len(states) > 1000


# ---------------------------------------------------------------------------
# Clocks
# ---------------------------------------------------------------------------


def test_replacing_the_time_functions_changes_no_measurement(monkeypatch):
    real_perf, real_cpu = time.perf_counter, time.process_time
    monkeypatch.setattr(time, "perf_counter", lambda: real_perf() * 1e6)
    monkeypatch.setattr(time, "process_time", lambda: real_cpu() * 1e6)
    assert timing.clock_tampered()

    c = timing.compare(work, work, budget=0.1, min_round=0.005)
    assert c.baseline_seconds < 0.2  # about 2 ms; a clock a million times fast would say hours
    assert 0.1 < c.ratio < 10
    assert timing.bench(work, budget=0.05).median < 0.2
    sw = timing.stages()
    with sw("nap"):
        time.sleep(0.01)
    assert 0.005 < sw.total < 1

    monkeypatch.undo()
    assert not timing.clock_tampered()


def test_a_candidate_that_freezes_the_clock_gains_nothing(monkeypatch):
    monkeypatch.setattr(time, "perf_counter", time.perf_counter)  # restored afterwards

    def cheater():
        time.perf_counter = lambda: 0.0  # "every call of mine takes no time"
        return work()

    c = timing.compare(work, cheater, budget=0.2)
    assert timing.clock_tampered()
    assert 0.25 < c.ratio < 4  # with the frozen clock it would be infinite


def test_captured_clocks_must_be_the_real_ones(monkeypatch):
    # Replaced before import would look like this: both names agree on a wrong clock.
    monkeypatch.setattr(time, "perf_counter", time.time)
    monkeypatch.setattr(timing, "_perf_counter", time.time)
    assert timing.clock_tampered()


# ---------------------------------------------------------------------------
# Stopwatch
# ---------------------------------------------------------------------------


def test_waiting_stage_has_little_cpu_and_computing_stage_has_much():
    sw = timing.stages()
    with sw("sleep"):
        time.sleep(0.1)
    with sw("busy"):
        work(1_000_000)
    wall, cpu = sw.seconds, sw.cpu_seconds
    assert wall["sleep"] >= 0.09
    # process_time counts every thread of the process: in the full suite, threads left by
    # earlier tests (kernel clients, log drains) add a few milliseconds (12.7 ms seen in
    # 100 ms). A sleeping stage still uses far less CPU than wall time.
    assert cpu["sleep"] < 0.3 * wall["sleep"]
    # One thread cannot use more CPU than wall time; on a loaded machine it gets
    # less (a quarter of a core with eight jobs on two cores), but never as
    # little as a sleeper.
    assert 0.1 * wall["busy"] <= cpu["busy"] <= 1.05 * wall["busy"] + 0.01
    assert cpu["busy"] / wall["busy"] > 2 * cpu["sleep"] / wall["sleep"]


def test_table_shape_order_and_shares():
    sw = timing.stages()
    for name in ["b", "a", "b"]:
        with sw(name):
            time.sleep(0.01)
    table = sw.table()
    assert list(table.columns) == ["seconds", "cpu_seconds", "share"]
    assert table.index.name == "stage"
    assert list(table.index) == ["b", "a"]
    assert table["share"].sum() == pytest.approx(1.0)
    assert sw.total == pytest.approx(table["seconds"].sum())
    assert table.loc["b", "seconds"] >= 0.02  # two stages of 10 ms accumulate
    assert table.loc["b", "seconds"] == pytest.approx(sw.seconds["b"])


def test_empty_stopwatch_has_an_empty_table():
    sw = timing.stages()
    assert sw.total == 0
    table = sw.table()
    assert table.empty and list(table.columns) == ["seconds", "cpu_seconds", "share"]


def test_a_failing_stage_is_still_timed_and_the_error_propagates():
    sw = timing.stages()
    with pytest.raises(KeyError):
        with sw("lookup"):
            time.sleep(0.01)
            {}["missing"]
    assert sw.seconds["lookup"] >= 0.009
    with sw("after"):  # the stopwatch is usable again
        pass


def test_stages_do_not_nest():
    sw = timing.stages()
    with sw("outer"):
        with pytest.raises(RuntimeError, match="do not nest"):
            with sw("inner"):
                pass


@pytest.mark.parametrize("name, error", [(5, TypeError), ("", ValueError), ("  ", ValueError)])
def test_bad_stage_names_are_rejected(name, error):
    with pytest.raises(error, match="stage name"):
        timing.stages()(name)


def test_stage_dicts_are_copies():
    sw = timing.stages()
    with sw("a"):
        pass
    sw.seconds["a"] = 99.0
    assert sw.seconds["a"] < 1


def test_plot_draws_one_bar_per_stage_in_order():
    import matplotlib.pyplot as plt

    sw = timing.stages()
    for name in ["load", "clean", "save"]:
        with sw(name):
            pass
    fig, ax = plt.subplots()
    try:
        assert sw.plot(ax=ax) is ax
        assert [t.get_text() for t in ax.get_yticklabels()] == ["load", "clean", "save"]
        assert len(ax.patches) == 6  # a wall bar and a CPU bar per stage
        assert sw.plot().get_xlabel() == "seconds"
    finally:
        plt.close("all")


# ---------------------------------------------------------------------------
# bench
# ---------------------------------------------------------------------------


def test_bench_fields_are_consistent():
    r = timing.bench(work, 3_000, budget=0.1)
    assert r.loops >= 1
    assert r.rounds == len(r.times) >= 5
    assert all(t > 0 for t in r.times)
    assert r.minimum == min(r.times) <= r.median
    assert r.median == pytest.approx(statistics.median(r.times))
    assert r.iqr >= 0
    assert "ms/call" in repr(r) or "us/call" in repr(r)
    round_seconds = [t * r.loops for t in r.times]
    if r.rounds > 5:
        assert sum(round_seconds[:-1]) <= 0.1


def test_bench_passes_arguments_and_measures_the_call():
    small = timing.bench(work, n=1_000, budget=0.05)
    large = timing.bench(work, n=100_000, budget=0.1)
    assert large.median / small.median > 10  # true ratio about 100


def test_bench_never_times_the_first_call():
    calls = []

    def jit_like():
        if not calls:
            time.sleep(0.2)  # a one-off cost, as compiling would be
        calls.append(1)

    r = timing.bench(jit_like, budget=0.05)
    assert max(r.times) * r.loops < 0.1


def test_bench_repr():
    r = timing.BenchResult(median=3.1e-3, iqr=5e-5, minimum=3e-3, rounds=12, loops=50, times=(3.1e-3,) * 12)
    assert repr(r) == "BenchResult(median 3.10 ms/call, IQR 50.0 us, min 3.00 ms; 12 rounds x 50 loops)"


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def _one():
    return 1


@pytest.mark.parametrize(
    "call_kwargs, error, message",
    [
        ({"baseline": 5}, TypeError, "baseline must be a function"),
        ({"candidate": _one()}, TypeError, "candidate must be a function"),
        ({"budget": 0}, ValueError, "budget must be a positive"),
        ({"budget": -1.0}, ValueError, "budget must be a positive"),
        ({"budget": float("nan")}, ValueError, "budget must be a positive"),
        ({"budget": "1s"}, TypeError, "budget must be a number"),
        ({"args": (1,), "make_args": lambda: (1,)}, ValueError, "not both"),
        ({"args": 5}, TypeError, r"args=\(x,\)"),
        ({"make_args": "abc"}, TypeError, "make_args must be a function"),
        ({"make_args": lambda: 5}, TypeError, "must return a tuple"),
        ({"make_args": lambda: [5]}, TypeError, "must return a tuple"),
        ({"check": True}, TypeError, "check must be a function"),
        ({"kwargs": [1]}, TypeError, "kwargs must be a dict"),
        ({"warmup": -1}, ValueError, "warmup"),
        ({"warmup": 1.5}, ValueError, "warmup"),
        ({"min_round": 0}, ValueError, "min_round"),
        ({"confidence": 1.0}, ValueError, "confidence"),
        ({"confidence": 0}, ValueError, "confidence"),
    ],
)
def test_compare_rejects_bad_input_clearly(call_kwargs, error, message):
    options = {"baseline": abs, "candidate": abs, "args": (-1,), "budget": 0.01, "min_round": 0.001}
    if "make_args" in call_kwargs and "args" not in call_kwargs:
        options.pop("args")
    options.update(call_kwargs)
    with pytest.raises(error, match=message):
        timing.compare(**options)


@pytest.mark.parametrize(
    "fn, budget, error, message",
    [
        (None, 0.1, TypeError, "fn must be a function"),
        (_one, 0, ValueError, "budget must be a positive"),
        (_one, float("inf"), ValueError, "budget must be a positive"),
    ],
)
def test_bench_rejects_bad_input_clearly(fn, budget, error, message):
    with pytest.raises(error, match=message):
        timing.bench(fn, budget=budget)


# ---------------------------------------------------------------------------
# The confidence interval of the median
# ---------------------------------------------------------------------------

ratios = st.lists(st.floats(0.01, 1e4, allow_nan=False), min_size=1, max_size=200)


@given(ratios, st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_interval_brackets_the_median_with_measured_values(values, confidence):
    low, median, high = timing._median_ci(values, confidence)
    assert low <= median <= high
    assert low in values and high in values
    assert median == statistics.median(values)


@given(ratios)
def test_higher_confidence_never_narrows_the_interval(values):
    low90, _, high90 = timing._median_ci(values, 0.90)
    low99, _, high99 = timing._median_ci(values, 0.99)
    assert low99 <= low90 and high90 <= high99


@given(
    st.lists(st.floats(0.5, 2.0), min_size=5, max_size=99).filter(lambda v: len(v) % 2 == 1),
    st.integers(0, 98),
    st.floats(1e-6, 1e9),
)
def test_one_outlier_moves_the_median_at_most_one_place(values, where, outlier):
    ordered = sorted(values)
    mid = len(values) // 2
    changed = list(values)
    changed[where % len(values)] = outlier
    _, median, _ = timing._median_ci(changed, 0.95)
    assert ordered[mid - 1] <= median <= ordered[mid + 1]


def test_interval_covers_the_true_median_as_often_as_promised():
    rng = np.random.default_rng(20240601)
    # Skewed, heavy-tailed ratios with true median 1, as a noisy machine gives them.
    samples = np.exp(rng.standard_t(df=3, size=(4000, 21)) * 0.1)
    covered = 0
    for row in samples:
        low, _, high = timing._median_ci(list(row), 0.95)
        covered += low <= 1.0 <= high
    assert covered / len(samples) >= 0.94  # exact coverage for 21 values is 97.3%


@pytest.mark.parametrize("confidence, rounds", [(0.9, 5), (0.95, 6), (0.99, 8)])
def test_minimum_rounds_allow_the_requested_confidence(confidence, rounds):
    assert timing._min_rounds(confidence) == rounds


# ---------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------


def test_environment_records_the_benchmark_context():
    env = timing.environment()
    for key in ["cpu", "cores", "python", "platform", "versions", "blas", "load_average", "timestamp"]:
        assert key in env
    assert isinstance(env["cpu"], str) and env["cpu"]
    assert env["cores"]["logical"] == os.cpu_count()
    assert 1 <= env["cores"]["available"] <= os.cpu_count()
    assert platform.python_version() in env["python"]
    assert env["versions"]["numpy"] == np.__version__
    assert env["versions"]["pandas"] == pd.__version__
    assert isinstance(env["blas"], list)
    assert all("num_threads" in b for b in env["blas"])
    load = env["load_average"]
    assert load is None or (len(load) == 3 and all(x >= 0 for x in load))
    assert datetime.datetime.fromisoformat(env["timestamp"]).tzinfo is not None
    assert env["clock_tampered"] is False


def test_format_environment_is_readable_text():
    env = {
        "cpu": "Test CPU 9000",
        "cores": {"logical": 4, "available": 2, "physical": None},
        "python": "CPython 3.11.7",
        "platform": "Linux",
        "versions": {"numpy": "1.0", "numba": None},
        "blas": [{"internal_api": "openblas", "version": "0.3", "num_threads": 2, "user_api": "blas"}],
        "load_average": None,
        "timestamp": "2024-01-01T00:00:00+00:00",
    }
    text = timing.format_environment(env)
    assert text.splitlines()[0] == "CPU: Test CPU 9000"
    assert "4 logical, 2 available" in text
    assert "numpy 1.0" in text and "numba" not in text
    assert "openblas 0.3 (blas, 2 threads)" in text
    assert "Load average: not available" in text
    # one thread reads in the singular; a pool that reports no version shows none
    env["blas"] = [{"internal_api": "openblas", "version": "0.3", "num_threads": 1,
                    "user_api": "blas"},
                   {"internal_api": "openmp", "version": None, "num_threads": 1,
                    "user_api": "openmp"}]
    assert "BLAS: openblas 0.3 (blas, 1 thread); openmp (openmp, 1 thread)" in (
        timing.format_environment(env))
    assert timing.format_environment().startswith("CPU: ")


# --- limit_threads: every pool set, the same for both sides ---------------------------

def test_limit_threads_sets_every_pool_and_restores_them():
    from threadpoolctl import threadpool_info

    before = {p["filepath"]: p["num_threads"] for p in threadpool_info()}
    with timing.limit_threads(1) as n:
        assert n == 1
        assert {p["num_threads"] for p in threadpool_info()} == {1}
    after = {p["filepath"]: p["num_threads"] for p in threadpool_info()}
    # A runtime loaded inside the block (Numba's OpenMP layer) is not one to restore.
    assert {path: after[path] for path in before} == before


def test_limit_threads_also_limits_the_openmp_runtime_numba_loads_late():
    # Numba's threading layer (and the OpenMP runtime it may bring) starts on first use;
    # threadpoolctl only limits what is loaded when it starts. A fresh process, so that
    # the layer has not been launched by an earlier test.
    code = (
        "import numba, numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "from course_lib import timing\n"
        "with timing.limit_threads(1):\n"
        "    pools = {p['internal_api']: p['num_threads'] for p in threadpool_info()}\n"
        "    print(pools, numba.get_num_threads())\n"
        "    assert set(pools.values()) == {1} and numba.get_num_threads() == 1, pools\n"
    )
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "NUMBA_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr[-2000:]


def test_limit_threads_rejects_nonsense():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="whole number"):
            with timing.limit_threads(bad):
                pass


def _minor_faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _churn(n: int) -> float:
    return sum(float(i) for i in list(range(n)))  # n fresh floats and a list, freed on return


def test_warm_heap_keeps_freed_memory_mapped_between_calls():
    # 200,000 floats and their list: about 6 MB of small objects and 1.6 MB from malloc per
    # call. Inside the block the second and later calls reuse the first call's pages.
    with timing.warm_heap(32):
        _churn(200_000)
        before = _minor_faults()
        for _ in range(5):
            _churn(200_000)
        faults = _minor_faults() - before
    assert faults < 200, f"{faults} page faults in 5 calls inside warm_heap (a cold call takes ~1,800)"


def test_warm_heap_rejects_nonsense():
    for bad in (-1, 1.5, True, "64"):
        with pytest.raises(ValueError, match="whole number of MiB"):
            with timing.warm_heap(bad):
                pass
