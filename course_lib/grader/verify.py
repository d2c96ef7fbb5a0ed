"""Stage 3 of ``course grade``: grade every test cell again outside the student's kernel, and store that.

nbgrader ran the tests in the student's own kernel, where the student's code can reach
them. :func:`_verify` runs the verifier (:func:`course_lib.grader.verification.verify_notebook`)
on each autograded notebook and stores its verdicts in the gradebook by the rules below:
speed, memory and scaling cells get the verifier's score, and so do the test cells the
kernel does not run (:func:`~course_lib.grader.common.graded_outside`: a student's figures
checked against the grader's own measurement); other correctness tests only ever lose
points to it, and what the verifier could not decide scores zero, flagged. It also serves
the later reading of cells whose every reading was too noisy to grade on (``only=``), once
the rest of the batch is graded.

It is called as ``nbgrading._verify`` by the pipeline in :mod:`course_lib.grader.nbgrading`,
so that a test can replace it there; the pipeline hands on a :class:`Verified`.

Examples
--------
>>> _correctness_score(2.0, CellVerdict("test_x_hidden", 0.0, 2.0, "wrong"), timed_out=False)
0.0
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.api import Gradebook, MissingEntry

from course_lib.grader import _parked
from course_lib.grader._nbgrader import _nbgrader_env, _quiet_warnings
from course_lib.grader._nbpreprocessors import CELL_TIMEOUT
from course_lib.grader.common import Course, Flag, _environment, graded_outside
from course_lib.grader.execute import Executed
from course_lib.grader.verification import CellVerdict, is_performance_cell, verify_notebook

__all__ = ["Verified"]


@dataclass(frozen=True)
class Verified:
    """A submission through intake, execute and verify: what its feedback and its record need.

    What the pipeline in :mod:`course_lib.grader.nbgrading` hands from the verify stage to
    the feedback, through the later reading when :attr:`undecided` is not empty. It is
    data only, so a grading worker (a process, a Dask worker) can hand it back.

    Examples
    --------
    >>> from course_lib.grader._submissions import Submission
    >>> from course_lib.grader.execute import Executed
    >>> from course_lib.grader.intake import CopiedIn
    >>> copied = CopiedIn(Submission("ana", "week1", "nbgrader", {}), {}, {}, (), ())
    >>> done = Verified(Executed(copied, Path("ana.log"), True, ()), (Flag("undecided", ("test_speed",)),))
    >>> done.student, done.undecided
    ('ana', {'test_speed'})
    """

    executed: Executed
    flags: tuple[Flag, ...]
    """Every flag so far, from the intake on."""
    speedups: dict[str, float] = field(default_factory=dict)
    """Speed-ups measured outside the kernel, by grade id."""
    seconds: dict[str, float] = field(default_factory=dict)
    """The stage timer's readings so far (``copy in``, ``autograde``, ``verify``, ...)."""
    verifier: dict[str, float] = field(default_factory=dict)
    """The verifier's own report of where its time went."""

    @property
    def student(self) -> str:
        return self.executed.copied.submission.student

    @property
    def assignment(self) -> str:
        return self.executed.copied.submission.assignment

    @property
    def undecided(self) -> set[str]:
        """Grade ids whose every reading was too noisy to grade on: measured again later in the batch."""
        return {cell for flag in self.flags if flag.kind == "undecided" for cell in flag.cells}


def _verify(course: Course, student: str, assignment: str, log_file: Path,
            only: set[str] | None = None, profile: dict[str, float] | None = None,
            ) -> tuple[list[Flag], dict[str, float]]:
    """Grade the test cells again outside the student's kernel and store that verdict.

    For speed, memory and scaling cells, and for the test cells graded outside the kernel
    only (:func:`course_lib.grader.common.graded_outside`, which the kernel does not
    run), the out-of-kernel score replaces the in-kernel one;
    for the other tests it is stored only when it is lower (a rebound ``assert_same`` passes
    in the kernel, never outside it; a mutated input is only visible inside). One gradebook
    transaction per notebook. A stored verdict that differs by a quarter of the cell's points
    or more is flagged with both figures. A performance cell that could not be measured
    outside the kernel scores 0 (flagged ``unverified``, with the in-kernel score), so does a
    correctness test that could not be decided there because the student's answer is not
    plain data (a callable object, an instance of the student's class), and so does every
    test cell of a notebook whose check failed as a whole: the
    student's code ran beside its tests in the kernel, and may be what decided them there
    (a rebound ``assert_same``, a replaced traceback display). The verdicts are appended
    to the cells' output in the autograded notebook, so the feedback shows them.

    ``only``: a later reading of these performance cells alone (see ``nbgrading._later_reading``): a
    decided verdict replaces the stored score, an undecided one keeps the better of the two.
    """
    flags: list[Flag] = []
    speedups: dict[str, float] = {}
    for path in sorted(course.step("autograded", student, assignment).glob("*.ipynb")):
        source = course.root / "solutions" / assignment / path.name
        if not source.is_file():
            continue
        # The notebook's kernel, kept after its last cell to be the verifier's worker (a later
        # reading finds none: a fresh worker runs the cells).
        parked = _parked.take(student, assignment, path.stem)
        if parked is not None and _reads_first_calls(source):
            # A memory cell reads the first call on its input, and a kernel that ran the test
            # has called the student's code on that very input: week 5's content_cache
            # variant, which keeps its answers by the file's bytes, earned a memory point from
            # the kernel's cache (0.41 where 0 is expected). A fresh worker has called nothing;
            # nor has a kernel when the cell is graded outside it (week 5's are).
            parked.end()
            parked = None
        try:
            spent: dict[str, float] = {}
            verdicts = verify_notebook(source, path, timeout=course.timeout, log=log_file,
                                       memory_limit=course.memory_limit, sandboxed=course.sandboxed,
                                       notebook_timeout=course.notebook_timeout, only=only, profile=spent,
                                       kernel=parked)
            if profile is not None:
                for stage, seconds in spent.items():
                    profile[stage] = profile.get(stage, 0.0) + seconds
        except Exception as err:  # noqa: BLE001
            # The in-kernel scores cannot stand alone: the student's code ran beside its own
            # tests there, and may be what stopped the verifier. Zero, flagged for the instructor
            # (who can grade again once the cause is known).
            zeroed = _zero_tests(course, student, assignment, source, path.stem)
            kernel = ", ".join(f"{g} {got:g}/{top:g}" for g, (got, top) in zeroed.items())
            flags.append(Flag("unverified", tuple(zeroed), f"{path.name}: the check outside the kernel failed "
                                                           f"({type(err).__name__}: {err}); 0 points stored for "
                                                           f"its test cells (in the student's kernel: {kernel})"))
            continue
        finally:
            if parked is not None:
                parked.end()
        outside = _graded_outside(source)  # from the instructor's notebook, never the student's
        if not verdicts and (only is not None or not outside):
            continue
        speedups.update({v.grade_id: v.measured for v in verdicts if v.measured is not None})
        graded = _kernel_notebook(path)  # read once for the three questions below
        refused_in_kernel = _refused_cells(graded)
        timed_out = _cells_with_error(graded, CELL_TIMEOUT)
        stopped_by = _after_a_timeout(graded)
        with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
            for verdict in verdicts:
                try:
                    grade_ = gb.find_grade(verdict.grade_id, path.stem, assignment, student)
                except MissingEntry:
                    continue
                in_kernel = float(grade_.auto_score or 0.0)
                # A cell graded outside the kernel only is stored as a performance cell is: the
                # verifier's verdict, or 0 when it could not decide (the kernel did not run it).
                only_outside = verdict.grade_id in outside
                performance = is_performance_cell(verdict.grade_id) or only_outside
                if only is not None:
                    _store_later_reading(grade_, verdict, in_kernel, flags)
                    continue
                if performance and (verdict.refused or verdict.grade_id in refused_in_kernel):
                    # One rule on both sides (grading._speed._refuse_microseconds): a measurement either
                    # side refused is stored as refused, 0 points and flagged, never graded by the
                    # other side. It depends only on the instructor's reference and threshold.
                    grade_.auto_score = 0.0
                    grade_.needs_manual_grade = False
                    where = "outside the kernel" if verdict.refused else "in the student's kernel"
                    flags.append(Flag("unreliable", (verdict.grade_id,),
                                      f"the measurement was refused {where} (0 points stored): {verdict.detail}"))
                    continue
                if not verdict.conclusive:
                    if not performance and not verdict.not_data:
                        # A correctness test the check outside cannot run as written (it hands
                        # the student's function one of its own functions, as week 2's do) is
                        # graded in the kernel: a documented limit of the assignment's design.
                        continue
                    # A performance cell not measurable outside the kernel, or a test whose answer
                    # the student made something other than data: failed, never the kernel's word,
                    # where a rebound assert_same or a hidden traceback may have decided it.
                    grade_.auto_score = 0.0
                    grade_.needs_manual_grade = False
                    if only_outside:
                        flags.append(Flag("unverified", (verdict.grade_id,), f"0 points stored (graded outside "
                                                                           f"the kernel only): {verdict.detail}"))
                    elif in_kernel > 0:
                        flags.append(Flag("unverified", (verdict.grade_id,), f"0 points stored (in the student's "
                                                                           f"kernel {in_kernel:g}/{verdict.max_score:g}):"
                                                                           f" {verdict.detail}"))
                    continue
                if not performance:
                    earlier = stopped_by.get(verdict.grade_id)
                    stored = _correctness_score(in_kernel, verdict, verdict.grade_id in timed_out or bool(earlier))
                    if stored is None:
                        continue  # the kernel's score stands
                    if stored > in_kernel:
                        what = ("this test" if verdict.grade_id in timed_out else
                                f"an earlier cell of the notebook ({earlier})")
                        flags.append(Flag("note", (verdict.grade_id,), f"{what} ran past the time limit in "
                                                                       f"the student's kernel; outside it, this "
                                                                       f"test scored {stored:g}/"
                                                                       f"{verdict.max_score:g} (stored)"))
                        grade_.auto_score = stored
                        grade_.needs_manual_grade = False
                        continue
                grade_.auto_score = min(max(verdict.score, 0.0), verdict.max_score)  # never above the cell's points
                grade_.needs_manual_grade = False
                if verdict.undecided:
                    readings = ", ".join(f"{x:g}" for x in verdict.readings)
                    flags.append(Flag("undecided", (verdict.grade_id,),
                                      f"measured {len(verdict.readings)} times outside the kernel, each reading too "
                                      f"noisy to grade on ({readings} of {verdict.max_score:g} points): the best, "
                                      f"{verdict.score:g}, is stored; grade again with --force on a quieter machine"))
                elif not only_outside and _kernel_gave_more(in_kernel, verdict.score, verdict.max_score):
                    flags.append(Flag("verdict-differs", (verdict.grade_id,),
                                      f"in the student's kernel {in_kernel:g}/{verdict.max_score:g}, outside it "
                                      f"{verdict.score:g}/{verdict.max_score:g} (stored): {verdict.detail}"))
            if only is None:
                # A cell graded outside the kernel only that the check outside did not report on
                # has no verdict at all: 0, never the kernel's full marks for a cell it skipped.
                for grade_id in sorted(outside - {v.grade_id for v in verdicts}):
                    with contextlib.suppress(MissingEntry):
                        grade_ = gb.find_grade(grade_id, path.stem, assignment, student)
                        grade_.auto_score, grade_.needs_manual_grade = 0.0, False
                        flags.append(Flag("unverified", (grade_id,), "0 points stored: graded outside the "
                                                                    "kernel only, and the check there gave no "
                                                                    "verdict for it"))
            gb.db.commit()
        _annotate(path, verdicts, later=only is not None, outside=outside)
    return flags, speedups


def _reads_first_calls(source: Path) -> bool:
    """Whether the instructor's notebook has a memory cell (whose reading is of a first call) that
    the student's kernel runs (one graded outside the kernel only is never run there)."""
    try:
        nb = nbformat.read(str(source), as_version=4)
    except Exception:  # noqa: BLE001 - unreadable here, unreadable for the verifier: it says so
        return False
    return any(c.cell_type == "code" and (c.metadata.get("nbgrader", {}).get("grade_id") or "").endswith("_memory")
               and not graded_outside(c) for c in nb.cells)


def _kernel_gave_more(in_kernel: float, stored: float, max_score: float) -> bool:
    """Whether the kernel's score is above the stored one by a quarter of the cell's points or more.

    Only that way round is flagged ``verdict-differs``: in the kernel the student's code ran
    beside its tests and may have decided them. A kernel reading *below* the stored one is
    the kernel's short reading of a performance cell (by default the faster of two calls a
    side) slowed by a busy machine; the student already has the better verdict and there is
    nothing to review (CI flagged a fast sample so in one of its two gradings).

    Examples
    --------
    >>> _kernel_gave_more(4.0, 0.0, 4.0), _kernel_gave_more(4.0, 3.5, 4.0), _kernel_gave_more(1.0, 4.0, 4.0)
    (True, False, False)
    """
    return in_kernel - stored >= max(0.25 * max_score, 0.01)


def _correctness_score(in_kernel: float, verdict: CellVerdict, timed_out: bool) -> float | None:
    """What to store for a correctness test once it was checked outside the kernel (None: the kernel's).

    A correctness test only ever loses points to the check outside the kernel (a rebound
    ``assert_same`` passes in the kernel, never outside it), with one exception: a test
    the kernel stopped at the time limit, or one that ran after a cell the kernel stopped
    there (:func:`_after_a_timeout`), which the check outside the kernel ran to the end
    with every cell of the notebook run (each within the same limit). A busy machine slows
    every cell, and a correct answer must not lose its points to that; the check outside
    passed it out of the student's reach (flagged, for a look).

    Examples
    --------
    >>> v = CellVerdict("test_x_hidden", 2.0, 2.0, "passed")
    >>> _correctness_score(0.0, v, timed_out=True), _correctness_score(0.0, v, timed_out=False)
    (2.0, None)
    """
    score = min(max(verdict.score, 0.0), verdict.max_score)
    if timed_out and verdict.conclusive and not verdict.not_data and score > in_kernel:
        return score
    return score if score < in_kernel else None


def _store_later_reading(grade_: Any, verdict: CellVerdict, stored: float, flags: list[Flag]) -> None:
    """A later reading of a cell stored as ``undecided``: decided, it replaces; else the better one stays."""
    if not verdict.conclusive or verdict.refused:
        return  # the first grading's better reading stands
    score = min(max(verdict.score, 0.0), verdict.max_score)
    if verdict.undecided:
        readings = ", ".join(f"{x:g}" for x in (*verdict.readings, stored))
        grade_.auto_score = max(stored, score)
        flags.append(Flag("undecided", (verdict.grade_id,),
                          f"measured again later in the batch, still too noisy to grade on (readings {readings} "
                          f"of {verdict.max_score:g} points): the best, {max(stored, score):g}, is stored"))
    else:
        grade_.auto_score = score
    grade_.needs_manual_grade = False


def _zero_tests(course: Course, student: str, assignment: str, source: Path,
                notebook: str) -> dict[str, tuple[float, float]]:
    """Store 0 for every automatically graded test cell of one notebook; return what each had scored.

    The result maps each grade id to (the in-kernel score it replaced, its points).
    """
    try:
        nb = nbformat.read(source, as_version=4)
    except Exception:  # noqa: BLE001 - the instructor's own file: nothing to zero without it
        return {}
    ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if c.cell_type == "code"
           and c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")]
    zeroed = {}
    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        for grade_id in ids:
            try:
                grade_ = gb.find_grade(grade_id, notebook, assignment, student)
            except MissingEntry:
                continue
            zeroed[grade_id] = (float(grade_.auto_score or 0.0), float(grade_.max_score or 0.0))
            grade_.auto_score = 0.0
            grade_.needs_manual_grade = False
        gb.db.commit()
    return zeroed


def _kernel_notebook(path: Path) -> nbformat.NotebookNode | None:
    """The notebook as the student's kernel left it; None when it cannot be read.

    An unreadable notebook shows no error and no stopped cell, so each question asked of
    it below has the empty answer.
    """
    try:
        return nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - any damage: nothing in it can be seen
        return None


def _refused_cells(nb: nbformat.NotebookNode | None) -> set[str]:
    """Grade ids whose cell raised ``UnreliableMeasurement`` in the student's kernel."""
    return _cells_with_error(nb, "UnreliableMeasurement")


def _cells_with_error(nb: nbformat.NotebookNode | None, ename: str) -> set[str]:
    """Grade ids whose cell ended with an error named ``ename`` in the student's kernel."""
    if nb is None:
        return set()
    return {cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells if cell.cell_type == "code"
            and any(o.get("output_type") == "error" and o.get("ename") == ename
                    for o in cell.get("outputs", []))} - {None}


def _after_a_timeout(nb: nbformat.NotebookNode | None) -> dict[str, str]:
    """Each code cell that ran after a non-test cell stopped at the time limit in the student's kernel, with its id.

    Such a cell ran without what the stopped one would have defined (an answer cell that
    measures, slowed past the limit by a busy machine, leaves its table undefined), so the
    kernel's failure of a later test says nothing about the answer. A test cell stopped at
    the limit defines nothing later cells use, and counts only for itself.

    Examples
    --------
    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(metadata={"nbgrader": {"grade_id": g}})
    ...                                      for g in ("table", "test_table", "test_other")])
    >>> nb.cells[0].outputs = [nbformat.v4.new_output("error", ename=CELL_TIMEOUT, evalue="", traceback=[])]
    >>> _after_a_timeout(nb)
    {'test_table': 'table', 'test_other': 'table'}
    """
    if nb is None:
        return {}
    first, after = None, {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if first is not None and grade_id:
            after[grade_id] = first
        is_test = cell.metadata.get("nbgrader", {}).get("grade", False)
        if first is None and not is_test and any(o.get("output_type") == "error" and o.get("ename") == CELL_TIMEOUT
                                                 for o in cell.get("outputs", [])):
            first = grade_id or "a cell without an id"
    return after


def _graded_outside(source: Path) -> set[str]:
    """Grade ids of the test cells of the instructor's notebook ``source`` graded outside the kernel only."""
    nb = nbformat.read(source, as_version=4)
    return {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if graded_outside(c)}


def _annotate(path: Path, verdicts: list, later: bool = False, outside: set[str] = frozenset()) -> None:
    """Append each cell's out-of-kernel verdict to its outputs, where the feedback shows it.

    Every performance cell's and every cell's graded outside the kernel only (``outside``);
    and a correctness cell's that failed on either side, when the
    verifier could decide it: its message is the grader's own, made where the student's code
    never saw a hidden test, so the feedback shows it where the kernel's own is withheld.
    ``later``: the verdicts of a later reading in the batch (see ``nbgrading._later_reading``).
    """
    nb = nbformat.read(path, as_version=4)
    by_id = {v.grade_id: v for v in verdicts}
    for cell in nb.cells:
        verdict = by_id.get(cell.metadata.get("nbgrader", {}).get("grade_id"))
        if verdict is None or cell.cell_type != "code":
            continue
        if not is_performance_cell(verdict.grade_id) and verdict.grade_id not in outside:
            failed_in_kernel = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
            if verdict.conclusive and not verdict.refused and (verdict.score < verdict.max_score or failed_in_kernel):
                text = (f"\nChecked again by the grader outside your kernel: {verdict.score:g} / "
                        f"{verdict.max_score:g}. {verdict.detail}\n")
                cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=text))
            continue
        kept = "" if verdict.conclusive else " (it could not be checked, so the cell scores 0)"
        when = ("Measured again later in the grading run" if later else
                "Checked by the grader" if verdict.grade_id in outside else "Checked again by the grader")
        text = (f"\n{when} outside your kernel: {verdict.score:g} / "
                f"{verdict.max_score:g}{kept}. {verdict.detail}\n")
        cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=text))
    nbformat.write(nb, path)
