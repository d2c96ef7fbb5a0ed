"""The `course` command: exit codes, one-line errors, both submission layouts, `course check`.

Fast tests drive course_lib.grader.cli.main without starting a kernel; the ones marked slow run
notebooks (a few seconds each). The whole sample batch is graded in test_grading_e2e.py.
"""

from __future__ import annotations

import argparse
import re
import runpy
import shutil
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_output

from course_lib.grader import cli, nbgrading
from course_lib.grader._nbpreprocessors import HideHiddenTests
from course_lib.grader._submissions import find_submissions, safe_student_id

ROOT = Path(__file__).resolve().parents[1]
SUBMISSIONS = ROOT / "examples" / "submissions"
SAMPLE = str(SUBMISSIONS / "{}" / "example" / "example.ipynb")


# --- exit codes and one-line errors ----------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["grade", "example", "--submissions", "{tmp}/missing"], "submissions folder not found"),
    (["grade", "example", "--submissions", "{tmp}"], "no submissions of example"),
    (["grade", "nope", "--submissions", str(SUBMISSIONS)], "unknown assignment 'nope'"),
    (["release", "nope"], "unknown assignment 'nope' (assignments in solutions/: example, week1"),
    (["release", "--root", "{tmp}"], "no nbgrader_config.py in"),
    (["check", "{tmp}/missing.ipynb"], "notebook not found"),
    (["check", str(SAMPLE).format("malformed_json")], "is not a readable notebook: not valid JSON"),
])
def test_input_errors_exit_2_with_one_line(argv, message, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"course {argv[0]}: error: ") and message in err


@pytest.mark.parametrize("argv", [[], ["grade"], ["grade", "--submissions", "x", "--timeout", "0"],
                                  ["check", "a.ipynb", "--timeout", "soon"], ["frobnicate"]])
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == cli.EXIT_USAGE
    assert "usage: course" in capsys.readouterr().err


def test_help_lists_the_commands_and_exit_codes(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert stop.value.code == 0
    assert all(word in out for word in ("release", "grade", "check", "Exit status"))


# --- configuration -----------------------------------------------------------------------------

def test_course_settings_reach_nbgrader_config(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CELL_TIMEOUT", "17")
    monkeypatch.delenv("COURSE_DB_URL", raising=False)
    course = nbgrading.Course.locate(root=ROOT, grading_dir=tmp_path / "g")
    cfg = course.config()
    assert course.timeout == 17 and cfg.Execute.timeout == 17
    assert cfg.CourseDirectory.source_directory == "solutions"
    assert cfg.CourseDirectory.release_directory == "assignments"
    assert cfg.CourseDirectory.submitted_directory == str(tmp_path / "g" / "submitted")
    assert cfg.CourseDirectory.db_url == f"sqlite:///{tmp_path / 'g' / 'gradebook.db'}"
    assert cfg.OverwriteCells.add_missing_cells is True


def test_default_grading_folder_is_git_ignored_grading(monkeypatch):
    for name in ("COURSE_GRADING_DIR", "COURSE_DB_URL", "COURSE_CELL_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    course = nbgrading.Course.locate(root=ROOT)
    cfg = course.config()
    assert course.grading_dir == ROOT / "grading" and course.timeout == 60
    assert cfg.CourseDirectory.autograded_directory == "grading/autograded"
    assert cfg.CourseDirectory.db_url == f"sqlite:///{ROOT / 'grading' / 'gradebook.db'}"
    assert "grading/" in (ROOT / ".gitignore").read_text().split()


def test_database_url_option_wins_over_environment(monkeypatch):
    monkeypatch.setenv("COURSE_DB_URL", "sqlite:////tmp/elsewhere.db")
    url = "postgresql://grader@localhost/measure_first"
    # the pinned driver is psycopg2; SQLAlchemy 2.1 would assume psycopg 3 for a bare postgresql://
    expected = "postgresql+psycopg2://grader@localhost/measure_first"
    assert nbgrading.Course.locate(root=ROOT, db_url=url).config().CourseDirectory.db_url == expected
    assert nbgrading.Course.locate(root=ROOT).db_url == "sqlite:////tmp/elsewhere.db"


@pytest.mark.parametrize("url", ["sqlite:////tmp/g.db", "postgresql+psycopg2://u@h/db", "mysql://u@h/db"])
def test_urls_that_name_their_driver_are_left_alone(url):
    assert nbgrading._driver(url) == url


@pytest.mark.parametrize("url, shown", [
    ("sqlite:///" + str(ROOT / "grading" / "gradebook.db"), "grading/gradebook.db"),
    ("postgresql://grader:s3cret@db.example:5432/course", "postgresql://grader:***@db.example:5432/course"),
    ("postgresql://grader@db.example/course", "postgresql://grader@db.example/course"),
])
def test_printed_gradebook_url_never_shows_a_password(url, shown):
    assert cli._show_url(url, ROOT) == shown


# --- the committed files are what the commands generate ----------------------------------------

def test_release_regenerates_the_committed_student_version(tmp_path, capsys):
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    # --no-validate: what release makes is checked here; validation (grading the solution and
    # the release) is tested in test_authoring.py, and test_assignments.py grades every one.
    assert cli.main(["release", "--no-validate", "--root", str(tmp_path)]) == cli.EXIT_OK
    assert "released example -> assignments/example" in capsys.readouterr().out
    released = tmp_path / "assignments" / "example" / "example.ipynb"
    assert released.read_bytes() == (ROOT / "assignments" / "example" / "example.ipynb").read_bytes()
    text = released.read_text()
    assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text and "known = set(" not in text


def test_sample_submissions_are_in_sync_with_the_release():
    script = runpy.run_path(str(ROOT / "examples" / "make_submissions.py"))
    assert script["main"](["--check"]) == 0


# --- finding submissions -----------------------------------------------------------------------

def test_both_layouts_are_found_and_classroom_prefers_the_shallowest_copy(tmp_path):
    _put(tmp_path / "ana" / "example" / "example.ipynb")                      # nbgrader layout
    _put(tmp_path / "example-bo" / "work" / "example.ipynb")                  # GitHub Classroom
    _put(tmp_path / "example-bo" / "work" / "old" / "deeper" / "example.ipynb")
    _put(tmp_path / "example-bo" / ".ipynb_checkpoints" / "example.ipynb")    # never graded
    _put(tmp_path / "example-cy" / "README.md")                               # repository, no notebook
    _put(tmp_path / "other-dee" / "example.ipynb")                            # another assignment
    found = {s.student: s for s in find_submissions(tmp_path, "example", ["example"])}
    assert sorted(found) == ["ana", "bo", "cy"]
    assert found["ana"].layout == "nbgrader" and found["bo"].layout == "classroom"
    assert found["bo"].notebooks["example"] == tmp_path / "example-bo" / "work" / "example.ipynb"
    assert found["bo"].notes == ("2 copies of example.ipynb; graded work/example.ipynb",)
    assert found["cy"].notebooks == {}


def test_one_student_in_both_layouts_is_an_error(tmp_path):
    _put(tmp_path / "ana" / "example" / "example.ipynb")
    _put(tmp_path / "example-ana" / "example.ipynb")
    with pytest.raises(ValueError, match="two submissions of 'example' for student 'ana'"):
        find_submissions(tmp_path, "example", ["example"])


def test_unsafe_student_names_get_a_safe_id_and_keep_the_name(tmp_path):
    _put(tmp_path / "example-a b" / "example.ipynb")
    [found] = find_submissions(tmp_path, "example", ["example"])
    assert found.student == safe_student_id("a b") != "a b"
    assert found.name == "a b" and found.display_name == "a b"


# --- feedback hides hidden tests ---------------------------------------------------------------

def test_feedback_preprocessor_removes_hidden_regions_and_withholds_what_ran_beside_them():
    cell = new_code_cell("# visible\n    ### BEGIN HIDDEN TESTS\n    assert secret() == 42\n"
                         "    ### END HIDDEN TESTS\nassert_same(f(1), 1)")
    cell.execution_count = 7
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "t", "points": 1, "locked": True}
    cell.outputs = [new_output("error", ename="GradingError", evalue="got 1, expected 42", traceback=[
        "\x1b[31m-----\x1b[0m", "Cell \x1b[32mIn[7], line 3\x1b[0m\n----> 3 assert secret() == 42",
        "File grading.py:10, in assert_same(...)", "Cell In[3], line 2, in f\n      2 return 1",
        "GradingError: got 1, expected 42"])]
    nb = nbformat.v4.new_notebook(cells=[cell])
    HideHiddenTests().preprocess(nb, {})
    assert cell.source == "# visible\n    # (hidden tests: not shown)\nassert_same(f(1), 1)"
    # The hidden tests ran in the student's kernel: what the cell printed, its error message
    # and traceback could quote them (student code can put anything there), so only the
    # error's type stays, under a note that says why.
    note, error = cell.outputs
    assert note.text.startswith("[output withheld: this cell ran after hidden tests")
    assert (error.ename, error.evalue, error.traceback) == ("GradingError", "(message withheld)", [])
    assert "secret" not in nbformat.writes(nb).replace("# (hidden tests: not shown)", "")


# --- commands that run notebooks ---------------------------------------------------------------

@pytest.mark.slow
def test_check_passes_the_solution_and_reports_points(tmp_path, capsys):
    notebook = tmp_path / "example.ipynb"
    nbformat.write(_solution_as_student_notebook(), notebook)
    assert cli.main(["check", str(notebook)]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert re.search(r"PASS\s+test_count_visible\s+2 / 2", out)
    assert re.search(r"PASS\s+test_unknown_visible\s+1 / 1", out)
    assert re.search(r"----\s+test_count_speed\s+4 points in hidden tests", out)
    assert out.strip().endswith("Visible tests: 2 of 2 passed, 3 / 3 points; another 7 points in hidden tests.")


@pytest.mark.slow
def test_check_fails_the_untouched_notebook(capsys):
    assert cli.main(["check", str(ROOT / "assignments" / "example" / "example.ipynb")]) == cli.EXIT_FLAGGED
    out = capsys.readouterr().out
    assert re.search(r"FAIL\s+test_count_visible\s+0 / 2\s+NotImplementedError", out)
    assert re.search(r"FAIL\s+test_unknown_visible\s+0 / 1\s+NotImplementedError", out)
    assert "Visible tests: 0 of 2 passed, 0 / 3 points" in out


@pytest.mark.slow
def test_grade_reads_github_classroom_repositories(tmp_path, capsys):
    repos = tmp_path / "repos"
    _put(repos / "example-octocat" / "week1" / "example.ipynb", SAMPLE.format("correct_slow"))
    _put(repos / "example-octocat" / "week1" / ".ipynb_checkpoints" / "example.ipynb", SAMPLE.format("untouched"))
    # hubot turned a visible test into `pass`: the read-only cell is put back, and still fails
    hubot = nbformat.read(SAMPLE.format("wrong"), as_version=4)
    next(c for c in hubot.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_count_visible").source = "pass"
    (repos / "example-hubot" / "copy").mkdir(parents=True)
    nbformat.write(hubot, repos / "example-hubot" / "example.ipynb")
    _put(repos / "example-hubot" / "copy" / "example.ipynb", SAMPLE.format("correct_fast"))
    _put(repos / "example-cy" / "README.md")  # accepted the assignment, never added the notebook
    grading = tmp_path / "grading"
    status = cli.main(["grade", "example", "--submissions", str(repos), "--grading-dir", str(grading),
                       "--timeout", "30"])
    out = capsys.readouterr().out
    assert re.search(r"^octocat\s+6 / 10\s*$", out, re.M)
    assert re.search(r"^hubot\s+0 / 10\s+note; overwritten:test_count_visible$", out, re.M)
    assert re.search(r"^cy\s+0 / 10\s+no-notebook$", out, re.M)
    assert status == cli.EXIT_FLAGGED
    for student in ("octocat", "hubot", "cy"):
        assert (grading / "feedback" / student / "example" / "example.html").is_file()
    assert (grading / "submitted" / "hubot" / "example" / "example.ipynb").is_file()


@pytest.mark.slow
def test_a_kernel_that_ignores_interrupts_is_stopped_and_the_rest_scores_zero(tmp_path):
    from course_lib.grader._nbpreprocessors import CourseExecute

    runaway = "import time\nwhile True:\n    try:\n        time.sleep(0.01)\n    except KeyboardInterrupt:\n        pass"
    nb = nbformat.v4.new_notebook(cells=[new_code_cell("x = 1"), new_code_cell(runaway), new_code_cell("x")])
    CourseExecute(timeout=1, iopub_timeout=1, kernel_log=str(tmp_path / "kernel.log")).preprocess(
        nb, {"metadata": {"path": str(tmp_path)}})
    enames = [[o.get("ename") for o in cell.outputs] for cell in nb.cells]
    assert enames == [[], ["CellTimeoutError"], ["CellNotRun"]]
    assert nb.metadata["measure_first"]["kernel_stopped"]["reason"] == "the kernel stopped answering"


@pytest.mark.slow
@pytest.mark.parametrize("limits, runaway, kind", [
    ({"notebook_timeout": 3}, "import time\ntime.sleep(1.2)", "notebook-timeout"),
    ({"memory_limit": 400_000_000}, "import numpy as np\nblocks = [np.ones(10_000_000) for _ in range(200)]",
     "memory-limit"),
])
def test_a_kernel_past_its_limits_is_stopped_and_graded_on_what_ran(limits, runaway, kind, tmp_path):
    from course_lib.grader._nbpreprocessors import CourseExecute

    cells = [new_code_cell("x = 1")] + [new_code_cell(runaway) for _ in range(4)] + [new_code_cell("x")]
    nb = nbformat.v4.new_notebook(cells=cells)
    started = time.monotonic()
    CourseExecute(timeout=30, kernel_log=str(tmp_path / "kernel.log"), **limits).preprocess(
        nb, {"metadata": {"path": str(tmp_path)}})
    assert time.monotonic() - started < 25
    stopped = nb.metadata["measure_first"]["kernel_stopped"]
    assert stopped["kind"] == kind
    enames = [[o.get("ename") for o in cell.outputs if o.output_type == "error"] for cell in nb.cells]
    assert enames[0] == [] and enames[-1] == ["CellNotRun"]
    assert stopped["cell_index"] in range(1, 5)  # a runaway cell, never the first or the last


@pytest.mark.slow
def test_a_cell_that_prints_200_mb_is_cut_in_the_kernel_and_stays_under_the_memory_limit(tmp_path):
    # Without the kernel-side cap the kernel held about 800 MB while it sent 200 MB of
    # output (measured): past this 500 MB limit, the cell and every later one scored zero.
    from course_lib.grader._kernel_output import LIMIT
    from course_lib.grader._nbpreprocessors import CourseExecute

    flood = 'for _ in range(200):\n    print("x" * 1_000_000)\nimport sys\nprint("err", file=sys.stderr)'
    nb = nbformat.v4.new_notebook(cells=[new_code_cell(flood), new_code_cell("print('next cell')")])
    CourseExecute(timeout=60, memory_limit=500_000_000, kernel_log=str(tmp_path / "kernel.log")).preprocess(
        nb, {"metadata": {"path": str(tmp_path)}})
    assert "kernel_stopped" not in nb.metadata.get("measure_first", {})
    first, second = nb.cells
    assert sum(len(o.get("text", "")) for o in first.outputs if o.get("name") == "stdout") <= LIMIT
    assert [o.text for o in first.outputs if o.get("name") == "stderr"] == ["err\n"]  # still fails a test
    # the count starts again (a busy kernel may send one print as two stream messages)
    assert {o.get("name") for o in second.outputs} == {"stdout"}
    assert "".join(o.text for o in second.outputs) == "next cell\n"


def test_memory_limit_option_takes_sizes(monkeypatch):
    monkeypatch.delenv("COURSE_MEMORY_LIMIT", raising=False)
    assert cli._bytes("2GB") == 2_000_000_000 and cli._bytes("512 MiB") == 512 * 2**20
    with pytest.raises(argparse.ArgumentTypeError, match="expected a size"):
        cli._bytes("lots")
    course = nbgrading.Course.locate(root=ROOT, memory_limit=123_000_000, notebook_timeout=77)
    cfg = course.config()
    assert cfg.CourseExecute.memory_limit == 123_000_000 and cfg.CourseExecute.notebook_timeout == 77


# --- helpers -----------------------------------------------------------------------------------

def _put(path: Path, source: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if source is None:
        path.write_text("{}")
    else:
        shutil.copyfile(source, path)


def _solution_as_student_notebook() -> nbformat.NotebookNode:
    """The instructor's solution with hidden tests removed and solution markers dropped."""
    nb = nbformat.read(ROOT / "solutions" / "example" / "example.ipynb", as_version=4)
    for cell in nb.cells:
        cell.source = re.sub(r"\n?### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", "", cell.source, flags=re.S)
        cell.source = re.sub(r"[ ]*### (BEGIN|END) SOLUTION\n?", "", cell.source)
    return nb


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
