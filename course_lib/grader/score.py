"""The last stage of a submission in ``course grade``: its scores read back, its grading recorded as done.

After the feedback is written, :func:`_scores` reads the submission's scores from the
gradebook (after the verifier's verdicts and any manual mark), and :func:`_write_done`
records in ``grading/done/ASSIGNMENT/STUDENT.json`` that its grading finished, with a digest
of its notebooks, the assignment's source and the time it was handed in: a later run
skips it while that is unchanged (:func:`_done_result`), so a stopped run resumes.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry

from course_lib.grader._nbgrader import _quiet_warnings
from course_lib.grader._submissions import Submission
from course_lib.grader.common import Course, Flag, SubmissionResult

__all__: list[str] = []  # the pipeline in nbgrading calls these private helpers


def _scores(course: Course, assignment: str, student: str) -> tuple[float, float, dict[str, float]]:
    """(score, max score, points by grade id) of one submission as the gradebook has them now.

    A submission not in the gradebook scores 0 of the assignment's points, with no cells.
    """
    with _quiet_warnings(), Gradebook(course.db_url) as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            max_score = gb.find_assignment(assignment).max_score
            return 0.0, float(max_score), {}
        cells = {g.name: float(g.score) for nb in submission.notebooks for g in nb.grades}
        return float(submission.score), float(submission.max_score), cells


def _done_file(course: Course, submission: Submission) -> Path:
    """``grading/done/ASSIGNMENT/STUDENT.json``: the record that this submission's grading finished."""
    return course.grading_dir / "done" / submission.assignment / f"{submission.student}.json"


def _digest(course: Course, submission: Submission) -> str:
    """What the grade depends on: the submitted files and the assignment's source notebooks."""
    h = hashlib.sha256()
    for name, path in sorted(submission.notebooks.items()):
        h.update(name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    for source in sorted((course.root / "solutions" / submission.assignment).glob("*.ipynb")):
        h.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    # and its time: a later `course collect` can date the same notebooks differently
    from course_lib.grader.collect import time_of

    found = time_of(course.grading_dir, submission)
    h.update(json.dumps(found[0].as_record() if found else None).encode())
    return h.hexdigest()


def _write_done(course: Course, submission: Submission, result: SubmissionResult) -> None:
    """Record ``result`` as finished, with the digest of what it depends on (:func:`_digest`)."""
    record = {"digest": _digest(course, submission), "student": result.student,
              "assignment": result.assignment, "score": result.score, "max_score": result.max_score,
              "cell_scores": result.cell_scores,
              "flags": [[f.kind, list(f.cells), f.detail] for f in result.flags],
              "feedback": [str(p) for p in result.feedback], "speedups": result.speedups}
    target = _done_file(course, submission)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".json.partial")
    partial.write_text(json.dumps(record, indent=1), encoding="utf-8")
    os.replace(partial, target)  # atomic: a record is either whole or absent


def _done_result(course: Course, submission: Submission) -> SubmissionResult | None:
    """The recorded result if this exact submission was fully graded before, else None."""
    try:
        record = json.loads(_done_file(course, submission).read_text(encoding="utf-8"))
        if record["digest"] != _digest(course, submission):
            return None
        flags = tuple(Flag(kind, tuple(cells), detail) for kind, cells, detail in record["flags"])
        feedback = tuple(Path(p) for p in record["feedback"])
        speedups = {str(k): float(v) for k, v in record.get("speedups", {}).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    # The scores as stored now: an instructor's manual grade given since then shows.
    score, max_score, cells = _scores(course, submission.assignment, submission.student)
    return SubmissionResult(submission.student, submission.assignment, score, max_score, cells, flags, feedback,
                            speedups, skipped=True)
