import math
import time
from itertools import repeat

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from course_lib import complexity


# --- pure-Python workloads sized so every call takes at least about a millisecond -------
# The real-timing tests use clock="cpu": this machine is shared with other busy
# processes, which stretch long wall-clock calls more than short ones and bend the slope.


def linear(n):
    return sum(range(n))


def quadratic(n):
    # repeat() rather than range(): no int objects, so every step costs the same at any n
    # (range(n) hands out cached small ints below 257, which made small n look cheap).
    total = 0
    for _ in repeat(None, n):
        for _ in repeat(None, n):
            total += 1
    return total


LINEAR_SIZES = [200_000, 400_000, 800_000, 1_600_000]
QUADRATIC_SIZES = [200, 400, 800, 1_600]


@pytest.fixture(scope="module")
def linear_table():
    return complexity.doubling(linear, lambda n: n, LINEAR_SIZES, budget=0.08, clock="cpu")


@pytest.fixture(scope="module")
def quadratic_table():
    # budget=0.5: even the largest size (about 0.1 s a call) gets several interleaved rounds,
    # and the fastest is kept. process_time shuts out other processes' time but not their
    # effect on this one's speed (a busy hyper-thread sibling): one lone call can run 1.5x slow.
    return complexity.doubling(quadratic, lambda n: n, QUADRATIC_SIZES, budget=0.5, clock="cpu")


def test_exponent_recovers_one_for_a_linear_function(linear_table):
    fit = complexity.exponent(linear_table)
    assert fit.slope == pytest.approx(1.0, abs=0.3)
    assert fit.verdict == "about O(n)"


def test_exponent_recovers_two_for_a_quadratic_function(quadratic_table):
    fit = complexity.exponent(quadratic_table)
    assert fit.slope == pytest.approx(2.0, abs=0.3)
    assert fit.verdict == "about O(n^2)"


def test_exponent_can_run_the_doubling_experiment_itself():
    # The three larger sizes (calls of 4 ms and up), each with several rounds: with
    # budget=0.05 the largest was timed by one call, and in CI a busy neighbour made that
    # one call slow enough to fit a slope of 2.33.
    fit = complexity.exponent(quadratic, lambda n: n, QUADRATIC_SIZES[1:], budget=0.4, clock="cpu")
    assert fit.slope == pytest.approx(2.0, abs=0.3)


def test_the_wall_clock_counts_waiting_and_the_cpu_clock_does_not():
    def wait(n):
        time.sleep(n * 1e-3)  # sleep() never returns early: at least n milliseconds

    sizes = [2, 4, 8, 16]
    wall = complexity.doubling(wait, lambda n: n, sizes, budget=0.02)
    start = time.perf_counter()
    cpu = complexity.doubling(wait, lambda n: n, sizes, budget=0.02, clock="cpu")
    # The budget is wall time even on the CPU clock: sleeping calls cost little CPU, and
    # calibrating on CPU time would have run hundreds of them per size.
    assert time.perf_counter() - start < 2.0
    assert (wall["seconds"] >= 0.95e-3 * wall["n"]).all()
    assert (cpu["seconds"] < 0.3 * wall["seconds"]).all()
    assert wall.attrs["clock"] == "wall" and cpu.attrs["clock"] == "cpu"


def test_doubling_ratios_are_near_two_for_linear_and_four_for_quadratic(linear_table, quadratic_table):
    # The median ratio, so one disturbed size cannot fail the test on a busy machine.
    assert 1.5 < linear_table["ratio"].median() < 2.7
    assert 3.0 < quadratic_table["ratio"].median() < 5.5


def test_doubling_table_shape(linear_table):
    assert list(linear_table.columns) == ["n", "seconds", "ratio"]
    assert linear_table["n"].tolist() == LINEAR_SIZES
    assert math.isnan(linear_table["ratio"].iloc[0])
    assert (linear_table["seconds"] > 0).all()
    expected = linear_table["seconds"].iloc[1:].to_numpy() / linear_table["seconds"].iloc[:-1].to_numpy()
    np.testing.assert_allclose(linear_table["ratio"].iloc[1:], expected)


class FakeClock:
    """A clock that moves only when the code under test says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_doubling_times_only_fn_not_make_input(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(complexity, "_perf_counter", clock)
    built = []

    def make_input(n):
        built.append(n)
        clock.now += 100.0  # building the input is slow, and must not be counted
        return list(range(n))

    def fn(x):
        clock.now += 1e-6 * len(x)  # exactly one microsecond per element

    table = complexity.doubling(fn, make_input, [1_000, 2_000, 4_000], budget=0.05)
    assert built == [1_000, 2_000, 4_000]  # one input per size, built before timing
    np.testing.assert_allclose(table["seconds"], [1e-3, 2e-3, 4e-3])
    np.testing.assert_allclose(table["ratio"].iloc[1:], [2.0, 2.0])


def test_doubling_calls_fn_repeatedly_within_the_budget(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(complexity, "_perf_counter", clock)
    calls = {"n": 0}

    def fn(x):
        calls["n"] += 1
        clock.now += 1e-3

    complexity.doubling(fn, lambda n: n, [1, 2], budget=0.1)
    # About budget / (1 ms) = 100 timed calls per size, plus a warm-up each.
    assert 150 <= calls["n"] <= 220


def test_rounds_take_the_sizes_in_turn_and_the_fastest_round_counts(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(complexity, "_perf_counter", clock)
    seen = []

    def fn(x):
        seen.append(x)
        burst = 5.0 if 2 < len(seen) <= 14 else 1.0  # another process busy for a while
        clock.now += burst * 1e-3 * x

    table = complexity.doubling(fn, lambda n: n, [1, 2], budget=0.05)
    np.testing.assert_allclose(table["seconds"], [1e-3, 2e-3])  # the undisturbed rounds
    runs = [x for i, x in enumerate(seen) if i == 0 or seen[i - 1] != x]
    assert runs[:6] == [1, 2, 1, 2, 1, 2]  # warm-ups, then round after round in turn


def test_a_call_slower_than_the_budget_is_timed_once(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(complexity, "_perf_counter", clock)
    calls = {"n": 0}

    def fn(x):
        calls["n"] += 1
        clock.now += 1.0

    table = complexity.doubling(fn, lambda n: n, [1, 2], budget=0.2)
    assert calls["n"] == 2
    np.testing.assert_allclose(table["seconds"], [1.0, 1.0])


@pytest.mark.parametrize("clock", ["wall", "cpu"])
def test_rebinding_the_time_module_clocks_changes_nothing(monkeypatch, clock):
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(time, "process_time", lambda: 0.0)
    table = complexity.doubling(linear, lambda n: n, [20_000, 40_000], budget=0.01, clock=clock)
    assert (table["seconds"] > 0).all()


def test_the_cpu_clock_is_the_module_process_time(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(complexity, "_process_time", clock)
    monkeypatch.setattr(complexity, "_perf_counter", clock)  # the budget is kept in wall time

    def fn(x):
        clock.now += 1e-3 * x

    table = complexity.doubling(fn, lambda n: n, [1, 2, 4], budget=0.05, clock="cpu")
    np.testing.assert_allclose(table["seconds"], [1e-3, 2e-3, 4e-3])


# --- the fit and its verdict on exact power laws ---------------------------------------


def power_table(k, c=1e-9, sizes=(1_000, 2_000, 4_000, 8_000, 16_000)):
    return pd.DataFrame({"n": list(sizes), "seconds": [c * n**k for n in sizes]})


@pytest.mark.parametrize(
    "k, verdict",
    [
        (0.0, "about O(1)"),
        (0.3, "about O(1)"),
        (-0.4, "about O(1)"),
        (0.51, "about O(n)"),
        (1.0, "about O(n)"),
        (1.49, "about O(n)"),
        (2.0, "about O(n^2)"),
        (2.49, "about O(n^2)"),
        (2.51, "about O(n^3)"),
        (3.0, "about O(n^3)"),
        (4.1, "about O(n^4)"),
    ],
)
def test_verdict_names_the_nearest_whole_exponent(k, verdict):
    fit = complexity.exponent(power_table(k))
    assert fit.slope == pytest.approx(k, abs=1e-9)
    assert fit.verdict == verdict


def test_n_log_n_fits_a_slope_a_little_above_one():
    sizes = [1_000 * 2**i for i in range(11)]  # 1e3 .. 1e6
    table = pd.DataFrame({"n": sizes, "seconds": [1e-8 * n * math.log(n) for n in sizes]})
    fit = complexity.exponent(table)
    assert 1.05 < fit.slope < 1.2
    assert fit.verdict == "about O(n)"


@settings(max_examples=50, deadline=None)
@given(st.floats(-1.0, 5.0), st.floats(1e-12, 1e-3))
def test_exact_power_laws_are_recovered(k, c):
    fit = complexity.exponent(power_table(k, c))
    assert fit.slope == pytest.approx(k, abs=1e-6)
    assert fit.intercept == pytest.approx(math.log10(c), abs=1e-6)
    assert fit.seconds(5_000) == pytest.approx(c * 5_000**k, rel=1e-6)


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sizes, error, match",
    [
        ([1_000], ValueError, "at least two"),
        ([], ValueError, "at least two"),
        ([0, 1_000], ValueError, "positive"),
        ([-5, 10], ValueError, "positive"),
        ([2_000, 1_000], ValueError, "increasing"),
        ([1_000, 1_000], ValueError, "increasing"),
        ([1_000, 2_500.5], TypeError, "whole numbers"),
        ("1000", TypeError, "sequence"),
        (1_000, TypeError, "sequence"),
    ],
)
def test_bad_sizes_are_rejected(sizes, error, match):
    with pytest.raises(error, match=match):
        complexity.doubling(linear, lambda n: n, sizes)


@pytest.mark.parametrize("budget", [0, -1.0, float("inf"), float("nan")])
def test_bad_budget_is_rejected(budget):
    with pytest.raises(ValueError, match="budget"):
        complexity.doubling(linear, lambda n: n, [10, 20], budget=budget)


def test_an_unknown_clock_is_rejected():
    with pytest.raises(ValueError, match="'wall'.*'cpu'"):
        complexity.doubling(linear, lambda n: n, [10, 20], clock="gpu")


@pytest.mark.parametrize("fn, make_input", [(42, lambda n: n), (linear, "range")])
def test_non_callables_are_rejected(fn, make_input):
    with pytest.raises(TypeError, match="callable"):
        complexity.doubling(fn, make_input, [10, 20])


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: complexity.exponent(pd.DataFrame({"n": [1, 2]})), ValueError, "seconds"),
        (lambda: complexity.exponent(pd.DataFrame({"n": [1], "seconds": [1.0]})), ValueError, "two sizes"),
        (lambda: complexity.exponent(pd.DataFrame({"n": [1, 2], "seconds": [0.0, 1.0]})), ValueError, "too quick"),
        (lambda: complexity.exponent(pd.DataFrame({"n": [0, 2], "seconds": [1.0, 1.0]})), ValueError, "positive"),
        (lambda: complexity.exponent(pd.DataFrame({"n": [4, 4], "seconds": [1.0, 2.0]})), ValueError, "differ"),
        (lambda: complexity.exponent(power_table(1), lambda n: n, [1, 2]), TypeError, "not both"),
        (lambda: complexity.exponent(linear), TypeError, "make_input and sizes"),
        (lambda: complexity.exponent([1, 2, 3]), TypeError, "DataFrame"),
    ],
)
def test_exponent_rejects_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- the plot --------------------------------------------------------------------------


def test_plot_draws_points_and_labelled_fit_on_log_axes():
    table = power_table(2)
    ax = complexity.plot(table)
    try:
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        labels = [line.get_label() for line in ax.get_lines()]
        assert "measured" in labels
        assert any("2.00" in label and "O(n^2)" in label for label in labels)
        np.testing.assert_allclose(ax.get_lines()[0].get_xdata(), table["n"])
    finally:
        plt.close(ax.figure)


def test_plot_uses_the_given_fit_and_axes():
    fig, ax = plt.subplots()
    try:
        fit = complexity.Fit(slope=1.0, intercept=-6.0, verdict="about O(n)")
        assert complexity.plot(power_table(2), fit, ax=ax) is ax
        assert any("1.00" in line.get_label() for line in ax.get_lines())
    finally:
        plt.close(fig)


def test_plot_rejects_a_fit_of_the_wrong_type():
    with pytest.raises(TypeError, match="Fit"):
        complexity.plot(power_table(1), fit=1.0)


def test_plot_labels_the_measured_sizes_and_no_minor_ticks():
    table = power_table(2)
    ax = complexity.plot(table)
    try:
        ax.figure.canvas.draw()
        np.testing.assert_allclose(ax.get_xticks(), sorted(table["n"]))
        assert [t.get_text() for t in ax.get_xticklabels(minor=True)] == []
        assert all(t.get_text() for t in ax.get_xticklabels())
    finally:
        plt.close(ax.figure)


@pytest.mark.parametrize("sizes, labels", [
    ([250, 500, 1_000, 2_000], ["250", "500", "1k", "2k"]),
    ([25_000, 1_500_000], ["25k", "1.5M"]),
])
def test_label_sizes_writes_short_numbers(sizes, labels):
    fig, ax = plt.subplots()
    try:
        ax.loglog(sizes, sizes)
        complexity.label_sizes(ax, sizes)
        assert [t.get_text() for t in ax.get_xticklabels()] == labels
    finally:
        plt.close(fig)


def test_label_sizes_rejects_sizes_a_log_axis_cannot_show():
    fig, ax = plt.subplots()
    try:
        with pytest.raises(ValueError, match="positive"):
            complexity.label_sizes(ax, [0, 10])
    finally:
        plt.close(fig)
