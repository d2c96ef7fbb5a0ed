"""Tests for course_lib.memory: size estimates, deep frame memory and traced peaks."""

import threading
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

from course_lib import memory

MB80 = 10_000_000  # float64 elements in 80 MB

dtypes = st.sampled_from(
    ["float64", "float32", "float16", "int8", "int16", "int32", "int64", "uint8", "uint64",
     "bool", "complex128", "complex64", "U1", "U7", "S3", "datetime64[ns]", "timedelta64[s]",
     "object", np.dtype([("x", "f8"), ("n", "i4")])]
)
shapes = st.lists(st.integers(0, 12), min_size=0, max_size=4).map(tuple)


@pytest.fixture(autouse=True)
def _tracing_off_around_each_test():
    # Each test states the tracing state it needs; none leaks into the next.
    if tracemalloc.is_tracing():
        tracemalloc.stop()
    yield
    if tracemalloc.is_tracing():
        tracemalloc.stop()


def _allocate_and_free(n_float64):
    scratch = np.ones(n_float64)
    total = float(scratch[0])
    del scratch
    return total


# ---- array_nbytes ---------------------------------------------------------------------

@given(shapes, dtypes)
def test_array_nbytes_equals_what_numpy_allocates(shape, dtype):
    assert memory.array_nbytes(shape, dtype) == np.empty(shape, dtype).nbytes


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_array_nbytes_accepts_an_int_shape(n):
    assert memory.array_nbytes(n, "int16") == np.empty(n, "int16").nbytes == 2 * n


def test_array_nbytes_accepts_numpy_ints_and_dtype_objects():
    assert memory.array_nbytes((np.int64(3), 4), np.float32) == 48
    assert memory.array_nbytes(np.array([2, 5]), np.dtype("i8")) == 80


def test_array_nbytes_answers_for_arrays_too_big_to_make():
    assert memory.array_nbytes((50_000, 50_000), "float64") == 20_000_000_000
    assert memory.array_nbytes((10**6,) * 4, "complex128") == 16 * 10**24  # no overflow


@pytest.mark.parametrize(
    "shape, dtype, exc, match",
    [
        ((3, -1), "float64", ValueError, "negative dimension -1"),
        (-5, "float64", ValueError, "negative dimension"),
        ((2.5, 3), "float64", TypeError, "whole numbers"),
        ((True, 3), "float64", TypeError, "whole numbers"),
        ("10", "float64", TypeError, "int or a sequence of ints"),
        (None, "float64", TypeError, "int or a sequence of ints"),
        ((3,), "foo", TypeError, "not a NumPy dtype"),
        ((3,), "float99", TypeError, "not a NumPy dtype"),
        ((3,), "U", ValueError, "has no length"),
        ((3,), str, ValueError, "has no length"),
    ],
)
def test_array_nbytes_rejects_bad_input_clearly(shape, dtype, exc, match):
    with pytest.raises(exc, match=match):
        memory.array_nbytes(shape, dtype)


# ---- frame_memory ---------------------------------------------------------------------

@pytest.fixture
def orders():
    n = 2_000
    cities = np.array(["London", "Manchester", "Edinburgh", "Cardiff"])[np.arange(n) % 4]
    df = pd.DataFrame({"qty": np.arange(n), "price": np.linspace(1, 2, n), "city": cities})
    df["city_cat"] = df["city"].astype("category")
    return df


def test_frame_memory_total_is_pandas_deep_total(orders):
    usage = memory.frame_memory(orders)
    assert usage["total"] == orders.memory_usage(deep=True).sum()
    assert usage.drop("total").sum() == usage["total"]


def test_frame_memory_has_index_each_column_and_total(orders):
    usage = memory.frame_memory(orders)
    assert list(usage.index) == ["Index", "qty", "price", "city", "city_cat", "total"]
    assert usage.name == "bytes"
    assert usage["qty"] == orders["qty"].to_numpy().nbytes
    assert usage["Index"] == orders.index.memory_usage(deep=True)


def test_frame_memory_counts_the_characters_of_text(orders):
    # Deep: measured as pandas reports it for however this pandas stores text
    # (str dtype, Python- or Arrow-backed), and more than a pointer per row.
    usage = memory.frame_memory(orders)
    assert usage["city"] == orders["city"].memory_usage(deep=True, index=False)
    assert usage["city"] >= orders["city"].str.len().sum()


def test_a_categorical_of_repeated_text_is_smaller_than_the_text(orders):
    usage = memory.frame_memory(orders)
    assert usage["city_cat"] < usage["city"] / 4


def test_frame_memory_of_an_empty_frame_is_its_index():
    usage = memory.frame_memory(pd.DataFrame())
    assert list(usage.index) == ["Index", "total"]
    assert usage["total"] == usage["Index"]


@pytest.mark.parametrize(
    "bad, exc, match",
    [
        (pd.Series([1, 2]), TypeError, "series.memory_usage"),
        (np.zeros(3), TypeError, "DataFrame"),
        (pd.DataFrame({"total": [1.0]}), ValueError, "column named 'total'"),
        (pd.DataFrame({"Index": [1.0]}), ValueError, "column named 'Index'"),
    ],
)
def test_frame_memory_rejects_bad_input(bad, exc, match):
    with pytest.raises(exc, match=match):
        memory.frame_memory(bad)


# ---- peak and track_peak --------------------------------------------------------------

def test_peak_sees_an_80_mb_numpy_allocation():
    measured = memory.peak(np.ones, MB80)
    assert 80e6 <= measured.peak < 85e6
    assert measured.result.nbytes == 80_000_000
    assert measured.seconds >= 0
    assert not tracemalloc.is_tracing()  # it was off before, so it is off after


def test_peak_sees_a_temporary_that_is_freed_before_returning():
    measured = memory.peak(_allocate_and_free, MB80)
    assert measured.result == 1.0
    assert 80e6 <= measured.peak < 85e6


def test_peak_of_a_small_call_is_small():
    assert memory.peak(sum, range(100)).peak < 100_000


def test_peak_passes_keyword_arguments_through():
    measured = memory.peak(np.full, (10, 10), fill_value=3.0)
    assert measured.result.sum() == 300.0


def test_peak_result_repr_is_readable_and_short():
    text = repr(memory.peak(np.ones, MB80))
    assert text.startswith("PeakResult(peak=80.0 MB, seconds=")
    assert "ndarray" in text and len(text) < 100


def test_peak_of_a_python_allocation():
    measured = memory.peak(lambda: [0.5 * i for i in range(100_000)])
    # 100 000 float objects (24 B) and a list of pointers (8 B each) at least
    assert measured.peak >= 100_000 * 32


def test_peak_rejects_a_non_callable():
    with pytest.raises(TypeError, match="function to call"):
        memory.peak(np.zeros(3))


def test_track_peak_sets_peak_on_exit():
    with memory.track_peak() as tracked:
        assert tracked.peak is None
        block = np.ones(MB80)
    assert 80e6 <= tracked.peak < 85e6
    assert "80." in repr(tracked)
    del block


def test_track_peak_restores_tracing_state_when_it_was_off():
    with memory.track_peak():
        assert tracemalloc.is_tracing()
    assert not tracemalloc.is_tracing()


def test_track_peak_leaves_prior_tracing_running():
    tracemalloc.start()
    kept = np.ones(1_000_000)  # traced before the block; not part of its peak
    with memory.track_peak() as tracked:
        _allocate_and_free(MB80)
    assert tracemalloc.is_tracing()
    assert 80e6 <= tracked.peak < 85e6
    del kept


def test_nested_blocks_each_report_their_own_peak_and_outer_includes_inner():
    with memory.track_peak() as outer:
        _allocate_and_free(2 * MB80)  # 160 MB, before the inner block starts
        with memory.track_peak() as inner:
            _allocate_and_free(MB80)
        assert tracemalloc.is_tracing()  # the inner block did not stop the outer's tracing
        with memory.track_peak() as second_inner:
            _allocate_and_free(MB80 // 10)
    assert not tracemalloc.is_tracing()
    assert 80e6 <= inner.peak < 85e6
    assert 8e6 <= second_inner.peak < 10e6
    assert 160e6 <= outer.peak < 170e6  # the inner reset_peak did not hide it


def test_outer_peak_includes_an_inner_peak_larger_than_its_own():
    with memory.track_peak() as outer:
        with memory.track_peak() as inner:
            _allocate_and_free(MB80)
        small = np.ones(1000)
    assert 80e6 <= inner.peak <= outer.peak < 85e6
    del small


def test_track_peak_ends_cleanly_when_the_block_raises():
    with pytest.raises(ZeroDivisionError):
        with memory.track_peak() as tracked:
            1 / 0
    assert tracked.peak is not None
    assert not tracemalloc.is_tracing()


def test_stopping_tracemalloc_inside_a_block_is_reported():
    with pytest.raises(RuntimeError, match="stopped inside"):
        with memory.track_peak():
            tracemalloc.stop()


def test_blocks_ending_out_of_order_in_threads_keep_tracing_for_the_last():
    entered, release = threading.Event(), threading.Event()
    results = {}

    def other_thread():
        with memory.track_peak() as tracked:
            entered.set()
            release.wait(5)
            _allocate_and_free(MB80)
        results["other"] = tracked.peak

    with memory.track_peak() as first:  # starts tracing
        worker = threading.Thread(target=other_thread)
        worker.start()
        entered.wait(5)
    assert tracemalloc.is_tracing()  # still needed by the other thread's block
    release.set()
    worker.join(5)
    assert not tracemalloc.is_tracing()
    assert first.peak < 1e6
    assert 80e6 <= results["other"] < 85e6


# ---- fmt_bytes ------------------------------------------------------------------------

@pytest.mark.parametrize(
    "n, text",
    [
        (0, "0 B"),
        (512, "512 B"),
        (999, "999 B"),
        (1000, "1.0 kB"),
        (1_536, "1.5 kB"),
        (999_999, "1.0 MB"),
        (80_000_000, "80.0 MB"),
        (20_000_000_000, "20.0 GB"),
        (3.2e12, "3.2 TB"),
        (5e18, "5000.0 PB"),
        (-2_000_000_000, "-2.0 GB"),
        (np.int64(4096), "4.1 kB"),
    ],
)
def test_fmt_bytes_examples(n, text):
    assert memory.fmt_bytes(n) == text


@pytest.mark.parametrize("bad, exc", [(float("nan"), ValueError), (float("inf"), ValueError),
                                      ("80 MB", TypeError), (None, TypeError), (True, TypeError)])
def test_fmt_bytes_rejects_non_numbers(bad, exc):
    with pytest.raises(exc, match="number of bytes"):
        memory.fmt_bytes(bad)
