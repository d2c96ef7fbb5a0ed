"""The class report: one HTML page on how a batch of submissions was graded.

Per assignment: how many submissions, the distribution of scores, the distribution of the
speed-ups measured outside the students' kernels (one plot per speed cell, log scale), and
every flagged submission with its flags. Scores come from the gradebook (so manual grades
show); speed-ups and flags from the records ``course grade`` keeps in ``grading/done``.

Examples
--------
>>> _histogram_bins([1.0, 10.0, 100.0], log=True)[:2].round(3).tolist()
[1.0, 1.259]
"""

from __future__ import annotations

import base64
import html
import io
import json
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np

from course_lib.grader.nbgrading import Course, CourseError, _environment, _nbgrader_env, _quiet_warnings

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
    sections = []
    for assignment in sorted(records):
        sections.append(_section(assignment, records[assignment], scores.get(assignment, {})))
    target = Path(output) if output else course.grading_dir / "report.html"
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


def _gradebook_scores(course: Course) -> dict[str, dict[str, tuple[float, float]]]:
    from nbgrader.api import Gradebook

    scores: dict[str, dict[str, tuple[float, float]]] = defaultdict(dict)
    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        for assignment in gb.assignments:
            for submission in assignment.submissions:
                scores[assignment.name][submission.student.id] = (float(submission.score),
                                                                  float(submission.max_score))
    return dict(scores)


def _section(assignment: str, records: list[dict], stored: dict[str, tuple[float, float]]) -> str:
    scores = [stored.get(r["student"], (r["score"], r["max_score"]))[0] for r in records]
    max_score = max((stored.get(r["student"], (0, r["max_score"]))[1] for r in records), default=0)
    speedups: dict[str, list[float]] = defaultdict(list)
    for record in records:
        for cell, ratio in record.get("speedups", {}).items():
            speedups[cell].append(float(ratio))
    figures = [_figure(scores, f"{assignment}: scores (out of {max_score:g})", "score", log=False)]
    figures += [_figure(values, f"{assignment}: {cell}, speed-up measured outside the kernel",
                        "speed-up (x, log scale)", log=True) for cell, values in sorted(speedups.items())]
    flagged = [r for r in records if r.get("flags")]
    rows = "\n".join(
        f"<tr><td>{html.escape(r['student'])}</td><td>{_fmt(stored.get(r['student'], (r['score'],))[0])}</td>"
        f"<td>{'<br>'.join(_flag_text(f) for f in r['flags'])}</td></tr>" for r in sorted(flagged, key=_by_student))
    table = (f"<table><tr><th>student</th><th>score</th><th>flags</th></tr>\n{rows}</table>" if flagged
             else "<p>No submission is flagged.</p>")
    summary = (f"{len(records)} submissions; score median {_fmt(statistics.median(scores))}, "
               f"mean {_fmt(statistics.fmean(scores))} of {max_score:g}; {len(flagged)} flagged.")
    return (f"<section><h2>{html.escape(assignment)}</h2><p>{summary}</p>\n{''.join(figures)}\n"
            f"<h3>Flagged submissions</h3>\n{table}</section>")


def _figure(values: list[float], title: str, xlabel: str, log: bool) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    ax.hist(values, bins=_histogram_bins(values, log), color="#4477aa", edgecolor="white")
    if log:
        ax.set_xscale("log")
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
    low, high = min(values), max(values)
    if log:
        low, high = max(low, 1e-3), max(high, 1e-3)
        return np.logspace(np.log10(low), np.log10(high) + 1e-9, 21) if high > low else np.array([low / 1.1, low * 1.1])
    return np.linspace(low, high, 21) if high > low else np.array([low - 0.5, low + 0.5])


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
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.2em .5em;vertical-align:top;text-align:left}} figure{{margin:.5em 0}}</style>
</head><body><h1>Class report</h1><p>{n} graded submissions. Speed-ups are the grader's own
measurements, made outside the students' kernels.</p>
{sections}
</body></html>
"""
