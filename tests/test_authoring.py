"""Tests for course_lib.grader.authoring: course new, calibrate, selftest, reset, release validation.

The slow test is the instructor's whole flow through the CLI: ``course new`` writes an
assignment, ``course calibrate`` measures it, ``course release`` validates and releases it,
and ``course grade`` gives a right, a slow and a wrong submission their exact scores.
"""

from __future__ import annotations


import contextlib
import dataclasses
import io
import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from course_lib.grader import authoring, cli
from course_lib.grader._submissions import answered

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def course_root(tmp_path, monkeypatch):
    """An empty course repository (only nbgrader_config.py) and a private validation cache."""
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", root)
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COURSE_GRADING_DIR", raising=False)
    return root


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main(list(argv))
    return status, out.getvalue()


# --- fast: the pieces ----------------------------------------------------------------------------

def test_thresholds_are_read_from_positional_keyword_and_computed_arguments():
    source = ("### BEGIN HIDDEN TESTS\nassert_speedup(f, g, lambda: (1,), 12, budget=0.5)\n"
              "x = speedup_points(f, g, make_args=m, full_at=3.0 * _CORES, zero_at=2, points=8)\n"
              "parallel_points(f, g, m, 2, 1.3, zero_at=1.1, points=4)\n"
              "grading.assert_peak_memory_below(f, '20 MB', big)\n"
              "assert_scaling(f, lambda n: n, sizes=[1, 2], max_exponent=1.5)\n"
              "peak_memory_points(f, '20 MB', 100_000_000, 6, big)\n"
              "scaling_points(f, m, [1, 2], 1.5, zero_at=1.8, points=3)\n### END HIDDEN TESTS")
    found = authoring.thresholds(source)
    assert [t.helper for t in found] == list(authoring.PERFORMANCE_HELPERS)
    assert found[0].number("at_least") == 12 and found[0].number("budget") == 0.5
    assert found[1].values["full_at"] == "3.0 * _CORES" and found[1].number("full_at") is None
    assert found[1].number("zero_at") == 2
    assert found[2].number("workers") == 2 and found[2].number("full_at") == 1.3
    assert found[2].number("zero_at") == 1.1 and found[2].number("points") == 4
    assert found[3].number("limit") == 20_000_000
    assert found[4].number("max_exponent") == 1.5 and found[4].values["sizes"] == [1, 2]
    assert found[5].number("full_at") == 20_000_000 and found[5].number("zero_at") == 100_000_000
    assert found[5].number("points") == 6
    assert found[6].number("full_at") == 1.5 and found[6].number("zero_at") == 1.8
    assert found[6].values["sizes"] == [1, 2] and found[6].number("points") == 3
    assert authoring.thresholds("this is not python (") == []


def test_new_writes_a_source_notebook_with_the_rules_and_refuses_an_existing_name(course_root, capsys):
    assert cli.main(["new", "speedy", "--root", str(course_root)]) == cli.EXIT_OK
    nb = nbformat.read(course_root / "solutions" / "speedy" / "speedy.ipynb", as_version=4)
    nbformat.validate(nb)
    meta = [c.metadata.get("nbgrader", {}) for c in nb.cells]
    setup = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    first_line = next(line for line in setup.source.splitlines() if line and not line.startswith("#"))
    assert first_line.startswith("from course_lib.grading import")  # helpers before any other code
    assert setup.metadata.nbgrader["locked"] and not setup.metadata.nbgrader["solution"]
    graded = {m["grade_id"]: m["points"] for m in meta if m.get("grade")}
    assert graded == {"test_count_below": 2, "test_count_below_speed": 4}
    answer = [m["grade_id"] for m in meta if m.get("solution")]
    assert answer == ["count_below"]
    speed = nb.cells[[m.get("grade_id") for m in meta].index("test_count_below_speed")].source
    assert "### BEGIN HIDDEN TESTS" in speed and "def _count_slow" in speed and "seed=None" in speed

    assert cli.main(["new", "speedy", "--root", str(course_root)]) == cli.EXIT_USAGE
    assert "exists already" in capsys.readouterr().err
    assert cli.main(["new", "week-9", "--root", str(course_root)]) == cli.EXIT_USAGE
    assert "cannot name an assignment" in capsys.readouterr().err


def test_calibration_report_gives_margin_suggestions_and_warns_of_refused_cells():
    speed = authoring.CellCalibration(
        "test_x_speed", "speed", tuple(authoring.thresholds("assert_speedup(f, g, m, at_least=10)")),
        quiet=(40.0, 45.0, 50.0), busy=(30.0, 33.0, 36.0), reference_seconds=(0.004,) * 6)
    text = authoring.format_calibration("wk", [speed])
    assert "quiet  min 40x  median 45x  max 50x  (3 runs)" in text
    assert "busy   min 30x  median 33x  max 36x" in text
    assert "is 3 times at_least=10" in text
    assert "suggested: full points at 10x" in text
    assert "would take 400 us per call" in text and "UNDER 1 ms: the cell is refused" in text
    memory = authoring.CellCalibration(
        "test_x_memory", "memory", tuple(authoring.thresholds("assert_peak_memory_below(f, '20 MB', a)")),
        quiet=(6_500_000.0,), busy=(6_600_000.0,))
    scaling = authoring.CellCalibration(
        "test_x_scaling", "scaling", tuple(authoring.thresholds("assert_scaling(f, m, [1, 2], 1.5)")),
        quiet=(1.02, 1.1), problems=("busy: 0/3: could not be verified",))
    text = authoring.format_calibration("wk", [memory, scaling])
    assert "margin: the limit '20 MB' is 3 times the reference's largest peak" in text
    assert "suggested: limit about 15.0 MB" in text
    assert "a measured 1.60 passes; the reference's highest is 1.10 (+0.50)" in text
    assert "warning: busy: 0/3: could not be verified" in text


def test_a_solution_under_a_millisecond_per_call_is_refused_with_the_input_size_to_use():
    # Readings as issue 25 reported them for a new assignment whose solution took well under
    # 1 ms per call: no threshold can come from that.
    found = tuple(authoring.thresholds(
        "speedup_points(f, g, lambda: (make(2_000, seed=None),), full_at=100, zero_at=10, points=4)"))
    cell = authoring.CellCalibration("test_x_speed", "speed", found, quiet=(1.73e5, 696.0, 1740.0),
                                     reference_seconds=(0.01,) * 3, solution_seconds=(5e-5, 4e-5, 6e-5))
    text = authoring.format_calibration("wk", [cell])
    assert cell.unstable
    assert "every reading: 1.73e+05x, 696x, 1.74e+03x" in text
    assert "UNSTABLE: the solution takes 50 us per call" in text and "suggested:" not in text
    assert "about 20 times larger" in text and "the size 2,000 in make_args would become about 40,000" in text
    slow_enough = dataclasses.replace(cell, quiet=(40.0, 45.0, 50.0), solution_seconds=(2e-3,) * 3)
    assert not slow_enough.unstable
    assert "suggested: full points at" in authoring.format_calibration("wk", [slow_enough])


def test_a_cell_scored_exactly_is_reported_as_nothing_to_calibrate():
    # Week 5's deep-memory cell is named *_memory but scores log_points on exact byte counts.
    exact = authoring.CellCalibration("test_compact_memory", "memory",
                                      tuple(authoring.thresholds("log_points(ratio, 8, 1.5, 3)")))
    text = authoring.format_calibration("wk", [exact])
    assert "test_compact_memory (memory): no measuring helper in the cell" in text
    assert "nothing to calibrate" in text and "not measured" not in text


@pytest.mark.parametrize("x, nice", [(3.3, 3.0), (9.99, 8.0), (10.0, 10.0), (27.0, 25.0), (0.042, 0.04)])
def test_suggested_thresholds_are_round_numbers_never_above_the_value(x, nice):
    assert authoring._nice(x) == pytest.approx(nice)


def test_variants_file_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("VARIANTS = 3\n")
    with pytest.raises(ValueError, match="defines no VARIANTS dict"):
        authoring.load_variants(bad)
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ValueError, match="cannot be loaded .RuntimeError: boom"):
        authoring.load_variants(bad)
    good = tmp_path / "good.py"
    good.write_text("VARIANTS = {'slow': {}, 'half': {}}\nEXPECT = {'half': {'total': (2, 3)}}\n")
    variants, expect = authoring.load_variants(good)
    assert set(variants) == {"slow", "half"}
    assert expect["half"] == {"total": (2, 3)} and expect["slow"]["performance"] == 0
    assert "wrong" not in expect  # defaults only for the kinds the file has


def test_expected_scores_are_checked_per_group_and_per_cell():
    maxima = {"test_a": 2.0, "test_a_speed": 4.0}
    reference = authoring.SelftestRow("reference", {"test_a": 2.0, "test_a_speed": 4.0}, maxima)
    slow = authoring.SelftestRow("slow", {"test_a": 2.0, "test_a_speed": 1.0}, maxima)
    problems = list(authoring._unexpected(slow, {"performance": 0, "correctness": "full"}, reference))
    assert problems == ["performance 1 (expected 0)"]
    assert list(authoring._unexpected(slow, {"test_a_speed": (0.5, 1.5), "correctness": "full"}, reference)) == []
    assert list(authoring._unexpected(slow, {"correctness": "less"}, reference)) == [
        "correctness 2 (expected less than the reference's 2)"]
    assert list(authoring._unexpected(slow, {"nope": 1}, reference)) == ["EXPECT names 'nope', not a test cell"]


def test_a_written_answer_marked_by_hand_is_left_out_of_the_automatic_points():
    # Every graded notebook ends with one: a markdown cell that nbgrader marks as graded by
    # hand (grade and solution both set). The reference cannot earn its points automatically,
    # so they must not count against "the solution gets full marks", nor for "the untouched
    # release earns nothing".
    manual = {"grade": True, "solution": True, "points": 2, "grade_id": "written_explanation",
              "locked": False, "schema_version": 3, "task": False}
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION",
                                  metadata={"nbgrader": {"grade_id": "f", "solution": True, "grade": False}}),
        nbformat.v4.new_code_cell("assert f() == 1", metadata={"nbgrader": {
            "grade_id": "test_f", "grade": True, "solution": False, "points": 1, "locked": True}}),
        nbformat.v4.new_markdown_cell("## Part 2: explain (2 points, marked by your instructor)"),
        nbformat.v4.new_markdown_cell("### BEGIN SOLUTION\nModel answer.\n\n**Rubric (2 points).**\n"
                                      "### END SOLUTION", metadata={"nbgrader": manual}),
    ])
    nbformat.validate(nb)
    maxima = authoring._points(nb)
    assert maxima == {"test_f": 1.0}
    written = authoring.solution_answers(nb)["written_explanation"]
    assert written.startswith("Model answer.") and "SOLUTION" not in written
    # as selftest builds its rows: only the automatic cells, whatever the gradebook holds
    graded = {"test_f": 1.0, "written_explanation": 0.0}  # not marked by hand yet
    reference = authoring.SelftestRow("reference", {g: graded[g] for g in maxima}, maxima)
    untouched = authoring.SelftestRow("untouched", {g: 0.0 for g in maxima}, maxima)
    assert list(authoring._unexpected(reference, authoring._DEFAULT_EXPECT["reference"], reference)) == []
    assert list(authoring._unexpected(untouched, authoring._DEFAULT_EXPECT["untouched"], reference)) == []
    # the verifier runs code cells only, and a written answer is no name the tests read
    from course_lib.grader import verification
    assert verification._answer_names(nb) == {"f"}
    assert not verification._is_test(nb.cells[3])


def test_competitor_burns_a_core_while_calibrating_and_stops():
    start = os.times()
    with authoring._competitor(True):
        time.sleep(1.0)
        children = [p for p in Path("/proc").iterdir() if p.name.isdigit()]
        assert any("while True: pass" in (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="ignore")
                   for p in children if (p / "cmdline").exists())
    after = os.times()
    assert after.children_user - start.children_user > 0.05  # it ran (on a loaded machine, little), and was reaped


def test_reset_deletes_the_grading_folder_only_when_confirmed(course_root, capsys, monkeypatch):
    grading = course_root / "grading-demo"
    (grading / "done").mkdir(parents=True)
    (grading / "gradebook.db").write_text("x")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal: no question asked
    argv = ["reset", "--root", str(course_root), "--grading-dir", str(grading)]
    assert cli.main(argv) == cli.EXIT_USAGE
    assert "add --yes to confirm" in capsys.readouterr().err and grading.is_dir()
    assert cli.main(argv + ["--yes"]) == cli.EXIT_OK
    assert not grading.exists() and (course_root / "nbgrader_config.py").is_file()
    assert cli.main(argv + ["--yes"]) == cli.EXIT_OK
    assert "nothing to reset" in capsys.readouterr().out
    assert cli.main(["reset", "--root", str(course_root), "--grading-dir", str(course_root), "--yes"]) == 2
    assert "holds the course itself" in capsys.readouterr().err


# --- slow: through nbgrader --------------------------------------------------------------------------

SLOW_ANSWER = '''
def count_below(values, limit):
    return sum(1 for v in values.tolist() if v < limit)
'''
WRONG_ANSWER = '''
def count_below(values, limit):
    return int(np.count_nonzero(values > limit))
'''


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_new_calibrate_release_and_grade_through_the_cli(course_root, tmp_path):
    started = time.perf_counter()
    root = ["--root", str(course_root)]
    assert _cli("new", "speedy", *root)[0] == cli.EXIT_OK

    status, report = _cli("calibrate", "speedy", "--runs", "1", "--no-busy", *root)
    assert status == cli.EXIT_OK, report
    assert "test_count_below_speed (speed): assert_speedup(at_least=10)" in report
    assert "quiet  min" in report and "suggested: full points at" in report and "UNDER 1 ms" not in report

    status, out = _cli("release", "speedy", *root)
    assert status == cli.EXIT_OK, out
    released = nbformat.read(course_root / "assignments" / "speedy" / "speedy.ipynb", as_version=4)
    text = nbformat.writes(released)
    assert "BEGIN HIDDEN TESTS" not in text and "_count_slow" not in text and "count_nonzero" not in text

    solution = nbformat.read(course_root / "solutions" / "speedy" / "speedy.ipynb", as_version=4)
    answers = authoring.solution_answers(solution)
    submissions = tmp_path / "submissions"
    for student, answer in {"right": answers["count_below"], "slow": SLOW_ANSWER, "wrong": WRONG_ANSWER}.items():
        path = submissions / student / "speedy" / "speedy.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(answered(released, {"count_below": answer}), path)
    status, table = _cli("grade", "speedy", "--submissions", str(submissions), "--no-progress",
                         "--grading-dir", str(tmp_path / "grading"), *root)
    rows = {line.split()[0]: line.split()[1:4] for line in table.splitlines()[2:] if line.strip()
            and line.split()[0] in ("right", "slow", "wrong")}
    assert rows == {"right": ["6", "/", "6"], "slow": ["2", "/", "6"], "wrong": ["0", "/", "6"]}, table
    log = (tmp_path / "grading" / "logs" / "speedy" / "right.log").read_text()
    assert "=== nbgrader autograde: ok" in log and "has changed!" not in log  # hidden tests put back quietly
    print(f"\nnew + calibrate (1 quiet run) + release (validated) + grading 3 submissions: "
          f"{time.perf_counter() - started:.0f} s wall")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_release_refuses_a_solution_that_fails_its_own_tests(course_root, capsys):
    assert cli.main(["new", "broken", "--root", str(course_root)]) == cli.EXIT_OK
    path = course_root / "solutions" / "broken" / "broken.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "count_below":
            cell.source = cell.source.replace("values < limit", "values <= limit - 1")  # always 0
    nbformat.write(nb, path)
    assert cli.main(["release", "broken", "--root", str(course_root)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "not releasing broken: the solution does not get full marks: test_count_below 0/2" in err
    assert "test_count_below_speed 0/4" in err and "--no-validate" in err
    assert not (course_root / "assignments" / "broken").exists()
    assert cli.main(["release", "broken", "--no-validate", "--root", str(course_root)]) == cli.EXIT_OK


# --- grades.csv, roster, deadlines, course-wide repositories ------------------------------------

def test_roster_is_read_and_its_errors_are_one_line(tmp_path):
    from course_lib.grader.roster import Student, parse_due, read_roster

    path = tmp_path / "roster.csv"
    path.write_text("\ufeffID,Name,Email,section\nada,Ada King Lovelace,ada@example.org,A\n\nbo,Bo,,B\n")
    assert read_roster(path) == [Student("ada", "Ada King Lovelace", "ada@example.org"), Student("bo", "Bo", "")]
    path.write_text("id,name\nada,A\nada,B\n")
    with pytest.raises(ValueError, match="line 3: student 'ada' is listed twice"):
        read_roster(path)
    path.write_text("student,name\nada,A\n")
    with pytest.raises(ValueError, match="no 'id' column"):
        read_roster(path)
    assert str(parse_due("2026-12-10 17:00")) == "2026-12-10 17:00:00"
    with pytest.raises(ValueError, match="expected a deadline"):
        parse_due("next friday")


def test_grades_csv_lists_submissions_only_and_roster_students_as_missing(tmp_path):
    import csv

    from nbgrader.api import Gradebook

    from course_lib.grader.exports import grade_rows, write_long
    from course_lib.grader.nbgrading import Course, _environment, _nbgrader_env
    from course_lib.grader.roster import Student, parse_due

    course = Course.locate(root=ROOT, grading_dir=tmp_path / "grading")
    (tmp_path / "grading").mkdir()
    with _environment(**_nbgrader_env()), Gradebook(course.db_url) as gb:
        gb.add_assignment("week1", duedate=parse_due("2026-12-10 17:00"))
        gb.add_assignment("week2")
        for student in ("ada", "demo_student"):
            gb.add_student(student)
        gb.add_submission("week1", "ada")
    roster = [Student("ada", "Ada Lovelace", "ada@example.org"), Student("cy", "Cy Young", "cy@example.org")]
    write_long(grade_rows(course, roster), tmp_path / "grades.csv")
    rows = list(csv.DictReader((tmp_path / "grades.csv").open()))
    shown = [(r["assignment"], r["student_id"], r["status"], r["score"], r["last_name"], r["email"]) for r in rows]
    assert shown == [("week1", "ada", "graded", "0", "Lovelace", "ada@example.org"),
                     ("week1", "cy", "missing", "", "Young", "cy@example.org"),
                     ("week2", "ada", "missing", "", "Lovelace", "ada@example.org"),
                     ("week2", "cy", "missing", "", "Young", "cy@example.org")]
    assert rows[0]["duedate"] == "2026-12-10 17:00:00"
    assert "demo_student" not in (tmp_path / "grades.csv").read_text()  # in the gradebook, never submitted


def test_course_wide_repositories_are_found_with_or_without_a_prefix(tmp_path):
    from course_lib.grader.nbgrading import CourseError, _find

    for repo in ("ada", "measure-first-bo"):
        path = tmp_path / repo / "assignments" / "week1" / "week1.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text("{}")
    (tmp_path / "measure-first-bo" / "assignments" / "week2").mkdir()  # another week: not week1's
    found = _find(tmp_path, "week1", ["week1"], repo_prefix="measure-first")
    assert [(s.student, s.layout) for s in found] == [("ada", "course-repo"), ("bo", "course-repo")]
    assert [s.student for s in _find(tmp_path, "week1", ["week1"])] == ["ada", "measure-first-bo"]
    (tmp_path / "bo" / "week1").mkdir(parents=True)
    with pytest.raises(CourseError, match="for student 'bo' once 'measure-first-' is taken off"):
        _find(tmp_path, "week1", ["week1"], repo_prefix="measure-first-")


def test_submission_time_is_the_repository_last_commit(tmp_path):
    import subprocess

    from course_lib.grader._submissions import Submission
    from course_lib.grader.intake import _write_timestamp

    repo = tmp_path / "measure-first-ada"
    nb = repo / "assignments" / "week1" / "week1.ipynb"
    nb.parent.mkdir(parents=True)
    nb.write_text("{}")
    env = {**os.environ, "GIT_COMMITTER_DATE": "2026-12-09T10:00:00+00:00", "GIT_AUTHOR_DATE": "2026-12-09T10:00:00+00:00"}
    for command in (["init", "-q"], ["add", "."], ["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(repo), *command], check=True, env=env)
    out = tmp_path / "submitted"
    out.mkdir()
    _write_timestamp(Submission("ada", "week1", "course-repo", {"week1": nb}), out)
    assert (out / "timestamp.txt").read_text().strip() == "2026-12-09T10:00:00+00:00"
    (nb.parent / "timestamp.txt").write_text("2026-12-11 09:00:00")  # nbgrader's own file wins
    _write_timestamp(Submission("ada", "week1", "course-repo", {"week1": nb}), out)
    assert (out / "timestamp.txt").read_text() == "2026-12-11 09:00:00"


def test_the_guide_shows_the_example_that_course_new_writes():
    guide = (ROOT / "book" / "instructors.md").read_text()
    for part in (authoring._SETUP, authoring._ANSWER, authoring._CORRECTNESS, authoring._SPEED):
        assert part.strip("\n") in guide, part.strip("\n").splitlines()[0]
    toc = (ROOT / "_toc.yml").read_text()
    assert "book/instructors" in toc.split('caption: "Reference"')[1]


# --- speed previews ----------------------------------------------------------------------------

def test_a_preview_must_state_its_hidden_tests_thresholds():
    partial = ("preview_speedup(f, f_slow, make_args=lambda: (1,), full_at=25, zero_at=3, points=4)\n"
               "### BEGIN HIDDEN TESTS\n"
               "speedup_points(f, _slow, make_args=lambda: (1,), full_at={}, zero_at=3, points=4, budget=0.5)\n")
    assert authoring.preview_mismatches(partial.format("25.0")) == []
    assert authoring.preview_mismatches(partial.format("30")) == ["its preview says full_at=25, its test full_at=30"]
    # per-core thresholds are computed when graded: nothing to compare before
    computed = ("preview_speedup(f, g, make_args=m, full_at=speed_targets(cores())[1], zero_at=2, points=8)\n"
                "speedup_points(f, _g, make_args=m, full_at=3.0 * _CORES, zero_at=2, points=8)\n")
    assert authoring.preview_mismatches(computed) == []


@pytest.mark.parametrize("assignment", sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir()))
def test_every_shipped_speed_test_has_a_preview_that_agrees_with_it(assignment):
    nb = nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    speed = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_speed")]
    for cell in speed:
        visible = cell.source.split("### BEGIN HIDDEN TESTS")[0]
        # a parallel test (parallel_points) has its own preview, preview_parallel
        preview = "preview_parallel(" if "parallel_points(" in cell.source else "preview_speedup("
        assert preview in visible, cell.metadata["nbgrader"]
        assert authoring.preview_mismatches(cell.source) == []


def test_memory_and_scaling_previews_must_state_their_tests_thresholds():
    memory = ('preview_peak_memory(f, "20 MB", {}, 6, path)\n### BEGIN HIDDEN TESTS\n'
              'peak_memory_points(f, "20 MB", "100 MB", 6, _big)\n')
    assert authoring.preview_mismatches(memory.format('"100 MB"')) == []
    assert authoring.preview_mismatches(memory.format("100_000_000")) == []  # the same bytes
    assert authoring.preview_mismatches(memory.format('"90 MB"')) == [
        "its preview says zero_at=90 MB, its test zero_at=100 MB"]
    scaling = ("preview_scaling(f, m, [1, 2], 1.5, 1.8, {})\n"
               "scaling_points(f, m, [1, 2], full_at=1.5, zero_at=1.8, points=3)\n")
    assert authoring.preview_mismatches(scaling.format(3)) == []
    assert authoring.preview_mismatches(scaling.format(2)) == ["its preview says points=2, its test points=3"]


def test_calibration_advice_reads_partial_credit_memory_and_scaling_cells():
    memory = authoring.CellCalibration(
        "test_x_memory", "memory", tuple(authoring.thresholds("peak_memory_points(f, '20 MB', '100 MB', 6, a)")),
        quiet=(6_500_000.0,))
    scaling = authoring.CellCalibration(
        "test_x_scaling", "scaling", tuple(authoring.thresholds("scaling_points(f, m, [1, 2], 1.5, 1.8, 3)")),
        quiet=(1.02, 1.1))
    text = authoring.format_calibration("wk", [memory, scaling])
    assert "margin: full_at='20 MB' is 3.1 times the reference's largest peak" in text
    assert "a measured 1.60 earns full points; the reference's highest is 1.10 (+0.50)" in text


def test_calibration_advice_never_suggests_a_third_of_a_parallel_speed_up():
    # Week 7, calibrated on 6 December 2026: the reference's pool read 1.66x and 1.53x, and
    # the advice was "full points at 0.5x", a pool slower than the loop it replaces.
    parallel = authoring.CellCalibration(
        "test_x_speed", "speed",
        tuple(authoring.thresholds("parallel_points(f, g, make_args, workers=2, full_at=1.4, zero_at=1.25)")),
        quiet=(1.66,), busy=(1.53,), reference_seconds=(0.2, 0.2), solution_seconds=(0.12, 0.13))
    text = authoring.format_calibration("wk", [parallel])
    assert "0.5x" not in text and "a third of" not in text
    assert "no factor-of-3 margin for a parallel speed-up" in text and "1.53x" in text


@pytest.mark.parametrize("assignment", sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir()))
def test_every_shipped_memory_and_scaling_test_has_a_preview_that_agrees_with_it(assignment):
    nb = nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if not (grade_id.endswith("_memory") or grade_id.endswith("_scaling")):
            continue
        public = cell.source.split("### BEGIN HIDDEN TESTS")[0]
        # a preview line, or (deep memory, the same on every machine) the exact check run visibly
        assert any(p in public for p in ("preview_peak_memory(", "preview_scaling(", "log_points(")), grade_id
        assert authoring.preview_mismatches(cell.source) == [], grade_id
