"""A grading run killed mid-batch and started again grades every submission exactly once.

`course grade` runs as its own process on four samples and is killed (SIGKILL, with its
kernels) while the third submission is being graded. The second run must grade only what
was not finished, leave the finished submissions' stored grades alone, and end with one
complete set of grades per student; a third run grades nothing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {"correct_fast": 10, "correct_slow": 6, "rebinds_assert_speedup": 6, "wrong": 0}


def _command(submissions: Path, grading: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "course_lib.grader.cli", "grade", "example", "--submissions", str(submissions),
            "--grading-dir", str(grading), "--timeout", "8", "--no-progress", *extra]


def _done(grading: Path) -> dict[str, int]:
    return {p.stem: p.stat().st_mtime_ns for p in (grading / "done" / "example").glob("*.json")}


def _grades(grading: Path) -> dict[str, dict[str, float]]:
    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        return {s.student.id: {g.name: g.score for nb in s.notebooks for g in nb.grades}
                for s in gb.find_assignment("example").submissions}


def _kill_after(proc: subprocess.Popen, grading: Path, finished: int, limit: float = 600) -> None:
    deadline = time.monotonic() + limit
    while len(_done(grading)) < finished:
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "grading made no progress"
        time.sleep(0.1)
    time.sleep(1.5)  # the next submission is now being autograded
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_killed_run_resumes_and_grades_each_submission_once(tmp_path):
    submissions = tmp_path / "submissions"
    for student in SAMPLES:
        shutil.copytree(ROOT / "examples" / "submissions" / student, submissions / student)
    grading = tmp_path / "grading"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.Popen(_command(submissions, grading), cwd=ROOT, env=env, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _kill_after(run, grading, finished=2)

    before = _done(grading)
    assert 2 <= len(before) < len(SAMPLES), before
    finished_grades = {s: g for s, g in _grades(grading).items() if s in before}
    assert not list((grading / "done").rglob("*.partial")), "a record was left half-written"

    resumed = subprocess.run(_command(submissions, grading), cwd=ROOT, env=env, capture_output=True, text=True)
    assert resumed.returncode in (0, 1), resumed.stderr  # 1: some submission is flagged

    after = _done(grading)
    assert set(after) == set(SAMPLES)
    assert {s: after[s] for s in before} == before  # finished before the kill: not graded again
    grades = _grades(grading)
    assert {s: sum(cells.values()) for s, cells in grades.items()} == SAMPLES
    assert all(len(cells) == 5 for cells in grades.values())
    assert {s: grades[s] for s in before} == finished_grades
    assert "rebinds_assert_speedup" in (grading / "flags.csv").read_text()

    again = subprocess.run(_command(submissions, grading), cwd=ROOT, env=env, capture_output=True, text=True)
    assert again.returncode in (0, 1), again.stderr
    assert _done(grading) == after  # nothing left to grade
    forced = subprocess.run(_command(submissions, grading, "--force"), cwd=ROOT, env=env,
                            capture_output=True, text=True)
    assert forced.returncode in (0, 1), forced.stderr
    assert all(_done(grading)[s] > after[s] for s in SAMPLES)  # --force grades everything again
    assert {s: sum(cells.values()) for s, cells in _grades(grading).items()} == SAMPLES
