"""The checks that nbgrader grade cells call: correctness first, then speed, hard to game.

Every helper except :func:`speedup_points` is an *assertion*: it returns ``None``
quietly when the submission passes and raises :class:`GradingError` (an
``AssertionError``) with a message written for the student when it does not, so
nbgrader scores the cell as failed. :func:`speedup_points` returns the points earned
as a plain ``float``; as the last expression of a grade cell nbgrader records it as
partial credit (nbgrader parses the cell's ``text/plain`` result with ``float()``,
and anything above the cell's points is an error, so the value is clipped to
``[0, points]``).

Import this module in the locked first cell of an assignment, before any student
code runs. The functions it relies on (the clocks, tracemalloc, the NumPy ufuncs that
compare values, course_lib's timing, memory and complexity functions) are captured at
that moment, so a notebook that later rebinds ``time.perf_counter`` or
``numpy.allclose`` changes nothing here, and rebinding a clock is reported as
:class:`TamperingDetected`.

How a speed-up is graded
------------------------
1. **Correctness first.** ``make_args()`` is called for ``checks`` fresh inputs;
   each input is deep-copied so the baseline computes the reference on data the
   candidate never touched (a candidate that mutates its input cannot make the
   reference agree with it). Any mismatch fails here, before anything is timed.
   Two calls of ``make_args`` that return equal inputs are a configuration error
   (``ValueError``): memoising on value would then win.
2. **No microsecond verdicts.** A comparison is refused with
   :class:`UnreliableMeasurement` when a candidate *exactly at the threshold*
   would take under ``min_call_seconds`` (1 ms) per call, that is when
   ``baseline_seconds * min(1, 1 / at_least) < min_call_seconds``: ratios of
   microsecond calls moved by more than 2x on a loaded machine. This depends only
   on the reference and the threshold, so it is the instructor's configuration
   that is refused, never a student for being fast (a candidate faster than the
   threshold is far from the verdict boundary, where noise cannot flip it).
3. **Measurement.** :func:`course_lib.timing.compare` with interleaved rounds and
   ``make_args`` called for every timed call, so memoising on identity or value
   gains nothing. Every timed result is checked: its type and dtype are compared
   with the reference's on every call (with the default check), and its values with
   ``baseline(*pristine_copy)`` on every call when that costs at most
   ``verify_budget`` seconds (default ``2 * budget``), otherwise on a random sample,
   drawn from ``os.urandom`` and unpredictable to the submission, of at least 10
   calls and as many as the verify budget allows. A submission that returns garbage
   on a share ``f`` of its calls is caught with probability ``1 - (1 - f)**k`` for
   ``k`` verified calls.
4. **Verdict.** ``needed = at_least * (1 - margin)`` with ``margin = 0.1``: the
   submission passes when the measured speed-up (the median of the paired round
   ratios) is at least ``needed``. When the confidence interval ``[low, high]``
   straddles ``needed`` the result is too close to call, and a second measurement
   of the same budget is taken; the verdict then uses the median of all rounds.

Why this rule: a submission whose true speed-up is 1.5 times the threshold passes
unless its measured ratio falls by 40% (to 0.9 of the threshold), and one at two
thirds of it fails unless its measured ratio rises by 35%. Medians of paired rounds
stay within about 20% of their quiet value under a busy competitor process when the
calls take a millisecond or more, so both verdicts hold with a wide safety factor.
The margin leans towards the student because load mostly *compresses* measured
ratios (both sides pay the same interruptions, which dilutes the difference).

What this resists, and what it does not
---------------------------------------
Resisted: rebinding ``time.perf_counter`` / ``process_time`` / ``monotonic_ns``
before or after import; replacing course_lib's timing, memory or complexity
functions, or tracemalloc's functions; clocks that return constants or scaled
values (the measured times are cross-checked against ``time.monotonic_ns``);
memoising on input identity or value; results that are ndarray, float or DataFrame
subclasses, or any object with a lying ``__eq__`` / ``__array__`` /
``__array_ufunc__``; patching ``numpy.allclose``, ``numpy.array_equal``,
``numpy.testing`` or ``pandas.testing`` (none of them is used); correct results for
the first calls and garbage later; mutating the input. Not resisted: code in the
student's kernel can in principle do anything (rebind this module's own globals,
patch pandas internals or builtins, read the hidden tests from memory, or exit the
kernel). ``course grade`` therefore grades these cells again outside the kernel
(:mod:`course_lib.grader.verification`), where none of that reaches the measurement.

Examples
--------
>>> import numpy as np
>>> assert_same(np.array([1.0, 2.0]), np.array([1.0, 2.0]))
>>> assert_same(np.array([1.0, 2.5]), np.array([1.0, 2.0]))
Traceback (most recent call last):
    ...
course_lib.grading.GradingError: Your result differs from the reference: result: 1 of 2 values differ; first at [1]: got 2.5, expected 2.0 (difference 0.5, allowed 2e-09)
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime
import gc
import inspect
import io
import math
import os
import reprlib
import statistics
import sys
import time
import tracemalloc
import types
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from course_lib import _concurrency, complexity, memory, timing
from course_lib._fresh_call import fresh_call_seconds as _fresh_call_seconds
from course_lib._numba_report import prange_loops

__all__ = [
    "GradingError",
    "TamperingDetected",
    "UnreliableMeasurement",
    "assert_same",
    "assert_speedup",
    "speedup_points",
    "parallel_points",
    "assert_peak_memory_below",
    "assert_scaling",
    "log_points",
    "peak_memory_points",
    "scaling_points",
    "warm_call_seconds",
    "first_call_seconds",
    "measured_speedup",
    "measured_exponent",
    "measured_peak",
]


class GradingError(AssertionError):
    """A grading check failed; the message says what differs or what was needed."""


class TamperingDetected(GradingError):
    """The measuring instruments (clocks, tracemalloc, course_lib) were interfered with.

    The message always starts with ``"Tampering detected:"`` so that a grading report
    can flag the submission.
    """

    def __init__(self, detail: str) -> None:
        prefix = "Tampering detected:"
        super().__init__(detail if detail.startswith(prefix) else f"{prefix} {detail}")


class UnreliableMeasurement(GradingError):
    """The grading configuration asks for a measurement that cannot be trusted.

    Raised for the instructor, not the student: the inputs are so small that the
    calls take microseconds, where measured ratios move by more than 2x under load.
    """


# ---------------------------------------------------------------------------
# Everything the checks rely on, captured at import (before student code runs)
# ---------------------------------------------------------------------------

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

# Verification of timed results: at least this many are checked against the
# reference, however expensive the reference is.
_MIN_VERIFIED = 10
_OUTPUT_SHOWN = 2000  # characters of captured output attached to a failure


@dataclasses.dataclass(frozen=True)
class _Tolerance:
    rtol: float
    atol: float
    check_dtype: bool


_EXACT = _Tolerance(0.0, 0.0, True)


# ---------------------------------------------------------------------------
# assert_same
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Speed
# ---------------------------------------------------------------------------


def assert_speedup(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    at_least: float,
    budget: float = 1.0,
    *,
    check: Callable[[Any, Any], Any] | None = None,
    rtol: float = 1e-9,
    atol: float = 0.0,
    margin: float = 0.1,
    min_call_seconds: float = 1e-3,
    checks: int = 3,
    verify_budget: float | None = None,
    threads: int = 1,
) -> None:
    """Check that ``candidate`` agrees with ``baseline`` and is ``at_least`` times faster.

    See the module docstring for the procedure. In short: ``checks`` fresh inputs
    must give the same result on both sides (each side gets its own deep copy);
    then :func:`course_lib.timing.compare` measures the speed-up with fresh inputs
    for every call and every timed result checked; the submission passes when the
    measured speed-up (median of paired rounds) reaches ``at_least * (1 - margin)``.

    Parameters
    ----------
    candidate : callable
        The submission, called as ``candidate(*make_args())``.
    baseline : callable
        The reference implementation, called the same way.
    make_args : callable
        Zero-argument function returning a tuple of positional arguments; it must
        return new, random inputs on every call.
    at_least : float
        The required speed-up, time(baseline) / time(candidate).
    budget : float, default 1.0
        Seconds of timed rounds (input generation and checks come on top, but the
        rounds stop at twice this in wall time once there are enough of them).
    check : callable, optional
        ``check(result, expected)``, raising ``AssertionError`` on a mismatch; by
        default :func:`assert_same` with ``rtol`` and ``atol``.
    rtol, atol : float
        Tolerances of the default check.
    margin : float, default 0.1
        Share of ``at_least`` forgiven for measurement noise.
    min_call_seconds : float, default 0.001
        Refuse configurations in which a candidate at the threshold would take
        less than this per call.
    checks : int, default 3
        Fresh inputs checked for correctness before timing (at least 2).
    verify_budget : float, optional
        Seconds of reference calls spent verifying timed results; ``None`` means
        ``budget``, ``math.inf`` verifies every timed result.
    threads : int, default 1
        Threads for BLAS/OpenMP and Numba during the whole measurement, the same for
        both sides (capped at the cores this process may use). One thread unless the
        cell grades parallel work: a pool that lets a neighbour's load decide how
        fast the student's code runs measures the neighbour.

    Raises
    ------
    GradingError
        Wrong result (before or during timing), an exception in the candidate, or a
        speed-up below what was needed (with the measured ratio and its interval).
    TamperingDetected
        A clock, tracemalloc or course_lib's measuring code was replaced.
    UnreliableMeasurement
        The inputs are too small to measure (an instructor's configuration problem).

    Examples
    --------
    >>> import random
    >>> make_args = lambda: ([random.random() for _ in range(5)],)
    >>> assert_speedup(sorted, sorted, make_args, at_least=2, budget=0.05)
    Traceback (most recent call last):
        ...
    course_lib.grading.UnreliableMeasurement: Unreliable measurement ...
    """
    _check_number(at_least, "at_least", positive=True)
    settings = _speed_settings(budget, margin, min_call_seconds, checks, verify_budget, check, rtol, atol,
                               threads)
    needed = at_least * (1.0 - margin)
    with _grading_session():
        result = _measure_speedup(candidate, baseline, make_args, settings, fastest=at_least,
                                  decision=_Decision(passes_at=needed))
        if not result.ratio >= needed:
            raise GradingError(
                f"Not fast enough: your function measured {_fmt_ratio(result.ratio)}x as fast as "
                f"the reference ({result.describe()}); this test needs a speed-up of "
                f"{_fmt_ratio(at_least)}x (a measured {_fmt_ratio(needed)}x passes, allowing "
                f"{margin:.0%} for measurement noise)."
            )


def speedup_points(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    full_at: float,
    zero_at: float,
    points: float,
    budget: float = 1.0,
    *,
    check: Callable[[Any, Any], Any] | None = None,
    rtol: float = 1e-9,
    atol: float = 0.0,
    margin: float = 0.1,
    min_call_seconds: float = 1e-3,
    checks: int = 3,
    verify_budget: float | None = None,
    threads: int = 1,
) -> float:
    """Partial credit for a speed-up: 0 at ``zero_at``, ``points`` at ``full_at``.

    Correctness comes first, as in :func:`assert_speedup`: a wrong result raises
    :class:`GradingError`, which nbgrader scores as 0 and shows the message. Then
    the credit is linear in ``log(speed-up)`` between the two thresholds (each
    lowered by ``margin``, as in :func:`assert_speedup`, so that
    ``assert_speedup(..., at_least=full_at)`` passes exactly when this gives full
    points), clipped to ``[0, points]`` and rounded to 2 decimals.

    Make this call the last expression of the grade cell and give the cell the same
    ``points``: nbgrader records the value as the cell's score (a number above the
    cell's points is an error in nbgrader). The value is a plain ``float`` because
    nbgrader parses the ``text/plain`` output with ``float()``, which the repr of a
    NumPy scalar (``np.float64(2.5)``) would defeat.

    Parameters
    ----------
    candidate, baseline, make_args, budget, check, rtol, atol, margin,
    min_call_seconds, checks, verify_budget, threads
        As for :func:`assert_speedup`; ``min_call_seconds`` applies to a candidate at
        ``full_at``.
    full_at : float
        Speed-up earning all the points.
    zero_at : float
        Speed-up earning none; must be below ``full_at``.
    points : float
        The points of the grade cell.

    Returns
    -------
    float
        Points earned, between 0 and ``points``.

    Examples
    --------
    With ``zero_at=2``, ``full_at=50`` and the 10% margin the credit runs from a
    measured 1.8x to a measured 45x; 9x lies halfway on a log scale, so it earns half
    the points (this is the rule :func:`speedup_points` applies to its measurement):

    >>> _points_for(9.0, full_at=50, zero_at=2, points=4, margin=0.1)
    2.0
    """
    _check_number(full_at, "full_at", positive=True)
    _check_number(zero_at, "zero_at", positive=True)
    _check_number(points, "points", positive=True)
    if not zero_at < full_at:
        raise ValueError(
            f"zero_at must be below full_at (credit grows with the speed-up), "
            f"got zero_at={zero_at!r}, full_at={full_at!r}"
        )
    settings = _speed_settings(budget, margin, min_call_seconds, checks, verify_budget, check, rtol, atol,
                               threads)
    decision = _Decision(full_at=full_at, zero_at=zero_at, points=points, margin=margin)
    with _grading_session():
        result = _measure_speedup(candidate, baseline, make_args, settings, fastest=full_at, decision=decision)
    return _points_for(result.ratio, full_at, zero_at, points, margin)


def parallel_points(
    candidate: Callable[..., Any],
    reference: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    workers: int,
    full_at: float,
    zero_at: float,
    points: float,
    budget: float = 2.0,
    *,
    within: float = 1.1,
    min_concurrency: float = 1.25,
    rtol: float = 1e-9,
    atol: float = 0.0,
    margin: float = 0.1,
    min_call_seconds: float = 0.02,
    checks: int = 3,
    compiled: Any = None,
) -> float:
    """Partial credit for parallel work: ``candidate`` on ``workers`` workers against itself on one.

    ``candidate(*args, w)`` is called with the worker count as its last argument. The
    parallel speed-up is the time of ``candidate(*args, 1)`` over the time of
    ``candidate(*args, workers)``: the student's own serial run is the yardstick, so
    the array code is not counted twice. ``reference(*args)`` is the grader's serial
    version, for the results and as a bound on the yardstick.

    1. **Correctness first.** On ``checks`` fresh inputs the one-worker result must
       agree with ``reference`` (``rtol``, ``atol``) and the result on ``workers``
       workers must be *identical* to it: a parallel version that depends on the worker
       count, or on timing, is wrong.
    2. **Measurement.** Interleaved rounds, one call of each side per round (reference,
       one worker, ``workers`` workers; the order alternates), each on a fresh input (the
       reference and the one-worker run share theirs), every result checked. BLAS, OpenMP
       and Numba pools get ``workers`` threads on every side. While each call runs, every
       thread and child process it has is sampled from ``/proc`` (see
       :mod:`course_lib._concurrency`): its CPU time and the time it waited for a core.
       A call's time is its wall time less the least any of its working threads waited,
       so a busy neighbour who holds a core is charged to neither side.
    3. **Verdict.** Per round, ``min(one, within * reference) / parallel``: slowing the
       one-worker run down past ``within`` times the reference earns nothing. The
       speed-up is the median over the rounds; credit is linear in its log between
       ``zero_at`` and ``full_at``, each lowered by ``margin`` (as in
       :func:`speedup_points`).
    4. **Concurrency.** The parallel calls must have had more than one worker at work at
       once: at least ``min_concurrency`` threads or processes running or ready to run
       on average (median over the rounds). Tasks run one after another, or one thread
       that works while others wait, score 0 with a message.
    5. **Numba's own report**, when ``compiled`` names the Numba function whose ``prange``
       loop does the work: its compiled versions must hold a parallel region made from a
       ``prange`` loop (:func:`course_lib._numba_report.prange_loops`). A thread that only
       burns CPU beside a serial kernel passes the count of step 4, not this, and its
       speed-up stays near 1x, which the thresholds should leave without points.

    ``workers`` must be at least 2 and at most the cores this process may use (its CPU
    affinity); otherwise the measurement is refused (:class:`UnreliableMeasurement`):
    a grading worker given one core cannot grade parallel work.

    Parameters
    ----------
    candidate : callable
        The submission, called as ``candidate(*make_args(), w)``.
    reference : callable
        The grader's serial version, called as ``reference(*make_args())``.
    make_args : callable
        Fresh random inputs on every call, as for :func:`assert_speedup`.
    workers : int
        Workers for the parallel side, and threads for the pools of every side.
    full_at, zero_at, points : float
        As for :func:`speedup_points`, for the parallel speed-up.
    budget : float, default 2.0
        Seconds of timed calls (at least 9 rounds).
    within : float, default 1.1
        The one-worker time counts at most this many times the reference's.
    min_concurrency : float, default 1.25
        Working threads or processes running or ready to run, on average, needed.
    rtol, atol : float
        Tolerances of the one-worker result against the reference's.
    margin : float, default 0.1
        Share of the thresholds forgiven for measurement noise.
    min_call_seconds : float, default 0.02
        Refuse configurations in which a parallel call at ``full_at`` would take less
        (its threads must be sampled several times).
    checks : int, default 3
        Fresh inputs checked before timing (at least 2).
    compiled : Numba function, optional
        The kernel whose ``prange`` loop must have been made parallel by Numba.

    Returns
    -------
    float
        Points earned, between 0 and ``points``.

    Raises
    ------
    GradingError
        A wrong or worker-dependent result, an exception, no concurrency, or (with
        ``compiled``) no parallel ``prange`` loop in Numba's report.
    UnreliableMeasurement
        Fewer than 2 or more than the available cores, calls too short to sample, or a
        system without per-thread accounts.

    Examples
    --------
    With one core to grade on there is nothing to measure:

    >>> import os
    >>> if hasattr(os, "sched_setaffinity"):
    ...     before = os.sched_getaffinity(0)
    ...     os.sched_setaffinity(0, {min(before)})
    ...     try:
    ...         parallel_points(lambda x, w: x, lambda x: x, lambda: (1,), workers=1,
    ...                         full_at=1.5, zero_at=1.1, points=4)
    ...     finally:
    ...         os.sched_setaffinity(0, before)
    ... else:
    ...     raise UnreliableMeasurement("Unreliable measurement ...")
    Traceback (most recent call last):
        ...
    course_lib.grading.UnreliableMeasurement: Unreliable measurement ...
    """
    settings = _parallel_settings(workers, full_at, zero_at, points, budget, within, min_concurrency,
                                  rtol, atol, margin, min_call_seconds, checks)
    decision = _Decision(full_at=full_at, zero_at=zero_at, points=points, margin=margin)
    with _grading_session():
        try:
            result = _measure_parallel(candidate, reference, make_args, settings, decision)
        except _NoParallelPoints:
            return 0.0
    if compiled is not None:
        _require_prange(prange_loops(compiled), getattr(compiled, "__name__", "the kernel"))
    return _parallel_points_for(result, settings)


# ---------------------------------------------------------------------------
# Memory and scaling
# ---------------------------------------------------------------------------


def assert_peak_memory_below(fn: Callable[..., Any], limit: int | str, /, *args: Any, **kwargs: Any) -> None:
    """Check that ``fn(*args, **kwargs)`` peaks below ``limit`` bytes of traced memory.

    Measured with :func:`course_lib.memory.peak` (tracemalloc, which sees Python
    objects and NumPy buffers). tracemalloc's functions and ``memory.peak`` are
    checked against the ones captured at import, and the peak is cross-checked with
    tracemalloc's own process-wide peak.

    Parameters
    ----------
    fn : callable
        The function to run once.
    limit : int or str
        Bytes, or a string such as ``"50 MB"`` (decimal units B, kB, MB, GB; binary
        KiB, MiB, GiB also accepted).
    *args, **kwargs
        Passed to ``fn``.

    Raises
    ------
    GradingError
        The peak reached the limit (the message gives both), or ``fn`` raised.
    TamperingDetected
        tracemalloc or course_lib.memory was replaced.

    Examples
    --------
    >>> assert_peak_memory_below(lambda n: [0] * n, "1 MB", 1_000)
    >>> assert_peak_memory_below(lambda n: [0] * n, "1 MB", 1_000_000)
    Traceback (most recent call last):
        ...
    course_lib.grading.GradingError: Too much memory: your function's peak traced memory was 8.0 MB; the limit is 1.0 MB.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    limit_bytes = _parse_bytes(limit)
    with _grading_session():
        peak = _traced_peak(fn, args, kwargs)
        if peak >= limit_bytes:
            raise GradingError(
                f"Too much memory: your function's peak traced memory was "
                f"{_fmt_bytes(peak)}; the limit is {_fmt_bytes(limit_bytes)}."
            )


def assert_scaling(
    fn: Callable[[Any], Any],
    make_input: Callable[[int], Any],
    sizes: Sequence[int],
    max_exponent: float,
    *,
    budget: float = 0.2,
    margin: float = 0.1,
    min_call_seconds: float = 1e-3,
) -> None:
    """Check that the run time of ``fn`` grows no faster than ``n ** max_exponent``.

    Times ``fn(make_input(n))`` at each size, every call on a fresh input (unlike
    :func:`course_lib.complexity.doubling`, which reuses one input per size: a
    submission memoising on its input would look O(1) there), taking the sizes in
    turn and keeping the fastest call per size in CPU time (see below), fits the log-log
    exponent with :func:`course_lib.complexity.exponent` and fails when the fitted
    exponent exceeds ``max_exponent + margin``. The margin (0.1 by default) absorbs
    fitting noise: measured in CPU time, the exponents of a pure-Python linear and
    quadratic function came out at 1.03-1.06 and 2.00-2.04 under two busy
    competitors on 2 cores, far from the 1.0 that separates O(n) from O(n^2).

    Parameters
    ----------
    fn : callable
        Called as ``fn(x)`` with ``x = make_input(n)``.
    make_input : callable
        ``make_input(n)`` returns a new, random input of size ``n``.
    sizes : sequence of int
        At least two increasing sizes, e.g. doubling ``[1_000, 2_000, 4_000, 8_000]``.
    max_exponent : float
        The largest acceptable exponent, e.g. 1.5 to accept O(n) and O(n log n) and
        reject O(n^2).
    budget : float, default 0.2
        About the seconds of timed calls per size (3 to 15 calls each).
    margin : float, default 0.1
        Added to ``max_exponent`` before comparing.
    min_call_seconds : float, default 0.001
        Refuse sizes whose largest call takes less than this.

    Raises
    ------
    GradingError
        The exponent is too large (the message has the fitted exponent, the verdict
        and the doubling table), or ``fn`` raised.
    UnreliableMeasurement
        Even the largest size runs in microseconds (instructor: use larger sizes).
    TamperingDetected
        A clock or course_lib's measuring code was replaced.
    """
    for obj, name in ((fn, "fn"), (make_input, "make_input")):
        if not callable(obj):
            raise TypeError(f"{name} must be a function, got {type(obj).__name__}")
    sizes = _check_sizes(sizes)
    _check_number(max_exponent, "max_exponent")
    _check_number(budget, "budget", positive=True)
    _check_number(margin, "margin")
    _check_number(min_call_seconds, "min_call_seconds", positive=True)
    with _grading_session():
        fit, table = _fitted_exponent(fn, make_input, sizes, budget, min_call_seconds)
        allowed = max_exponent + margin
        if not fit.slope <= allowed:
            raise GradingError(
                f"Grows too fast: the fitted exponent is {fit.slope:.2f} ({fit.verdict}); "
                f"this test allows at most {max_exponent:g} (a measured {allowed:.2f} passes). "
                f"Doubling table (CPU seconds per call; ratio to the previous size):\n"
                f"{table.to_string(index=False)}"
            )


def log_points(value: float, full_at: float, zero_at: float, points: float) -> float:
    """Points on a log scale: all of ``points`` at ``full_at``, none at ``zero_at``.

    The rule every partial-credit cell of the course follows, for a measurement that
    needs no timing (a table's deep memory, a count): the credit is linear in
    ``log(value)`` between the two thresholds, clipped to ``[0, points]`` and rounded to
    2 decimals. It works in either direction: ``full_at > zero_at`` when more is better
    (a speed-up, how many times less memory), ``full_at < zero_at`` when less is better
    (a peak in bytes). Make it the last expression of a grade cell with the same
    ``points``, as :func:`speedup_points`; the value is a plain ``float``.

    :func:`speedup_points`, :func:`peak_memory_points` and :func:`scaling_points` apply
    the same rule to what they measure (the first two with their noise margins).

    Parameters
    ----------
    value : float
        The measurement; NaN earns nothing.
    full_at, zero_at : float
        Where the credit is full and where it is zero; positive and different.
    points : float
        The points of the grade cell.

    Examples
    --------
    >>> log_points(8.0, full_at=8, zero_at=4, points=5)
    5.0
    >>> log_points(5.66, full_at=8, zero_at=4, points=5)   # halfway on a log scale
    2.5
    >>> log_points(40e6, full_at=20e6, zero_at=80e6, points=6)  # smaller is better here
    3.0
    """
    _check_points_thresholds(full_at, zero_at, points, increasing=None)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"value must be a number, got {type(value).__name__}")
    return _log_share_points(float(value), float(full_at), float(zero_at), float(points))


def peak_memory_points(fn: Callable[..., Any], full_at: int | str, zero_at: int | str, points: float,
                       /, *args: Any, **kwargs: Any) -> float:
    """Partial credit for peak memory: ``points`` up to ``full_at``, none from ``zero_at``.

    ``fn(*args, **kwargs)`` runs once and its peak traced memory is measured exactly as
    :func:`assert_peak_memory_below` measures it (tracemalloc, its functions and
    ``memory.peak`` checked against the ones captured at import, the peak cross-checked
    with tracemalloc's own counter). The credit is :func:`log_points` of the peak: full
    when it is at most ``full_at`` (so ``assert_peak_memory_below(fn, full_at)`` passes
    exactly when this gives full points, up to the byte at the limit), none at
    ``zero_at`` or more, linear in ``log(peak)`` in between. Memory is not noisy as time
    is, so there is no margin.

    Parameters
    ----------
    fn : callable
        The function to run once.
    full_at, zero_at : int or str
        Bytes, or strings such as ``"20 MB"`` (as for :func:`assert_peak_memory_below`);
        ``full_at`` below ``zero_at``.
    points : float
        The points of the grade cell; make the call its last expression.
    *args, **kwargs
        Passed to ``fn``.

    Returns
    -------
    float
        Points earned, between 0 and ``points``.

    Raises
    ------
    GradingError
        ``fn`` raised.
    TamperingDetected
        tracemalloc or course_lib.memory was replaced.

    Examples
    --------
    >>> peak_memory_points(lambda n: [0] * n, "1 MB", "4 MB", 2, 1_000)
    2.0
    >>> peak_memory_points(lambda n: [0] * n, "1 MB", "4 MB", 2, 250_000)   # 2 MB: halfway
    1.0
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    full, zero = _memory_thresholds(full_at, zero_at, points)
    with _grading_session():
        measured = _traced_peak(fn, args, kwargs)
    return _log_share_points(float(measured), full, zero, float(points))


def scaling_points(
    fn: Callable[[Any], Any],
    make_input: Callable[[int], Any],
    sizes: Sequence[int],
    full_at: float,
    zero_at: float,
    points: float,
    *,
    budget: float = 0.2,
    margin: float = 0.1,
    min_call_seconds: float = 1e-3,
) -> float:
    """Partial credit for growth: ``points`` up to exponent ``full_at``, none from ``zero_at``.

    The exponent is fitted exactly as :func:`assert_scaling` fits it (CPU time, fresh
    inputs, sizes taken in turn, the fastest call per size, the same cross-checks). The
    credit is linear in the exponent, which is itself a slope on a log-log scale, between
    ``full_at + margin`` (full points) and ``zero_at + margin`` (none), so that
    ``assert_scaling(..., max_exponent=full_at)`` passes exactly when this gives full
    points.

    Parameters
    ----------
    fn, make_input, sizes, budget, margin, min_call_seconds
        As for :func:`assert_scaling`.
    full_at : float
        The largest exponent earning all the points (e.g. 1.5: O(n log n) still counts
        as near-linear).
    zero_at : float
        The exponent earning none; above ``full_at`` (e.g. 1.8, below the 2 of O(n^2)).
    points : float
        The points of the grade cell; make the call its last expression.

    Returns
    -------
    float
        Points earned, between 0 and ``points``.

    Raises
    ------
    GradingError
        ``fn`` raised.
    UnreliableMeasurement
        Even the largest size runs in microseconds (instructor: use larger sizes).
    TamperingDetected
        A clock or course_lib's measuring code was replaced.

    Examples
    --------
    With ``full_at=1.5``, ``zero_at=1.8`` and the margin of 0.1, a fitted 1.6 earns all
    the points, 1.9 none, and 1.75 half (the rule applied to the fitted exponent):

    >>> _exponent_points(1.75, full_at=1.5, zero_at=1.8, points=3, margin=0.1)
    1.5
    """
    for obj, name in ((fn, "fn"), (make_input, "make_input")):
        if not callable(obj):
            raise TypeError(f"{name} must be a function, got {type(obj).__name__}")
    sizes = _check_sizes(sizes)
    _check_points_thresholds(full_at, zero_at, points, increasing=False)
    _check_number(budget, "budget", positive=True)
    _check_number(margin, "margin")
    _check_number(min_call_seconds, "min_call_seconds", positive=True)
    with _grading_session():
        fit, _ = _fitted_exponent(fn, make_input, sizes, budget, min_call_seconds)
    return _exponent_points(fit.slope, full_at, zero_at, points, margin)


def measured_speedup(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    budget: float = 1.0,
    *,
    rtol: float = 1e-9,
    atol: float = 0.0,
    min_call_seconds: float = 1e-3,
    checks: int = 3,
    threads: int = 1,
) -> float:
    """The speed-up of ``candidate`` over ``baseline`` as the grader measures it, as a number.

    For a test that checks a figure the student measured (a speed-up their own tables
    imply) against the grader's reading of the same code: measured exactly as
    :func:`speedup_points` measures (correctness first, on fresh inputs; then side by side),
    and refused the same way when the calls are too short to time (``min_call_seconds``
    applies to the candidate's own calls here: there is no threshold). Outside the kernel
    the verifier measures it in the student worker, as for every speed cell.

    Examples
    --------
    >>> import random
    >>> make_args = lambda: ([random.random() for _ in range(5)],)
    >>> measured_speedup(sorted, sorted, make_args, budget=0.05)
    Traceback (most recent call last):
        ...
    course_lib.grading.UnreliableMeasurement: Unreliable measurement ...
    """
    settings = _speed_settings(budget, 0.0, min_call_seconds, checks, None, None, rtol, atol, threads)
    with _grading_session():
        return float(_measure_speedup(candidate, baseline, make_args, settings, fastest=1.0,
                                      decision=_Decision()).ratio)


def measured_exponent(fn: Callable[[Any], Any], make_input: Callable[[int], Any], sizes: Sequence[int],
                      budget: float = 0.2, *, min_call_seconds: float = 1e-3) -> float:
    """The growth exponent of ``fn``'s CPU time over ``sizes`` as the grader fits it, as a number.

    For a test that checks a student's own doubling table or exponent against the
    grader's reading of the same code: fitted exactly as :func:`scaling_points` fits it
    (sizes in turn, fresh inputs, CPU time cross-checked against independent clocks).
    Outside the kernel the verifier times it in the student worker.

    Examples
    --------
    >>> import numpy as np
    >>> slope = measured_exponent(lambda x: np.sort(x), lambda n: np.random.default_rng().random(n),
    ...                           [200_000, 400_000, 800_000])  # doctest: +SKIP
    >>> 0.8 < slope < 1.4  # doctest: +SKIP
    True
    """
    for obj, name in ((fn, "fn"), (make_input, "make_input")):
        if not callable(obj):
            raise TypeError(f"{name} must be a function, got {type(obj).__name__}")
    sizes = _check_sizes(sizes)
    _check_number(budget, "budget", positive=True)
    _check_number(min_call_seconds, "min_call_seconds", positive=True)
    with _grading_session():
        fit, _ = _fitted_exponent(fn, make_input, sizes, budget, min_call_seconds)
    return float(fit.slope)


def measured_peak(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> int:
    """The peak traced memory of one call ``fn(*args, **kwargs)`` as the grader reads it, in bytes.

    For a test that checks a student's own tracemalloc figure against the grader's reading of
    the same function: the figure the student was asked to take (tracemalloc's peak),
    measured as :func:`peak_memory_points` measures it, cross-checked against tracemalloc's own
    counter. While the verifier grades outside the kernel it is the traced peak in the
    student worker. Memory hidden from tracemalloc is a matter for the memory cells
    (:func:`peak_memory_points` counts the sandbox's rise there), not for this agreement.

    Examples
    --------
    >>> 1_000_000 <= measured_peak(bytearray, 1_000_000) < 1_100_000
    True
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    with _grading_session():
        return _traced_peak(fn, args, kwargs)


# ---------------------------------------------------------------------------
# Private helpers: comparing values
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Private helpers: measuring speed
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _SpeedSettings:
    budget: float
    margin: float
    min_call_seconds: float
    checks: int
    verify_budget: float
    comparator: Callable[[Any, Any], str | None]
    default_check: bool
    threads: int = 1


@dataclasses.dataclass(frozen=True)
class _SpeedResult:
    ratio: float
    low: float
    high: float
    rounds: int
    baseline_seconds: float
    candidate_seconds: float
    measurements: int
    threads: str = ""

    def describe(self) -> str:
        if self.measurements == 0:
            return (f"a short reading in your kernel while graded (the fastest of two checked calls per side: "
                    f"reference {_fmt_seconds(self.baseline_seconds)} per call, yours "
                    f"{_fmt_seconds(self.candidate_seconds)}); the grade is measured outside your kernel; "
                    f"{_cores_text()}")
        again = ", measured twice because the first was too close to call" if self.measurements > 1 else ""
        pools = f"; thread pools: {self.threads}" if self.threads else ""
        return (
            f"95% interval {_fmt_ratio(self.low)}x to {_fmt_ratio(self.high)}x over {self.rounds} "
            f"rounds{again}; reference {_fmt_seconds(self.baseline_seconds)} per call, yours "
            f"{_fmt_seconds(self.candidate_seconds)}{pools}; {_cores_text()}"
        )


class _Args(tuple):
    """A tuple of arguments that may carry a pristine copy for the reference.

    compare hands this object to the check but unpacks it into the call, so the
    submission only ever sees the elements, never the copy.
    """


@dataclasses.dataclass
class _Estimate:
    baseline_seconds: float
    candidate_seconds: float
    signature: tuple[Any, ...]


def _speed_settings(
    budget: float, margin: float, min_call_seconds: float, checks: int,
    verify_budget: float | None, check: Callable[[Any, Any], Any] | None, rtol: float, atol: float,
    threads: int = 1,
) -> _SpeedSettings:
    _check_number(budget, "budget", positive=True)
    _check_number(margin, "margin")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin is a share of the threshold in [0, 1), e.g. 0.1, got {margin!r}")
    _check_number(min_call_seconds, "min_call_seconds", positive=True)
    if isinstance(checks, bool) or not isinstance(checks, int) or checks < 2:
        raise ValueError(f"checks must be a whole number of fresh inputs >= 2, got {checks!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a whole number >= 1, got {threads!r}")
    if verify_budget is None:
        verify_budget = float(budget)
    _check_number(verify_budget, "verify_budget", positive=True, finite=False)
    if check is None:
        tol = _tolerance(rtol, atol, True)

        def comparator(result: Any, expected: Any) -> str | None:
            return _problem(result, expected, tol)
    else:
        if not callable(check):
            raise TypeError(f"check must be a function check(result, expected), got {type(check).__name__}")

        def comparator(result: Any, expected: Any) -> str | None:
            try:
                check(result, expected)
            except TamperingDetected:
                raise
            except AssertionError as exc:
                return str(exc) or type(exc).__name__
            return None

    return _SpeedSettings(float(budget), float(margin), float(min_call_seconds), checks,
                          float(verify_budget), comparator, check is None, threads)


def _measure_speedup(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    settings: _SpeedSettings,
    fastest: float,
    decision: _Decision,
) -> _SpeedResult:
    for obj, name in ((candidate, "candidate"), (baseline, "baseline"), (make_args, "make_args")):
        if not callable(obj):
            raise TypeError(f"{name} must be a function, got {type(obj).__name__}")
    _raise_if_tampered()
    with _limit_threads(settings.threads):
        pools = _thread_settings()
        estimate = _check_correctness(candidate, baseline, make_args, settings)
        _refuse_microseconds(estimate, fastest, settings.min_call_seconds)
        if _quick():
            # The kernel's short reading while nbgrader autogrades (the stored verdict is the
            # verifier's): the fastest of the correctness calls after the first, per side.
            _raise_if_tampered()
            ratio = estimate.baseline_seconds / max(estimate.candidate_seconds, 1e-12)
            return _SpeedResult(ratio=ratio, low=ratio, high=ratio, rounds=0,
                                baseline_seconds=estimate.baseline_seconds,
                                candidate_seconds=estimate.candidate_seconds, measurements=0, threads=pools)
        comparisons = [_timed_comparison(candidate, baseline, make_args, settings, estimate)]
        ratios = list(comparisons[0].ratios)
        low, ratio, high = _median_interval(ratios)
        if decision.undecided(low, high):
            # Too close to call: measure again and decide on all the rounds together.
            comparisons.append(_timed_comparison(candidate, baseline, make_args, settings, estimate))
            ratios += comparisons[1].ratios
            low, ratio, high = _median_interval(ratios)
    _raise_if_tampered()
    return _SpeedResult(
        ratio=ratio, low=low, high=high, rounds=len(ratios),
        baseline_seconds=statistics.median(c.baseline_seconds for c in comparisons),
        candidate_seconds=statistics.median(c.candidate_seconds for c in comparisons),
        measurements=len(comparisons), threads=pools,
    )


def _check_correctness(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    settings: _SpeedSettings,
) -> _Estimate:
    inputs = [_fresh_args(make_args) for _ in range(settings.checks)]
    pristine = [_deepcopy(args) for args in inputs]
    if all(_same_values(x, y) for x, y in zip(pristine[0], pristine[1])) and len(pristine[0]) == len(pristine[1]):
        raise ValueError(
            "make_args returned equal inputs on two calls, so a submission that memoises "
            "on its input would win the race without being faster. make_args must draw new "
            "random inputs on every call, e.g. lambda: (rng.random(100_000),)"
        )
    base_t, cand_t = [], []
    signature: tuple[Any, ...] = ()
    for k, (args, reference_args) in enumerate(zip(inputs, pristine), start=1):
        t0 = _perf_counter()
        result = _call_candidate(candidate, args)
        t1 = _perf_counter()
        expected = baseline(*reference_args)
        t2 = _perf_counter()
        cand_t.append(t1 - t0)
        base_t.append(t2 - t1)
        problem = settings.comparator(result, expected)
        if problem is not None:
            raise GradingError(
                f"Wrong result on fresh input {k} of {settings.checks} (checked before any "
                f"timing): {problem}"
            )
        signature = _signature(expected)
    # The first call may include one-off costs (Numba compiling); the rest do not.
    return _Estimate(min(base_t[1:]), min(cand_t[1:]), signature)


def _refuse_microseconds(estimate: _Estimate, fastest: float, min_call_seconds: float) -> None:
    at_threshold = estimate.baseline_seconds * min(1.0, 1.0 / fastest)
    if at_threshold < min_call_seconds:
        needed = min_call_seconds * max(1.0, fastest)
        raise UnreliableMeasurement(
            f"Unreliable measurement (a grading configuration problem, not your code): the "
            f"reference takes {_fmt_seconds(estimate.baseline_seconds)} per call, so a solution "
            f"at the required {_fmt_ratio(fastest)}x would take {_fmt_seconds(at_threshold)}, "
            f"and ratios of calls under {_fmt_seconds(min_call_seconds)} move by more than 2x on "
            f"a busy machine. Instructor: use larger inputs in make_args, so that the reference "
            f"takes at least {_fmt_seconds(needed)} per call (10x that is safer)."
        )


def _timed_comparison(
    candidate: Callable[..., Any],
    baseline: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    settings: _SpeedSettings,
    estimate: _Estimate,
) -> timing.Comparison:
    share = _verify_share(estimate, settings)
    rng = _default_rng(int.from_bytes(_urandom(16), "little"))
    calls = {"checked": 0}
    durations_b: list[int] = []
    durations_c: list[int] = []
    guard = _RunawayGuard(_honest_limit(estimate, settings.budget))
    timed_baseline = _independently_clocked(baseline, durations_b, guard, wrap_errors=False)
    timed_candidate = _independently_clocked(candidate, durations_c, guard, wrap_errors=True)

    def fresh_args() -> _Args:
        args = _Args(_fresh_args(make_args))
        if share >= 1.0 or rng.random() < share:
            args.reference = _deepcopy(tuple(args))  # type: ignore[attr-defined]
        return args

    def check(args: _Args, result: Any) -> None:
        calls["checked"] += 1
        if settings.default_check and _signature(result) != estimate.signature:
            raise GradingError(
                f"Wrong result in timed call {calls['checked']}: expected "
                f"{_describe_signature(estimate.signature)}, got {_describe_signature(_signature(result))}"
            )
        reference_args = getattr(args, "reference", None)
        if reference_args is None:
            return
        problem = settings.comparator(result, baseline(*reference_args))
        if problem is not None:
            raise GradingError(
                f"Wrong result in timed call {calls['checked']} (results are checked during "
                f"timing, not only at first): {problem}"
            )

    started = _monotonic_ns()
    comparison = _compare(timed_baseline, timed_candidate, make_args=fresh_args, budget=settings.budget, check=check)
    elapsed = (_monotonic_ns() - started) / 1e9
    _cross_check_clock(comparison, durations_b, durations_c, elapsed)
    return comparison


def _verify_share(estimate: _Estimate, settings: _SpeedSettings) -> float:
    """Share of timed candidate calls whose values are checked against the reference."""
    t_b = max(estimate.baseline_seconds, 1e-9)
    t_c = max(estimate.candidate_seconds, 1e-9)
    loops = max(1.0, 0.02 / t_c)  # compare's calibration aims at 20 ms rounds
    calls = settings.budget / 2 / t_c + 4 * loops + 1  # rounds, calibration and warm-up
    cost_of_all = calls * t_b
    if cost_of_all <= settings.verify_budget:
        return 1.0
    return min(1.0, max(settings.verify_budget / cost_of_all, _MIN_VERIFIED / calls))


class _RunawayGuard:
    """Stops a measurement whose calls run far beyond any honest budget, if tampered with.

    A timer that was made to stop (a patched timed loop) would make compare's
    calibration grow its loop count for ever; the independent clock notices the calls
    piling up. Past the limit the guard looks for evidence (:func:`_tampering_problems`):
    with none, the machine is merely slow (a busy neighbour can stretch an honest
    measurement several times), so the limit doubles and the measurement goes on,
    bounded by the cell's time limit. Slowness alone is never called tampering.
    """

    def __init__(self, limit_seconds: float) -> None:
        self.limit_ns = int(limit_seconds * 1e9)
        self.total_ns = 0
        self.started = (_monotonic_ns(), _timer_now())

    def add(self, ns: int) -> None:
        self.total_ns += ns
        if self.total_ns > self.limit_ns:
            problems = _tampering_problems()
            independent = (_monotonic_ns() - self.started[0]) / 1e9
            timer = _timer_now() - self.started[1]
            if not timer >= 0.5 * independent:  # also catches NaN
                problems.append(f"compare's timer advanced {timer:.3g} s while an independent clock "
                                f"advanced {independent:.3g} s")
            if problems:
                raise TamperingDetected(
                    f"the timed calls have run for {self.total_ns / 1e9:.1f} s by an independent "
                    f"clock, far beyond the measurement's budget: {'; '.join(problems)}"
                )
            self.limit_ns *= 2


def _timer_now() -> float:
    """What compare's timer reads now: the clock course_lib.timing currently measures with."""
    try:
        return float(vars(timing)["_perf_counter"]())
    except Exception:  # noqa: BLE001 - a broken timer is evidence too
        return float("nan")


def _honest_limit(estimate: _Estimate, budget: float) -> float:
    # Rounds stop at the budget; calibration and warm-up cost a few 20 ms rounds or a
    # few calls; at least 6 rounds are always run. Twice that, plus slack.
    per_round = max(estimate.baseline_seconds, 0.05) + max(estimate.candidate_seconds, 0.05)
    return 2.0 * (budget + 10 * per_round) + 1.0


def _independently_clocked(
    fn: Callable[..., Any], durations: list[int], guard: _RunawayGuard, wrap_errors: bool
) -> Callable[..., Any]:
    record = durations.append
    add = guard.add
    clock = _monotonic_ns

    def clocked(*args: Any) -> Any:
        start = clock()
        try:
            result = fn(*args)
        except GradingError:
            raise
        except Exception as exc:
            if not wrap_errors:
                raise
            raise GradingError(f"Your function raised {type(exc).__name__} while being timed: {exc}") from exc
        spent = clock() - start
        record(spent)
        add(spent)
        return result

    return clocked


def _cross_check_clock(
    comparison: timing.Comparison, durations_b: list[int], durations_c: list[int], elapsed: float
) -> None:
    """Compare the timer's rounds with an independent clock's reading of the same calls.

    The rounds are the last ``rounds * loops`` calls of each side (warm-up and
    calibration come first), and the timer's window around a round's loop contains the
    independent clock's windows around each of its calls: for honest timing the timer's
    total is at least the independent total and exceeds it only by the loop's own
    bookkeeping, however loaded the machine is (a preemption lands inside both windows
    alike). Comparing the same calls matters: the mean over *all* calls, warm-up and
    calibration included, drifted from the rounds' mean by 1.6x under load, which once
    called honest code tampered.
    """
    timed_total = 0.0
    for side, reported_times, loops, durations in (
        ("the reference", comparison.baseline_times, comparison.loops_baseline, durations_b),
        ("your function", comparison.candidate_times, comparison.loops_candidate, durations_c),
    ):
        calls = len(reported_times) * loops
        if not reported_times or len(durations) < calls:
            raise TamperingDetected(f"the timer reported calls of {side} that were never made: the timer "
                                    "was tampered with")
        reported = math.fsum(reported_times) * loops
        independent = sum(durations[len(durations) - calls:]) / 1e9
        timed_total += reported
        agree = (
            math.isfinite(reported)
            and independent <= reported + _CLOCK_SLACK_PER_CALL * calls + 1e-4
            and reported <= _CLOCK_RATIO_LIMIT * independent + _LOOP_COST_PER_CALL * calls + 1e-3
        )
        if not agree:
            raise TamperingDetected(
                f"the timer measured {_fmt_seconds(reported / calls)} per call of {side}, an "
                f"independent clock (time.monotonic_ns) {_fmt_seconds(independent / calls)} for the "
                f"same {calls} calls: the clock was tampered with"
            )
    if timed_total > 1.05 * elapsed + 0.01:
        raise TamperingDetected(
            f"the timer counted {timed_total:.2f} s of timed calls in {elapsed:.2f} s of "
            f"real time: the clock was tampered with"
        )


# Tolerances of the clock cross-check (see benchmarks/honest_tampering.py for the measured
# distributions). Both clocks read CLOCK_MONOTONIC, so the independent total can exceed
# the timer's only by rounding; the timer's excess is the loop's bookkeeping, which a
# preemption can stretch: 1.5x the calls' own time plus 50 us a call was never reached
# by honest code under two busy competitors.
_CLOCK_SLACK_PER_CALL = 1e-6
_CLOCK_RATIO_LIMIT = 1.5
_LOOP_COST_PER_CALL = 50e-6


def _median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(low, median, high): the median and a distribution-free interval for it.

    The number of values below the true median is Binomial(n, 1/2) whatever the
    noise looks like; the k-th smallest to k-th largest value covers the median
    with probability ``1 - 2 P(Binomial(n, 1/2) < k)``.
    """
    xs = sorted(values)
    n = len(xs)
    tail = (1 - confidence) / 2 * 2**n
    k, cumulative = 1, 0
    for j in range(n):
        cumulative += math.comb(n, j)
        if cumulative > tail:
            break
        k = j + 1
    k = max(1, min(k, (n + 1) // 2))
    return xs[k - 1], statistics.median(xs), xs[n - k]


# While nbgrader autogrades a notebook, the score stored for a speed or parallel cell is
# the verifier's, measured outside the kernel; the kernel's own reading is only compared
# with it (a flag when they differ by a quarter of the points). So the kernel takes a short
# one: a speed cell's correctness checks as always, the ratio read from their own timings;
# a parallel cell's rounds on this share of its budget, never measured again. Each cell is
# timed in full once per grading.
_QUICK_SHARE = 0.25


def _quick() -> bool:
    """Whether these checks run inside a kernel that nbgrader is autograding."""
    return os.environ.get("NBGRADER_EXECUTION") == "autograde"


# A reading whose 95% interval spans more than this share of a cell's points (its two ends
# would be graded that far apart) is too noisy to store: it is measured again, then later in
# the notebook, and if it never settles the student's best reading is stored, flagged.
_UNDECIDED_SHARE = 0.25


@dataclasses.dataclass(frozen=True)
class _Decision:
    """When a measured interval is too wide to grade on.

    A pass/fail check (``passes_at``: the measured ratio that passes) is undecided while its
    interval straddles that ratio; a partial-credit cell while the points its interval's
    two ends would earn differ by more than ``_UNDECIDED_SHARE`` of its points.

    Examples
    --------
    >>> _Decision(full_at=100, zero_at=60, points=4).undecided(50.0, 110.0)
    True
    >>> _Decision(full_at=100, zero_at=60, points=4).undecided(160.0, 200.0)
    False
    """

    passes_at: float | None = None
    full_at: float = 1.0
    zero_at: float = 1.0
    points: float = 0.0
    margin: float = 0.1

    def spread(self, low: float, high: float) -> float:
        """Points between the interval's two ends (0 for a pass/fail check or a bare measurement)."""
        if self.passes_at is not None or not self.points:
            return 0.0
        return (_points_for(high, self.full_at, self.zero_at, self.points, self.margin)
                - _points_for(low, self.full_at, self.zero_at, self.points, self.margin))

    def undecided(self, low: float, high: float) -> bool:
        if self.passes_at is not None:
            return low < self.passes_at <= high
        return self.spread(low, high) > _UNDECIDED_SHARE * self.points + 1e-9


def _points_for(ratio: float, full_at: float, zero_at: float, points: float, margin: float) -> float:
    low, high = zero_at * (1.0 - margin), full_at * (1.0 - margin)
    if not ratio > low:  # also catches NaN
        return 0.0
    share = math.log(ratio / low) / math.log(high / low)
    return float(min(points, round(points * min(1.0, max(0.0, share)), 2)))


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


def _fresh_args(make_args: Callable[[], tuple[Any, ...]]) -> tuple[Any, ...]:
    made = make_args()
    if not isinstance(made, tuple):
        raise TypeError(
            f"make_args must return a tuple of positional arguments, got {type(made).__name__}; "
            "for a single argument return (x,), not x"
        )
    return made


def _call_candidate(candidate: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    try:
        return candidate(*args)
    except GradingError:
        raise
    except Exception as exc:
        raise GradingError(f"Your function raised {type(exc).__name__}: {exc}") from exc


def _scaling_seconds(
    fn: Callable[[Any], Any], make_input: Callable[[int], Any], sizes: list[int], budget: float,
    clocks: list[float],
) -> list[float]:
    """Fastest single call of ``fn`` at each size in CPU seconds, every call on a new input.

    CPU time (``time.process_time``, all threads of the process) rather than wall
    time: with more runnable processes than cores, a call longer than the
    scheduler's time slice gets preempted and a short one often does not, which
    bends wall-clock exponents upwards (a linear function measured 1.5 to 2.0 under
    two busy competitors on 2 cores), while the CPU time of the work stays put.
    The calls take the sizes in turn (small, large, small, large, ...), so a burst
    of load spreads over all sizes instead of bending one, and the fastest call per
    size is the least disturbed (timeit's advice). Each size gets 3 to 15 calls, as
    many as about ``budget`` seconds allow. ``clocks`` accumulates process CPU,
    thread CPU and wall seconds, cross-checked over all calls together.
    """
    first = [_timed_call(fn, make_input(n), clocks) for n in sizes]  # warm-up (and JIT)
    calls = [max(3, min(15, int(budget / max(t, 1e-9)))) for t in first]
    best = [math.inf] * len(sizes)
    for round_ in range(max(calls)):
        for i, n in enumerate(sizes):
            if round_ < calls[i]:
                best[i] = min(best[i], _timed_call(fn, make_input(n), clocks))
    return best


def _timed_call(fn: Callable[[Any], Any], x: Any, clocks: list[float]) -> float:
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: a collection due to earlier garbage is not this call's
    try:
        m0 = _monotonic_ns()
        h0 = _thread_time()
        t0 = _process_time()
        _call_candidate(fn, (x,))
        t1 = _process_time()
        h1 = _thread_time()
        m1 = _monotonic_ns()
    finally:
        if gc_was_enabled:
            gc.enable()
    clocks[0] += t1 - t0
    clocks[1] += h1 - h0
    clocks[2] += (m1 - m0) / 1e9
    return t1 - t0


# ---------------------------------------------------------------------------
# Private helpers: parallel work (parallel_points and its out-of-kernel twin)
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _ParallelSettings:
    workers: int
    full_at: float
    zero_at: float
    points: float
    budget: float
    within: float
    min_concurrency: float
    tolerance: _Tolerance
    margin: float
    min_call_seconds: float
    checks: int


@dataclasses.dataclass(frozen=True)
class _ParallelRound:
    reference: float  # seconds per call on cores of its own (wall less the wait for a core)
    one: float
    many: float
    concurrency: float  # of the parallel call
    working: int  # threads or processes that did the parallel call's work
    waited: float  # share of the parallel call's wall time spent waiting for a core

    def ratio(self, within: float) -> float:
        return min(self.one, within * self.reference) / max(self.many, 1e-12)


@dataclasses.dataclass(frozen=True)
class _ParallelResult:
    ratio: float
    low: float
    high: float
    rounds: int
    reference_seconds: float
    one_seconds: float
    many_seconds: float
    concurrency: float
    working: int
    waited: float
    workers: int
    cores: int
    within: float
    threads: str = ""

    def describe(self) -> str:
        return (
            f"{_fmt_ratio(self.ratio)}x with {self.workers} workers against your own one-worker run, "
            f"95% interval {_fmt_ratio(self.low)}x to {_fmt_ratio(self.high)}x over {self.rounds} rounds; "
            f"per call {_fmt_seconds(self.one_seconds)} on 1 worker, {_fmt_seconds(self.many_seconds)} on "
            f"{self.workers}, the serial reference {_fmt_seconds(self.reference_seconds)} (each less the time "
            f"it waited for a core: {self.waited:.0%} of the parallel calls' wall time); your one-worker "
            f"time counts at most {self.within:g} times the reference's; {_workers_text(self.working)} "
            f"did the parallel work, {self.concurrency:.2f} running or ready to run on average; "
            f"{_cores_text(self.cores)}, thread pools: {self.threads or 'as set'}"
        )


def _cores_text(cores: int | None = None) -> str:
    """How many cores this notebook is graded with, for every speed verdict."""
    cores = _available_cores() if cores is None else cores
    return f"graded with {cores} core{'s' if cores != 1 else ''} (this notebook's CPU affinity)"


def _workers_text(n: int) -> str:
    return f"{n} thread or process" if n == 1 else f"{n} threads or processes"


def _parallel_settings(
    workers: int, full_at: float, zero_at: float, points: float, budget: float, within: float,
    min_concurrency: float, rtol: float, atol: float, margin: float, min_call_seconds: float, checks: int,
) -> _ParallelSettings:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a whole number >= 1, got {workers!r}")
    cores = _available_cores()
    if workers < 2 or workers > cores:  # first: thresholds computed from workers=1 are not checked
        raise UnreliableMeasurement(
            f"Unreliable measurement (a grading configuration problem, not your code): this notebook "
            f"is graded with {cores} core{'s' if cores != 1 else ''} (its CPU affinity), and a parallel "
            f"speed-up with {workers} worker{'s' if workers != 1 else ''} needs from 2 up to that many. "
            f"Instructor: grade with at least 2 cores per notebook (course grade --workers N gives "
            f"each of N notebooks cores // N)."
        )
    for value, name in ((full_at, "full_at"), (zero_at, "zero_at"), (points, "points"), (budget, "budget"),
                        (within, "within"), (min_concurrency, "min_concurrency"),
                        (min_call_seconds, "min_call_seconds")):
        _check_number(value, name, positive=True)
    if not zero_at < full_at:
        raise ValueError(f"zero_at must be below full_at (credit grows with the speed-up), "
                         f"got zero_at={zero_at!r}, full_at={full_at!r}")
    _check_number(margin, "margin")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin is a share of the threshold in [0, 1), e.g. 0.1, got {margin!r}")
    if isinstance(checks, bool) or not isinstance(checks, int) or checks < 2:
        raise ValueError(f"checks must be a whole number of fresh inputs >= 2, got {checks!r}")
    if not _sampling_available():
        raise UnreliableMeasurement(
            "Unreliable measurement: this system does not report per-thread CPU and wait times "
            "(/proc/PID/task/TID/schedstat, Linux), which grading parallel work needs."
        )
    return _ParallelSettings(workers, float(full_at), float(zero_at), float(points), float(budget),
                             float(within), float(min_concurrency), _tolerance(rtol, atol, True),
                             float(margin), float(min_call_seconds), checks)


_PARALLEL_MIN_ROUNDS = 9   # the median of 9 paired ratios has a 96% interval
_PARALLEL_QUICK_ROUNDS = 5  # the kernel's short reading while autograding
_PARALLEL_MAX_ROUNDS = 60
_PARALLEL_WALL_FACTOR = 4.0  # rounds stop at this many times the budget in wall time


def _parallel_rounds(
    one_round: Callable[[int], _ParallelRound], settings: _ParallelSettings, decision: _Decision,
    quick: bool = False,
) -> list[_ParallelRound]:
    """Rounds until the budget is spent (at least 9); twice as many when too close to call.

    ``one_round(i)`` times one call of each side (the order alternating with ``i``).
    Shared by the kernel's measurement and the verifier's. ``quick``: the kernel's short
    reading while autograding (see :data:`_QUICK_SHARE`): at least 5 rounds, a quarter of the
    budget, never measured again.
    """
    rounds: list[_ParallelRound] = []
    spent, started = 0.0, _perf_counter()
    limit = _QUICK_SHARE if quick else 1.0
    least = _PARALLEL_QUICK_ROUNDS if quick else _PARALLEL_MIN_ROUNDS
    while True:
        r = one_round(len(rounds))
        rounds.append(r)
        spent += r.reference + r.one + r.many
        wall = _perf_counter() - started
        if len(rounds) < least:
            continue
        if (spent >= limit * settings.budget or wall >= limit * _PARALLEL_WALL_FACTOR * settings.budget
                or len(rounds) >= limit * _PARALLEL_MAX_ROUNDS):
            if limit != 1.0:  # measured again already, or a short reading in the kernel
                return rounds
            low, _, high = _median_interval([x.ratio(settings.within) for x in rounds])
            if not decision.undecided(low, high):
                return rounds
            limit = 2.0  # too close to call: measure as long again and decide on all rounds


def _parallel_result(rounds: list[_ParallelRound], settings: _ParallelSettings, threads: str) -> _ParallelResult:
    low, ratio, high = _median_interval([r.ratio(settings.within) for r in rounds])
    return _ParallelResult(
        ratio=ratio, low=low, high=high, rounds=len(rounds),
        reference_seconds=statistics.median(r.reference for r in rounds),
        one_seconds=statistics.median(r.one for r in rounds),
        many_seconds=statistics.median(r.many for r in rounds),
        concurrency=statistics.median(r.concurrency for r in rounds),
        working=int(statistics.median_low(r.working for r in rounds)),
        waited=statistics.median(r.waited for r in rounds),
        workers=settings.workers, cores=_available_cores(), within=settings.within, threads=threads,
    )


def _parallel_points_for(result: _ParallelResult, settings: _ParallelSettings) -> float:
    """The verdict on a measurement: no concurrency fails; else the log-scale credit."""
    if not result.concurrency >= settings.min_concurrency:
        raise GradingError(
            f"Not parallel: with {settings.workers} workers {_workers_text(result.working)} did the "
            f"work, {result.concurrency:.2f} of them running or ready to run on average, and at least "
            f"{settings.min_concurrency:g} are needed: the tasks did not run at the same time, so there is "
            f"no parallel speed-up to grade ({result.describe()})."
        )
    return _points_for(result.ratio, settings.full_at, settings.zero_at, settings.points, settings.margin)


def _require_prange(loops: int | None, name: str) -> None:
    """No point without Numba's word that a ``prange`` loop of ``name`` runs in parallel."""
    if loops:
        return
    what = ("is not a function compiled by Numba" if loops is None else
            "has no prange loop that Numba made parallel in any of its compiled versions")
    raise GradingError(
        f"Not parallel: {name} {what} (Numba's parallel diagnostics). Compile it with "
        f"@njit(parallel=True) and write its outer loop as a prange.")


class _NoParallelPoints(Exception):
    """No parallel point can be earned (the parallel run is slower than the bound allows)."""


def _raise_if_hopeless(t_reference: float, t_many: float, settings: _ParallelSettings) -> None:
    """Stop before timing when even the best case earns nothing: the one-worker time counts
    at most ``within`` times the reference's, so the speed-up is at most that over the
    parallel time (a pure-Python version would otherwise be timed for minutes). Judged on
    one untimed first call, so only when even twice its speed would earn nothing."""
    best = settings.within * t_reference / max(t_many, 1e-12)
    needed = settings.zero_at * (1.0 - settings.margin)
    if 2.0 * best < needed:
        raise _NoParallelPoints(
            f"no parallel point: with {settings.workers} workers your estimate took {_fmt_seconds(t_many)} "
            f"per call and the serial reference {_fmt_seconds(t_reference)}; your one-worker time counts "
            f"at most {settings.within:g} times the reference's, so the parallel speed-up is at most "
            f"{_fmt_ratio(best)}x, below the {_fmt_ratio(needed)}x that earns a first point")


def _check_identical(many: Any, one: Any, workers: int, k: int) -> None:
    problem = _problem(many, one, _EXACT)
    if problem is not None:
        raise GradingError(
            f"With {workers} workers the result differs from the one with 1 worker on fresh input {k} "
            f"(it must be identical, whatever the number of workers): {problem}")


def _check_parallel_result(result: Any, expected: Any, settings: _ParallelSettings, what: str) -> None:
    problem = _problem(result, expected, settings.tolerance)
    if problem is not None:
        raise GradingError(f"Wrong result {what}: {problem}")


def _measure_parallel(
    candidate: Callable[..., Any], reference: Callable[..., Any], make_args: Callable[[], tuple[Any, ...]],
    settings: _ParallelSettings, decision: _Decision,
) -> _ParallelResult:
    for obj, name in ((candidate, "candidate"), (reference, "reference"), (make_args, "make_args")):
        if not callable(obj):
            raise TypeError(f"{name} must be a function, got {type(obj).__name__}")
    _raise_if_tampered()
    workers = settings.workers
    with _limit_threads(workers), _ExternalSampler() as sampler:
        pools = _thread_settings()

        def timed(fn: Callable[..., Any], args: tuple[Any, ...], is_candidate: bool) -> tuple[float, Any, Any]:
            """(seconds on cores of its own, result, usage) of one call; garbage collection off."""
            enabled = gc.isenabled()
            gc.disable()
            sampler.start()
            t0 = _perf_counter()
            try:
                result = _call_candidate(fn, args) if is_candidate else fn(*args)
            finally:
                used = sampler.stop(max(_perf_counter() - t0, 1e-9))
                if enabled:
                    gc.enable()
            return used.unloaded, result, used

        # 1. Correctness, and a first estimate of each side's time. The parallel run goes
        # before the serial one: when even it is too slow to earn a point, the (slower)
        # serial run is not waited for.
        estimates: list[tuple[float, float, float]] = []
        signature: tuple[Any, ...] = ()
        for k in range(1, settings.checks + 1):
            args = _fresh_args(make_args)
            t_ref, expected, _ = timed(reference, _deepcopy(args), False)
            t_many, many, _ = timed(candidate, (*_deepcopy(args), workers), True)
            _check_parallel_result(many, expected, settings,
                                   f"with {workers} workers on fresh input {k} of {settings.checks}")
            if k == 1:
                _raise_if_hopeless(t_ref, t_many, settings)
            t_one, one, _ = timed(candidate, (*_deepcopy(args), 1), True)
            _check_parallel_result(one, expected, settings, f"with 1 worker on fresh input {k} of {settings.checks}")
            _check_identical(many, one, workers, k)
            estimates.append((t_ref, t_one, t_many))
            signature = _signature(expected)
        one_estimate = min(t for _, t, _ in estimates[1:])
        at_threshold = one_estimate / settings.full_at
        if at_threshold < settings.min_call_seconds:
            raise UnreliableMeasurement(
                f"Unreliable measurement (a grading configuration problem, not your code): one worker takes "
                f"{_fmt_seconds(one_estimate)} per call, so a parallel run at {_fmt_ratio(settings.full_at)}x "
                f"would take {_fmt_seconds(at_threshold)}, too short for its threads to be sampled (at least "
                f"{_fmt_seconds(settings.min_call_seconds)}). Instructor: use larger inputs in make_args.")

        # 2. Interleaved rounds: the reference and one worker on the same input, the parallel
        # run on another (so that no result can be reused), every result checked.
        def one_round(i: int) -> _ParallelRound:
            shared, other = _fresh_args(make_args), _fresh_args(make_args)
            own_copy, pristine = _deepcopy(shared), _deepcopy(other)  # the reference's, before any call
            sides = ("reference", "one", "many") if i % 2 == 0 else ("many", "one", "reference")
            seconds, results, usage = {}, {}, {}
            for side in sides:
                if side == "reference":
                    seconds[side], results[side], usage[side] = timed(reference, own_copy, False)
                elif side == "one":
                    seconds[side], results[side], usage[side] = timed(candidate, (*shared, 1), True)
                else:
                    seconds[side], results[side], usage[side] = timed(candidate, (*other, workers), True)
            for side in ("one", "many"):
                if settings.tolerance.check_dtype and _signature(results[side]) != signature:
                    raise GradingError(f"Wrong result in timed round {i + 1}: expected "
                                       f"{_describe_signature(signature)}, got "
                                       f"{_describe_signature(_signature(results[side]))}")
            _check_parallel_result(results["one"], results["reference"], settings,
                                   f"with 1 worker in timed round {i + 1}")
            _check_parallel_result(results["many"], reference(*pristine), settings,
                                   f"with {workers} workers in timed round {i + 1}")
            many = usage["many"]
            return _ParallelRound(seconds["reference"], seconds["one"], seconds["many"], many.concurrency,
                                  many.workers, many.waited / many.wall if many.wall > 0 else 0.0)

        rounds = _parallel_rounds(one_round, settings, decision, quick=_quick())
    _raise_if_tampered()
    return _parallel_result(rounds, settings, pools)


# ---------------------------------------------------------------------------
# Private helpers: tampering, output, input checks, formatting
# ---------------------------------------------------------------------------


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
    for module in (timing, complexity):
        if vars(module).get("_perf_counter") is not _perf_counter:
            problems.append(f"{module.__name__} measures with a clock other than time.perf_counter")
    return problems


def _is_builtin(fn: Any, name: str, module: str) -> bool:
    owner = getattr(fn, "__self__", None)
    return (
        type(fn) is types.BuiltinFunctionType
        and fn.__name__ == name
        and type(owner) is types.ModuleType
        and owner.__name__ == module
    )


@contextlib.contextmanager
def _grading_session() -> Any:
    """Silence warnings (Numba's included) and capture stray output while grading.

    nbgrader scores any stderr output as a failed cell, so nothing may reach it
    while a check passes. What was captured is attached to the message when a
    check fails, where it may explain the failure.
    """
    buffer = io.StringIO()
    try:
        with warnings.catch_warnings():
            # "ignore" for every category covers NumbaWarning, NumbaPerformanceWarning
            # and NumbaDeprecationWarning, and needs no import of numba.
            warnings.simplefilter("ignore")
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
                yield buffer
    except GradingError as exc:
        output = buffer.getvalue()
        if output.strip():
            shown = output if len(output) <= _OUTPUT_SHOWN else "..." + output[-_OUTPUT_SHOWN:]
            exc.args = (f"{exc.args[0]}\n\nOutput printed while grading:\n{shown}",) + exc.args[1:]
        raise


def _tolerance(rtol: float, atol: float, check_dtype: bool) -> _Tolerance:
    _check_number(rtol, "rtol")
    _check_number(atol, "atol")
    if rtol < 0 or atol < 0:
        raise ValueError(f"tolerances must be >= 0, got rtol={rtol!r}, atol={atol!r}")
    if not isinstance(check_dtype, bool):
        raise TypeError(f"check_dtype must be True or False, got {check_dtype!r}")
    return _Tolerance(float(rtol), float(atol), check_dtype)


def _check_number(value: Any, name: str, positive: bool = False, finite: bool = True) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if math.isnan(value) or (finite and math.isinf(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")


def _check_sizes(sizes: Sequence[int]) -> list[int]:
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
        raise TypeError(f"sizes must be a sequence of ints such as [1_000, 2_000, 4_000], got {sizes!r}")
    sizes = list(sizes)
    if len(sizes) < 2:
        raise ValueError(f"fitting an exponent needs at least two sizes, got {sizes!r}")
    for n in sizes:
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ValueError(f"sizes must be positive whole numbers, got {n!r}")
    if any(b <= a for a, b in zip(sizes, sizes[1:])):
        raise ValueError(f"sizes must be strictly increasing, got {sizes!r}")
    return sizes


_BYTE_UNITS = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def _parse_bytes(limit: int | str) -> int:
    if isinstance(limit, bool):
        raise TypeError("limit must be a number of bytes or a string such as '50 MB', got a bool")
    if isinstance(limit, int):
        value = float(limit)
    elif isinstance(limit, str):
        text = limit.strip().replace("_", "")
        number = text.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ").strip()
        unit = text[len(number):].strip().lower() or "b"
        try:
            value = float(number) * _BYTE_UNITS[unit]
        except (ValueError, KeyError):
            raise ValueError(
                f"limit must look like '50 MB' (units B, kB, MB, GB or KiB, MiB, GiB), got {limit!r}"
            ) from None
    else:
        raise TypeError(f"limit must be a number of bytes or a string such as '50 MB', got {type(limit).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"limit must be a positive amount of memory, got {limit!r}")
    return int(value)


def _fmt_seconds(seconds: float) -> str:
    if not math.isfinite(seconds):
        return f"{seconds} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _fmt_ratio(ratio: float) -> str:
    return f"{ratio:.3g}" if math.isfinite(ratio) else str(ratio)


# ---------------------------------------------------------------------------
# Private helpers: partial credit for memory and growth (log_points and its users)
# ---------------------------------------------------------------------------


def _check_points_thresholds(full_at: Any, zero_at: Any, points: Any, increasing: bool | None) -> None:
    """Positive, different thresholds and points; ``increasing``: full_at above zero_at (None: either)."""
    _check_number(full_at, "full_at", positive=True)
    _check_number(zero_at, "zero_at", positive=True)
    _check_number(points, "points", positive=True)
    if full_at == zero_at:
        raise ValueError(f"full_at and zero_at must differ, got {full_at!r} for both")
    if increasing is True and not zero_at < full_at:
        raise ValueError(f"zero_at must be below full_at (credit grows with the measurement), "
                         f"got zero_at={zero_at!r}, full_at={full_at!r}")
    if increasing is False and not full_at < zero_at:
        raise ValueError(f"full_at must be below zero_at (credit shrinks as the measurement grows), "
                         f"got full_at={full_at!r}, zero_at={zero_at!r}")


def _log_share_points(value: float, full_at: float, zero_at: float, points: float) -> float:
    if not value > 0:  # also catches NaN; a zero peak is the least memory there is
        return float(points) if value == 0 and full_at < zero_at else 0.0
    share = math.log(value / zero_at) / math.log(full_at / zero_at)
    return float(min(points, round(points * min(1.0, max(0.0, share)), 2)))


def _memory_thresholds(full_at: int | str, zero_at: int | str, points: float) -> tuple[float, float]:
    full, zero = float(_parse_bytes(full_at)), float(_parse_bytes(zero_at))
    _check_points_thresholds(full, zero, points, increasing=False)
    return full, zero


def _traced_peak(fn: Callable[..., Any], args: tuple, kwargs: dict) -> int:
    """The peak traced memory of one call, cross-checked against tracemalloc's own counter."""
    _raise_if_tampered()
    started = not _tm_is_tracing()
    if started:
        _tm_start()
    try:
        before = _tm_get()[0]
        try:
            measured = _peak(fn, *args, **kwargs)
        except GradingError:
            raise
        except Exception as exc:
            raise GradingError(f"Your function raised {type(exc).__name__}: {exc}") from exc
        high = _tm_get()[1]
    finally:
        if started and _tm_is_tracing():
            _tm_stop()
    _raise_if_tampered()
    independent = max(0, high - before)
    if abs(measured.peak - independent) > 0.1 * independent + 1_000_000:
        raise TamperingDetected(
            f"the measured peak ({_fmt_bytes(measured.peak)}) disagrees with tracemalloc's "
            f"own counter ({_fmt_bytes(independent)}): the memory measurement was tampered with"
        )
    return int(measured.peak)


def _fitted_exponent(fn: Callable[[Any], Any], make_input: Callable[[int], Any], sizes: list[int], budget: float,
                     min_call_seconds: float) -> tuple[Any, pd.DataFrame]:
    """(fit, doubling table) of ``fn``'s CPU time per call, cross-checked against independent clocks."""
    _raise_if_tampered()
    first, second = make_input(sizes[0]), make_input(sizes[0])
    if _same_values(first, second):
        raise ValueError(
            "make_input(n) returned equal inputs on two calls: a submission that "
            "memoises on its input's value would look O(1). Draw random inputs, e.g. "
            "lambda n: np.random.default_rng().random(n)"
        )
    del first, second
    clocks = [0.0, 0.0, 0.0]  # CPU, this thread's CPU and wall seconds of all timed calls
    seconds = _scaling_seconds(fn, make_input, sizes, budget, clocks)
    cpu, thread, wall = clocks
    # A thread's CPU time is part of the process's, which cannot outrun the wall
    # clock on every core at once.
    if not (thread - 0.02 <= cpu <= wall * _CPUS + 0.02):
        raise TamperingDetected(
            f"the CPU timer measured {_fmt_seconds(cpu)} of calls that took "
            f"{_fmt_seconds(thread)} of thread CPU time and {_fmt_seconds(wall)} of wall "
            f"time by independent clocks: the clock was tampered with"
        )
    table = pd.DataFrame({"n": sizes, "seconds": seconds})
    table["ratio"] = table["seconds"] / table["seconds"].shift(1)
    if seconds[-1] < min_call_seconds:
        raise UnreliableMeasurement(
            f"Unreliable measurement (a grading configuration problem, not your code): "
            f"the largest size n={sizes[-1]:,} takes only {_fmt_seconds(seconds[-1])} per call, "
            f"and at that scale call overhead, not the algorithm, sets the exponent. "
            f"Instructor: use larger sizes, so that the largest call takes at least "
            f"{_fmt_seconds(min_call_seconds)}.\n{table.to_string(index=False)}"
        )
    _raise_if_tampered()
    return _exponent(table), table


def _exponent_points(slope: float, full_at: float, zero_at: float, points: float, margin: float) -> float:
    low, high = full_at + margin, zero_at + margin
    if not slope < high:  # also catches NaN
        return 0.0
    share = (high - slope) / (high - low)
    return float(min(points, round(points * min(1.0, max(0.0, share)), 2)))


# ---------------------------------------------------------------------------
# One warm call, as the grader reads it (week 6: compile time against run time)
# ---------------------------------------------------------------------------


def warm_call_seconds(fn: Callable[..., Any], args: Sequence[Any], calls: int = 5) -> float:
    """Seconds of one warm call of ``fn(*args)``, read by the grader: the median of ``calls``.

    For a test that checks a time the student reported (a Numba kernel's run time after it
    has compiled) against the grader's own reading of the same function on the same
    input. One untimed call comes first (for a Numba function it compiles, for these
    argument types), then ``calls`` timed calls on the same arguments, back to back, with
    garbage collection off and BLAS, OpenMP and Numba pools at one thread, as
    :func:`speedup_points` times. Outside the kernel the verifier replaces this function
    (:mod:`course_lib.grader.verification`): each call is then timed as a batch of one in
    the student worker, its inputs staged before the clock starts.

    Parameters
    ----------
    fn : callable
        The function to time.
    args : sequence
        Its positional arguments, the same for every call.
    calls : int, default 5
        Timed calls (at least 1); the median is returned, so one call slowed by a busy
        neighbour does not decide it.

    Returns
    -------
    float
        Seconds per call (median).

    Examples
    --------
    >>> seconds = warm_call_seconds(sorted, (list(range(1000)),))
    >>> 0 < seconds < 1
    True
    """
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
        raise ValueError(f"calls must be a whole number of at least 1, got {calls!r}")
    args = tuple(args)
    seconds = []
    with _grading_session(), _limit_threads(1):
        fn(*args)  # untimed: a Numba function compiles here
        enabled = gc.isenabled()
        gc.disable()  # as in compare: a collection is not the function's time
        try:
            for _ in range(calls):
                t0 = _perf_counter()
                fn(*args)
                seconds.append(_perf_counter() - t0)
        finally:
            if enabled:
                gc.enable()
    return float(statistics.median(seconds))


def first_call_seconds(fn: Callable[..., Any], args: Sequence[Any], calls: int = 5) -> tuple[float, float]:
    """(first call, warm call) of ``fn(*args)`` in seconds, read by the grader in a fresh process.

    For a test that checks a first-call time the student reported (a Numba function that
    compiles on its first call, or one compiled eagerly when it was defined, whose first
    call is as quick as any) against the grader's reading of *the same code*: a new
    process runs the notebook's cells up to and including the one that defines ``fn``,
    then times one call (the first), makes one more untimed, and returns the median of
    ``calls`` further calls as the warm call, pools at one thread. In the kernel the new
    process is built from the kernel's input history (see :mod:`course_lib._fresh_call`);
    outside it, the verifier starts a fresh student worker
    (:mod:`course_lib.grader.verification`), whose reading is the one stored.

    Parameters
    ----------
    fn : callable
        The student's function, defined in a notebook cell.
    args : sequence
        Its positional arguments, the same for every call.
    calls : int, default 5
        Warm calls timed (at least 1).

    Returns
    -------
    tuple of float
        ``(first, warm)``: the first call's seconds, and the median warm call's.

    Examples
    --------
    Outside a notebook there is no history to replay: both readings are taken here.

    >>> first, warm = first_call_seconds(sorted, (list(range(1000)),))
    >>> 0 < warm < 1 and 0 < first < 1
    True
    """
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
        raise ValueError(f"calls must be a whole number of at least 1, got {calls!r}")
    try:
        return _fresh_call_seconds(fn, tuple(args), calls)
    except RuntimeError as exc:
        raise GradingError(f"Your function's first call could not be timed in a fresh process: {exc}") from None
