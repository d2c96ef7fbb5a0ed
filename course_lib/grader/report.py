"""The class report: one HTML page on how a batch of submissions was graded.

Per assignment: how many submissions, the distribution of scores, the distribution of what
the grader measured outside the students' kernels (one plot per speed cell, log scale, with
the cell's thresholds drawn in; the peak memory of memory cells against their limit; the
fitted exponent of scaling cells against the largest allowed), then a students x cells table
(points, the measurement, late, flags, a link to each student's feedback). Scores come from
the gradebook, after the late penalty, as ``grades.csv`` has them
(:func:`course_lib.grader.exports.grade_rows`; manual marks show), cell by cell too; speed-ups
and flags from the records ``course grade`` keeps in ``grading/done``, with the ``late``
flag of each submission's standing; memory and scaling measurements from the verdicts written into
the autograded notebooks; thresholds from the cells' source in ``solutions/``.

Examples
--------
>>> _histogram_bins([1.0, 10.0, 100.0], log=True)[:2].round(3).tolist()
[1.0, 1.259]
>>> _measurement("memory", "measured outside your kernel: peak traced memory 6.5 MB, resident ...")
6500000.0
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import re
import statistics
from collections import defaultdict
from pathlib import Path

import nbformat
import numpy as np

from course_lib.grader._nbgrader import _nbgrader_env, _quiet_warnings
from course_lib.grader.common import Course, CourseError, _environment

__all__ = ["write_report"]


def write_report(course: Course, output: str | Path | None = None) -> Path:
    """Write the class report (default ``grading/report.html``) and return its path.

    Raises
    ------
    CourseError
        when nothing has been graded in this grading folder yet.
    """
    records = _records(course)
    if not records:
        raise CourseError(f"nothing graded yet in {course.grading_dir} (run course grade first)")
    scores = _gradebook_scores(course)
    cells = _gradebook_cells(course)
    target = Path(output) if output else course.grading_dir / "report.html"
    sections = []
    for assignment in sorted(records):
        current = [{**r, "cell_scores": {**r.get("cell_scores", {}), **cells.get((assignment, r["student"]), {})}}
                   for r in records[assignment]]
        sections.append(_section(course, assignment, current, scores.get(assignment, {}), target))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_PAGE.format(sections="\n".join(sections), n=sum(len(r) for r in records.values())),
                      encoding="utf-8")
    return target


def _records(course: Course) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = defaultdict(list)
    for path in sorted((course.grading_dir / "done").glob("*/*.json")):
        try:
            found[path.parent.name].append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue  # a record being rewritten right now: it is in the next report
    return dict(found)


def _gradebook_scores(course: Course) -> dict[str, dict[str, tuple[float, float, str]]]:
    """assignment -> student -> (score after the late penalty, max, "late by ...; late penalty ..." or "")."""
    from course_lib.grader.exports import grade_rows

    scores: dict[str, dict[str, tuple[float, float, str]]] = defaultdict(dict)
    for row in grade_rows(course):
        if row.submitted:
            scores[row.assignment][row.student] = (row.score, row.max_score, row.late_text())
    return dict(scores)


def _gradebook_cells(course: Course) -> dict[tuple[str, str], dict[str, float]]:
    """(assignment, student) -> grade id -> points now (a manual mark given since grading included)."""
    from nbgrader.api import Gradebook

    cells: dict[tuple[str, str], dict[str, float]] = {}
    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        for assignment in gb.assignments:
            for submission in assignment.submissions:
                cells[(assignment.name, submission.student.id)] = {
                    g.name: float(g.score) for nb in submission.notebooks for g in nb.grades}
    return cells


def _cells(course: Course, assignment: str) -> dict[str, dict]:
    """Grade cells of the source notebooks in order: points, kind and thresholds."""
    from course_lib.grader.authoring import thresholds
    from course_lib.grader.verification import is_performance_cell

    cells: dict[str, dict] = {}
    for path in sorted((course.root / "solutions" / assignment).glob("*.ipynb")):
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:
            continue  # the report still shows what the records hold
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if not meta.get("grade") or meta.get("solution") or cell.cell_type != "code":
                continue
            grade_id = meta["grade_id"]
            kind = grade_id.rsplit("_", 1)[-1] if is_performance_cell(grade_id) else "correctness"
            cells[grade_id] = {"points": float(meta.get("points", 0)), "kind": kind,
                               "thresholds": thresholds(cell.source)}
    return cells


def _measurements(course: Course, student: str, assignment: str) -> dict[str, float]:
    """Peak memory and exponents the grader measured outside the kernel, from the autograded notebooks."""
    found: dict[str, float] = {}
    for path in sorted((course.grading_dir / "autograded" / student / assignment).glob("*.ipynb")):
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:
            continue
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            kind = grade_id.rsplit("_", 1)[-1]
            if kind not in ("memory", "scaling") or cell.cell_type != "code":
                continue
            for output in cell.get("outputs", []):
                text = output.get("text", "")
                if "outside your kernel" in text:
                    value = _measurement(kind, text)
                    if value is not None:
                        found[grade_id] = value
    return found


def _measurement(kind: str, text: str) -> float | None:
    from course_lib.grader.authoring import _measured_value

    return _measured_value(kind, None, text)


def _section(course: Course, assignment: str, records: list[dict], stored: dict[str, tuple[float, float]],
             target: Path) -> str:
    records = sorted(records, key=_by_student)
    cells = _cells(course, assignment)
    scores = [stored.get(r["student"], (r["score"], r["max_score"]))[0] for r in records]
    max_score = max((stored.get(r["student"], (0, r["max_score"]))[1] for r in records), default=0)
    measured = {r["student"]: {**_measurements(course, r["student"], assignment),
                               **{k: float(v) for k, v in r.get("speedups", {}).items()}} for r in records}
    figures = [_figure(scores, f"{assignment}: scores (out of {max_score:g})", "score", log=False)]
    performance = sorted({g for m in measured.values() for g in m} | {g for g, c in cells.items()
                                                                      if c["kind"] != "correctness"})
    for grade_id in performance:
        values = [m[grade_id] for m in measured.values() if grade_id in m]
        if not values:
            continue
        kind = cells.get(grade_id, {}).get("kind") or grade_id.rsplit("_", 1)[-1]
        lines = _threshold_lines(kind, cells.get(grade_id, {}).get("thresholds", []))
        title, label, log = {
            "speed": (f"{assignment}: {grade_id}, speed-up measured outside the kernel", "speed-up (x, log scale)", True),
            "memory": (f"{assignment}: {grade_id}, peak traced memory measured outside the kernel", "MB", False),
            "scaling": (f"{assignment}: {grade_id}, growth exponent measured outside the kernel", "exponent", False),
        }.get(kind, (f"{assignment}: {grade_id}", "measured", False))
        shown = [v / 1e6 for v in values] if kind == "memory" else values
        figures.append(_figure(shown, title, label, log=log, lines=lines))
    flagged = [r for r in records if r.get("flags") or _late(stored, r)]
    late = [r for r in records if _late(stored, r)]
    summary = (f"{len(records)} submissions; score median {_fmt(statistics.median(scores))}, "
               f"mean {_fmt(statistics.fmean(scores))} of {max_score:g} (after late penalties); "
               f"{len(late)} late; {len(flagged)} flagged.")
    table = _table(records, stored, cells, measured, target)
    return (f"<section><h2>{html.escape(assignment)}</h2><p>{summary}</p>\n{''.join(figures)}\n"
            f"<h3>Students and cells</h3>\n{table}</section>")


def _threshold_lines(kind: str, found: list) -> list[tuple[float, str]]:
    """(value, label) of each threshold to draw: speed-ups as written, memory in MB."""
    lines = []
    for t in found:
        for name in {"speed": ("at_least", "full_at", "zero_at"), "memory": ("limit", "full_at", "zero_at"),
                     "scaling": ("max_exponent", "full_at", "zero_at")}.get(kind, ()):
            value = t.number(name)
            if value is not None:
                lines.append((value / 1e6 if kind == "memory" else value, name))
    return lines


def _table(records: list[dict], stored: dict, cells: dict[str, dict], measured: dict[str, dict[str, float]],
           target: Path) -> str:
    # the source's cells in order, then any other cell the records or measurements name
    others = {g for r in records for g in r.get("cell_scores", {})} | {g for m in measured.values() for g in m}
    names = list(cells) + sorted(others - set(cells))
    head = "".join(f"<th>{html.escape(g)}<br><small>{cells[g]['points']:g} pts</small></th>" if g in cells
                   else f"<th>{html.escape(g)}</th>" for g in names)
    rows = []
    for record in records:
        student = record["student"]
        score = stored.get(student, (record["score"],))[0]
        flagged_cells = {c for kind, cs, _ in record.get("flags", []) for c in cs}
        tds = []
        for grade_id in names:
            points = record.get("cell_scores", {}).get(grade_id)
            text = "" if points is None else _fmt(points)
            value = measured.get(student, {}).get(grade_id)
            if value is not None:
                kind = cells.get(grade_id, {}).get("kind") or grade_id.rsplit("_", 1)[-1]
                text += f"<br><small>{_show(kind, value)}</small>"
            full = points is not None and grade_id in cells and points >= cells[grade_id]["points"] - 1e-9
            css = "flag" if grade_id in flagged_cells else ("full" if full else ("zero" if points == 0 else ""))
            tds.append(f'<td class="{css}">{text}</td>')
        links = " ".join(f'<a href="{html.escape(_link(Path(p), target))}">{html.escape(Path(p).name)}</a>'
                         for p in record.get("feedback", []))
        late = _late(stored, record)
        flags = "<br>".join(_flag_text(f) for f in record.get("flags", []) + ([["late", [], late]] if late else []))
        rows.append(f"<tr><td>{html.escape(student)}</td><td>{_fmt(score)}</td>{''.join(tds)}"
                    f"<td class=\"{'late' if late else ''}\">{html.escape(late)}</td><td>{flags}</td><td>{links}</td></tr>")
    return (f'<div class="wide"><table class="cells"><tr><th>student</th><th>score</th>{head}<th>late</th><th>flags</th>'
            '<th>feedback</th></tr>\n' + "\n".join(rows) + "</table></div>")


def _late(stored: dict, record: dict) -> str:
    entry = stored.get(record["student"])
    return entry[2] if entry and len(entry) > 2 else ""


def _show(kind: str, value: float) -> str:
    if kind == "memory":
        from course_lib.memory import fmt_bytes

        return fmt_bytes(value)
    if kind == "scaling":
        return f"exponent {value:.2f}"
    return f"{value:.3g}x"


def _link(path: Path, report: Path) -> str:
    try:
        return Path(os.path.relpath(path.resolve(), report.resolve().parent)).as_posix()
    except ValueError:  # another drive
        return path.resolve().as_uri()


def _figure(values: list[float], title: str, xlabel: str, log: bool,
            lines: list[tuple[float, str]] | None = None) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    low = min(values + [v for v, _ in lines or []])
    high = max(values + [v for v, _ in lines or []])
    ax.hist(values, bins=_histogram_bins(values + [low, high] if lines else values, log), color="#4477aa",
            edgecolor="white")
    for value, label in lines or []:
        ax.axvline(value, color="#cc3311", linestyle="--", linewidth=1.2)
        ax.annotate(f"{label}={value:g}", (value, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -12),
                    textcoords="offset points", color="#cc3311", fontsize=8)
    if log:
        ax.set_xscale("log")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of submissions are whole
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("submissions")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<figure><img alt="{html.escape(title)}" src="data:image/png;base64,{data}"></figure>'


def _histogram_bins(values: list[float], log: bool) -> np.ndarray:
    """21 edges spanning ``values`` (log-spaced when ``log``): every value falls in a bin.

    ``10 ** log10(x)`` can round above ``x`` (it does for 3.2 and for 7.1 beside 400): the
    outer edges are set to the extremes themselves, or the lowest value would be dropped.
    """
    low, high = min(values), max(values)
    if log:
        low, high = max(low, 1e-3), max(high, 1e-3)
        if high <= low:
            return np.array([low / 1.1, low * 1.1])
        edges = np.logspace(np.log10(low), np.log10(high), 21)
    elif high > low:
        edges = np.linspace(low, high, 21)
    else:
        return np.array([low - 0.5, low + 0.5])
    edges[0], edges[-1] = low, high
    return edges


def _flag_text(flag: list) -> str:
    kind, cells, detail = flag
    label = kind + (":" + ",".join(cells) if cells else "")
    return f"<b>{html.escape(label)}</b> {html.escape(detail)}"


def _by_student(record: dict) -> str:
    return record["student"]


def _fmt(x: float) -> str:
    return f"{x:.3g}"


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Measure First: class report</title>
<style>body{{font-family:sans-serif;max-width:72em;margin:2em auto}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.2em .5em;vertical-align:top;text-align:left}} figure{{margin:.5em 0}}
td.full{{background:#e6f4ea}} td.zero{{background:#fdecea}} td.flag{{background:#fff4ce}} td.late{{background:#fdecea}}
small{{color:#555}} div.wide{{overflow-x:auto}}</style>
</head><body><h1>Class report</h1><p>{n} graded submissions. Measurements are the grader's own,
made outside the students' kernels; dashed lines are the cells' thresholds. Scores are after any
late penalty, as in grades.csv. In the table, green: full points, red: none, yellow: a flag on
that cell.</p>
{sections}
</body></html>
"""
