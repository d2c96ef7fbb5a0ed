"""Independent random streams for parallel work: tie randomness to tasks, not workers.

The pattern
-----------
Split the work into a fixed number of *tasks*. Give every task its own random stream,
spawned from one seed with :class:`numpy.random.SeedSequence`, and let whichever worker
runs a task use that task's stream. Then the result depends on the seed alone: running
on 1, 2 or 16 workers, threads or processes, gives bit-identical numbers.

Two common mistakes break this:

* seeding every worker with the same seed, so the workers draw *the same* numbers and a
  "4x bigger" simulation is four copies of one (forked processes inheriting the global
  ``np.random`` state do this silently);
* seeding each worker differently (``seed + worker_id``), so the numbers change with the
  number of workers and with which worker happened to pick up which task.

``SeedSequence.spawn`` gives children whose streams are independent for all practical
purposes, with no hand-made seed arithmetic.

Examples
--------
>>> from course_lib import rng
>>> def mean_of_draws(task_index, gen):
...     return float(gen.standard_normal(1_000).mean())
>>> one = rng.map_tasks(mean_of_draws, seed=2024, n_tasks=8, workers=1, executor="thread")
>>> four = rng.map_tasks(mean_of_draws, seed=2024, n_tasks=8, workers=4, executor="thread")
>>> one == four
True
>>> one == rng.map_tasks(mean_of_draws, seed=7, n_tasks=8, executor="thread")
False

With ``executor="process"`` (the default) ``fn`` must be importable by the worker
processes: define it at module level in a file, not as a lambda or nested function.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from numbers import Integral
from typing import Any, TypeVar, Union

import numpy as np

__all__ = ["streams", "task_seeds", "map_tasks"]

T = TypeVar("T")

#: Anything :class:`numpy.random.SeedSequence` accepts, or ``None`` for fresh entropy.
Seed = Union[None, int, Sequence[int], np.random.SeedSequence]


def task_seeds(seed: Seed, n_tasks: int) -> list[np.random.SeedSequence]:
    """One child :class:`~numpy.random.SeedSequence` per task, spawned from ``seed``.

    Parameters
    ----------
    seed : int, sequence of int, SeedSequence or None
        The one number that fixes every result. ``None`` draws fresh entropy from the
        operating system: each call then differs and the run is *not* reproducible.
        A SeedSequence is not consumed: the same one gives the same children every time.
    n_tasks : int
        Number of tasks, >= 0.

    Examples
    --------
    >>> a, b = task_seeds(42, 2)
    >>> a.spawn_key, b.spawn_key
    ((0,), (1,))
    >>> task_seeds(42, 2)[1].generate_state(1) == b.generate_state(1)
    array([ True])
    """
    _check_count("n_tasks", n_tasks)
    return _root(seed).spawn(n_tasks)


def streams(seed: Seed, n: int) -> list[np.random.Generator]:
    """``n`` independent random Generators spawned from ``seed``.

    The same seed always gives the same streams, and stream ``i`` does not depend on
    ``n``: ``streams(s, 3)[1]`` draws the same numbers as ``streams(s, 10)[1]``.

    Parameters
    ----------
    seed : int, sequence of int, SeedSequence or None
        See :func:`task_seeds`; ``None`` is not reproducible.
    n : int
        Number of streams, >= 0.

    Examples
    --------
    >>> g0, g1 = streams(42, 2)
    >>> float(g0.random()) == float(streams(42, 5)[0].random())
    True
    >>> float(g0.random()) == float(g1.random())
    False
    """
    _check_count("n", n)
    return [np.random.default_rng(child) for child in task_seeds(seed, n)]


def map_tasks(
    fn: Callable[[int, np.random.Generator], T],
    seed: Seed,
    n_tasks: int,
    workers: int = 1,
    executor: str = "process",
) -> list[T]:
    """Run ``fn(task_index, rng)`` for every task, each with its own task's Generator.

    The Generator handed to task ``i`` comes from ``task_seeds(seed, n_tasks)[i]``,
    whichever worker runs it, so the results depend on ``seed`` and ``n_tasks`` only,
    never on ``workers`` or on scheduling.

    Parameters
    ----------
    fn : callable
        ``fn(task_index, rng) -> result``. It must draw its randomness only from ``rng``.
        For ``executor="process"`` it must be picklable: a function defined at module
        level (not a lambda, not nested in another function), and so must its result.
    seed : int, sequence of int, SeedSequence or None
        See :func:`task_seeds`; ``None`` is not reproducible.
    n_tasks : int
        Number of tasks, >= 0. Choose it from the problem, not from the machine.
    workers : int
        Number of worker processes or threads, >= 1. ``workers=1`` runs the tasks one
        after another in this process (no pool to start), with the same results.
    executor : {"process", "thread"}
        ``"process"`` for pure-Python work (each process has its own GIL);
        ``"thread"`` for work that releases the GIL (most NumPy) or needs no pickling.

    Returns
    -------
    list
        The results, in task order.

    Examples
    --------
    >>> def first_draw(i, gen):
    ...     return (i, round(float(gen.random()), 6))
    >>> results = map_tasks(first_draw, seed=1, n_tasks=3, workers=2, executor="thread")
    >>> [i for i, _ in results]
    [0, 1, 2]
    """
    if not callable(fn):
        raise TypeError(f"fn must be a callable fn(task_index, rng), got {type(fn).__name__}")
    _check_count("n_tasks", n_tasks)
    _check_count("workers", workers)
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers!r}")
    if executor not in _EXECUTORS:
        raise ValueError(f"executor must be one of {sorted(_EXECUTORS)}, got {executor!r}")
    if executor == "process":
        # Check up front, so workers=1 fails exactly as workers=4 would, and with a
        # message instead of a traceback from inside the pool machinery.
        _check_picklable(fn)
    seeds = task_seeds(seed, n_tasks)
    indices = list(range(n_tasks))
    fns = [fn] * n_tasks
    if workers == 1 or n_tasks <= 1:
        return list(map(_run_task, fns, indices, seeds))
    pool_workers = min(workers, n_tasks)
    if executor == "process":
        # Several tasks per message: each round trip to a process costs far more than a
        # small task. Order of results is kept by map() regardless of chunking.
        chunksize = max(1, n_tasks // (4 * pool_workers))
        with ProcessPoolExecutor(max_workers=pool_workers) as pool:
            return list(pool.map(_run_task, fns, indices, seeds, chunksize=chunksize))
    with ThreadPoolExecutor(max_workers=pool_workers) as pool:
        return list(pool.map(_run_task, fns, indices, seeds))


_EXECUTORS = frozenset({"process", "thread"})


def _run_task(fn: Callable[[int, np.random.Generator], T], index: int, seed: np.random.SeedSequence) -> T:
    # Runs in the worker: the Generator is built there from the task's SeedSequence,
    # which is small to pickle, rather than shipping generator state around.
    return fn(index, np.random.default_rng(seed))


def _root(seed: Any) -> np.random.SeedSequence:
    if isinstance(seed, np.random.Generator | np.random.BitGenerator | np.random.RandomState):
        raise TypeError(
            "seed must be an int, a sequence of ints, a SeedSequence or None, not a "
            f"{type(seed).__name__}: pass the number you seeded it with instead"
        )
    if isinstance(seed, bool):
        raise TypeError(f"seed must be an int, a sequence of ints, a SeedSequence or None, got {seed!r}")
    if isinstance(seed, np.random.SeedSequence):
        # spawn() advances a SeedSequence's child counter; copying keeps this function
        # pure, so the same SeedSequence always gives the same children.
        return np.random.SeedSequence(
            seed.entropy,
            spawn_key=seed.spawn_key,
            pool_size=seed.pool_size,
            n_children_spawned=0,
        )
    try:
        return np.random.SeedSequence(seed)
    except (TypeError, ValueError) as err:
        raise type(err)(
            f"seed must be a non-negative int, a sequence of them, a SeedSequence or None, "
            f"got {seed!r}"
        ) from None


def _check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be a whole number, got {type(value).__name__} {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")


def _check_picklable(fn: Callable) -> None:
    try:
        pickle.dumps(fn)
    except (pickle.PicklingError, AttributeError, TypeError) as err:
        name = getattr(fn, "__qualname__", repr(fn))
        raise TypeError(
            f"fn {name!r} cannot be sent to worker processes ({err}). Define it at module "
            "level in a .py file (not a lambda or a function nested in another), or use "
            "executor='thread'."
        ) from None
