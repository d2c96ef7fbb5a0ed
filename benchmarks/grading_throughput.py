"""How many submissions a minute does ``course grade`` get through? A benchmark, not a test.

``--n`` submissions (default 200) of the example assignment are made by cycling through the
sample kinds of ``examples/submissions`` (each copy under its own student id), then graded
three times from scratch, each into its own temporary grading folder with a SQLite gradebook:

1. one worker (``course grade``'s default: one submission at a time);
2. ``--workers 2``: two worker processes, BLAS and Numba threads limited to cores / 2;
3. ``--scheduler`` on a Dask ``LocalCluster`` of 2 single-threaded worker processes.

Every submission goes through nbgrader's autograde and the out-of-kernel verification. It
prints seconds and submissions per minute for each, the speed-up of 2 and of the cluster
over 1, and whether the three runs gave every submission the same score (they must: the
runs differ only in how many submissions are graded at once).

Run from the repository root::

    .venv/bin/python benchmarks/grading_throughput.py            # 200 submissions: over an hour on 2 cores
    .venv/bin/python benchmarks/grading_throughput.py --n 36     # every kind twice

The figure to reach (issue 7): 2 workers at least 1.7x the throughput of 1.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from course_lib import timing
from course_lib.grader import nbgrading  # noqa: E402

SAMPLES = ROOT / "examples" / "submissions"
TIMEOUT = 8  # seconds per cell, as the end-to-end test grades the samples
MEMORY_LIMIT = 10**9  # per kernel, as there: memory_hog is stopped at 1 GB


def make_batch(folder: Path, n: int) -> list[str]:
    """``n`` submissions cycling through the sample kinds; returns their student ids."""
    kinds = sorted(p.name for p in SAMPLES.iterdir() if p.is_dir())
    students = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        student = f"{kind}_{i:03d}"
        shutil.copytree(SAMPLES / kind, folder / student)
        students.append(student)
    return students


def run(label: str, submissions: Path, workdir: Path, **options: object) -> tuple[float, dict[str, float]]:
    course = nbgrading.Course.locate(root=ROOT, grading_dir=workdir / label, timeout=TIMEOUT,
                                     memory_limit=MEMORY_LIMIT)
    started = time.perf_counter()
    results = nbgrading.grade(course, submissions, ["example"], progress=True, **options)
    seconds = time.perf_counter() - started
    print(f"  {label:<14} {seconds:8.1f} s  {60 * len(results) / seconds:6.2f} submissions/min", flush=True)
    return seconds, {r.student: r.score for r in results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="submissions (default 200)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    opts = parser.parse_args(argv)
    if opts.n < 1:
        parser.error("--n must be positive")
    print(timing.format_environment())
    workdir = Path(tempfile.mkdtemp(prefix="grading_throughput_"))
    try:
        submissions = workdir / "submissions"
        make_batch(submissions, opts.n)
        print(f"\n{opts.n} submissions of example, cell timeout {TIMEOUT} s:")
        one, scores_one = run("1 worker", submissions, workdir)
        two, scores_two = run("2 workers", submissions, workdir, workers=2)
        from distributed import LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            dask, scores_dask = run("LocalCluster 2", submissions, workdir, scheduler=cluster.scheduler_address)
    finally:
        if opts.keep:
            print(f"kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n2 workers: {one / two:.2f}x the throughput of 1 (target >= 1.7x); "
          f"LocalCluster of 2: {one / dask:.2f}x")
    same = scores_one == scores_two == scores_dask
    print(f"same score for every submission in all three runs: {'yes' if same else 'NO'}")
    if not same:
        for student in sorted(scores_one):
            row = (scores_one[student], scores_two.get(student), scores_dask.get(student))
            if len(set(row)) > 1:
                print(f"  {student}: {row}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
