"""The public repository students open in Codespaces and the book is published from.

:func:`write_student_repo` copies what a student needs from the instructor's private
repository (the book, ``course_lib`` without the instructor's ``course_lib.grader``, the
released ``assignments/``, the devcontainer, the book's Pages workflow) and writes:

- ``_config.yml`` with ``repository.url`` set to the public repository's URL, the one
  setting that the book's launch buttons, GitHub links, graded-notebook links
  (``book/_ext``) and the Pages workflow (``.github/workflows/book.yml``) all read;
- a lean environment: ``pyproject.toml`` whose dependencies are the course's ``student``
  extra, and ``requirements.lock`` pinning only that extra and what it needs (from the
  course's lock, resolved through the installed packages' metadata); the book's build
  tools are pinned apart in ``requirements-book.lock``, which only ``make book`` installs;
- a ``README.md`` that says how to start, check and submit, and how each week is graded,
  generated from the source notebooks (which cells are all-or-nothing, which give partial
  credit), so that it cannot drift from them;
- a ``Makefile`` that keeps only the targets that work without the instructor's files.

Nothing else is copied: no ``solutions/`` (solutions and hidden tests), no ``grading/``,
no ``examples/``, no ``tests/``, no ``nbgrader_config.py``, no ``course_lib/grader``.
``course check`` (:mod:`course_lib.check`) needs none of them.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import shutil
import subprocess
import tomllib
from collections.abc import Sequence
from pathlib import Path

import nbformat
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from course_lib.check import _has_code  # the check students run decides what a hidden test is
from course_lib.grader.common import CourseError

__all__ = ["COPIED", "INSTRUCTOR_PAGES", "without_pages", "MAKE_TARGETS", "write_student_repo", "student_readme", "student_makefile",
           "student_pyproject", "student_lock", "set_repository_url", "repository_url", "grading_rules"]

#: What is copied from the course root, and whether it must be there.
COPIED: tuple[tuple[str, bool], ...] = (
    ("book", True),
    ("_config.yml", True),
    ("_toc.yml", True),
    ("binder", False),
    ("course_lib", True),
    ("assignments", True),
    (".devcontainer", True),
    (".github/workflows/book.yml", True),
    (".gitignore", False),
)

#: Book pages for instructors only (how hidden tests are written): left out of the student
#: copy and of its table of contents.
INSTRUCTOR_PAGES: tuple[str, ...] = ("book/instructors",)

#: Targets of the instructor's Makefile kept as they are; ``demo`` is rewritten (the
#: instructor's also grades the sample submissions) and ``test`` dropped (it runs the
#: instructor's suite).
MAKE_TARGETS: tuple[str, ...] = ("venv", "$(STAMP)", "book", "clean")


def write_student_repo(root: str | Path, dest: str | Path, *, url: str | None = None,
                       force: bool = False, git: bool = False) -> Path:
    """Write the student repository of the course at ``root`` into ``dest``; return ``dest``.

    Parameters
    ----------
    root : str or Path
        The instructor's course repository (the folder holding ``nbgrader_config.py``).
    dest : str or Path
        Where to write it. It must not exist or be empty, unless ``force``; it must be
        outside ``root``.
    url : str, optional
        The public repository it will be pushed to, ``https://github.com/ORG/REPO``: the
        book is published from there and its links point there. Default: the
        ``repository.url`` of the course's ``_config.yml``.
    force : bool
        Replace whatever ``dest`` holds, except a ``.git`` folder, so that an existing
        student repository can be regenerated and the difference committed.
    git : bool
        ``git init`` the result and commit everything in it.

    Raises
    ------
    CourseError
        if ``dest`` is not empty (and not ``force``), lies inside ``root``, or a required
        part is missing from ``root``, a released notebook still holds solution or
        hidden-test markers, or ``url`` is not a GitHub repository's URL.

    Examples
    --------
    >>> write_student_repo("/no/such/course", "/tmp/anywhere")
    Traceback (most recent call last):
    ...
    course_lib.grader.common.CourseError: /no/such/course is not a course repository (no assignments/ in it)
    """
    root = Path(root).expanduser().resolve()
    dest = Path(dest).expanduser().resolve()
    _check_source(root)
    config = (root / "_config.yml").read_text(encoding="utf-8") if (root / "_config.yml").is_file() else ""
    url = _check_url(url if url is not None else repository_url(config))
    pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    lock = (root / "requirements.lock").read_text(encoding="utf-8")
    student_deps = _student_extra(pyproject)
    pinned = student_lock(lock, student_deps)  # before anything is written: it may fail
    _prepare_destination(root, dest, force)
    for name, required in COPIED:
        source = root / name
        if not source.exists():
            if required:
                raise CourseError(f"{root} has no {name}: cannot write the student repository")
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=_ignored, dirs_exist_ok=True)
        else:
            shutil.copy2(source, dest / name)
    for page in INSTRUCTOR_PAGES:
        (dest / f"{page}.md").unlink(missing_ok=True)
    toc = dest / "_toc.yml"
    toc.write_text(without_pages(toc.read_text(encoding="utf-8"), INSTRUCTOR_PAGES), encoding="utf-8")
    (dest / "_config.yml").write_text(set_repository_url(config, url), encoding="utf-8")
    (dest / "pyproject.toml").write_text(student_pyproject(pyproject), encoding="utf-8")
    (dest / "requirements.lock").write_text(pinned, encoding="utf-8")
    (dest / "requirements-book.lock").write_text(_BOOK_LOCK_HEAD + lock, encoding="utf-8")
    weeks = sorted(p.name for p in (dest / "assignments").iterdir() if p.is_dir())
    rules = {week: grading_rules(root / "solutions" / week / f"{week}.ipynb") for week in weeks}
    (dest / "README.md").write_text(student_readme(weeks, url=url, rules=rules), encoding="utf-8")
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    (dest / "Makefile").write_text(student_makefile(makefile), encoding="utf-8")
    if git:
        _git_commit(dest)
    return dest


def without_pages(toc: str, pages: Sequence[str]) -> str:
    r"""``_toc.yml`` without the entries of ``pages``.

    Examples
    --------
    >>> without_pages("chapters:\n  - file: book/a\n  - file: book/instructors\n", ["book/instructors"])
    'chapters:\n  - file: book/a\n'
    """
    drop = {f"- file: {page}" for page in pages}
    return "".join(line for line in toc.splitlines(keepends=True) if line.strip() not in drop)


def repository_url(config: str) -> str:
    r"""The ``repository.url`` of a Jupyter Book ``_config.yml`` text ("" when it has none).

    Examples
    --------
    >>> repository_url("title: x\nrepository:\n  url: https://github.com/o/r  # public\n")
    'https://github.com/o/r'
    """
    match = _REPOSITORY_URL.search(config)
    return match.group(2).strip().strip("\"'") if match else ""


def set_repository_url(config: str, url: str) -> str:
    r"""``config`` (a ``_config.yml`` text) with ``repository.url`` set to ``url``, the rest as is.

    Raises
    ------
    CourseError
        if the text has no ``repository:`` section with a ``url:`` in it.

    Examples
    --------
    >>> print(set_repository_url("repository:\n  url: https://github.com/a/b\n  branch: main\n",
    ...                          "https://github.com/org/pub"))
    repository:
      url: https://github.com/org/pub
      branch: main
    <BLANKLINE>
    """
    if not _REPOSITORY_URL.search(config):
        raise CourseError("_config.yml has no repository: url: setting to point at the public repository")
    return _REPOSITORY_URL.sub(lambda m: m.group(1) + url, config, count=1)


def student_pyproject(text: str) -> str:
    r"""The course's ``pyproject.toml`` with its ``student`` extra as the dependencies.

    Raises
    ------
    CourseError
        if it has no ``student`` optional-dependency set.

    Examples
    --------
    >>> text = 'dependencies = [\n    "nbgrader",\n]\n[project.optional-dependencies]\nstudent = ["numpy"]\n'
    >>> print(student_pyproject(text).splitlines()[0:3])
    ['# the student environment: the course\'s "student" extra (see `course student-repo`)', 'dependencies = [', '    "numpy",']
    """
    deps = _student_extra(text)
    block = "\n".join(['# the student environment: the course\'s "student" extra (see `course student-repo`)',
                       "dependencies = [", *(f"    {json.dumps(d)}," for d in deps), "]"])
    new, count = re.subn(r"^dependencies\s*=\s*\[.*?^\]", lambda _: block, text, count=1,
                         flags=re.MULTILINE | re.DOTALL)
    if count != 1:
        raise CourseError("pyproject.toml has no 'dependencies = [...]' list to replace")
    return new


def student_lock(lock: str, requirements: Sequence[str]) -> str:
    r"""The lines of ``lock`` that pin ``requirements`` and everything they need, recursively.

    What each package needs is read from the metadata of the installed distributions (this
    environment was installed from ``lock``), with environment markers evaluated for this
    platform and only the extras asked for.

    Raises
    ------
    CourseError
        if a needed package is not installed here or not pinned in ``lock``.

    Examples
    --------
    >>> print(student_lock("numpy==2.0.0\nnbgrader==0.9.6\n", ["numpy"]), end="")
    # Pinned from the course's requirements.lock: the "student" extra and what it needs.
    numpy==2.0.0
    """
    pins = {}
    for line in lock.splitlines():
        name = line.split("==", 1)[0].strip()
        if "==" in line and not line.lstrip().startswith("#"):
            pins[canonicalize_name(name)] = line.strip()
    needed: set[str] = set()
    todo = [(Requirement(r), "") for r in requirements]
    seen: set[tuple[str, str]] = set()
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        for wanted in [""] + sorted(req.extras):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            if name not in pins:
                raise CourseError(f"{req.name} is needed by the student environment but not pinned in "
                                  "requirements.lock")
            needed.add(name)
            try:
                requires = importlib.metadata.requires(req.name) or []
            except importlib.metadata.PackageNotFoundError:
                raise CourseError(f"{req.name} is not installed here: run `make venv`, then write the "
                                  "student repository again") from None
            todo += [(Requirement(r), wanted) for r in requires]
    return _STUDENT_LOCK_HEAD + "".join(pins[n] + "\n" for n in sorted(needed))


def grading_rules(source: str | Path) -> list[dict]:
    """How each graded cell of a source notebook scores, for the student README.

    One dict per grade cell: ``grade_id``, ``part`` (its ``## Part N`` or ``## Task N`` heading, or ""),
    ``points``, ``hidden`` (no visible test code), ``partial`` (its last statement returns
    the points, as ``speedup_points`` does, so it scores in between; every other cell
    scores all or nothing), ``says``: its leading comment, which students see too, and
    ``manual``: a written answer that the instructor marks by hand (a markdown cell with
    nbgrader's ``grade`` and ``solution`` both set), which has no test at all.

    Examples
    --------
    >>> grading_rules("/no/such.ipynb")
    []
    """
    source = Path(source)
    if not source.is_file():
        return []
    nb = nbformat.read(source, as_version=4)
    rules, part = [], ""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown":
            match = re.search(r"^#{1,4}\s*((?:Part|Task)\s+\d+\b[^\n]*)", cell.source, re.MULTILINE)
            part = match.group(1).strip() if match else part
        if meta.get("grade") and meta.get("solution"):
            rules.append({"grade_id": meta["grade_id"], "part": part, "points": float(meta.get("points", 0)),
                          "hidden": False, "partial": False, "says": "", "manual": True})
        if not meta.get("grade") or meta.get("solution") or cell.cell_type != "code":
            continue
        public = cell.source.split("### BEGIN HIDDEN TESTS")[0]
        rules.append({"grade_id": meta["grade_id"], "part": part, "points": float(meta.get("points", 0)),
                      "hidden": not _has_code(public), "partial": _returns_points(cell.source),
                      "says": _leading_comment(public), "manual": False})
    return rules


def student_readme(assignments: list[str], *, url: str = "", rules: dict[str, list[dict]] | None = None) -> str:
    """The student repository's ``README.md``, naming each assignment in ``assignments``.

    ``rules`` maps an assignment to its :func:`grading_rules`, from which the section on
    how each week is graded is written.

    Examples
    --------
    >>> text = student_readme(["week1", "week2"])
    >>> "course check week1.ipynb" in text, "git push" in text
    (True, True)
    """
    listed = "\n".join(f"- `assignments/{name}/{name}.ipynb`" for name in assignments) or "- (none yet)"
    first = assignments[0] if assignments else "week1"
    weeks = "\n\n".join(_week_rules(name, (rules or {}).get(name, [])) for name in assignments)
    where = f"[{url.removeprefix('https://github.com/')}]({url})" if url else "this repository"
    return _README.format(listed=listed, first=first, weeks=weeks or "(no assignments yet)", where=where,
                          check_example=_check_example(assignments, rules or {}))


def student_makefile(instructor: str) -> str:
    r"""The student ``Makefile``: the instructor's variables and :data:`MAKE_TARGETS`, and a demo.

    Blocks (paragraphs) of ``instructor`` that set variables or define a kept target are
    kept word for word, so the install recipe is the one the instructor's tests exercise;
    every other target is left out. ``book`` first installs the book's build tools
    (``requirements-book.lock``), which the students' own environment does without.

    Raises
    ------
    CourseError
        if the instructor's Makefile has no ``venv`` target (the devcontainer runs it).

    Examples
    --------
    >>> text = student_makefile("V := 1\n\nvenv: x\n\ttouch x\n\ntest:\n\tpytest\n")
    >>> "venv: x" in text, "pytest" in text
    (True, False)
    """
    kept = []
    for block in re.split(r"\n\s*\n", instructor.strip()):
        targets = _targets(block)
        if targets and set(targets) <= set(MAKE_TARGETS):
            if "book" in targets:
                block = re.sub(r"^book:\s*\$\(STAMP\)", "book: $(BOOK_STAMP)", block, flags=re.MULTILINE)
                block = _MAKEFILE_BOOK_ENV + "\n\n" + block
            kept.append(block)
        elif not targets and any(_VARIABLE.match(line) for line in block.splitlines()):
            kept.append(block)
    if not any("venv" in _targets(block) for block in kept):
        raise CourseError("the course Makefile has no 'venv' target, which the devcontainer runs")
    names = [t for t in MAKE_TARGETS if not t.startswith("$")] + ["demo"]
    return "\n\n".join([_MAKEFILE_HEAD.rstrip(), *kept, f".PHONY: {' '.join(names)}", _MAKEFILE_DEMO]) + "\n"


# --- private helpers -------------------------------------------------------------------------

# Caches and editor state are never part of a repository (and .pyc files would carry the
# instructor's paths); course_lib.grader is the instructor's machinery.
_IGNORE_ALWAYS = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", ".DS_Store")


def _ignored(folder: str, names: list[str]) -> set[str]:
    left_out = set(_IGNORE_ALWAYS(folder, names))
    if Path(folder).name == "course_lib" and "grader" in names:
        left_out.add("grader")
    return left_out


_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\s*(\?|:|\+)?=")
_RULE = re.compile(r"^([^\s#][^:=]*?)\s*:(?!=)")
# `repository:` at the top level, then its first indented `url:` (the comment after it kept out)
_REPOSITORY_URL = re.compile(r"(^repository:[ \t]*\n(?:[ \t]+.*\n)*?[ \t]+url:[ \t]*)([^\s#]*)", re.MULTILINE)
_GITHUB_URL = re.compile(r"https://github\.com/[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+")

_MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")

_STUDENT_LOCK_HEAD = ('# Pinned from the course\'s requirements.lock: the "student" extra and what it needs.\n')
_BOOK_LOCK_HEAD = ("# The course's full requirements.lock: what `make book` (and the Pages workflow) adds\n"
                   "# to the student environment to build the book. Students do not need it.\n")

_MAKEFILE_HEAD = """\
# Measure First, student repository. Generated by `course student-repo`: change the
# course's own Makefile, not this one. `make venv` (the Codespace's install) puts the
# pinned student environment (requirements.lock) into .venv; `make book` builds the book.
"""

_MAKEFILE_BOOK_ENV = """\
# The book's build tools (Jupyter Book and its Sphinx extensions), on top of the student
# environment, only when the book is built.
BOOK_STAMP := $(VENV)/.installed-book
$(BOOK_STAMP): $(STAMP) requirements-book.lock
	$(BIN)/python -m pip install -q -r requirements-book.lock
	@touch $(BOOK_STAMP)"""

_MAKEFILE_DEMO = """\
# The course's method once, on this machine: time the Week 1 job, vectorise its slowest stage.
demo: $(STAMP)
\t$(BIN)/python -m course_lib.demo"""

_README = """\
# Measure First: your course repository

This repository holds the course book, the `course_lib` helpers and your graded
notebooks. It has no solutions and no hidden tests: those stay with the course team.
The book is published from it ({where}).

## Open it in Codespaces

1. On GitHub, press **Code**, then **Codespaces**, then **Create codespace**.
2. Wait for the set-up to finish: it runs `make venv`, which installs the pinned student
   environment (`requirements.lock`) into `.venv`.
3. JupyterLab starts by itself on port 8888: open it from the **Ports** tab (its label is
   "JupyterLab"). If it does not answer, its log is `/tmp/jupyterlab.log`; start it again
   with `sh .devcontainer/start-jupyterlab.sh`. Or open a notebook in VS Code and pick the
   `.venv` Python as its kernel.

Every terminal of the Codespace (VS Code's and JupyterLab's) has `.venv/bin` on its
`PATH`, so `course`, `python` and `jupyter` are the course's.

Working on your own machine instead: you need Python 3.11 and `make`; run `make venv`,
then `.venv/bin/jupyter lab`, and type `.venv/bin/course` where this page says `course`.

## Your graded notebooks

{listed}

Open one, answer in the cells marked `YOUR CODE HERE`, and leave the other cells as they
are: the locked cells are put back from the course's copy when it is graded.

## Check your work

In the notebook, save it (Ctrl+S), then run in a new cell:

```python
from course_lib.check import check
{check_example}
check()          # every visible test
```

Or in a terminal, in the notebook's folder:

```bash
cd assignments/{first}
course check {first}.ipynb              # or: python -m course_lib check {first}.ipynb
```

Both run the saved notebook from the top in a fresh kernel and print one line per
graded cell: `PASS` or `FAIL` with the points of its visible tests, and `----` for points
that only hidden tests award (for a speed test, with what it asks for). Under a speed
test, a *speed preview* measures your function against the provided version in that
kernel, on this machine, and says what the hidden test would give here: a preview, since
the grade is measured again when your notebook is graded. Running the speed test's cell
in the notebook prints the same preview. The terminal command exits with 0 when every
visible test passes, 1 otherwise.

## Submit

Your submission is what is in this repository on GitHub at the deadline: commit your
notebook and push it before then.

```bash
git add assignments/{first}/{first}.ipynb
git commit -m "{first}: my answers"
git push
```

At the deadline the course team's collection fetches your repository and records, by the
course's clock, the notebook `assignments/WEEK/WEEK.ipynb` it found (keep its name and place).
That is your submission, on time. If you push a changed notebook after the deadline, a later
collection sees it and records it at its own time: it is graded as late, with the course's
late penalty, and if no later collection runs it is not seen at all. The date of your commit
does not count (your own machine sets it). Check on GitHub that your commit is there
before the deadline.

## How it is graded

- Every notebook is run from top to bottom in a fresh kernel, as `course check` does,
  then with the hidden tests too. A test cell that raises or writes to stderr scores zero.
- Correctness comes first: your results must be identical to the provided version's
  (same type, shape, dtype, index and values) before any speed is measured.
- Speed is measured as a ratio against the provided version, side by side on the same
  machine in the same run, on inputs your code has not seen, so the grade does not
  depend on how fast the grading machine is. The speed-up that counts is the one the
  grader measures again outside your notebook's kernel, in a process of its own.
- Passing the visible tests does not guarantee the hidden ones pass: test your code on
  inputs of your own too.

Cell by cell, from the notebooks themselves: *all or nothing* means full points or none;
*partial credit* means the cell can give part of its points, as its text says: mostly they
grow with the measurement between the two figures given (on a log scale: the speed-up, how
many times less memory, the peak or the growth exponent).

{weeks}

## The book

`book/` has one chapter per week. `make book` builds it into `_build/html` (it installs
the book's build tools first, `requirements-book.lock`).
"""


def _check_example(assignments: list[str], rules: dict[str, list[dict]]) -> str:
    r"""The ``check(...)`` lines of the README, in the words the notebooks use for their sections.

    Examples
    --------
    >>> print(_check_example(["week1", "week3"], {"week1": [{"part": "Part 1: a"}], "week3": [{"part": "Task 2: b"}]}))
    check("part2")   # week1: the visible tests of Part 2 (and the cells before them)
    check("task2")   # week3: the visible tests of Task 2
    """
    by_word: dict[str, list[str]] = {}
    for name in assignments:
        word = next((r["part"].split()[0].lower() for r in rules.get(name, []) if r.get("part")), "")
        if word:
            by_word.setdefault(word, []).append(name)
    if not by_word:
        return 'check("part2")   # the visible tests of Part 2 (and the cells before them)'
    lines = []
    for number, (word, weeks) in enumerate(sorted(by_word.items())):
        tail = " (and the cells before them)" if number == 0 else ""
        lines.append(f'check("{word}2")   # {", ".join(weeks)}: the visible tests of {word.title()} 2{tail}')
    return "\n".join(lines)


def _week_rules(name: str, rules: list[dict]) -> str:
    if not rules:
        return f"### {name}\n\nNo graded cells found for {name}."
    lines = [f"### {name}", "", "| cell | part | points | tests | scored |", "| --- | --- | --- | --- | --- |"]
    for rule in rules:
        scored = "partial credit" if rule["partial"] else "all or nothing"
        if rule["says"] and rule["hidden"]:
            scored += ": " + rule["says"].replace("|", "\\|")
        tests = "hidden" if rule["hidden"] else "visible"
        if rule.get("manual"):
            tests, scored = "none: a written answer", "marked by hand by the instructor"
        lines.append(f"| `{rule['grade_id']}` | {rule['part'].split(':')[0] or '-'} | {rule['points']:g} | "
                     f"{tests} | {scored} |")
    total = sum(rule["points"] for rule in rules)
    partial = sum(rule["points"] for rule in rules if rule["partial"])
    manual = sum(rule["points"] for rule in rules if rule.get("manual"))
    by_hand = f"{manual:g} marked by hand" if manual else ""
    if partial:
        summary = f"{total:g} points; {partial:g} of them by partial credit" + (f", {by_hand}." if manual else ".")
    else:
        summary = f"{total:g} points" + (f"; {by_hand}, every other cell all or nothing." if manual
                                          else ", every cell all or nothing.")
    lines += ["", summary]
    return "\n".join(lines)


def _check_url(url: str) -> str:
    url = url.strip().removesuffix(".git").rstrip("/")
    if not _GITHUB_URL.fullmatch(url):
        raise CourseError(f"expected the public repository as https://github.com/ORG/REPO, got {url!r}")
    return url


def _student_extra(pyproject: str) -> list[str]:
    extras = tomllib.loads(pyproject).get("project", {}).get("optional-dependencies", {})
    if not extras.get("student"):
        raise CourseError("pyproject.toml has no 'student' optional-dependency set to install for students")
    return list(extras["student"])


def _returns_points(source: str) -> bool:
    # nbgrader gives partial credit when a test cell's value is a number: here, when its last
    # statement is an expression other than a check (assert_same, assert_speedup: they return
    # None) or a print: a helper's points, a name they were kept in, a sum of points
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    if not (body and isinstance(body[-1], ast.Expr)):
        return False
    func = getattr(body[-1].value, "func", None)
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    return not (name.startswith("assert") or name in ("print", "display"))


def _leading_comment(source: str) -> str:
    lines = []
    for line in source.strip().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = " ".join(lines)
    return re.sub(r"^(Hidden|Visible)[^:]*:\s*", "", text)


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
