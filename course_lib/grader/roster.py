"""The class list: who is in the course, and which graded student each roster row is.

A *roster* is a CSV file with the columns ``id``, ``name`` and ``email`` (one row per
student), and optionally the ids a learning management system knows the student by:
``sis_user_id``, ``sis_login_id``, ``canvas_id`` and ``section`` (for the Canvas export),
``idnumber`` (Moodle's "ID number"). ``course grade --roster FILE`` (default ``roster.csv``
in the course repository when it exists) copies names and e-mail addresses into the
gradebook and into ``grades.csv``.

``id`` may be written as the grader's id or as what it was made from: a submission folder's
name as an LMS export spells it ("José García", graded as ``Jose_Garcia-978edf99``), that
safe id itself, or a GitHub user name (the student of a Classroom repository
``week3-OctoCat``; GitHub does not tell case apart, so neither does the match).
:func:`match_roster` applies the same mapping grading applies
(:func:`course_lib.grader._submissions.safe_student_id`), so one student never becomes two
rows; what it cannot match is listed, and ``course grade`` warns about each.

Examples
--------
>>> _split_name("Ada King Lovelace")
('Ada King', 'Lovelace')
>>> _split_name("Plato")
('', 'Plato')
>>> m = match_roster([Student("José García"), Student("OctoCat"), Student("zoe")], ["Jose_Garcia-978edf99", "octocat", "bob"])
>>> sorted(m.ids.items()), [r.id for r in m.unmatched_rows], m.unmatched_students
([('Jose_Garcia-978edf99', 'José García'), ('octocat', 'OctoCat')], ['zoe'], ['bob'])
"""

from __future__ import annotations

import csv
import datetime
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.grader._submissions import safe_student_id

__all__ = ["Student", "RosterMatch", "read_roster", "parse_due", "match_roster", "resolve_student",
           "LMS_COLUMNS"]

LMS_COLUMNS = ("sis_user_id", "sis_login_id", "canvas_id", "section", "idnumber")
"""Optional roster columns: the ids a learning management system knows the student by."""


@dataclass(frozen=True)
class Student:
    """One row of the roster; ``lms`` holds the optional :data:`LMS_COLUMNS` that were given."""

    id: str
    name: str = ""
    email: str = ""
    lms: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class RosterMatch:
    """Which graded student each roster row is (see :func:`match_roster`)."""

    ids: dict[str, str]
    """Graded student id -> the roster ``id`` of its row."""
    rows: dict[str, Student]
    """Graded student id -> its roster row; an unmatched row under :func:`safe_student_id` of its id."""
    unmatched_rows: list[Student]
    """Rows that match no graded student."""
    unmatched_students: list[str]
    """Graded students that no row matches."""


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
        lms = {key: row[key] for key in LMS_COLUMNS if row.get(key)}
        students.append(Student(row["id"], row.get("name", ""), row.get("email", ""), lms))
    return students


def match_roster(roster: Iterable[Student], graded: Iterable[str]) -> RosterMatch:
    """Match roster rows to graded student ids, through the mapping grading uses.

    A row matches the graded id that its ``id`` is (:func:`resolve_student`): the same
    text, the safe id grading makes of it (a folder name such as "José García", in either
    Unicode form), or, failing those, the one id equal to it but for case (GitHub user
    names).

    Raises
    ------
    ValueError
        when two rows name the same graded student (e.g. "José García" and
        ``Jose_Garcia-978edf99``).
    """
    known = sorted(set(graded))
    ids: dict[str, str] = {}
    rows: dict[str, Student] = {}
    unmatched = []
    for row in roster:
        student = resolve_student(row.id, known)
        if student is None:
            unmatched.append(row)
            rows.setdefault(safe_student_id(row.id), row)
            continue
        if student in ids:
            raise ValueError(f"roster rows {ids[student]!r} and {row.id!r} are the same student ({student!r}); "
                             "keep one")
        ids[student] = row.id
        rows[student] = row
    return RosterMatch(ids, rows, unmatched, [s for s in known if s not in ids])


def resolve_student(text: str, known: Iterable[str]) -> str | None:
    """The graded student id among ``known`` that ``text`` names, or None.

    ``text`` may be the id itself, the name it was made from (``"José García"`` names
    ``Jose_Garcia-978edf99``) or, when no other id matches, an id that differs only in case.

    Examples
    --------
    >>> resolve_student("José García", ["Jose_Garcia-978edf99"]), resolve_student("OCTOCAT", ["octocat"])
    ('Jose_Garcia-978edf99', 'octocat')
    >>> resolve_student("nobody", ["octocat"]) is None
    True
    """
    known = set(known)
    text = unicodedata.normalize("NFC", text.strip())
    if not text:
        return None
    if text in known:
        return text
    safe = safe_student_id(text)
    if safe in known:
        return safe
    folded = [k for k in known if k.casefold() == text.casefold()]
    return folded[0] if len(folded) == 1 else None


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


def _split_name(name: str) -> tuple[str, str]:
    parts = name.split()
    return (" ".join(parts[:-1]), parts[-1]) if parts else ("", "")
