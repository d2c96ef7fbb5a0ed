"""The feedback page a student gets back: what each graded cell scored, and why, readably.

:func:`render_feedback` turns a graded notebook (``grading/autograded/...``, with the
out-of-kernel verdicts that :mod:`course_lib.grader.verify` appends to the speed cells)
and the gradebook's scores into one self-contained HTML page:

- a table with a row per graded cell: its name (grade id), its part, the points, and how
  it is scored (all or nothing, or partial credit), with borders;
- one sentence on how speed is graded;
- per speed cell, the speed-up that counted (the one measured outside the student's
  kernel), its interval, what the test needs, how the points follow the speed-up, and
  the machine it was measured on; a figure printed inside the kernel is labelled as not
  counted;
- the student's own cells with their outputs; of an error only its type and message: no
  traceback, so no line of the grader's or the hidden tests' source;
- a written answer marked by hand (an nbgrader markdown cell with ``grade`` and ``solution``
  set): a row with its points, counted in the total, and the student's text;
- text that wraps (no line runs off the right edge).

Hidden-test regions are removed from every cell, as ``HideHiddenTests`` removes them.

:func:`write_pages` is the feedback stage of ``course grade`` (see
:mod:`course_lib.grader.nbgrading`): it writes one submission's pages once its scores are
settled; :func:`refresh_feedback` writes them again from the gradebook as it is now.
"""

from __future__ import annotations

import copy
import functools
import html
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from course_lib.grader._text import remember_host_paths, scrub_host, writable
from course_lib.grader.common import GRADED_OUTSIDE_NOTE, Flag
from course_lib.grader.intake import CopiedIn

__all__ = ["SpeedVerdict", "Standing", "parse_verdict", "render_feedback", "write_feedback", "write_submission_feedback",
           "write_pages", "refresh_feedback", "withhold_after_hidden_tests", "SPEED_SENTENCE", "WITHHELD",
           "MARKED_BY_HAND"]

SPEED_SENTENCE = (
    "Speed is graded as a ratio: your function and the provided version run side by side on "
    "the grading machine, on fresh inputs, and the speed-up that counts is the one the "
    "grader measures outside your notebook's kernel, in a process of its own; a figure "
    "printed inside your notebook is shown for information only.")

MARKED_BY_HAND = ("your instructor reads this answer and marks it by hand after the automatic grading; "
                  "until then it counts 0")


@dataclass(frozen=True)
class SpeedVerdict:
    """The out-of-kernel verdict of one speed cell, as the grader wrote it under the cell."""

    score: float
    max_score: float
    used: bool
    detail: str
    speedup: float | None = None
    low: float | None = None
    high: float | None = None
    needs: str = ""
    problem: str = ""


@dataclass(frozen=True)
class Standing:
    """What ``grades.csv`` says of the whole submission: the page's score line must agree with it."""

    score: float
    max_score: float
    penalty: float = 0.0
    late: str = ""
    """``late by 1 h 5 min; late penalty 6 points`` ("" when on time)."""
    when: str = ""
    """When it was submitted and on whose word (see :meth:`course_lib.grader.exports.GradeRow.time_text`)."""
    notebooks: int = 1


WITHHELD = ("[output withheld: this cell ran after hidden tests had been in your kernel, where your "
            "code could have printed them; run the visible tests yourself with check() to see their output]")


def withhold_after_hidden_tests(nb) -> int:
    r"""Withhold, in place, what cells printed once a hidden test had run in the kernel; return how many.

    nbgrader runs the hidden tests in the student's own kernel, so from the first cell that
    holds one, the student's code could print them (a hook on the kernel's cell events, the
    input history, the calling frame) or put them in an error message. From that cell on,
    only what the grader itself wrote is kept: the out-of-kernel verdict appended last to a
    speed cell, the note on a cell graded outside the kernel only, a partial-credit number,
    and the grader's own errors (not run, kernel died, timeout). Other outputs become one
    note; an error keeps its type, not its message.

    Examples
    --------
    >>> from nbformat.v4 import new_code_cell, new_notebook, new_output
    >>> test = new_code_cell("### BEGIN HIDDEN TESTS\nassert f(1) == 2\n### END HIDDEN TESTS",
    ...                      outputs=[new_output("stream", name="stdout", text="assert f(1) == 2")])
    >>> nb = new_notebook(cells=[new_code_cell("f = g", outputs=[new_output("stream", text="hi")]), test])
    >>> withhold_after_hidden_tests(nb), nb.cells[0].outputs[0].text, nb.cells[1].outputs[0].text.strip() == WITHHELD
    (1, 'hi', True)
    """
    first = next((i for i, cell in enumerate(nb.cells)
                  if cell.cell_type == "code" and _HIDDEN_BEGIN in cell.source), None)
    if first is None:
        return 0
    changed = 0
    for cell in nb.cells[first:]:
        if cell.cell_type != "code" or not cell.get("outputs"):
            continue
        kept, withheld = [], False
        for index, output in enumerate(cell.outputs):
            kind = output.get("output_type")
            last = index == len(cell.outputs) - 1
            if kind == "stream" and last and parse_verdict(output.get("text", "")):
                kept.append(output)  # the grader's, appended after the kernel had finished
            elif kind == "stream" and index == 0 and output.get("text") == GRADED_OUTSIDE_NOTE:
                kept.append(output)  # the grader's, in place of a cell the kernel did not run
            elif kind == "error" and output.get("ename") in _GRADER_ERRORS:
                kept.append(output)
            elif kind == "error":
                kept.append(nbformat.v4.new_output("error", ename=output.get("ename", "Error"),
                                                   evalue="(message withheld)", traceback=[]))
                withheld = True
            elif kind == "execute_result" and _is_number(output.get("data", {}).get("text/plain", "")):
                kept.append(output)  # a partial-credit score
            else:
                withheld = True
        if withheld:
            kept.insert(0, nbformat.v4.new_output("stream", name="stdout", text=WITHHELD + "\n"))
            changed += 1
        cell.outputs = kept
    return changed


def parse_verdict(text: str) -> SpeedVerdict | None:
    """The verdict in a cell output's ``text``, or None when it holds none.

    Examples
    --------
    >>> v = parse_verdict("Checked again by the grader outside your kernel: 0 / 4. GradingError: "
    ...                   "Not fast enough: measured outside your kernel: 0.92x, 95% interval 0.5x "
    ...                   "to 1.6x over 9 rounds; this test needs 10x (a measured 9x passes)")
    >>> v.speedup, v.low, v.high, v.needs, v.problem
    (0.92, 0.5, 1.6, '10x (a measured 9x passes)', 'Not fast enough')
    """
    match = _VERDICT.search(text)
    if not match:
        return None
    detail = match.group("detail").strip()
    speed = _SPEEDUP.search(detail)
    needs = _NEEDS.search(detail)
    problem = _PROBLEM.match(detail)
    return SpeedVerdict(float(match.group("score")), float(match.group("max")), not match.group("kept"),
                        detail, *(float(x) for x in speed.groups()) if speed else (None, None, None),
                        needs=needs.group(1).strip() if needs else "",
                        problem=problem.group(1).strip() if problem else "")


def render_feedback(nb, scores: dict[str, float], rules: list[dict] | None = None, *, title: str = "",
                    machine: str | None = None, marked: dict[str, str] | None = None,
                    standing: Standing | None = None) -> str:
    """The feedback page of the graded notebook ``nb`` as HTML.

    Parameters
    ----------
    nb : NotebookNode
        The autograded notebook, with its outputs and the grader's verdicts.
    scores : dict
        Points stored in the gradebook, by grade id (what counts).
    rules : list of dict, optional
        :func:`course_lib.grader.student_repo.grading_rules` of the source notebook: which
        cells give partial credit and what they ask for.
    title : str
        The page's title, e.g. ``"example: example.ipynb (student bob)"``.
    machine : str, optional
        The grading machine in words; by default this one's.
    marked : dict, optional
        Grade ids the instructor has marked by hand (or commented on), with their comment
        ("" for none): a written answer in it no longer "counts 0 until marked".
    standing : Standing, optional
        The assignment's score after any late penalty, as ``grades.csv`` has it; by
        default the page's score is the sum of its cells.

    Examples
    --------
    >>> cell = nbformat.v4.new_code_cell("assert 1", metadata={"nbgrader": {
    ...     "grade": True, "grade_id": "test_one", "points": 2, "solution": False}})
    >>> page = render_feedback(nbformat.v4.new_notebook(cells=[cell]), {"test_one": 2.0}, title="t")
    >>> "<td><code>test_one</code></td>" in page and "2 / 2" in page
    True
    """
    by_id = {rule["grade_id"]: rule for rule in rules or []}
    marked = marked or {}
    machine = machine or _machine()
    nb = copy.deepcopy(nb)
    withhold_after_hidden_tests(nb)
    rows, blocks, part = [], [], ""
    total = available = 0.0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = _PART.search(cell.source)
            if match:
                part = match.group(1).strip()
                blocks.append(f"<h2>{html.escape(part)}</h2>")
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade") and meta.get("solution"):  # a written answer, marked by hand
                grade_id = meta.get("grade_id", "")
                max_points, got = float(meta.get("points", 0)), float(scores.get(grade_id, 0.0))
                total, available = total + got, available + max_points
                name, where = html.escape(grade_id), html.escape(part.split(":")[0]) or "-"
                state = _marked_text(marked[grade_id]) if grade_id in marked else MARKED_BY_HAND
                rows.append(f"<tr><td><code>{name}</code></td><td>{where}</td><td>{_pts(got)} / "
                            f"{_pts(max_points)}</td><td>marked by hand</td><td>{html.escape(state)}</td></tr>")
                blocks.append(f"<section class='cell'><div class='cellhead'>your written answer: <code>{name}</code>"
                              f" &middot; <b>{_pts(got)} / {_pts(max_points)} points</b> &middot; marked by hand"
                              f"</div><pre>{html.escape(cell.source.strip())}</pre>{_comment(marked.get(grade_id))}"
                              "</section>")
            continue
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        grade_id = meta.get("grade_id", "")
        graded, rule = bool(meta.get("grade")), {}
        if not (graded or meta.get("solution")):
            continue  # provided code: the student has it already
        source = _public_source(cell.source)
        verdict = next((v for v in map(parse_verdict, _texts(cell)) if v), None)
        if graded:
            max_points = float(meta.get("points", 0))
            got = float(scores.get(grade_id, 0.0))
            total, available = total + got, available + max_points
            rule = by_id.get(grade_id, {})
            scored = "partial credit" if rule.get("partial") else "all or nothing"
            rows.append(f"<tr><td><code>{html.escape(grade_id)}</code></td><td>{html.escape(part.split(':')[0]) or '-'}"
                        f"</td><td>{_pts(got)} / {_pts(max_points)}</td><td>{scored}</td>"
                        f"<td>{html.escape(_summary(cell, verdict, got, max_points, grade_id))}</td></tr>")
            head = (f"<div class='cellhead'><code>{html.escape(grade_id)}</code> &middot; "
                    f"{html.escape(part or 'graded cell')} &middot; <b>{_pts(got)} / {_pts(max_points)} "
                    f"points</b> &middot; {scored}</div>")
        else:
            head = f"<div class='cellhead'>your answer: <code>{html.escape(grade_id)}</code></div>"
        body = [head]
        if source.strip():
            body.append(f"<pre class='source'>{html.escape(source)}</pre>")
        performance = _kind(grade_id) != "correctness"
        if verdict and performance:
            body.append(_speed_block(verdict, rule.get("says", "") if graded else "", machine, _kind(grade_id)))
        elif verdict:
            body.append(_check_block(verdict, float(scores.get(grade_id, 0.0))))
        body += _outputs(cell, graded, float(meta.get("points", 0)), float(scores.get(grade_id, 0.0)),
                         speed=verdict is not None and performance, checked=verdict is not None)
        body.append(_comment(marked.get(grade_id)))
        blocks.append(f"<section class='cell'>{''.join(body)}</section>")
    table = ("<table><thead><tr><th>cell</th><th>part</th><th>points</th><th>scored</th><th>result</th>"
             f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")
    return _PAGE.format(title=html.escape(title), score=_score_lines(total, available, standing), table=table,
                        speed=html.escape(SPEED_SENTENCE), cells="\n".join(blocks))


def write_feedback(autograded: str | Path, target: str | Path, scores: dict[str, float],
                   source: str | Path | None = None, *, title: str = "", marked: dict[str, str] | None = None,
                   standing: Standing | None = None) -> Path:
    """Render the feedback of the graded notebook at ``autograded`` into ``target``; return it.

    ``source`` is the instructor's notebook (``solutions/...``), read for how each cell is
    scored; none of its hidden text reaches the page. ``marked`` and ``standing``: as
    :func:`render_feedback` takes them.
    """
    from course_lib.grader.student_repo import grading_rules

    nb = nbformat.read(autograded, as_version=4)
    rules = grading_rules(source) if source else []
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A lone surrogate in a student's cell (JSON can carry one) must not stop the page.
    page = writable(render_feedback(nb, scores, rules, title=title, marked=marked, standing=standing))
    partial = target.with_name(target.name + ".partial")
    partial.write_text(page, encoding="utf-8")
    os.replace(partial, target)  # a student never opens half a page
    return target


def write_submission_feedback(course, student: str, assignment: str, row=None) -> list[Path]:
    """Replace nbgrader's feedback pages of one graded submission with :func:`render_feedback`'s.

    ``course`` is a :class:`course_lib.grader.common.Course`. Everything comes from the
    gradebook as it is now: the cells' points (after the out-of-kernel verdicts, with any
    manual mark), which cells the instructor marked or commented on, and the submission's
    standing (late penalty included, as :func:`course_lib.grader.exports.grade_rows`
    computes it for ``grades.csv``; ``row``, that standing when the caller has it). Run again
    after marking (``course feedback``), it brings the pages up to date without grading
    anything again.
    """
    from course_lib.grader.exports import grade_rows

    remember_host_paths(course=course.root, grading=course.grading_dir)
    scores, marked = _gradebook_cells(course, student, assignment)
    rows = [row] if row is not None else grade_rows(course, assignments=[assignment], students=[student])
    rows = [r for r in rows if r.submitted]
    notebooks = sorted(course.step("autograded", student, assignment).glob("*.ipynb"))
    standing = None
    if rows:
        row = rows[0]
        standing = Standing(row.score, row.max_score, row.penalty, row.late_text(),
                            row.time_text() if row.timestamp is not None else "", max(1, len(notebooks)))
    written = []
    for path in notebooks:
        target = course.step("feedback", student, assignment) / f"{path.stem}.html"
        written.append(write_feedback(path, target, scores, course.root / "solutions" / assignment / path.name,
                                      title=f"{assignment}: {path.name}, feedback for {student}",
                                      marked=marked, standing=standing))
    return written


def write_pages(course, copied: CopiedIn, log_file: Path, graded: bool) -> tuple[tuple[Path, ...], tuple[Flag, ...]]:
    """The feedback stage of ``course grade``: one submission's pages; returns (every page, flags).

    Runs once a submission's scores are settled (after the later reading of its undecided
    cells, if any): a page from :func:`write_submission_feedback` for each notebook the
    kernel graded (``graded``: nbgrader's autograde succeeded), a plain page saying why for
    each that could not be graded (``copied``: what the intake found). nbgrader's own
    ``GenerateFeedback`` runs first, its outcome in ``log_file``; its failure is a
    ``grading-error`` flag.
    """
    from nbgrader.converters import GenerateFeedback

    from course_lib.grader._nbgrader import _append_log, _last_error, _run

    student, assignment = copied.submission.student, copied.submission.assignment
    flags: list[Flag] = []
    if graded:
        # nbgrader's step keeps its files and permissions (the feedback folder, timestamp.txt and
        # the submission's other files, which its exchange releases), but not its page: ours
        # replaces it at once, and rendering nbgrader's cost 0.36-0.69 s a notebook, more than
        # the rest of this stage (ours 0.06-0.09 s; December 2026).
        outcome = _run(course, GenerateFeedback, course.config(), assignment, student, force=True,
                       exporter_class=_placeholder_class(), preprocessors=[])
        _append_log(log_file, "generate_feedback", outcome)
        if not outcome["success"]:
            flags.append(Flag("grading-error", (), "feedback: " + _last_error(outcome)))
        else:  # a page a student can read, in place of nbgrader's
            write_submission_feedback(course, student, assignment)
    pages = _write_missing_feedback(course, student, assignment, copied.problems, list(copied.missing))
    return pages, tuple(flags)


def refresh_feedback(course, submissions: list[tuple[str, str]] | None = None) -> list[Path]:
    """Write the feedback pages again from the gradebook as it is now; return them.

    ``submissions``: (student, assignment) pairs, default every graded submission that has
    autograded notebooks. Nothing is graded again: the pages take in manual marks and
    comments given since (formgrader, ``course mark``), a changed due date and the late
    penalty, so that they say what ``grades.csv`` says.
    """
    from course_lib.grader.exports import grade_rows

    if submissions is not None and not submissions:
        return []
    rows = {(r.student, r.assignment): r for r in grade_rows(course) if r.submitted}  # one pass over the gradebook
    wanted = sorted(rows) if submissions is None else submissions
    written: list[Path] = []
    for student, assignment in wanted:
        if (student, assignment) in rows and any(course.step("autograded", student, assignment).glob("*.ipynb")):
            written += write_submission_feedback(course, student, assignment, rows[(student, assignment)])
    return written


def _gradebook_cells(course, student: str, assignment: str) -> tuple[dict[str, float], dict[str, str]]:
    """(points by grade id, {grade id: comment} of the cells marked or commented on by hand)."""
    from nbgrader.api import Gradebook, MissingEntry

    from course_lib.grader._nbgrader import _nbgrader_env, _quiet_warnings
    from course_lib.grader.common import _environment

    scores: dict[str, float] = {}
    marked: dict[str, str] = {}
    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            return scores, marked
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                scores[grade.name] = float(grade.score)
                if grade.manual_score is not None:
                    marked[grade.name] = ""
            for comment in notebook.comments:
                text = (comment.manual_comment or "").strip()
                if text:
                    marked[comment.name] = text
    return scores, marked


# --- private helpers -------------------------------------------------------------------------

@functools.cache
def _placeholder_class() -> type:
    from nbconvert.exporters import Exporter
    from traitlets import default

    class _Placeholder(Exporter):
        """A page that says the feedback is on its way: what nbgrader's step writes before ours."""

        @default("file_extension")
        def _file_extension_default(self) -> str:
            return ".html"

        def from_notebook_node(self, nb: Any, resources: Any = None, **kw: Any) -> tuple[str, Any]:
            _, resources = super().from_notebook_node(nb, resources, **kw)
            return _PLACEHOLDER_PAGE, resources

    return _Placeholder


_PLACEHOLDER_PAGE = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Feedback</title></head>"
                     "<body><p>This notebook's feedback page has not been written yet. If it stays so, "
                     "ask your instructor.</p></body></html>\n")

_VERDICT = re.compile(r"Checked (?:again )?by the grader outside your kernel: (?P<score>[\d.]+) / (?P<max>[\d.]+)"
                      r"(?P<kept> \((?:not used|it could not be checked)[^)]*\))?\.\s*(?P<detail>.*)", re.DOTALL)
_SPEEDUP = re.compile(r"([\d.]+)x, 95% interval ([\d.]+)x to ([\d.]+)x")
_NEEDS = re.compile(r"this test needs ([^;]*)")
_PROBLEM = re.compile(r"^\w*Error: ([^:]+):")
_PART = re.compile(r"^#{1,4}\s*((?:Part|Task)\s+\d+\b[^\n]*)", re.MULTILINE)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_HIDDEN_BEGIN = "### BEGIN HIDDEN TESTS"
# The grader's own errors (course_lib.grader._nbpreprocessors): their messages are its own.
_GRADER_ERRORS = frozenset({"KernelDied", "CellNotRun", "CellTimeoutError"})
_HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[^\n]*\n?", re.MULTILINE | re.DOTALL)


# What a performance cell's points follow, by the suffix of its grade id.
_MEASURED = {"speed": "the speed-up", "memory": "the peak memory", "scaling": "the growth exponent"}


def _kind(grade_id: str) -> str:
    """``speed``, ``memory`` or ``scaling`` for a performance cell's grade id, else ``correctness``."""
    suffix = grade_id.rsplit("_", 1)[-1]
    return suffix if suffix in _MEASURED else "correctness"


def _public_source(source: str) -> str:
    return _HIDDEN.sub("", source).rstrip()


def _texts(cell) -> list[str]:
    return [o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream"]


def _summary(cell, verdict: SpeedVerdict | None, got: float, max_points: float, grade_id: str = "") -> str:
    if verdict and verdict.speedup is not None:
        return f"{verdict.speedup:g}x measured outside your kernel" + (f"; needs {verdict.needs}" if verdict.needs else "")
    if verdict and verdict.score < verdict.max_score:
        return _first_line(verdict.detail)  # the grader's own words, from outside the kernel
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return _error_line(output)
    return "passed" if got == max_points else ""


def _check_block(verdict: SpeedVerdict, got: float) -> str:
    """A correctness cell as the grader checked it outside the kernel: why it failed, in its words."""
    if verdict.score < verdict.max_score:
        return (f"<p class='verdict'><b>Checked by the grader outside your kernel: {_pts(verdict.score)} / "
                f"{_pts(verdict.max_score)}.</b> {html.escape(_clean(verdict.detail))}</p>")
    if got < verdict.score:
        return (f"<p class='verdict'>Outside your kernel this cell passed, but in your kernel it failed, and "
                f"the lower score counts: {_pts(got)} / {_pts(verdict.max_score)}.</p>")
    return ""


def _marked_text(comment: str) -> str:
    return "marked by your instructor" + (f": {comment}" if comment else "")


def _comment(comment: str | None) -> str:
    if not comment:
        return ""
    return f"<p class='comment'><b>Your instructor's comment:</b> {html.escape(comment)}</p>"


def _score_lines(total: float, available: float, standing: Standing | None) -> str:
    """The page's score: the cells' sum, or the assignment's standing less any late penalty."""
    if standing is None:
        return f"<p><b>Score: {_pts(total)} / {_pts(available)} points.</b></p>"
    lines = [f"<p><b>Score: {_pts(standing.score)} / {_pts(standing.max_score)} points.</b>"]
    if standing.late:
        earned = standing.score + standing.penalty
        lines[0] += (f" Your cells earned {_pts(earned)}; a late penalty of {_pts(standing.penalty)} "
                     f"point{'' if standing.penalty == 1 else 's'} was taken off.")
    lines[0] += "</p>"
    if standing.notebooks > 1:
        lines.append(f"<p>This notebook's cells: {_pts(total)} / {_pts(available)} points (the score is the "
                     f"whole assignment's, {standing.notebooks} notebooks).</p>")
    if standing.late:
        lines.append(f"<p class='late'><b>Late:</b> {html.escape(standing.late)}. {html.escape(standing.when)}.</p>")
    elif standing.when:
        lines.append(f"<p class='context'>{html.escape(standing.when[0].upper() + standing.when[1:])}.</p>")
    return "\n".join(lines)


def _first_line(text: str) -> str:
    lines = _clean(text).strip().splitlines()
    return lines[0] if lines else ""


def _speed_block(verdict: SpeedVerdict, says: str, machine: str, kind: str = "speed") -> str:
    lines = []
    if verdict.speedup is not None:
        verdict_word = f"{verdict.problem}. " if verdict.problem else ""
        lines.append(f"<p class='verdict'><b>{html.escape(verdict_word)}The speed-up that counted: "
                     f"{verdict.speedup:g}x</b> "
                     f"(95% interval {verdict.low:g}x to {verdict.high:g}x), measured by the grader outside "
                     f"your kernel{'' if verdict.used else ' (it could not be checked, so the cell scores 0)'}."
                     + (f" This test needs {html.escape(verdict.needs)}." if verdict.needs else "")
                     + f" Score: {_pts(verdict.score)} / {_pts(verdict.max_score)}.</p>")
    else:
        lines.append(f"<p class='verdict'><b>Checked by the grader outside your kernel: {_pts(verdict.score)} / "
                     f"{_pts(verdict.max_score)}.</b> {html.escape(_clean(verdict.detail))}</p>")
    if says:
        lines.append(f"<p>How the points follow {_MEASURED.get(kind, 'the measurement')}: {html.escape(says)}</p>")
    lines.append(f"<p class='context'>Measured on the grading machine ({html.escape(machine)}): "
                 f"{html.escape(_clean(verdict.detail))}</p>")
    return "".join(lines)


def _outputs(cell, graded: bool, max_points: float, got: float, speed: bool, checked: bool = False) -> list[str]:
    parts = []
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "stream":
            text = _clean(output.get("text", ""))
            if parse_verdict(text):
                continue  # shown above, with its figures
            label = "printed inside your kernel (not counted)" if speed else output.get("name", "stdout")
            parts.append(f"<div class='label'>{html.escape(label)}</div><pre>{html.escape(text.strip())}</pre>")
        elif kind == "error":
            where = "inside your kernel (not counted): " if speed else ("in your kernel: " if checked else "")
            parts.append(f"<p class='error'>{where}{html.escape(_error_line(output))}</p>")
        elif kind in ("execute_result", "display_data"):
            data = output.get("data", {})
            if graded and kind == "execute_result":
                parts.append(f"<p>This cell returns its points: {_pts(got)} of {_pts(max_points)} "
                             "(partial credit).</p>")
            elif "image/png" in data:
                parts.append(f"<img alt='figure' src='data:image/png;base64,{data['image/png']}'>")
            elif "text/plain" in data:
                parts.append(f"<pre>{html.escape(_clean(str(data['text/plain'])))}</pre>")
    return parts


def _is_number(text: str) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def _error_line(output) -> str:
    # type and message only: a traceback would quote the grader's and the hidden tests' source
    message = _clean(f"{output.get('ename', 'Error')}: {output.get('evalue', '')}").strip().rstrip(":")
    return message.splitlines()[0] if message else "Error"


def _clean(text: str) -> str:
    # Nothing about the grader's machine reaches a student: paths of the course, the Python
    # installation and the grading folder that the student's code printed are replaced.
    return scrub_host(writable(_ANSI.sub("", text)))


def _machine() -> str:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"{platform.system()} {platform.machine()}, {cpus} CPU{'s' if cpus != 1 else ''}, "
            f"Python {platform.python_version()}")


def _write_missing_feedback(course, student: str, assignment: str, problems: dict[str, str | None],
                            missing: list[str]) -> tuple[Path, ...]:
    """Feedback HTML for notebooks nbgrader could not grade; returns every feedback file."""
    folder = course.step("feedback", student, assignment)
    for name in course.notebooks(assignment):
        target = folder / f"{name}.html"
        if target.exists():
            continue
        why = problems.get(name) or ("it was not in the submission" if name in missing else
                                     "grading failed; your instructor has been told")
        folder.mkdir(parents=True, exist_ok=True)
        target.write_text(_PLAIN_FEEDBACK.format(title=html.escape(f"{assignment}: {name}.ipynb"),
                                                 why=html.escape(scrub_host(writable(why)))), encoding="utf-8")
    return tuple(sorted(folder.glob("*.html")))


_PLAIN_FEEDBACK = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>
<body><h1>{title}</h1>
<p>Score: 0. Your notebook could not be graded: {why}.</p>
<p>Open it in Jupyter to check that it opens, then submit it again or ask your instructor.</p>
</body></html>
"""


def _pts(x: float) -> str:
    return f"{x:g}"


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 1.5rem auto; padding: 0 1rem;
       line-height: 1.45; color: #1b1b1b; overflow-wrap: anywhere; }}
pre {{ white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f6f6; padding: .5rem;
      border-radius: 4px; font-size: .9rem; }}
pre.source {{ background: #eef3f8; }}
table {{ border-collapse: collapse; width: 100%; margin: 1rem 0; }}
th, td {{ border: 1px solid #888; padding: .3rem .5rem; text-align: left; vertical-align: top; }}
th {{ background: #e8e8e8; }}
section.cell {{ border: 1px solid #bbb; border-radius: 6px; padding: .5rem .8rem; margin: 1rem 0; }}
.cellhead {{ font-weight: 600; margin-bottom: .3rem; }}
.verdict {{ background: #fff6d6; padding: .4rem; border-left: 4px solid #c9a400; }}
.error {{ color: #a40000; font-weight: 600; }}
.late {{ background: #fdecea; padding: .4rem; border-left: 4px solid #a40000; }}
.comment {{ background: #e8f0fe; padding: .4rem; border-left: 4px solid #3367d6; }}
.label, .context {{ color: #555; font-size: .9rem; }}
</style></head>
<body>
<h1>{title}</h1>
{score}
{table}
<p>{speed}</p>
{cells}
</body></html>
"""
