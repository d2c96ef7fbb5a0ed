"""Behaviour of course_lib.grading: correct verdicts, clear messages, tricks that fail.

Speed tests use pairs whose true ratio is large, measured on a 2-core machine:
list membership against set membership (about 40x, the fast side about 1 ms per
call), against sorting plus bisection (about 10-20x), and against itself (1x).
Budgets are small (0.3 s); the margins between the true ratios and the thresholds
are wide (a factor of 4 or more), so a loaded machine cannot flip a verdict.
"""

from __future__ import annotations

import bisect
import math
import re
import subprocess
import sys
import textwrap
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from course_lib import grading, memory, timing
from course_lib.grading import (
    GradingError,
    TamperingDetected,
    UnreliableMeasurement,
    assert_peak_memory_below,
    assert_same,
    assert_scaling,
    assert_speedup,
    speedup_points,
)

REPO = Path(__file__).resolve().parents[1]
BUDGET = 0.3

# --- the pairs -------------------------------------------------------------------------

_rng = np.random.default_rng()


def make_args():
    """A fresh haystack of 20,000 ints and 300 queries (almost all absent: full scans)."""
    return (_rng.integers(0, 10**9, 20_000).tolist(), _rng.integers(0, 10**9, 300).tolist())


def make_tiny_args():
    return (_rng.integers(0, 10**9, 10).tolist(), _rng.integers(0, 10**9, 3).tolist())


def count_in_list(data, queries):
    """The reference: about 45 ms per call here."""
    return sum(q in data for q in queries)


def count_in_set(data, queries):
    """About 40x faster: about 1 ms per call, building the set dominates."""
    lookup = set(data)
    return sum(q in lookup for q in queries)


def count_by_bisection(data, queries):
    """About 10-20x faster: sorting dominates."""
    ordered = sorted(data)
    found = 0
    for q in queries:
        i = bisect.bisect_left(ordered, q)
        found += i < len(ordered) and ordered[i] == q
    return found


def count_in_list_again(data, queries):
    """Correct but no faster than the reference."""
    return sum(1 for q in queries if q in data)


def count_wrong(data, queries):
    return sum(q in set(data) for q in queries) + 1


class AlwaysEqual:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


class MyWeirdThing:
    pass


class LyingArray(np.ndarray):
    def __eq__(self, other):
        return np.ones(np.shape(self), dtype=bool)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return np.zeros(np.shape(self))


class LyingFloat(float):
    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


class LyingFrame(pd.DataFrame):
    def equals(self, other):
        return True


# --- assert_same: what passes ----------------------------------------------------------


@pytest.mark.parametrize(
    "actual, expected",
    [
        (0.1 + 0.2, 0.3),
        (np.float64(2.5), 2.5),
        (3, np.int64(3)),
        (np.array([1.0, np.nan, np.inf]), np.array([1.0, np.nan, np.inf])),
        ([1, 2.0, "x", None], [1, 2.0, "x", None]),
        ({"a": (1, 2), "b": [np.array([1, 2])]}, {"b": [np.array([1, 2])], "a": (1, 2)}),
        ({1, 2, 3}, {3, 2, 1}),
        (pd.Series([1.0, 2.0], index=["x", "y"], name="v"), pd.Series([1.0, 2.0], index=["x", "y"], name="v")),
        (pd.DataFrame({"a": [1, 2], "b": ["u", "v"]}), pd.DataFrame({"a": [1, 2], "b": ["u", "v"]})),
        (pd.Timestamp("2024-01-01"), pd.Timestamp("2024-01-01")),
        (np.array(["2024-01-01", "NaT"], dtype="datetime64[ns]"), np.array(["2024-01-01", "NaT"], dtype="datetime64[ns]")),
        ([float(i) for i in range(100)], [float(i) for i in range(100)]),
    ],
)
def test_equal_plain_values_pass(actual, expected):
    assert_same(actual, expected)


def test_tolerances_are_relative_to_the_reference():
    assert_same(1.0 + 1e-12, 1.0)
    assert_same(np.array([100.0]), np.array([100.5]), rtol=0.01)
    assert_same(np.array([0.0]), np.array([1e-6]), atol=1e-5)
    with pytest.raises(GradingError, match="allowed"):
        assert_same(1.0 + 1e-6, 1.0)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(max_dims=2, max_side=8), elements=st.floats(allow_nan=True)))
def test_any_float_array_equals_its_copy(x):
    assert_same(x.copy(), x)


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(np.float64, st.integers(1, 30), elements=st.floats(-1e6, 1e6)),
    st.data(),
)
def test_a_changed_element_is_found_at_its_position(x, data):
    i = data.draw(st.integers(0, x.size - 1))
    changed = x.copy()
    changed[i] += 1.0 + abs(x[i])
    with pytest.raises(GradingError, match=rf"first at \[{i}\]"):
        assert_same(changed, x)


# --- assert_same: messages that say what differs ----------------------------------------


@pytest.mark.parametrize(
    "actual, expected, message",
    [
        (np.zeros(3), np.zeros(4), r"shape differs: got \(3,\), expected \(4,\)"),
        (np.zeros(3, dtype=np.float32), np.zeros(3), "dtype differs: got float32, expected float64"),
        (np.array([[1, 2], [3, 5]]), np.array([[1, 2], [3, 4]]), r"1 of 4 values differ; first at \[1, 1\]: got 5, expected 4"),
        (np.array([1.0, np.nan]), np.array([1.0, 2.0]), r"first at \[1\]: got nan, expected 2.0"),
        ([1, 2], [1, 2, 3], "length differs: got 2, expected 3"),
        ((1, [2, "x"]), (1, [2, "y"]), r"result\[1\]\[1\]: got 'x', expected 'y'"),
        ({"a": 1}, {"a": 1, "b": 2}, r"missing keys \['b'\]"),
        ({"a": 1.5}, {"a": 1.0}, r"result\['a'\]: got 1.5, expected 1.0"),
        ([1, 2], (1, 2), "expected a tuple, got a list"),
        ("3", 3, "expected an int, got a str '3'"),
        ({1, 2}, {1, 3}, "sets differ: 1 missing, e.g. \\[3\\]; 1 unexpected, e.g. \\[2\\]"),
        (3.0, 3, "expected an int, got a float 3.0"),
    ],
)
def test_messages_say_what_differs(actual, expected, message):
    with pytest.raises(GradingError, match=message):
        assert_same(actual, expected)


def test_series_mismatch_names_position_and_label():
    expected = pd.Series([1.0, 2.0, 3.0], index=["FR", "DE", "IT"])
    actual = pd.Series([1.0, 2.0, 3.5], index=["FR", "DE", "IT"])
    with pytest.raises(GradingError, match=r"position 2 \(index label 'IT'\): got 3.5, expected 3.0"):
        assert_same(actual, expected)


def test_frame_mismatch_names_column_row_and_label():
    expected = pd.DataFrame({"total": [1.0, 2.0], "n": [1, 2]}, index=pd.Index(["a", "b"], name="country"))
    wrong_value = expected.copy()
    wrong_value.loc["b", "n"] = 7
    with pytest.raises(GradingError, match=r"result\['n'\].*row 1 \(index label 'b'\): got 7, expected 2"):
        assert_same(wrong_value, expected)
    with pytest.raises(GradingError, match=r"result.columns.*got 'n', expected 'total'"):
        assert_same(expected[["n", "total"]], expected)
    with pytest.raises(GradingError, match=r"result.index.names"):
        assert_same(expected.rename_axis("place"), expected)
    with pytest.raises(GradingError, match=r"shape differs"):
        assert_same(expected.iloc[:1], expected)
    with pytest.raises(GradingError, match=r"dtype of column 'n' differs: got float64, expected int64"):
        assert_same(expected.astype({"n": float}), expected)


def test_text_labels_stored_as_object_or_str_are_the_same_labels():
    expected = pd.Series([1, 2], index=pd.Index(["a", "b"]))
    assert_same(pd.Series([1, 2], index=pd.Index(["a", "b"], dtype=object)), expected)
    with pytest.raises(GradingError, match=r"result.index at position 1: got 'c', expected 'b'"):
        assert_same(pd.Series([1, 2], index=pd.Index(["a", "c"], dtype=object)), expected)
    with pytest.raises(GradingError, match="result.index: dtype differs: got int64"):
        assert_same(pd.Series([1, 2], index=[0, 1]), expected)


def test_check_dtype_false_compares_numbers_by_value():
    assert_same(np.array([1, 2]), np.array([1.0, 2.0]), check_dtype=False)
    assert_same(3, 3.0, check_dtype=False)
    with pytest.raises(GradingError, match="got 2.5, expected 2 "):
        assert_same(np.array([1.0, 2.5]), np.array([1, 2]), check_dtype=False)


def test_reference_of_unknown_type_is_a_configuration_error():
    with pytest.raises(TypeError, match="reference value at result is a MyWeirdThing"):
        assert_same(1, MyWeirdThing())


# --- assert_same: objects that lie ------------------------------------------------------


@pytest.mark.parametrize(
    "liar, expected, message",
    [
        (AlwaysEqual(), np.array([1, 2]), "expected a numpy.ndarray, got AlwaysEqual"),
        (MyWeirdThing(), np.array([1, 2]), "expected a numpy.ndarray, got MyWeirdThing"),
        (np.zeros(2).view(LyingArray), np.array([1.0, 2.0]), "got LyingArray \\(a subclass of numpy.ndarray"),
        (LyingFloat(0.0), 1.0, "expected a float, got LyingFloat \\(a subclass of float"),
        (LyingFrame({"a": [0]}), pd.DataFrame({"a": [1]}), "got LyingFrame \\(a subclass of pandas.DataFrame"),
        ([1, AlwaysEqual()], [1, 2], r"result\[1\]: expected an int, got AlwaysEqual"),
        ({"k": AlwaysEqual()}, {"k": 2.0}, "expected a float, got AlwaysEqual"),
        (np.array([AlwaysEqual()], dtype=object), np.array([1], dtype=object), "expected an int, got AlwaysEqual"),
        (pd.Series([AlwaysEqual()]), pd.Series([1.0]), "dtype differs: got object, expected float64"),
    ],
)
def test_objects_that_claim_equality_never_pass(liar, expected, message):
    with pytest.raises(GradingError, match=message):
        assert_same(liar, expected)


def test_metaclass_claiming_to_be_float_is_not_believed():
    class Meta(type):
        def __eq__(cls, other):
            return True

        def __hash__(cls):
            return hash(float)

    class Pretender(metaclass=Meta):
        pass

    with pytest.raises(GradingError, match="expected a float, got Pretender"):
        assert_same(Pretender(), 1.0)


def test_patched_numpy_and_pandas_comparisons_change_nothing(monkeypatch):
    always = lambda *args, **kwargs: True  # noqa: E731
    monkeypatch.setattr(np, "allclose", always)
    monkeypatch.setattr(np, "array_equal", always)
    monkeypatch.setattr(np, "isclose", lambda a, b, *args, **kwargs: np.ones(np.shape(b), dtype=bool))
    monkeypatch.setattr(np.testing, "assert_allclose", lambda *args, **kwargs: None)
    monkeypatch.setattr(np.testing, "assert_array_equal", lambda *args, **kwargs: None)
    monkeypatch.setattr(pd.testing, "assert_frame_equal", lambda *args, **kwargs: None)
    monkeypatch.setattr(pd.testing, "assert_series_equal", lambda *args, **kwargs: None)
    monkeypatch.setattr(pd.DataFrame, "equals", always)
    monkeypatch.setattr(pd.Series, "to_numpy", lambda self, *args, **kwargs: np.ones(len(self)))
    monkeypatch.setattr(pd.DataFrame, "to_numpy", lambda self, *args, **kwargs: np.ones(self.shape))
    with pytest.raises(GradingError, match="got 0.0, expected 1.0"):
        assert_same(np.zeros(3), np.ones(3))
    with pytest.raises(GradingError, match="got 0.0, expected 1.0"):
        assert_same(pd.DataFrame({"a": [0.0]}), pd.DataFrame({"a": [1.0]}))
    with pytest.raises(GradingError, match="got 0.0, expected 1.0"):
        assert_same(pd.Series([0.0]), pd.Series([1.0]))


# --- assert_speedup: verdicts -----------------------------------------------------------


def test_fast_correct_candidate_passes_silently(capfd):
    assert assert_speedup(count_in_set, count_in_list, make_args, at_least=10, budget=BUDGET) is None
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_slow_correct_candidate_fails_with_ratio_and_requirement():
    with pytest.raises(GradingError) as info:
        assert_speedup(count_in_list_again, count_in_list, make_args, at_least=10, budget=BUDGET)
    message = str(info.value)
    assert message.startswith("Not fast enough: your function measured ")
    measured = float(message.split("measured ")[1].split("x")[0])
    assert 0.3 < measured < 3
    assert "95% interval" in message
    assert "needs a speed-up of 10x" in message
    assert "a measured 9x passes" in message
    assert not isinstance(info.value, (TamperingDetected, UnreliableMeasurement))


def test_wrong_candidate_fails_before_any_timing(monkeypatch):
    def no_timing(*args, **kwargs):
        raise AssertionError("timing started although the result was wrong")

    monkeypatch.setattr(grading._speed, "_compare", no_timing)
    with pytest.raises(GradingError, match=r"Wrong result on fresh input 1 of 3 \(checked before any timing\): result: got \d+, expected \d+"):
        assert_speedup(count_wrong, count_in_list, make_args, at_least=10, budget=BUDGET)


def test_candidate_that_raises_fails_with_the_exception_named():
    def broken(data, queries):
        raise KeyError("oops")

    with pytest.raises(GradingError, match="Your function raised KeyError"):
        assert_speedup(broken, count_in_list, make_args, at_least=10, budget=BUDGET)


def test_microsecond_inputs_are_refused_as_a_configuration_problem():
    with pytest.raises(UnreliableMeasurement) as info:
        assert_speedup(count_in_set, count_in_list, make_tiny_args, at_least=10, budget=BUDGET)
    message = str(info.value)
    assert "configuration problem, not your code" in message
    assert "Instructor: use larger inputs" in message
    with pytest.raises(UnreliableMeasurement):
        speedup_points(count_in_set, count_in_list, make_tiny_args, full_at=10, zero_at=2, points=1, budget=BUDGET)


def test_make_args_returning_the_same_input_is_a_configuration_error():
    fixed = make_args()
    with pytest.raises(ValueError, match="make_args returned equal inputs"):
        assert_speedup(count_in_set, count_in_list, lambda: fixed, at_least=10, budget=BUDGET)
    with pytest.raises(TypeError, match="must return a tuple"):
        assert_speedup(count_in_set, count_in_list, lambda: fixed[0], at_least=10, budget=BUDGET)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"at_least": 0}, "at_least must be positive"), ({"at_least": 10, "margin": 1.0}, "margin"),
     ({"at_least": 10, "budget": -1}, "budget must be positive"), ({"at_least": "10"}, "at_least must be a number")],
)
def test_bad_settings_are_rejected(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        assert_speedup(count_in_set, count_in_list, make_args, **kwargs)


# --- speedup_points ----------------------------------------------------------------------


def test_points_full_zero_and_in_between():
    full = speedup_points(count_in_set, count_in_list, make_args, full_at=5, zero_at=2, points=3, budget=BUDGET)
    zero = speedup_points(count_in_list_again, count_in_list, make_args, full_at=20, zero_at=3, points=3, budget=BUDGET)
    # bisection is about 10-20x; credit runs from a measured 3.6x to 36x. A threshold of 40x
    # needs a reference of >= 40 ms per call (or grading refuses it as unreliable), and the
    # usual haystack takes under 40 ms on a quiet machine: this one is twice as large, which
    # doubles both sides and leaves the ratio where it was.
    def make_big_args():
        return (_rng.integers(0, 10**9, 40_000).tolist(), _rng.integers(0, 10**9, 300).tolist())

    middle = speedup_points(count_by_bisection, count_in_list, make_big_args, full_at=40, zero_at=4, points=3,
                            budget=BUDGET)
    assert (type(full), type(zero), type(middle)) == (float, float, float)
    assert full == 3.0
    assert zero == 0.0
    assert 0.0 < middle < 3.0
    assert float(repr(middle)) == middle  # what nbgrader parses from text/plain


def test_points_refuse_wrong_results():
    with pytest.raises(GradingError, match="Wrong result"):
        speedup_points(count_wrong, count_in_list, make_args, full_at=5, zero_at=2, points=3, budget=BUDGET)


@pytest.mark.parametrize(
    "ratio, expected",
    [(1.0, 0.0), (1.8, 0.0), (9.0, 2.0), (45.0, 4.0), (1000.0, 4.0), (math.nan, 0.0)],
)
def test_points_are_linear_in_log_speedup_after_margin(ratio, expected):
    assert grading._speed._points_for(ratio, full_at=50, zero_at=2, points=4, margin=0.1) == expected


# --- tricks --------------------------------------------------------------------------------


def test_reassigning_perf_counter_after_import_is_detected(monkeypatch):
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    with pytest.raises(TamperingDetected, match=r"^Tampering detected: .*time.perf_counter was reassigned"):
        assert_speedup(count_in_set, count_in_list, make_args, at_least=10, budget=BUDGET)


def test_reassigning_perf_counter_before_import_is_detected():
    script = textwrap.dedent(
        """
        import time
        time.perf_counter = lambda: 0.0
        import numpy as np
        from course_lib import grading
        rng = np.random.default_rng()
        try:
            grading.assert_speedup(sorted, sorted, lambda: (rng.random(10).tolist(),), at_least=1)
        except grading.TamperingDetected as exc:
            print("DETECTED", exc)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "DETECTED Tampering detected:" in done.stdout, done.stderr
    assert "replaced before course_lib.grading was imported" in done.stdout


def test_replacing_timing_internals_is_detected(monkeypatch):
    real = time.perf_counter
    monkeypatch.setattr(timing, "_perf_counter", lambda: real() * 0.1)
    with pytest.raises(TamperingDetected, match="course_lib.timing"):
        assert_speedup(count_in_set, count_in_list, make_args, at_least=10, budget=BUDGET)


@pytest.mark.parametrize("module", ["_state", "_speed", "_parallel", "_warm"])
def test_rebinding_the_clock_of_a_grading_module_is_detected(monkeypatch, module):
    # Each module of the package that times with the captured perf_counter is compared with
    # it, as the single grading module's _perf_counter was before the package was split.
    monkeypatch.setattr(getattr(grading, module), "_perf_counter", lambda: 0.0)
    with pytest.raises(TamperingDetected, match="measures with a clock other than time.perf_counter"):
        assert_speedup(count_in_set, count_in_list, make_args, at_least=10, budget=BUDGET)


def test_every_grading_module_that_times_with_the_clock_is_watched():
    holders = {name for name, module in sys.modules.items()
               if name.startswith("course_lib.grading.") and "_perf_counter" in vars(module)}
    watched = {module.__name__ for module in grading._state._CLOCK_READERS}
    assert holders == watched | {"course_lib.grading._state"} and len(watched) == len(grading._state._CLOCK_READERS)


def _no_identity_checks(monkeypatch):
    """Switch off the identity checks: at the start and end of a measurement, and in its runaway guard."""
    monkeypatch.setattr(grading._state, "_tampering_problems", lambda: [])  # read by _raise_if_tampered
    monkeypatch.setattr(grading._speed, "_tampering_problems", lambda: [])  # read by _RunawayGuard


def test_scaled_clock_is_caught_by_the_independent_clock(monkeypatch):
    # Switch off the identity checks so that only the cross-check with
    # time.monotonic_ns stands between a scaled clock and a verdict.
    real = time.perf_counter
    _no_identity_checks(monkeypatch)
    monkeypatch.setattr(timing, "_perf_counter", lambda: real() * 5.0)
    with pytest.raises(TamperingDetected, match="clock was tampered with"):
        assert_speedup(count_in_set, count_in_list, make_args, at_least=10, budget=BUDGET)


def test_stopped_clock_cannot_make_the_measurement_run_forever(monkeypatch):
    _no_identity_checks(monkeypatch)
    monkeypatch.setattr(timing, "_perf_counter", lambda: 1.0)
    started = time.monotonic()
    with pytest.raises(TamperingDetected, match="far beyond the measurement's budget"):
        assert_speedup(count_in_set, count_in_list, make_args, at_least=10, budget=0.1)
    assert time.monotonic() - started < 30


def test_memoising_on_identity_gains_nothing():
    cache = {}

    def memo_by_identity(data, queries):
        key = (id(data), id(queries))
        if key not in cache:
            cache[key] = (data, queries, count_in_list(data, queries))  # keep them alive: ids stay unique
        return cache[key][2]

    with pytest.raises(GradingError, match="Not fast enough"):
        assert_speedup(memo_by_identity, count_in_list, make_args, at_least=10, budget=BUDGET)


def test_memoising_on_value_gains_nothing():
    cache = {}

    def memo_by_value(data, queries):
        key = (tuple(data), tuple(queries))
        if key not in cache:
            cache[key] = count_in_list(data, queries)
        return cache[key]

    with pytest.raises(GradingError, match="Not fast enough"):
        assert_speedup(memo_by_value, count_in_list, make_args, at_least=10, budget=BUDGET)


def test_always_equal_result_fails_before_timing():
    with pytest.raises(GradingError, match="expected an int, got AlwaysEqual"):
        assert_speedup(lambda data, queries: AlwaysEqual(), count_in_list, make_args, at_least=10, budget=BUDGET)


def test_lying_array_subclass_fails():
    def baseline(x):
        return np.sort(x)

    def liar(x):
        return np.zeros(len(x)).view(LyingArray)

    with pytest.raises(GradingError, match="a subclass of numpy.ndarray"):
        assert_speedup(liar, baseline, lambda: (_rng.random(1000),), at_least=1, budget=BUDGET)


@pytest.mark.parametrize("verify_budget", [None, math.inf])
def test_correct_first_then_garbage_is_caught_while_timed(verify_budget):
    calls = {"n": 0}

    def honest_at_first(data, queries):
        calls["n"] += 1
        return count_in_set(data, queries) if calls["n"] <= 3 else -1

    with pytest.raises(GradingError, match="Wrong result in timed call"):
        assert_speedup(honest_at_first, count_in_list, make_args, at_least=10, budget=BUDGET,
                       verify_budget=verify_budget)
    assert calls["n"] > 3


def test_garbage_of_another_type_is_caught_on_every_timed_call():
    calls = {"n": 0}

    def sometimes_none(data, queries):
        calls["n"] += 1
        return count_in_set(data, queries) if calls["n"] <= 3 else None

    with pytest.raises(GradingError, match="expected an int, got None$"):
        assert_speedup(sometimes_none, count_in_list, make_args, at_least=10, budget=BUDGET)
    assert calls["n"] == 4  # the first timed call was already rejected


def test_mutating_the_input_cannot_make_the_reference_agree():
    def make_args_with_hits():
        data, queries = make_args()
        return data, queries[:200] + data[:100]  # 100 queries are found

    def clears_its_input(data, queries):
        data.clear()  # the reference would now find nothing either...
        return 0  # ...but it gets its own copy of the input

    assert count_in_list(*make_args_with_hits()) == 100
    with pytest.raises(GradingError, match="Wrong result on fresh input 1 of 3.*got 0, expected 100"):
        assert_speedup(clears_its_input, count_in_list, make_args_with_hits, at_least=10, budget=BUDGET)


def test_stray_output_is_hidden_on_success_and_shown_on_failure(capfd):
    def chatty(data, queries):
        print("debugging...")
        print("warning!", file=sys.stderr)
        return count_in_set(data, queries)

    assert_speedup(chatty, count_in_list, make_args, at_least=10, budget=BUDGET)
    assert capfd.readouterr() == ("", "")

    def chatty_and_wrong(data, queries):
        print("debugging...")
        return -1

    with pytest.raises(GradingError, match="Output printed while grading:\ndebugging..."):
        assert_speedup(chatty_and_wrong, count_in_list, make_args, at_least=10, budget=BUDGET)
    assert capfd.readouterr() == ("", "")


def test_numba_warnings_stay_silent(capfd):
    numba = pytest.importorskip("numba")

    @numba.njit(parallel=True)  # nothing to parallelise: NumbaPerformanceWarning on compile
    def numba_total(x):
        s = 0.0
        for i in range(x.shape[0]):
            s += x[i]
        return s

    def python_total(x):
        s = 0.0
        for v in x.tolist():
            s += v
        return s

    with warnings.catch_warnings():
        warnings.simplefilter("always")  # as a fresh kernel would show them
        assert_speedup(numba_total, python_total, lambda: (_rng.random(300_000),), at_least=5, budget=BUDGET)
    assert capfd.readouterr() == ("", "")


# --- memory -----------------------------------------------------------------------------


def allocate_80_mb():
    return float(np.ones(10_000_000).sum())  # 80 MB of float64


def test_peak_memory_passes_and_fails_around_80_mb(capfd):
    assert_peak_memory_below(allocate_80_mb, "100 MB")
    assert_peak_memory_below(allocate_80_mb, 90_000_000)
    assert capfd.readouterr() == ("", "")
    with pytest.raises(GradingError, match=r"peak traced memory was 8\d\.\d MB; the limit is 50.0 MB"):
        assert_peak_memory_below(allocate_80_mb, "50 MB")


def test_peak_memory_passes_arguments_through():
    assert_peak_memory_below(np.ones, "10 MB", 1000)
    with pytest.raises(GradingError, match="Too much memory"):
        assert_peak_memory_below(np.ones, "1 MB", 1_000_000)


@pytest.mark.parametrize("limit", ["fifty", "50 XB", -5, 0, True])
def test_bad_memory_limits_are_rejected(limit):
    with pytest.raises((ValueError, TypeError), match="limit"):
        assert_peak_memory_below(allocate_80_mb, limit)


def test_tampered_tracemalloc_is_detected(monkeypatch):
    monkeypatch.setattr(tracemalloc, "get_traced_memory", lambda: (0, 0))
    with pytest.raises(TamperingDetected, match="tracemalloc.get_traced_memory was reassigned"):
        assert_peak_memory_below(allocate_80_mb, "50 MB")


def test_replaced_memory_peak_is_detected(monkeypatch):
    monkeypatch.setattr(memory, "peak", lambda fn, *a, **k: memory.PeakResult(result=None, peak=0, seconds=0.0))
    with pytest.raises(TamperingDetected, match="course_lib.memory.peak was reassigned"):
        assert_peak_memory_below(allocate_80_mb, "50 MB")


# --- scaling ------------------------------------------------------------------------------


def make_list(n):
    return _rng.random(n).tolist()


def linear(xs):
    total = 0.0
    for x in xs:
        total += x
    return total


def quadratic(xs):
    smaller = 0
    for x in xs:
        for y in xs:
            smaller += y < x
    return smaller


def test_linear_passes_and_quadratic_fails_at_exponent_1_5(capfd):
    assert_scaling(linear, make_list, [50_000, 100_000, 200_000, 400_000], max_exponent=1.5, budget=0.05)
    assert capfd.readouterr() == ("", "")
    with pytest.raises(GradingError) as info:
        assert_scaling(quadratic, make_list, [250, 500, 1_000, 2_000], max_exponent=1.5, budget=0.05)
    message = str(info.value)
    assert "Grows too fast: the fitted exponent is" in message
    slope = float(message.split("exponent is ")[1].split(" ")[0])
    assert 1.6 < slope < 2.6
    assert "Doubling table (CPU seconds per call" in message
    assert "2000" in message and "ratio" in message  # the table itself


def test_scaling_refuses_microsecond_sizes():
    with pytest.raises(UnreliableMeasurement, match="use larger sizes"):
        assert_scaling(linear, make_list, [10, 20, 40], max_exponent=1.5, budget=0.01)


def test_scaling_memoised_on_identity_is_still_measured():
    cache = {}

    def memo_quadratic(xs):
        if id(xs) not in cache:
            cache[id(xs)] = (xs, quadratic(xs))
        return cache[id(xs)][1]

    with pytest.raises(GradingError, match="Grows too fast"):
        assert_scaling(memo_quadratic, make_list, [250, 500, 1_000, 2_000], max_exponent=1.5, budget=0.05)


def test_scaling_detects_a_reassigned_clock(monkeypatch):
    monkeypatch.setattr(time, "process_time", lambda: 0.0)
    with pytest.raises(TamperingDetected, match="time.process_time was reassigned"):
        assert_scaling(linear, make_list, [50_000, 100_000], max_exponent=1.5, budget=0.01)


def test_scaling_cross_checks_cpu_time_with_independent_clocks(monkeypatch):
    real = time.process_time
    monkeypatch.setattr(grading._state, "_tampering_problems", lambda: [])  # the scaling path's only reader
    # A clock 1,000 times fast: at load 5.5 on 2 cores these calls took 5 times their CPU
    # time in wall time, which a clock 10 times fast stays within (the bound is wall x cores).
    monkeypatch.setattr(grading._memory, "_process_time", lambda: real() * 1000.0)
    with pytest.raises(TamperingDetected, match="clock was tampered with"):
        assert_scaling(linear, make_list, [50_000, 100_000, 200_000], max_exponent=1.5, budget=0.02)


def test_scaling_with_constant_inputs_is_a_configuration_error():
    with pytest.raises(ValueError, match="returned equal inputs"):
        assert_scaling(linear, lambda n: list(range(n)), [1000, 2000], max_exponent=1.5)


# --- the exceptions -------------------------------------------------------------------------


def test_exception_hierarchy_lets_nbgrader_and_the_cli_tell_them_apart():
    assert issubclass(GradingError, AssertionError)
    assert issubclass(TamperingDetected, GradingError)
    assert issubclass(UnreliableMeasurement, GradingError)
    assert str(TamperingDetected("x")).startswith("Tampering detected: x")
    assert str(TamperingDetected("Tampering detected: y")) == "Tampering detected: y"


def test_no_tampering_reported_in_a_clean_process():
    assert grading._state._tampering_problems() == []


# --- types that equality alone would merge ---------------------------------------------------

@pytest.mark.parametrize("actual, expected, message", [
    (np.datetime64("2026-01-01T23:59", "m"), np.datetime64("2026-01-01", "D"), "datetime64[D]"),
    (np.timedelta64(90, "s"), np.timedelta64(1, "m"), "timedelta64[m]"),
    ({True: 1}, {1: 1}, "unexpected keys [True]"),
    ({1: "a"}, {1.0: "a"}, "missing keys [1.0]"),
    ({(1, True): 2}, {(1, 1): 2}, "missing keys [(1, 1)]"),
    ({1.0}, {1}, "1 unexpected, e.g. [1.0]"),
    (frozenset({True}), frozenset({1}), "1 missing, e.g. [1]"),
])
def test_units_and_key_types_are_compared_not_merged(actual, expected, message):
    # 23:59 must not pass as that day, nor True as the key 1 (hash-equal in a dict or set).
    with pytest.raises(GradingError, match=re.escape(message)):
        assert_same(actual, expected)


@pytest.mark.parametrize("value", [
    np.timedelta64(60, "s"), np.datetime64("2026-01-01", "D"), {np.int64(1): 2, "a": {3}},
    {(1, "x"): [1.5]}, frozenset({1, 2.5, "z"}),
])
def test_equal_values_of_the_same_types_still_pass(value):
    assert_same(value, value)


# --- parallel work: parallel_points ------------------------------------------------------------
# A job of 8 chunks of NumPy work (about 40 ms on one core here): two threads run it at about
# 1.7-2x once each call's wait for a core is taken out; thresholds 1.3x (full) and 1.1x (zero).

def _chunk(seed, i, n):
    x = np.random.default_rng([seed, i]).random(n)
    for _ in range(8):
        x = np.sqrt(x + 1.0)
    return float(x.sum())


def make_job():
    return (int(_rng.integers(2**32)), 8, 300_000)


def serial_total(seed, n_chunks, n):
    return sum(_chunk(seed, i, n) for i in range(n_chunks))


def threaded_total(seed, n_chunks, n, workers):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers) as pool:
        return sum(pool.map(lambda i: _chunk(seed, i, n), range(n_chunks)))


def _parallel(candidate, workers=2, **kwargs):
    return grading.parallel_points(candidate, serial_total, make_job, workers=workers, full_at=1.3, zero_at=1.1,
                                   points=4, budget=1.0, **kwargs)


needs_two_cores = pytest.mark.skipif(timing._available_cores() < 2, reason="needs 2 cores")


@needs_two_cores
def test_threads_that_share_the_work_earn_the_parallel_points():
    assert _parallel(threaded_total) == 4.0


@needs_two_cores
def test_the_kernel_reads_a_parallel_cell_from_its_checks_while_autograding(monkeypatch):
    # The stored verdict is the verifier's; in the kernel, the checked calls after the first
    # are the reading (no interleaved rounds), and they still tell parallel work from serial.
    calls = []

    def counted(seed, n_chunks, n, workers):
        calls.append(workers)
        return threaded_total(seed, n_chunks, n, workers)

    def ignores_workers(seed, n_chunks, n, workers):
        return serial_total(seed, n_chunks, n)

    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert _parallel(counted) == 4.0
    assert sorted(calls) == [1, 1, 1, 2, 2, 2]  # three checks, one call on each side
    with pytest.raises(GradingError, match=r"Not parallel: with 2 workers 1 thread .* a short reading in your kernel while graded \(its 2 checked"):
        _parallel(ignores_workers)


@needs_two_cores
def test_work_done_one_task_after_another_is_not_parallel():
    def ignores_workers(seed, n_chunks, n, workers):
        return serial_total(seed, n_chunks, n)

    with pytest.raises(GradingError, match=r"Not parallel: with 2 workers 1 thread or process did the work"):
        _parallel(ignores_workers)


@needs_two_cores
def test_a_slowed_down_one_worker_run_counts_no_slower_than_the_reference():
    # Sleeping on one worker would triple the ratio; the one-worker time counts at most
    # 1.1 times the grader's serial version, so the ratio stays what the threads earn.
    def sandbagged(seed, n_chunks, n, workers):
        if workers == 1:
            time.sleep(0.1)
        return threaded_total(seed, n_chunks, n, workers)

    settings = grading._parallel._parallel_settings(2, 1.3, 1.1, 4, 1.0, 1.1, 1.25, 1e-9, 0.0, 0.1, 0.02, 3)
    with grading._checks._grading_session():
        result = grading._parallel._measure_parallel(sandbagged, serial_total, make_job, settings,
                                                     grading._speed._Decision(full_at=1.3, zero_at=1.1, points=4))
    assert result.one_seconds > 2 * result.reference_seconds
    assert result.ratio <= 1.1 * result.reference_seconds / result.many_seconds * 1.2


@needs_two_cores
def test_a_result_that_depends_on_the_worker_count_is_wrong():
    def racy(seed, n_chunks, n, workers):
        return threaded_total(seed, n_chunks, n, workers) + (workers > 1) * 1e-3  # a 3e-10 relative change

    with pytest.raises(GradingError, match="must be identical"):
        _parallel(racy)
    with pytest.raises(GradingError, match="Wrong result with 2 workers on fresh input 1"):
        _parallel(lambda seed, n_chunks, n, workers: 0.0)


@needs_two_cores
def test_threads_that_take_turns_on_the_gil_earn_nothing_and_are_not_timed_for_long():
    def pure_python(seed, n_chunks, n, workers):
        from concurrent.futures import ThreadPoolExecutor

        def chunk(i):
            xs = np.random.default_rng([seed, i]).random(n).tolist()
            for _ in range(8):
                xs = [math.sqrt(x + 1.0) for x in xs]
            return float(np.sum(xs))

        with ThreadPoolExecutor(workers) as pool:
            return sum(pool.map(chunk, range(n_chunks)))

    started = time.perf_counter()
    assert _parallel(pure_python) == 0.0  # at most 1.1x the reference's time over a slower parallel run
    assert time.perf_counter() - started < 30


def test_parallel_work_needs_two_cores_and_no_more_than_the_process_has():
    with pytest.raises(UnreliableMeasurement, match="needs from 2 up to that many"):
        _parallel(threaded_total, workers=timing._available_cores() + 1)
    with pytest.raises(UnreliableMeasurement, match="graded with"):
        _parallel(threaded_total, workers=1)


@pytest.mark.parametrize("ratios, settled", [
    ([2.0] * 200, True),             # every ratio past full_at: the grade cannot change
    ([1.0] * 200, True),             # every ratio below zero_at: nor can it here
    ([2.0] * 5 + [1.3] * 195, False),  # a partial-credit reading runs until the budget is spent
    ([1.05, 2.0] * 100, False),      # ratios on both sides: the budget too (twice: too close to call)
])
def test_parallel_rounds_stop_at_six_once_the_grade_is_settled(ratios, settled):
    from course_lib.grading._parallel import _ParallelRound, _ParallelSettings, _parallel_rounds
    from course_lib.grading._speed import _Decision

    settings = _ParallelSettings(workers=2, full_at=1.6, zero_at=1.1, points=2, budget=1.0, within=1.1,
                                 min_concurrency=1.5, tolerance=None, margin=0.0, min_call_seconds=0.001,
                                 checks=3)
    decision = _Decision(full_at=1.6, zero_at=1.1, points=2, margin=0.0)
    # About 0.03 s counted a round (not slept): the 1 s budget lasts some 35 rounds.
    rounds = _parallel_rounds(lambda i: _ParallelRound(0.01, 0.01, 0.01 / ratios[i], 2.0, 2, 0.0),
                              settings, decision)
    assert len(rounds) == 6 if settled else len(rounds) > 30


# --- partial credit for memory and growth (log_points, peak_memory_points, scaling_points) ----


@pytest.mark.parametrize("value, full_at, zero_at, expected", [
    (8.0, 8, 4, 5.0), (11.3, 8, 4, 5.0), (4.0, 8, 4, 0.0), (1.0, 8, 4, 0.0),
    (math.sqrt(32), 8, 4, 2.5),                  # halfway on a log scale
    (20e6, 20e6, 100e6, 5.0), (100e6, 20e6, 100e6, 0.0), (math.sqrt(2e15), 20e6, 100e6, 2.5),
    (float("nan"), 8, 4, 0.0), (float("nan"), 20e6, 100e6, 0.0),
])
def test_log_points_run_either_way_between_the_thresholds(value, full_at, zero_at, expected):
    assert grading.log_points(value, full_at, zero_at, 5) == pytest.approx(expected, abs=0.005)


@given(st.floats(0.01, 1e4), st.floats(1.1, 100.0))
def test_log_points_grow_with_the_measurement_and_stay_in_range(value, full_at):
    here = grading.log_points(value, full_at, 1.0, 4)
    assert 0.0 <= here <= 4.0 and type(here) is float
    assert grading.log_points(value * 1.5, full_at, 1.0, 4) >= here
    assert grading.log_points(1.0 / value, 1.0 / full_at, 1.0, 4) == pytest.approx(here, abs=0.011)  # mirrored


@pytest.mark.parametrize("kwargs, message", [
    ({"full_at": 4, "zero_at": 4}, "must differ"), ({"full_at": -1, "zero_at": 4}, "positive"),
    ({"full_at": 8, "zero_at": 4, "points": 0}, "positive"),
])
def test_log_points_reject_thresholds_that_give_no_scale(kwargs, message):
    with pytest.raises(ValueError, match=message):
        grading.log_points(5.0, **{"points": 5, **kwargs})


def test_peak_memory_points_full_partial_and_none_around_80_mb(capfd):
    assert grading.peak_memory_points(allocate_80_mb, "100 MB", "400 MB", 6) == 6.0
    assert grading.peak_memory_points(allocate_80_mb, "10 MB", "80 MB", 6) == 0.0
    # 80 MB between 40 MB and 160 MB: halfway on a log scale
    assert grading.peak_memory_points(allocate_80_mb, "40 MB", "160 MB", 6) == pytest.approx(3.0, abs=0.1)
    assert grading.peak_memory_points(np.ones, "1 MB", "4 MB", 2, 1000) == 2.0  # arguments passed on
    assert capfd.readouterr() == ("", "")


def test_peak_memory_points_agree_with_the_assertion_at_full_marks():
    assert grading.peak_memory_points(allocate_80_mb, "90 MB", "400 MB", 6) == 6.0
    assert_peak_memory_below(allocate_80_mb, "90 MB")
    assert grading.peak_memory_points(allocate_80_mb, "50 MB", "400 MB", 6) < 6.0
    with pytest.raises(GradingError):
        assert_peak_memory_below(allocate_80_mb, "50 MB")


def test_peak_memory_points_are_checked_like_the_assertion(monkeypatch):
    with pytest.raises(ValueError, match="full_at must be below zero_at"):
        grading.peak_memory_points(allocate_80_mb, "400 MB", "100 MB", 6)
    with pytest.raises(ValueError, match="limit must look like"):
        grading.peak_memory_points(allocate_80_mb, "fifty", "100 MB", 6)
    with pytest.raises(GradingError, match="Your function raised ZeroDivisionError"):
        grading.peak_memory_points(lambda: 1 / 0, "1 MB", "2 MB", 1)
    monkeypatch.setattr(tracemalloc, "get_traced_memory", lambda: (0, 0))
    with pytest.raises(TamperingDetected, match="tracemalloc.get_traced_memory was reassigned"):
        grading.peak_memory_points(allocate_80_mb, "1 MB", "2 MB", 1)


def test_scaling_points_full_for_linear_and_none_for_quadratic(capfd):
    assert grading.scaling_points(linear, make_list, [50_000, 100_000, 200_000, 400_000], 1.5, 1.8, 3,
                                  budget=0.05) == 3.0
    assert grading.scaling_points(quadratic, make_list, [250, 500, 1_000, 2_000], 1.2, 1.5, 3,
                                  budget=0.05) == 0.0
    assert capfd.readouterr() == ("", "")


@pytest.mark.parametrize("slope, expected", [(1.0, 3.0), (1.6, 3.0), (1.75, 1.5), (1.9, 0.0), (2.0, 0.0),
                                             (float("nan"), 0.0)])
def test_scaling_points_are_linear_in_the_exponent_after_margin(slope, expected):
    assert grading._memory._exponent_points(slope, full_at=1.5, zero_at=1.8, points=3, margin=0.1) == expected


def test_scaling_points_refuse_what_assert_scaling_refuses(monkeypatch):
    with pytest.raises(ValueError, match="full_at must be below zero_at"):
        grading.scaling_points(linear, make_list, [1000, 2000], 1.8, 1.5, 3)
    with pytest.raises(UnreliableMeasurement, match="use larger sizes"):
        grading.scaling_points(linear, make_list, [10, 20, 40], 1.5, 1.8, 3, budget=0.01)
    with pytest.raises(ValueError, match="returned equal inputs"):
        grading.scaling_points(linear, lambda n: list(range(n)), [1000, 2000], 1.5, 1.8, 3)
    monkeypatch.setattr(time, "process_time", lambda: 0.0)
    with pytest.raises(TamperingDetected, match="time.process_time was reassigned"):
        grading.scaling_points(linear, make_list, [50_000, 100_000], 1.5, 1.8, 3, budget=0.01)


def test_the_kernel_takes_a_short_reading_while_autograding(monkeypatch):
    # While nbgrader autogrades, the stored speed verdict is the verifier's: each cell is
    # timed in full once, outside the kernel; the kernel reads its correctness calls' times.
    timed = []
    real = grading._speed._timed_comparison
    monkeypatch.setattr(grading._speed, "_timed_comparison", lambda *a: timed.append(1) or real(*a))
    make_args = lambda: (np.random.default_rng().random(200_000),)  # noqa: E731
    slow = lambda x: float(np.sort(x).sum())  # noqa: E731
    settings = grading._speed._speed_settings(0.2, 0.1, 1e-4, 3, None, None, 1e-9, 0.0)
    decision = grading._speed._Decision(full_at=2, zero_at=1.2, points=1)
    with grading._checks._grading_session():
        full = grading._speed._measure_speedup(lambda x: float(x.sum()), slow, make_args, settings, 2.0, decision)
        monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
        quick = grading._speed._measure_speedup(lambda x: float(x.sum()), slow, make_args, settings, 2.0, decision)
    assert len(timed) >= 1 and full.rounds >= 6
    assert len(timed) == full.measurements and quick.rounds == 0 and quick.ratio > 2
    assert "a short reading in your kernel while graded" in quick.describe()
