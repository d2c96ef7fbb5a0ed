"""Marking by hand from the terminal: what waits for a mark, and recording one.

Every week ends with a written answer that nbgrader grades by hand (a markdown cell with
``grade`` and ``solution`` set): it counts 0 until the instructor marks it. Two ways do
that, both writing the same field of the gradebook (a grade's ``manual_score``):

- nbgrader's formgrader: ``jupyter lab`` in the course repository (with ``COURSE_GRADING_DIR``
  or ``COURSE_DB_URL`` set as for ``course grade``), then *Nbgrader* > *Formgrader* >
  *Manage Submissions*; it shows each answer beside the model answer and rubric;
- ``course mark ASSIGNMENT`` lists every answer that waits for a mark, with its text
  (:func:`unmarked`), and ``course mark ASSIGNMENT STUDENT CELL POINTS [--comment TEXT]``
  records one (:func:`record_mark`).

Then ``course feedback`` writes the feedback pages and ``grades.csv`` again from the
gradebook, without grading anything again.

Examples
--------
>>> _points_error(3.0, 2.0)
'points must be between 0 and 2, got 3'
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat

__all__ = ["ManualCell", "unmarked", "manual_cells", "record_mark"]


@dataclass(frozen=True)
class ManualCell:
    """One hand-marked cell of one submission."""

    student: str
    notebook: str
    grade_id: str
    max_points: float
    points: float | None
    """The mark given, or None while it waits for one."""
    answer: str
    comment: str = ""


def manual_cells(course, assignment: str) -> list[ManualCell]:
    """Every hand-marked cell of every submission of ``assignment``, marked or not.

    Raises
    ------
    CourseError
        when the gradebook has no such assignment.
    """
    from nbgrader.api import MissingEntry

    from course_lib.grader.common import CourseError

    found = []
    with _gradebook(course) as gb:
        try:
            submissions = gb.find_assignment(assignment).submissions
        except MissingEntry:
            raise CourseError(f"nothing graded for {assignment!r} in {course.grading_dir} (run course grade "
                              "first)") from None
        for submission in sorted(submissions, key=lambda s: s.student.id):
            for notebook in submission.notebooks:
                answers = _answers(course, submission.student.id, assignment, notebook.name)
                comments = {c.name: (c.manual_comment or "").strip() for c in notebook.comments}
                for grade in notebook.grades:
                    if not _by_hand(grade):
                        continue
                    points = None if grade.manual_score is None and grade.needs_manual_grade else float(grade.score)
                    found.append(ManualCell(submission.student.id, notebook.name, grade.name,
                                            float(grade.max_score), points, answers.get(grade.name, ""),
                                            comments.get(grade.name, "")))
    return found


def unmarked(course, assignment: str) -> list[ManualCell]:
    """The hand-marked cells of ``assignment`` that wait for a mark."""
    return [cell for cell in manual_cells(course, assignment) if cell.points is None]


def record_mark(course, assignment: str, student: str, grade_id: str, points: float,
                comment: str | None = None) -> ManualCell:
    """Record ``points`` (and a comment) for one cell of one submission; return the cell as marked.

    ``student`` may be the graded id or what it was made from (a folder name such as
    "José García", a GitHub user name in any case), as the roster matches it.

    Raises
    ------
    CourseError
        for an unknown assignment, student or cell, or points outside ``[0, max]``.
    """
    from nbgrader.api import MissingEntry

    from course_lib.grader.common import CourseError
    from course_lib.grader.roster import resolve_student

    with _gradebook(course) as gb:
        try:
            submissions = gb.find_assignment(assignment).submissions
        except MissingEntry:
            raise CourseError(f"nothing graded for {assignment!r} in {course.grading_dir}") from None
        ids = [s.student.id for s in submissions]
        found = resolve_student(student, ids)
        if found is None:
            raise CourseError(f"no submission of {assignment} by {student!r} (course mark {assignment} lists "
                              "who waits for a mark)")
        submission = next(s for s in submissions if s.student.id == found)
        grades = {g.name: (notebook, g) for notebook in submission.notebooks for g in notebook.grades}
        if grade_id not in grades:
            raise CourseError(f"{assignment} has no graded cell {grade_id!r}; its cells: {', '.join(sorted(grades))}")
        notebook, grade = grades[grade_id]
        problem = _points_error(points, float(grade.max_score))
        if problem:
            raise CourseError(problem)
        grade.manual_score = float(points)
        grade.needs_manual_grade = False
        if comment is not None:
            try:
                gb.find_comment(grade_id, notebook.name, assignment, found).manual_comment = comment
            except MissingEntry:
                raise CourseError(f"{grade_id!r} takes no comment in nbgrader's gradebook") from None
        gb.db.commit()
        answer = _answers(course, found, assignment, notebook.name).get(grade_id, "")
        return ManualCell(found, notebook.name, grade_id, float(grade.max_score), float(points), answer,
                          comment or "")


# --- private helpers -------------------------------------------------------------------------

def _by_hand(grade) -> bool:
    # a cell nbgrader grades by hand: a graded answer cell (grade and solution both set)
    cell = grade.cell
    return bool(getattr(cell, "cell_type", None) == "markdown" or grade.auto_score is None)


def _answers(course, student: str, assignment: str, notebook: str) -> dict[str, str]:
    """The student's text of each graded cell, from the autograded notebook."""
    path = Path(course.step("autograded", student, assignment)) / f"{notebook}.ipynb"
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - no notebook, no text to show; the mark can still be given
        return {}
    return {c.metadata["nbgrader"]["grade_id"]: c.source.strip() for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade_id")}


def _points_error(points: float, max_points: float) -> str:
    if not 0 <= points <= max_points:
        return f"points must be between 0 and {max_points:g}, got {points:g}"
    return ""


@contextlib.contextmanager
def _gradebook(course) -> Iterator:
    """The course's gradebook, opened as the grader opens it."""
    from nbgrader.api import Gradebook

    from course_lib.grader._nbgrader import _nbgrader_env, _quiet_warnings
    from course_lib.grader.common import _environment

    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        yield gb
