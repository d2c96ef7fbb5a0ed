"""Proof, through real nbgrader, that every weekly assignment grades as designed.

For each ``solutions/weekN`` there is a ``tests/variants/weekN.py`` whose ``VARIANTS``
maps a kind of submission to the source of its answer cells (by nbgrader ``grade_id``).
Four submissions are built from the committed student notebook and graded with
``course grade`` into a temporary gradebook:

``reference``
    the answer cells of the instructor's solution: full marks.
``untouched``
    the student notebook as released: zero, and the grader does not crash.
``slow``
    correct but slow: every correctness point and no performance point.
``wrong``
    fast but wrong: no performance point, and not every correctness point.

Performance cells are the test cells whose ``grade_id`` ends in ``_speed``, ``_memory``
or ``_scaling``. A second test checks that ``assignments/`` is what ``course release``
makes from ``solutions/`` today.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_lib.grader import cli
from course_lib.grader._submissions import answered, grade_id

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[1]
WEEKS = sorted(p.name for p in (ROOT / "solutions").glob("week*") if p.is_dir())
PERF_SUFFIXES = ("_speed", "_memory", "_scaling")
_SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*### END SOLUTION[ \t]*\n?",
                       re.DOTALL | re.MULTILINE)


def test_every_week_has_an_assignment_and_variants():
    assert WEEKS == [f"week{n}" for n in range(1, 9)]
    for week in WEEKS:
        assert (ROOT / "tests" / "variants" / f"{week}.py").is_file(), week
        assert (ROOT / "assignments" / week / f"{week}.ipynb").is_file(), week


@pytest.mark.parametrize("week", WEEKS)
def test_student_version_is_in_sync_with_the_solution(week, tmp_path):
    for name in ("nbgrader_config.py", "solutions"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["release", week, "--root", str(tmp_path)]) == cli.EXIT_OK
    for made in sorted((tmp_path / "assignments" / week).rglob("*")):
        if made.is_file():
            committed = ROOT / "assignments" / week / made.relative_to(tmp_path / "assignments" / week)
            assert committed.is_file(), f"{committed} missing: run `course release {week}`"
            assert committed.read_bytes() == made.read_bytes(), f"{committed} is stale: run `course release {week}`"


@pytest.mark.parametrize("week", WEEKS)
def test_assignment_grades_reference_untouched_slow_and_wrong_as_designed(week, tmp_path):
    submissions = tmp_path / "submissions"
    for student, nb in _submissions(week).items():
        path = submissions / student / week / f"{week}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    grading = tmp_path / "grading"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(["grade", week, "--submissions", str(submissions), "--grading-dir", str(grading),
                  "--no-progress"])
    cells = _cell_scores(grading, week)
    assert set(cells) == {"reference", "untouched", "slow", "wrong"}, out.getvalue()
    perf = {name for name in cells["reference"] if name.endswith(PERF_SUFFIXES)}
    assert perf, f"{week} has no performance cell"

    def total(student, names=None):
        return sum(score for name, (score, _) in cells[student].items() if names is None or name in names)

    most = sum(top for _, top in cells["reference"].values())
    correctness = set(cells["reference"]) - perf
    report = out.getvalue()
    assert total("reference") == pytest.approx(most), (cells["reference"], report)
    assert total("untouched") == 0, (cells["untouched"], report)
    assert total("slow", perf) == 0, (cells["slow"], report)
    assert total("slow", correctness) == pytest.approx(total("reference", correctness)), (cells["slow"], report)
    assert total("wrong", perf) == 0, (cells["wrong"], report)
    assert total("wrong", correctness) < total("reference", correctness), (cells["wrong"], report)


def _submissions(week: str) -> dict[str, nbformat.NotebookNode]:
    released = nbformat.read(ROOT / "assignments" / week / f"{week}.ipynb", as_version=4)
    solution = nbformat.read(ROOT / "solutions" / week / f"{week}.ipynb", as_version=4)
    answers = {grade_id(c): _strip_markers(c.source) for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution") and grade_id(c)}
    variants = _load_variants(week)
    unknown = {k: set(v) - set(answers) for k, v in variants.items() if set(v) - set(answers)}
    assert not unknown, f"variants name cells that are not answer cells: {unknown}"
    made = {"reference": answered(released, answers), "untouched": copy.deepcopy(released)}
    for kind in ("slow", "wrong"):
        made[kind] = answered(released, {**answers, **variants[kind]})
    return made


def _load_variants(week: str) -> dict[str, dict[str, str]]:
    spec = importlib.util.spec_from_file_location(f"variants_{week}", ROOT / "tests" / "variants" / f"{week}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.VARIANTS


def _strip_markers(source: str) -> str:
    return _SOLUTION.sub(lambda m: m.group(1), source)


def _cell_scores(grading: Path, week: str) -> dict[str, dict[str, tuple[float, float]]]:
    rows: dict[str, dict[str, tuple[float, float]]] = {}
    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        for submission in gb.find_assignment(week).submissions:
            rows[submission.student.id] = {
                g.name: (g.score, g.max_score) for nb in submission.notebooks for g in nb.grades
                if g.cell.cell_type == "code"}
    return rows
