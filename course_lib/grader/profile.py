"""Where ``course grade`` spends a notebook's time: the grader measured with the course's own method.

Every submission is timed stage by stage with :func:`course_lib.timing.stages`: copying it
in, nbgrader's autograde (split, from the timings the kernel's preprocessor records, into
the sandbox and kernel starting, the notebook's own cells, the tests and the performance
tests run in the kernel, and nbgrader's own work around them), the check outside the kernel
(split, from the verifier's own report, into starting the verifier and the student worker,
re-running the student's cells, the tests and the performance tests; the last with its
parts: staging inputs, the timed batches of each side, checking results), the feedback, and
the gradebook and resume records. Each cell's own seconds are kept beside the stages
(``autograde: cell ID``, ``verify: cell ID``), so that the next dominant part can be named.
``course grade --profile`` prints the table, and each notebook's dearest cells.

Examples
--------
>>> row = {"autograde: performance tests": 3.0, "verify: performance tests": 6.0, "feedback": 1.0,
...        "verify: cell test_speed": 5.5}
>>> top_stages(row, 2)
[('verify: performance tests', 6.0), ('autograde: performance tests', 3.0)]
>>> top_cells(row)
[('verify: cell test_speed', 5.5)]
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["kernel_stages", "verifier_stages", "top_stages", "top_cells", "format_profile", "PARTS",
           "CELL"]

PARTS = ("staging inputs", "timed batches (student)", "timed batches (reference)", "result checks")
"""Parts of the verifier's performance tests, shown indented under them (not added to the total)."""

CELL = "cell "
"""Prefix of one cell's own seconds (``cell ID``): a part of a stage, never added to the total."""


def kernel_stages(timings: Mapping[str, Any] | None, autograde_seconds: float,
                  is_test: Mapping[str, bool], is_performance: Mapping[str, bool]) -> dict[str, float]:
    """nbgrader's autograde split by what its kernel ran, from the preprocessor's ``timings``.

    ``timings`` is what :class:`course_lib.grader._nbpreprocessors.CourseExecute` records:
    ``kernel_start`` and ``cells`` as ``[index, grade_id, seconds]``. A cell is a test when
    ``is_test[grade_id]``, a performance test when ``is_performance[grade_id]`` too; what
    the kernel's run does not explain is nbgrader's own work (reading, writing, the
    gradebook). Each cell's own seconds come back too, as ``autograde: cell ID`` (an
    unmarked cell as ``cell #INDEX``).
    """
    if not timings:
        return {"autograde": autograde_seconds}
    parts = {"autograde: sandbox and kernel start": float(timings.get("kernel_start", 0.0)),
             "autograde: notebook cells": 0.0, "autograde: tests": 0.0, "autograde: performance tests": 0.0}
    cells: dict[str, float] = {}
    for index, grade_id, seconds in timings.get("cells", []):
        if grade_id and is_performance.get(grade_id):
            parts["autograde: performance tests"] += seconds
        elif grade_id and is_test.get(grade_id):
            parts["autograde: tests"] += seconds
        else:
            parts["autograde: notebook cells"] += seconds
        name = f"autograde: {CELL}{grade_id or f'#{index}'}"     # an unmarked cell by its place
        cells[name] = cells.get(name, 0.0) + seconds
    parts["autograde: nbgrader's own work"] = max(0.0, autograde_seconds - sum(parts.values()))
    return {**parts, **cells}


def verifier_stages(report: Mapping[str, float], verify_seconds: float) -> dict[str, float]:
    """The check outside the kernel split by the verifier's own report (``verify_notebook(profile=...)``)."""
    if not report:
        return {"verify": verify_seconds}
    main = {f"verify: {k}": float(v) for k, v in report.items() if not _is_part(k)}
    parts = {f"verify: {k}": float(v) for k, v in report.items() if _is_part(k)}
    main = {"verify: verifier start": max(0.0, verify_seconds - sum(main.values())), **main}
    return {**main, **parts}


def top_stages(row: Mapping[str, float], n: int = 3) -> list[tuple[str, float]]:
    """The ``n`` stages that took longest (parts of the performance tests left out)."""
    main = [(k, v) for k, v in row.items() if not _is_part(k)]
    return sorted(main, key=lambda kv: kv[1], reverse=True)[:n]


def top_cells(row: Mapping[str, float], n: int = 3) -> list[tuple[str, float]]:
    """The ``n`` cells that took longest, in the kernel or in the verifier."""
    cells = [(k, v) for k, v in row.items() if _is_cell(k)]
    return sorted(cells, key=lambda kv: kv[1], reverse=True)[:n]


def format_profile(rows: Iterable[tuple[str, Mapping[str, float]]]) -> str:
    """A table of stages (rows) by notebook (median and share over all), for the terminal.

    ``rows`` are ``(label, profile)`` pairs, one per graded notebook.
    """
    rows = [(label, dict(profile)) for label, profile in rows if profile]
    if not rows:
        return "No notebook was graded in this run: nothing to profile."
    # One cell's seconds go in each notebook's own line below, not in the table of stages.
    stages = list(dict.fromkeys(k for _, p in rows for k in p if not _is_cell(k)))
    totals = {label: sum(v for k, v in p.items() if not _is_part(k)) for label, p in rows}
    grand = sum(totals.values())
    lines = [f"Where grading's time went ({len(rows)} notebook{'s' if len(rows) != 1 else ''}, "
             f"{grand:.1f} s in all, median {statistics.median(totals.values()):.1f} s per notebook):", "",
             f"{'stage':<44} {'median s':>9} {'max s':>8} {'share':>6}"]
    for stage in stages:
        values = [p.get(stage, 0.0) for _, p in rows]
        share = sum(values) / grand if grand else 0.0
        name = ("    of which " + stage.split(": ", 1)[-1]) if _is_part(stage) else stage
        lines.append(f"{name:<44} {statistics.median(values):>9.2f} {max(values):>8.2f} {share:>6.1%}")
    lines += ["", f"{'notebook':<30} {'seconds':>8}  top three stages"]
    for label, profile in rows:
        top = ", ".join(f"{k} {v:.1f}" for k, v in top_stages(profile))
        lines.append(f"{label:<30} {totals[label]:>8.1f}  {top}")
        cells = ", ".join(f"{k.replace(CELL, '', 1)} {v:.1f}" for k, v in top_cells(profile))
        if cells:
            lines.append(f"{'':<30} {'':>8}  dearest cells: {cells}")
    return "\n".join(lines)


def _is_part(stage: str) -> bool:
    return stage.split(": ", 1)[-1] in PARTS or _is_cell(stage)


def _is_cell(stage: str) -> bool:
    return stage.split(": ", 1)[-1].startswith(CELL)
