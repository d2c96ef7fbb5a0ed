"""A test cell graded outside the kernel only (``course_lib.grader._nbpreprocessors.graded_outside``).

A locked test cell whose instructor's source holds the line ``# Graded outside your kernel.``
is not run in the student's kernel while grading; the check outside the kernel alone grades
it (``course_lib.grader.verify``). Graded here end to end, through ``course grade`` on a
small course: the kernel's output of the cell is the grader's note, the stored score is the
verifier's (full, none, or none for an answer that is missing), no ``verdict-differs`` flag
is raised for the kernel's skipped cell, and a student who writes the mark into a cell of
their own copy changes nothing (the kernel reads the instructor's source).
"""

from __future__ import annotations

import contextlib
import csv
import io
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.api import Gradebook

from course_lib.grader import cli
from course_lib.grader.common import GRADED_OUTSIDE, graded_outside
from course_lib.grader._submissions import answered

ROOT = Path(__file__).resolve().parents[1]

SETUP = "from course_lib.grading import assert_same"
ANSWER = "### BEGIN SOLUTION\nCLAIM = 3\nANSWER = 3\n### END SOLUTION"
# Graded outside the kernel: in the kernel it would print, and fail on a claim of 4.
OUTSIDE = (f"# Hidden test (2 points): the claim.\n### BEGIN HIDDEN TESTS\n{GRADED_OUTSIDE}\n"
           "print('this check ran here')\nassert_same(CLAIM, 3)\n### END HIDDEN TESTS")
INSIDE = "# Hidden test (1 point): the answer.\n### BEGIN HIDDEN TESTS\nassert_same(ANSWER, 3)\n### END HIDDEN TESTS"


def _cell(source: str, grade_id: str, points: float | None = None, solution: bool = False):
    meta = {"grade": points is not None, "grade_id": grade_id, "locked": not solution, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return new_code_cell(source, metadata={"nbgrader": meta})


@pytest.fixture
def course_root(tmp_path, monkeypatch):
    """A course with one assignment, ``mini``: a setup cell, an answer cell, two tests."""
    root = tmp_path / "course"
    (root / "solutions" / "mini").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", root)
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COURSE_GRADING_DIR", raising=False)
    nb = new_notebook(cells=[_cell(SETUP, "setup"), _cell(ANSWER, "answer", solution=True),
                             _cell(OUTSIDE, "test_claim_hidden", 2), _cell(INSIDE, "test_answer_hidden", 1)])
    nbformat.write(nb, root / "solutions" / "mini" / "mini.ipynb")
    return root


def test_only_a_locked_test_cell_with_the_mark_is_graded_outside():
    assert graded_outside(_cell(OUTSIDE, "t", 2))
    assert not graded_outside(_cell(INSIDE, "t", 1))
    assert not graded_outside(_cell(OUTSIDE, "t", 2, solution=True))      # the student's own cell
    assert not graded_outside(_cell(OUTSIDE.replace(GRADED_OUTSIDE, f"x = 1  {GRADED_OUTSIDE}"), "t", 2))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_cell_graded_outside_is_skipped_in_the_kernel_and_scored_by_the_verifier(course_root, tmp_path):
    assert _cli("release", "mini", "--no-validate", "--root", str(course_root)) == cli.EXIT_OK
    released = nbformat.read(course_root / "assignments" / "mini" / "mini.ipynb", as_version=4)
    assert GRADED_OUTSIDE not in nbformat.writes(released)  # inside the hidden region: never shown
    submissions = tmp_path / "submissions"
    students = {
        "right": {"answer": "CLAIM = 3\nANSWER = 3"},
        "wrong_claim": {"answer": "CLAIM = 4\nANSWER = 3"},
        "no_claim": {"answer": "ANSWER = 3"},
        # The mark written into the student's copy of the other test cell, with its test
        # removed: nbgrader restores the instructor's source, which the kernel runs.
        "marks_a_cell": {"answer": "CLAIM = 3\nANSWER = 4",
                         "test_answer_hidden": f"{GRADED_OUTSIDE}\npass"},
    }
    for student, answers in students.items():
        path = submissions / student / "mini" / "mini.ipynb"
        path.parent.mkdir(parents=True)
        nb = answered(released, answers)
        nbformat.write(nb, path)
    grading = tmp_path / "grading"
    _cli("grade", "mini", "--submissions", str(submissions), "--grading-dir", str(grading), "--timeout", "30",
         "--root", str(course_root), "--no-progress")
    scores = _scores(grading)
    assert scores == {"right": {"test_claim_hidden": 2.0, "test_answer_hidden": 1.0},
                      "wrong_claim": {"test_claim_hidden": 0.0, "test_answer_hidden": 1.0},
                      "no_claim": {"test_claim_hidden": 0.0, "test_answer_hidden": 1.0},
                      "marks_a_cell": {"test_claim_hidden": 2.0, "test_answer_hidden": 0.0}}, scores
    flags = _flags(grading)
    # The kernel's full marks for a cell it skipped are not a disagreement to review.
    assert not any(kind == "verdict-differs" for kind, _ in flags), flags
    for student in students:
        nb = nbformat.read(grading / "autograded" / student / "mini" / "mini.ipynb", as_version=4)
        outputs = {c.metadata["nbgrader"]["grade_id"]: "".join(o.get("text", "") for o in c.outputs)
                   for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
        assert "this check ran here" not in outputs["test_claim_hidden"], student
        assert outputs["test_claim_hidden"].startswith("This check is made by the grader outside"), student
        assert "Checked by the grader outside your kernel:" in outputs["test_claim_hidden"], student
    feedback = (grading / "feedback" / "wrong_claim" / "mini" / "mini.html").read_text()
    assert "Checked by the grader outside your kernel: 0 / 2" in feedback


def _cli(*argv: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        return cli.main(list(argv))


def _scores(grading: Path) -> dict[str, dict[str, float]]:
    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        return {s.student.id: {g.name: g.auto_score for nb in s.notebooks for g in nb.grades}
                for s in gb.find_assignment("mini").submissions}


def _flags(grading: Path) -> list[tuple[str, str]]:
    path = grading / "flags.csv"
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return [(row["flag"], row["student"]) for row in csv.DictReader(fh)]
