"""Each grading worker grades on its own cores (course_lib.grader._cores).

The pool is built as ``course grade --workers N`` builds it (spawned processes, one CPU set
each taken by the pool's initializer); what runs in a worker, the out-of-kernel verifier
and its student worker included, sees only that set.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from course_lib.grader import _cores

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")]

CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


@pytest.mark.parametrize("cpus, n, expected", [
    ([0, 1], 2, [[0], [1]]),
    ([0, 1, 2, 3, 4], 2, [[0, 1], [2, 3]]),
    ([3, 1, 2, 0], 1, [[0, 1, 2, 3]]),
    ([0, 1], 4, [[0], [1], [0], [1]]),
])
def test_shares_are_cores_divided_by_workers_and_at_least_one(cpus, n, expected):
    assert _cores.shares(cpus, n) == expected


def _report(pause: float) -> tuple[int, list[int]]:
    time.sleep(pause)  # both tasks at once: one on each worker
    return os.getpid(), sorted(os.sched_getaffinity(0))


def _pool(workers: int) -> ProcessPoolExecutor:
    context = multiprocessing.get_context("spawn")
    sets = context.SimpleQueue()
    for share in _cores.shares(CPUS, workers):
        sets.put(share)
    return ProcessPoolExecutor(workers, mp_context=context, initializer=_cores.pin_process, initargs=(sets,))


@pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 cores")
def test_each_local_grading_worker_is_pinned_to_its_own_cores():
    with _pool(2) as pool:
        seen = dict(pool.map(_report, [1.0, 1.0]))
    assert len(seen) == 2
    sets = list(seen.values())
    assert all(len(s) == len(CPUS) // 2 for s in sets)
    assert not set(sets[0]) & set(sets[1])


def test_a_thread_is_pinned_while_it_grades_and_given_its_cores_back():
    sets = [[CPUS[0]], [CPUS[-1]]]
    with _cores.pinned(sets) as first:
        assert sorted(os.sched_getaffinity(0)) == first == [CPUS[0]]
        seen = []

        def second_grading_thread():
            with _cores.pinned(sets) as cpus:
                seen.append((cpus, sorted(os.sched_getaffinity(0))))

        other = threading.Thread(target=second_grading_thread)
        other.start()
        other.join()
        assert seen == [([CPUS[-1]], [CPUS[-1]])]  # it gets the other set
    assert sorted(os.sched_getaffinity(0)) == CPUS


class _FakeClient:
    """What dask_plan reads from a client: two machines, one with two workers of 1 thread."""

    def run(self, fn):
        return {"tcp://10.0.0.1:1": [0, 1, 2, 3], "tcp://10.0.0.1:2": [0, 1, 2, 3], "tcp://10.0.0.2:1": [0, 1]}

    def scheduler_info(self):
        return {"workers": {"tcp://10.0.0.1:1": {"nthreads": 1}, "tcp://10.0.0.1:2": {"nthreads": 1},
                            "tcp://10.0.0.2:1": {"nthreads": 2}}}


def test_dask_workers_share_their_own_machines_cores():
    assert _cores.dask_plan(_FakeClient()) == {
        "tcp://10.0.0.1:1": [[0, 1]], "tcp://10.0.0.1:2": [[2, 3]], "tcp://10.0.0.2:1": [[0], [1]]}


SPEED_NOTEBOOK = [
    ("from course_lib.grading import assert_speedup\nimport numpy as np\n", "setup", False, 0),
    ("def count_known(catalogue, queries):\n    known = set(catalogue)\n"
     "    return sum(1 for q in queries if q in known)\n", "answer", True, 0),
    ("def _scan(catalogue, queries):\n    return sum(1 for q in queries if q in catalogue)\n\n\n"
     "def _case():\n    rng = np.random.default_rng()\n"
     "    return rng.choice(600, size=300, replace=False).tolist(), rng.integers(0, 600, size=40_000).tolist()\n\n\n"
     "assert_speedup(count_known, _scan, make_args=_case, at_least=5, budget=0.3)\n", "test_speed", False, 3),
]


def _verify_in_worker(folder: str) -> str:
    from course_lib.grader.verification import verify_notebook

    verdict, = verify_notebook(Path(folder) / "source.ipynb", Path(folder) / "graded" / "nb.ipynb", timeout=30,
                               log=Path(folder) / "log.txt")
    return verdict.detail


@pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 cores")
def test_a_notebook_graded_by_a_pinned_worker_is_told_its_share_of_the_cores(tmp_path):
    cells = []
    for source, grade_id, solution, points in SPEED_NOTEBOOK:
        cell = new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": solution, "grade": bool(points),
                                     "locked": not solution, "points": points, "schema_version": 3}
        cells.append(cell)
    (tmp_path / "graded").mkdir()
    for path in (tmp_path / "source.ipynb", tmp_path / "graded" / "nb.ipynb"):
        nbformat.write(new_notebook(cells=cells), path)
    with _pool(2) as pool:
        detail = pool.submit(_verify_in_worker, str(tmp_path)).result()
    share = len(CPUS) // 2
    assert f"graded with {share} core{'s' if share != 1 else ''} (this notebook's CPU affinity)" in detail, detail
