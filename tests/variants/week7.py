"""Week 7 submissions for tests/test_assignments.py, each with the score it should get.

Each maps the ``grade_id`` of an answer cell of ``solutions/week7/week7.ipynb`` to the
source that replaces it; answer cells not named keep the reference solution. Task 3 grades
two things: the array code (``test_vectorised_speed``: one worker against the slow version)
and the parallel work (``test_parallel_speed``: all the grading worker's cores against the
submission's own one-worker run, with at least 1.25 working threads or processes at once).
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
    # Processes instead of threads: each worker a process of its own, forked per call (tens
    # of milliseconds to start), the task function sent by reference. At the parallel test's
    # 50,000 scenarios per task that start is paid back: full marks, as the threads get.
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
}

EXPECT = {
    "serial_vectorised": {"correctness": "full", "test_vectorised_speed": "full", "test_parallel_speed": 0},
    "processes": {"total": "full"},
}
