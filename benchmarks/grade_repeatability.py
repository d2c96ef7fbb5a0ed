"""Does a notebook get the same grade twice on a busy machine?

A benchmark, not a test. For every week, the reference solution and at least two honest
alternatives from ``tests/variants/WEEK.py`` (answers a class plausibly submits, graded to
an expected range there) are graded ``--runs`` times through
:func:`course_lib.grader.authoring.selftest`, which is ``course grade`` on a temporary
gradebook (sandboxed, out-of-kernel verification and all), each run beside ``--competitors``
CPU-bound processes (busy loops) started for the run and stopped after it.

It prints, per week, every submission's total in each run, the cell whose stored points
moved most across the runs (the spread: largest minus smallest), that cell's points, and
every run in which a submission fell outside the range its variants file expects. The
targets (issue 25): no honest answer below its expected range in any run, and no cell's
spread above a quarter of its points.

Run from the repository root (about 15 minutes a week at five runs on 2 cores)::

    .venv/bin/python benchmarks/grade_repeatability.py --runs 5
    .venv/bin/python benchmarks/grade_repeatability.py --weeks week1 --runs 3 --json /tmp/w1.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # course_lib from this checkout

# The honest alternatives graded beside each week's reference: answers that are not
# cheating and whose variants entry expects a range (full marks or a measured band).
HONEST = {
    "week1": ("hint", "loc"),
    "week2": ("sliding_window_view", "deque"),
    "week3": ("sorted", "half_fixed"),
    "week4": ("rank_astype", "wrong_line"),
    "week5": ("other_full", "half_measures", "cursor_loop"),
    "week6": ("typed_dict", "eager"),
    "week7": ("processes", "serial_vectorised"),
    "week8": ("numba", "line_loop", "dominant_only"),
}


@contextlib.contextmanager
def _competitors(n: int) -> Iterator[None]:
    """``n`` CPU-bound processes for as long as the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def grade_week(week: str, kinds: tuple[str, ...], runs: int, competitors: int) -> list[dict]:
    """Grade ``kinds`` of ``week`` ``runs`` times; one record per run and submission."""
    from course_lib.grader import authoring
    from course_lib.grader.nbgrading import Course

    course = Course.locate(root=ROOT)
    records = []
    for run in range(1, runs + 1):
        load_before = os.getloadavg()[0]
        t0 = time.perf_counter()
        with _competitors(competitors):
            rows = authoring.selftest(course, week, kinds=("reference", *kinds))
        seconds = time.perf_counter() - t0
        load_after = os.getloadavg()[0]
        for row in rows:
            records.append({"week": week, "run": run, "kind": row.kind, "cells": row.cells,
                            "maxima": row.maxima, "problems": list(row.problems), "flags": list(row.flags),
                            "measured": row.measured,
                            "seconds": seconds, "load": [load_before, load_after]})
        print(f"  {week} run {run}: {seconds:.0f} s, load {load_before:.1f} -> {load_after:.1f}; "
              + ", ".join(f"{r.kind} {r.total():g}{' (!)' if r.problems else ''}"
                          + "".join(f" [{g} {x:.3g}x]" for g, x in r.measured.items()) for r in rows), flush=True)
    return records


def spreads(records: list[dict]) -> dict[str, tuple[str, float, float]]:
    """Per submission kind: (cell, largest spread of its stored points, its points)."""
    out: dict[str, tuple[str, float, float]] = {}
    for kind in dict.fromkeys(r["kind"] for r in records):
        mine = [r for r in records if r["kind"] == kind]
        best = ("-", 0.0, 0.0)
        for cell, points in mine[0]["maxima"].items():
            values = [r["cells"].get(cell, 0.0) for r in mine]
            spread = max(values) - min(values)
            if spread > best[1] + 1e-12:
                best = (cell, spread, points)
        out[kind] = best
    return out


def report(records: list[dict]) -> str:
    """The table: per week and submission, totals per run, the largest cell spread, problems."""
    lines = ["| week | submission | totals per run | largest spread (cell: spread / points) | "
             "runs outside the expected range |", "| --- | --- | --- | --- | --- |"]
    for week in dict.fromkeys(r["week"] for r in records):
        mine = [r for r in records if r["week"] == week]
        for kind, (cell, spread, points) in spreads(mine).items():
            runs = [r for r in mine if r["kind"] == kind]
            totals = ", ".join(f"{sum(r['cells'].values()):g}" for r in runs)
            bad = [f"run {r['run']}: {'; '.join(r['problems'])}" for r in runs if r["problems"]]
            share = f" ({spread / points:.0%})" if points else ""
            lines.append(f"| {week} | {kind} | {totals} | {cell}: {spread:.2f} / {points:g}{share} | "
                         f"{' / '.join(bad) or 'none'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", default=",".join(HONEST), help="comma-separated (default all eight)")
    parser.add_argument("--runs", type=int, default=5, help="gradings of each submission (default 5)")
    parser.add_argument("--competitors", type=int, default=1, help="CPU-bound processes beside each run")
    parser.add_argument("--kinds", default="", help="comma-separated submissions instead of the honest set")
    parser.add_argument("--json", help="also write every record to this file")
    args = parser.parse_args(argv)
    weeks = [w for w in args.weeks.split(",") if w]
    print(f"{os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}, "
          f"{args.competitors} competitor(s), {args.runs} runs", flush=True)
    records: list[dict] = []
    for week in weeks:
        kinds = tuple(k for k in args.kinds.split(",") if k) or HONEST.get(week, ())
        records += grade_week(week, kinds, args.runs, args.competitors)
        if args.json:
            Path(args.json).write_text(json.dumps(records, indent=1), encoding="utf-8")
    print()
    print(report(records))
    too_wide = [(r, s) for week in weeks
                for r, s in spreads([x for x in records if x["week"] == week]).items() if s[1] > 0.25 * s[2] + 1e-9]
    outside = [r for r in records if r["problems"]]
    print(f"\n{len(outside)} gradings outside their expected range; {len(too_wide)} submissions with a "
          f"cell whose spread is above a quarter of its points")
    return 1 if outside or too_wide else 0


if __name__ == "__main__":
    sys.exit(main())
