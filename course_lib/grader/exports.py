"""Every submission's standing, computed once from the gradebook, and the files made from it.

:func:`grade_rows` reads nbgrader's gradebook and gives one :class:`GradeRow` per graded
submission (and, with a roster, one ``missing`` row per roster student who submitted nothing):
its points before and after the late penalty, whether and by how much it was late, where its
time came from, and the student's names and LMS ids. Everything that shows a score reads
these rows: the table ``course grade`` prints, ``grades.csv``, ``flags.csv`` (the ``late``
flag), the feedback pages, the class report and the exports below. So a late penalty
appears wherever a score does, and the feedback agrees with ``grades.csv``.

This is also the last stage of ``course grade`` (see :mod:`course_lib.grader.nbgrading`):
once per batch, ``_export`` computes every standing and writes ``grades.csv`` and
``flags.csv`` from it and from the batch's results; :func:`recorded_results` reads them back
and :func:`format_table` prints them.

Lateness is nbgrader's: the submission's timestamp against the assignment's due date (plus
an extension, if the gradebook holds one). The penalty is nbgrader's ``LateSubmissionPlugin``
as ``nbgrader_config.py`` configures it (``c.LateSubmissionPlugin.penalty_method``, or a plugin
of one's own), applied per notebook to its current score, manual marks included, and clipped
to ``[0, score]`` as nbgrader clips it; with ``store=True`` it is written back to the
gradebook, so formgrader shows the same figure.

Formats (``course export --format FORMAT``):

``long``
    ``grades.csv`` itself: one row per student and assignment, :data:`LONG_COLUMNS`.
``canvas``
    Canvas's gradebook import: the columns ``Student``, ``ID``, ``SIS User ID``, ``SIS Login
    ID``, ``Section``, then one column per assignment (its name: Canvas updates the assignment
    of that title, or creates it), a ``Points Possible`` row, then one row per student with the
    score after the late penalty (empty: no submission, left as it is in Canvas). Canvas finds
    each student by ``ID`` (the roster's ``canvas_id``), else ``SIS User ID`` (``sis_user_id``),
    else ``SIS Login ID`` (``sis_login_id``), else by name. Canvas's import has no column for a
    submission's lateness: the penalty is in the score.
``moodle``
    Moodle's "Import grades from CSV": ``First name``, ``Last name``, ``Email address``, ``ID
    number`` (the roster's ``idnumber``), then per assignment a score column and a ``feedback``
    column that says whether it was late and what the penalty was; map ``Email address`` to
    the users' e-mail and each column to its grade item (and its feedback) when importing.

Examples
--------
>>> row = GradeRow("week1", "ada", raw_score=20.0, penalty=20.0, max_score=22.0, seconds_late=3900.0)
>>> row.score, row.status, row.late_text()
(0.0, 'late', 'late by 1 h 5 min; late penalty 20 points')
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import functools
import io
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.grader._text import writable
from course_lib.grader.common import Flag, SubmissionResult

__all__ = ["GradeRow", "grade_rows", "write_long", "write_canvas", "write_moodle", "write_export", "FORMATS",
           "recorded_results", "format_table", "LONG_COLUMNS", "CANVAS_STUDENT_COLUMNS"]

LONG_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                "raw_score", "late_submission_penalty", "score", "max_score", "status", "seconds_late",
                "time_source"]
"""``grades.csv``: nbgrader's own export columns, then ``status`` (``graded``, ``late`` or
``missing``), ``seconds_late`` and ``time_source`` (``collected``, ``timestamp.txt``, or ``commit
date``: the student's claim)."""

CANVAS_STUDENT_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
"""The columns before the assignments in Canvas's gradebook import, in its order."""

FORMATS = ("long", "canvas", "moodle")


@dataclass(frozen=True)
class GradeRow:
    """One student's standing on one assignment."""

    assignment: str
    student: str
    raw_score: float | None = None
    """Points before any late penalty (automatic and manual); None for a missing submission."""
    penalty: float = 0.0
    max_score: float = 0.0
    seconds_late: float = 0.0
    duedate: datetime.datetime | None = None
    timestamp: datetime.datetime | None = None
    time_source: str = ""
    claimed: str = ""
    """The last commit's own date, when the time came from elsewhere: the student's claim."""
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms: dict[str, str] = field(default_factory=dict)

    @property
    def submitted(self) -> bool:
        return self.raw_score is not None

    @property
    def score(self) -> float | None:
        """Points after the late penalty, never below 0 (nbgrader's rule)."""
        return None if self.raw_score is None else max(0.0, self.raw_score - self.penalty)

    @property
    def status(self) -> str:
        if not self.submitted:
            return "missing"
        return "late" if self.seconds_late > 0 else "graded"

    @property
    def name(self) -> str:
        return " ".join(p for p in (self.first_name, self.last_name) if p) or self.student

    def late_text(self) -> str:
        """``late by 1 h 5 min; late penalty 20 points`` ("" when on time)."""
        if self.status != "late":
            return ""
        return f"late by {_duration(self.seconds_late)}; late penalty {_points(self.penalty)}"

    def time_text(self) -> str:
        """When it was submitted, and on whose word, for a flag or a feedback page."""
        if self.timestamp is None:
            return "no submission time is known"
        source = {"collected": "seen by the course's collection of the repositories",
                  "timestamp.txt": "nbgrader's timestamp.txt",
                  "commit date": "the date of the last commit, which the student's machine sets"}
        text = f"submitted {_when(self.timestamp)} ({source.get(self.time_source, 'its recorded time')})"
        if self.duedate is not None:
            text += f"; due {_when(self.duedate)}"
        if self.claimed and self.time_source == "collected" and self.status == "late":
            text += (f"; the last commit says {_when(_utc(self.claimed))}: a commit's date is set by the "
                     "student's machine and does not count")
        return text


def grade_rows(course, roster: Sequence | None = None, *, store: bool = False,
               assignments: Iterable[str] | None = None, students: Iterable[str] | None = None) -> list[GradeRow]:
    """Every submission's :class:`GradeRow`, sorted by assignment and student.

    ``course`` is a :class:`course_lib.grader.common.Course`. ``roster``: its students'
    names, e-mails and LMS ids (matched as :func:`course_lib.grader.roster.match_roster`
    matches), and a ``missing`` row for each one without a submission. ``store``: write the
    penalties back to the gradebook. ``assignments``, ``students``: only these (no
    ``missing`` rows when ``students`` is given).
    """
    from nbgrader.api import Gradebook

    from course_lib.grader._submissions import read_names
    from course_lib.grader._nbgrader import _nbgrader_env, _quiet_warnings
    from course_lib.grader.common import _environment
    from course_lib.grader.roster import _split_name, match_roster

    plugin = _late_plugin(course)
    wanted = set(assignments) if assignments is not None else None
    only = set(students) if students is not None else None
    original = read_names(course.grading_dir)
    rows: list[GradeRow] = []
    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        everyone = {s.student.id for a in gb.assignments for s in a.submissions} if roster else set()
        match = match_roster(roster or [], everyone)
        changed = False
        for assignment in sorted(gb.assignments, key=lambda a: a.name):
            if wanted is not None and assignment.name not in wanted:
                continue
            submitted = set()
            for submission in assignment.submissions:
                student = submission.student
                if only is not None and student.id not in only:
                    continue
                submitted.add(student.id)
                penalty, moved = _penalty(plugin, submission, store)
                changed |= moved
                person = match.rows.get(student.id) if student.id in match.ids else None
                if person is not None:
                    first, last = _split_name(person.name)
                    email, lms = person.email, person.lms
                else:
                    first, last = student.first_name or "", student.last_name or ""
                    if not (first or last) and student.id in original:
                        first, last = _split_name(original[student.id])
                    email, lms = student.email or "", {}
                when = _time_record(course, student.id, assignment.name)
                rows.append(GradeRow(assignment.name, student.id, float(submission.score), penalty,
                                     float(submission.max_score), float(submission.total_seconds_late),
                                     submission.duedate, submission.timestamp, when.get("source", ""),
                                     when.get("claimed", "") if when.get("source") == "collected" else "",
                                     first, last, email, dict(lms)))
            for student_id, person in sorted(match.rows.items()):
                if student_id in submitted or only is not None:
                    continue
                first, last = _split_name(person.name)
                rows.append(GradeRow(assignment.name, student_id, None, 0.0, float(assignment.max_score),
                                     duedate=assignment.duedate, first_name=first, last_name=last,
                                     email=person.email, lms=dict(person.lms)))
        if changed:
            gb.db.commit()
    rows.sort(key=lambda r: (r.assignment, r.student))
    return rows


def write_export(rows: Sequence[GradeRow], target: str | Path, fmt: str) -> Path:
    """Write ``rows`` to ``target`` in ``fmt`` (one of :data:`FORMATS`); return the path.

    Raises
    ------
    ValueError
        for an unknown format.
    """
    writers = {"long": write_long, "canvas": write_canvas, "moodle": write_moodle}
    if fmt not in writers:
        raise ValueError(f"unknown export format {fmt!r}; one of {', '.join(FORMATS)}")
    return writers[fmt](rows, target)


def write_long(rows: Sequence[GradeRow], target: str | Path) -> Path:
    """``grades.csv``: one row per student and assignment (:data:`LONG_COLUMNS`)."""
    table = [[r.assignment, _stamp(r.duedate), _stamp(r.timestamp), r.student, r.last_name, r.first_name, r.email,
              _num(r.raw_score), _num(r.penalty) if r.submitted else "", _num(r.score), _num(r.max_score),
              r.status, _num(r.seconds_late) if r.submitted else "", r.time_source] for r in rows]
    return _write_csv(target, LONG_COLUMNS, table)


def write_canvas(rows: Sequence[GradeRow], target: str | Path) -> Path:
    """Canvas's gradebook import: a column per assignment, a ``Points Possible`` row, a row per student."""
    assignments = sorted({r.assignment for r in rows})
    possible = {r.assignment: r.max_score for r in rows}
    people = _people(rows)
    table = [["Points Possible", "", "", "", "", *(_num(possible[a]) for a in assignments)]]
    for student, (row, scores) in sorted(people.items(), key=lambda item: (item[1][0].last_name.casefold(),
                                                                           item[1][0].first_name.casefold(),
                                                                           item[0])):
        sortable = f"{row.last_name}, {row.first_name}" if row.first_name and row.last_name else row.name
        table.append([sortable, row.lms.get("canvas_id", ""), row.lms.get("sis_user_id", ""),
                      row.lms.get("sis_login_id", ""), row.lms.get("section", ""),
                      *(_num(scores[a].score) if a in scores else "" for a in assignments)])
    return _write_csv(target, CANVAS_STUDENT_COLUMNS + assignments, table)


def write_moodle(rows: Sequence[GradeRow], target: str | Path) -> Path:
    """Moodle's CSV grade import: identity columns, then a score and a feedback column per assignment."""
    assignments = sorted({r.assignment for r in rows})
    header = ["First name", "Last name", "Email address", "ID number"]
    for name in assignments:
        header += [name, f"{name} feedback"]
    table = []
    for student, (row, scores) in sorted(_people(rows).items()):
        line = [row.first_name, row.last_name or student, row.email, row.lms.get("idnumber", "")]
        for name in assignments:
            given = scores.get(name)
            line += ["", "not submitted"] if given is None or not given.submitted else \
                [_num(given.score), _moodle_feedback(given)]
        table.append(line)
    return _write_csv(target, header, table)


def recorded_results(course, rows: list, assignment: str | None = None) -> list[SubmissionResult]:
    """The graded submissions as ``grades.csv`` and ``flags.csv`` have them now, for a table.

    ``rows``: every submission's standing (:func:`course_lib.grader.exports.grade_rows`).
    """
    flags: dict[tuple[str, str], list[Flag]] = {}
    path = course.grading_dir / "flags.csv"
    if path.exists():
        with path.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                flags.setdefault((row["assignment"], row["student"]), []).append(
                    Flag(row["flag"], tuple(row["cells"].split()), row["detail"]))
    return [SubmissionResult(r.student, r.assignment, r.score, r.max_score, {}, tuple(flags.get((r.assignment, r.student), ())),
                             penalty=r.penalty, status=r.status, skipped=True)
            for r in rows if r.submitted and (assignment is None or r.assignment == assignment)]


def format_table(results: list[SubmissionResult]) -> str:
    """Students down, assignments across (``score / max``, after any late penalty, and ``late``), then flags."""
    assignments = sorted({r.assignment for r in results})
    students = sorted({r.student for r in results})
    by_key = {(r.student, r.assignment): r for r in results}
    header = ["student", *assignments, "flags"]
    rows = []
    for student in students:
        row, flags = [student], []
        for assignment in assignments:
            result = by_key.get((student, assignment))
            late = f" late (-{_pts(result.penalty)})" if result is not None and result.status == "late" else ""
            row.append("" if result is None else f"{_pts(result.score)} / {_pts(result.max_score)}{late}")
            if result is not None:
                prefix = f"{assignment}: " if len(assignments) > 1 else ""
                flags += [prefix + f.label for f in result.flags]
        rows.append(row + ["; ".join(flags)])
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return writable("\n".join(lines))


# --- private helpers -------------------------------------------------------------------------

def _export(course, results: list[SubmissionResult], roster: list | None = None) -> list:
    """Write ``grades.csv`` and ``flags.csv``; return every submission's standing (``GradeRow``).

    The standing is computed once, here, for every submission in the gradebook (late
    penalties written back): ``grades.csv``, the ``late`` and ``claimed-time`` flags and
    the results' scores all come from it.
    """
    # Not nbgrader's CsvExportPlugin: it gives every student in the gradebook a 0 for every
    # assignment, submitted or not; here a row is a graded submission (or a roster "missing").
    rows = grade_rows(course, roster, store=True)
    write_long(rows, course.grading_dir / "grades.csv")
    flags_file = course.grading_dir / "flags.csv"
    done = {(r.assignment, r.student) for r in results}
    kept = []
    if flags_file.exists():
        with flags_file.open(newline="", encoding="utf-8", errors="backslashreplace") as fh:
            kept = [row for row in csv.DictReader(fh) if (row["assignment"], row["student"]) not in done
                    and row["flag"] not in _STANDING_FLAGS]
    kept += [{"assignment": r.assignment, "student": r.student, "flag": f.kind, "cells": " ".join(f.cells),
              "detail": f.detail} for r in results for f in r.flags if f.kind not in _STANDING_FLAGS]
    kept += [{"assignment": row.assignment, "student": row.student, "flag": f.kind, "cells": "", "detail": f.detail}
             for row in rows for f in _standing_flags(row)]
    kept.sort(key=lambda row: (row["assignment"], row["student"]))
    _write_csv(flags_file, _FLAG_COLUMNS, [[row[c] for c in _FLAG_COLUMNS] for row in kept])
    return rows


_FLAG_COLUMNS = ["assignment", "student", "flag", "cells", "detail"]


_STANDING_FLAGS = ("late", "claimed-time")


def _standing_flags(row) -> list[Flag]:
    """The flags a submission's standing raises: ``late``, and ``claimed-time`` for a time only its commit gives."""
    flags = []
    if row.status == "late":
        flags.append(Flag("late", (), f"{row.late_text()}: {row.time_text()}"))
    if row.submitted and row.duedate is not None and row.time_source == "commit date":
        flags.append(Flag("claimed-time", (), "its time is the last commit's date, which the student's machine "
                                              "sets: no course collect saw these notebooks (run it at the deadline)"))
    return flags


def _with_standing(results: list[SubmissionResult], rows: list) -> list[SubmissionResult]:
    """``results`` with the scores after the late penalty and the standing's flags."""
    by_key = {(row.assignment, row.student): row for row in rows}
    updated = []
    for result in results:
        row = by_key.get((result.assignment, result.student))
        if row is None or not row.submitted:
            updated.append(result)
            continue
        flags = tuple(f for f in result.flags if f.kind not in _STANDING_FLAGS) + tuple(_standing_flags(row))
        updated.append(dataclasses.replace(result, score=row.score, max_score=row.max_score, penalty=row.penalty,
                                           status=row.status, flags=flags))
    return updated


def _pts(x: float) -> str:
    """Points as the table shows them: ``3``, ``2.5``."""
    return f"{x:g}"



def _late_plugin(course):
    """nbgrader's late-submission plugin as ``nbgrader_config.py`` sets it up (as AssignLatePenalties does)."""
    config = course.root / "nbgrader_config.py"
    return _plugin_for(course, config.stat().st_mtime_ns if config.exists() else 0)


@functools.lru_cache(maxsize=8)
def _plugin_for(course, _config_version: int):
    # reading nbgrader_config.py imports the grader: once per course and version of the file
    from nbgrader.preprocessors import AssignLatePenalties

    assigner = AssignLatePenalties(config=course.config())
    assigner.init_plugin()
    return assigner.plugin_inst


def _penalty(plugin, submission, store: bool) -> tuple[float, bool]:
    """The submission's late penalty (the sum over its notebooks), and whether a stored one changed."""
    seconds = float(submission.total_seconds_late)
    total, changed = 0.0, False
    for notebook in submission.notebooks:
        penalty = None
        if seconds > 0:
            penalty = plugin.late_submission_penalty(submission.student.id, float(notebook.score), seconds)
            if penalty is not None:
                penalty = min(max(float(penalty), 0.0), float(notebook.score))
        if store and notebook.late_submission_penalty != penalty:
            notebook.late_submission_penalty = penalty
            changed = True
        total += penalty or 0.0
    return total, changed


def _time_record(course, student: str, assignment: str) -> dict:
    from course_lib.grader.collect import TIME_FILE

    path = course.step("submitted", student, assignment) / TIME_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _people(rows: Sequence[GradeRow]) -> dict[str, tuple[GradeRow, dict[str, GradeRow]]]:
    people: dict[str, tuple[GradeRow, dict[str, GradeRow]]] = {}
    for row in rows:
        people.setdefault(row.student, (row, {}))[1][row.assignment] = row
    return people


def _moodle_feedback(row: GradeRow) -> str:
    if row.status == "late":
        return f"{row.late_text()} ({_points(row.raw_score)} before it); {row.time_text()}"
    return "on time" if row.duedate is not None else "graded"


def _write_csv(target: str | Path, header: Sequence[str], table: Sequence[Sequence[str]]) -> Path:
    # Written whole, then renamed into place: a reader (an upload, a spreadsheet) never sees
    # half a file, and an interrupted run leaves the previous one.
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    # A student's name or a flag's detail may carry a lone surrogate (a Latin-1 folder name
    # decoded by the file system): made writable, never a stopped export.
    writer.writerows([[writable(cell) if isinstance(cell, str) else cell for cell in row] for row in table])
    partial = target.with_name(target.name + ".partial")
    partial.write_text(buffer.getvalue(), encoding="utf-8")
    os.replace(partial, target)
    return target


def _utc(text: str) -> datetime.datetime:
    when = datetime.datetime.fromisoformat(text)
    return when.astimezone(datetime.timezone.utc).replace(tzinfo=None) if when.tzinfo else when


def _when(when: datetime.datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC") if when.second == 0 else when.strftime("%Y-%m-%d %H:%M:%S UTC")


def _stamp(when: datetime.datetime | None) -> str:
    return "" if when is None else str(when)


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 1:
        return f"{seconds:.0f} s"
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days} d" if days else "", f"{hours} h" if hours else "", f"{minutes} min" if minutes else ""]
    return " ".join(p for p in parts if p)


def _num(x: float | None) -> str:
    return "" if x is None else f"{float(x):g}"


def _points(x: float | None) -> str:
    return f"{_num(x)} point" + ("" if x == 1 else "s")
