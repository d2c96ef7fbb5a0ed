"""A term, end to end, as book/instructors.md walks it: from a roster to the Canvas import.

One assignment of the instructor's own (``course new``, plus a written answer marked by
hand), a roster whose ids are written as an LMS export and GitHub spell them (an accented
folder name, a GitHub login in another case, a student who never submits), a due date,
and four submissions: one on time in nbgrader's layout (``timestamp.txt``), three GitHub
Classroom repositories fetched by ``course collect`` at three times: before the deadline,
at it, and after it. One student pushes after the deadline honestly, another after it with
a commit dated before it (``GIT_COMMITTER_DATE``): both are late by the collection's record,
and the forged date is shown only as the student's claim. Then the batch is graded, a written
answer is marked with ``course mark``, ``course feedback`` writes the pages again without
grading, and the report and every export are written. The late status and the penalty
(nbgrader's ``penalty_method = "zero"``) are asserted in the table, flags.csv, grades.csv,
the feedback, the report and the exports, and the mark in the feedback.

The clock of ``course collect`` is set by the test (``collect._utcnow``): a real term spans
hours, a test seconds.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import html
import io
import re
from pathlib import Path

import nbformat
import pytest

from course_lib.grader import cli, collect
from course_lib.grader._submissions import answered, safe_student_id
from classroom import classroom_repo, push
from lms_import import canvas_import

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
DUE = "2026-12-10 17:00"
JOSE = safe_student_id("José García")  # Jose_Garcia-978edf99, as the grader names the folder
ROSTER = """id,name,email,sis_user_id,sis_login_id,section
José García,José García,jose@uni.example,S001,jgarcia,A
OctoCat,Octo Cat,octo@uni.example,S002,ocat,A
latecomer,Late Comer,late@uni.example,S003,lcomer,B
forger,Forge Er,forge@uni.example,S004,forger,B
Zoe Absent,Zoe Absent,zoe@uni.example,S005,zabsent,B
"""
WRITTEN = "### BEGIN SOLUTION\nThe loop compares in Python; NumPy compares in C, a hundred times faster.\n### END SOLUTION"
SLOW = "def count_below(values, limit):\n    return sum(1 for v in values.tolist() if v < limit)\n"
WRONG = "def count_below(values, limit):\n    return int(np.count_nonzero(values > limit))\n"
EXPLAINED = "The slow version compares one value at a time in Python; mine lets NumPy compare them all at once."


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("term")
    course, grading, subs = tmp / "course", tmp / "grading", tmp / "submissions"
    course.mkdir()
    config = (ROOT / "nbgrader_config.py").read_text()
    (course / "nbgrader_config.py").write_text(config + '\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    (course / "roster.csv").write_text(ROSTER, encoding="utf-8")
    base = ["--root", str(course)]
    out: dict = {"tmp": tmp, "course": course, "grading": grading}

    # 1. the instructor's own assignment, with a written answer marked by hand, released
    assert _cli("new", "term", *base)[0] == cli.EXIT_OK
    source = course / "solutions" / "term" / "term.ipynb"
    nb = nbformat.read(source, as_version=4)
    nb.cells += [nbformat.v4.new_markdown_cell("## Task 2: in your own words (2 points, marked by your instructor)"),
                 nbformat.v4.new_markdown_cell(WRITTEN, metadata={"nbgrader": {
                     "grade": True, "solution": True, "points": 2, "grade_id": "written_explanation",
                     "locked": False, "schema_version": 3, "task": False}})]
    nbformat.write(nb, source)
    assert _cli("release", "term", "--no-validate", *base)[0] == cli.EXIT_OK
    released = nbformat.read(course / "assignments" / "term" / "term.ipynb", as_version=4)
    right = re.sub(r"\s*### (BEGIN|END) SOLUTION", "", next(
        c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "count_below"))

    def notebook(answer: str) -> nbformat.NotebookNode:
        return answered(released, {"count_below": answer, "written_explanation": EXPLAINED})

    # 2. José's notebook came through nbgrader's exchange: its timestamp.txt says 16:00
    jose = subs / "José García" / "term"
    jose.mkdir(parents=True)
    nbformat.write(notebook(right), jose / "term.ipynb")
    (jose / "timestamp.txt").write_text("2026-12-10 16:00:00 UTC\n")

    # 3. three Classroom repositories; the students push, the instructor's collection fetches
    clock = {"now": datetime.datetime(2026, 12, 10, 16, 30)}
    collect_now = collect._utcnow
    collect._utcnow = lambda: clock["now"]
    try:
        students = {login: classroom_repo(tmp, subs, f"term-{login}") for login in ("octocat", "latecomer", "forger")}
        _push(students["octocat"], notebook(WRONG), "2026-12-10T16:10:00+00:00")
        for login in ("latecomer", "forger"):
            _push(students[login], released, "2026-12-10T16:15:00+00:00")  # accepted, nothing done yet
        collected = [_cli("collect", "term", "--submissions", str(subs), "--due", DUE,
                          "--grading-dir", str(grading), *base)]
        clock["now"] = datetime.datetime(2026, 12, 10, 17, 0, 40)  # the deadline's own collection
        collected.append(_cli("collect", "term", "--submissions", str(subs), "--grading-dir", str(grading), *base))
        _push(students["latecomer"], notebook(right), "2026-12-10T18:05:00+00:00")
        _push(students["forger"], notebook(SLOW), "2026-12-10T16:45:00+00:00")  # GIT_COMMITTER_DATE: a forgery
        clock["now"] = datetime.datetime(2026, 12, 10, 18, 10)
        collected.append(_cli("collect", "term", "--submissions", str(subs), "--grading-dir", str(grading), *base))
    finally:
        collect._utcnow = collect_now
    out["collected"] = collected

    # 4. grade, with the roster and the due date
    grade = ["grade", "term", "--submissions", str(subs), "--grading-dir", str(grading), "--due", DUE,
             "--memory-limit", "1GB", "--no-progress", *base]
    out["grade"] = _cli(*grade)
    out["grades"] = _csv(grading / "grades.csv")
    out["flags"] = _csv(grading / "flags.csv")
    out["feedback_before"] = _page(grading, JOSE)

    # 5. mark the written answers, then the feedback again from the gradebook
    out["waiting"] = _cli("mark", "term", "--grading-dir", str(grading), *base)
    out["marked"] = _cli("mark", "term", "José García", "written_explanation", "2", "--comment",
                         "Clear, and it names the cause.", "--grading-dir", str(grading), *base)
    out["feedback_run"] = _cli("feedback", "term", "--grading-dir", str(grading), *base)
    out["grades_after"] = _csv(grading / "grades.csv")
    out["flags_after"] = _csv(grading / "flags.csv")
    out["pages"] = {student: _page(grading, student) for student in (JOSE, "octocat", "latecomer", "forger")}

    # 6. the class report and the exports
    assert _cli("report", "--grading-dir", str(grading), *base)[0] == cli.EXIT_OK
    out["report"] = html.unescape((grading / "report.html").read_text(encoding="utf-8"))
    for fmt in ("canvas", "moodle", "long"):
        out[fmt] = _cli("export", "--format", fmt, "--grading-dir", str(grading), *base)
        out[f"{fmt}_rows"] = list(csv.reader((grading / f"grades-{fmt}.csv").open(encoding="utf-8", newline="")))

    # 7. grading again changes nothing and keeps the mark
    out["again"] = _cli(*grade)
    out["grades_again"] = _csv(grading / "grades.csv")
    return out


# --- the collection ----------------------------------------------------------------------------

def test_collections_record_what_was_seen_and_when(term):
    first, deadline, late = term["collected"]
    assert first[0] == deadline[0] == late[0] == cli.EXIT_OK, (first, deadline, late)
    assert "3 new or changed" in first[1] and "1 not in a git repository" in first[1]
    assert "counts as 2026-12-10 17:00:00 UTC" in deadline[1] and "0 new or changed" in deadline[1]
    assert "2 new or changed: forger, latecomer" in late[1]
    record = collect.read_record(term["grading"], "term")
    forger = record["students"]["forger"][-1]
    assert forger["time"] == "2026-12-10T18:10:00" and forger["claimed"] == "2026-12-10T16:45:00+00:00"


# --- the table, flags.csv and grades.csv -----------------------------------------------------------

def test_the_table_shows_the_score_after_the_penalty_and_the_late_mark(term):
    status, out, err = term["grade"]
    assert status == cli.EXIT_FLAGGED
    rows = {line.split()[0]: line for line in out.splitlines() if line and line.split()[0] in
            (JOSE, "octocat", "latecomer", "forger")}
    assert re.search(r"\b6 / 8(\s|$)", rows[JOSE]) and "late" not in rows[JOSE]
    assert re.search(r"\b0 / 8(\s|$)", rows["octocat"]) and "late" not in rows["octocat"]
    assert re.search(r"0 / 8 late \(-6\)\s+late$", rows["latecomer"])  # the score, then its only flag
    assert re.search(r"0 / 8 late \(-2\)\s+late$", rows["forger"])
    assert "Graded:    4 submissions" in out
    guide = (ROOT / "book" / "instructors.md").read_text(encoding="utf-8")
    table = "\n".join(out.split("\n\n")[0].splitlines())
    assert table in guide, "book/instructors.md shows this run's table"


def test_the_roster_matches_accented_and_github_ids_and_warns_of_the_absent(term):
    err = term["grade"][2]
    assert "roster row 'Zoe Absent' has no submission of term" in err
    assert "matches no roster row" not in err  # José García, OctoCat: the grader's own ids
    grades = {row["student_id"]: row for row in term["grades"]}
    assert set(grades) == {JOSE, "octocat", "latecomer", "forger", safe_student_id("Zoe Absent")}
    assert (grades[JOSE]["first_name"], grades[JOSE]["last_name"], grades[JOSE]["email"]) == \
        ("José", "García", "jose@uni.example")
    assert grades["octocat"]["email"] == "octo@uni.example"
    assert grades[safe_student_id("Zoe Absent")]["status"] == "missing"


def test_grades_csv_holds_the_late_status_penalty_and_where_the_time_came_from(term):
    grades = {row["student_id"]: row for row in term["grades"]}
    late = grades["latecomer"]
    assert (late["status"], late["raw_score"], late["late_submission_penalty"], late["score"]) == ("late", "6", "6", "0")
    assert late["time_source"] == "collected" and late["seconds_late"] == str(70 * 60)
    forger = grades["forger"]
    assert (forger["status"], forger["raw_score"], forger["late_submission_penalty"], forger["score"]) == \
        ("late", "2", "2", "0")
    assert forger["timestamp"] == "2026-12-10 18:10:00"  # the collection's time, not the commit's 16:45
    assert (grades[JOSE]["status"], grades[JOSE]["time_source"], grades[JOSE]["score"]) == ("graded", "timestamp.txt", "6")
    assert (grades["octocat"]["status"], grades["octocat"]["time_source"]) == ("graded", "collected")


def test_flags_name_the_late_submissions_and_the_forged_claim(term):
    late = {row["student"]: row["detail"] for row in term["flags"] if row["flag"] == "late"}
    assert set(late) == {"latecomer", "forger"}
    assert late["latecomer"].startswith("late by 1 h 10 min; late penalty 6 points")
    assert "seen by the course's collection" in late["forger"]
    assert "the last commit says 2026-12-10 16:45 UTC" in late["forger"] and "does not count" in late["forger"]
    assert not any(row["flag"] == "claimed-time" for row in term["flags"])  # every repository was collected


# --- marking, and the feedback that agrees with grades.csv ------------------------------------------

def test_mark_lists_the_answers_waiting_and_records_one(term):
    status, out, _ = term["waiting"]
    assert status == cli.EXIT_OK and "4 answers of term wait for a mark" in out
    assert f"== {JOSE}  written_explanation  (2 points)  waits for a mark" in out and EXPLAINED in out
    assert term["marked"][0] == cli.EXIT_OK
    assert f"marked term {JOSE} written_explanation: 2 / 2" in term["marked"][1]


def test_feedback_shows_the_mark_after_course_feedback_without_regrading(term):
    before = term["feedback_before"]
    assert "Score: 6 / 8 points." in before and "until then it counts 0" in before
    status, out, _ = term["feedback_run"]
    assert status == cli.EXIT_OK and "nothing graded again" in out and re.search(rf"^{JOSE}\s+8 / 8", out, re.M)
    page = term["pages"][JOSE]
    assert "Score: 8 / 8 points." in page and "until then it counts 0" not in page
    assert "marked by your instructor: Clear, and it names the cause." in page
    grades = {row["student_id"]: row for row in term["grades_after"]}
    assert grades[JOSE]["score"] == "8"


def test_every_feedback_page_agrees_with_grades_csv(term):
    grades = {row["student_id"]: row for row in term["grades_after"]}
    for student, page in term["pages"].items():
        score = re.search(r"Score: ([\d.]+) / ([\d.]+) points\.", page).groups()
        assert score == (grades[student]["score"], grades[student]["max_score"]), student


def test_late_feedback_states_the_penalty_and_the_claim(term):
    late = term["pages"]["latecomer"]
    assert "Score: 0 / 8 points. Your cells earned 6; a late penalty of 6 points was taken off." in late
    assert "Late: late by 1 h 10 min; late penalty 6 points" in late
    forger = term["pages"]["forger"]
    assert "a late penalty of 2 points" in forger and "the last commit says 2026-12-10 16:45 UTC" in forger
    on_time = term["pages"][JOSE]
    assert "Late:" not in on_time and "due 2026-12-10 17:00 UTC" in on_time


def test_a_failing_visible_test_shows_why_and_hidden_tests_stay_hidden(term):
    page = term["pages"]["octocat"]
    assert "Checked by the grader outside your kernel: 0 / 2." in page
    assert re.search(r"GradingError: [^<]*differ", page), "the visible test's own message"
    table = page.split("Speed is graded as a ratio")[0]
    assert "(message withheld)" not in table  # every failing cell says why, in the grader's words
    assert "Wrong result on fresh input" in table  # the speed cell's, as before
    assert "BEGIN HIDDEN" not in page and "make_values(n, seed)" not in page.split("Setup")[0]
    assert "for seed, n, limit in" not in page  # the hidden test's text


# --- the report and the exports -------------------------------------------------------------------

def test_the_report_shows_the_late_penalty(term):
    report = term["report"]
    assert "2 late" in report
    row = next(line for line in report.splitlines() if "<td>latecomer</td>" in line)
    assert "<td>0</td>" in row and "late by 1 h 10 min; late penalty 6 points" in row
    jose = next(line for line in report.splitlines() if f"<td>{JOSE}</td>" in line)
    assert "<td>8</td>" in jose  # the manual mark


def test_the_canvas_sheet_imports_as_canvas_reads_it(term):
    sheet = canvas_import(term["canvas_rows"])
    assert sheet["assignments"] == {"term": 8.0}
    by_sis = {s["sis_user_id"]: s for s in sheet["students"]}
    assert by_sis["S001"]["name"] == "García, José" and by_sis["S001"]["grades"] == {"term": "8"}
    assert by_sis["S003"]["grades"] == {"term": "0"}  # late: the penalty is in the score
    assert by_sis["S004"]["grades"] == {"term": "0"}
    assert by_sis["S002"]["grades"] == {"term": "0"}
    assert by_sis["S005"]["grades"] == {"term": ""}  # no submission: left as it is in Canvas
    assert {s["section"] for s in sheet["students"]} == {"A", "B"}


def test_the_moodle_and_long_exports_carry_the_late_status_and_penalty(term):
    header, *rows = term["moodle_rows"]
    assert header == ["First name", "Last name", "Email address", "ID number", "term", "term feedback"]
    by_email = {row[2]: row for row in rows}
    assert by_email["late@uni.example"][4] == "0"
    assert by_email["late@uni.example"][5].startswith("late by 1 h 10 min; late penalty 6 points (6 points before it)")
    assert by_email["jose@uni.example"][4:] == ["8", "on time"]
    assert by_email["zoe@uni.example"][4:] == ["", "not submitted"]
    header, *rows = term["long_rows"]
    long = {row[header.index("student_id")]: dict(zip(header, row)) for row in rows}
    assert (long["forger"]["status"], long["forger"]["late_submission_penalty"], long["forger"]["score"]) == \
        ("late", "2", "0")
    assert long[JOSE]["score"] == "8"


def test_grading_again_skips_what_is_graded_and_keeps_the_mark(term):
    status, out, _ = term["again"]
    assert "Skipped:   4 unchanged" in out and "Graded:    0 submissions" in out
    assert re.search(rf"^{JOSE}\s+8 / 8", out, re.M) and "0 / 8 late (-6)" in out
    assert {r["student_id"]: r["score"] for r in term["grades_again"]} == \
        {r["student_id"]: r["score"] for r in term["grades_after"]}
    assert "Score: 8 / 8 points." in _page(term["grading"], JOSE)


# --- helpers ---------------------------------------------------------------------------------

def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


def _csv(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _page(grading: Path, student: str) -> str:
    text = (grading / "feedback" / student / "term" / "term.html").read_text(encoding="utf-8")
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def _push(work: Path, nb: nbformat.NotebookNode, when: str) -> None:
    push(work, "term.ipynb", nbformat.writes(nb), when)
