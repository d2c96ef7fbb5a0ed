"""Tests for course_lib.rng: randomness tied to tasks, so results depend on the seed alone."""

import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from course_lib import rng


# Task functions live at module level so worker processes can unpickle them.
def _draws(task_index, gen):
    return gen.standard_normal(50)


def _indexed_draw(task_index, gen):
    return task_index, float(gen.random())


def _fails_on_three(task_index, gen):
    if task_index == 3:
        raise RuntimeError("task 3 failed")
    return task_index


def _global_state_draws(_task_index):
    # The anti-pattern: randomness from the process-wide legacy state, which every
    # worker got from the same seed. The pause lets each worker pick up a task.
    time.sleep(0.05)
    return os.getpid(), tuple(np.random.random(5))


def _naive_map(fn, seed, n_tasks, workers):
    """The anti-pattern, simulated deterministically: one Generator per *worker*,
    every one seeded with the same seed; worker w runs tasks w, w + workers, ..."""
    gens = [np.random.default_rng(seed) for _ in range(workers)]
    results = [None] * n_tasks
    for w, gen in enumerate(gens):
        for i in range(w, n_tasks, workers):
            results[i] = fn(i, gen)
    return results


def _stack(results):
    return np.stack(results)


def test_same_seed_gives_identical_streams():
    a = [g.random(100) for g in rng.streams(123, 4)]
    b = [g.random(100) for g in rng.streams(123, 4)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_children_differ_from_each_other():
    draws = [g.integers(0, 2**63, size=100) for g in rng.streams(123, 8)]
    values = np.concatenate(draws)
    assert len(np.unique(values)) == values.size


def test_different_seeds_give_different_streams():
    assert not np.array_equal(rng.streams(1, 1)[0].random(10), rng.streams(2, 1)[0].random(10))


def test_stream_i_does_not_depend_on_how_many_are_spawned():
    assert np.array_equal(rng.streams(5, 2)[1].random(10), rng.streams(5, 9)[1].random(10))


def test_streams_match_task_seeds():
    seeds = rng.task_seeds(9, 3)
    assert all(isinstance(s, np.random.SeedSequence) for s in seeds)
    for seq, gen in zip(seeds, rng.streams(9, 3)):
        assert np.array_equal(np.random.default_rng(seq).random(5), gen.random(5))


def test_a_seed_sequence_is_not_consumed():
    root = np.random.SeedSequence(77)
    first = rng.streams(root, 2)[1].random(5)
    again = rng.streams(root, 2)[1].random(5)
    assert np.array_equal(first, again)
    assert np.array_equal(first, rng.streams(77, 2)[1].random(5))


def test_seed_none_is_fresh_entropy_each_time():
    assert not np.array_equal(rng.streams(None, 1)[0].random(5), rng.streams(None, 1)[0].random(5))


def test_zero_streams_and_tasks():
    assert rng.streams(0, 0) == []
    assert rng.map_tasks(_draws, 0, 0, workers=2) == []


@pytest.mark.parametrize(
    "workers, executor",
    [(1, "process"), (2, "process"), (4, "process"), (1, "thread"), (2, "thread"), (4, "thread")],
)
def test_map_tasks_is_bit_identical_for_any_number_of_workers(workers, executor):
    reference = _stack(rng.map_tasks(_draws, 2024, n_tasks=12, workers=1, executor="thread"))
    got = _stack(rng.map_tasks(_draws, 2024, n_tasks=12, workers=workers, executor=executor))
    assert np.array_equal(got, reference)
    # ... and task i got exactly stream i
    assert np.array_equal(got, _stack([g.standard_normal(50) for g in rng.streams(2024, 12)]))


def test_map_tasks_returns_results_in_task_order():
    results = rng.map_tasks(_indexed_draw, 3, n_tasks=10, workers=3, executor="process")
    assert [i for i, _ in results] == list(range(10))


def test_map_tasks_results_depend_on_the_seed():
    a = _stack(rng.map_tasks(_draws, 1, 4, executor="thread"))
    b = _stack(rng.map_tasks(_draws, 2, 4, executor="thread"))
    assert not np.array_equal(a, b)


def test_every_task_draws_different_numbers():
    results = _stack(rng.map_tasks(_draws, 1, 8, workers=2, executor="thread"))
    assert len({row.tobytes() for row in results}) == 8


def test_naive_same_seed_per_worker_duplicates_streams():
    """Why tasks, not workers, own the seeds: with one same-seeded Generator per worker,
    the first task of every worker draws identical numbers, and the results change
    with the number of workers."""
    naive = _naive_map(_draws, 2024, n_tasks=8, workers=4)
    assert all(np.array_equal(naive[0], naive[w]) for w in range(1, 4))  # four copies of one
    assert not np.array_equal(_stack(naive), _stack(_naive_map(_draws, 2024, 8, workers=2)))
    # The task-seeded version has neither problem.
    tied = _stack(rng.map_tasks(_draws, 2024, n_tasks=8, workers=4, executor="thread"))
    assert len({row.tobytes() for row in tied}) == 8


def test_workers_sharing_a_seeded_global_state_repeat_each_other():
    """The same mistake with real processes: every worker seeds np.random the same way."""
    with ProcessPoolExecutor(max_workers=2, initializer=np.random.seed, initargs=(0,)) as pool:
        results = list(pool.map(_global_state_draws, range(4)))
    by_worker = {}
    for pid, draws in results:
        by_worker.setdefault(pid, []).append(draws)
    if len(by_worker) < 2:
        pytest.skip("one worker ran every task this time; nothing to compare")
    first_draws = {draws[0] for draws in by_worker.values()}
    assert len(first_draws) == 1  # every worker's first task saw the same numbers


@pytest.mark.parametrize("bad", [lambda i, g: 1, "nested"])
@pytest.mark.parametrize("workers", [1, 2])
def test_unpicklable_fn_for_processes_gets_a_clear_error(bad, workers):
    if bad == "nested":
        def bad(i, g):
            return 1
    with pytest.raises(TypeError, match="module level"):
        rng.map_tasks(bad, 0, 3, workers=workers, executor="process")


def test_threads_accept_any_callable():
    assert rng.map_tasks(lambda i, g: i * 2, 0, 3, workers=2, executor="thread") == [0, 2, 4]


def test_task_errors_propagate():
    with pytest.raises(RuntimeError, match="task 3 failed"):
        rng.map_tasks(_fails_on_three, 0, 5, workers=2, executor="process")


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(n_tasks=-1), ValueError, "n_tasks must be >= 0"),
        (dict(n_tasks=2.0), TypeError, "n_tasks must be a whole number"),
        (dict(n_tasks=True), TypeError, "n_tasks must be a whole number"),
        (dict(workers=0), ValueError, "workers must be at least 1"),
        (dict(workers=1.5), TypeError, "workers must be a whole number"),
        (dict(executor="gpu"), ValueError, "executor must be one of"),
        (dict(seed=-3), ValueError, "non-negative int"),
        (dict(seed=1.5), TypeError, "non-negative int"),
        (dict(seed=np.random.default_rng(0)), TypeError, "not a Generator"),
        (dict(fn="not callable"), TypeError, "callable"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, exc, match):
    args = dict(fn=_draws, seed=0, n_tasks=2, workers=1, executor="thread") | kwargs
    with pytest.raises(exc, match=match):
        rng.map_tasks(**args)


@pytest.mark.parametrize("n, exc", [(-1, ValueError), (1.0, TypeError), ("3", TypeError)])
def test_streams_rejects_bad_counts(n, exc):
    with pytest.raises(exc, match="n must"):
        rng.streams(0, n)
