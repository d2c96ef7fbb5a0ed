"""Tests for course_lib.grader._data: results come back as data, and nothing else can come back."""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import json
import os
import pickle
import zoneinfo

import numpy as np
import pandas as pd
import pytest

from course_lib.grader._data import NotData, dump, dumps, loads
from course_lib.grading import assert_same

PARIS = zoneinfo.ZoneInfo("Europe/Paris")

PLAIN = [
    None, True, 0, -7, 2**80, 1.5, -0.0, float("nan"), float("inf"), "héllo\udcff", b"\x00\xff",
    bytearray(b"ab"), complex(1, -2),
    {"a": [1, 2.5, "x", None, True], "b": (1, 2), "c": {3, 4}, "d": frozenset({5})},
    {1: "int key", (1, "t"): "tuple key", None: 0},
    collections.OrderedDict([("z", 1), ("a", 2)]), collections.Counter("abracadabra"),
    collections.deque([1, 2, 3], maxlen=5),
    datetime.date(2026, 12, 4), datetime.datetime(2026, 12, 3, 8, 0, 0, 123456),
    datetime.datetime(2026, 10, 25, 2, 30, tzinfo=PARIS, fold=1),
    datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=-3, minutes=-30))),
    datetime.time(23, 59, 1), datetime.timedelta(days=-1, seconds=5, microseconds=7),
    decimal.Decimal("1.10"), fractions.Fraction(-3, 7),
    np.arange(12, dtype=np.int32).reshape(3, 4), np.arange(12.0).reshape(3, 4).T,
    np.array([1.5, np.nan]), np.array([], dtype=np.float32), np.zeros((0, 3)),
    np.array(["a", "bc"]), np.array([b"x", b"yz"]), np.array([True, False]),
    np.array(["2026-01-01T00:00", "NaT"], dtype="datetime64[m]"), np.array([5], dtype="timedelta64[ns]"),
    np.array([(1, 2.5)], dtype=[("a", "<i4"), ("b", "<f8")]),
    np.array([1, "a", None, (2, 3)], dtype=object), np.array(7.0), np.array([1 + 2j]),
    np.float64(2.5), np.int8(-3), np.bool_(True), np.datetime64("2026-12-04", "D"), np.str_("s"),
    pd.Series([1.0, 2.0], index=["x", "y"], name="s"),
    pd.Series(["a", None, "c"]), pd.Series(["a", "b"], dtype=object),
    pd.Series([1, None], dtype="Int64"), pd.Series([True, None], dtype="boolean"),
    pd.Series([0.5, None], dtype="Float64"), pd.Series(["x", None], dtype="string"),
    pd.DataFrame({"n": [1, 2, 3], "t": ["a", "b", "c"], "f": [0.1, 0.2, 0.3]}),
    pd.DataFrame({"c": pd.Categorical(["lo", "hi", "lo"], categories=["lo", "hi"], ordered=True)})
    .set_index(pd.RangeIndex(3, 9, 2)),
    pd.Series(pd.date_range("2026-01-01", periods=3, freq="D")),
    pd.Series(pd.date_range("2026-03-28", periods=3, freq="D", tz="Europe/Paris")),
    pd.Series(pd.to_timedelta([1, 2], unit="s")),
    pd.DataFrame({"x": [1, 2]}, index=pd.MultiIndex.from_tuples([("a", 1), ("b", 2)], names=["k", "n"])),
    pd.DataFrame([[1, 2]], columns=["dup", "dup"]),
    pd.DataFrame({"a": [1.0]}).groupby("a").sum(), pd.DataFrame(),
    pd.Index([3, 1, 2], name="i"), pd.Index(["a", "b"]), pd.CategoricalIndex(["p", "q", "p"]),
    pd.DatetimeIndex(["2026-01-01", None]), pd.Categorical(["u", "v"]),
    pd.Timestamp("2026-12-04 10:00:00.123456789"), pd.Timestamp("2026-12-04", tz="Europe/Paris"),
    pd.Timestamp("2026-12-04").as_unit("s"), pd.Timedelta(5, "us"), pd.NaT, pd.NA,
    [np.float64(1.0), pd.Series([1]), {"nested": [np.arange(2)]}],
]


def _same_type_everywhere(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, (np.ndarray, np.generic, pd.Series, pd.Index)):
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
    if isinstance(a, pd.DataFrame):
        assert list(a.dtypes) == list(b.dtypes)
        assert a.columns.dtype == b.columns.dtype and a.index.dtype == b.index.dtype
    if isinstance(a, (pd.Series, pd.DataFrame)):
        assert type(a.index) is type(b.index) and a.index.dtype == b.index.dtype
    if isinstance(a, (list, tuple)):
        for x, y in zip(a, b):
            _same_type_everywhere(x, y)


@pytest.mark.parametrize("value", PLAIN, ids=lambda v: type(v).__name__)
def test_plain_data_comes_back_the_same(value):
    back = loads(dumps(value))
    _same_type_everywhere(back, value)
    if isinstance(value, (bytearray, collections.deque, datetime.time, decimal.Decimal, fractions.Fraction,
                          collections.OrderedDict, collections.Counter)):  # not kinds assert_same takes
        assert back == value
    elif isinstance(value, pd.Categorical):
        assert list(back) == list(value) and back.dtype == value.dtype
    else:
        assert_same(back, value)
    if isinstance(value, (datetime.datetime, datetime.time)):
        assert (back.tzinfo, back.fold) == (value.tzinfo, value.fold)
    if isinstance(value, collections.deque):
        assert back.maxlen == value.maxlen
    if isinstance(value, float) and value == 0:
        assert str(back) == str(value)  # -0.0 stays negative


@pytest.mark.parametrize("value", PLAIN, ids=lambda v: type(v).__name__)
def test_writing_to_a_file_gives_the_same_bytes(value, tmp_path):
    # The worker writes its timed results with dump (straight from the arrays' memory),
    # the verifier reads them as dumps would have made them.
    path = tmp_path / "out"
    with open(path, "wb") as fh:
        dump(value, fh)
    assert path.read_bytes() == dumps(value)


def test_what_is_not_data_writes_nothing(tmp_path):
    path = tmp_path / "out"
    with open(path, "wb") as fh, pytest.raises(NotData):
        dump([np.arange(3), os.getcwd], fh)
    assert path.read_bytes() == b""


def test_a_stopwatch_comes_back_with_its_figures():
    from course_lib import timing

    sw = timing.stages()
    with sw("load"):
        sum(range(1000))
    with sw("report"):
        pass
    back = loads(dumps(sw))
    assert type(back) is timing.Stopwatch
    assert back.seconds == sw.seconds and back.cpu_seconds == sw.cpu_seconds
    assert_same(back.table(), sw.table())


@pytest.mark.parametrize("bits", [np.random.PCG64, np.random.MT19937, np.random.Philox])
def test_a_random_generator_comes_back_in_the_same_state(bits):
    rng = np.random.Generator(bits(7))
    rng.random(3)
    back = loads(dumps(rng))
    assert type(back.bit_generator) is bits
    assert back.random(5).tolist() == rng.random(5).tolist()


def test_arrays_come_back_writable_and_unshared():
    data = dumps(np.arange(4))
    back = loads(data)
    back[0] = 99  # a read-only view of the bytes would raise here
    assert loads(data)[0] == 0


class _Custom:
    pass


class _MyList(list):
    pass


@pytest.mark.parametrize("make, named", [
    (lambda: os.getcwd, "builtin_function_or_method"),
    (lambda: _Custom(), "_Custom"),
    (lambda: _MyList([1]), "_MyList"),
    (lambda: (lambda: 1), "function"),
    (lambda: np.memmap, "type"),
    (lambda: np.ma.masked_array([1, 2], mask=[0, 1]), "MaskedArray"),
    (lambda: np.array([1, 2]).view(np.recarray), "recarray"),
    (lambda: pd.read_csv, "function"),
    (lambda: [1, {"deep": [open]}], "builtin_function_or_method"),
    (lambda: collections.defaultdict(list), "defaultdict"),
    (lambda: np.array([1, os.getcwd], dtype=object), "builtin_function_or_method"),
    (lambda: pd.Series([1, _Custom()], dtype=object), "_Custom"),
    (lambda: int("9" * 4000) ** 2, "cannot be written"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_anything_but_data_cannot_be_written(make, named):
    with pytest.raises(NotData, match=named):
        dumps(make())


def _forged(tree, buffers=()):
    head = json.dumps({"tree": tree, "sizes": [len(b) for b in buffers]}).encode()
    return b"MFDATA01" + len(head).to_bytes(8, "little") + head + b"".join(buffers)


@pytest.mark.parametrize("data", [
    pickle.dumps({"a": 1}),                                           # a pickle is not data
    b"",
    b"MFDATA01" + (10**9).to_bytes(8, "little") + b"{}",             # header past the end
    _forged({"builtins.eval": "1"}),                                   # a name that is no kind
    _forged({"ndarray": {"dtype": "O", "shape": [1], "buf": 0}}, [b"\x00" * 8]),  # objects as bytes
    _forged({"ndarray": {"dtype": [["a", "O"]], "shape": [1], "buf": 0}}, [b"\x00" * 8]),
    _forged({"ndarray": {"dtype": "<f8", "shape": [10**6], "buf": 0}}, [b"\x00" * 8]),  # short buffer
    _forged({"ndarray": {"dtype": "<f8", "shape": [-1], "buf": 0}}, [b""]),
    _forged({"series": [{"extension": ["object", []]}, None, None]}),  # an extension dtype that is numpy
    _forged({"list": {"not": "a list"}}),
    _forged({"dict": [[1]]}),
    _forged({"bytes": 3}),
    _forged({"int": "9" * 5000}),
    _forged({"timestamp": [0, "ns", {"zone": "../../etc/passwd"}]}),
    _forged({"a": 1, "b": 2}),
    _forged({"generator": {"dict": [["bit_generator", "os.system"]]}}),
    _forged([1, 2]),                                                   # a bare JSON list is no kind either
])
def test_anything_but_well_formed_data_is_refused(data):
    with pytest.raises(NotData):
        loads(data)


def test_size_limit():
    with pytest.raises(NotData, match="above the limit"):
        loads(dumps(b"x" * 100), max_bytes=50)


def test_nested_too_deeply_is_refused_both_ways():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(NotData, match="nested too deeply"):
        dumps(deep)
    head = ('{"tree":' + '{"list":[' * 100_000 + "null" + "]}" * 100_000 + ',"sizes":[]}').encode()
    with pytest.raises(NotData):
        loads(b"MFDATA01" + len(head).to_bytes(8, "little") + head)


def test_nothing_is_imported_or_called_by_name(monkeypatch):
    # The reader's only way to make a value is its own table: no import by a name in the data.
    import builtins

    real = builtins.__import__
    asked = []

    def spy(name, *args, **kwargs):
        asked.append(name)
        return real(name, *args, **kwargs)

    data = _forged({"tuple": [{"decimal": "1"}, {"ndarray": {"dtype": "<i8", "shape": [1], "buf": 0}}]},
                   [np.int64(5).tobytes()])
    monkeypatch.setattr(builtins, "__import__", spy)
    back = loads(data)
    assert back[0] == decimal.Decimal(1) and back[1].tolist() == [5]
    assert set(asked) <= {"numpy", "pandas", "pandas.api.types", "zoneinfo"}


def test_a_comparison_comes_back_with_its_figures():
    from course_lib import timing

    c = timing.compare(sorted, sorted, args=(list(range(500)),), budget=0.02, min_round=0.001)
    back = loads(dumps(c))
    assert type(back) is timing.Comparison and back == c
    with pytest.raises(NotData):
        loads(_forged({"comparison": {"dict": [["ratio", 1.0]]}}))


# --- what a reply may make the reader allocate (issue 26) ----------------------------------

def _peak_bytes(fn) -> tuple[int, str]:
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(NotData) as caught:
            fn()
        return tracemalloc.get_traced_memory()[1], str(caught.value)
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("tree, buffers", [
    ({"ndarray": {"shape": [300_000_000], "items": []}}, []),           # 97 bytes, 2.4 GB of pointers
    ({"ndarray": {"shape": [20_000, 20_000], "items": [1]}}, []),
    ({"index": [{"numpy": {"shape": [10**9], "items": [None]}}, None]}, []),
    ({"range": [0, 10**15, 1, None]}, []),                                # lazy, 8 PB once used
    ({"ndarray": {"dtype": "<f8", "shape": [1] * 40, "buf": 0}}, [b"\x00" * 8]),  # shape not capped
])
def test_a_declared_size_is_refused_before_it_is_allocated(tree, buffers):
    peak, message = _peak_bytes(lambda: loads(_forged(tree, buffers)))
    assert peak < 10 * 2**20, (peak, message)


def test_a_json_tree_that_would_inflate_past_the_limit_is_refused_unparsed():
    # 30 MB of "[]," would become about 650 MB of empty lists: refused from its bytes.
    head = b'{"tree":{"list":[' + b'{"list":[]},' * 2_500_000 + b'null]},"sizes":[]}'
    data = b"MFDATA01" + len(head).to_bytes(8, "little") + head
    peak, message = _peak_bytes(lambda: loads(data, max_decoded=256 * 2**20))
    assert "once read" in message and peak < len(head) + 10 * 2**20, (peak, message)


def test_honest_results_fit_the_decoded_limit_with_room_to_spare():
    from course_lib.grader._data import tree_cost

    floats = [i / 7 for i in range(1_000_000)]
    data = dumps(floats)
    assert loads(data, max_decoded=256 * 2**20) == floats
    frame = pd.DataFrame({"a": np.arange(10**6), "b": np.arange(10**6) / 3})
    assert_same(loads(dumps(frame), max_decoded=32 * 2**20), frame)  # raw buffers: charged at their size
    # the estimate is an upper bound of what parsing holds, and not far above it for numbers
    assert 50 * 2**20 < tree_cost(data[16:]) < 400 * 2**20
