"""Stage 2 of ``course grade``: run the notebooks in the student's kernel (nbgrader's autograde).

:func:`autograde` runs nbgrader's ``Autograde`` on what :func:`course_lib.grader.intake.copy_in`
copied in, in a sandboxed kernel (:class:`course_lib.grader._nbpreprocessors.CourseExecute`),
and reads back what the course's preprocessors recorded: grade cells put back or
overwritten, a kernel that died or stopped answering, cells past the time limit, tampering
and refused measurements, code that reads ``NBGRADER_EXECUTION``. A submission with no
notebook that can run scores zero here. It hands on an :class:`Executed` to the next
stage, :func:`course_lib.grader.verify._verify`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbgrader import utils as nbutils
from nbgrader.api import Gradebook
from nbgrader.converters import Autograde

from course_lib.grader._nbgrader import _append_log, _last_error, _nbgrader_env, _quiet_warnings, _run
from course_lib.grader._nbpreprocessors import CELL_TIMEOUT, METADATA_KEY
from course_lib.grader.common import Course, Flag, _environment
from course_lib.grader.intake import CopiedIn
from course_lib.grader.verification import is_performance_cell

__all__ = ["Executed", "autograde"]


@dataclass(frozen=True)
class Executed:
    """A submission after its kernel ran: whether the autograded notebooks are there, and what to flag.

    Examples
    --------
    >>> from course_lib.grader._submissions import Submission
    >>> sub = Submission("ana", "week1", "nbgrader", {})
    >>> copied = CopiedIn(sub, {}, {}, ("w1",), ())
    >>> Executed(copied, Path("ana.log"), ran=False, flags=(Flag("grading-error"),)).ran
    False
    """

    copied: CopiedIn
    log_file: Path
    """``grading/logs/ASSIGNMENT/STUDENT.log``: nbgrader's log and the kernel's output."""
    ran: bool
    """nbgrader's autograde succeeded: ``grading/autograded/STUDENT/ASSIGNMENT`` holds the graded notebooks."""
    flags: tuple[Flag, ...]


def autograde(course: Course, copied: CopiedIn, log_file: Path) -> Executed:
    """Run the copied-in submission's notebooks in its kernel and store the kernel's scores.

    Never raises for a bad submission: nbgrader's failure is a ``grading-error`` flag, and
    a submission without a notebook that can run scores zero.
    """
    student, assignment = copied.submission.student, copied.submission.assignment
    if not copied.gradable:
        _record_zero(course, assignment, student)
        return Executed(copied, log_file, False, ())
    cfg = course.config()
    cfg.CourseExecute.kernel_log = str(log_file)
    # A kernel that ran every cell stays, to be the verify stage's worker (course_lib.grader._parked).
    cfg.CourseExecute.park = bool(course.sandboxed)
    outcome = _run(course, Autograde, cfg, assignment, student, force=True, create_student=True)
    _append_log(log_file, "autograde", outcome)
    if not outcome["success"]:
        return Executed(copied, log_file, False, (Flag("grading-error", (), _last_error(outcome)),))
    return Executed(copied, log_file, True, tuple(_autograded_flags(course, student, assignment)))


def _record_zero(course: Course, assignment: str, student: str) -> None:
    """No readable notebook: every grade of the submission is zero (kept if graded by hand)."""
    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        gb.update_or_create_student(student)
        submission = gb.update_or_create_submission(assignment, student)
        for notebook in submission.notebooks:
            for grade_ in notebook.grades:
                grade_.auto_score = 0
                grade_.needs_manual_grade = False
        gb.db.commit()


_TAMPERING_PREFIX = "Tampering detected:"


def _autograded_flags(course: Course, student: str, assignment: str) -> list[Flag]:
    """What the course's preprocessors recorded in the autograded notebooks, and their errors, as flags."""
    flags: list[Flag] = []
    for path in sorted(course.step("autograded", student, assignment).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        record = nb.metadata.get(METADATA_KEY, {})
        if record.get("restored_cells"):
            flags.append(Flag("restored", tuple(record["restored_cells"]),
                              "grade cells deleted from the submission were put back and score zero"))
        if record.get("overwritten_cells"):
            flags.append(Flag("overwritten", tuple(record["overwritten_cells"]),
                              "read-only cells edited by the student were restored from the gradebook"))
        stopped = record.get("kernel_stopped")
        if stopped:
            kind = stopped.get("kind") or ("kernel-died" if stopped["reason"] == "the kernel died"
                                           else "kernel-unresponsive")
            cell = stopped.get("grade_id") or f"cell {stopped['cell_index']}"
            flags.append(Flag(kind, (cell,), f"{stopped['reason']}; later cells were not run and score zero"))
        flags += _error_flags(nb)
        student_code = "\n".join(c.source for c in _submitted_cells(course, student, assignment, path.name))
        if "NBGRADER_EXECUTION" in student_code:
            flags.append(Flag("reads-NBGRADER_EXECUTION", (),
                              "the student's code reads NBGRADER_EXECUTION and may behave differently "
                              "while graded; it was graded on what it did while graded"))
    return flags


def _error_flags(nb: nbformat.NotebookNode) -> list[Flag]:
    """``timeout``, ``tampering`` and ``unreliable`` flags from the error outputs of the kernel's cells."""
    found: dict[str, list[str]] = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        name = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index}"
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            ename, evalue = output.get("ename", ""), str(output.get("evalue", ""))
            if ename == CELL_TIMEOUT:
                found.setdefault("timeout", []).append(name)
            elif ename == "TamperingDetected" or evalue.startswith(_TAMPERING_PREFIX):
                found.setdefault("tampering", []).append(name)
            elif ename == "UnreliableMeasurement":
                found.setdefault("unreliable", []).append(name)
    details = {"timeout": "cells ran past the time limit, were interrupted and score zero",
               "tampering": "the grading helpers detected tampering (e.g. a reassigned clock)",
               "unreliable": "a speed measurement was refused as unreliable; see the cell's message"}
    return [Flag(kind, tuple(dict.fromkeys(cells)), details[kind]) for kind, cells in found.items()]


def _submitted_cells(course: Course, student: str, assignment: str, filename: str) -> list:
    """The student's own code cells (not read-only) as submitted."""
    path = course.step("submitted", student, assignment) / filename
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:
        return []
    return [c for c in nb.cells if c.cell_type == "code" and not nbutils.is_locked(c)]


def _kernel_timings(course: Course, student: str, assignment: str) -> tuple[dict, dict, dict]:
    """What the kernel's preprocessor recorded of its cells' times, summed over the notebooks."""
    timings: dict[str, Any] = {"kernel_start": 0.0, "cells": []}
    is_test, is_performance = {}, {}
    for path in sorted(course.step("autograded", student, assignment).glob("*.ipynb")):
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001 - a profile is not worth a failed grading
            continue
        record = nb.metadata.get(METADATA_KEY, {}).get("timings", {})
        timings["kernel_start"] += float(record.get("kernel_start", 0.0))
        timings["cells"] += record.get("cells", [])
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade_id"):
                is_test[meta["grade_id"]] = bool(meta.get("grade")) and not meta.get("solution")
                is_performance[meta["grade_id"]] = is_performance_cell(meta["grade_id"])
    return timings, is_test, is_performance
