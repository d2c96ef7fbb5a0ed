"""Unpickling what a student's process sends back, without running the student's code.

A pickle can name any importable function and have the unpickler call it
(``os.system`` is the classic example), so results coming back from a process that ran
student code are read with :func:`loads`, which only resolves the names that plain data
needs: builtin containers and numbers, and the classes and reconstruction functions of
NumPy and pandas data structures. Anything else (a class the student defined, a function
from ``os``, ``numpy.load``, pandas' readers) is refused with :class:`UnsafePickle`.

Examples
--------
>>> import pickle
>>> import numpy as np
>>> loads(pickle.dumps({"total": np.arange(3)}))["total"].tolist()
[0, 1, 2]
>>> import os
>>> loads(pickle.dumps(os.getcwd))
Traceback (most recent call last):
    ...
course_lib.grader._safe_pickle.UnsafePickle: the result refers to posix.getcwd, which a result may not contain
"""

from __future__ import annotations

import _compat_pickle
import importlib
import io
import pickle
from typing import Any

__all__ = ["UnsafePickle", "loads"]


class UnsafePickle(pickle.UnpicklingError):
    """The bytes name something that plain data does not need."""


# Builtins a result may be built from: containers and numbers, nothing that acts.
_BUILTINS = frozenset({
    "set", "frozenset", "list", "dict", "tuple", "complex", "slice", "range", "bytearray",
    "bytes", "int", "float", "bool", "str", "object", "NotImplemented", "Ellipsis",
})
# Functions (not classes) that pickles of NumPy and pandas objects call to rebuild them.
_FUNCTIONS = frozenset({
    ("copyreg", "_reconstructor"), ("copyreg", "__newobj__"), ("copyreg", "__newobj_ex__"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"), ("numpy.core.numeric", "_frombuffer"),
    ("numpy.random._pickle", "__bit_generator_ctor"), ("numpy.random._pickle", "__generator_ctor"),
    ("pandas._libs.internals", "_unpickle_block"), ("pandas.core.internals.blocks", "new_block"),
    ("pandas.core.indexes.base", "_new_Index"), ("pandas.core.indexes.period", "_new_PeriodIndex"),
    ("pandas._libs.tslibs.timestamps", "_unpickle_timestamp"),
    ("pandas._libs.tslibs.timedeltas", "_timedelta_unpickle"),
    ("pandas._libs.tslibs.nattype", "__nat_unpickle"),
    ("pandas._libs.arrays", "__pyx_unpickle_NDArrayBacked"),
    ("pandas._libs.tslibs.offsets", "_unpickle_offset"),
    ("datetime", "datetime"), ("datetime", "date"), ("datetime", "timedelta"), ("datetime", "timezone"),
    ("collections", "OrderedDict"), ("collections", "defaultdict"), ("collections", "Counter"),
    ("collections", "deque"), ("fractions", "Fraction"), ("decimal", "Decimal"),
    ("zoneinfo", "ZoneInfo"), ("_codecs", "encode"),
})
# Classes of these packages may be rebuilt (their constructors only build data) ...
_CLASS_PACKAGES = ("numpy", "pandas.core.", "pandas._libs.", "pandas.arrays", "pandas")
# ... except those that touch files or run code.
_REFUSED_CLASSES = frozenset({"numpy.memmap", "numpy.lib._datasource.DataSource", "numpy.vectorize",
                              "numpy.lib.npyio.NpzFile", "numpy.lib._npyio_impl.NpzFile"})


def loads(data: bytes, max_bytes: int = 2**31) -> Any:
    """Unpickle ``data`` that an untrusted process produced; only plain data comes back.

    Raises
    ------
    UnsafePickle
        when the data names a function or class outside what NumPy, pandas and builtin
        values need, or is larger than ``max_bytes``.
    """
    if len(data) > max_bytes:
        raise UnsafePickle(f"the result is {len(data):,} bytes, above the limit of {max_bytes:,}")
    return _Unpickler(io.BytesIO(data)).load()


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        # Protocols 0-2 write Python 2 names (__builtin__, copy_reg); judge the Python 3 ones.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if module == "builtins" and name in _BUILTINS:
            return super().find_class(module, name)
        if (module, name) in _FUNCTIONS:
            return super().find_class(module, name)
        if _is_data_class(module, name):
            obj = super().find_class(module, name)
            if isinstance(obj, type):
                return obj
        raise UnsafePickle(f"the result refers to {module}.{name}, which a result may not contain")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickle("the result uses persistent ids, which a result may not contain")


def _is_data_class(module: str, name: str) -> bool:
    top = module.split(".")[0]
    if top not in ("numpy", "pandas") or not module.startswith(_CLASS_PACKAGES):
        return False
    if module.startswith(("pandas.io", "numpy.testing", "numpy.distutils", "numpy.f2py", "pandas.plotting")):
        return False
    qualified = f"{module}.{name}"
    if qualified in _REFUSED_CLASSES or name.startswith("_") and not name.startswith("__pyx"):
        return False
    try:  # only a class may be resolved this way; a dotted name must not reach a function
        obj = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return False
    return isinstance(obj, type) and not issubclass(obj, (BaseException,)) and \
        f"{obj.__module__}.{obj.__qualname__}" not in _REFUSED_CLASSES
