"""Proof, through real nbgrader, that every assignment in ``solutions/`` grades as designed.

For each assignment there is a ``tests/variants/NAME.py`` whose ``VARIANTS`` maps a kind of
submission to the source of its answer cells (by nbgrader ``grade_id``), and whose optional
``EXPECT`` gives expected scores. ``course selftest NAME`` (:func:`course_lib.grader.authoring.selftest`)
builds the submissions from the student version and grades them with ``course grade`` into a
temporary gradebook:

``reference``
    the answer cells of the instructor's solution: full marks.
``untouched``
    the student notebook as released: zero, and the grader does not crash.
``slow``
    correct but slow: every correctness point and no performance point.
``wrong``
    fast but wrong: no performance point, and not every correctness point.
any other kind
    an alternative a class plausibly submits (week 1's ``zip`` loop, week 2's monotonic deque,
    ...), graded to the range its ``EXPECT`` entry gives: the technique the notebook teaches
    earns every performance point, a loop that is merely tidier little or nothing.

Performance cells are the test cells whose ``grade_id`` ends in ``_speed``, ``_memory``
or ``_scaling``. The assignments are whatever ``solutions/`` holds, so a new one written with
``course new`` is tested as soon as its variants file exists. A second test checks that
``assignments/`` is what ``course release`` makes from ``solutions/`` today.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from course_lib.grader import authoring, cli
from course_lib.grader.nbgrading import Course

# A week's self-test grades 10-16 submissions through course grade. Beside another self-test
# on 2 cores (load about 2.5; 5 December 2026) week 8 took 21 minutes and week 7 22;
# with more work beside them (load 5-8) both went past 30 minutes. 45 minutes per week keeps
# a busy runner from failing a self-test that only ran slowly.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700)]

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = Course.locate(root=ROOT).assignments()


def test_every_assignment_has_a_release_and_variants_with_a_slow_and_a_wrong_submission():
    assert {"example", *(f"week{n}" for n in range(1, 9))} <= set(ASSIGNMENTS)
    for name in ASSIGNMENTS:
        variants_file = ROOT / "tests" / "variants" / f"{name}.py"
        assert variants_file.is_file(), f"{name}: write {variants_file.relative_to(ROOT)}"
        variants, _ = authoring.load_variants(variants_file)
        assert {"slow", "wrong"} <= set(variants), name
        assert (ROOT / "assignments" / name / f"{name}.ipynb").is_file(), f"{name}: run course release {name}"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_student_version_is_in_sync_with_the_solution(name, tmp_path):
    for item in ("nbgrader_config.py", "solutions"):
        source = ROOT / item
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / item)
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["release", name, "--no-validate", "--root", str(tmp_path)]) == cli.EXIT_OK
    for made in sorted((tmp_path / "assignments" / name).rglob("*")):
        if made.is_file():
            committed = ROOT / "assignments" / name / made.relative_to(tmp_path / "assignments" / name)
            assert committed.is_file(), f"{committed} missing: run `course release {name}`"
            assert committed.read_bytes() == made.read_bytes(), f"{committed} is stale: run `course release {name}`"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_assignment_grades_reference_untouched_slow_and_wrong_as_designed(name):
    rows = authoring.selftest(Course.locate(root=ROOT), name)
    table = authoring.format_selftest(name, rows)
    assert [r.kind for r in rows][:4] == ["reference", "untouched", "slow", "wrong"], table
    assert any(authoring._group(g) == "performance" for g in rows[0].maxima), f"{name} has no performance cell"
    assert all(r.ok for r in rows), table
