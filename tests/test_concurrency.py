"""course_lib._concurrency: who did a call's work, read from /proc while it ran."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from course_lib import _concurrency

pytestmark = pytest.mark.skipif(not _concurrency.available(), reason="needs /proc/PID/task/TID/schedstat (Linux)")


def _numpy_work(_=None):
    x = np.random.default_rng().random(400_000)
    for _ in range(40):
        x = np.sqrt(x + 1.0)  # NumPy releases the GIL in each of these
    return float(x.sum())


def _timed(sampler, fn):
    sampler.start()
    t0 = time.perf_counter()
    fn()
    return sampler.stop(time.perf_counter() - t0)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores")
def test_two_threads_of_a_pool_made_inside_the_call_are_both_seen_at_work():
    # Eight tasks, not four: with four, a thread left alone at the end and the pool's start
    # weigh more (CI read 1.496 over 0.10 s beside other tests; here, 15 runs each at load
    # 1.2-1.8, four tasks read 1.51-1.98, eight 1.66-1.99).
    def two_threads():
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(_numpy_work, range(8)))

    with _concurrency.ExternalSampler() as sampler:
        used = _timed(sampler, two_threads)
    assert used.workers == 2 and used.concurrency > 1.5, used
    assert used.busiest <= used.unloaded <= used.wall


def test_serial_work_is_one_worker_whatever_the_load():
    with _concurrency.ExternalSampler() as sampler:
        used = _timed(sampler, lambda: [_numpy_work() for _ in range(3)])
    assert used.workers == 1 and 0.8 < used.concurrency <= 1.01, used


def test_another_process_and_its_children_are_sampled_from_outside():
    # The verifier's view of the student worker: a process whose two children compute.
    code = ("import os, time\nfor _ in range(2):\n    if os.fork() == 0:\n        t = time.process_time()\n"
            "        while time.process_time() - t < 0.3:\n            pass\n        os._exit(0)\n"
            "for _ in range(2):\n    os.wait()\n")
    sampler = _concurrency.Sampler(os.getpid())
    sampler.start()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    used = sampler.stop(time.perf_counter() - t0)
    assert used.workers == 2 and used.cpu >= 0.5, used


def test_a_sleeping_call_waits_for_nothing():
    # Sleeping is not waiting for a core: nothing is taken off its wall time.
    with _concurrency.ExternalSampler() as sampler:
        used = _timed(sampler, lambda: time.sleep(0.2))
    assert used.waited < 0.02 and used.unloaded > 0.18, used
