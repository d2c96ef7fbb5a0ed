"""Tests for course_lib.grader._safe_pickle: plain data comes back, nothing that acts does."""

from __future__ import annotations

import datetime
import os
import pickle

import numpy as np
import pandas as pd
import pytest

from course_lib.grader._safe_pickle import UnsafePickle, loads
from course_lib.grading import assert_same


class _Shell:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


class _Custom:
    pass


class _LoadsAFile:
    def __reduce__(self):
        return (np.load, ("/etc/passwd",))


class _Evaluates:
    def __reduce__(self):
        return (eval, ("1 + 1",))


PLAIN = [
    {"a": [1, 2.5, "x", None, True], "b": (1, 2), "c": {3, 4}, "d": frozenset({5})},
    np.arange(12, dtype=np.int32).reshape(3, 4),
    np.array([1.5, np.nan]),
    np.float64(2.5),
    np.array(["a", "bc"]),
    pd.Series([1.0, 2.0], index=["x", "y"], name="s"),
    pd.DataFrame({"n": [1, 2, 3], "t": ["a", "b", "c"], "f": [0.1, 0.2, 0.3]}),
    pd.DataFrame({"c": pd.Categorical(["lo", "hi", "lo"])}).set_index(pd.RangeIndex(3, 6)),
    pd.Series(pd.date_range("2026-01-01", periods=3, freq="D")),
    pd.DataFrame({"x": [1, 2]}, index=pd.MultiIndex.from_tuples([("a", 1), ("b", 2)])),
    datetime.datetime(2026, 12, 3, 8, 0),
    complex(1, 2),
]


@pytest.mark.parametrize("value", PLAIN, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_plain_data_comes_back_equal(value, protocol):
    assert_same(loads(pickle.dumps(value, protocol=protocol)), value)


@pytest.mark.parametrize("value, named", [
    (_Shell(), "system"),
    (_Custom(), "_Custom"),
    (_LoadsAFile(), "numpy.load"),
    (_Evaluates(), "builtins.eval"),
    (os.getcwd, "getcwd"),
    (np.memmap, "memmap"),
    (pd.read_csv, "read_csv"),
])
def test_anything_that_acts_is_refused_and_named(value, named):
    with pytest.raises(UnsafePickle, match=named):
        loads(pickle.dumps(value))


def test_nothing_runs_while_refusing(tmp_path):
    marker = tmp_path / "ran"

    class _Touch:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    with pytest.raises(UnsafePickle):
        loads(pickle.dumps(_Touch()))
    assert not marker.exists()


def test_oversized_data_is_refused_before_reading():
    with pytest.raises(UnsafePickle, match="above the limit"):
        loads(pickle.dumps(list(range(1000))), max_bytes=100)
