"""Tests for course_lib.grader.report: the class report from a grading folder."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import given, strategies as st
from nbgrader.api import Gradebook

from course_lib.grader import cli
from course_lib.grader.nbgrading import Course, CourseError, _environment, _nbgrader_env
from course_lib.grader.report import write_report

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


def _grading(tmp_path, records):
    grading = tmp_path / "grading"
    course = Course.locate(root=ROOT, grading_dir=grading)  # thresholds from solutions/week1
    grading.mkdir(parents=True)
    with _environment(**_nbgrader_env()), Gradebook(course.db_url) as gb:  # nbgrader runs alembic
        gb.add_assignment("week1")
        for record in records:
            gb.add_student(record["student"])
            gb.add_submission("week1", record["student"])
    folder = grading / "done" / "week1"
    folder.mkdir(parents=True, exist_ok=True)
    for record in records:
        feedback = grading / "feedback" / record["student"] / "week1" / "week1.html"
        feedback.parent.mkdir(parents=True, exist_ok=True)
        feedback.write_text("<p>feedback</p>")
        record = {"assignment": "week1", "max_score": 20.0, "feedback": [str(feedback)], **record}
        (folder / f"{record['student']}.json").write_text(json.dumps(record))
    return course


def _autograded(course, student, outputs):
    """An autograded notebook whose memory and scaling cells carry the grader's verdicts."""
    cells = []
    for grade_id, text in outputs.items():
        cell = nbformat.v4.new_code_cell("pass", metadata={"nbgrader": {"grade_id": grade_id, "grade": True}})
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        cells.append(cell)
    path = course.grading_dir / "autograded" / student / "week1" / "week1.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


RECORDS = [
    {"student": "ada", "score": 20.0, "speedups": {"test_faster_speed": 140.0},
     "cell_scores": {"test_faster_speed": 4.0, "test_faster_hidden": 2.0}, "flags": []},
    {"student": "bob", "score": 6.0, "speedups": {"test_faster_speed": 1.1},
     "cell_scores": {"test_faster_speed": 0.0, "test_faster_hidden": 2.0},
     "flags": [["verdict-differs", ["test_faster_speed"], "in the student's kernel 4/4, outside it 0/4 <b>"]]},
    {"student": "cy", "score": 0.0, "speedups": {}, "cell_scores": {},
     "flags": [["malformed", [], "not valid JSON"]]},
]
MEASURED = {
    "ada": {"test_x_memory": "\nChecked again by the grader outside your kernel: 3 / 3. measured outside your "
                             "kernel: peak traced memory 6.5 MB, resident memory rose by 7.0 MB; limit 20.0 MB\n",
            "test_x_scaling": "\nChecked again by the grader outside your kernel: 3 / 3. measured outside your "
                              "kernel: exponent 1.04 (linear) from CPU seconds 1 ms, 2 ms\n"},
    "bob": {"test_x_memory": "\nChecked again by the grader outside your kernel: 0 / 3. Too much memory; "
                             "measured outside your kernel: peak traced memory 150 MB, resident ...\n"},
}


def test_report_has_plots_thresholds_and_a_students_by_cells_table(tmp_path):
    course = _grading(tmp_path, RECORDS)
    for student, outputs in MEASURED.items():
        _autograded(course, student, outputs)
    page = write_report(course).read_text()
    assert "<h2>week1</h2>" in page and "3 submissions" in page and "2 flagged" in page
    # scores, the speed cell, the memory cell and the scaling cell
    assert len(re.findall(r'<img alt="[^"]*" src="data:image/png;base64,', page)) == 4
    assert "test_faster_speed, speed-up measured outside the kernel" in page
    assert "test_x_memory, peak traced memory measured outside the kernel" in page
    assert "test_x_scaling, growth exponent measured outside the kernel" in page
    assert re.findall(r"<tr><td>(\w+)</td>", page) == ["ada", "bob", "cy"]  # every student, not only flagged
    assert "<small>140x</small>" in page and "<small>6.5 MB</small>" in page and "exponent 1.04" in page
    assert "outside it 0/4 &lt;b&gt;" in page  # details are escaped
    assert 'href="feedback/ada/week1/week1.html"' in page  # relative to the report


def test_speed_plot_draws_the_thresholds_of_the_cell_and_counts_whole_submissions(tmp_path, monkeypatch):
    from course_lib.grader import report

    drawn = {}

    def spy(values, title, xlabel, log, lines=None):
        drawn[title] = (values, lines)
        return ""

    monkeypatch.setattr(report, "_figure", spy)
    write_report(_grading(tmp_path, RECORDS))
    values, lines = drawn["week1: test_faster_speed, speed-up measured outside the kernel"]
    assert sorted(values) == [1.1, 140.0] and lines == [(100.0, "full_at"), (60.0, "zero_at")]
    import matplotlib.pyplot as plt

    monkeypatch.undo()
    before = set(plt.get_fignums())
    html = report._figure([1.0, 2.0, 2.0], "t", "x", log=False, lines=[(1.5, "at_least")])
    assert html.startswith("<figure><img") and set(plt.get_fignums()) == before  # closed


def test_report_command_and_empty_grading_folder(tmp_path, capsys):
    with pytest.raises(CourseError, match="nothing graded yet"):
        write_report(Course.locate(grading_dir=tmp_path / "empty"))
    course = _grading(tmp_path, RECORDS[:1])
    out = tmp_path / "r.html"
    assert cli.main(["report", "--grading-dir", str(course.grading_dir), "--output", str(out)]) == cli.EXIT_OK
    assert out.is_file() and "Report:" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine")
def test_report_renders_in_headless_chromium(tmp_path):
    course = _grading(tmp_path, RECORDS)
    for student, outputs in MEASURED.items():
        _autograded(course, student, outputs)
    page = write_report(course)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--disable-background-networking", "--allow-file-access-from-files"]
    shot = ROOT / "_build" / "browser" / "class_report.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1200,2400", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", page.as_uri()], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    assert dom.count("<img") == 4 and dom.count('<tr><td>') == 3 and "Class report" in dom
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (2400, 1200)
    assert pixels[..., :3].std() > 0.05  # not a blank page: text, plots and the table were drawn


def test_partial_credit_memory_and_scaling_thresholds_are_drawn():
    from course_lib.grader import authoring, report

    memory = authoring.thresholds("peak_memory_points(f, '20 MB', '100 MB', 6, path)")
    assert report._threshold_lines("memory", memory) == [(20.0, "full_at"), (100.0, "zero_at")]
    scaling = authoring.thresholds("scaling_points(f, m, [1, 2], full_at=1.5, zero_at=1.7, points=5)")
    assert report._threshold_lines("scaling", scaling) == [(1.5, "full_at"), (1.7, "zero_at")]


@given(st.lists(st.floats(1e-3, 1e4), min_size=1, max_size=30), st.booleans())
def test_every_value_falls_in_a_histogram_bin(values, log):
    # The chart once dropped the lowest speed-up: 10 ** log10(3.2) rounds above 3.2, so
    # the first log-spaced edge left it out.
    from course_lib.grader import report

    edges = report._histogram_bins(values, log)
    assert np.histogram(values, edges)[0].sum() == len(values)


def test_the_lowest_speedup_of_a_class_is_counted():
    from course_lib.grader import report

    values = [3.2, 7.1, 150.0, 400.0]
    assert np.histogram(values, report._histogram_bins(values, log=True))[0].sum() == 4
