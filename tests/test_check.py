"""The self-check (:mod:`course_lib.check`): what reaches the student's terminal from the kernel."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from course_lib.check import check_notebook


def _notebook(tmp_path, *sources: str, test: str = "assert True"):
    cells = [new_code_cell(source) for source in sources]
    cells.append(new_code_cell(test, metadata={"nbgrader": {"grade": True, "grade_id": "test_it", "points": 1,
                                                           "solution": False, "locked": True}}))
    path = tmp_path / "week0.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    return path


def test_what_a_kernel_writes_to_its_stderr_as_it_exits_stays_off_the_terminal(tmp_path, capfd):
    # ZeroMQ aborts a kernel now and then as its context closes at exit, writing an assertion
    # to the process's stderr: a student whose every cell ran must not see it.
    path = _notebook(tmp_path, "import atexit, os\n"
                               "atexit.register(lambda: os.write(2, b'Assertion failed: pfd.revents & POLLIN\\n'))")
    result = check_notebook(path)
    assert result.passed and result.warnings == ()
    assert capfd.readouterr().err == ""


def test_a_kernel_that_dies_is_named_with_its_last_words(tmp_path, capfd):
    path = _notebook(tmp_path, "x = 1", "import os\nos.write(2, b'out of luck: the last line\\n')\nos._exit(3)")
    result = check_notebook(path)
    assert not result.passed
    assert [c.status for c in result.cells] == ["not-run"]
    assert result.warnings == ("the kernel died while cell 2 of the notebook ran; its last words: "
                               "out of luck: the last line",)
    assert "warning: the kernel died while cell 2" in result.report()
    assert capfd.readouterr().err == ""
