"""Week 7 submissions for tests/test_assignments.py, each with the score it should get.

Each maps the ``grade_id`` of an answer cell of ``solutions/week7/week7.ipynb`` to the
source that replaces it; answer cells not named keep the reference solution. Task 3 grades
two things: the array code (``test_vectorised_speed``: one worker against the slow version)
and the parallel work (``test_parallel_speed``: all the grading worker's cores against the
submission's own one-worker run, with at least 1.25 working threads or processes at once).
Task 5 grades the crossover (``test_crossover``: the student's table and crossover against the
grader's own measurement of the provided ``overtime`` runs), Task 6 a ``prange`` count
(``test_prange_hidden``: identical to the serial count on fresh inputs and on several threads;
``test_prange_speed``: its loop really shared among the threads, at least 1.25 of them at work
at once on average, measured outside the kernel as every performance cell is).
Task 4 grades the student's speed-up curve (``test_curve``: one ``Comparison`` per worker count
of ``CURVE_WORKERS`` above 1, held to the grader's own readings of the same ``estimate``), Task 7
two questions.
"""

import re
from pathlib import Path

import nbformat

_SOLUTION = Path(__file__).resolve().parents[2] / "solutions" / "week7" / "week7.ipynb"


def _longest_options() -> str:
    """The answer cell of a student who picks the longest option of every question (a form tell)."""
    text = "\n".join(c.source for c in nbformat.read(_SOLUTION, as_version=4).cells
                     if c.cell_type == "markdown" and "**Question" in c.source)
    picks = []
    for block in re.split(r"\*\*Question \d+\.\*\*", text)[1:]:
        options = dict(re.findall(r"^- \(([a-z])\) (.*)$", block, flags=re.MULTILINE))
        picks.append(max(options, key=lambda letter: len(options[letter])))
    return "\n".join(f'q{n} = "{letter}"' for n, letter in enumerate(picks, 1))


# Task 4's measurement, as the reference writes it, with the sizes and counts a student might
# get wrong left as parameters.
_CURVE = """
speedup_curve = {{}}
for w in {counts}:
    speedup_curve[w] = timing.compare(lambda seed: estimate(seed, SPEED_TASKS, {size}, 1),
                                      lambda seed: estimate(seed, SPEED_TASKS, {size}, w),
                                      make_args=lambda: (fresh_seed(),), budget=0.5)
"""

VARIANTS = {
    # Correct, reproducible and still pure Python: one release_days call per scenario, the
    # tasks spread over threads. The GIL lets one thread run Python at a time, so the
    # threads buy nothing. Every correctness point; no speed point.
    "slow": {
        "task_outcome": '''
def task_outcome(task_index, gen, n_scenarios):
    """One Python call per scenario, as task_outcome_slow."""
    late, total_days = 0, 0.0
    for row in gen.random((n_scenarios, len(ACTIVITIES))).tolist():
        days = release_days(row)
        total_days += days
        late += days > DEADLINE
    return late, total_days
''',
        "estimate": '''
def estimate(seed, n_tasks, n_scenarios, workers=1):
    """Tasks on threads with their own streams, partials combined in task order."""
    one_task = functools.partial(task_outcome, n_scenarios=n_scenarios)
    partials = course_rng.map_tasks(one_task, seed, n_tasks, workers=workers, executor="thread")
    late = sum(task_late for task_late, _ in partials)
    total_days = 0.0
    for _, task_days in partials:
        total_days += task_days
    return summarise(late, total_days, n_tasks * n_scenarios)
''',
    },
    # Fast and wrong: the kernel draws its numbers as (activities, scenarios) instead of
    # (scenarios, activities). The estimate is statistically just as good, and it is
    # reproducible, but it is not the reference's estimate for the same seed: correctness
    # points lost, and no speed point, however fast.
    "wrong": {
        "task_outcome": '''
def task_outcome(task_index, gen, n_scenarios):
    """Vectorised, but with the draws in the transposed shape."""
    draws = gen.random((len(ACTIVITIES), n_scenarios))  # row = activity: other numbers
    finish = {}
    for k, (name, low, likely, high, waits_for) in enumerate(ACTIVITIES):
        u = draws[k]
        days = np.where(u < (likely - low) / (high - low),
                        low + np.sqrt(u * (high - low) * (likely - low)),
                        high - np.sqrt((1.0 - u) * (high - low) * (high - likely)))
        start = functools.reduce(np.maximum, [finish[b] for b in waits_for]) if waits_for else 0.0
        finish[name] = start + days
    days = finish[ACTIVITIES[-1][0]]
    return int(np.count_nonzero(days > DEADLINE)), float(days.sum())
''',
    },
    # The array kernel of the reference, but the tasks run one after another whatever
    # `workers` says. Identical on any number of workers, so every correctness point, and the
    # array code's speed points; one thread does all the work, so no parallel point (it
    # measured 49.7x and scored 20/20 under the old single speed test).
    "serial_vectorised": {
        "estimate": '''
def estimate(seed, n_tasks, n_scenarios, workers=1):
    """Every task in turn in this process: the workers are accepted and ignored."""
    late, total_days = 0, 0.0
    for task_index, gen in enumerate(course_rng.streams(seed, n_tasks)):
        task_late, task_days = task_outcome(task_index, gen, n_scenarios)
        late += task_late
        total_days += task_days
    return summarise(late, total_days, n_tasks * n_scenarios)
''',
    },
    # Processes instead of threads: each worker a process of its own, a new pool forked on
    # every call, the task function sent by reference. Whether that pays at the parallel
    # test's 50,000 scenarios per task depends on the process it forks from, not only on the
    # machine. Measured 6 December on a 2-core AMD EPYC, quiet: in a fresh Python process
    # (parallel_points itself, in and out of the sandbox) 1.52x-1.54x, 2 of 2 points; in the
    # verifier's worker, which has run the notebook's earlier cells, 1.03x, 0 of 2 (the
    # one-worker call 118 ms there against 162 ms in the fresh process, the pool's call 108
    # ms against 116-120). The serial side gains from a process whose memory allocator has
    # already grown its heap (with glibc's trim and mmap thresholds raised, the fresh process
    # ran the one-worker call in 105 ms and the pool at 1.34x); each new pool's workers start
    # cold, and a large Python heap makes every fork dearer (a fresh process holding 6 million
    # small tuples: 1.06x). On the machine of the 6 December morning's series it stored 2 of
    # 2 in both runs; on this one 0 in five runs beside a competitor and 0.09 quiet. So that
    # cell's range is the whole scale (Week 7's chapter measures what starting a pool costs).
    "processes": {
        "estimate": '''
def estimate(seed, n_tasks, n_scenarios, workers=1):
    """The tasks on a process pool (one process per worker), partials combined in task order."""
    one_task = functools.partial(task_outcome, n_scenarios=n_scenarios)
    partials = course_rng.map_tasks(one_task, seed, n_tasks, workers=workers, executor="process")
    late, total_days = 0, 0.0
    for task_late, task_days in partials:
        late += task_late
        total_days += task_days
    return summarise(late, total_days, n_tasks * n_scenarios)
''',
    },
    # Task 5 with a race: the prange runs over the scenarios and every iteration adds into the
    # shared counts. Right on one thread; on two, increments are lost (in 8 of 8 runs at 8
    # million scenarios, load 5): the hidden tests fail. The 3,000 scenarios of the visible
    # test are over in well under a millisecond, so the threads seldom overlap there.
    "racy_prange": {
        "late_counts": '''
import warnings

import numba
from numba import njit, prange
from numba.core.errors import NumbaWarning

warnings.simplefilter("ignore", NumbaWarning)


@njit(parallel=True)
def late_counts_kernel(days, deadlines):
    """A prange over the scenarios, each adding into the shared counts: a race."""
    counts = np.zeros(deadlines.shape[0], dtype=np.int64)
    for i in prange(days.shape[0]):
        for j in range(deadlines.shape[0]):
            if days[i] > deadlines[j]:
                counts[j] += 1
    return counts


def late_counts(days, deadlines, workers=1):
    numba.set_num_threads(max(1, min(workers, numba.config.NUMBA_NUM_THREADS)))
    return late_counts_kernel(days, deadlines)
''',
    },
    # The count compiled, right and race-free, but serial: `@njit` without parallel=True and
    # `range` where `prange` belongs. Identical on any number of threads, so every correctness
    # point; one thread does all the work, so not Task 5's parallel point (test_prange_speed).
    "serial_kernel": {
        "late_counts": '''
import numba
from numba import njit


@njit
def late_counts_kernel(days, deadlines):
    """Each deadline's count in turn, on one thread."""
    counts = np.zeros(deadlines.shape[0], dtype=np.int64)
    for j in range(deadlines.shape[0]):
        late = 0
        for i in range(days.shape[0]):
            if days[i] > deadlines[j]:
                late += 1
        counts[j] = late
    return counts


def late_counts(days, deadlines, workers=1):
    numba.set_num_threads(max(1, min(workers, numba.config.NUMBA_NUM_THREADS)))
    return late_counts_kernel(days, deadlines)
''',
    },
    # A serial kernel dressed up as parallel work: `@njit` without prange, and beside it, when
    # more than one worker is asked for, a thread that only burns CPU (compiled, without the
    # GIL) until the count is done. A count of threads at work sees two; Numba's report shows
    # no parallel loop, and the count is no faster on two threads than on one: every
    # correctness point, no prange point.
    "spinner_kernel": {
        "late_counts": '''
import threading

import numba
from numba import njit


@njit(nogil=True)
def late_counts_kernel(days, deadlines):
    """Each deadline's count in turn, on one thread (without the GIL)."""
    counts = np.zeros(deadlines.shape[0], dtype=np.int64)
    for j in range(deadlines.shape[0]):
        late = 0
        for i in range(days.shape[0]):
            if days[i] > deadlines[j]:
                late += 1
        counts[j] = late
    return counts


@njit(nogil=True)
def _burn(n):
    x = 0.0
    for i in range(n):
        x += i * 0.5
    return x


def _spin(stop):
    while not stop.is_set():
        _burn(500_000)  # about half a millisecond of work, without the GIL


def late_counts(days, deadlines, workers=1):
    """The serial count; with more than one worker, a second thread spins beside it."""
    if workers < 2:
        return late_counts_kernel(days, deadlines)
    stop = threading.Event()
    spinner = threading.Thread(target=_spin, args=(stop,))
    spinner.start()
    try:
        return late_counts_kernel(days, deadlines)
    finally:
        stop.set()
        spinner.join()
''',
    },
    # The same trick on Task 3: the tasks one after another whatever `workers` says, and a
    # spinning thread beside them when more than one worker is asked for. The array code's
    # points, no parallel point: the parallel run is no faster than the one-worker run.
    "spinner_estimate": {
        "estimate": '''
import threading

from numba import njit


@njit(nogil=True)
def _burn(n):
    x = 0.0
    for i in range(n):
        x += i * 0.5
    return x


def _spin(stop):
    while not stop.is_set():
        _burn(500_000)  # about half a millisecond of work, without the GIL


def estimate(seed, n_tasks, n_scenarios, workers=1):
    """Every task in turn; a thread that only spins keeps a second core busy meanwhile."""
    stop = threading.Event()
    spinner = threading.Thread(target=_spin, args=(stop,)) if workers > 1 else None
    if spinner is not None:
        spinner.start()
    try:
        late, total_days = 0, 0.0
        for task_index, gen in enumerate(course_rng.streams(seed, n_tasks)):
            task_late, task_days = task_outcome(task_index, gen, n_scenarios)
            late += task_late
            total_days += task_days
    finally:
        stop.set()
        if spinner is not None:
            spinner.join()
    return summarise(late, total_days, n_tasks * n_scenarios)
''',
    },
    # Task 4 read backwards: timing.compare(pool, serial) instead of compare(serial, pool), so
    # every ratio is the serial run's speed-up over the pool. The table says the pool wins at
    # the small sizes and loses at the large ones, the reported crossover is the smallest size
    # (or none): far from the grader's, and the small end of the table on the wrong side of 1.
    # (Where the grader's two readings differ, one finding no crossover, a reported "none" falls
    # in their range: the range below allows for that.)
    "wrong_crossover": {
        "crossover": '''
crossover_table = {}
for n in [25, 100, 400, 1_600, 6_400, 12_800]:
    run = timing.compare(lambda: overtime(CROSSOVER_TASKS, n, POOL_WORKERS),
                         lambda: overtime(CROSSOVER_TASKS, n, 1), budget=0.3)
    crossover_table[n] = run.ratio
_sizes = sorted(crossover_table)
crossover_size = next((n for n in _sizes if all(crossover_table[m] > 1 for m in _sizes if m >= n)), None)
''',
    },
    # Task 4 with two points: the speed-up on 2 workers only, so the curve is 1 worker and 2,
    # a line. The hidden test needs every count of CURVE_WORKERS above 1: no curve point.
    "curve_two_points": {"speedup_curve": _CURVE.format(counts="[2]", size="CURVE_SCENARIOS")},
    # One measurement, on 2 workers, filed under every count: the counts above the cores were
    # never measured. Two counts sharing one Comparison earn no curve point.
    "curve_copied": {"speedup_curve": _CURVE.format(counts="[2]", size="CURVE_SCENARIOS") + """
speedup_curve = {w: speedup_curve[2] for w in CURVE_WORKERS[1:]}
"""},
    # The ideal curve typed in: a speed-up equal to the number of workers, as plain numbers.
    # Not Comparisons, so nothing to hold to the grader's readings: no curve point.
    "curve_typed": {"speedup_curve": "speedup_curve = {w: float(w) for w in CURVE_WORKERS[1:]}\n"},
    # Measured, but on the array test's tasks of 1,200 scenarios instead of CURVE_SCENARIOS:
    # each call is about 16 times shorter than the grader's one-worker reading, so the point
    # for timing the right thing is lost; at that size the threads also gain less (0.6x to
    # 1.0x against 1.4x to 1.9x), which costs curve points whenever the machine leaves the
    # second core free (on a saturated one both curves sit near 1).
    "curve_wrong_size": {"speedup_curve": _CURVE.format(counts="CURVE_WORKERS[1:]", size="VECTOR_SCENARIOS")},
    # The quiz answered from form alone: the longest option of every question. The right
    # option is never the longest here, so this earns no quiz point (chance would be 1 of 2).
    "quiz_longest": {"quiz": _longest_options()},
}

_QUIZ = {"test_q1": "full", "test_q2": "full"}
_OTHER_CORRECTNESS = {"test_task_visible": "full", "test_task_hidden": "full", "test_estimate_visible": "full",
                      "test_estimate_hidden": "full", **_QUIZ}
_MEASURED = {"test_curve": "full", "test_crossover": "full"}  # the reference's Tasks 4 and 5

# Task 6's parallel point (test_prange_speed) checks the prange count, which `slow` and
# `wrong` take from the reference: they earn it, their other performance points are 0. The
# curve (test_curve) measures the submission's own estimate: honest measurements of a serial
# or a process-pool estimate earn it as the reference's do; `slow`'s pure-Python estimate
# takes seconds a call on tasks of 20,000 scenarios, so its curve cell runs past the 60 s
# limit and leaves no curve.
EXPECT = {
    "slow": {**_OTHER_CORRECTNESS, "test_prange_hidden": "full", "test_crossover": "full", "test_curve": 0,
             "test_vectorised_speed": 0, "test_parallel_speed": 0, "test_prange_speed": "full"},
    "wrong": {"correctness": "less", "test_vectorised_speed": 0, "test_parallel_speed": 0,
              "test_prange_speed": "full", **_MEASURED},
    "serial_vectorised": {"correctness": "full", "test_vectorised_speed": "full", "test_parallel_speed": 0},
    "processes": {**_OTHER_CORRECTNESS, "test_prange_hidden": "full", "test_vectorised_speed": "full",
                  "test_crossover": "full", "test_curve": (1.5, 3), "test_prange_speed": "full",
                  "test_parallel_speed": (0, 2)},
    "racy_prange": {**_OTHER_CORRECTNESS, **_MEASURED, "test_prange_hidden": 0, "test_prange_speed": 0,
                    "test_vectorised_speed": "full", "test_parallel_speed": "full"},
    "serial_kernel": {"correctness": "full", "test_prange_speed": 0, "test_vectorised_speed": "full",
                      "test_parallel_speed": "full"},
    "spinner_kernel": {"correctness": "full", "test_prange_speed": 0, "test_vectorised_speed": "full",
                       "test_parallel_speed": "full"},
    "spinner_estimate": {"correctness": "full", "test_vectorised_speed": "full", "test_parallel_speed": 0,
                         "test_prange_speed": "full"},
    "wrong_crossover": {**_OTHER_CORRECTNESS, "test_prange_hidden": "full", "test_curve": "full",
                        "test_prange_speed": "full", "test_crossover": (0, 1.5), "performance": "full"},
    "curve_two_points": {**_OTHER_CORRECTNESS, "test_crossover": "full", "test_curve": 0, "performance": "full"},
    "curve_copied": {**_OTHER_CORRECTNESS, "test_crossover": "full", "test_curve": 0, "performance": "full"},
    "curve_typed": {**_OTHER_CORRECTNESS, "test_crossover": "full", "test_curve": 0, "performance": "full"},
    "curve_wrong_size": {**_OTHER_CORRECTNESS, "test_crossover": "full", "test_curve": (0, 2),
                         "performance": "full"},
    "quiz_longest": {"test_q1": 0, "test_q2": 0, "performance": "full", "test_curve": "full"},
}
