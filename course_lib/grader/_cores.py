"""The cores each grading worker gets: its own CPU set, so a notebook counts only its share.

``course grade --workers N`` grades N notebooks at a time. Limiting their thread pools
(``OMP_NUM_THREADS`` and the like) keeps them from oversubscribing the machine, but a
notebook still *sees* every core: ``os.sched_getaffinity(0)`` lists them all, and a test
that grades parallel work asks for as many workers as that, while N-1 other notebooks are
computing on the same cores. Here every grading worker is pinned to a CPU set of its own,
``cores // N`` CPUs (at least one), with ``os.sched_setaffinity``; the kernels, verifiers
and student workers it starts inherit the set, so a notebook's ``available_cores()`` and
its thread pools see exactly its share.

Local workers take a set each when they start (:func:`pin_process`, the pool's
initializer). On a Dask cluster the sets are planned per machine from what each Dask
worker reports (:func:`dask_plan`), and a grading task pins the thread that runs it for as
long as it runs (:func:`pinned`); a worker running several tasks at once gives each thread
its own set.

Examples
--------
>>> shares([0, 1, 2, 3], 2)
[[0, 1], [2, 3]]
>>> shares([0, 1], 3)  # more workers than cores: one core each, shared
[[0], [1], [0]]
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["shares", "own_cpus", "pin_process", "dask_plan", "pinned"]


def shares(cpus: Sequence[int], n: int) -> list[list[int]]:
    """``n`` CPU sets of ``len(cpus) // n`` CPUs each (at least one), disjoint while there are enough."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n!r}")
    cpus = sorted(cpus)
    if not cpus:
        raise ValueError("no CPUs to share")
    size = max(1, len(cpus) // n)
    return [[cpus[(i * size + j) % len(cpus)] for j in range(size)] for i in range(n)]


def own_cpus() -> list[int]:
    """The CPUs this thread may run on (all of them where affinity is not supported)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def pin_process(queue: Any) -> None:
    """A local grading worker's initializer: take one CPU set from ``queue`` and keep to it."""
    cpus = queue.get()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)


def dask_plan(client: Any) -> dict[str, list[list[int]]]:
    """For each Dask worker (by address), one CPU set per thread it runs tasks on.

    Workers on the same machine (the same host and the same CPUs) share its CPUs: with
    ``T`` task threads in all there, each thread gets ``cores // T``.
    """
    cpus = client.run(own_cpus)  # {address: the worker's CPUs}
    threads = {address: info.get("nthreads", 1) for address, info in client.scheduler_info()["workers"].items()}
    machines: dict[tuple, list[str]] = {}
    for address in sorted(cpus):
        host = address.rsplit(":", 1)[0]
        machines.setdefault((host, tuple(cpus[address])), []).append(address)
    plan: dict[str, list[list[int]]] = {}
    for (_, machine_cpus), addresses in machines.items():
        sets = iter(shares(machine_cpus, sum(max(1, threads.get(a, 1)) for a in addresses)))
        for address in addresses:
            plan[address] = [next(sets) for _ in range(max(1, threads.get(address, 1)))]
    return plan


_TAKEN: set[int] = set()
_LOCK = threading.Lock()


@contextlib.contextmanager
def pinned(sets: list[list[int]]) -> Iterator[list[int]]:
    """Pin the calling thread to a free one of ``sets`` while the block runs; yields the CPUs.

    Processes started from the thread inherit the set; the thread's own is put back after.
    """
    with _LOCK:
        index = next((i for i in range(len(sets)) if i not in _TAKEN), len(sets) - 1)
        _TAKEN.add(index)
    cpus = sets[index]
    before = own_cpus()
    try:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cpus)
        yield cpus
    finally:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, before)
        with _LOCK:
            _TAKEN.discard(index)
