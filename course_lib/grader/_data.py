"""Results from a student's process as data only: no pickle, nothing that names a callable.

A pickle is a program: it names importable functions and the unpickler calls them, so even
an allow-list of "data" constructors leaves a student a way to run code in the grader (one
reached ``subprocess.Popen`` through a NumPy submodule). What the student worker sends
back is therefore written by :func:`dumps` and read by :func:`loads`, a format in which a
value can only *be* one of a fixed set of kinds:

- ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``, ``bytearray``;
- ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``, ``collections.OrderedDict``,
  ``Counter`` and ``deque``; ``datetime``'s ``date``, ``time``, ``datetime``,
  ``timedelta``; ``Decimal`` and ``Fraction``;
- NumPy arrays and scalars (non-object dtypes as raw bytes; object arrays element by
  element) and random generators (by their state), pandas ``Series``, ``DataFrame``, ``Index`` (``RangeIndex``, ``MultiIndex``
  and the rest), ``Categorical``, extension arrays by their dtype's name, ``Timestamp``,
  ``Timedelta``, ``NaT`` and ``NA``;
- ``course_lib.timing.Stopwatch`` (its stage figures) and ``Comparison`` (its fields),
  which weeks 1 and 2 return.

The reader builds each kind with a fixed constructor of its own; type names in the data
are only ever looked up in that table or parsed as dtype strings (``numpy.dtype``,
``pandas.api.types.pandas_dtype``). Anything else (a class the student defined, a function,
a subclass of ``list``) cannot be written: the student learns that the result is not plain
data. The layout: 8 bytes of magic, the length of a JSON tree, the tree, then the raw
buffers it points to.

What a reply may make the reader allocate is bounded before anything is allocated
(``max_decoded``): the JSON tree's size once parsed is estimated from its bytes (a byte of
JSON can become 20 or more bytes of Python objects: ``[],`` is an empty list), an array's
declared shape must match the items or the bytes that came with it before the array is
made, and a lazy range is charged for what it would take materialised. A 97-byte reply
declaring 300 million items is refused, not allocated.

Examples
--------
>>> import numpy as np
>>> back = loads(dumps({"total": np.arange(3), "name": ("a", 1.5)}))
>>> back["total"].tolist(), back["name"]
([0, 1, 2], ('a', 1.5))
>>> import os
>>> dumps(os.getcwd)
Traceback (most recent call last):
    ...
course_lib.grader._data.NotData: a builtin_function_or_method is not plain data
"""

from __future__ import annotations

import collections
import contextvars
import dataclasses
import datetime as _dt
import decimal
import fractions
import json
import math
import struct
from typing import Any

__all__ = ["NotData", "dump", "dumps", "is_course_data", "loads"]

_MAGIC = b"MFDATA01"
_HEAD = struct.Struct("<Q")


class NotData(ValueError):
    """A value that the data format cannot carry, or bytes that are not in it."""


def dumps(obj: Any) -> bytes:
    """``obj`` as bytes of the data format; :class:`NotData` if it is not plain data."""
    return b"".join(_parts(obj))


def dump(obj: Any, fh: Any) -> None:
    """Write ``obj`` in the data format to the binary file ``fh``, as :func:`dumps` would.

    The arrays' bytes go to the file straight from their memory: no copy of them is made
    and no joined copy of the whole (the worker writes a batch's results this way, inside
    the timed window, so its cost is as small as the data allows). Nothing is written if
    ``obj`` is not plain data (:class:`NotData`).

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> fh = io.BytesIO()
    >>> dump([np.arange(3.0), "x"], fh)
    >>> fh.getvalue() == dumps([np.arange(3.0), "x"])
    True
    """
    for part in _parts(obj):
        fh.write(part)


def _parts(obj: Any) -> list:
    """The magic, the tree's length, the tree and the raw buffers: what is written, in order."""
    buffers: list = []
    try:
        tree = _encode(obj, buffers)
        head = json.dumps({"tree": tree, "sizes": [len(b) for b in buffers]},
                          separators=(",", ":"), allow_nan=True).encode("utf-8")
    except RecursionError:
        raise NotData("the value is nested too deeply") from None
    except NotData:
        raise
    except Exception as exc:  # a value whose parts cannot be read (e.g. an int too long to print)
        raise NotData(f"the value cannot be written ({type(exc).__name__}: {exc})") from None
    return [_MAGIC, _HEAD.pack(len(head)), head, *buffers]


def loads(data: bytes, max_bytes: int = 2**31, max_decoded: int = 2**32) -> Any:
    """The value ``data`` holds; :class:`NotData` for anything but well-formed data.

    ``max_bytes`` bounds the encoded size, ``max_decoded`` what decoding may allocate
    (estimated before allocating, see the module's docstring).

    Examples
    --------
    >>> head = b'{"tree":{"ndarray":{"shape":[300000000],"items":[]}},"sizes":[]}'
    >>> loads(_MAGIC + _HEAD.pack(len(head)) + head)
    Traceback (most recent call last):
        ...
    course_lib.grader._data.NotData: an array declares 300,000,000 items but 0 came with it
    """
    if len(data) > max_bytes:
        raise NotData(f"the result is {len(data):,} bytes, above the limit of {max_bytes:,}")
    if data[:len(_MAGIC)] != _MAGIC or len(data) < len(_MAGIC) + _HEAD.size:
        raise NotData("not in the data format")
    (size,) = _HEAD.unpack_from(data, len(_MAGIC))
    start = len(_MAGIC) + _HEAD.size
    text = bytes(data[start:start + size])
    cost = tree_cost(text)
    if cost > max_decoded:
        raise NotData(f"the result would take about {cost:,} bytes once read, above the limit of "
                      f"{max_decoded:,}")
    budget = _BUDGET.set([max_decoded - cost])
    try:
        head = json.loads(text.decode("utf-8"))
        sizes = head["sizes"]
        buffers, offset = [], start + size
        for n in sizes:
            if not isinstance(n, int) or n < 0 or offset + n > len(data):
                raise NotData("a buffer runs past the end of the data")
            buffers.append(memoryview(data)[offset:offset + n])
            offset += n
        return _decode(head["tree"], buffers)
    except NotData:
        raise
    except RecursionError:
        raise NotData("the value is nested too deeply") from None
    except Exception as exc:  # malformed: whatever went wrong, it is not data
        raise NotData(f"malformed data ({type(exc).__name__}: {exc})") from None
    finally:
        _BUDGET.reset(budget)


def tree_cost(text: bytes) -> int:
    """An upper bound on the bytes that parsing the JSON ``text`` and decoding it may hold.

    Counted from the characters that make objects (measured on CPython 3.11: an empty list
    costs 64 bytes with its slot, an empty dict 72, a number up to 36, a short string about
    60), twice over since the parsed tree and the decoded value live together for a while.

    Examples
    --------
    >>> tree_cost(b"[1.5, 2.5]") < 1000 < tree_cost(b"[" + b"[]," * 100 + b"[]]")
    True
    """
    parts = (36 * text.count(b",") + 100 * text.count(b"[") + 276 * text.count(b"{")
             + 49 * (text.count(b'"') // 2) + len(text))
    return 2 * parts


_BUDGET: contextvars.ContextVar[list[int]] = contextvars.ContextVar("decode_budget", default=[2**62])
_MAX_DIMENSIONS = 32


def _charge(nbytes: int, what: str) -> None:
    """Take ``nbytes`` off what the current :func:`loads` may still allocate, before allocating."""
    left = _BUDGET.get()
    if nbytes > left[0]:
        raise NotData(f"{what} would take {nbytes:,} bytes once read, more than the {max(left[0], 0):,} "
                      "left for this result")
    left[0] -= nbytes


def _shape(value: dict) -> tuple[int, ...]:
    shape = value["shape"]
    if type(shape) is not list or len(shape) > _MAX_DIMENSIONS or any(type(n) is not int or n < 0 for n in shape):
        raise NotData("malformed data (an array's shape)")
    return tuple(shape)


# --- writing -------------------------------------------------------------------------------

def _encode(obj: Any, buffers: list[bytes]) -> Any:
    kind = type(obj)
    if obj is None or kind in (bool, str):
        return obj
    if kind is int:
        return obj if -_SAFE_INT < obj < _SAFE_INT else {"int": str(obj)}
    if kind is float:
        return obj if math.isfinite(obj) else {"float": repr(obj)}
    plain = _PLAIN_WRITERS.get(kind)
    if plain is not None:
        return plain(obj, buffers)
    module = getattr(kind, "__module__", "") or ""
    if kind is _course_class("Stopwatch"):
        return _encode_stopwatch(obj, buffers)
    if kind is _course_class("Comparison"):
        return {"comparison": _encode({f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}, buffers)}
    if module.startswith("numpy"):
        return _encode_numpy(obj, buffers)
    if module.startswith("pandas"):
        return _encode_pandas(obj, buffers)
    raise NotData(f"a {kind.__name__} is not plain data")


def _items(values: Any, buffers: list[bytes]) -> list:
    # Written inline for the common cases (text, small whole numbers, finite floats): the
    # worker writes a timed batch's results inside the verifier's clock, and although the
    # verifier subtracts what the same writing costs it, a slow writer makes that noisy.
    out: list = []
    append = out.append
    for v in values:
        kind = type(v)
        if kind is str or v is None or kind is bool:
            append(v)
        elif kind is float and v - v == 0.0:  # finite (inf - inf and nan - nan are nan)
            append(v)
        elif kind is int and -_SAFE_INT < v < _SAFE_INT:
            append(v)
        else:
            append(_encode(v, buffers))
    return out


_SAFE_INT = 2**53  # whole numbers JSON readers agree on; larger ones travel as text


def _buffer(data: bytes, buffers: list[bytes]) -> int:
    buffers.append(data)
    return len(buffers) - 1


def _zone(tz: Any) -> Any:
    if tz is None:
        return None
    key = getattr(tz, "key", None)  # zoneinfo.ZoneInfo
    if isinstance(key, str):
        return {"zone": key}
    if isinstance(tz, _dt.timezone):
        offset = tz.utcoffset(None)
        return {"offset": [offset.days, offset.seconds, offset.microseconds]}
    zone = getattr(tz, "zone", None)  # pytz
    if isinstance(zone, str):
        return {"zone": zone}
    raise NotData(f"a time zone of type {type(tz).__name__} is not plain data")


_PLAIN_WRITERS: dict[type, Any] = {
    complex: lambda v, b: {"complex": [repr(v.real), repr(v.imag)]},
    bytes: lambda v, b: {"bytes": _buffer(bytes(v), b)},
    bytearray: lambda v, b: {"bytearray": _buffer(bytes(v), b)},
    list: lambda v, b: {"list": _items(v, b)},
    tuple: lambda v, b: {"tuple": _items(v, b)},
    set: lambda v, b: {"set": _items(v, b)},
    frozenset: lambda v, b: {"frozenset": _items(v, b)},
    dict: lambda v, b: {"dict": [[_encode(k, b), _encode(x, b)] for k, x in v.items()]},
    collections.OrderedDict: lambda v, b: {"odict": [[_encode(k, b), _encode(x, b)] for k, x in v.items()]},
    collections.Counter: lambda v, b: {"counter": [[_encode(k, b), _encode(x, b)] for k, x in v.items()]},
    collections.deque: lambda v, b: {"deque": [_items(v, b), v.maxlen]},
    _dt.date: lambda v, b: {"date": v.isoformat()},
    _dt.time: lambda v, b: {"time": [v.replace(tzinfo=None).isoformat(), _zone(v.tzinfo), v.fold]},
    _dt.datetime: lambda v, b: {"datetime": [v.replace(tzinfo=None).isoformat(), _zone(v.tzinfo), v.fold]},
    _dt.timedelta: lambda v, b: {"timedelta": [v.days, v.seconds, v.microseconds]},
    decimal.Decimal: lambda v, b: {"decimal": str(v)},
    fractions.Fraction: lambda v, b: {"fraction": [str(v.numerator), str(v.denominator)]},
}


def _course_class(name: str) -> type | None:
    """A class of course_lib.timing if that module is loaded (a student's result can only be
    one of its objects then)."""
    import sys

    timing = sys.modules.get("course_lib.timing")
    return None if timing is None else getattr(timing, name, None)


def is_course_data(obj: Any) -> bool:
    """Whether ``obj`` is one of course_lib's objects that travel as data (callable or not)."""
    return type(obj) in (_course_class("Stopwatch"), _course_class("Comparison"))


def _read_comparison(value: Any, buffers: list) -> Any:
    from course_lib import timing

    fields = _decode(value, buffers)
    names = {f.name for f in dataclasses.fields(timing.Comparison)}
    if not isinstance(fields, dict) or set(fields) != names:
        raise NotData("malformed data")
    for name in ("ratios", "baseline_times", "candidate_times"):
        fields[name] = tuple(float(x) for x in fields[name])
    return timing.Comparison(**fields)


def _encode_stopwatch(obj: Any, buffers: list[bytes]) -> Any:
    # course_lib's own record of timed stages (week 1 returns one): its figures only.
    if obj._running is not None:
        raise NotData("a Stopwatch with a stage still running is not plain data")
    return {"stopwatch": [[[str(k), float(v)] for k, v in obj._seconds.items()],
                          [[str(k), float(v)] for k, v in obj._cpu_seconds.items()]]}


def _read_stopwatch(value: Any, buffers: list) -> Any:
    from course_lib import timing

    seconds, cpu = value
    sw = timing.Stopwatch()
    sw._seconds = {str(k): float(v) for k, v in seconds}
    sw._cpu_seconds = {str(k): float(v) for k, v in cpu}
    return sw


def _encode_numpy(obj: Any, buffers: list[bytes]) -> Any:
    import numpy as np

    if type(obj) is np.ndarray:
        return {"ndarray": _array(obj, buffers)}
    if isinstance(obj, np.generic) and type(obj).__module__ == "numpy" and not isinstance(obj, np.object_):
        return {"npscalar": _array(np.asarray(obj), buffers)}
    if type(obj) is np.random.Generator and type(obj.bit_generator).__name__ in _BIT_GENERATORS:
        # A random generator is its state: the bit generator's name and numbers.
        return {"generator": _encode(obj.bit_generator.state, buffers)}
    raise NotData(f"a {type(obj).__name__} is not plain data")


def _array(a: Any, buffers: list[bytes]) -> dict:
    import numpy as np

    if a.dtype.hasobject:
        if a.dtype != np.dtype(object):
            raise NotData("a structured array with Python objects in it is not plain data")
        return {"shape": list(a.shape), "items": _items(a.ravel(order="C").tolist() if a.ndim == 0
                                                         else list(a.ravel(order="C")), buffers)}
    dtype = a.dtype.descr if a.dtype.fields is not None else a.dtype.str
    # The array's own bytes, seen as a flat run of uint8 (no copy when it is contiguous):
    # a memoryview of the array itself would refuse dtypes such as datetime64.
    raw = memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    return {"dtype": dtype, "shape": list(a.shape), "buf": _buffer(raw, buffers)}


def _encode_pandas(obj: Any, buffers: list[bytes]) -> Any:
    import pandas as pd

    kind = type(obj)
    if obj is pd.NaT:
        return {"NaT": None}
    if obj is pd.NA:
        return {"NA": None}
    if kind is pd.Timestamp:
        return {"timestamp": [int(obj.asm8.view("i8")), obj.unit, _zone(obj.tz)]}
    if kind is pd.Timedelta:
        return {"pdtimedelta": [int(obj.asm8.view("i8")), obj.unit]}
    if kind is pd.Series:
        return {"series": [_values(obj.array, buffers), _encode(obj.index, buffers), _encode(obj.name, buffers)]}
    if kind is pd.DataFrame:
        columns = [_values(obj.iloc[:, i].array, buffers) for i in range(obj.shape[1])]
        return {"frame": [columns, _encode(obj.index, buffers), _encode(obj.columns, buffers)]}
    if kind is pd.RangeIndex:
        return {"range": [obj.start, obj.stop, obj.step, _encode(obj.name, buffers)]}
    if kind is pd.MultiIndex:
        return {"multi": [[_encode(level, buffers) for level in obj.levels],
                          [_array(codes, buffers) for codes in obj.codes], _items(obj.names, buffers)]}
    if kind in (pd.Index, pd.DatetimeIndex, pd.TimedeltaIndex, pd.CategoricalIndex):
        return {"index": [_values(obj.array, buffers), _encode(obj.name, buffers)]}
    if kind is pd.Categorical:
        return {"values": _values(obj, buffers)}
    raise NotData(f"a {kind.__name__} is not plain data")


def _values(array: Any, buffers: list[bytes]) -> dict:
    """A Series' or Index's values: a NumPy array, a categorical, or an extension array."""
    import numpy as np
    import pandas as pd

    dtype = array.dtype
    if isinstance(dtype, np.dtype) or type(array) is pd.arrays.NumpyExtensionArray:  # not its subclasses
        return {"numpy": _array(np.asarray(array), buffers)}
    if isinstance(dtype, pd.CategoricalDtype):
        return {"categorical": [_array(np.asarray(array.codes), buffers), _encode(dtype.categories, buffers),
                                bool(dtype.ordered)]}
    return {"extension": [str(dtype), _items(list(array), buffers)]}


# --- reading -------------------------------------------------------------------------------

def _decode(node: Any, buffers: list) -> Any:
    if node is None or type(node) in (bool, int, float, str):
        return node
    if type(node) is not dict or len(node) != 1:
        raise NotData("malformed data")
    ((kind, value),) = node.items()
    reader = _READERS.get(kind)
    if reader is None:
        raise NotData(f"unknown kind {kind!r}")
    return reader(value, buffers)


def _list(value: Any, buffers: list) -> list:
    if type(value) is not list:
        raise NotData("malformed data")
    return [_decode(v, buffers) for v in value]


def _pairs(value: Any, buffers: list) -> list[tuple[Any, Any]]:
    if type(value) is not list or any(type(p) is not list or len(p) != 2 for p in value):
        raise NotData("malformed data")
    return [(_decode(k, buffers), _decode(v, buffers)) for k, v in value]


def _tz(node: Any) -> Any:
    if node is None:
        return None
    if "zone" in node:
        import zoneinfo

        return zoneinfo.ZoneInfo(str(node["zone"]))
    days, seconds, micro = (int(x) for x in node["offset"])
    return _dt.timezone(_dt.timedelta(days=days, seconds=seconds, microseconds=micro))


def _read_array(value: dict, buffers: list) -> Any:
    import numpy as np

    shape = _shape(value)
    count = math.prod(shape)
    if "items" in value:
        # Counted before the array is made: its size is declared, its items must be here.
        if type(value["items"]) is not list or len(value["items"]) != count:
            given = len(value["items"]) if type(value["items"]) is list else 0
            raise NotData(f"an array declares {count:,} items but {given:,} came with it")
        _charge(8 * count, "an array of objects")
        items = _list(value["items"], buffers)
        out = np.empty(shape, dtype=object)
        flat = out.reshape(-1)
        for i, item in enumerate(items):
            flat[i] = item
        return out
    spec = value["dtype"]
    dtype = np.dtype([tuple(f) for f in spec] if isinstance(spec, list) else str(spec))
    if dtype.hasobject:
        raise NotData("an array of raw bytes cannot hold Python objects")
    raw = buffers[int(value["buf"])]
    if len(raw) != count * dtype.itemsize:
        raise NotData("an array's bytes do not match its shape")
    _charge(len(raw), "an array")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _read_values(node: Any, buffers: list) -> Any:
    import numpy as np
    import pandas as pd
    from pandas.api.types import pandas_dtype

    ((kind, value),) = node.items()
    if kind == "numpy":
        return _read_array(value, buffers)
    if kind == "categorical":
        codes, categories, ordered = value
        return pd.Categorical.from_codes(_read_array(codes, buffers).astype(np.int64, copy=False),
                                         dtype=pd.CategoricalDtype(_decode(categories, buffers), bool(ordered)))
    if kind == "extension":
        dtype = pandas_dtype(str(value[0]))
        if isinstance(dtype, np.dtype):
            raise NotData("malformed data")
        return pd.array(_list(value[1], buffers), dtype=dtype)
    raise NotData(f"unknown kind of values {kind!r}")


def _read_series(value: list, buffers: list) -> Any:
    import pandas as pd

    values, index, name = value
    return _series(_read_values(values, buffers), _decode(index, buffers), _decode(name, buffers))


def _series(values: Any, index: Any, name: Any = None) -> Any:
    import pandas as pd

    # The dtype given, or pandas 3 would read an object array of text as its str dtype.
    return pd.Series(values, index=index, name=name, dtype=values.dtype, copy=False)


def _read_frame(value: list, buffers: list) -> Any:
    import pandas as pd

    columns, index, names = value
    index, names = _decode(index, buffers), _decode(names, buffers)
    data = {i: _series(_read_values(c, buffers), index) for i, c in enumerate(columns)}
    frame = pd.DataFrame(data, index=index)
    if frame.shape[1] != len(names):
        raise NotData("a table's columns do not match their names")
    frame.columns = names
    return frame


def _read_index(value: list, buffers: list) -> Any:
    import pandas as pd

    values, name = value
    values = _read_values(values, buffers)
    return pd.Index(values, name=_decode(name, buffers), dtype=values.dtype, copy=False)


def _read_range(value: list, buffers: list) -> Any:
    import pandas as pd

    start, stop, step, name = value
    span = range(int(start), int(stop), int(step))
    _charge(8 * len(span), "a range index")  # lazy here, but 8 bytes a row wherever it is used
    return pd.RangeIndex(span.start, span.stop, span.step, name=_decode(name, buffers))


def _read_multi(value: list, buffers: list) -> Any:
    import pandas as pd

    levels, codes, names = value
    return pd.MultiIndex(levels=[_decode(level, buffers) for level in levels],
                         codes=[_read_array(c, buffers) for c in codes], names=_list(names, buffers))


def _read_timestamp(value: list, buffers: list) -> Any:
    import numpy as np
    import pandas as pd

    ticks, unit, zone = value
    stamp = pd.Timestamp(np.datetime64(int(ticks), str(unit)))
    tz = _tz(zone)
    return stamp if tz is None else stamp.tz_localize("UTC").tz_convert(tz)


_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def _read_generator(value: Any, buffers: list) -> Any:
    import numpy as np

    state = _decode(value, buffers)
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in _BIT_GENERATORS:
        raise NotData(f"unknown bit generator {name!r}")
    bits = getattr(np.random, name)()
    bits.state = state
    return np.random.Generator(bits)


def _read_pd_timedelta(value: list, buffers: list) -> Any:
    import numpy as np
    import pandas as pd

    ticks, unit = value
    return pd.Timedelta(np.timedelta64(int(ticks), str(unit)))


def _read_numpy_scalar(value: dict, buffers: list) -> Any:
    array = _read_array(value, buffers)
    if array.shape != ():
        raise NotData("malformed data")
    return array[()]


def _read_pandas_constant(name: str) -> Any:
    import pandas as pd

    return getattr(pd, name)


def _read_deque(value: list, buffers: list) -> collections.deque:
    items, maxlen = value
    return collections.deque(_list(items, buffers), None if maxlen is None else int(maxlen))


def _read_clock(cls: type) -> Any:
    def read(value: list, buffers: list) -> Any:
        text, zone, fold = value
        return cls.fromisoformat(str(text)).replace(tzinfo=_tz(zone), fold=int(fold))
    return read


_READERS: dict[str, Any] = {
    "int": lambda v, b: int(str(v)),
    "float": lambda v, b: float(str(v)),
    "complex": lambda v, b: complex(float(str(v[0])), float(str(v[1]))),
    "bytes": lambda v, b: bytes(b[int(v)]),
    "bytearray": lambda v, b: bytearray(b[int(v)]),
    "list": _list,
    "tuple": lambda v, b: tuple(_list(v, b)),
    "set": lambda v, b: set(_list(v, b)),
    "frozenset": lambda v, b: frozenset(_list(v, b)),
    "dict": lambda v, b: dict(_pairs(v, b)),
    "odict": lambda v, b: collections.OrderedDict(_pairs(v, b)),
    "counter": lambda v, b: collections.Counter(dict(_pairs(v, b))),
    "deque": _read_deque,
    "date": lambda v, b: _dt.date.fromisoformat(str(v)),
    "time": _read_clock(_dt.time),
    "datetime": _read_clock(_dt.datetime),
    "timedelta": lambda v, b: _dt.timedelta(days=int(v[0]), seconds=int(v[1]), microseconds=int(v[2])),
    "decimal": lambda v, b: decimal.Decimal(str(v)),
    "fraction": lambda v, b: fractions.Fraction(int(str(v[0])), int(str(v[1]))),
    "ndarray": _read_array,
    "npscalar": _read_numpy_scalar,
    "NaT": lambda v, b: _read_pandas_constant("NaT"),
    "NA": lambda v, b: _read_pandas_constant("NA"),
    "timestamp": _read_timestamp,
    "pdtimedelta": _read_pd_timedelta,
    "series": _read_series,
    "frame": _read_frame,
    "range": _read_range,
    "multi": _read_multi,
    "index": _read_index,
    "values": lambda v, b: _read_values(v, b),
    "stopwatch": _read_stopwatch,
    "comparison": _read_comparison,
    "generator": _read_generator,
}
