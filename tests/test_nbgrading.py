"""Tests for the grading pipeline's own rules (course_lib.grader.nbgrading and its stages), without grading a notebook.

The whole pipeline is proved end to end in tests/test_grading_e2e.py and the assignments'
self-tests; here, the verify stage's rules (course_lib.grader.verify): what is stored for a
correctness test checked outside the kernel, and for a later reading of a cell left ``undecided``.
"""

from __future__ import annotations

from types import SimpleNamespace

import nbformat
import pytest

from course_lib.grader import nbgrading, verify
from course_lib.grader._submissions import Submission
from course_lib.grader.common import Flag, SubmissionResult
from course_lib.grader.execute import Executed
from course_lib.grader.intake import CopiedIn
from course_lib.grader.verification import CellVerdict


def _stored(score: float) -> SimpleNamespace:
    return SimpleNamespace(auto_score=score, needs_manual_grade=True)


def test_a_decided_later_reading_replaces_the_noisy_one_it_follows():
    grade, flags = _stored(1.5), []
    verify._store_later_reading(grade, CellVerdict("test_x_speed", 3.2, 4.0, "decided"), 1.5, flags)
    assert grade.auto_score == 3.2 and not grade.needs_manual_grade and flags == []


def test_a_later_reading_still_too_noisy_keeps_the_better_score_flagged():
    grade, flags = _stored(2.5), []
    later = CellVerdict("test_x_speed", 1.0, 4.0, "noisy", undecided=True, readings=(0.5, 1.0))
    verify._store_later_reading(grade, later, 2.5, flags)
    assert grade.auto_score == 2.5
    assert [f.kind for f in flags] == ["undecided"] and flags[0].cells == ("test_x_speed",)
    assert "readings 0.5, 1, 2.5 of 4 points" in flags[0].detail


def test_a_later_reading_that_could_not_measure_leaves_the_first_grading_standing():
    grade, flags = _stored(2.5), []
    verify._store_later_reading(grade, CellVerdict("test_x_speed", 0.0, 4.0, "worker died", conclusive=False),
                                2.5, flags)
    assert grade.auto_score == 2.5 and flags == []


def test_a_correctness_test_only_loses_points_outside_the_kernel_unless_the_kernel_ran_out_of_time():
    passed = CellVerdict("test_x_hidden", 2.0, 2.0, "passed")
    failed = CellVerdict("test_x_hidden", 0.0, 2.0, "GradingError: ...")
    assert verify._correctness_score(2.0, failed, timed_out=False) == 0.0  # lower outside: stored
    assert verify._correctness_score(0.0, passed, timed_out=False) is None  # the kernel's 0 stands
    # stopped at the time limit in a busy kernel, passed outside: a correct answer keeps its points
    assert verify._correctness_score(0.0, passed, timed_out=True) == 2.0
    unchecked = CellVerdict("test_x_hidden", 2.0, 2.0, "not data", conclusive=False, not_data=True)
    assert verify._correctness_score(0.0, unchecked, timed_out=True) is None


def test_tests_after_an_answer_cell_stopped_at_the_time_limit_are_known(tmp_path):
    # Week 8, graded beside other work (load 3.3): the student's side-by-side table ran past
    # the limit in the kernel, so its test failed there on an undefined name, while outside
    # the kernel every cell ran and the test passed. The tests after such a cell are the ones
    # whose kernel failure says nothing about the answer.
    cells = [nbformat.v4.new_code_cell(metadata={"nbgrader": {"grade_id": g}} if g else {})
             for g in ("kernels", "test_kernels", "side_by_side", None, "test_side_by_side_hidden", "test_job")]
    timeout = nbformat.v4.new_output("error", ename=verify.CELL_TIMEOUT, evalue="", traceback=[])
    cells[2].outputs = [timeout]
    path = tmp_path / "week8.ipynb"

    def stopped():
        return verify._after_a_timeout(verify._kernel_notebook(path))

    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    assert stopped() == {"test_side_by_side_hidden": "side_by_side", "test_job": "side_by_side"}
    nbformat.write(nbformat.v4.new_notebook(cells=cells[:2]), path)
    assert stopped() == {}
    # a test cell stopped at the limit (an answer too slow for it) counts only for itself
    cells[2].outputs, cells[1].outputs = [], [timeout]
    cells[1].metadata["nbgrader"]["grade"] = True
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    assert stopped() == {}
    path.write_text("{not json")
    assert verify._kernel_notebook(path) is None and stopped() == {}


def test_only_a_kernel_that_gave_more_than_is_stored_is_flagged():
    # The kernel's short reading below the verifier's is noise on a busy machine, not a thing to review.
    assert verify._kernel_gave_more(4.0, 0.0, 4.0) and verify._kernel_gave_more(2.0, 0.0, 2.0)
    assert not verify._kernel_gave_more(0.0, 4.0, 4.0) and not verify._kernel_gave_more(3.5, 3.0, 4.0)


# --- the pipeline: each stage once, in order --------------------------------------------------

UNDECIDED = Flag("undecided", ("test_x_speed",), "every reading too noisy to grade on")


@pytest.fixture
def stages(monkeypatch, tmp_path):
    """nbgrading's stages replaced by ones that record each visit; ``first``: the verify stage's flags."""
    visits: list[str] = []
    setting = {"first": [], "later_fails": False}

    def copy_in(course, submission):
        visits.append("copy in")
        return CopiedIn(submission, {"w1": True}, {"w1": None}, (), ())

    def autograde(course, copied, log_file):
        visits.append("autograde")
        return Executed(copied, log_file, True, ())

    def verify_(course, student, assignment, log_file, only=None, profile=None):
        if only is None:
            visits.append("verify")
            return list(setting["first"]), {"test_x_speed": 1.9}
        visits.append(f"later reading of {sorted(only)}")
        if setting["later_fails"]:
            raise RuntimeError("the verifier could not start")
        return [], {"test_x_speed": 2.4}

    def write_pages(course, copied, log_file, graded):
        visits.append("feedback")
        return (), ()

    def scores(course, assignment, student):
        visits.append("scores")
        return 3.0, 4.0, {"test_x_speed": 3.0}

    for name, fake in [("copy_in", copy_in), ("autograde", autograde), ("_verify", verify_),
                       ("write_pages", write_pages), ("_scores", scores),
                       ("_write_done", lambda course, submission, result: visits.append("done record"))]:
        monkeypatch.setattr(nbgrading, name, fake)
    course = nbgrading.Course(tmp_path, tmp_path / "grading", "sqlite://", 60)
    submission = Submission("ana", "week1", "nbgrader", {"w1": tmp_path / "w1.ipynb"})
    return SimpleNamespace(course=course, submission=submission, visits=visits, setting=setting)


def test_a_decided_submission_meets_each_stage_once_in_its_worker(stages):
    result = nbgrading._grade_safely(stages.course, stages.submission, None, defer=True)
    assert isinstance(result, SubmissionResult) and not result.flags
    assert stages.visits == ["copy in", "autograde", "verify", "feedback", "scores", "done record"]
    assert result.speedups == {"test_x_speed": 1.9} and result.score == 3.0


def test_an_undecided_submission_gets_its_feedback_once_after_the_later_reading(stages):
    stages.setting["first"] = [UNDECIDED]
    handed = nbgrading._grade_safely(stages.course, stages.submission, None, defer=True)
    # back from the worker before any page is written or the grading recorded as done
    assert isinstance(handed, verify.Verified) and handed.undecided == {"test_x_speed"}
    assert stages.visits == ["copy in", "autograde", "verify"]
    result = nbgrading._settle(stages.course, handed)
    assert stages.visits == ["copy in", "autograde", "verify", "later reading of ['test_x_speed']", "feedback",
                             "scores", "done record"]
    assert not result.has_flag("undecided") and result.speedups == {"test_x_speed": 2.4}
    assert "later reading" in result.profile and "feedback" in result.profile


def test_a_failed_later_reading_keeps_the_first_and_still_writes_the_feedback_once(stages):
    stages.setting["first"], stages.setting["later_fails"] = [UNDECIDED], True
    result = nbgrading._settle(stages.course, nbgrading._grade_safely(stages.course, stages.submission, None,
                                                                      defer=True))
    assert stages.visits.count("feedback") == 1 and stages.visits[-1] == "done record"
    assert result.has_flag("undecided")
    assert [f.detail for f in result.flags if f.kind == "note"] == [
        "the later reading of test_x_speed failed: the verifier could not start"]


def test_grade_submission_alone_finishes_an_undecided_submission_without_a_later_reading(stages):
    stages.setting["first"] = [UNDECIDED]
    result = nbgrading.grade_submission(stages.course, stages.submission)
    assert stages.visits == ["copy in", "autograde", "verify", "feedback", "scores", "done record"]
    assert result.has_flag("undecided")


def test_a_memory_cell_the_kernel_runs_sends_the_notebook_to_a_fresh_worker(tmp_path):
    # A memory cell reads the first call on its input; a kernel that ran the test has called the
    # student's code on that input already, so it is not the verifier's worker (week 5's
    # content_cache variant in its self-test). A memory cell graded outside the kernel only was
    # never run there: the kernel can serve (week 5's are, since December 2026).
    from pathlib import Path

    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from course_lib.grader.common import GRADED_OUTSIDE

    def notebook(name, source):
        cell = new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade": True, "grade_id": "test_x_memory", "locked": True,
                                     "solution": False, "points": 1, "schema_version": 3}
        nbformat.write(new_notebook(cells=[cell]), tmp_path / name)
        return tmp_path / name

    test = "peak_memory_points(f, '1 MB', '10 MB', 1, PATH)"
    assert verify._reads_first_calls(notebook("in_kernel.ipynb", test))
    assert not verify._reads_first_calls(notebook("outside.ipynb", f"{GRADED_OUTSIDE}\n{test}"))
    solutions = Path(__file__).resolve().parents[1] / "solutions"
    assert not any(verify._reads_first_calls(solutions / week / f"{week}.ipynb")
                   for week in ("week2", "week5", "week7", "week8"))
