"""How far above its traced peak does honest code's resident memory rise? A benchmark, not a test.

The verifier's memory cells (``peak_memory_points``, ``assert_peak_memory_below``) read two
figures in the sandboxed student worker: tracemalloc's peak, which the student's code can
stop, and the rise of the whole sandbox's memory (its processes' resident sets, and what it
holds in tmpfs and memory files), which it cannot. The grade uses the larger of the traced
peak and the rise less a tolerance: what honest code adds beyond what tracemalloc sees
(parser buffers in C, SQLite's page cache, the allocator's slack) and what the measurement
path itself costs. This script measures that gap for the course's honest answers to its
memory cells (week 5's reference solutions and the variants of ``tests/variants/week5.py``
that are right), on the graded input sizes, in the sandboxed worker exactly as the verifier
runs it, and prints each answer's traced peak, its rise and the gap, and the largest gap:
the figure :data:`course_lib.grader.verification._RESIDENT_TOLERANCE` is set above. It also
runs the two dishonest samples of ``examples/hostile_submissions`` for contrast (a whole-file
read with tracemalloc stopped around it, and the same read in a forked child).

Run from the repository root (about 2 minutes on a 2-core machine)::

    .venv/bin/python benchmarks/memory_tolerance.py
    .venv/bin/python benchmarks/memory_tolerance.py --repeat 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # course_lib from this checkout

def _cells(answers: dict[str, str]) -> list[str]:
    """The released notebook's non-test code cells, the answer cells filled in."""
    import nbformat

    nb = nbformat.read(ROOT / "assignments" / "week5" / "week5.ipynb", as_version=4)
    cells = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or (meta.get("grade") and not meta.get("solution")):
            continue
        cells.append(answers.get(meta.get("grade_id"), cell.source))
    return cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="measurements per answer (the largest gap counts)")
    args = parser.parse_args(argv)

    from course_lib.grader import verification as v
    from tests.variants import week5

    import runpy

    samples = runpy.run_path(str(ROOT / "examples" / "make_submissions.py"))
    reference = samples["solution_answers"]("week5")
    answers = {"reference": reference}
    for name, variant in week5.VARIANTS.items():
        if name != "wrong":
            answers[name] = {**reference, **variant}
    for name in ("week5_hides_from_tracemalloc", "week5_reads_in_a_child"):  # the dishonest samples
        answers[f"{name} (dishonest)"] = {**reference, **samples["HOSTILE_WEEK5"][name]}

    shared = tempfile.mkdtemp(prefix="mt-")
    os.chmod(shared, 0o755)
    work = Path(tempfile.mkdtemp(prefix="mt-work-"))
    os.environ["TMPDIR"] = tempfile.tempdir = shared
    try:
        sys.path.insert(0, str(ROOT / "solutions" / "week5"))
        ns: dict = {}
        exec(_cells({})[0], ns)  # the setup cell: write_readings and friends, here
        big = ns["write_readings"](Path(shared) / "big.csv", 1_200_000, seed=55)
        big_db = ns["write_readings_db"](Path(shared) / "big.db", 400_000, seed=56)
        for path in Path(shared).iterdir():
            path.chmod(0o644)
        cells = {"region_summary": (big,), "hourly_load": (big_db, "east", 16, 21)}
        gaps: dict[str, list[float]] = {}
        print(f"{'answer':32s} {'function':15s} {'traced':>10s} {'rise':>10s} {'rise - traced':>14s}")
        for name, answer in answers.items():
            worker = v._Worker(str(work), os.devnull, 120, 0, sandboxed=True, shared=shared)
            try:
                worker.load(_cells(answer))
                for fn, fn_args in cells.items():
                    remote = v._Remote(worker, fn)
                    remote(*fn_args)  # warm: imports and first-call costs, as the correctness checks before
                    for _ in range(args.repeat):
                        traced, rise = v._remote_peak(remote, fn_args, {})
                        gap = (rise - traced) / 2**20
                        if "dishonest" not in name:
                            gaps.setdefault(fn, []).append(gap)
                        print(f"{name:32s} {fn:15s} {traced / 2**20:9.2f}M {rise / 2**20:9.2f}M {gap:13.2f}M")
            finally:
                worker.close()
        print()
        for fn, found in gaps.items():
            print(f"largest honest gap, {fn}: {max(found):.2f} MiB")
        print(f"load average: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(shared, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
