"""How long does ``course grade`` take for the eight reference solutions, sandboxed or not?

A benchmark, not a test. The reference answers of every week (the solution's answer cells
put into the student version, as ``course selftest`` builds its "reference" submission)
are graded as one student's batch by :func:`course_lib.grader.nbgrading.grade`, the code
behind ``course grade``, into a temporary grading folder (the course's own is not
touched): first in the bubblewrap sandbox (the default), then with ``--no-sandbox``
(``sandbox=False``), unless ``--only`` says otherwise. It prints, per week and in all, the
wall seconds, the points against the maximum and any flag (``unsandboxed`` left out), and
the difference the sandbox makes per notebook.

Run from the repository root::

    .venv/bin/python benchmarks/grade_references.py                 # both, ~2 x 8 min on 2 cores
    .venv/bin/python benchmarks/grade_references.py --only sandbox --weeks week2,week3
    .venv/bin/python benchmarks/grade_references.py --only sandbox --profile --runs 3  # where the time goes
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # course_lib from this checkout

WEEKS = [f"week{i}" for i in range(1, 9)]


def _submissions(course, weeks: list[str], folder: Path) -> dict[str, float]:
    """Write folder/reference/WEEK/NAME.ipynb for every week; return each week's maximum."""
    import nbformat

    from course_lib.grader import authoring

    maxima: dict[str, float] = {}
    for week in weeks:
        answers = {name: authoring.solution_answers(nb)
                   for name, nb in authoring._source_notebooks(course, week).items()}
        for name, nb in authoring._released(course, week).items():
            target = folder / "reference" / week / f"{name}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(authoring._answered(nb, answers[name]), target)
        maxima[week] = sum(p for nb in authoring._source_notebooks(course, week).values()
                           for p in authoring._points(nb).values())
    return maxima


def run(weeks: list[str], sandbox: bool, timeout: int) -> tuple[float, list]:
    """Grade the references week by week (one ``grade`` call each, timed); return the rows."""
    from course_lib.grader import nbgrading

    rows = []
    with tempfile.TemporaryDirectory(prefix="course-refs-") as tmp:
        course = nbgrading.Course.locate(root=ROOT, grading_dir=Path(tmp) / "grading", timeout=timeout,
                                         sandboxed=sandbox)
        maxima = _submissions(course, weeks, Path(tmp) / "submissions")
        for week in weeks:
            t0 = time.perf_counter()
            results = nbgrading.grade(course, Path(tmp) / "submissions", [week], progress=False, force=True)
            seconds = time.perf_counter() - t0
            r = next((r for r in results if r.assignment == week), None)
            flags = ", ".join(f.label for f in r.flags if f.kind != "unsandboxed") if r else "not graded"
            rows.append((week, seconds, r.score if r else 0.0, maxima[week], flags, r.profile if r else {}))
    return sum(row[1] for row in rows), rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", default=",".join(WEEKS), help="comma-separated (default all eight)")
    parser.add_argument("--only", choices=("sandbox", "no-sandbox"), help="one condition only")
    parser.add_argument("--timeout", type=int, default=60, help="seconds a cell may run")
    parser.add_argument("--profile", action="store_true", help="also print where each week's time went")
    parser.add_argument("--runs", type=int, default=1, help="grade the references this many times")
    parser.add_argument("--json", metavar="FILE",
                        help="with --profile: also write each notebook's stages and cells' seconds to FILE")
    parser.add_argument("--project", type=int, default=4000,
                        help="notebooks in a term, for the projection (default 4000: 500 students x 8 weeks)")
    parser.add_argument("--project-workers", type=int, default=16, help="grading workers for the projection")
    args = parser.parse_args(argv)
    weeks = [w for w in args.weeks.split(",") if w]
    conditions = [c for c in ("sandbox", "no-sandbox") if args.only in (None, c)]
    print(f"{os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}", flush=True)
    totals, wrong = {}, 0
    for condition in [c for c in conditions for _ in range(args.runs)]:
        total, rows = run(weeks, sandbox=condition == "sandbox", timeout=args.timeout)
        totals[condition] = total
        each = sorted(row[1] for row in rows)
        print(f"\n{condition}: {total:.1f} s for {len(weeks)} notebooks "
              f"({total / len(weeks):.1f} s each, median {statistics.median(each):.1f} s, slowest "
              f"{each[-1]:.1f} s), load average {os.getloadavg()[0]:.2f}")
        if args.project:
            hours = args.project * (total / len(weeks)) / args.project_workers / 3600
            print(f"projection: {args.project:,} notebooks at this mean on {args.project_workers} workers "
                  f"(each with the cores one notebook had here): {hours:.2f} h")
        for week, seconds, score, maximum, flags, _ in rows:
            mark = "" if score >= maximum - 1e-9 else "   <- NOT FULL MARKS"
            wrong += bool(mark)
            print(f"  {week:<6} {seconds:7.1f} s  {score:g}/{maximum:g}  {flags or '-'}{mark}")
        if args.profile:
            from course_lib.grader.profile import format_profile

            print()
            print(format_profile((week, profile) for week, *_, profile in rows))
            if args.json:  # every cell's seconds, for choosing the next cut (the table shows three)
                Path(args.json).write_text(json.dumps({week: profile for week, *_, profile in rows}, indent=1))
    if len(totals) == 2:
        extra = totals["sandbox"] - totals["no-sandbox"]
        print(f"\nsandbox cost: {extra:+.1f} s in all, {extra / len(weeks):+.1f} s per notebook "
              f"({totals['sandbox'] / totals['no-sandbox']:.2f}x)")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
