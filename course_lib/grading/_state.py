"""The measuring instruments as captured when :mod:`course_lib.grading` is imported, and the check that they are intact.

The locked first cell of an assignment imports :mod:`course_lib.grading` before any
student code runs. At that moment this module keeps its own references to the clocks
(``time.perf_counter``, ``process_time``, ``monotonic_ns``, ``thread_time``), to
tracemalloc's functions and to the functions of course_lib's measuring modules
(:mod:`course_lib.timing`, :mod:`course_lib.memory`, :mod:`course_lib.complexity`,
:mod:`course_lib._concurrency`), and snapshots every global of those four modules by
identity, with the code of each function. :func:`_tampering_problems` compares the present
with that moment: a clock or a tracemalloc function rebound since (or not the builtin one
even then), a module replaced in ``sys.modules``, a global of a measuring module rebound or
a function's code swapped. :func:`_raise_if_tampered` raises
:class:`~course_lib.grading.TamperingDetected` for any of them.

The other modules of :mod:`course_lib.grading` import what they measure with from here, by
name. Their own globals are not in the snapshot, as the single module's were not before it
was split: code in the student's kernel can rebind them, and the verifier, which grades
every performance cell again outside the kernel, is the defence there (see the package
docstring). The NumPy ufuncs and pandas accessors that compare values are captured at the
same moment by :mod:`course_lib.grading._values`, beside the code that uses them.
"""

from __future__ import annotations

import copy
import os
import sys
import time
import tracemalloc
import types
from typing import Any

import numpy as np

from course_lib import _concurrency, complexity, memory, timing
from course_lib.grading._errors import TamperingDetected

# What the package's other modules (and the verifier's messages) use from here.
__all__ = [
    "_available_cores", "_compare", "_CPUS", "_deepcopy", "_default_rng", "_exponent", "_ExternalSampler",
    "_fmt_bytes", "_limit_threads", "_monotonic_ns", "_peak", "_perf_counter", "_process_time",
    "_accept_replacement", "_raise_if_tampered", "_sampling_available", "_tampering_problems",
    "_thread_settings", "_thread_time",
    "_tm_get", "_tm_is_tracing", "_tm_start", "_tm_stop", "_urandom", "_watch_clock_readers",
]


_TIME_MODULE = time
_perf_counter = time.perf_counter
_process_time = time.process_time
_monotonic_ns = time.monotonic_ns
_thread_time = time.thread_time
_CLOCKS = {
    "perf_counter": _perf_counter, "process_time": _process_time,
    "monotonic_ns": _monotonic_ns, "thread_time": _thread_time,
}
_CPUS = os.cpu_count() or 1

_TRACEMALLOC_MODULE = tracemalloc
_TRACEMALLOC_NAMES = ("start", "stop", "is_tracing", "get_traced_memory", "reset_peak")
_TRACEMALLOC = {name: getattr(tracemalloc, name) for name in _TRACEMALLOC_NAMES}
_tm_start = tracemalloc.start
_tm_stop = tracemalloc.stop
_tm_is_tracing = tracemalloc.is_tracing
_tm_get = tracemalloc.get_traced_memory

_default_rng = np.random.default_rng
_deepcopy = copy.deepcopy
_urandom = os.urandom

_compare = timing.compare
_limit_threads = timing.limit_threads
_thread_settings = timing.thread_settings
_clock_tampered = timing.clock_tampered
_peak = memory.peak
_fmt_bytes = memory.fmt_bytes
_exponent = complexity.exponent
_ExternalSampler = _concurrency.ExternalSampler
_sampling_available = _concurrency.available
_available_cores = timing._available_cores

# Every global of the measuring modules, by identity: rebinding any of them (a clock,
# compare's timed loop, tracemalloc inside memory) after this import is tampering.
_SNAPSHOTS = {mod.__name__: (mod, dict(vars(mod))) for mod in (timing, memory, complexity, _concurrency)}
# ... and their functions' code: a function keeps its identity when its __code__ is
# swapped, so a timed loop rewritten in place would pass the check above.
_CODES = {
    (mod_name, name): (value, value.__code__)
    for mod_name, (_, snapshot) in _SNAPSHOTS.items()
    for name, value in snapshot.items()
    if isinstance(value, types.FunctionType)
}
_MISSING = object()

# The package's own modules that time with the perf_counter captured here, each under the
# name _perf_counter as in timing and complexity. The package's __init__ names them once all
# are imported (before student code runs); _tampering_problems compares each, as it compares
# timing's and complexity's, with this module's: rebinding the clock in any of them is
# reported, as rebinding the one module's _perf_counter was before the package was split.
_CLOCK_READERS: list[types.ModuleType] = []


def _accept_replacement(module: types.ModuleType, name: str, fn: types.FunctionType) -> None:
    """Take ``module.name = fn`` into the snapshot the tampering check compares with.

    Only for trusted code that replaces a measuring function on purpose in a process that
    runs no student code (the grader's verifier); the student's kernel never calls it.
    """
    _SNAPSHOTS[module.__name__][1][name] = fn
    _CODES[(module.__name__, name)] = (fn, fn.__code__)


def _raise_if_tampered() -> None:
    problems = _tampering_problems()
    if problems:
        raise TamperingDetected(
            "; ".join(problems) + ". Grading measures with the clocks and tools captured "
            "before your code ran; do not replace them."
        )


def _tampering_problems() -> list[str]:
    problems = []
    if sys.modules.get("time") is not _TIME_MODULE:
        problems.append("the time module was replaced")
    for name, fn in _CLOCKS.items():
        if not _is_builtin(fn, name, "time"):
            problems.append(f"time.{name} was replaced before course_lib.grading was imported")
        elif getattr(_TIME_MODULE, name, None) is not fn:
            problems.append(f"time.{name} was reassigned")
    if sys.modules.get("tracemalloc") is not _TRACEMALLOC_MODULE:
        problems.append("the tracemalloc module was replaced")
    for name, fn in _TRACEMALLOC.items():
        if not _is_builtin(fn, name, "_tracemalloc"):
            problems.append(f"tracemalloc.{name} was replaced before course_lib.grading was imported")
        elif getattr(_TRACEMALLOC_MODULE, name, None) is not fn:
            problems.append(f"tracemalloc.{name} was reassigned")
    if _clock_tampered():
        problems.append("course_lib.timing's clocks were replaced")
    for module_name, (module, snapshot) in _SNAPSHOTS.items():
        if sys.modules.get(module_name) is not module:
            problems.append(f"{module_name} was replaced")
            continue
        current = vars(module)
        changed = [name for name, value in snapshot.items() if current.get(name, _MISSING) is not value]
        if changed:
            problems.append(f"{module_name}.{changed[0]} was reassigned")
    swapped = [f"{mod}.{name}" for (mod, name), (fn, code) in _CODES.items() if fn.__code__ is not code]
    if swapped:
        problems.append(f"the code of {swapped[0]} was replaced")
    for module in (timing, complexity, *_CLOCK_READERS):
        if vars(module).get("_perf_counter") is not _perf_counter:
            problems.append(f"{module.__name__} measures with a clock other than time.perf_counter")
    return problems


def _watch_clock_readers(*modules: types.ModuleType) -> None:
    """Have :func:`_tampering_problems` check that each of ``modules`` still times with the captured clock."""
    _CLOCK_READERS.extend(modules)


def _is_builtin(fn: Any, name: str, module: str) -> bool:
    owner = getattr(fn, "__self__", None)
    return (
        type(fn) is types.BuiltinFunctionType
        and fn.__name__ == name
        and type(owner) is types.ModuleType
        and owner.__name__ == module
    )

