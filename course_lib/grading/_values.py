"""Value comparison: :func:`assert_same`, and the rules by which every check compares a result with the reference.

Types are checked exactly (``type(x) is float``) through a table keyed by the type's id,
so a student's subclass, or an object with its own ``__eq__``, is reported instead of being
asked whether it is equal. Values are compared with NumPy ufuncs on plain ndarrays, and
pandas objects are read through the accessors their classes had: both are captured here
when :mod:`course_lib.grading` is imported, before student code runs, so a later
``numpy.allclose = ...`` or ``pd.Series.to_numpy = ...`` in the notebook changes nothing.
:func:`_signature` (a result's kind, and dtype) is what the timed calls check on every call.
"""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import math
import reprlib
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from course_lib.grading._checks import _check_number
from course_lib.grading._errors import GradingError

# The public name, then what the package's other modules and the verifier use from here.
__all__ = [
    "assert_same", "_describe_signature", "_EXACT", "_problem", "_same_values", "_signature", "_Tolerance",
    "_tolerance",
]


# Values are compared with ufuncs on plain ndarrays: a ufunc object cannot be
# patched, and on exact ndarray operands no __array_ufunc__ override can intercept it.
_asarray = np.asarray
_equal = np.equal
_isnan = np.isnan
_absolute = np.absolute
_subtract = np.subtract
_multiply = np.multiply
_add = np.add
_less_equal = np.less_equal
_logical_and = np.logical_and
_logical_or = np.logical_or
_logical_not = np.logical_not
_flatnonzero = np.flatnonzero
_unravel_index = np.unravel_index
_errstate = np.errstate
_float64 = np.float64


def _accessor(cls: type, name: str) -> Callable[[Any], Any]:
    # The attribute as the class defined it at import; a later ``pd.Series.to_numpy =``
    # in the notebook does not change what we read.
    attr = inspect.getattr_static(cls, name)
    get = attr.__get__
    return lambda obj: get(obj, cls)


_INDEX_CLASSES = (
    pd.Index, pd.RangeIndex, pd.MultiIndex, pd.DatetimeIndex, pd.TimedeltaIndex,
    pd.PeriodIndex, pd.CategoricalIndex, pd.IntervalIndex,
)
_GET = {}
for _cls, _names in [
    (pd.Series, ("index", "name", "dtype", "to_numpy", "shape")),
    (pd.DataFrame, ("index", "columns", "shape", "iloc")),
    *[(c, ("names", "dtype", "to_numpy", "shape")) for c in _INDEX_CLASSES],
]:
    for _name in _names:
        _GET[(id(_cls), _name)] = _accessor(_cls, _name)
del _cls, _names, _name


def _get(obj: Any, name: str) -> Any:
    return _GET[(id(type(obj)), name)](obj)


def _build_kinds() -> dict[int, tuple[str, type]]:
    kinds: dict[type, str] = {
        type(None): "none", bool: "bool", int: "int", float: "float", complex: "complex",
        str: "str", bytes: "bytes", tuple: "tuple", list: "list", dict: "dict",
        set: "set", frozenset: "frozenset", np.ndarray: "ndarray",
        pd.Series: "series", pd.DataFrame: "frame", pd.Timestamp: "timestamp",
        pd.Timedelta: "timedelta", type(pd.NaT): "nat", type(pd.NA): "na",
        datetime.datetime: "datetime", datetime.date: "date", datetime.timedelta: "pytimedelta",
    }
    kinds.update({cls: "index" for cls in _INDEX_CLASSES})
    for t in set(np.sctypeDict.values()):
        # timedelta64 first: NumPy makes it a subclass of signedinteger, and compared as an
        # int its unit would be lost (90 seconds against 1 minute raised a TypeError).
        for base, kind in [
            (np.timedelta64, "timedelta64"), (np.datetime64, "datetime64"),
            (np.bool_, "bool"), (np.integer, "int"), (np.floating, "float"),
            (np.complexfloating, "complex"), (np.str_, "str"), (np.bytes_, "bytes"),
        ]:
            if issubclass(t, base):
                kinds[t] = kind
                break
    # Keyed by id(type): a dict lookup keyed by the type itself would call the
    # metaclass __eq__ of a student's class, which could claim to equal ``float``.
    return {id(t): (kind, t) for t, kind in kinds.items()}


_KINDS = _build_kinds()
_NAMES = {
    "none": "None", "ndarray": "numpy.ndarray", "series": "pandas.Series",
    "frame": "pandas.DataFrame", "index": "pandas.Index", "timestamp": "pandas.Timestamp",
    "timedelta": "pandas.Timedelta", "nat": "pandas.NaT", "na": "pandas.NA",
    "datetime": "datetime.datetime", "date": "datetime.date",
    "pytimedelta": "datetime.timedelta", "datetime64": "numpy.datetime64",
    "timedelta64": "numpy.timedelta64",
}
_NUMBERS = frozenset({"bool", "int", "float", "complex"})
_HASHABLE = frozenset(
    {"none", "bool", "int", "float", "complex", "str", "bytes", "timestamp", "timedelta",
     "nat", "datetime", "date", "pytimedelta", "datetime64", "timedelta64"}
)

_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6


@dataclasses.dataclass(frozen=True)
class _Tolerance:
    rtol: float
    atol: float
    check_dtype: bool


_EXACT = _Tolerance(0.0, 0.0, True)


def assert_same(
    actual: Any,
    expected: Any,
    rtol: float = 1e-9,
    atol: float = 0.0,
    *,
    check_dtype: bool = True,
) -> None:
    """Check that ``actual`` equals the reference ``expected``, or say what differs.

    Both sides must be plain values: ``None``, ``bool``, ``int``, ``float``,
    ``complex``, ``str``, ``bytes``, NumPy scalars, ``numpy.ndarray``,
    ``pandas.Series`` / ``DataFrame`` / ``Index``, pandas and ``datetime``
    timestamps, and ``tuple`` / ``list`` / ``dict`` / ``set`` of those, recursively.
    Types are checked exactly (``type(x) is float``), so a subclass or an object with
    its own ``__eq__`` fails with "expected a float, got MyFloat" instead of being
    asked whether it is equal; its methods are never called.

    Checked in order: type, length / shape, dtype, index and columns (labels, names,
    dtype), then values. Floating-point values match when
    ``|actual - expected| <= atol + rtol * |expected|``; NaN matches NaN in the same
    position; integers, booleans, strings and timestamps must be equal exactly.
    Python and NumPy scalars of the same kind are interchangeable (``3.0`` and
    ``np.float64(3.0)``).

    Parameters
    ----------
    actual : object
        The submission's result.
    expected : object
        The reference result (from the instructor's solution).
    rtol, atol : float
        Relative and absolute tolerance for floating-point values.
    check_dtype : bool, default True
        Require equal dtypes (``int64`` vs ``float64`` is a difference). With
        ``False`` numbers are compared by value across integer, float and bool dtypes.

    Raises
    ------
    GradingError
        When the values differ: the message names the place (``result[2]['total']``,
        a row label and column), what differs (type, shape, dtype, labels) and, for
        values, how many differ and the first one with both values.
    TypeError
        When ``expected`` is not a plain value (a grading configuration error).

    Examples
    --------
    >>> import pandas as pd
    >>> assert_same(0.1 + 0.2, 0.3)
    >>> assert_same({"a": [1, 2]}, {"a": [1, 3]})
    Traceback (most recent call last):
        ...
    course_lib.grading.GradingError: Your result differs from the reference: result['a'][1]: got 2, expected 3
    >>> assert_same(pd.Series([1.0, 2.0], index=["x", "y"]), pd.Series([1.0, 2.5], index=["x", "y"]))
    Traceback (most recent call last):
        ...
    course_lib.grading.GradingError: Your result differs from the reference: result: 1 of 2 values differ; first at position 1 (index label 'y'): got 2.0, expected 2.5 (difference 0.5, allowed 2.5e-09)
    """
    tol = _tolerance(rtol, atol, check_dtype)
    problem = _problem(actual, expected, tol)
    if problem is not None:
        raise GradingError(f"Your result differs from the reference: {problem}")


def _kind(x: Any) -> str | None:
    entry = _KINDS.get(id(type(x)))
    if entry is None or entry[1] is not type(x):
        return None
    return entry[0]


def _problem(actual: Any, expected: Any, tol: _Tolerance, path: str = "result") -> str | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _difference(actual, expected, path, tol)


def _difference(a: Any, e: Any, path: str, tol: _Tolerance) -> str | None:
    ke = _kind(e)
    if ke is None:
        raise TypeError(
            f"assert_same compares plain Python, NumPy and pandas values; the reference "
            f"value at {path} is a {_type_name(e)}. Convert the reference to one of those."
        )
    ka = _kind(a)
    if ka is None:
        return f"{path}: expected {_described(ke)}, got {_type_name(a)}{_subclass_hint(a)}"
    if ka != ke:
        if not tol.check_dtype and ka in _NUMBERS and ke in _NUMBERS:
            return _number_difference(a, e, path, tol)
        shown = f" {_show(a)}" if ka in _HASHABLE and ka not in ("none", "na", "nat") else ""
        return f"{path}: expected {_described(ke)}, got {_described(ka)}{shown}"
    return _COMPARERS[ke](a, e, path, tol)


def _equal_scalars(a: Any, e: Any, path: str, tol: _Tolerance) -> str | None:
    # Both are exact built-in (or pandas/datetime) scalar types here, so == is theirs.
    try:
        same = bool(a == e)
    except TypeError:  # e.g. tz-aware against naive timestamps
        same = False
    return None if same else f"{path}: got {_show(a)}, expected {_show(e)}"


def _always_equal(a: Any, e: Any, path: str, tol: _Tolerance) -> str | None:
    return None  # None, pandas.NA and pandas.NaT: same kind means same value


def _number_difference(a: Any, e: Any, path: str, tol: _Tolerance) -> str | None:
    pa, pe = _plain_scalar(a), _plain_scalar(e)
    if type(pa) is not float and type(pa) is not complex and type(pe) is not float and type(pe) is not complex:
        return None if int(pa) == int(pe) else f"{path}: got {pa!r}, expected {pe!r}"
    return _values_difference(_asarray(pa), _asarray(pe), path, tol, _array_position)


def _text_difference(a: Any, e: Any, path: str, tol: _Tolerance) -> str | None:
    a, e = (str(a), str(e)) if _kind(e) == "str" else (bytes(a), bytes(e))
    if a == e:
        return None
    where = next((i for i, (x, y) in enumerate(zip(a, e)) if x != y), min(len(a), len(e)))
    detail = f" (first difference at character {where})" if len(e) > 20 or len(a) > 20 else ""
    return f"{path}: got {_show(a)}, expected {_show(e)}{detail}"


def _numpy_time_difference(a: Any, e: Any, path: str, tol: _Tolerance) -> str | None:
    # Units first: compared across units, 23:59 in minutes would pass as that day in days.
    if a.dtype != e.dtype:
        return f"{path}: expected a {e.dtype} value, got a {a.dtype} one ({_show(a)} against {_show(e)})"
    return _values_difference(_asarray(a), _asarray(e), path, tol, _array_position)


def _sequence_difference(a: Any, e: Any, path: str, tol: _Tolerance) -> str | None:
    if len(a) != len(e):
        return f"{path}: length differs: got {len(a)}, expected {len(e)}"
    arrays = _homogeneous_arrays(a, e)
    if arrays is not None:
        return _values_difference(arrays[0], arrays[1], path, tol, _array_position)
    for i, (x, y) in enumerate(zip(a, e)):
        problem = _difference(x, y, f"{path}[{i}]", tol)
        if problem is not None:
            return problem
    return None


def _homogeneous_arrays(a: list | tuple, e: list | tuple) -> tuple[np.ndarray, np.ndarray] | None:
    # Long lists of plain numbers are compared as arrays: the same answer, far faster.
    if len(e) < 8:
        return None
    t = type(e[0])
    if not (t is float or t is int or t is bool):
        return None
    for x, y in zip(a, e):
        if type(x) is not t or type(y) is not t:
            return None
    dtype = _float64 if t is float else (np.int64 if t is int else np.bool_)
    try:
        return _asarray(a, dtype=dtype), _asarray(e, dtype=dtype)
    except OverflowError:  # ints beyond 64 bits: compare one by one
        return None


def _dict_difference(a: dict, e: dict, path: str, tol: _Tolerance) -> str | None:
    for key in a:
        if not _is_plain_key(key):
            return f"{path}: a key of your dict is {_type_name(key)}, not a plain value"
    # Keys are matched with their types: True, 1 and 1.0 are one key to a dict, not to us.
    mine, theirs = {_typed_key(k): k for k in a}, {_typed_key(k): k for k in e}
    missing = [k for t, k in theirs.items() if t not in mine]
    extra = [k for t, k in mine.items() if t not in theirs]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing keys {_show(missing)}")
        if extra:
            parts.append(f"unexpected keys {_show(extra)}")
        return f"{path}: {'; '.join(parts)}"
    for typed, key in theirs.items():
        problem = _difference(a[mine[typed]], e[key], f"{path}[{key!r}]", tol)
        if problem is not None:
            return problem
    return None


def _set_difference(a: set | frozenset, e: set | frozenset, path: str, tol: _Tolerance) -> str | None:
    for item in a:
        if not _is_plain_key(item):
            return f"{path}: an element of your set is {_type_name(item)}, not a plain value"
    mine, theirs = {_typed_key(k): k for k in a}, {_typed_key(k): k for k in e}
    missing = {k for t, k in theirs.items() if t not in mine}
    extra = {k for t, k in mine.items() if t not in theirs}
    if not missing and not extra:
        return None
    parts = []
    if missing:
        parts.append(f"{len(missing)} missing, e.g. {_show(sorted(missing, key=repr)[:3])}")
    if extra:
        parts.append(f"{len(extra)} unexpected, e.g. {_show(sorted(extra, key=repr)[:3])}")
    return f"{path}: sets differ: {'; '.join(parts)}"


def _typed_key(key: Any) -> Any:
    """A key that equals another only when their types match too (``True``, ``1``, ``1.0`` differ)."""
    kind = _kind(key)
    if kind == "tuple":
        return kind, tuple(_typed_key(k) for k in key)
    if kind == "frozenset":
        return kind, frozenset(_typed_key(k) for k in key)
    return kind, key


def _is_plain_key(key: Any) -> bool:
    kind = _kind(key)
    if kind in _HASHABLE:
        return True
    if kind == "tuple" or kind == "frozenset":
        return all(_is_plain_key(k) for k in key)
    return False


def _ndarray_difference(a: np.ndarray, e: np.ndarray, path: str, tol: _Tolerance) -> str | None:
    if a.shape != e.shape:
        return f"{path}: shape differs: got {a.shape}, expected {e.shape}"
    if tol.check_dtype and a.dtype != e.dtype:
        return f"{path}: dtype differs: got {a.dtype}, expected {e.dtype}"
    return _values_difference(a, e, path, tol, _array_position)


def _series_difference(a: pd.Series, e: pd.Series, path: str, tol: _Tolerance) -> str | None:
    problem = _index_difference(_get(a, "index"), _get(e, "index"), f"{path}.index", tol)
    if problem is None:
        problem = _difference(_get(a, "name"), _get(e, "name"), f"{path}.name", _EXACT)
    if problem is None and tol.check_dtype and _get(a, "dtype") != _get(e, "dtype"):
        problem = f"{path}: dtype differs: got {_get(a, 'dtype')}, expected {_get(e, 'dtype')}"
    if problem is None:
        labels = _labels(_get(e, "index"))
        problem = _values_difference(
            _pandas_values(a), _pandas_values(e), path, tol,
            lambda i: f"position {i} (index label {labels(i)})",
        )
    return problem


def _frame_difference(a: pd.DataFrame, e: pd.DataFrame, path: str, tol: _Tolerance) -> str | None:
    if _get(a, "shape") != _get(e, "shape"):
        return f"{path}: shape differs: got {_get(a, 'shape')} (rows, columns), expected {_get(e, 'shape')}"
    problem = _index_difference(_get(a, "columns"), _get(e, "columns"), f"{path}.columns", _EXACT)
    if problem is None:
        problem = _index_difference(_get(a, "index"), _get(e, "index"), f"{path}.index", tol)
    if problem is not None:
        return problem
    labels = _labels(_get(e, "index"))
    column_labels = _labels(_get(e, "columns"))
    a_iloc, e_iloc = _get(a, "iloc"), _get(e, "iloc")
    for j in range(_get(e, "shape")[1]):
        sa, se = a_iloc[:, j], e_iloc[:, j]
        column = column_labels(j)
        if tol.check_dtype and _get(sa, "dtype") != _get(se, "dtype"):
            return f"{path}: dtype of column {column} differs: got {_get(sa, 'dtype')}, expected {_get(se, 'dtype')}"
        problem = _values_difference(
            _pandas_values(sa), _pandas_values(se), f"{path}[{column}]", tol,
            lambda i: f"row {i} (index label {labels(i)})",
        )
        if problem is not None:
            return problem
    return None


def _index_difference(a: pd.Index, e: pd.Index, path: str, tol: _Tolerance) -> str | None:
    if _kind(a) != "index" or _kind(e) != "index":
        return f"{path}: expected a pandas.Index, got {_type_name(a)}"
    if _get(a, "shape") != _get(e, "shape"):
        return f"{path}: length differs: got {_get(a, 'shape')[0]}, expected {_get(e, 'shape')[0]}"
    problem = _difference(list(_get(a, "names")), list(_get(e, "names")), f"{path}.names", _EXACT)
    if problem is None and tol.check_dtype and _label_dtypes_differ(_get(a, "dtype"), _get(e, "dtype")):
        problem = f"{path}: dtype differs: got {_get(a, 'dtype')}, expected {_get(e, 'dtype')}"
    if problem is None:
        problem = _values_difference(
            _pandas_values(a), _pandas_values(e), path, tol, lambda i: f"position {i}"
        )
    return problem


def _label_dtypes_differ(a: Any, e: Any) -> bool:
    # Text labels are text whether pandas stores them as object or as its str dtype
    # (pandas 3 picks str, older code and some operations give object); the labels
    # themselves are still compared one by one.
    text = (isinstance(a, pd.StringDtype) or a == object) and (isinstance(e, pd.StringDtype) or e == object)
    return not text and a != e


def _pandas_values(obj: Any) -> np.ndarray:
    to_numpy = _get(obj, "to_numpy")
    values = to_numpy() if isinstance(_get(obj, "dtype"), np.dtype) else to_numpy(dtype=object)
    if type(values) is not np.ndarray:  # pragma: no cover - pandas always gives ndarrays
        raise TypeError(f"pandas returned {type(values).__name__} instead of numpy.ndarray")
    return values


def _labels(index: pd.Index) -> Callable[[int], str]:
    values: list[np.ndarray] = []

    def label(i: int) -> str:
        if not values:
            values.append(_pandas_values(index))
        item = values[0][i]
        return _show(item.item() if isinstance(item, np.generic) else item)

    return label


def _values_difference(
    a: np.ndarray, e: np.ndarray, path: str, tol: _Tolerance, where: Callable[[int], str]
) -> str | None:
    """Compare two plain ndarrays of one shape element by element."""
    if a.shape != e.shape:
        return f"{path}: shape differs: got {a.shape}, expected {e.shape}"
    if e.size == 0:
        return None
    ak, ek = a.dtype.kind, e.dtype.kind
    numeric = "biufc"
    if ak == "O" or ek == "O":
        return _object_values_difference(a, e, path, tol, where)
    if ak == "V" or ek == "V":
        return _structured_difference(a, e, path, tol, where)
    tolerance = False
    if ak in numeric and ek in numeric:
        if ak in "fc" or ek in "fc":
            ok, tolerance = _close(a, e, tol), True
        else:
            ok = _equal(a, e)
    elif ak == ek and ek in "mM":
        if a.dtype != e.dtype:
            a = a.astype(e.dtype)  # another unit; allowed only without check_dtype
        ok = _equal(a.view(np.int64), e.view(np.int64))  # NaT equals NaT, in place
    elif ak == ek and ek in "US":
        ok = _equal(a, e)
    else:
        return f"{path}: dtype differs: got {a.dtype}, expected {e.dtype}"
    bad = _flatnonzero(_logical_not(_asarray(ok)))
    if bad.size == 0:
        return None
    i = int(bad[0])
    got, exp = a.reshape(-1)[i], e.reshape(-1)[i]
    detail = ""
    if tolerance:
        with _errstate(all="ignore"):
            diff = float(_absolute(_subtract(_as_float(got), _as_float(exp))))
            allowed = tol.atol + tol.rtol * float(_absolute(_as_float(exp)))
        if math.isfinite(diff):
            detail = f" (difference {diff:.3g}, allowed {allowed:.3g})"
    values = f"got {_show_element(got)}, expected {_show_element(exp)}{detail}"
    if e.ndim == 0:
        return f"{path}: {values}"
    return f"{path}: {bad.size:,} of {e.size:,} values differ; first at {where(i) if e.ndim == 1 else _nd_position(i, e.shape)}: {values}"


def _close(a: np.ndarray, e: np.ndarray, tol: _Tolerance) -> np.ndarray:
    if a.dtype.kind == "b":
        a = a.astype(_float64)
    if e.dtype.kind == "b":
        e = e.astype(_float64)
    with _errstate(all="ignore"):
        same = _equal(a, e)  # covers inf == inf
        both_nan = _logical_and(_isnan(a), _isnan(e))
        near = _less_equal(_absolute(_subtract(a, e)), _add(tol.atol, _multiply(tol.rtol, _absolute(e))))
        return _logical_or(_logical_or(same, both_nan), near)


def _object_values_difference(
    a: np.ndarray, e: np.ndarray, path: str, tol: _Tolerance, where: Callable[[int], str]
) -> str | None:
    if a.dtype.kind != "O" or e.dtype.kind != "O":
        if tol.check_dtype:
            return f"{path}: dtype differs: got {a.dtype}, expected {e.dtype}"
    flat_a, flat_e = a.reshape(-1), e.reshape(-1)
    for i in range(flat_e.size):
        x, y = flat_a[i], flat_e[i]
        if type(x) is str and type(y) is str:  # the common case (pandas text), kept fast
            if x == y:
                continue
        if isinstance(x, np.generic) and _kind(x) is not None:
            x = x.item()
        if isinstance(y, np.generic) and _kind(y) is not None:
            y = y.item()
        position = where(i) if e.ndim == 1 else _nd_position(i, e.shape)
        problem = _difference(x, y, f"{path} at {position}", tol)
        if problem is not None:
            return problem
    return None


def _structured_difference(
    a: np.ndarray, e: np.ndarray, path: str, tol: _Tolerance, where: Callable[[int], str]
) -> str | None:
    if a.dtype.names != e.dtype.names or a.dtype.names is None:
        return f"{path}: dtype differs: got {a.dtype}, expected {e.dtype}"
    for name in e.dtype.names:
        problem = _values_difference(a[name], e[name], f"{path}[{name!r}]", tol, where)
        if problem is not None:
            return problem
    return None


def _array_position(i: int) -> str:
    return f"[{i}]"


def _nd_position(i: int, shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(k)) for k in _unravel_index(i, shape)) + "]"


def _as_float(x: Any) -> Any:
    return x.astype(_float64) if x.dtype.kind in "biu" else x


def _plain_scalar(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def _show_element(x: Any) -> str:
    if x.dtype.kind in "mM":
        return str(x)
    return _show(x.item())


def _show(x: Any) -> str:
    return _REPR.repr(x)


def _described(kind: str) -> str:
    name = _NAMES.get(kind, kind)
    if kind == "none":
        return "None"
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _type_name(x: Any) -> str:
    # Read through type's own descriptor: a metaclass cannot fake the name here.
    return str(type.__dict__["__name__"].__get__(type(x)))


def _subclass_hint(x: Any) -> str:
    for base in type.__dict__["__mro__"].__get__(type(x))[1:]:
        entry = _KINDS.get(id(base))
        if entry is not None and entry[1] is base:
            name = _NAMES.get(entry[0], entry[0])
            return f" (a subclass of {name}; return a plain {name})"
    return ""


_COMPARERS: dict[str, Callable[[Any, Any, str, _Tolerance], str | None]] = {
    "none": _always_equal, "na": _always_equal, "nat": _always_equal,
    "bool": _number_difference, "int": _number_difference, "float": _number_difference,
    "complex": _number_difference, "str": _text_difference, "bytes": _text_difference,
    "datetime64": _numpy_time_difference, "timedelta64": _numpy_time_difference,
    "timestamp": _equal_scalars, "timedelta": _equal_scalars, "datetime": _equal_scalars,
    "date": _equal_scalars, "pytimedelta": _equal_scalars,
    "tuple": _sequence_difference, "list": _sequence_difference, "dict": _dict_difference,
    "set": _set_difference, "frozenset": _set_difference, "ndarray": _ndarray_difference,
    "series": _series_difference, "frame": _frame_difference, "index": _index_difference,
}


def _same_values(first: Any, second: Any) -> bool:
    """True when two inputs are identical or equal (unknown types count as different)."""
    if first is second:
        return True
    try:
        return _problem(first, second, _EXACT) is None
    except TypeError:
        return False


def _signature(x: Any) -> tuple[Any, ...]:
    kind = _kind(x)
    if kind == "ndarray":
        return (kind, str(x.dtype), x.ndim)
    if kind == "series":
        return (kind, str(_get(x, "dtype")))
    return (kind,)


def _describe_signature(signature: tuple[Any, ...]) -> str:
    kind = signature[0]
    text = _described(kind) if kind is not None else "an object of another type"
    if len(signature) > 1:
        text += f" of dtype {signature[1]}"
    return text


def _tolerance(rtol: float, atol: float, check_dtype: bool) -> _Tolerance:
    _check_number(rtol, "rtol")
    _check_number(atol, "atol")
    if rtol < 0 or atol < 0:
        raise ValueError(f"tolerances must be >= 0, got rtol={rtol!r}, atol={atol!r}")
    if not isinstance(check_dtype, bool):
        raise TypeError(f"check_dtype must be True or False, got {check_dtype!r}")
    return _Tolerance(float(rtol), float(atol), check_dtype)

