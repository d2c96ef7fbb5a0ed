"""`course student-repo`: what students get holds no solution and no hidden test, and works.

The leak check reads every source notebook in solutions/: each non-trivial line between
nbgrader's BEGIN/END SOLUTION or BEGIN/END HIDDEN TESTS markers must appear in no file of
the generated repository. A line counts as trivial when it is short, a comment, or also
stands in the released part of a source notebook (a hidden test often repeats a line of
the provided slow version, which students see anyway).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_lib.grader import cli, nbgrading, student_repo

ROOT = Path(__file__).resolve().parents[1]
URL = "https://github.com/example-org/perf-course"
PLACEHOLDER = "measure-first/" + "measure-first"  # split, so that this file is not a hit

# Library idioms that a solution or hidden test uses as the book and course_lib's own
# docstrings do; they reveal nothing. Import statements are trivial too (a hidden test's
# `import shutil` is in the book and in course_lib), whatever module they name. Any other
# overlap fails the test, to be looked at.
_IDIOMS = {"start = time.perf_counter()", 'with sw("load"):', "for _ in range(5):", "return seconds"}
_MIN_CHARS = 12


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("student") / "measure-first"
    assert cli.main(["student-repo", str(dest), "--root", str(ROOT), "--url", URL]) == cli.EXIT_OK
    return dest


@pytest.fixture(scope="module")
def secrets() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {"solution": set(), "hidden test": set()}
    public: list[str] = []
    for notebook in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            _split_regions("".join(cell["source"]), found, public)
    released = "\n".join(public)
    return {kind: {line for line in lines if _non_trivial(line, released)} for kind, lines in found.items()}


def test_the_secret_lines_are_found(secrets):
    # Without this the leak test would pass on an empty list, whatever the repository held.
    assert len(secrets["solution"]) >= 50
    assert len(secrets["hidden test"]) >= 50


def test_no_solution_or_hidden_test_text_anywhere(student, secrets):
    leaks = _leaks(student, secrets)
    assert not leaks, f"{len(leaks)} secret lines in the student repository, e.g. {leaks[:5]}"


def test_the_leak_check_finds_a_source_notebook(tmp_path, secrets):
    # The check must fail when solutions do get in: plant one source notebook.
    notebook = sorted((ROOT / "solutions").glob("*/*.ipynb"))[0]
    (tmp_path / "copied.ipynb").write_bytes(notebook.read_bytes())
    kinds = {kind for kind, _, _ in _leaks(tmp_path, secrets)}
    assert kinds == {"solution", "hidden test"}


def test_the_leak_check_finds_one_hidden_test_line_but_not_an_import(tmp_path, secrets):
    # One real hidden-test line copied into a chapter is a leak; an import the hidden tests
    # share with the book is not (the test once failed on `import shutil` in five chapters).
    line = max(secrets["hidden test"], key=len)
    assert not _is_import(line)
    chapter = tmp_path / "book" / "week9.md"
    chapter.parent.mkdir()
    chapter.write_text(f"```python\nimport shutil\nfrom pathlib import Path\n{line}\n```\n")
    leaks = _leaks(tmp_path, secrets)
    assert ("hidden test", line, "book/week9.md") in leaks
    assert all(found in line for _, found, _ in leaks)  # the line alone (or parts of it), no import
    chapter.write_text("```python\nimport shutil\nimport subprocess\n```\n")
    assert _leaks(tmp_path, secrets) == []
    assert _is_import("from course_lib.grading import assert_same, speedup_points")
    assert not _is_import("shutil.rmtree(scratch)") and not _is_import("import (")


@pytest.mark.parametrize("part", ["solutions", "grading", "examples", "tests", "benchmarks", ".github/workflows/tests.yml",
                                  ".ci", "nbgrader_config.py", "course_lib.egg-info", ".venv", "_build",
                                  "course_lib/grader"])
def test_instructor_parts_are_left_out(student, part):
    assert not (student / part).exists()


def test_no_gradebook_or_cache(student):
    left = [p for p in student.rglob("*")
            if p.suffix in {".db", ".pyc"} or p.name in {"__pycache__", ".ipynb_checkpoints"}]
    assert left == []


def test_the_instructors_guide_is_left_out(student):
    # It quotes hidden-test lines (its worked example is what `course new` writes).
    assert not (student / "book" / "instructors.md").exists()
    toc = (student / "_toc.yml").read_text()
    assert "book/instructors" not in toc and "book/week1_workload" in toc
    assert toc == student_repo.without_pages((ROOT / "_toc.yml").read_text(), student_repo.INSTRUCTOR_PAGES)


@pytest.mark.parametrize("part", ["book", "binder", "course_lib/grading/__init__.py", "course_lib/check.py",
                                  "course_lib/__main__.py", "assignments/week1/week1.ipynb",
                                  ".devcontainer/devcontainer.json", ".devcontainer/start-jupyterlab.sh",
                                  ".github/workflows/book.yml"])
def test_student_parts_are_copied(student, part):
    assert (student / part).exists()
    if (student / part).is_file():
        assert (student / part).read_bytes() == (ROOT / part).read_bytes()


def test_readme_tells_how_to_start_check_and_submit(student):
    text = (student / "README.md").read_text()
    for needed in ("Codespaces", "make venv", "course check example.ipynb", "check(\"part2\")", "check(\"task2\")",
                   "python -m course_lib check", "How it is graded", "/tmp/jupyterlab.log",
                   "## Submit", "git push", "before the deadline", URL):
        assert needed in text, needed
    released = sorted(p.name for p in (ROOT / "assignments").iterdir() if p.is_dir())
    for name in released:
        assert f"assignments/{name}/{name}.ipynb" in text


def test_both_readmes_say_the_same_about_the_deadline(student):
    # once: the student README said a push after the deadline is not seen, the instructor's
    # that it shows as late, and the grader took the commit's own (forgeable) date
    students = " ".join((student / "README.md").read_text().split())
    instructors = " ".join((ROOT / "README.md").read_text().split())
    assert "collection fetches your repository" in students and "graded as late" in students
    assert "The date of your commit does not count" in students and "not seen" not in students.split("## Submit")[1].split("if no later")[0]
    assert "course collect" in instructors and "late, whatever the commit's date says" in instructors
    assert "a push the deadline's collection did not see is graded as late" in instructors


def test_readme_grading_is_generated_from_the_notebooks(student):
    text = (student / "README.md").read_text()
    # every week's speed cell gives partial credit (speedup_points), week 5's memory cells too
    # (peak_memory_points, log_points); the example's is all or nothing (assert_speedup), and
    # so are correctness cells
    assert re.search(r"\| `test_faster_speed` \| Part 4 \| 2 \| hidden \| partial credit: .*0 points at 60x", text)
    assert re.search(r"\| `test_peak_speed` \| Part 1 \| 2 \| hidden \| partial credit: .*0 points at 2x", text)
    # weeks 3 to 8 (and the example) have tasks, not parts: the column names them too
    assert re.search(r"\| `test_summary_memory` \| Task 1 \| 2 \| hidden \| partial credit: .*20 MB", text)
    assert re.search(r"\| `test_compact_memory` \| Task 2 \| 2 \| visible \| partial credit", text)
    # a cell that measures, then checks the result, ends with the points it kept (`_points`);
    # one that adds points up (week 8's two halves) gives partial credit too
    assert re.search(r"\| `test_hourly_memory` \| Task 3 \| 1 \| hidden \| partial credit: .*75 kB", text)
    assert re.search(r"\| `test_before_after_hidden` \| Task 4 \| 2 \| hidden \| partial credit", text)
    assert re.search(r"\| `test_count_speed` \| Task 1 \| 4 \| hidden \| all or nothing", text)
    assert re.search(r"\| `test_faster_visible` \| Part 4 \| 1 \| visible \| all or nothing \|", text)
    assert "22 points; 2 of them by partial credit, 6 marked by hand." in text
    assert re.search(r"\| `written_explanation` \| Part 6 \| 2 \| none: a written answer \| marked by hand", text)
    assert "Partial credit grows with the speed-up" not in text


@pytest.mark.parametrize("source, partial", [
    ("speedup_points(f, g, full_at=5, zero_at=2, points=2)", True),
    ("_points = peak_memory_points(f, '20 MB', '100 MB', 2, path)\nassert_same(f(path), g(path))\n_points", True),
    ("float(all(table)) + float(all(claims))", True),
    ("round(min(1.0, max(0.0, off)), 2)", True),
    ("assert_same(f(x), g(x))", False),
    ("grading.assert_speedup(f, g, make_args=make, at_least=10)", False),
    ("print('done')", False),
    ("result = f(x)", False),
    ("assert f(x) == 1", False),
])
def test_a_cell_gives_partial_credit_when_it_ends_with_a_value(source, partial):
    # nbgrader scores a test cell by the number it shows; checks and prints show none
    assert student_repo._returns_points(source) is partial


def test_rules_follow_the_source_notebook(tmp_path):
    cell = nbformat.v4.new_code_cell(
        "# Hidden speed test (2 points): from 2x to 5x.\n### BEGIN HIDDEN TESTS\nspeedup_points(f, g)\n"
        "### END HIDDEN TESTS", metadata={"nbgrader": {"grade": True, "grade_id": "t_speed", "points": 2,
                                                        "solution": False, "locked": True}})
    written = nbformat.v4.new_markdown_cell("### BEGIN SOLUTION\nA model answer.\n### END SOLUTION", metadata={
        "nbgrader": {"grade": True, "grade_id": "written", "points": 2, "solution": True, "locked": False}})
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## Part 3: go"), cell, written]),
                   tmp_path / "w.ipynb")
    rules = student_repo.grading_rules(tmp_path / "w.ipynb")
    assert rules == [
        {"grade_id": "t_speed", "part": "Part 3: go", "points": 2.0, "hidden": True, "partial": True,
         "says": "from 2x to 5x.", "manual": False},
        {"grade_id": "written", "part": "Part 3: go", "points": 2.0, "hidden": False, "partial": False,
         "says": "", "manual": True}]
    text = student_repo.student_readme(["w"], rules={"w": rules})
    assert "4 points; 2 of them by partial credit, 2 marked by hand." in text
    assert "A model answer" not in text


def test_one_setting_names_the_public_repository(student):
    config = (student / "_config.yml").read_text()
    assert student_repo.repository_url(config) == URL
    hits = [str(p.relative_to(student)) for p in student.rglob("*") if p.is_file() and PLACEHOLDER in _text(p)]
    assert hits == []


def test_the_course_names_its_placeholder_in_one_place_only():
    # everything else (book links, launch buttons, the Pages workflow) reads _config.yml's
    # repository.url; the student copy gets the real URL there
    skip = {".git", ".venv", "_build", "__pycache__", ".pytest_cache", ".hypothesis"}
    hits = [(str(p.relative_to(ROOT)), _text(p).count(PLACEHOLDER)) for p in ROOT.rglob("*")
            if p.is_file() and not skip & set(p.relative_to(ROOT).parts)
            and p.relative_to(ROOT).parts[0] != "grading"  # the grading folder, not course_lib/grading
            and p.stat().st_size < 5_000_000
            and PLACEHOLDER in _text(p)]
    assert hits == [("_config.yml", 1)]


def test_the_pages_workflow_publishes_only_from_the_named_repository(student):
    workflow = (student / ".github" / "workflows" / "book.yml").read_text()
    assert "steps.public.outputs.publish == 'true'" in workflow
    step = re.search(r"url=\$\((.*?)\)\n", workflow).group(1)
    found = subprocess.run(["sh", "-c", step], cwd=student, capture_output=True, text=True).stdout.strip()
    assert found == URL


def test_the_student_environment_is_lean_and_pinned(student):
    import tomllib

    lock = (student / "requirements.lock").read_text()
    names = {line.split("==")[0].lower() for line in lock.splitlines() if "==" in line}
    full = {line.strip() for line in (ROOT / "requirements.lock").read_text().splitlines()}
    assert {line for line in lock.splitlines() if "==" in line} <= full, "every pin comes from the course's lock"
    assert {"jupyterlab", "nbclient", "ipykernel", "numpy", "pandas", "numba"} <= names
    assert not {"nbgrader", "dask", "distributed", "psycopg2-binary", "jupyter-book", "sqlalchemy"} & names
    deps = tomllib.loads((student / "pyproject.toml").read_text())["project"]["dependencies"]
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["student"]
    assert deps == extra
    assert (student / "requirements-book.lock").read_text().endswith((ROOT / "requirements.lock").read_text())


def test_a_bad_url_is_one_line(tmp_path, capsys):
    assert cli.main(["student-repo", str(tmp_path / "s"), "--root", str(ROOT), "--url", "github.com/x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "https://github.com/ORG/REPO" in err
    assert not (tmp_path / "s").exists()


def test_devcontainer_parses_and_its_make_target_runs(student):
    config = json.loads((student / ".devcontainer" / "devcontainer.json").read_text())
    command = shlex.split(config["updateContentCommand"])
    assert command[0] == "make" and len(command) == 2
    # A dry run fails if the target, a prerequisite or a file it depends on is missing.
    outcome = subprocess.run(["make", "-n", "-C", str(student), command[1]], capture_output=True, text=True)
    assert outcome.returncode == 0, outcome.stderr
    assert "pip install -q -r requirements.lock" in outcome.stdout


def test_make_book_adds_the_book_tools_first(student):
    outcome = subprocess.run(["make", "-n", "-C", str(student), "book"], capture_output=True, text=True)
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stdout.index("-r requirements-book.lock") < outcome.stdout.index("jupyter-book build")


@pytest.mark.parametrize("target", ["demo", "book", "clean"])
def test_other_make_targets_need_nothing_left_out(student, target):
    outcome = subprocess.run(["make", "-n", "-C", str(student), target], capture_output=True, text=True)
    assert outcome.returncode == 0, outcome.stderr
    assert "examples/" not in outcome.stdout and "course release" not in outcome.stdout


@pytest.mark.slow
def test_course_check_runs_from_inside_the_student_copy(student):
    # A fresh interpreter whose course_lib is the student copy: every module must import
    # from there, and `python -m course_lib check` must run a released notebook's visible tests.
    script = (
        "import importlib, pkgutil, sys, course_lib\n"
        "for info in pkgutil.iter_modules(course_lib.__path__):\n"
        "    if info.name != '__main__':\n"
        "        module = importlib.import_module('course_lib.' + info.name)\n"
        "        print('imported', module.__file__)\n"
        "from course_lib.__main__ import main\n"
        "sys.exit(main(['check', 'example.ipynb']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(student)}
    outcome = subprocess.run([sys.executable, "-c", script], cwd=student / "assignments" / "example",
                             env=env, capture_output=True, text=True, timeout=120)
    assert outcome.returncode == 1, outcome.stderr
    imported = [line.split(" ", 1)[1] for line in outcome.stdout.splitlines() if line.startswith("imported ")]
    assert len(imported) >= 10
    assert all(Path(path).is_relative_to(student / "course_lib") for path in imported), imported
    assert "FAIL  test_count_visible    0 / 2  NotImplementedError" in outcome.stdout
    assert "points in hidden tests" in outcome.stdout
    assert "Visible tests: 0 of 2 passed" in outcome.stdout


@pytest.mark.slow
def test_the_kernel_of_course_check_imports_the_student_copy(student, tmp_path):
    # `course check` starts a kernel of its own: it too must find the student copy's
    # course_lib (through PYTHONPATH, as an installed copy would be found), not this one.
    probe = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import pathlib, course_lib\n"
        f"assert pathlib.Path(course_lib.__file__).is_relative_to({str(student)!r}), course_lib.__file__",
        metadata={"nbgrader": {"grade": True, "grade_id": "probe", "locked": True, "points": 1,
                               "schema_version": 3, "solution": False, "task": False}})])
    nbformat.write(probe, tmp_path / "probe.ipynb")
    script = "import sys; from course_lib.check import main; sys.exit(main(['probe.ipynb']))"
    outcome = subprocess.run([sys.executable, "-c", script], cwd=tmp_path,
                             env={**os.environ, "PYTHONPATH": str(student)},
                             capture_output=True, text=True, timeout=120)
    assert outcome.returncode == 0, outcome.stdout + outcome.stderr
    assert "PASS  probe" in outcome.stdout


def test_refuses_a_non_empty_folder_without_force(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert cli.main(["student-repo", str(tmp_path), "--root", str(ROOT)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not empty; pass --force" in err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_force_replaces_all_but_git_and_git_commits(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "stale.ipynb").write_text("{}")
    assert cli.main(["student-repo", str(tmp_path), "--root", str(ROOT), "--force", "--git"]) == cli.EXIT_OK
    assert not (tmp_path / "solutions").exists()

    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True,
                              check=True).stdout

    assert len(git("log", "--oneline").splitlines()) == 1
    assert git("status", "--porcelain") == ""
    assert "assignments/week1/week1.ipynb" in git("ls-files")
    assert "course_lib/grading/_speed.py" in git("ls-files")  # not ignored as a grading/ folder
    # regenerated over itself: history kept, nothing new to commit
    assert cli.main(["student-repo", str(tmp_path), "--root", str(ROOT), "--force", "--git"]) == cli.EXIT_OK
    assert len(git("log", "--oneline").splitlines()) == 1


def test_refuses_a_folder_inside_the_course(capsys):
    assert cli.main(["student-repo", str(ROOT / "book" / "student"), "--root", str(ROOT)]) == cli.EXIT_USAGE
    assert "inside the course repository" in capsys.readouterr().err
    assert not (ROOT / "book" / "student").exists()


@pytest.mark.parametrize("marker", ["### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS"])
def test_refuses_a_source_notebook_in_assignments(tmp_path, marker):
    week = tmp_path / "course" / "assignments" / "week1"
    week.mkdir(parents=True)
    (week / "week1.ipynb").write_text(json.dumps({"cells": [{"source": [marker]}]}))
    with pytest.raises(nbgrading.CourseError, match="not a released notebook"):
        student_repo.write_student_repo(tmp_path / "course", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_makefile_without_venv_is_refused():
    with pytest.raises(nbgrading.CourseError, match="no 'venv' target"):
        student_repo.student_makefile("test:\n\tpytest\n")


# --- private helpers -------------------------------------------------------------------------

_REGIONS = {"BEGIN SOLUTION": "solution", "BEGIN HIDDEN TESTS": "hidden test"}


def _split_regions(source: str, found: dict[str, set[str]], public: list[str]) -> None:
    kind = None
    for line in source.splitlines():
        begin = next((k for marker, k in _REGIONS.items() if marker in line), None)
        if begin:
            kind = begin
        elif "END SOLUTION" in line or "END HIDDEN TESTS" in line:
            kind = None
        elif kind:
            found[kind].add(line.strip())
        else:
            public.append(line)


def _non_trivial(line: str, released: str) -> bool:
    return (len(line) >= _MIN_CHARS and not line.startswith("#") and line not in _IDIOMS
            and not _is_import(line) and line not in released)


def _is_import(line: str) -> bool:
    """Whether ``line`` is one whole import statement (``import x``, ``from x import y``)."""
    try:
        body = ast.parse(line).body
    except SyntaxError:
        return False
    return len(body) == 1 and isinstance(body[0], (ast.Import, ast.ImportFrom))


def _leaks(folder: Path, secrets: dict[str, set[str]]) -> list[tuple[str, str, str]]:
    leaks = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts):
        text = _text(path)
        leaks += [(kind, line, str(path.relative_to(folder)))
                  for kind, lines in secrets.items() for line in sorted(lines) if line in text]
    return leaks


def _text(path: Path) -> str:
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".ipynb":
        return raw
    # JSON escapes quotes and newlines: search the notebook's strings, and the raw file too.
    try:
        strings = list(_strings(json.loads(raw)))
    except json.JSONDecodeError:
        strings = []
    return "\n".join([raw, *strings])


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        # a cell's source is a list of lines: join them so that no line is split in two
        if all(isinstance(item, str) for item in node):
            yield "".join(node)
        else:
            for item in node:
                yield from _strings(item)
