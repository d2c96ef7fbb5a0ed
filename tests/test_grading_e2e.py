"""End to end through real nbgrader: `course grade` on every sample submission, twice.

The samples in examples/submissions are graded into a temporary grading folder with the
SQLite gradebook. Every sample's exact score and flags are asserted; then an instructor's
manual grade is added and the batch is graded again: the same automatic scores, the manual
grade kept, nothing lost or duplicated. Feedback must exist for everyone and must not show
hidden-test source.
"""

from __future__ import annotations

import contextlib
import csv
import html
import io
import re
import runpy
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_lib.grader import cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
SUBMISSIONS = ROOT / "examples" / "submissions"
_SAMPLES = runpy.run_path(str(ROOT / "examples" / "make_submissions.py"))

# Points: test_count_visible 2, test_count_hidden 2, test_count_speed 4, test_unknown_visible 1,
# test_unknown_hidden 1 (10 in all).
EXPECTED = {
    "correct_fast": (10, set()),
    "correct_slow": (6, set()),
    "wrong": (0, set()),
    "untouched": (0, set()),
    "malformed_json": (0, {"malformed"}),
    "deleted_grade_cell": (8, {"restored"}),
    "infinite_loop": (2, {"timeout"}),
    "patches_perf_counter": (6, {"tampering"}),
    "memoises": (6, set()),
    "always_equal": (2, set()),
    "os_exit": (4, {"kernel-died"}),
    "nbgrader_execution": (6, {"reads-NBGRADER_EXECUTION"}),
    # caught only outside the kernel: the stored score is the out-of-kernel verdict
    "rebinds_assert_speedup": (6, {"verdict-differs"}),
    "patches_grading_internals": (6, {"verdict-differs"}),
    "rebinds_assert_same": (2, {"verdict-differs"}),
    # resisted in the kernel already
    "patches_numpy_compare": (2, set()),
    "games_the_timer": (6, set()),
    # stopped by the kernel's memory limit in its unknown_ids cell
    "memory_hog": (8, {"memory-limit"}),
    # the notebook's kernel answers the verifier; when it ends itself instead, a fresh worker does
    "served_by_its_kernel": (10, set()),
    "dies_when_serving": (10, set()),
}
MANUAL = ("correct_slow", "test_count_speed", 1.5)  # an instructor's override, kept by regrading
TIMEOUT = "8"  # seconds per cell: the infinite loop costs three of them
# Per kernel. An honest example notebook peaks at about 110 MB (the kernel's ru_maxrss,
# measured). First-touch page faults run at only 100-300 MB/s on these virtual machines,
# so memory_hog needs seconds per GB: the limit must be reached well inside TIMEOUT, or
# the cell times out first and the flag is "timeout" instead of "memory-limit".
MEMORY_LIMIT = "400MB"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade every sample twice; return what both passes left behind."""
    grading = tmp_path_factory.mktemp("e2e") / "grading"
    args = ["grade", "example", "--submissions", str(SUBMISSIONS), "--grading-dir", str(grading),
            "--timeout", TIMEOUT, "--memory-limit", MEMORY_LIMIT, "--no-progress"]
    first = _run(args)
    first["gradebook"] = _gradebook(grading)
    first["flags"] = _flags(grading)
    first["flag_rows"] = _flag_rows(grading)
    first["grades_csv"] = (grading / "grades.csv").read_text()
    student, cell, score = MANUAL
    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        grade = gb.find_grade(cell, "example", "example", student)
        grade.manual_score = score
        gb.db.commit()
    second = _run(args + ["--force"])  # regrade everything: manual grades must survive it
    second["gradebook"] = _gradebook(grading)
    second["flags"] = _flags(grading)
    return {"grading": grading, "first": first, "second": second}


def test_every_submission_scores_exactly_as_expected(graded):
    gradebook = graded["first"]["gradebook"]
    assert set(gradebook) == set(EXPECTED)
    scores = {student: row["auto_total"] for student, row in gradebook.items()}
    assert scores == {student: expected for student, (expected, _) in EXPECTED.items()}
    assert all(row["max_score"] == 10 for row in gradebook.values())


def test_every_submission_has_exactly_the_expected_flags(graded):
    flags = graded["first"]["flags"]
    assert {student: flags.get(student, set()) for student in EXPECTED} == \
        {student: kinds for student, (_, kinds) in EXPECTED.items()}


def test_flags_name_the_cells_concerned(graded):
    rows = graded["first"]["flag_rows"]
    cells = {(row["student"], row["flag"]): row["cells"].split() for row in rows}
    assert cells[("infinite_loop", "timeout")] == ["test_count_visible", "test_count_hidden", "test_count_speed"]
    assert cells[("deleted_grade_cell", "restored")] == ["test_count_visible"]
    assert cells[("os_exit", "kernel-died")] == ["test_count_speed"]
    assert cells[("patches_perf_counter", "tampering")] == ["test_count_speed"]
    assert cells[("memory_hog", "memory-limit")] == ["unknown_ids"]
    assert cells[("rebinds_assert_speedup", "verdict-differs")] == ["test_count_speed"]


def test_disagreements_report_both_verdicts(graded):
    rows = [r for r in graded["first"]["flag_rows"] if r["flag"] == "verdict-differs"]
    details = {(r["student"], r["cells"]): r["detail"] for r in rows}
    speed = details[("patches_grading_internals", "test_count_speed")]
    assert speed.startswith("in the student's kernel 4/4, outside it 0/4 (stored)")
    assert re.search(r"measured outside your kernel: [01](\.\d+)?x", speed)
    assert set(details) >= {("rebinds_assert_same", "test_count_visible"), ("rebinds_assert_same", "test_count_hidden")}


def test_rebound_helpers_earn_what_honest_code_earns(graded):
    cells = {student: row["cells"] for student, row in graded["first"]["gradebook"].items()}
    for student in ("rebinds_assert_speedup", "patches_grading_internals", "games_the_timer"):
        assert cells[student] == cells["correct_slow"], student
    assert cells["rebinds_assert_same"] == cells["wrong"] | {"test_unknown_visible": 1, "test_unknown_hidden": 1}
    assert cells["patches_numpy_compare"] == cells["rebinds_assert_same"]


def test_feedback_shows_the_out_of_kernel_verdict(graded):
    page = (graded["grading"] / "feedback" / "rebinds_assert_speedup" / "example" / "example.html").read_text()
    text = html.unescape(page)
    assert "The speed-up that counted:" in text and "measured by the grader outside your kernel" in text
    assert "Score: 0 / 4" in text and "batches of" in text and "thread pools: blas 1 thread" in text


def test_per_cell_scores_show_what_each_trick_earned(graded):
    cells = {student: row["cells"] for student, row in graded["first"]["gradebook"].items()}
    # the kernel died in the speed test: what ran before counts, what came after scores zero
    assert cells["os_exit"] == {"test_count_visible": 2, "test_count_hidden": 2, "test_count_speed": 0,
                                "test_unknown_visible": 0, "test_unknown_hidden": 0}
    # a deleted test is put back and scores zero; the rest of the notebook is graded normally
    assert cells["deleted_grade_cell"]["test_count_visible"] == 0
    assert cells["deleted_grade_cell"]["test_count_speed"] == 4
    # memoising, a patched clock and a slowed-down baseline gain nothing over honest slow code
    for student in ("memoises", "patches_perf_counter", "nbgrader_execution"):
        assert cells[student] == cells["correct_slow"], student


def test_table_and_exit_status(graded):
    first = graded["first"]
    assert first["status"] == cli.EXIT_FLAGGED
    for student, (score, _) in EXPECTED.items():
        line = next(line for line in first["stdout"].splitlines() if line.startswith(student + " "))
        assert f"{score} / 10" in line
    assert f"Feedback:  {graded['grading'] / 'feedback'}" in first["stdout"]


def test_grades_csv_is_nbgrader_export_of_the_gradebook(graded):
    rows = list(csv.DictReader(graded["first"]["grades_csv"].splitlines()))
    assert {row["student_id"]: float(row["score"]) for row in rows} == \
        {student: float(score) for student, (score, _) in EXPECTED.items()}
    assert {row["assignment"] for row in rows} == {"example"}


def test_grading_twice_gives_the_same_scores_and_keeps_manual_grades(graded):
    first, second = graded["first"]["gradebook"], graded["second"]["gradebook"]
    assert {s: r["auto_total"] for s, r in second.items()} == {s: r["auto_total"] for s, r in first.items()}
    assert {s: r["cells"] for s, r in second.items()} == {s: r["cells"] for s, r in first.items()}
    assert graded["second"]["flags"] == graded["first"]["flags"]
    student, cell, manual = MANUAL
    assert second[student]["manual"] == {cell: manual}
    auto_without_cell = first[student]["auto_total"] - first[student]["cells"][cell]
    assert second[student]["score"] == pytest.approx(auto_without_cell + manual)
    # one submission per student, one grade per grade cell: nothing duplicated or dropped
    assert all(row["n_grades"] == 5 for row in second.values())


def test_every_student_gets_feedback_without_hidden_tests(graded):
    hidden = _hidden_lines()
    assert len(hidden) > 10  # the search below looks for something real
    visible_marker = "assert_same(unknown_ids([3, 1, 2], [5, 1, 9, 5, 2]), [5, 9])"
    for student in EXPECTED:
        files = list((graded["grading"] / "feedback" / student / "example").glob("*.html"))
        assert [f.name for f in files] == ["example.html"], student
        text = _normalise(html.unescape(re.sub(r"<[^>]+>", "", files[0].read_text(encoding="utf-8"))))
        leaked = [line for line in hidden if _normalise(line) in text]
        assert leaked == [], (student, leaked)
        if student != "malformed_json":
            assert _normalise(visible_marker) in text, student  # the search does see source code


def test_unreadable_submission_is_kept_byte_for_byte(graded):
    kept = graded["grading"] / "submitted" / "malformed_json" / "example" / "example.ipynb.unreadable"
    assert kept.read_bytes() == (SUBMISSIONS / "malformed_json" / "example" / "example.ipynb").read_bytes()


def test_the_notebooks_own_kernel_answers_the_verifier_and_a_fresh_worker_stands_in(graded):
    # Both samples print a mark into the grading log from a cell run in a fresh worker of the
    # verifier's (the worker's output goes to the log; the kernel's to the notebook). An honest
    # notebook's cells run once, in its kernel, which then answers the verifier; a kernel that
    # ends itself when it starts answering is replaced by one fresh worker, which runs them.
    logs = graded["grading"] / "logs" / "example"
    mark = _SAMPLES["FRESH_WORKER_MARK"]
    runs = {student: (logs / f"{student}.log").read_text().count(mark)
            for student in ("served_by_its_kernel", "dies_when_serving")}
    assert runs == {"served_by_its_kernel": 0, "dies_when_serving": 1}


def test_cells_after_a_dead_kernel_are_marked_not_run(graded):
    nb = nbformat.read(graded["grading"] / "autograded" / "os_exit" / "example" / "example.ipynb", 4)
    # (the grader's out-of-kernel verdict may follow, as a stream: only the errors are compared)
    enames = {c.metadata.get("nbgrader", {}).get("grade_id"): [o.get("ename") for o in c.outputs
                                                               if o.get("output_type") == "error"]
              for c in nb.cells if c.cell_type == "code"}
    assert "KernelDied" in enames["test_count_speed"]
    assert enames["test_unknown_visible"] == ["CellNotRun"]
    assert enames["test_count_visible"] == []  # ran and passed before the kernel died


# --- helpers ---------------------------------------------------------------------------------

def _run(args: list[str]) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main(args)
    return {"status": status, "stdout": out.getvalue()}


def _gradebook(grading: Path) -> dict[str, dict]:
    rows = {}
    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        for submission in gb.find_assignment("example").submissions:
            grades = [g for nb in submission.notebooks for g in nb.grades]
            rows[submission.student.id] = {
                "score": submission.score,
                "max_score": submission.max_score,
                "auto_total": sum(g.auto_score or 0 for g in grades),
                "cells": {g.name: g.auto_score for g in grades},
                "manual": {g.name: g.manual_score for g in grades if g.manual_score is not None},
                "n_grades": len(grades),
            }
    return rows


def _flag_rows(grading: Path) -> list[dict]:
    with (grading / "flags.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def _flags(grading: Path) -> dict[str, set[str]]:
    kinds: dict[str, set[str]] = {}
    for row in _flag_rows(grading):
        kinds.setdefault(row["student"], set()).add(row["flag"])
    return kinds


def _hidden_lines() -> list[str]:
    """Lines of the source's hidden-test regions that appear nowhere in the student version."""
    source = nbformat.read(ROOT / "solutions" / "example" / "example.ipynb", 4)
    released = nbformat.read(ROOT / "assignments" / "example" / "example.ipynb", 4)
    visible = _normalise("\n".join(c.source for c in released.cells))
    lines = []
    for cell in source.cells:
        for block in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", cell.source, re.S):
            lines += [line.strip() for line in block.splitlines() if line.strip()]
    return [line for line in lines if _normalise(line) not in visible]


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text)
