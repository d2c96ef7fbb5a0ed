"""Tests for course_lib.grader.nbgrading's own rules, without grading a notebook.

The whole pipeline is proved end to end in tests/test_grading_e2e.py and the assignments'
self-tests; here, the rule that stores a later reading of a cell left ``undecided``.
"""

from __future__ import annotations

from types import SimpleNamespace

from course_lib.grader import nbgrading
from course_lib.grader.verification import CellVerdict


def _stored(score: float) -> SimpleNamespace:
    return SimpleNamespace(auto_score=score, needs_manual_grade=True)


def test_a_decided_later_reading_replaces_the_noisy_one_it_follows():
    grade, flags = _stored(1.5), []
    nbgrading._store_later_reading(grade, CellVerdict("test_x_speed", 3.2, 4.0, "decided"), 1.5, flags)
    assert grade.auto_score == 3.2 and not grade.needs_manual_grade and flags == []


def test_a_later_reading_still_too_noisy_keeps_the_better_score_flagged():
    grade, flags = _stored(2.5), []
    later = CellVerdict("test_x_speed", 1.0, 4.0, "noisy", undecided=True, readings=(0.5, 1.0))
    nbgrading._store_later_reading(grade, later, 2.5, flags)
    assert grade.auto_score == 2.5
    assert [f.kind for f in flags] == ["undecided"] and flags[0].cells == ("test_x_speed",)
    assert "readings 0.5, 1, 2.5 of 4 points" in flags[0].detail


def test_a_later_reading_that_could_not_measure_leaves_the_first_grading_standing():
    grade, flags = _stored(2.5), []
    nbgrading._store_later_reading(grade, CellVerdict("test_x_speed", 0.0, 4.0, "worker died", conclusive=False),
                                   2.5, flags)
    assert grade.auto_score == 2.5 and flags == []


def test_a_correctness_test_only_loses_points_outside_the_kernel_unless_the_kernel_ran_out_of_time():
    passed = CellVerdict("test_x_hidden", 2.0, 2.0, "passed")
    failed = CellVerdict("test_x_hidden", 0.0, 2.0, "GradingError: ...")
    assert nbgrading._correctness_score(2.0, failed, timed_out=False) == 0.0  # lower outside: stored
    assert nbgrading._correctness_score(0.0, passed, timed_out=False) is None  # the kernel's 0 stands
    # stopped at the time limit in a busy kernel, passed outside: a correct answer keeps its points
    assert nbgrading._correctness_score(0.0, passed, timed_out=True) == 2.0
    unchecked = CellVerdict("test_x_hidden", 2.0, 2.0, "not data", conclusive=False, not_data=True)
    assert nbgrading._correctness_score(0.0, unchecked, timed_out=True) is None
