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
student's kernel can in principle do anything (rebind the globals of this package's
own modules, patch pandas internals or builtins, read the hidden tests from memory, or
exit the kernel). ``course grade`` therefore grades these cells again outside the kernel
(:mod:`course_lib.grader.verification`), where none of that reaches the measurement.

Where the code is
-----------------
This module gathers the public names, and each concern has a private module:
:mod:`~course_lib.grading._state` (the instruments captured at import, and the tampering
check), :mod:`~course_lib.grading._values` (:func:`assert_same` and value comparison),
:mod:`~course_lib.grading._speed` (speed-ups, the clock cross-check, the interval and
decision rules), :mod:`~course_lib.grading._memory` (peak memory and growth, with
:func:`log_points`), :mod:`~course_lib.grading._parallel` (:func:`parallel_points`),
:mod:`~course_lib.grading._warm` (warm and first calls), :mod:`~course_lib.grading._checks`
(output capture, argument checks, formatting) and :mod:`~course_lib.grading._errors` (the
exceptions). Grade cells import from ``course_lib.grading`` itself, never from those
modules: outside the kernel the verifier replaces the measuring helpers here, on this
module, and a hidden test that imported one from its own module would measure in the
verifier's process instead of the student's worker.

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

from course_lib.grading._errors import GradingError, TamperingDetected, UnreliableMeasurement
from course_lib.grading._memory import (
    assert_peak_memory_below, assert_scaling, log_points, measured_exponent, measured_peak, peak_memory_points,
    scaling_points,
)
from course_lib.grading._parallel import parallel_points
from course_lib.grading._speed import assert_speedup, measured_speedup, speedup_points
from course_lib.grading._values import assert_same
from course_lib.grading._warm import first_call_seconds, warm_call_seconds
from course_lib.grading import _parallel, _speed, _state, _warm

# The modules that time with the captured clock, checked by every measurement (see _state).
_state._watch_clock_readers(_speed, _parallel, _warm)

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
