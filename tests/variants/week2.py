"""Week 2 submissions for the grading proof (tests/test_assignments.py).

The speed points follow the course's rule for alternative answers: the technique the
notebook teaches earns all of them, a loop that is merely tidier earns little or nothing,
and anything in between earns what its measured speed-up earns on the log scale between the
cell's thresholds (here both points from 15x, none at 2x or less). The expected ranges below
come from in-process measurements (``timing.compare``, one thread, 80,000 fresh seconds,
December 2026, the 2-core course machine shared with other jobs) and are wide enough for a
2-core grader with one busy neighbour.

``slow``: every answer right, but ``peak_fast`` puts NumPy inside the loop instead of the
loop inside NumPy: one small ``max`` call per window, correct and no faster than
``peak_slow`` (1.0x): all the correctness points, none of the speed points.

``wrong``: a vectorised ``peak_fast`` that drops the last window: fast, but its result is
one element short, so it loses the correctness points of Parts 1 and 4 and the speed points.

``deque``: the textbook O(n) monotonic deque, a better algorithm still run one Python step
per second of the log: 5.0x-5.4x measured, about half the speed points (0.5 to 1.5 of 2).

``sliding_window_view``: ``sliding_window_view(counts, window).max(axis=1)``, which the
notebook's collapsed hint names: 29x-30x measured, all the points.

``invented_readings``: every answer the reference's, but Part 2's thirty readings are typed
in (about 2 ms each, the size of a ``peak_fast`` call) instead of measured: they have the
right shape, type and sign and ``SPREAD`` is computed from them, so the visible test passes,
but the grader's own readings of ``peak_slow`` on logs of 20,000 seconds took 19-37 ms
(medians, December 2026, load average 3-5), about ten times longer: the point for measured
readings (2 points) is lost, and only that.

The recipe the notebook no longer gives, and the give-aways it no longer makes, each with
the submission that would have profited from it:

``no_agreement_check``: ``side_by_side`` that hands everything to ``timing.compare`` and
never compares the two versions' results: the hidden test whose ``fast`` is right on its
first call only is not caught, so that point (1) is lost, and only that.

``one_input``: ``side_by_side`` that makes one argument tuple, checks the two versions agree
on it, and times every call on copies of it: the test of fresh arguments for every call and
the test of a ``fast`` right on its first call only both fail (2 points lost).

``short_calls``: Part 4 measured on logs of 20,000 seconds, where a call of ``peak_fast``
took 0.31 ms (load average near 9): ``Comparison.warning`` is set, so the 2 points for the
report checked against the grader's comparison are lost, and only those.

``form_only``: both questions answered from the form of the options alone (every option
without an absolute word for the select-all question, the longest option for the other;
worked out from the solution when loaded, by week 1's variants' ``form_only_quiz``): 0 or 1
of the 2 quiz points.
"""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_variants_week1_form", Path(__file__).with_name("week1.py"))
_week1 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_week1)

SLOW_PEAK = '''
def peak_fast(counts, window=WINDOW):
    """The same peaks as ``peak_slow``, with the loop over positions inside NumPy."""
    # NumPy inside the loop, but still one Python step (and one small NumPy call) per window
    return np.array([counts[i:i + window].max() for i in range(len(counts) - window + 1)],
                    dtype=np.int64)
'''

WRONG_PEAK = '''
def peak_fast(counts, window=WINDOW):
    """The same peaks as ``peak_slow``, with the loop over positions inside NumPy."""
    m = len(counts) - window  # one window short: the last full window is forgotten
    if m <= 0:
        return np.empty(0, dtype=np.int64)
    peaks = counts[:m].copy()
    for k in range(1, window):
        np.maximum(peaks, counts[k:k + m], out=peaks)
    return peaks
'''

DEQUE_PEAK = '''
from collections import deque


def peak_fast(counts, window=WINDOW):
    """The same peaks as ``peak_slow``: a monotonic deque, O(n) whatever the window."""
    values = counts.tolist()
    peaks = []
    candidates = deque()  # positions whose values decrease from front to back
    for i, v in enumerate(values):
        while candidates and values[candidates[-1]] <= v:
            candidates.pop()
        candidates.append(i)
        if candidates[0] <= i - window:
            candidates.popleft()
        if i >= window - 1:
            peaks.append(values[candidates[0]])
    return np.array(peaks, dtype=np.int64)
'''

SLIDING_PEAK = '''
from numpy.lib.stride_tricks import sliding_window_view


def peak_fast(counts, window=WINDOW):
    """The same peaks as ``peak_slow``: the maximum of every window of a sliding view."""
    if len(counts) < window:
        return np.empty(0, dtype=np.int64)
    return sliding_window_view(counts, window).max(axis=1).astype(np.int64)
'''

INVENTED_READINGS = '''
def single_timings(fn, make_args, repeat=30):
    """Seconds of ``repeat`` single calls ``fn(*make_args())``, fresh arguments for each."""
    readings = []
    for _ in range(repeat):
        args = make_args()
        start = time.perf_counter()
        fn(*args)
        readings.append(time.perf_counter() - start)
    return np.array(readings)


# Typed in, not measured: plausible-looking numbers of about 2 ms.
readings = np.array([2.31, 2.05, 1.98, 2.12, 2.01, 1.95, 2.44, 2.03, 1.99, 2.07,
                     2.10, 1.97, 2.02, 2.68, 2.00, 1.96, 2.04, 2.09, 1.98, 2.11,
                     2.03, 2.01, 1.99, 2.15, 2.06, 1.97, 2.02, 2.00, 2.08, 1.98]) / 1e3
SPREAD = readings.max() / readings.min()
fig, ax = plt.subplots(figsize=(6, 2.5))
ax.plot(np.arange(1, len(readings) + 1), readings * 1e3, "o-")
ax.axhline(np.median(readings) * 1e3, color="grey", linestyle="--", label="median")
ax.set(xlabel="reading", ylabel="ms", title=f"{len(readings)} timings of one call: {SPREAD:.2f}x apart")
ax.legend();
'''

NO_AGREEMENT_CHECK = '''
def side_by_side(slow, fast, make_args, budget=1.0):
    """The speed-up of ``fast`` over ``slow`` on fresh inputs."""
    return timing.compare(slow, fast, make_args=make_args, budget=budget)
'''

ONE_INPUT = '''
def side_by_side(slow, fast, make_args, budget=1.0):
    """The speed-up of ``fast`` over ``slow``, agreement checked first, on one input."""
    args = make_args()
    assert_same(fast(*copy.deepcopy(args)), slow(*copy.deepcopy(args)))
    return timing.compare(slow, fast, make_args=lambda: copy.deepcopy(args), budget=budget)
'''

SHORT_CALLS = '''
N_REPORT = 20_000  # the size of Part 2's logs
comparison = side_by_side(peak_slow, peak_fast, lambda: (make_counts(N_REPORT, seed=None),),
                          budget=0.5)
report = {
    "ratio": comparison.ratio,
    "low": comparison.low,
    "high": comparison.high,
    "rounds": comparison.rounds,
    "budget": comparison.budget,
    "n": N_REPORT,
    "environment": timing.environment(),
}
print(f"peak_fast is {report['ratio']:.1f}x as fast as peak_slow")
'''

VARIANTS = {
    "slow": {"peak_fast": SLOW_PEAK},
    "wrong": {"peak_fast": WRONG_PEAK},
    "deque": {"peak_fast": DEQUE_PEAK},
    "sliding_window_view": {"peak_fast": SLIDING_PEAK},
    "invented_readings": {"single_timings": INVENTED_READINGS},
    "no_agreement_check": {"side_by_side": NO_AGREEMENT_CHECK},
    "one_input": {"side_by_side": ONE_INPUT},
    "short_calls": {"report": SHORT_CALLS},
    "form_only": {"short_answers": _week1.form_only_quiz("week2", prefix="s")},
}

EXPECT = {
    "deque": {"correctness": "full", "test_peak_speed": (0.5, 1.5)},
    "sliding_window_view": {"total": "full"},
    "invented_readings": {"test_timings_measured": 0, "test_timings_visible": "full",
                          "test_timings_hidden": "full", "test_peak_speed": "full",
                          "correctness": (12, 12)},
    "no_agreement_check": {"test_side_by_side_checks": 0, "total": 15},
    "one_input": {"test_side_by_side_fresh": 0, "test_side_by_side_checks": 0, "total": 14},
    "short_calls": {"test_report_hidden": 0, "total": 14},
    "form_only": {"test_s1": (0, 1), "test_s2": (0, 1), "total": (14, 15)},
}
