"""The class list and the grades export: who is in the course, and what each submission scored.

A *roster* is a CSV file with the columns ``id``, ``name`` and ``email`` (one row per student;
``id`` is the student id the grader uses: the folder name, or the GitHub user name of a
Classroom repository). ``course grade --roster FILE`` (default ``roster.csv`` in the course
repository when it exists) copies names and e-mail addresses into the gradebook and into
``grades.csv``, so that the file can be uploaded to a learning management system.

``grades.csv`` has one row per submission that was graded, never a made-up zero: a student
who did not submit an assignment has no score for it. With a roster, each roster student
without a submission gets a row with ``status`` ``missing`` and empty scores.

Examples
--------
>>> _split_name("Ada King Lovelace")
('Ada King', 'Lovelace')
>>> _split_name("Plato")
('', 'Plato')
"""

from __future__ import annotations

import csv
import datetime
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Student", "read_roster", "parse_due", "write_grades", "GRADES_COLUMNS"]

GRADES_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                  "raw_score", "late_submission_penalty", "score", "max_score", "status"]
"""nbgrader's own export columns, then ``status``: ``graded`` or ``missing``."""


@dataclass(frozen=True)
class Student:
    """One row of the roster."""

    id: str
    name: str = ""
    email: str = ""


def read_roster(path: str | Path) -> list[Student]:
    """The students of a roster CSV (columns ``id``, ``name``, ``email``; others are ignored).

    Raises
    ------
    ValueError
        when the file cannot be read, lacks an ``id`` column, or names a student twice.
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:  # -sig: spreadsheets write a BOM
            reader = csv.DictReader(fh)
            columns = [c.strip().lower() for c in reader.fieldnames or []]
            if "id" not in columns:
                raise ValueError(f"roster {path} has no 'id' column (expected the columns id, name, email)")
            rows = [{k.strip().lower(): (v or "").strip() for k, v in row.items() if k} for row in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"roster {path} cannot be read: {err}") from None
    students, seen = [], set()
    for number, row in enumerate(rows, start=2):
        if not row.get("id"):
            continue  # a blank line in a spreadsheet export
        if row["id"] in seen:
            raise ValueError(f"roster {path}, line {number}: student {row['id']!r} is listed twice")
        seen.add(row["id"])
        students.append(Student(row["id"], row.get("name", ""), row.get("email", "")))
    return students


def parse_due(text: str) -> datetime.datetime:
    """A deadline such as ``2026-12-10 17:00`` or ``2026-12-10T17:00+01:00`` (no zone: UTC).

    Examples
    --------
    >>> parse_due("2026-12-10 17:00+01:00").isoformat()
    '2026-12-10T16:00:00'
    """
    try:
        when = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"expected a deadline such as '2026-12-10 17:00' (UTC) or "
                         f"'2026-12-10T17:00+01:00', got {text!r}") from None
    if when.tzinfo is not None:  # the gradebook stores naive UTC, as nbgrader's parse_utc does
        when = when.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return when


def write_grades(gradebook, target: str | Path, roster: list[Student] | None = None) -> int:
    """Write ``grades.csv`` from an open nbgrader ``Gradebook``; return the number of rows.

    One row per submission in the gradebook; with a roster, its names and e-mails, and a
    ``missing`` row for each roster student who did not submit an assignment.
    """
    people = {s.id: s for s in roster or []}
    rows = []
    for assignment in sorted(gradebook.assignments, key=lambda a: a.name):
        submitted = set()
        for submission in assignment.submissions:
            student = submission.student
            submitted.add(student.id)
            first, last = _split_name(people[student.id].name) if student.id in people else \
                (student.first_name or "", student.last_name or "")
            email = people[student.id].email if student.id in people else student.email or ""
            # nbgrader's rule: the score is the raw score less the late penalty, never below 0
            raw, penalty = float(submission.score), float(submission.late_submission_penalty or 0.0)
            rows.append([assignment.name, _when(assignment.duedate), _when(submission.timestamp), student.id,
                         last, first, email, _num(raw), _num(penalty), _num(max(0.0, raw - penalty)),
                         _num(submission.max_score), "graded"])
        for student_id in sorted(set(people) - submitted):
            first, last = _split_name(people[student_id].name)
            rows.append([assignment.name, _when(assignment.duedate), "", student_id, last, first,
                         people[student_id].email, "", "", "", _num(assignment.max_score), "missing"])
    rows.sort(key=lambda row: (row[0], row[3]))
    with Path(target).open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(GRADES_COLUMNS)
        writer.writerows(rows)
    return len(rows)


def _split_name(name: str) -> tuple[str, str]:
    parts = name.split()
    return (" ".join(parts[:-1]), parts[-1]) if parts else ("", "")


def _when(value) -> str:
    return "" if value is None else str(value)


def _num(x: float) -> str:
    return f"{float(x):g}"
