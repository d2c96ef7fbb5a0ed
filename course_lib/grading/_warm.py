"""One warm call, and a first call in a fresh process, as the grader reads them.

For week 6's tests of compile time against run time: a student reports how long a Numba
function's first and warm calls took, and the grader reads the same function itself.
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from course_lib._fresh_call import fresh_call_seconds as _fresh_call_seconds
from course_lib.grading._checks import _grading_session
from course_lib.grading._errors import GradingError
from course_lib.grading._state import _limit_threads, _perf_counter

__all__ = ["warm_call_seconds", "first_call_seconds"]


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

