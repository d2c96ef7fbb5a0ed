"""The repository students open in Codespaces: the course without its solutions.

:func:`write_student_repo` copies what a student needs from the instructor's repository
(the book, ``course_lib``, the released ``assignments/``, the devcontainer, the pinned
install files) and writes a student ``README.md`` and a ``Makefile`` that keeps only the
targets that work without the instructor's files. Nothing else is copied: no
``solutions/`` (solutions and hidden tests), no ``grading/`` (the gradebook), no
``examples/`` (sample submissions), no ``tests/`` (the instructor's suite reads
``solutions/``), no ``nbgrader_config.py`` and no CI workflows.

``course_lib`` goes whole: no module of it reads ``solutions/`` when imported, only
``course release`` and ``course grade`` do when run, and those stop with a one-line error
in the student copy (it has no ``nbgrader_config.py``). ``course check`` needs nothing
else.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from course_lib.grader.nbgrading import CourseError

__all__ = ["COPIED", "MAKE_TARGETS", "write_student_repo", "student_readme", "student_makefile"]

#: What is copied from the course root, and whether it must be there.
COPIED: tuple[tuple[str, bool], ...] = (
    ("book", True),
    ("_config.yml", True),
    ("_toc.yml", True),
    ("binder", False),
    ("course_lib", True),
    ("assignments", True),
    (".devcontainer", True),
    ("pyproject.toml", True),
    ("requirements.lock", True),
    (".gitignore", False),
)

#: Targets of the instructor's Makefile kept as they are; ``demo`` is rewritten (the
#: instructor's also grades the sample submissions) and ``test`` dropped (it runs the
#: instructor's suite).
MAKE_TARGETS: tuple[str, ...] = ("venv", "$(STAMP)", "book", "clean")


def write_student_repo(root: str | Path, dest: str | Path, *, force: bool = False,
                       git: bool = False) -> Path:
    """Write the student repository of the course at ``root`` into ``dest``; return ``dest``.

    Parameters
    ----------
    root : str or Path
        The instructor's course repository (the folder holding ``nbgrader_config.py``).
    dest : str or Path
        Where to write it. It must not exist or be empty, unless ``force``; it must be
        outside ``root``.
    force : bool
        Replace whatever ``dest`` holds, except a ``.git`` folder, so that an existing
        student repository can be regenerated and the difference committed.
    git : bool
        ``git init`` the result and commit everything in it.

    Raises
    ------
    CourseError
        if ``dest`` is not empty (and not ``force``), lies inside ``root``, or a required
        part is missing from ``root``, or a released notebook still holds solution or
        hidden-test markers.

    Examples
    --------
    >>> write_student_repo("/no/such/course", "/tmp/anywhere")
    Traceback (most recent call last):
    ...
    course_lib.grader.nbgrading.CourseError: /no/such/course is not a course repository (no assignments/ in it)
    """
    root = Path(root).expanduser().resolve()
    dest = Path(dest).expanduser().resolve()
    _check_source(root)
    _prepare_destination(root, dest, force)
    for name, required in COPIED:
        source = root / name
        if not source.exists():
            if required:
                raise CourseError(f"{root} has no {name}: cannot write the student repository")
            continue
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=_IGNORED, dirs_exist_ok=True)
        else:
            shutil.copy2(source, dest / name)
    weeks = sorted(p.name for p in (dest / "assignments").iterdir() if p.is_dir())
    (dest / "README.md").write_text(student_readme(weeks), encoding="utf-8")
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    (dest / "Makefile").write_text(student_makefile(makefile), encoding="utf-8")
    if git:
        _git_commit(dest)
    return dest


def student_readme(assignments: list[str]) -> str:
    """The student repository's ``README.md``, naming each assignment in ``assignments``.

    Examples
    --------
    >>> text = student_readme(["week1", "week2"])
    >>> "course check assignments/week1/week1.ipynb" in text
    True
    """
    listed = "\n".join(f"- `assignments/{name}/{name}.ipynb`" for name in assignments) or "- (none yet)"
    first = assignments[0] if assignments else "week1"
    return _README.format(listed=listed, first=first)


def student_makefile(instructor: str) -> str:
    """The student ``Makefile``: the instructor's variables and :data:`MAKE_TARGETS`, and a demo.

    Blocks (paragraphs) of ``instructor`` that set variables or define a kept target are
    kept word for word, so the install recipe is the one the instructor's tests exercise;
    every other target is left out.

    Raises
    ------
    CourseError
        if the instructor's Makefile has no ``venv`` target (the devcontainer runs it).

    Examples
    --------
    >>> text = student_makefile("V := 1\\n\\nvenv: x\\n\\ttouch x\\n\\ntest:\\n\\tpytest\\n")
    >>> "venv: x" in text, "pytest" in text
    (True, False)
    """
    kept = []
    for block in re.split(r"\n\s*\n", instructor.strip()):
        targets = _targets(block)
        if targets and set(targets) <= set(MAKE_TARGETS):
            kept.append(block)
        elif not targets and any(_VARIABLE.match(line) for line in block.splitlines()):
            kept.append(block)
    if not any("venv" in _targets(block) for block in kept):
        raise CourseError("the course Makefile has no 'venv' target, which the devcontainer runs")
    names = [t for t in MAKE_TARGETS if not t.startswith("$")] + ["demo"]
    return "\n\n".join([_MAKEFILE_HEAD.rstrip(), *kept, f".PHONY: {' '.join(names)}", _MAKEFILE_DEMO]) + "\n"


# --- private helpers -------------------------------------------------------------------------

# Caches and editor state are never part of a repository (and .pyc files would carry the
# instructor's paths).
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", ".DS_Store")

_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\s*(\?|:|\+)?=")
_RULE = re.compile(r"^([^\s#][^:=]*?)\s*:(?!=)")

_MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")

_MAKEFILE_HEAD = """\
# Measure First, student repository. Generated by `course student-repo`: change the
# course's own Makefile, not this one. `make venv` (the Codespaces post-create command)
# installs the pinned environment into .venv; `make book` builds the book.
"""

_MAKEFILE_DEMO = """\
# The course's method once, on this machine: time the Week 1 job, vectorise its slowest stage.
demo: $(STAMP)
\t$(BIN)/python -m course_lib.demo"""

_README = """\
# Measure First: your course repository

This repository holds the course book, the `course_lib` helpers and your graded
notebooks. It has no solutions and no hidden tests: those stay with the course team.

## Open it in Codespaces

1. On GitHub, press **Code**, then **Codespaces**, then **Create codespace**.
2. Wait for the set-up to finish. It runs `make venv`, which installs the pinned
   environment (`requirements.lock`) into `.venv` (a few minutes the first time).
3. JupyterLab starts on port 8888 (see the **Ports** tab), or open a notebook in VS Code
   and pick the `.venv` Python as its kernel.

Working on your own machine instead: you need Python 3.11 and `make`; run `make venv`,
then `.venv/bin/jupyter lab`.

## Your graded notebooks

{listed}

Open one, answer in the cells marked `YOUR CODE HERE`, and leave the other cells as they
are: the locked cells are put back from the course's copy when it is graded.

## Check your work

```bash
.venv/bin/course check assignments/{first}/{first}.ipynb
```

This runs the notebook as it is, in a fresh kernel, and prints one line per graded
cell: `PASS` or `FAIL` with the points of its visible tests, and `----` for points that
only hidden tests award. It exits with 0 when every visible test passes, 1 otherwise.
Save the notebook first: it checks the file, not what is open in your editor.

## How it is graded, in short

- Every notebook is run from top to bottom in a fresh kernel, as `course check` does,
  then with the hidden tests too. A cell that raises or writes to stderr scores zero.
- Correctness comes first: your results must be identical to the provided version's
  (same type, shape, dtype, index and values) before any speed is measured.
- Speed is measured as a ratio against the provided version, side by side on the same
  machine in the same run, on inputs your code has not seen, so the grade does not
  depend on how fast the grading machine is. Partial credit grows with the speed-up.
- Passing the visible tests does not guarantee the hidden ones pass: test your code on
  inputs of your own too.

## The book

`book/` has one chapter per week. `make book` builds it into `_build/html`.
"""


def _check_source(root: Path) -> None:
    if not (root / "assignments").is_dir():
        raise CourseError(f"{root} is not a course repository (no assignments/ in it)")
    for notebook in sorted((root / "assignments").rglob("*.ipynb")):
        text = notebook.read_text(encoding="utf-8", errors="replace")
        found = [marker for marker in _MARKERS if marker in text]
        if found:
            # a source notebook copied into assignments/ by hand would hand out its solutions
            raise CourseError(f"{notebook.relative_to(root)} holds {found[0]!r}: not a released notebook "
                              "(run `course release` to regenerate assignments/)")


def _prepare_destination(root: Path, dest: Path, force: bool) -> None:
    if dest == root or dest.is_relative_to(root) or root.is_relative_to(dest):
        raise CourseError(f"{dest} is inside the course repository or holds it; write the student "
                          "repository somewhere else")
    if dest.exists() and not dest.is_dir():
        raise CourseError(f"{dest} exists and is not a folder")
    if dest.is_dir() and any(dest.iterdir()):
        if not force:
            raise CourseError(f"{dest} exists and is not empty; pass --force to replace what it holds")
        for entry in dest.iterdir():
            # .git stays so that a regenerated repository's history goes on
            if entry.name == ".git":
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    dest.mkdir(parents=True, exist_ok=True)


def _targets(block: str) -> list[str]:
    targets = []
    for line in block.splitlines():
        if line.startswith("\t") or _VARIABLE.match(line):
            continue
        match = _RULE.match(line)
        if match:
            targets.extend(match.group(1).split())
    return targets


def _git_commit(dest: Path) -> None:
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=dest, capture_output=True, text=True)

    if shutil.which("git") is None:
        raise CourseError("--git needs the git command, which is not installed")
    outcome = git("init", "-q")
    if outcome.returncode != 0:
        raise CourseError(f"git init failed in {dest}: {outcome.stderr.strip()}")
    git("add", "-A")
    if not git("status", "--porcelain").stdout.strip():
        return  # regenerated, and nothing changed
    # A machine without a git identity still gets its commit, under the course's name.
    identity = [] if git("config", "user.email").stdout.strip() else [
        "-c", "user.name=Measure First", "-c", "user.email=course@measure-first.invalid"]
    outcome = git(*identity, "commit", "-q", "-m", "Measure First: student repository")
    if outcome.returncode != 0:
        raise CourseError(f"git commit failed in {dest}: {outcome.stderr.strip()}")
