"""Tests for course_lib.grader.report: the class report from a grading folder."""

from __future__ import annotations

import json
import re

import pytest
from nbgrader.api import Gradebook

from course_lib.grader import cli
from course_lib.grader.nbgrading import Course, CourseError, _environment, _nbgrader_env
from course_lib.grader.report import write_report


def _grading(tmp_path, records):
    grading = tmp_path / "grading"
    course = Course.locate(grading_dir=grading)
    grading.mkdir(parents=True)
    with _environment(**_nbgrader_env()), Gradebook(course.db_url) as gb:  # nbgrader runs alembic
        gb.add_assignment("week1")
        for record in records:
            gb.add_student(record["student"])
            gb.add_submission("week1", record["student"])
    folder = grading / "done" / "week1"
    folder.mkdir(parents=True, exist_ok=True)
    for record in records:
        record = {"assignment": "week1", "max_score": 20.0, "cell_scores": {}, "feedback": [], **record}
        (folder / f"{record['student']}.json").write_text(json.dumps(record))
    return course


RECORDS = [
    {"student": "ada", "score": 20.0, "speedups": {"test_price_speed": 140.0}, "flags": []},
    {"student": "bob", "score": 6.0, "speedups": {"test_price_speed": 1.1},
     "flags": [["verdict-differs", ["test_price_speed"], "in the student's kernel 4/4, outside it 0/4 <b>"]]},
    {"student": "cy", "score": 0.0, "speedups": {}, "flags": [["malformed", [], "not valid JSON"]]},
]


def test_report_has_plots_and_the_flagged_submissions(tmp_path):
    course = _grading(tmp_path, RECORDS)
    page = write_report(course).read_text()
    assert "<h2>week1</h2>" in page and "3 submissions" in page and "2 flagged" in page
    assert len(re.findall(r'<img alt="[^"]*" src="data:image/png;base64,', page)) == 2  # scores, one speed cell
    assert "test_price_speed, speed-up measured outside the kernel" in page
    flagged = re.findall(r"<tr><td>(\w+)</td>", page)
    assert flagged == ["bob", "cy"]
    assert "outside it 0/4 &lt;b&gt;" in page  # details are escaped


def test_report_command_and_empty_grading_folder(tmp_path, capsys):
    with pytest.raises(CourseError, match="nothing graded yet"):
        write_report(Course.locate(grading_dir=tmp_path / "empty"))
    course = _grading(tmp_path, RECORDS[:1])
    out = tmp_path / "r.html"
    assert cli.main(["report", "--grading-dir", str(course.grading_dir), "--output", str(out)]) == cli.EXIT_OK
    assert out.is_file() and "Report:" in capsys.readouterr().out
