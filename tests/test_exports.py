"""Tests for course_lib.grader.exports (standing and LMS files) and course_lib.grader.marking.

A gradebook built through nbgrader's API: one assignment, one notebook with an automatic
test (4 points) and a written answer marked by hand (2 points); nbgrader's late penalty as
``nbgrader_config.py`` sets it.
"""

from __future__ import annotations

import csv
import datetime
import shutil
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from course_lib.grader import cli, exports, marking
from course_lib.grader._submissions import safe_student_id
from course_lib.grader.nbgrading import Course, CourseError, _environment, _nbgrader_env
from course_lib.grader.roster import Student, match_roster, resolve_student
from lms_import import canvas_import

ROOT = Path(__file__).resolve().parents[1]
DUE = datetime.datetime(2026, 12, 10, 17, 0)
JOSE = safe_student_id("José García")


def make_course(tmp_path: Path, penalty: str = "zero") -> Course:
    root = tmp_path / "course"
    root.mkdir()
    config = (ROOT / "nbgrader_config.py").read_text()
    (root / "nbgrader_config.py").write_text(config + f'\nc.LateSubmissionPlugin.penalty_method = "{penalty}"\n')
    course = Course.locate(root=root, grading_dir=tmp_path / "grading")
    course.grading_dir.mkdir()
    with _environment(**_nbgrader_env()), Gradebook(course.db_url) as gb:
        gb.add_assignment("week1", duedate=DUE)
        gb.add_notebook("week1", "week1")
        gb.add_grade_cell("test_f", "week1", "week1", max_score=4, cell_type="code")
        gb.add_grade_cell("written_explanation", "week1", "week1", max_score=2, cell_type="markdown")
        gb.add_solution_cell("written_explanation", "week1", "week1")
        for student, minutes in ((JOSE, -60), ("octocat", 70)):
            gb.add_student(student)
            gb.add_submission("week1", student, timestamp=DUE + datetime.timedelta(minutes=minutes))
            grade = gb.find_grade("test_f", "week1", "week1", student)
            grade.auto_score = 4.0
            gb.find_grade("written_explanation", "week1", "week1", student).needs_manual_grade = True
        gb.db.commit()
    return course


ROSTER = [Student("José García", "José García", "jose@uni.example", {"sis_user_id": "S001", "section": "A"}),
          Student("OctoCat", "Octo Cat", "octo@uni.example", {"sis_login_id": "ocat"}),
          Student("zoe", "Zoe Absent", "zoe@uni.example", {"canvas_id": "77"})]


def test_a_late_submission_loses_the_configured_penalty_and_the_gradebook_agrees(tmp_path):
    course = make_course(tmp_path)
    rows = {r.student: r for r in exports.grade_rows(course, ROSTER, store=True)}
    late, on_time = rows["octocat"], rows[JOSE]
    assert (late.status, late.raw_score, late.penalty, late.score, late.seconds_late) == ("late", 4.0, 4.0, 0.0, 4200)
    assert (on_time.status, on_time.penalty, on_time.score) == ("graded", 0.0, 4.0)
    assert rows[safe_student_id("zoe")].status == "missing"
    with _environment(**_nbgrader_env()), Gradebook(course.db_url) as gb:
        assert gb.find_submission("week1", "octocat").late_submission_penalty == 4.0  # formgrader shows it too


def test_the_penalty_follows_a_mark_given_after_grading(tmp_path):
    course = make_course(tmp_path)
    exports.grade_rows(course, store=True)
    marking.record_mark(course, "week1", "OCTOCAT", "written_explanation", 2)
    row = next(r for r in exports.grade_rows(course, store=True) if r.student == "octocat")
    assert (row.raw_score, row.penalty, row.score) == (6.0, 6.0, 0.0)  # zero means zero, mark included


def test_no_penalty_method_marks_late_work_late_and_keeps_its_points(tmp_path):
    course = make_course(tmp_path, penalty="none")
    row = next(r for r in exports.grade_rows(course) if r.student == "octocat")
    assert (row.status, row.penalty, row.score) == ("late", 0.0, 4.0)
    assert row.late_text() == "late by 1 h 10 min; late penalty 0 points"


def test_the_canvas_sheet_is_read_by_canvas_rules_with_its_ids(tmp_path):
    course = make_course(tmp_path)
    target = exports.write_canvas(exports.grade_rows(course, ROSTER), tmp_path / "canvas.csv")
    rows = list(csv.reader(target.open(newline="", encoding="utf-8")))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "week1"]
    assert rows[1] == ["Points Possible", "", "", "", "", "6"]
    sheet = canvas_import(rows)
    by_name = {s["name"]: s for s in sheet["students"]}
    assert by_name["García, José"]["sis_user_id"] == "S001" and by_name["García, José"]["grades"] == {"week1": "4"}
    assert by_name["Cat, Octo"]["sis_login_id"] == "ocat" and by_name["Cat, Octo"]["grades"] == {"week1": "0"}
    assert by_name["Absent, Zoe"]["id"] == "77" and by_name["Absent, Zoe"]["grades"] == {"week1": ""}


def test_a_canvas_sheet_without_the_section_column_is_refused_by_the_reader():
    with pytest.raises(AssertionError, match="Invalid header row"):
        canvas_import([["Student", "ID", "SIS User ID", "SIS Login ID", "week1"], ["Ada", "1", "", "", "3"]])
    with pytest.raises(AssertionError, match="Points Possible"):
        canvas_import([["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "week1"], ["Ada", "1", "", "", "", "3"]])


def test_the_moodle_sheet_has_a_feedback_column_that_says_late(tmp_path):
    course = make_course(tmp_path)
    target = exports.write_moodle(exports.grade_rows(course, ROSTER), tmp_path / "moodle.csv")
    header, *rows = list(csv.reader(target.open(newline="", encoding="utf-8")))
    assert header == ["First name", "Last name", "Email address", "ID number", "week1", "week1 feedback"]
    by_email = {row[2]: row for row in rows}
    assert by_email["octo@uni.example"][4] == "0"
    assert by_email["octo@uni.example"][5].startswith("late by 1 h 10 min; late penalty 4 points (4 points before it)")
    assert by_email["jose@uni.example"][4:] == ["4", "on time"]
    assert by_email["zoe@uni.example"][4:] == ["", "not submitted"]


def test_export_command_writes_each_format_and_refuses_an_empty_grading_folder(tmp_path, capsys):
    course = make_course(tmp_path)
    roster = course.root / "roster.csv"
    roster.write_text("id,name,email\nJosé García,José García,jose@uni.example\n", encoding="utf-8")
    base = ["--root", str(course.root), "--grading-dir", str(course.grading_dir)]
    assert cli.main(["export", "--format", "canvas", *base]) == cli.EXIT_OK
    captured = capsys.readouterr()
    assert "canvas export -> " in captured.out and "1 late submission(s)" in captured.out
    assert "no canvas_id, sis_user_id or sis_login_id" in captured.err
    assert cli.main(["export", "--format", "long", *base, "--output", str(tmp_path / "long.csv")]) == cli.EXIT_OK
    long = list(csv.DictReader((tmp_path / "long.csv").open(encoding="utf-8")))
    assert [r["status"] for r in long] == ["graded", "late"] and long[0]["email"] == "jose@uni.example"
    shutil.rmtree(course.grading_dir)
    course.grading_dir.mkdir()
    assert cli.main(["export", "--format", "moodle", *base]) == cli.EXIT_USAGE
    assert "nothing graded yet" in capsys.readouterr().err


# --- marking ---------------------------------------------------------------------------------

def test_mark_lists_the_answers_waiting_and_records_one_by_any_name(tmp_path):
    course = make_course(tmp_path)
    assert [(c.student, c.grade_id, c.points) for c in marking.unmarked(course, "week1")] == \
        [(JOSE, "written_explanation", None), ("octocat", "written_explanation", None)]
    cell = marking.record_mark(course, "week1", "José García", "written_explanation", 1.5, "Names the cause.")
    assert (cell.student, cell.points, cell.comment) == (JOSE, 1.5, "Names the cause.")
    assert [c.student for c in marking.unmarked(course, "week1")] == ["octocat"]
    marked = {c.student: c for c in marking.manual_cells(course, "week1")}
    assert marked[JOSE].points == 1.5 and marked[JOSE].comment == "Names the cause."
    with _environment(**_nbgrader_env()), Gradebook(course.db_url) as gb:
        assert gb.find_submission("week1", JOSE).score == 5.5


@pytest.mark.parametrize("student, cell, points, message", [
    ("nobody", "written_explanation", 1, "no submission of week1 by 'nobody'"),
    ("octocat", "written", 1, "has no graded cell 'written'"),
    ("octocat", "written_explanation", 3, "points must be between 0 and 2, got 3"),
])
def test_a_mark_that_cannot_be_recorded_is_a_one_line_error(tmp_path, student, cell, points, message):
    course = make_course(tmp_path)
    with pytest.raises(CourseError, match=message):
        marking.record_mark(course, "week1", student, cell, points)


def test_mark_command_lists_then_records(tmp_path, capsys):
    course = make_course(tmp_path)
    base = ["--root", str(course.root), "--grading-dir", str(course.grading_dir)]
    assert cli.main(["mark", "week1", *base]) == cli.EXIT_OK
    assert "2 answers of week1 wait for a mark" in capsys.readouterr().out
    assert cli.main(["mark", "week1", "octocat", "written_explanation", *base]) == cli.EXIT_USAGE
    assert "give STUDENT CELL POINTS" in capsys.readouterr().err
    assert cli.main(["mark", "week1", "octocat", "written_explanation", "2", *base]) == cli.EXIT_OK
    assert "marked week1 octocat written_explanation: 2 / 2" in capsys.readouterr().out


# --- the roster ----------------------------------------------------------------------------------

def test_roster_rows_match_original_names_safe_ids_and_github_logins():
    graded = [JOSE, "octocat", "bob"]
    rows = [Student("Jose\u0301 Garci\u0301a"), Student("OctoCat"), Student("zoe")]  # NFD, as a macOS zip
    match = match_roster(rows, graded)
    assert match.ids == {JOSE: "Jose\u0301 Garci\u0301a", "octocat": "OctoCat"}
    assert [r.id for r in match.unmatched_rows] == ["zoe"] and match.unmatched_students == ["bob"]
    assert match_roster([Student(JOSE)], graded).ids == {JOSE: JOSE}  # the safe id itself
    with pytest.raises(ValueError, match="are the same student"):
        match_roster([Student("José García"), Student(JOSE)], graded)
    # case is told apart only when it must be: two ids differing in case are both kept
    assert resolve_student("ADA", ["ada", "Ada"]) is None and resolve_student("Ada", ["ada", "Ada"]) == "Ada"


def test_the_roster_reads_lms_ids(tmp_path):
    from course_lib.grader.roster import read_roster

    path = tmp_path / "roster.csv"
    path.write_text("id,name,email,SIS_User_ID,section,notes\nada,Ada,a@x,S1,A,keen\n", encoding="utf-8")
    [ada] = read_roster(path)
    assert ada.lms == {"sis_user_id": "S1", "section": "A"}


def test_grading_warns_of_every_roster_row_and_submission_left_unmatched(tmp_path):
    from course_lib.grader._submissions import Submission
    from course_lib.grader.nbgrading import _match

    course = make_course(tmp_path)
    found = {"week1": [Submission(JOSE, "week1", "nbgrader", {}, name="José García"),
                       Submission("bob", "week1", "classroom", {})]}
    said: list[str] = []
    match = _match(course, found, ROSTER, said.append)
    assert match.ids == {JOSE: "José García", "octocat": "OctoCat"}  # octocat: from the gradebook
    assert said == ["roster row 'OctoCat' has no submission of week1: a 'missing' row in grades.csv",
                    "roster row 'zoe' has no submission of week1: a 'missing' row in grades.csv",
                    "the submission of week1 by 'bob' matches no roster row (by id, name or GitHub user name): "
                    "no roster name or e-mail for it"]
    with pytest.raises(CourseError, match="roster: roster rows 'José García' and 'Jose_Garcia-978edf99'"):
        _match(course, found, ROSTER + [Student(JOSE)], said.append)
