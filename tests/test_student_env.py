"""The student's side, as a student meets it: the generated repository, its Codespace set-up,
the self-check from inside a notebook and from a terminal, and JupyterLab.

Everything runs in the student copy written by ``course student-repo`` (no solutions, no
``course_lib.grader``), with ``.venv`` a link to this environment and ``PATH`` set as the
devcontainer's ``remoteEnv`` sets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from course_lib.grader import cli

ROOT = Path(__file__).resolve().parents[1]
URL = "https://github.com/example-org/perf-course"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("student") / "perf-course"
    assert cli.main(["student-repo", str(dest), "--root", str(ROOT), "--url", URL]) == cli.EXIT_OK
    (dest / ".venv").symlink_to(ROOT / ".venv")  # what `make venv` would have built there
    return dest


def student_env(student: Path) -> dict[str, str]:
    """The environment of a Codespace's terminal: remoteEnv's PATH, the student copy's course_lib."""
    config = json.loads((student / ".devcontainer" / "devcontainer.json").read_text())
    base = ":".join(p for p in os.environ["PATH"].split(":") if ".venv" not in p)
    path = (config["remoteEnv"]["PATH"].replace("${containerWorkspaceFolder}", str(student))
            .replace("${containerEnv:PATH}", base))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "NBGRADER"))}
    return {**env, "PATH": path, "PYTHONPATH": str(student)}


def fill_answers(notebook: Path, grade_ids: set[str]) -> None:
    """Put the reference answers of the cells ``grade_ids`` into a released notebook."""
    source = nbformat.read(ROOT / "solutions" / notebook.parent.name / notebook.name, as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in grade_ids:
            cell.source = "\n".join(line for line in answers[grade_id].splitlines()
                                    if "BEGIN SOLUTION" not in line and "END SOLUTION" not in line)
    nbformat.write(nb, notebook)


# --- the in-notebook check ---------------------------------------------------------------------

def test_check_from_inside_the_notebook_through_a_real_kernel(student, tmp_path):
    # Parts 1 and 2 answered, Part 3 not: check("part2") passes, check(3) fails, and the
    # kernel finds the notebook from JPY_SESSION_NAME as JupyterLab sets it.
    notebook = student / "assignments" / "week1" / "week1.ipynb"
    fill_answers(notebook, {"timed_job", "measure", "buckets"})
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import course_lib\n"
        "print('course_lib:', course_lib.__file__)\n"
        "from course_lib.check import check\n"
        "passed = check('part2')"))
    nb.cells.append(nbformat.v4.new_code_cell("failed = check(3)\nprint(passed.passed, failed.passed)"))
    nbformat.write(nb, notebook)  # saved, as the student is told to
    env = student_env(student)
    env["JPY_SESSION_NAME"] = str(notebook)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(notebook.parent)}})
    client.km = client.create_kernel_manager()
    client.km.transport, client.km.ip = "ipc", str(tmp_path / "kernel")
    with client.setup_kernel(env=env):
        # the student runs just the new cells; the check runs the saved notebook itself
        for index in (len(nb.cells) - 2, len(nb.cells) - 1):
            client.execute_cell(nb.cells[index], index)
    part2 = _stdout(nb.cells[-2])
    part3 = _stdout(nb.cells[-1])
    assert f"course_lib: {student}/course_lib/__init__.py" in part2
    assert "save the notebook first" in part2
    assert "Checking week1.ipynb: Part 2, visible tests only" in part2
    assert "Part 2: compute, I/O or overhead? (2 points)" in part2
    assert re.search(r"PASS\s+test_buckets_visible\s+1 / 1", part2)
    assert re.search(r"----\s+test_buckets_hidden\s+1 point in hidden tests", part2)
    assert "test_timed_job_visible" not in part2, "only Part 2's tests are reported"
    assert part2.rstrip().endswith("Visible tests: 1 of 1 passed, 1 / 1 point; another 1 point in hidden tests.")
    assert re.search(r"FAIL\s+test_amdahl_visible\s+0 / 1\s+(NotImplementedError|NameError)", part3)
    assert part3.rstrip().endswith("True False")


def test_check_previews_the_hidden_speed_test_on_this_machine(student, tmp_path):
    # Week 2's speed test (all 3 points from 15x, none at 2x) is hidden; the visible preview
    # line in its cell measures the answer against peak_slow in the checked kernel. The
    # reference answer measured 64x-92x here: far from the 13.5x boundary, so the verdict is
    # stable.
    env = student_env(student)
    answered, untouched = tmp_path / "answered" / "week2", tmp_path / "untouched" / "week2"
    for folder in (answered, untouched):
        shutil.copytree(student / "assignments" / "week2", folder)
    fill_answers(answered / "week2.ipynb", {"peak_fast"})
    outputs = {}
    for folder in (answered, untouched):
        done = subprocess.run(["course", "check", "week2.ipynb", "--part", "1"], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.stderr == "", done.stderr
        outputs[folder.parent.name] = done.stdout
    good, bad = outputs["answered"], outputs["untouched"]
    assert re.search(r"----\s+test_peak_speed\s+2 points in hidden tests", good)
    assert "Speed preview on this machine (not your grade" in good
    ratio = float(re.search(r"peak_fast against peak_slow: ([\d.]+)x \(95% interval", good).group(1))
    assert ratio > 20, good
    assert ("The graded test gives 2 points from 15x and none at 2x or below: on this measurement 2 of 2 "
            "points.") in good
    assert "peak_fast against peak_slow: not measured: your function raised NotImplementedError" in bad
    assert "Traceback" not in good + bad


def test_a_preview_does_nothing_while_grading_and_never_counts_as_a_visible_test():
    from course_lib.check import _has_code

    assert not _has_code("# Hidden speed test\npreview_speedup(f, g, make_args=lambda: (1,), at_least=2)\n")
    assert _has_code("preview_speedup(f, g, make_args=lambda: (1,), at_least=2)\nassert f(1) == 1\n")
    env = {**os.environ, "NBGRADER_EXECUTION": "autograde"}
    # While grading it returns at once (a second's budget would show), printing nothing.
    code = ("import time; from course_lib.preview import preview_speedup\n"
            "t = time.perf_counter()\n"
            "preview_speedup(sorted, sorted, lambda: (list(range(10**6, 0, -1)),), at_least=2, budget=5)\n"
            "print(round(time.perf_counter() - t, 1))")
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert (done.stdout, done.stderr) == ("0.0\n", "")


def test_check_names_the_parts_when_asked_for_one_that_is_not_there(student):
    from course_lib.check import CheckError, check

    with pytest.raises(CheckError, match="its parts: 'part1', 'part2', 'part3', 'part4', 'part5'"):
        check("part9", notebook=student / "assignments" / "week1" / "week1.ipynb")


def test_weeks_with_tasks_are_checked_by_task(student):
    # weeks 3 to 8 have "## Task N" sections: "task2" (or "part2", the README's other
    # example) names the second; once every week answered "its parts: none"
    from course_lib.check import CheckError, _part_number, parts

    week3 = nbformat.read(student / "assignments" / "week3" / "week3.ipynb", as_version=4)
    # the headings as a reader counts them, so a new task changes the test's expectation
    # with it, while a heading the parser missed still fails
    headings = [int(n) for cell in week3.cells if cell.cell_type == "markdown"
                for n in re.findall(r"^## Task (\d+): ", cell.source, re.MULTILINE)]
    titles = parts(week3)
    assert len(headings) >= 3 and sorted(titles) == headings == list(range(1, len(headings) + 1))
    assert titles[2].startswith("Task 2")
    assert _part_number("task2", titles) == _part_number("part2", titles) == _part_number("Task 2", titles) == 2
    listed = ", ".join(f"'task{n}'" for n in headings)
    with pytest.raises(CheckError, match=re.escape(f"its tasks: {listed}")):
        _part_number(f"task{len(headings) + 1}", titles)


# --- the terminal ------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["course check example.ipynb",
                                     "python -m course_lib check example.ipynb"])
def test_the_readme_commands_work_in_a_codespace_terminal(student, command):
    readme = (student / "README.md").read_text()
    assert command.replace("example", "FIRST") in readme.replace("example", "FIRST")
    outcome = subprocess.run(["bash", "-c", f"cd assignments/example && {command}"], cwd=student,
                             env=student_env(student), capture_output=True, text=True, timeout=180)
    assert outcome.returncode == 1, outcome.stderr  # the untouched notebook fails its visible tests
    assert re.search(r"FAIL\s+test_count_visible\s+0 / 2\s+NotImplementedError", outcome.stdout)
    assert outcome.stderr == "", "a student's check prints no kernel warnings"


def test_the_notebooks_own_command_works_from_the_repository_root(student):
    # the notebook says `course check example.ipynb`; a new terminal opens at the root
    outcome = subprocess.run(["bash", "-c", "course check example.ipynb"], cwd=student,
                             env=student_env(student), capture_output=True, text=True, timeout=180)
    assert outcome.returncode == 1, outcome.stderr
    assert "Checking example.ipynb" in outcome.stdout


def test_instructor_commands_stop_with_one_line_in_the_student_copy(student, monkeypatch, capsys):
    # (this environment has the instructor's editable install, whose finder would find
    # course_lib.grader from anywhere: pretend it is not there, as in the student's .venv)
    import importlib.util

    from course_lib import __main__ as course

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "course_lib.grader" else real(name, *a))
    assert course.main(["grade", "--submissions", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'grade' is a command for the course team" in err


def test_every_course_check_a_notebook_mentions_names_a_notebook_that_exists(student):
    for notebook in sorted((student / "assignments").glob("*/*.ipynb")):
        text = "".join(c.source for c in nbformat.read(notebook, as_version=4).cells)
        for named in re.findall(r"course check (\S+?\.ipynb)", text):
            assert (notebook.parent / named).is_file(), f"{notebook.name} says `course check {named}`"


# --- JupyterLab in the Codespace ---------------------------------------------------------------

@pytest.fixture(scope="module")
def jupyterlab(student, tmp_path_factory):
    """JupyterLab as the devcontainer starts it: its postStartCommand, run twice."""
    tmp = tmp_path_factory.mktemp("lab")
    config = json.loads((student / ".devcontainer" / "devcontainer.json").read_text())
    port = _free_port()
    env = {**student_env(student), "JUPYTERLAB_PORT": str(port), "JUPYTERLAB_LOG": str(tmp / "lab.log"),
           "JUPYTERLAB_PIDFILE": str(tmp / "lab.pid"), "HOME": str(tmp),
           # as in a Codespace: the empty token there leans on GitHub's sign-in to the port
           "CODESPACES": "true", "CODESPACE_NAME": "test-lab"}
    env["PATH"] = ":".join(p for p in env["PATH"].split(":") if ".venv" not in p)  # the script adds it
    first = subprocess.run(config["postStartCommand"], shell=True, cwd=student, env=env,
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    pid = int((tmp / "lab.pid").read_text())
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(base + "/api/status", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (tmp / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        second = subprocess.run(config["postStartCommand"], shell=True, cwd=student, env=env,
                                capture_output=True, text=True, timeout=60)
        yield {"base": base, "first": first.stdout, "second": second.stdout, "pid": pid,
               "log": tmp / "lab.log"}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)  # setsid made it a group leader: its kernels go too


def test_jupyterlab_starts_once_detached(jupyterlab):
    assert "starting on port" in jupyterlab["first"] and "log:" in jupyterlab["first"]
    assert f"already running (pid {jupyterlab['pid']}" in jupyterlab["second"]
    assert os.getsid(jupyterlab["pid"]) == jupyterlab["pid"], "the server has a session of its own"


def test_a_jupyterlab_terminal_finds_course(jupyterlab, student):
    out = asyncio.run(_terminal(jupyterlab["base"], "command -v course; course check --help | head -n 1"))
    assert f"{student}/.venv/bin/course" in out, out
    assert "usage: course check" in out, out


def test_the_notebook_renders_in_jupyterlab(jupyterlab):
    from test_book_browser import CHROMIUM, chromium

    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    pytest.importorskip("websocket", reason="websocket-client is needed to drive Chromium")
    with chromium() as tools:
        tools.call("Page.enable")
        tools.call("Page.navigate", url=jupyterlab["base"] + "/lab/tree/assignments/week1/week1.ipynb")
        deadline, state = time.monotonic() + 120, {}
        while time.monotonic() < deadline:
            state = tools.evaluate("""(() => ({
                cells: document.querySelectorAll('.jp-Notebook .jp-Cell').length,
                text: (document.querySelector('.jp-Notebook') || {innerText: ''}).innerText.slice(0, 3000),
                kernel: (document.querySelector('.jp-Toolbar-kernelName') || {innerText: ''}).innerText,
            }))()""") or {}
            if state.get("cells", 0) >= 30 and "Week 1 graded notebook" in state.get("text", ""):
                break
            time.sleep(1)
    assert state.get("cells", 0) >= 30, state
    assert "Week 1 graded notebook" in state["text"]
    assert "Python 3" in state["kernel"], state["kernel"]


# --- private helpers ---------------------------------------------------------------------------

def _stdout(cell) -> str:
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert not errors, "\n".join(errors[0].traceback)
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _terminal(base: str, command: str) -> str:
    """Open a terminal through the server's REST API, run ``command`` in it, return what it printed."""
    from tornado.httpclient import AsyncHTTPClient, HTTPRequest
    from tornado.websocket import websocket_connect

    client = AsyncHTTPClient()
    page = await client.fetch(base + "/lab")
    cookies = [c.split(";", 1)[0] for c in page.headers.get_list("Set-Cookie")]
    xsrf = next(c.split("=", 1)[1] for c in cookies if c.startswith("_xsrf="))
    headers = {"Cookie": "; ".join(cookies), "X-XSRFToken": xsrf}
    reply = await client.fetch(base + "/api/terminals", method="POST", body="{}", headers=headers)
    name = json.loads(reply.body)["name"]
    ws_url = base.replace("http", "ws", 1) + f"/terminals/websocket/{name}"
    ws = await websocket_connect(HTTPRequest(ws_url, headers=headers))
    await ws.write_message(json.dumps(["stdin", f"{command}; echo DONE-$((6*7))\r"]))
    out, deadline = "", time.monotonic() + 60
    while "DONE-42" not in out and time.monotonic() < deadline:
        message = await asyncio.wait_for(ws.read_message(), timeout=60)
        if message is None:
            break
        kind, *data = json.loads(message)
        if kind == "stdout":
            out += data[0]
    ws.close()
    await client.fetch(base + f"/api/terminals/{name}", method="DELETE", headers=headers)
    return out
