"""Memory: what an array or a table costs, and the peak a piece of code reaches.

Two kinds of answer:

* *Size before you allocate*: :func:`array_nbytes` computes what an array of a given
  shape and dtype will take, without creating it, so you can ask "will 50 000 x 50 000
  float64 fit?" (20 GB: no) before the machine starts swapping.
* *Peak while it runs*: :func:`peak` and :func:`track_peak` measure the high-water mark
  of memory traced by :mod:`tracemalloc` while your code runs. Peak, not final, memory
  is what decides whether a job fits: a temporary that is freed before the function
  returns still had to fit.

What tracemalloc sees, and what it does not
-------------------------------------------
It sees every allocation made through Python's allocators (every Python object) and
NumPy's array buffers (NumPy reports them to tracemalloc in its own domain). It does
*not* see memory that C, C++ or Fortran libraries get from the operating system
themselves: some BLAS and LAPACK work buffers, Arrow memory pools (pyarrow-backed
pandas columns), Numba's or a GPU library's own pools, GPU memory, memory-mapped files
(``np.memmap``, ``mmap``), and memory in other processes (worker pools). It also counts
requested bytes, not the resident memory the operating system reports, which includes
allocator overhead and fragmentation. When those matter, watch the process's resident
set size as well.
"""

from __future__ import annotations

import math
import threading
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
import pandas as pd

from course_lib.timing import _perf_counter

__all__ = [
    "array_nbytes",
    "frame_memory",
    "peak",
    "track_peak",
    "fmt_bytes",
    "PeakResult",
    "PeakTracker",
]


def array_nbytes(shape: int | Sequence[int], dtype: Any) -> int:
    """Bytes that a NumPy array of ``shape`` and ``dtype`` needs, without allocating it.

    Equal to ``np.empty(shape, dtype).nbytes`` whenever that array could be made, and
    computed with Python integers, so it also answers for arrays far too big to make.
    For ``dtype=object`` it counts only the pointers: the objects pointed to are extra.

    Parameters
    ----------
    shape : int or sequence of int
        Array shape; an int ``n`` means ``(n,)``. Dimensions must be >= 0.
    dtype : dtype-like
        Anything :class:`numpy.dtype` accepts: ``"float64"``, ``np.int32``, ``"U10"``...

    Examples
    --------
    >>> array_nbytes((10_000, 1_000), "float64")
    80000000
    >>> fmt_bytes(array_nbytes((50_000, 50_000), "float64"))  # think before np.zeros
    '20.0 GB'
    >>> array_nbytes(1_000, "float32")
    4000
    """
    dims = _check_shape(shape)
    itemsize = _check_dtype(dtype).itemsize
    return math.prod(dims) * itemsize


def frame_memory(df: pd.DataFrame) -> pd.Series:
    """Deep memory of a DataFrame: bytes per column, the Index, and a ``"total"`` entry.

    "Deep" counts what the values really take, including the characters of every string
    in text columns (``df.memory_usage(deep=True)``), which a shallow count misses.
    How much a text column takes depends on how pandas stores it (Python string objects
    or an Arrow buffer); measure it rather than guess. A ``category`` column stores each
    distinct value once plus small integer codes, which is far smaller when values
    repeat.

    Parameters
    ----------
    df : pandas.DataFrame

    Returns
    -------
    pandas.Series
        Named ``"bytes"``: ``"Index"`` first, then one entry per column in order, then
        ``"total"``, their sum.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> df = pd.DataFrame({"x": np.zeros(1_000), "n": np.arange(1_000, dtype="int32")})
    >>> frame_memory(df).drop("Index").to_dict()
    {'x': 8000, 'n': 4000, 'total': 12132}
    """
    if not isinstance(df, pd.DataFrame):
        hint = " (for a Series use series.memory_usage(deep=True))" if isinstance(df, pd.Series) else ""
        raise TypeError(f"frame_memory needs a pandas DataFrame, got {type(df).__name__}{hint}")
    for clash in ("total", "Index"):
        if clash in df.columns:
            raise ValueError(
                f"df has a column named {clash!r}, which clashes with the {clash!r} entry of "
                f"the result; rename it first, e.g. df.rename(columns={{{clash!r}: "
                f"{clash + '_'!r}}})"
            )
    usage = df.memory_usage(deep=True, index=True).astype("int64")
    total = pd.Series({"total": int(usage.sum())}, dtype="int64")
    result = pd.concat([usage, total])
    result.name = "bytes"
    return result


@dataclass(frozen=True, repr=False)
class PeakResult:
    """What :func:`peak` measured.

    Attributes
    ----------
    result : object
        What the function returned.
    peak : int
        Highest traced memory during the call, in bytes, above what was traced when
        the call began.
    seconds : float
        Wall time of the call. Tracing slows allocation-heavy code down, often by a
        lot, so do not use this as a benchmark; use ``timing.bench`` for that.
    """

    result: Any
    peak: int
    seconds: float

    def __repr__(self) -> str:
        # Not the result itself: it may be an 80 MB array.
        return (
            f"PeakResult(peak={fmt_bytes(self.peak)}, seconds={self.seconds:.3g}, "
            f"result=<{type(self.result).__name__}>)"
        )


class PeakTracker:
    """Yielded by :func:`track_peak`; ``.peak`` (bytes) is set when the block ends.

    ``.peak`` is ``None`` while the block is still running.
    """

    def __init__(self) -> None:
        self.peak: int | None = None
        self._baseline = 0
        self._high = 0
        self._started_tracing = False

    def __repr__(self) -> str:
        shown = "running" if self.peak is None else fmt_bytes(self.peak)
        return f"PeakTracker(peak={shown})"


def peak(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> PeakResult:
    """Call ``fn(*args, **kwargs)`` and measure the peak memory it traced.

    The peak is the highest traced memory during the call minus the traced memory when
    it began: the extra room the call needed at its worst moment, including what it
    returns. See the module docstring for what tracemalloc cannot see (memory of C
    libraries with their own allocators, memory-mapped files, other processes).

    Examples
    --------
    >>> import numpy as np
    >>> measured = peak(np.ones, (1_000, 1_000))  # 8 MB of float64
    >>> 8_000_000 <= measured.peak < 8_100_000
    True
    >>> measured.result.shape
    (1000, 1000)
    """
    if not callable(fn):
        raise TypeError(f"peak needs a function to call, got {type(fn).__name__}")
    with track_peak() as tracker:
        start = _perf_counter()
        result = fn(*args, **kwargs)
        seconds = _perf_counter() - start
    return PeakResult(result=result, peak=tracker.peak, seconds=seconds)


@contextmanager
def track_peak() -> Iterator[PeakTracker]:
    """Measure the peak traced memory of a ``with`` block.

    Starts :mod:`tracemalloc` if it is not tracing yet (and stops it again at the end),
    and leaves it running if it already was. Blocks may be nested: each one reports its
    own peak, and an outer block's peak includes what its inner blocks reached. Because
    the peak is measured with ``tracemalloc.reset_peak()``, code that reads
    ``tracemalloc.get_traced_memory()`` itself around this block will see its own peak
    reset.

    Yields
    ------
    PeakTracker
        Its ``.peak`` (bytes above the traced memory at the start) is set on exit.

    Examples
    --------
    >>> import numpy as np
    >>> with track_peak() as tracked:
    ...     scratch = np.ones(1_000_000)  # 8 MB, freed before the block ends
    ...     del scratch
    >>> 8_000_000 <= tracked.peak < 8_100_000
    True
    """
    tracker = PeakTracker()
    with _lock:
        if not tracemalloc.is_tracing():
            tracemalloc.start()
            tracker._started_tracing = True
        # Before resetting the shared peak, credit it to the blocks already running,
        # so an outer block still counts what happened before this one began.
        _fold_peak_into_active()
        tracemalloc.reset_peak()
        tracker._baseline = tracker._high = tracemalloc.get_traced_memory()[0]
        _active.append(tracker)
    stopped_inside = False
    try:
        yield tracker
    finally:
        with _lock:
            stopped_inside = not tracemalloc.is_tracing()
            if not stopped_inside:
                _fold_peak_into_active()
            _active.remove(tracker)
            tracker.peak = max(0, tracker._high - tracker._baseline)
            if tracker._started_tracing:
                if _active:
                    # Blocks that are not nested (threads) can end out of order: the
                    # one still running now owns stopping tracemalloc.
                    _active[-1]._started_tracing = True
                elif tracemalloc.is_tracing():
                    tracemalloc.stop()
    if stopped_inside:
        tracker.peak = None
        raise RuntimeError(
            "tracemalloc was stopped inside a track_peak() block, so its peak is unknown"
        )


def fmt_bytes(n: float) -> str:
    """Bytes as text with decimal (SI) units: B, kB, MB, GB, TB, PB.

    Decimal, as disk and memory vendors and ``array_nbytes`` estimates are usually
    quoted: 1 kB = 1000 B, 1 MB = 1000 kB.

    Examples
    --------
    >>> fmt_bytes(80_000_000)
    '80.0 MB'
    >>> fmt_bytes(512)
    '512 B'
    >>> fmt_bytes(1_536)
    '1.5 kB'
    >>> fmt_bytes(999_999)  # rounds up into the next unit, not "1000.0 kB"
    '1.0 MB'
    >>> fmt_bytes(-2_000_000_000)
    '-2.0 GB'
    """
    if isinstance(n, bool) or not isinstance(n, Real):
        raise TypeError(f"fmt_bytes needs a number of bytes, got {type(n).__name__} {n!r}")
    if not math.isfinite(n):
        raise ValueError(f"fmt_bytes needs a finite number of bytes, got {n!r}")
    sign = "-" if n < 0 else ""
    size = abs(float(n))
    text = f"{size:.0f}"
    if float(text) < 1000:
        return f"{sign}{text} B"
    for power, unit in enumerate(_UNITS[1:], start=1):
        text = f"{size / 1000**power:.1f}"
        if float(text) < 1000 or unit == _UNITS[-1]:
            return f"{sign}{text} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")

# tracemalloc's peak is one process-wide counter; these let nested or concurrent
# track_peak() blocks share it without losing each other's peaks.
_lock = threading.Lock()
_active: list[PeakTracker] = []


def _fold_peak_into_active() -> None:
    high = tracemalloc.get_traced_memory()[1]
    for tracker in _active:
        tracker._high = max(tracker._high, high)


def _check_shape(shape: Any) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, Integral) and not isinstance(shape, bool) else shape
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence | np.ndarray):
        raise TypeError(f"shape must be an int or a sequence of ints, e.g. (1000, 3), got {shape!r}")
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, Integral):
            raise TypeError(
                f"shape entries must be whole numbers, got {d!r} ({type(d).__name__}) in {shape!r}"
            )
        if d < 0:
            raise ValueError(f"shape {tuple(dims)!r} has a negative dimension {d}; sizes are >= 0")
        out.append(int(d))
    return tuple(out)


def _check_dtype(dtype: Any) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(
            f"dtype {dtype!r} is not a NumPy dtype; try 'float64', 'float32', 'int64', "
            "'uint8', 'bool' or 'U10'"
        ) from None
    if dt.itemsize == 0 and dt.kind in "SUV":
        # np.empty would quietly pick one character; an estimate needs the real length.
        raise ValueError(
            f"dtype {dtype!r} has no length, so its size is unknown: give one, "
            f"e.g. '{dt.kind}10' for up to 10 characters"
        )
    return dt
