"""Writing speed-graded assignments: a skeleton, calibration, release validation, a self-test.

The instructor's side of ``course new``, ``course calibrate``, ``course selftest`` and the
check that ``course release`` makes before it writes ``assignments/``. Everything measures
through the same path as a stored grade: the solution is graded by
:func:`course_lib.grader.nbgrading.grade` into a throw-away grading folder, or its performance
cells are run by :func:`course_lib.grader.verification.verify_notebook` outside any kernel,
as the out-of-kernel verdict of every submission is.

- :func:`new_assignment` writes ``solutions/NAME/NAME.ipynb``: the locked setup cell, one
  answer cell, one correctness cell and one speed cell, with nbgrader metadata, gradable as is;
- :func:`thresholds` reads a performance cell's thresholds from its source (``at_least=``,
  ``full_at=``, ``zero_at=``, a memory limit, ``max_exponent=``);
- :func:`calibrate` measures the solution's performance cells ``runs`` times on a quiet
  machine and ``runs`` times beside one CPU-bound competitor; :func:`format_calibration`
  prints them next to the thresholds, with the margin left and suggested thresholds;
- :func:`selftest` grades the reference, the untouched release and the instructor's variants
  (``tests/variants/NAME.py``) and checks each against its expected scores;
  :func:`validate_release` is the short form ``course release`` runs.

Examples
--------
>>> [(t.helper, t.values["at_least"]) for t in thresholds(
...     "assert_speedup(f, g, make_args=lambda: (1,), at_least=10, budget=0.5)")]
[('assert_speedup', 10)]
>>> _nice(3.3), _nice(27.0), _nice(0.42)
(3.0, 25.0, 0.4)
"""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import importlib.util
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

__all__ = [
    "PERFORMANCE_HELPERS",
    "Thresholds",
    "CellCalibration",
    "SelftestRow",
    "new_assignment",
    "thresholds",
    "solution_answers",
    "calibrate",
    "format_calibration",
    "load_variants",
    "selftest",
    "format_selftest",
    "validate_release",
    "preview_mismatches",
]

PERFORMANCE_HELPERS = ("assert_speedup", "speedup_points", "parallel_points", "assert_peak_memory_below",
                       "assert_scaling", "peak_memory_points", "scaling_points")
"""The grading helpers whose thresholds :func:`thresholds` reads."""

# Positional parameters of each helper whose value is a threshold (see course_lib.grading).
_POSITIONS = {
    "assert_speedup": {2: "make_args", 3: "at_least", 4: "budget"},
    "speedup_points": {2: "make_args", 3: "full_at", 4: "zero_at", 5: "points", 6: "budget"},
    "parallel_points": {2: "make_args", 3: "workers", 4: "full_at", 5: "zero_at", 6: "points", 7: "budget"},
    "assert_peak_memory_below": {1: "limit"},
    "assert_scaling": {2: "sizes", 3: "max_exponent"},
    "peak_memory_points": {1: "full_at", 2: "zero_at", 3: "points"},
    "scaling_points": {2: "sizes", 3: "full_at", 4: "zero_at", 5: "points"},
}
_KEYWORDS = {"at_least", "full_at", "zero_at", "points", "budget", "limit", "max_exponent", "sizes", "margin",
             "min_call_seconds", "workers", "within", "min_concurrency", "make_args"}

MARGIN = 3.0
"""The project's safety factor: full speed points at about a third of the reference's speed-up,
memory limits about three times the reference's peak."""

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*### END SOLUTION[ \t]*\n?",
                       re.DOTALL | re.MULTILINE)


# --- thresholds ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Thresholds:
    """One call of a measuring helper in a grade cell, with its arguments as written.

    ``values`` maps a parameter name to its literal value, or to the source text of an
    expression computed at run time (e.g. ``"3.0 * _CORES"``).
    """

    helper: str
    values: dict[str, object]

    def number(self, name: str) -> float | None:
        """The parameter as a number, or None when it is absent or computed at run time."""
        value = self.values.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if name in ("limit", "full_at", "zero_at") and isinstance(value, str):  # memory: "20 MB"
            from course_lib.grading._checks import _parse_bytes

            with contextlib.suppress(ValueError, TypeError):
                return float(_parse_bytes(value))
        return None

    def describe(self) -> str:
        """``at_least=10`` or ``full_at=10, zero_at=3`` or ``limit='20 MB'`` or ``max_exponent=1.5``."""
        shown = [k for k in ("at_least", "full_at", "zero_at", "limit", "max_exponent") if k in self.values]
        return ", ".join(f"{k}={self.values[k]!r}" if isinstance(self.values[k], str) and k == "limit"
                         else f"{k}={self.values[k]}" for k in shown)


def thresholds(source: str) -> list[Thresholds]:
    """Every call of a measuring helper in a cell's source, in order, with its thresholds.

    Parameters
    ----------
    source : str
        The cell's source (hidden-test markers are comments and do no harm).

    Examples
    --------
    >>> t = thresholds("speedup_points(f, g, lambda: (1,), full_at=3.0 * _CORES, zero_at=2, points=8)")[0]
    >>> t.values["full_at"], t.number("full_at"), t.number("zero_at")
    ('3.0 * _CORES', None, 2.0)
    >>> thresholds("assert_peak_memory_below(f, '20 MB', x)")[0].number("limit")
    20000000.0
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name not in PERFORMANCE_HELPERS:
            continue
        values: dict[str, object] = {}
        for index, arg in enumerate(node.args):
            if index in _POSITIONS[name]:
                values[_POSITIONS[name][index]] = _literal(arg)
        for keyword in node.keywords:
            if keyword.arg in _KEYWORDS:
                values[keyword.arg] = _literal(keyword.value)
        found.append((node.lineno, node.col_offset, Thresholds(name, values)))
    return [t for _, _, t in sorted(found, key=lambda item: item[:2])]


def preview_mismatches(source: str) -> list[str]:
    r"""Where a cell's speed preview states other thresholds than the hidden test it previews.

    A preview (:func:`course_lib.preview.preview_speedup`) repeats the graded test's
    thresholds; one left behind when the test changed would tell students a wrong verdict.

    Examples
    --------
    >>> cell = ("preview_speedup(f, f_slow, make_args=lambda: (1,), at_least=8)\n"
    ...         "assert_speedup(f, _slow, make_args=lambda: (1,), at_least=10, budget=0.5)")
    >>> preview_mismatches(cell)
    ['its preview says at_least=8, its test at_least=10']
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    problems = []
    for preview_name, helpers in (("preview_speedup", ("assert_speedup", "speedup_points")),
                                  ("preview_parallel", ("parallel_points",)),
                                  ("preview_peak_memory", ("peak_memory_points",)),
                                  ("preview_scaling", ("scaling_points",))):
        # The memory and growth previews take their thresholds where their tests do.
        where = _POSITIONS[helpers[0]] if preview_name in ("preview_peak_memory", "preview_scaling") else {}
        previews = [{**{where[i]: _literal(a) for i, a in enumerate(node.args) if i in where},
                     **{k.arg: _literal(k.value) for k in node.keywords}} for node in ast.walk(tree)
                    if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None))
                    == preview_name]
        tests = [t for t in thresholds(source) if t.helper in helpers]
        if previews and tests:
            problems += _preview_problems(previews, tests[0])
    return problems


def _preview_problems(previews: list[dict], test: Thresholds) -> list[str]:
    names = ("at_least",) if test.helper == "assert_speedup" else ("full_at", "zero_at", "points")
    problems = []
    for preview in previews:
        for name in names:
            said, graded = preview.get(name), test.values.get(name)
            # Thresholds computed when graded (week 7's per-core ones) cannot be compared here;
            # memory thresholds are compared in bytes ("20 MB" is 20_000_000).
            a, b = Thresholds(test.helper, preview).number(name), test.number(name)
            if (a is not None and b is not None and a != b) or (said is None) != (graded is None):
                problems.append(f"its preview says {name}={said}, its test {name}={graded}")
    return problems


def _literal(node: ast.AST) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.unparse(node)  # computed when graded: shown as written


# --- course new --------------------------------------------------------------------------------

def new_assignment(root: str | Path, name: str) -> Path:
    """Write ``solutions/NAME/NAME.ipynb``, a source notebook to edit into a new assignment.

    The skeleton is a complete, gradable assignment (the worked example of the instructor's
    guide): the locked setup cell importing the grading helpers first, a provided slow
    function, one answer cell, one correctness cell with visible and hidden tests, and one
    hidden speed cell keeping its own copy of the reference.

    Raises
    ------
    ValueError
        for a name that is not lower-case letters, digits and ``_`` starting with a letter
        (it becomes part of GitHub Classroom's ``NAME-STUDENT`` repository names), or when
        ``solutions/NAME`` or ``assignments/NAME`` exists already.

    Examples
    --------
    >>> import tempfile
    >>> path = new_assignment(tempfile.mkdtemp(), "week9")
    >>> path.relative_to(path.parents[2]).as_posix()
    'solutions/week9/week9.ipynb'
    """
    if not _NAME.match(name):
        raise ValueError(f"{name!r} cannot name an assignment: use lower-case letters, digits and _, "
                         "starting with a letter, at most 40 characters (no '-': GitHub Classroom "
                         "names repositories ASSIGNMENT-STUDENT)")
    root = Path(root)
    for folder in (root / "solutions" / name, root / "assignments" / name):
        if folder.exists():
            raise ValueError(f"{folder} exists already: choose another name or edit that assignment")
    target = root / "solutions" / name / f"{name}.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(_skeleton(name), target)
    return target


def _cell(kind: str, source: str, grade_id: str, *, points: float | None = None, solution: bool = False,
          locked: bool = True) -> nbformat.NotebookNode:
    grade = points is not None
    meta = {"nbgrader": {"grade": grade, "grade_id": grade_id, "locked": locked and not solution,
                         "schema_version": 3, "solution": solution, "task": False}}
    if grade:
        meta["nbgrader"]["points"] = points
    make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
    return make(source.strip("\n"), metadata=meta)


def _skeleton(name: str) -> nbformat.NotebookNode:
    cells = [
        _cell("markdown", _INTRO.format(name=name), "intro"),
        _cell("code", _SETUP, "setup"),
        nbformat.v4.new_markdown_cell(_TASK.strip("\n")),
        _cell("code", _ANSWER, "count_below", solution=True),
        _cell("code", _CORRECTNESS, "test_count_below", points=2),
        _cell("code", _SPEED, "test_count_below_speed", points=4),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


_INTRO = """
# {name}: count the values below a limit

Write `count_below(values, limit)`, the number of values strictly below `limit`. It is graded
on correctness **and on speed**: it must be at least **10 times faster** than the provided
`count_below_slow`, timed side by side on the grading machine, on inputs it has never seen.

Run `course check {name}.ipynb` before you submit: it runs the visible tests. The hidden tests,
with other inputs and the speed test, run when your notebook is graded. Do not delete, copy or
edit the read-only cells.
"""

# The setup cell: read-only, first, and importing the grading helpers before anything else, so
# they hold the genuine clocks and functions before any student code can run.
_SETUP = """
# Setup (read-only). It loads the grading helpers before any of your code runs.
from course_lib.grading import assert_same, assert_speedup
from course_lib.preview import preview_speedup
import numpy as np


def make_values(n, seed):
    \"\"\"``n`` random readings between 0 and 1 (``seed=None``: fresh ones every call).\"\"\"
    return np.random.default_rng(seed).random(n)


def count_below_slow(values, limit):
    \"\"\"How many values are below ``limit``: one Python comparison per value.\"\"\"
    count = 0
    for value in values:
        if value < limit:
            count += 1
    return count
"""

_TASK = """
## Task: count the values below a limit, fast (6 points)

`count_below_slow` compares the values one at a time in Python. Write `count_below` so that
the comparisons happen inside NumPy. It must return a Python `int`, as the slow version does.
"""

_ANSWER = """
def count_below(values, limit):
    \"\"\"The number of ``values`` strictly below ``limit``, as a Python int.\"\"\"
    ### BEGIN SOLUTION
    return int(np.count_nonzero(values < limit))
    ### END SOLUTION
"""

_CORRECTNESS = """
# Visible tests (2 points with the hidden ones below): the answer on small inputs.
assert_same(count_below(np.array([0.5, 0.1, 0.9]), 0.6), 2)
assert_same(count_below(np.array([]), 0.5), 0)
### BEGIN HIDDEN TESTS
for seed, n, limit in [(1, 1_000, 0.5), (2, 10, 0.0), (3, 5_000, 1.0), (4, 3, 0.25)]:
    values = make_values(n, seed)
    assert_same(count_below(values, limit),
                sum(1 for v in values.tolist() if v < limit))
### END HIDDEN TESTS
"""

_SPEED = """
# Hidden speed test (4 points): at least 10x faster than the provided version,
# measured side by side on fresh inputs when your notebook is graded.

# Speed preview (not graded): the hidden test's measurement, run now in this notebook;
# it prints what that test would give on this machine. It does nothing while grading.
preview_speedup(count_below, count_below_slow,
                make_args=lambda: (make_values(5_000_000, seed=None), 0.5), at_least=10)
### BEGIN HIDDEN TESTS
# Thresholds from `course calibrate`: full points at about a third of the reference
# solution's measured speed-up, and a solution at the threshold still takes >= 1 ms
# per call (10 ms safer). 5,000,000 values: with 2,000,000 the solution itself took
# 0.81 ms a call on an AMD EPYC core, under the 1 ms the grader needs.
def _count_slow(values, limit):  # the grader's own copy of count_below_slow
    count = 0
    for value in values:
        if value < limit:
            count += 1
    return count


assert_speedup(count_below, _count_slow,
               make_args=lambda: (make_values(5_000_000, seed=None), 0.5),
               at_least=10, budget=0.5)
### END HIDDEN TESTS
"""


# --- answers and submissions --------------------------------------------------------------------

def solution_answers(solution: nbformat.NotebookNode) -> dict[str, str]:
    """The answer cells of a source notebook, by grade id, with the solution markers removed.

    Examples
    --------
    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
    ...     "def f():\\n    ### BEGIN SOLUTION\\n    return 1\\n    ### END SOLUTION",
    ...     metadata={"nbgrader": {"grade_id": "f", "solution": True}})])
    >>> solution_answers(nb)
    {'f': 'def f():\\n    return 1\\n'}
    """
    return {c.metadata["nbgrader"]["grade_id"]: _SOLUTION.sub(lambda m: m.group(1), c.source)
            for c in solution.cells
            if c.metadata.get("nbgrader", {}).get("solution") and c.metadata["nbgrader"].get("grade_id")}


def _points(solution: nbformat.NotebookNode) -> dict[str, float]:
    """Every auto-graded test cell's points, by grade id (manually graded answers are left out)."""
    return {c.metadata["nbgrader"]["grade_id"]: float(c.metadata["nbgrader"].get("points", 0))
            for c in solution.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
            and not c.metadata["nbgrader"].get("solution")}


def _source_notebooks(course, assignment: str) -> dict[str, nbformat.NotebookNode]:
    return {name: nbformat.read(course.root / "solutions" / assignment / f"{name}.ipynb", as_version=4)
            for name in course.notebooks(assignment)}


# --- selftest and release validation ----------------------------------------------------------

@dataclass(frozen=True)
class SelftestRow:
    """One graded submission of :func:`selftest`: its cell scores and what was expected of it."""

    kind: str
    cells: dict[str, float]
    """Score of every auto-graded test cell, by grade id."""
    maxima: dict[str, float]
    problems: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    measured: dict[str, float] = field(default_factory=dict)
    """Speed-ups measured outside the kernel, by grade id of the speed cell."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def total(self, which: str = "total") -> float:
        """Points in ``total``, ``performance`` or ``correctness`` cells."""
        return sum(s for g, s in self.cells.items() if _group(g) == which or which == "total")


def load_variants(path: str | Path) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, object]]]:
    """Read a variants file: ``VARIANTS`` (kind -> grade id -> answer source) and ``EXPECT``.

    ``EXPECT`` (optional) maps a kind to expected scores: keys are grade ids or ``total``,
    ``performance``, ``correctness``; values a number, a ``(low, high)`` pair, or ``"full"``
    or ``"less"`` (all of, or fewer than, the reference's points). Kinds named ``slow`` and
    ``wrong`` have defaults: ``slow`` keeps every correctness point and gets no performance
    point; ``wrong`` loses some correctness points and gets no performance point.

    Raises
    ------
    ValueError
        when the file cannot be run or has no ``VARIANTS`` dict.
    """
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"_variants_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        raise ValueError(f"{path}: cannot be loaded ({type(err).__name__}: {err})") from None
    variants = getattr(module, "VARIANTS", None)
    if not isinstance(variants, dict):
        raise ValueError(f"{path}: defines no VARIANTS dict (kind -> grade id -> answer source)")
    expect = {**_DEFAULT_EXPECT, **getattr(module, "EXPECT", {})}
    return variants, {k: v for k, v in expect.items() if k in variants or k in ("reference", "untouched")}


_DEFAULT_EXPECT: dict[str, dict[str, object]] = {
    "reference": {"total": "full"},
    "untouched": {"total": 0},
    "slow": {"performance": 0, "correctness": "full"},
    "wrong": {"performance": 0, "correctness": "less"},
}


def selftest(course, assignment: str, variants: str | Path | None = None,
             kinds: tuple[str, ...] | None = None, timeout: int = 60) -> list[SelftestRow]:
    """Grade the reference, the untouched release and the variants; check their scores.

    Submissions are built from the release of ``assignment`` (its answer cells filled from
    the solution, or from a variant), graded with :func:`course_lib.grader.nbgrading.grade`
    into a temporary grading folder (the real one is not touched), and compared with what
    :func:`load_variants` says to expect.

    Parameters
    ----------
    course : Course
        The course (only its root is used).
    variants : path, optional
        The variants file (default ``tests/variants/ASSIGNMENT.py`` when it exists).
    kinds : tuple of str, optional
        Grade only these submissions (e.g. ``("reference", "untouched")``).

    Raises
    ------
    CourseError
        for an unknown assignment or an unreadable variants file.
    """
    from course_lib.grader import nbgrading

    sources = _source_notebooks(course, assignment)
    variant_answers, expect = {}, dict(_DEFAULT_EXPECT)
    path = Path(variants) if variants else course.root / "tests" / "variants" / f"{assignment}.py"
    if variants and not path.is_file():
        raise nbgrading.CourseError(f"variants file not found: {path}")
    if path.is_file():
        try:
            variant_answers, expect = load_variants(path)
        except ValueError as err:
            raise nbgrading.CourseError(str(err)) from None
    answers = {name: solution_answers(nb) for name, nb in sources.items()}
    known = set().union(*answers.values())
    for kind, cells in variant_answers.items():
        unknown = set(cells) - known
        if unknown:
            raise nbgrading.CourseError(f"{path}: variant {kind!r} names cells that are not answer cells: "
                                        f"{', '.join(sorted(unknown))}")
    wanted = ("reference", "untouched", *variant_answers)
    wanted = tuple(k for k in wanted if kinds is None or k in kinds)
    maxima = {g: p for nb in sources.values() for g, p in _points(nb).items()}
    with tempfile.TemporaryDirectory(prefix=f"course-selftest-{assignment}-") as tmp:
        scratch = nbgrading.Course.locate(root=course.root, grading_dir=Path(tmp) / "grading", timeout=timeout)
        released = _released(scratch, assignment)
        folder = Path(tmp) / "submissions"
        for kind in wanted:
            for name, nb in released.items():
                if kind == "untouched":
                    made = copy.deepcopy(nb)
                else:
                    made = _answered(nb, {**answers[name], **variant_answers.get(kind, {})})
                target = folder / kind / assignment / f"{name}.ipynb"
                target.parent.mkdir(parents=True, exist_ok=True)
                nbformat.write(made, target)
        results = nbgrading.grade(scratch, folder, [assignment], progress=False, force=True)
    reference = None
    rows = []
    for kind in wanted:
        result = next((r for r in results if r.student == kind), None)
        cells = {g: float(result.cell_scores.get(g, 0.0)) if result else 0.0 for g in maxima}
        flags = tuple(f.label for f in result.flags) if result else ("not graded",)
        row = SelftestRow(kind, cells, maxima, (), flags, dict(result.speedups) if result else {})
        if kind == "reference":
            reference = row
        rows.append(row)
    return [SelftestRow(r.kind, r.cells, r.maxima, tuple(_unexpected(r, expect.get(r.kind, {}), reference)),
                        r.flags, r.measured) for r in rows]


def validate_release(course, assignment: str, timeout: int = 60) -> list[str]:
    """Why ``assignment`` must not be released, or ``[]``: what ``course release`` checks first.

    The solution must get full marks and the untouched release no performance point, both
    graded through the real path into a temporary grading folder. Cheap when nothing changed:
    a passing check is remembered by a digest of the assignment's source folder.
    """
    previews = [f"cell {c.metadata['nbgrader']['grade_id']}: {problem}"
                for nb in _source_notebooks(course, assignment).values() for c in nb.cells
                if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade_id")
                for problem in preview_mismatches(c.source)]
    if previews:
        return previews
    digest = _source_digest(course.root, assignment)
    stamp = _validated_dir() / f"{assignment}-{digest}"
    if stamp.is_file():
        return []
    rows = selftest(course, assignment, variants=None, kinds=("reference", "untouched"), timeout=timeout)
    problems = []
    for row in rows:
        if row.kind == "reference":
            lost = [f"{g} {row.cells[g]:g}/{row.maxima[g]:g}" for g in row.cells if row.cells[g] < row.maxima[g]]
            if lost:
                problems.append(f"the solution does not get full marks: {', '.join(lost)}"
                                + (f" (flags: {', '.join(row.flags)})" if row.flags else ""))
        elif row.kind == "untouched":
            earned = [f"{g} {s:g}/{row.maxima[g]:g}" for g, s in row.cells.items()
                      if _group(g) == "performance" and s > 0]
            if earned:
                problems.append(f"the untouched release earns performance points: {', '.join(earned)}")
    if not problems:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps({"assignment": assignment, "digest": digest}), encoding="utf-8")
    return problems


def format_selftest(assignment: str, rows: list[SelftestRow]) -> str:
    """A table: one line per submission, points per cell, then OK or what was unexpected."""
    cells = list(rows[0].maxima) if rows else []
    header = ["submission", *cells, "total", "verdict"]
    lines = [header, ["(max)", *(f"{rows[0].maxima[g]:g}" for g in cells),
                      f"{sum(rows[0].maxima.values()):g}", ""]] if rows else [header]
    for row in rows:
        verdict = "ok" if row.ok else "UNEXPECTED: " + "; ".join(row.problems)
        lines.append([row.kind, *(f"{row.cells[g]:.3g}" for g in cells), f"{row.total():.3g}", verdict])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    text = ["  ".join(x.ljust(w) for x, w in zip(line, widths)) + "  " + line[-1] for line in lines]
    return f"Self-test of {assignment} (graded through course grade in a temporary folder):\n" + "\n".join(
        t.rstrip() for t in text)


def _group(grade_id: str) -> str:
    from course_lib.grader.verification import is_performance_cell

    return "performance" if is_performance_cell(grade_id) else "correctness"


def _unexpected(row: SelftestRow, expected: dict[str, object], reference: SelftestRow | None) -> Iterator[str]:
    for key, want in expected.items():
        if key in ("total", "performance", "correctness"):
            got = row.total(key)
            top = sum(m for g, m in row.maxima.items() if key == "total" or _group(g) == key)
            ref = reference.total(key) if reference else top
        elif key in row.cells:
            got, top = row.cells[key], row.maxima[key]
            ref = reference.cells[key] if reference else top
        else:
            yield f"EXPECT names {key!r}, not a test cell"
            continue
        if want == "full":
            if not math.isclose(got, top, abs_tol=1e-6):
                yield f"{key} {_fmt_points(got)} of {top:g} (expected all)"
        elif want == "less":
            if not got < ref - 1e-6:
                yield f"{key} {_fmt_points(got)} (expected less than the reference's {_fmt_points(ref)})"
        else:
            low, high = (want, want) if isinstance(want, (int, float)) else want
            if not low - 1e-6 <= got <= high + 1e-6:
                yield f"{key} {_fmt_points(got)} (expected {low:g}" + ("" if low == high else f" to {high:g}") + ")"


def _fmt_points(value: float) -> str:
    """Points to two decimals, so that 15.97 of 16 never reads as 16 of 16.

    >>> _fmt_points(15.97), _fmt_points(16.0), _fmt_points(2.912)
    ('15.97', '16', '2.91')
    """
    return f"{round(value, 2):g}"


def _answered(released: nbformat.NotebookNode, answers: dict[str, str]) -> nbformat.NotebookNode:
    from course_lib.grader._submissions import answered

    return answered(released, answers)


def _released(course, assignment: str) -> dict[str, nbformat.NotebookNode]:
    """The student version as ``course grade`` makes it (into the grading folder's release/)."""
    from course_lib.grader import nbgrading

    course.grading_dir.mkdir(parents=True, exist_ok=True)  # nbgrader creates the gradebook, not its folder
    nbgrading._sync_assignment(course, assignment)
    folder = course.grading_dir / "release" / assignment
    return {name: nbformat.read(folder / f"{name}.ipynb", as_version=4) for name in course.notebooks(assignment)}


def _source_digest(root: Path, assignment: str) -> str:
    h = hashlib.sha256()
    for path in sorted((root / "solutions" / assignment).rglob("*")):
        if path.is_file() and ".ipynb_checkpoints" not in path.parts:
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    config = root / "nbgrader_config.py"
    if config.is_file():
        h.update(config.read_bytes())
    return h.hexdigest()[:20]


def _validated_dir() -> Path:
    # Outside the repository, so that a copy of the course (a test's temporary folder) with the
    # same sources reuses the check; COURSE_CACHE_DIR moves it.
    base = os.environ.get("COURSE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "measure-first")
    return Path(base) / "validated"


# --- calibration ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class CellCalibration:
    """What :func:`calibrate` measured for one performance cell of the solution."""

    grade_id: str
    kind: str
    """``speed``, ``memory`` or ``scaling``."""
    thresholds: tuple[Thresholds, ...]
    quiet: tuple[float, ...] = ()
    """Speed-ups, peak traced bytes or exponents measured on the quiet machine, one per run."""
    busy: tuple[float, ...] = ()
    """The same beside one CPU-bound competitor."""
    reference_seconds: tuple[float, ...] = ()
    """The reference's median time per call (speed cells), one per run, quiet and busy."""
    solution_seconds: tuple[float, ...] = ()
    """The solution's own median time per call (speed cells), one per run, quiet and busy."""
    problems: tuple[str, ...] = field(default=())
    """Runs where the cell was not passed or not measured, with the grader's reason."""

    @property
    def unstable(self) -> bool:
        """A speed cell whose solution's own calls are under a millisecond: no threshold from it."""
        return (self.kind == "speed" and bool(self.solution_seconds)
                and statistics.median(self.solution_seconds) < _MIN_CALL)


def calibrate(course, assignment: str, runs: int = 3, busy: bool = True,
              log: Callable[[str], None] | None = None) -> list[CellCalibration]:
    """Measure the solution's speed, memory and scaling cells as the grader measures submissions.

    Each run is :func:`course_lib.grader.verification.verify_notebook` with the solution
    notebook standing in for the autograded submission: the solution's functions run in a
    fresh student worker, the hidden tests in the verifier, exactly as for a student.
    ``runs`` runs on the machine as it is, then (``busy=True``) ``runs`` more while one
    CPU-bound process started here competes for a core.

    Raises
    ------
    CourseError
        for an unknown assignment or one without performance cells.
    """
    from course_lib.grader import nbgrading
    from course_lib.grader.verification import is_performance_cell

    if runs < 1:
        raise nbgrading.CourseError(f"--runs must be at least 1, got {runs}")
    sources = _source_notebooks(course, assignment)
    cells = {}
    for name, nb in sources.items():
        for c in nb.cells:
            grade_id = c.metadata.get("nbgrader", {}).get("grade_id")
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade") and is_performance_cell(grade_id):
                cells[grade_id] = (name, tuple(thresholds(c.source)))
    if not cells:
        raise nbgrading.CourseError(f"{assignment} has no speed, memory or scaling cell (grade ids ending "
                                    "_speed, _memory, _scaling) to calibrate")
    measured: dict[str, dict[str, list]] = {g: {"quiet": [], "busy": [], "seconds": [], "solution": [],
                                                "problems": []} for g in cells}
    conditions = [("quiet", False)] + ([("busy", True)] if busy else [])
    for condition, competing in conditions:
        with _competitor(competing):
            for run in range(runs):
                if log:
                    log(f"{condition} run {run + 1} of {runs} ...")
                for name in sorted({n for n, _ in cells.values()}):
                    _measure_once(course, assignment, name, measured, condition)
    return [CellCalibration(g, _kind(g), cells[g][1], tuple(m["quiet"]), tuple(m["busy"]), tuple(m["seconds"]),
                            tuple(m["solution"]), tuple(m["problems"])) for g, m in measured.items()]


def _measure_once(course, assignment: str, name: str, measured: dict, condition: str) -> None:
    from course_lib.grader.verification import verify_notebook

    source = course.root / "solutions" / assignment / f"{name}.ipynb"
    with tempfile.TemporaryDirectory(prefix="course-calibrate-") as tmp:
        # The solution stands in for the autograded copy; in a copy of its folder, so that
        # files the notebook writes (and the worker's cwd) stay out of solutions/.
        folder = Path(tmp) / assignment
        shutil.copytree(source.parent, folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        verdicts = verify_notebook(source, folder / source.name, timeout=course.timeout,
                                   log=Path(tmp) / "verify.log", memory_limit=course.memory_limit)
    for verdict in verdicts:
        if verdict.grade_id not in measured:
            continue
        slot = measured[verdict.grade_id]
        value = _measured_value(_kind(verdict.grade_id), verdict.measured, verdict.detail)
        if value is not None:
            slot[condition].append(value)
        seconds = _reference_seconds(verdict.detail)
        if seconds is not None:
            slot["seconds"].append(seconds)
        seconds = _per_call(r"yours", verdict.detail)
        if seconds is not None:
            slot["solution"].append(seconds)
        if not verdict.conclusive or verdict.score < verdict.max_score:
            slot["problems"].append(f"{condition}: {verdict.score:g}/{verdict.max_score:g}: {verdict.detail}")


def _kind(grade_id: str) -> str:
    return grade_id.rsplit("_", 1)[-1]


def _measured_value(kind: str, measured: float | None, detail: str) -> float | None:
    """The speed-up, peak traced bytes or fitted exponent, from a verdict."""
    if kind == "speed":
        if measured is not None:
            return float(measured)
        match = re.search(r"measured outside your kernel: ([0-9.e+-]+)x", detail)
        return float(match.group(1)) if match else None
    if kind == "memory":
        # The figure graded ("counted", since issue 26) where the verdict gives one, else the traced peak.
        match = (re.search(r"counted ([0-9.]+ ?[kMGT]?i?B)", detail)
                 or re.search(r"peak traced memory ([0-9.]+ ?[kMGT]?i?B)", detail))
        if match:
            from course_lib.grading._checks import _parse_bytes

            with contextlib.suppress(ValueError, TypeError):
                return float(_parse_bytes(match.group(1)))
        return None
    match = re.search(r"exponent (-?[0-9.]+)", detail)
    return float(match.group(1)) if match else None


def _reference_seconds(detail: str) -> float | None:
    return _per_call(r"reference", detail, r" per call")


def _per_call(who: str, detail: str, after: str = "") -> float | None:
    """Seconds per call of ``who`` in a verdict's detail (``reference 418 ms per call, yours 2.4 ms``)."""
    match = re.search(who + r" ([0-9.]+) (s|ms|us|µs|ns)" + after, detail)
    if not match:
        return None
    return float(match.group(1)) * {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}[match.group(2)]


@contextlib.contextmanager
def _competitor(start: bool) -> Iterator[None]:
    """One CPU-bound process (a busy loop) for as long as the block runs."""
    if not start:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def format_calibration(assignment: str, cells: list[CellCalibration], load: str = "") -> str:
    """The calibration report: per cell the measurements, thresholds, margin and suggestions."""
    lines = [f"Calibration of {assignment}: the solution measured as the grader measures a submission"
             + (f" ({load})" if load else "") + "."]
    for cell in cells:
        lines.append("")
        if not cell.thresholds:
            # A cell named like a performance cell whose score is computed exactly (week 5's
            # deep memory: log_points on a ratio of exact byte counts) has nothing to time.
            lines.append(f"{cell.grade_id} ({cell.kind}): no measuring helper in the cell (scored exactly, "
                         f"e.g. with log_points): nothing to calibrate")
            continue
        lines.append(f"{cell.grade_id} ({cell.kind}): " + "; ".join(t.helper + "(" + t.describe() + ")"
                                                                   for t in cell.thresholds))
        for label, values in (("quiet", cell.quiet), ("busy ", cell.busy)):
            if values:
                lines.append(f"  {label}  {_spread(cell.kind, values)}  ({len(values)} runs)")
        readings = cell.quiet + cell.busy
        if len(readings) > 1:
            show = _show_value(cell.kind)
            lines.append("  every reading: " + ", ".join(show(v) for v in readings))
        if cell.solution_seconds:
            lines.append(f"  the solution's own calls: {_seconds(statistics.median(cell.solution_seconds))} per call "
                         f"(median of {len(cell.solution_seconds)} runs)")
        lines += [f"  {line}" for line in _advice(cell)]
        for problem in dict.fromkeys(cell.problems):
            lines.append(f"  warning: {problem}")
    return "\n".join(lines)


def _spread(kind: str, values: tuple[float, ...]) -> str:
    show = _show_value(kind)
    return (f"min {show(min(values))}  median {show(statistics.median(values))}  max {show(max(values))}")


def _show_value(kind: str) -> Callable[[float], str]:
    if kind == "speed":
        return lambda v: f"{v:.3g}x"
    if kind == "memory":
        from course_lib.grading._state import _fmt_bytes

        return lambda v: _fmt_bytes(int(v))
    return lambda v: f"{v:.2f}"


def _advice(cell: CellCalibration) -> list[str]:
    values = cell.quiet + cell.busy
    if not values:
        return ["not measured: see the warnings below"]
    lines = []
    if cell.unstable:
        # The rule the grader applies to the reference at the threshold, applied to the
        # solution itself: its ratios move by more than 2x under load, so no threshold can
        # be read from them.
        mine = statistics.median(cell.solution_seconds)
        return [f"UNSTABLE: the solution takes {_seconds(mine)} per call, under {_seconds(_MIN_CALL)}: ratios of "
                f"such calls move by more than 2x under load (the readings above), so no threshold is suggested",
                *_enlarge(cell.thresholds, mine, "the solution")]
    if cell.kind == "speed":
        worst = min(values)
        for t in cell.thresholds:
            name = "at_least" if t.helper == "assert_speedup" else "full_at"
            threshold = t.number(name)
            if threshold is None:
                lines.append(f"{name}={t.values.get(name)} is computed when graded: compare it with the figures above")
                continue
            lines.append(f"margin: the slowest run of the reference, {worst:.3g}x, is {worst / threshold:.2g} times "
                         f"{name}={threshold:g} (the project keeps about {MARGIN:g})")
            if cell.reference_seconds:
                at = statistics.median(cell.reference_seconds) / threshold
                lines.append(f"a solution at {name} would take {_seconds(at)} per call"
                             + ("" if at >= 0.01 else " (under 10 ms: enlarge make_args' inputs to be safe)")
                             + ("; UNDER 1 ms: the cell is refused as UnreliableMeasurement" if at < 1e-3 else ""))
        if cell.thresholds and all(t.helper == "parallel_points" for t in cell.thresholds):
            # A parallel speed-up is bounded by the workers, not by the code: a third of the
            # reference's would put full points below 1x, a pool slower than the loop.
            lines.append(f"suggested: no factor-of-{MARGIN:g} margin for a parallel speed-up, which the cores bound; "
                         f"set full_at and zero_at per worker (as the cell does) below the slowest reading here, "
                         f"{worst:.3g}x, and above the 1x of a serial answer")
            return lines
        suggested = _nice(worst / MARGIN)
        zero = [t.number("zero_at") for t in cell.thresholds if t.helper in ("speedup_points", "parallel_points")]
        text = f"suggested: full points at {suggested:g}x (a third of the slowest measured {worst:.3g}x)"
        if zero and zero[0]:
            text += f"; keep zero_at below it (now {zero[0]:g})"
        lines.append(text)
        if cell.reference_seconds and statistics.median(cell.reference_seconds) / suggested < _MIN_CALL:
            lines.append(f"warning: at {suggested:g}x a call would take under 1 ms: the cell would be refused")
            lines += _enlarge(cell.thresholds, statistics.median(cell.reference_seconds) / suggested,
                              f"a solution at {suggested:g}x")
    elif cell.kind == "memory":
        worst = max(values)
        for t in cell.thresholds:
            name = "limit" if t.helper == "assert_peak_memory_below" else "full_at"
            limit = t.number(name)
            if limit:
                said = f"the limit {t.values[name]!r}" if name == "limit" else f"full_at={t.values[name]!r}"
                lines.append(f"margin: {said} is {limit / worst:.2g} times the "
                             f"reference's largest peak (the project keeps about {MARGIN:g})")
        from course_lib.grading._state import _fmt_bytes

        lines.append(f"suggested: limit about {_fmt_bytes(int(_nice(worst * MARGIN)))} ({MARGIN:g}x the largest peak)")
    else:
        worst = max(values)
        for t in cell.thresholds:
            allowed = t.number("max_exponent" if t.helper == "assert_scaling" else "full_at")
            if allowed is not None:
                verdict = "passes" if t.helper == "assert_scaling" else "earns full points"
                lines.append(f"margin: a measured {allowed + 0.1:.2f} {verdict}; the reference's highest is "
                             f"{worst:.2f} ({allowed + 0.1 - worst:+.2f})")
        lines.append(f"suggested: max_exponent about {math.ceil((worst + 0.4) * 10) / 10:.1f} (the reference's "
                     "highest + 0.4), below the exponent of the slow version")
    return lines


_MIN_CALL = 1e-3  # seconds: the grader refuses to time a solution at the threshold below this


def _enlarge(found: tuple[Thresholds, ...], seconds: float, who: str) -> list[str]:
    """What to do about calls too short to time: how much larger make_args' inputs must be."""
    factor, safer = math.ceil(_MIN_CALL / seconds), math.ceil(10 * _MIN_CALL / seconds)
    text = (f"to do: make the inputs make_args builds about {factor:,} times larger, so that {who} takes "
            f"1 ms per call ({safer:,} times for a safer 10 ms), if its time grows in proportion")
    sizes = [n for t in found for n in _numbers(t.values.get("make_args"))]
    if sizes:
        n = max(sizes)
        text += f": the size {n:,} in make_args would become about {n * factor:,} ({n * safer:,})"
    return [text]


def _numbers(source: object) -> list[int]:
    """Whole numbers of 10 or more written in ``source`` (a make_args lambda's text)."""
    if not isinstance(source, str):
        return []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, int) and not isinstance(node.value, bool) and node.value >= 10]


def _seconds(x: float) -> str:
    from course_lib.grading._checks import _fmt_seconds

    return _fmt_seconds(x)


def _nice(x: float) -> float:
    """``x`` rounded down to 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten."""
    if not x > 0 or not math.isfinite(x):
        return x
    scale = 10.0 ** math.floor(math.log10(x))
    steps = (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)
    return round(max(s for s in steps if s * scale <= x * (1 + 1e-9)) * scale, 12)
