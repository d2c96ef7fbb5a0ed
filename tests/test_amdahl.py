"""Tests for course_lib.amdahl: the laws, their inverse, stage tables and the plot."""

import math

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from hypothesis import given, strategies as st

from course_lib import amdahl

shares = st.floats(0, 1)
speedups = st.floats(1, 1e6)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture
def table():
    """A stage table shaped like Stopwatch.table(): index "stage", seconds column."""
    return pd.DataFrame(
        {
            "seconds": [1.0, 7.0, 2.0],
            "cpu_seconds": [0.5, 7.0, 0.1],
            "share": [0.1, 0.7, 0.2],
        },
        index=pd.Index(["load", "clean", "save"], name="stage"),
    )


@pytest.mark.parametrize(
    "p, s, expected",
    [
        (0.077, 20, 1.08),
        (0.9, 10, 5.26),
        (0.5, math.inf, 2.0),
        (0.0, 100, 1.0),
        (1.0, 8, 8.0),
        (0.5, 0.5, 0.667),  # a slow-down of the share slows the job
    ],
)
def test_speedup_matches_worked_examples(p, s, expected):
    assert amdahl.speedup(p, s) == pytest.approx(expected, abs=0.005)


def test_whole_job_made_free_is_infinitely_faster():
    assert amdahl.speedup(1.0, math.inf) == math.inf


@pytest.mark.parametrize("p, expected", [(0.9, 10.0), (0.5, 2.0), (0.0, 1.0), (1.0, math.inf)])
def test_ceiling(p, expected):
    assert amdahl.ceiling(p) == pytest.approx(expected)


@given(shares, speedups)
def test_speedup_never_exceeds_ceiling(p, s):
    assert amdahl.speedup(p, s) <= amdahl.ceiling(p) * (1 + 1e-12)


@given(shares, speedups, speedups)
def test_speedup_grows_with_s(p, s1, s2):
    low, high = sorted((s1, s2))
    assert amdahl.speedup(p, low) <= amdahl.speedup(p, high) * (1 + 1e-12)


@given(shares, speedups)
def test_speedup_with_infinite_s_is_the_ceiling(p, s):
    assert amdahl.speedup(p, math.inf) == pytest.approx(amdahl.ceiling(p))


@given(shares, st.floats(1.01, 1e6))
def test_required_fraction_inverts_speedup(p, s):
    target = amdahl.speedup(p, s)
    assert amdahl.required_fraction(target, s) == pytest.approx(p, abs=1e-6)


@given(st.floats(1, 1e3), st.floats(1.01, 1e6))
def test_speedup_inverts_required_fraction(target, s):
    if target > s:
        with pytest.raises(ValueError, match="out of reach"):
            amdahl.required_fraction(target, s)
    else:
        p = amdahl.required_fraction(target, s)
        assert 0 <= p <= 1
        assert amdahl.speedup(p, s) == pytest.approx(target, rel=1e-9)


@pytest.mark.parametrize(
    "target, s, expected",
    [(5, 10, 0.8889), (2, math.inf, 0.5), (1, 10, 0.0), (10, 10, 1.0), (1, 1, 0.0)],
)
def test_required_fraction_worked_examples(target, s, expected):
    assert amdahl.required_fraction(target, s) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize(
    "target, s",
    [(20, 10), (10.5, 10), (2, 1), (0.5, 10), (3, 0.5)],
)
def test_unreachable_targets_are_rejected(target, s):
    with pytest.raises(ValueError, match="out of reach"):
        amdahl.required_fraction(target, s)


@pytest.mark.parametrize("p, n, expected", [(0.9, 10, 9.1), (0.0, 64, 1.0), (1.0, 8, 8.0), (0.5, 1, 1.0)])
def test_gustafson(p, n, expected):
    assert amdahl.gustafson(p, n) == pytest.approx(expected)


@given(shares, st.floats(1, 1e4))
def test_gustafson_is_never_below_amdahl(p, n):
    # Growing the job with the machine can only help compared with a fixed job.
    assert amdahl.gustafson(p, n) >= amdahl.speedup(p, n) * (1 - 1e-12)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: amdahl.speedup(1.5, 2), r"must be in \[0, 1\]"),
        (lambda: amdahl.speedup(-0.1, 2), r"must be in \[0, 1\]"),
        (lambda: amdahl.speedup(math.nan, 2), "NaN"),
        (lambda: amdahl.speedup(0.5, 0), "must be positive"),
        (lambda: amdahl.speedup(0.5, -3), "must be positive"),
        (lambda: amdahl.speedup(0.5, math.nan), "NaN"),
        (lambda: amdahl.ceiling(2), r"must be in \[0, 1\]"),
        (lambda: amdahl.required_fraction(0, 10), "must be positive"),
        (lambda: amdahl.required_fraction(2, 0), "must be positive"),
        (lambda: amdahl.required_fraction(math.nan, 10), "NaN"),
        (lambda: amdahl.gustafson(0.5, 0.5), "number of workers"),
        (lambda: amdahl.gustafson(0.5, math.inf), "number of workers"),
        (lambda: amdahl.gustafson(1.2, 4), r"must be in \[0, 1\]"),
        (lambda: amdahl.plot(ps=(0.5, 1.5)), r"must be in \[0, 1\]"),
        (lambda: amdahl.plot(ps=()), "at least one share"),
        (lambda: amdahl.plot(s_max=1), "s_max"),
    ],
)
def test_out_of_range_inputs_raise_clear_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    "call",
    [lambda: amdahl.speedup("0.5", 2), lambda: amdahl.speedup(0.5, None), lambda: amdahl.ceiling(True)],
)
def test_non_numbers_raise_type_errors(call):
    with pytest.raises(TypeError, match="real number"):
        call()


def test_from_stages_uses_the_seconds_column(table):
    # clean is 7 of 10 seconds: p = 0.7
    assert amdahl.from_stages(table, ["clean"], s=10) == pytest.approx(amdahl.speedup(0.7, 10))
    assert amdahl.from_stages(table, ["clean", "save"], s=math.inf) == pytest.approx(10.0)


def test_from_stages_accepts_one_name_and_ignores_repeats(table):
    expected = amdahl.speedup(0.7, 4)
    assert amdahl.from_stages(table, "clean", s=4) == pytest.approx(expected)
    assert amdahl.from_stages(table, ["clean", "clean"], s=4) == pytest.approx(expected)


def test_from_stages_accepts_a_series_of_seconds(table):
    assert amdahl.from_stages(table["seconds"], ["load"], s=2) == pytest.approx(amdahl.speedup(0.1, 2))


def test_from_stages_with_no_stage_accelerated_changes_nothing(table):
    assert amdahl.from_stages(table, [], s=100) == 1.0


def test_unknown_stage_lists_the_known_ones(table):
    with pytest.raises(ValueError, match=r"unknown stage.*'transform'.*'load', 'clean', 'save'"):
        amdahl.from_stages(table, ["transform"], s=10)


@pytest.mark.parametrize(
    "bad, exc, match",
    [
        (pd.DataFrame({"time": [1.0]}, index=["a"]), ValueError, "'seconds' column"),
        (pd.DataFrame({"seconds": [0.0]}, index=["a"]), ValueError, "nothing to speed up"),
        (pd.DataFrame({"seconds": [-1.0, 2.0]}, index=["a", "b"]), ValueError, "finite and >= 0"),
        (pd.DataFrame({"seconds": [math.nan, 2.0]}, index=["a", "b"]), ValueError, "finite and >= 0"),
        ({"a": 1.0}, TypeError, "DataFrame"),
    ],
)
def test_bad_stage_tables_are_rejected(bad, exc, match):
    with pytest.raises(exc, match=match):
        amdahl.from_stages(bad, ["a"], s=2)


def test_from_stages_rejects_bad_s(table):
    with pytest.raises(ValueError, match="must be positive"):
        amdahl.from_stages(table, ["clean"], s=0)


def test_plot_draws_one_curve_and_one_ceiling_per_share():
    ps = (0.5, 0.75, 0.9, 0.95)
    ax = amdahl.plot(ps=ps, s_max=1000)
    assert isinstance(ax, matplotlib.axes.Axes)
    curves = [line for line in ax.lines if line.get_linestyle() == "-"]
    ceilings = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert [c.get_label() for c in curves] == [f"p = {p:g}" for p in ps]
    assert sorted(c.get_ydata()[0] for c in ceilings) == pytest.approx([2, 4, 10, 20])
    assert ax.get_xscale() == "log"
    for p, curve in zip(ps, curves):
        x, y = curve.get_xdata(), curve.get_ydata()
        assert x[0] == pytest.approx(1) and x[-1] == pytest.approx(1000)
        assert y[-1] == pytest.approx(amdahl.speedup(p, 1000))
        assert (y <= amdahl.ceiling(p)).all()


def test_plot_uses_the_given_axes_and_skips_the_infinite_ceiling():
    _, ax = plt.subplots()
    assert amdahl.plot(ps=(0.5, 1.0), s_max=10, ax=ax) is ax
    assert len([line for line in ax.lines if line.get_linestyle() == "--"]) == 1
