"""The course's grading on top of nbgrader: release, grade a batch, and a student's self-check.

Everything here drives nbgrader's own converters (``GenerateAssignment``, ``Autograde``,
``GenerateFeedback``), its gradebook and its CSV export, configured by the repository's
``nbgrader_config.py``; the ``course`` command (:mod:`course_lib.grader.cli`) is a thin layer over it.

What this module adds to nbgrader
---------------------------------
- a batch that never stops at a bad submission: an unreadable notebook scores zero and is
  flagged, a kernel that dies is graded on what ran (see :class:`CourseExecute`), and the
  rest of the batch goes on;
- *flags* for the instructor (:class:`Flag`): unreadable notebook, grade cell put back,
  read-only cell overwritten, cell timeout, kernel died, tampering detected, unreliable
  measurement, code that reads ``NBGRADER_EXECUTION``, grading error;
- feedback without hidden-test source (:class:`HideHiddenTests`);

Each submission is graded by :func:`grade_submission`, which needs only a :class:`Course`
and a :class:`Submission`, so that a batch can later be spread over worker processes.

What the plumbing defends against, and what it does not
-------------------------------------------------------
The tests run inside the student's own kernel (that is how nbgrader works), so this layer
only makes sure that what the kernel did is graded, recorded and never lost:

- read-only cells, grade cells included, are put back from the gradebook before running
  (nbgrader), so editing a test changes nothing; a *deleted* grade cell is put back as a
  failing cell and flagged ``restored``; an edited one is flagged ``overwritten``;
- a notebook that is not valid JSON or not a notebook scores zero, is flagged and kept
  byte for byte (``submitted/.../NAME.ipynb.unreadable``); the batch goes on;
- a cell past the timeout is interrupted and scores zero (``timeout``); a kernel that dies
  (``os._exit``, a crash) or ignores the interrupt is graded on the cells that ran, the
  others score zero (``kernel-died``, ``kernel-unresponsive``), instead of nbgrader dropping
  the submission or giving unrun grade cells full marks;
- ``TamperingDetected`` and ``UnreliableMeasurement`` raised by the grading helpers are
  flagged (``tampering``, ``unreliable``);
- ``NBGRADER_EXECUTION`` is left set while grading, as nbgrader documents it (students may
  use it to skip slow exploration). A notebook is graded on what it does while graded, and
  student code that mentions the variable is flagged ``reads-NBGRADER_EXECUTION`` for a
  look. The example's hidden speed test keeps its own copy of the reference, so swapping
  the provided baseline while graded gains nothing. The scan is textual: code that builds
  the name at run time is not caught;
- feedback never shows hidden-test source, nor the frames of a traceback that quote it.

Code in the kernel can still rebind names the tests use, read hidden tests from memory or
detect grading in other ways. So after autograding, :func:`grade_submission` grades every test
cell again outside the student's kernel (:mod:`course_lib.grader.verification`): speed, memory and
scaling cells get that verdict, other tests only ever lose points to it, and a disagreement is
flagged ``verdict-differs`` with both figures. The kernel also runs under a memory limit and a
whole-notebook time limit, watched from the grader's process (``memory-limit``,
``notebook-timeout``). A finished submission is recorded under ``grading/done``; grading again
skips it while it is unchanged, so a stopped run resumes.

Examples
--------
>>> Flag("timeout", ("test_speed",)).label
'timeout:test_speed'
>>> str(Flag("malformed", detail="not valid JSON"))
'malformed'
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import html
import json
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader import utils as nbutils
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import Autograde, GenerateAssignment, GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from nbgrader.nbgraderformat import MetadataValidator
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from course_lib.grader._nbpreprocessors import (
    CELL_TIMEOUT,
    METADATA_KEY,
    CourseExecute,
    HideHiddenTests,
    RestoreMissingCells,
)
from course_lib.grader import _cores
from course_lib.grader._submissions import Submission, copy_submission, find_submissions, record_names
from course_lib.grader._text import scrub_host, writable
from course_lib.grader.sandbox import available as sandbox_available
from course_lib.grader.verification import is_performance_cell, verify_notebook

__all__ = [
    "CONFIG_FILE",
    "Course",
    "CourseError",
    "Flag",
    "SubmissionResult",
    "release",
    "grade",
    "grade_submission",
    "format_table",
    "CourseExecute",
    "RestoreMissingCells",
    "HideHiddenTests",
]

CONFIG_FILE = "nbgrader_config.py"
"""The file that marks a course repository's root and configures nbgrader."""


class CourseError(ValueError):
    """Bad input from the person running a command (missing folder, unknown assignment, ...).

    The ``course`` command prints its message on one line and exits with status 2.
    """


@dataclass(frozen=True)
class Course:
    """Where a course lives and how it grades.

    Use :meth:`locate`; it fills what is not given from the environment variables that
    ``nbgrader_config.py`` documents (``COURSE_GRADING_DIR``, ``COURSE_DB_URL``,
    ``COURSE_CELL_TIMEOUT``, ``COURSE_NOTEBOOK_TIMEOUT``, ``COURSE_MEMORY_LIMIT``; ``COURSE_ROOT``
    for the root) and then from the defaults.
    """

    root: Path
    grading_dir: Path
    db_url: str
    timeout: int
    notebook_timeout: int = 900
    memory_limit: int = 4_000_000_000
    sandboxed: bool = True
    """Run every kernel in a :class:`course_lib.grader.sandbox.Sandbox`; False flags each grade ``unsandboxed``."""

    @classmethod
    def locate(cls, root: str | Path | None = None, grading_dir: str | Path | None = None,
               db_url: str | None = None, timeout: int | None = None, notebook_timeout: int | None = None,
               memory_limit: int | None = None, sandboxed: bool = True) -> Course:
        """The course whose ``nbgrader_config.py`` is in ``root`` (default: found upwards from here).

        Raises
        ------
        CourseError
            if no ``nbgrader_config.py`` is found, or ``timeout`` is not positive.
        """
        root_path = _find_root(root or os.environ.get("COURSE_ROOT"))
        grading = Path(grading_dir or os.environ.get("COURSE_GRADING_DIR") or root_path / "grading")
        grading = grading.expanduser().resolve()
        url = _driver(db_url or os.environ.get("COURSE_DB_URL") or f"sqlite:///{grading / 'gradebook.db'}")
        seconds = int(timeout if timeout is not None else os.environ.get("COURSE_CELL_TIMEOUT") or 60)
        if seconds <= 0:
            raise CourseError(f"the cell timeout must be a positive number of seconds, got {seconds}")
        whole = int(notebook_timeout if notebook_timeout is not None
                    else os.environ.get("COURSE_NOTEBOOK_TIMEOUT") or 900)
        memory = int(memory_limit if memory_limit is not None
                     else os.environ.get("COURSE_MEMORY_LIMIT") or 4_000_000_000)
        if whole <= 0 or memory <= 0:
            raise CourseError(f"the notebook time limit and the memory limit must be positive, got "
                              f"{whole} s and {memory} bytes")
        return cls(root_path, grading, url, seconds, whole, memory, sandboxed)

    def config(self) -> Config:
        """nbgrader's configuration: ``nbgrader_config.py`` read with this course's settings."""
        with _environment(COURSE_GRADING_DIR=str(self.grading_dir), COURSE_DB_URL=self.db_url,
                          COURSE_CELL_TIMEOUT=str(self.timeout), COURSE_NOTEBOOK_TIMEOUT=str(self.notebook_timeout),
                          COURSE_MEMORY_LIMIT=str(self.memory_limit)):
            cfg = PyFileConfigLoader(CONFIG_FILE, path=str(self.root)).load_config()
        cfg.CourseExecute.sandboxed = self.sandboxed
        return cfg

    def assignments(self) -> list[str]:
        """The assignments in ``solutions/``: folders holding at least one notebook."""
        source = self.root / "solutions"
        if not source.is_dir():
            return []
        return sorted(p.name for p in source.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))

    def notebooks(self, assignment: str) -> list[str]:
        """Names (without ``.ipynb``) of the notebooks of ``assignment``.

        Raises
        ------
        CourseError
            if there is no such assignment in ``solutions/``.
        """
        known = self.assignments()
        if assignment not in known:
            hint = ", ".join(known) if known else "none"
            raise CourseError(f"unknown assignment {assignment!r} (assignments in solutions/: {hint})")
        return sorted(p.stem for p in (self.root / "solutions" / assignment).glob("*.ipynb"))

    def step(self, name: str, student: str, assignment: str) -> Path:
        """``grading/NAME/STUDENT/ASSIGNMENT`` for name in submitted, autograded, feedback."""
        return self.grading_dir / name / student / assignment


@dataclass(frozen=True)
class Flag:
    """Something about a submission an instructor should look at.

    ``kind`` is one of ``malformed``, ``no-notebook``, ``restored``, ``overwritten``,
    ``timeout``, ``kernel-died``, ``kernel-unresponsive``, ``memory-limit``, ``notebook-timeout``,
    ``tampering``, ``unreliable``, ``verdict-differs``, ``unverified``,
    ``reads-NBGRADER_EXECUTION``, ``grading-error``, ``unsandboxed``, ``refused``, ``disk-quota``,
    ``note``; ``cells`` are the grade ids concerned; ``detail`` is a sentence for the report.
    Every part is made writable as UTF-8 when the flag is made (see :mod:`course_lib.grader._text`):
    a detail may quote a student's message or file name.
    """

    kind: str
    cells: tuple[str, ...] = ()
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", writable(self.kind))
        object.__setattr__(self, "cells", tuple(writable(c) for c in self.cells))
        object.__setattr__(self, "detail", writable(self.detail))

    @property
    def label(self) -> str:
        """Short form for tables: ``kind`` or ``kind:cell,cell``."""
        return self.kind + (":" + ",".join(self.cells) if self.cells else "")

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True)
class SubmissionResult:
    """The outcome of grading one student's submission of one assignment."""

    student: str
    assignment: str
    score: float
    max_score: float
    cell_scores: dict[str, float] = field(default_factory=dict)
    flags: tuple[Flag, ...] = ()
    feedback: tuple[Path, ...] = ()
    speedups: dict[str, float] = field(default_factory=dict)
    """Speed-ups measured outside the kernel, by grade id of the speed cell."""

    @property
    def flagged(self) -> bool:
        return bool(self.flags)

    def has_flag(self, kind: str) -> bool:
        return any(flag.kind == kind for flag in self.flags)


def release(course: Course, assignment: str) -> Path:
    """Regenerate ``assignments/ASSIGNMENT`` from ``solutions/ASSIGNMENT`` (no gradebook touched).

    Returns the released folder.

    Raises
    ------
    CourseError
        for an unknown assignment, or when nbgrader cannot generate it (the message says why).
    """
    course.notebooks(assignment)  # unknown assignment -> CourseError
    cfg = course.config()
    cfg.SaveCells.enabled = False
    cfg.GenerateAssignment.no_database = True
    outcome = _run(course, GenerateAssignment, cfg, assignment, force=True)
    if not outcome["success"]:
        raise CourseError(f"could not release {assignment!r}: {_last_error(outcome)}")
    return course.root / "assignments" / assignment


def grade(course: Course, submissions: str | Path, assignments: list[str] | None = None,
          progress: bool | None = None, force: bool = False, workers: int = 1,
          scheduler: str | None = None, roster: list | None = None, due=None,
          repo_prefix: str = "") -> list[SubmissionResult]:
    """Collect, autograde and give feedback on every submission in ``submissions``.

    Writes ``grading/grades.csv`` (nbgrader's CSV export of the whole gradebook) and
    ``grading/flags.csv`` (one row per flag). ``assignments`` defaults to every assignment
    in ``solutions/`` that has submissions in the folder. ``progress``: show a tqdm bar on
    stderr (default: when there are more than 5 submissions).

    A submission whose grading finished is recorded in ``grading/done/ASSIGNMENT/STUDENT.json``
    with a digest of its notebooks and of the assignment's source; running again skips it
    while both are unchanged, so a run that was stopped resumes where it stopped, and a
    submission that was being graded when it stopped is graded again from the start.
    ``force=True`` grades everything again.

    ``workers``: grade that many submissions at a time, each in its own worker process (and
    kernel), pinned to a CPU set of its own, ``cores // workers`` CPUs (at least one), with
    BLAS, OpenMP and Numba threads limited to as many: a notebook's ``os.sched_getaffinity``
    sees only its share, and so does a test that grades parallel work; every speed-up is
    still measured inside one worker. ``scheduler``: the address of a Dask ``distributed``
    scheduler (``tcp://HOST:PORT``) whose workers grade the submissions instead, each grading
    thread pinned to its share of its machine's cores in the same way; they must see this
    course repository and the grading folder at the same paths (one machine, or a shared
    file system) and should run one thread each.

    ``roster``: :class:`course_lib.grader.roster.Student` rows whose names and e-mails go into
    the gradebook and ``grades.csv``. ``due``: the deadline (naive UTC ``datetime``) stored as
    the assignments' due date; a submission's time is its ``timestamp.txt`` (nbgrader's
    layout) or its repository's last commit (GitHub Classroom), and nbgrader's
    ``LateSubmissionPlugin`` applies the penalty. ``repo_prefix``: the GitHub Classroom
    assignment name of course-wide repositories (``DIR/PREFIX-STUDENT/assignments/...``), taken
    off their folder names to give the student ids.

    Raises
    ------
    CourseError
        for a missing submissions folder, an unknown assignment, or a folder holding no
        submission of the assignments asked for.
    """
    folder = Path(submissions)
    if not folder.is_dir():
        raise CourseError(f"submissions folder not found: {folder}")
    names = assignments or course.assignments()
    found = {name: _find(folder, name, course.notebooks(name), repo_prefix) for name in names}
    found = {name: subs for name, subs in found.items() if subs or assignments}
    if not any(found.values()):
        asked = ", ".join(names) if names else "(no assignments in solutions/)"
        raise CourseError(f"no submissions of {asked} in {folder} (expected {folder}/STUDENT/ASSIGNMENT/"
                          f"*.ipynb or GitHub Classroom's {folder}/ASSIGNMENT-STUDENT/...)")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise CourseError(f"workers must be a whole number >= 1, got {workers!r}")
    if course.sandboxed and (reason := sandbox_available()) is not None:
        raise CourseError(f"refusing to run student code without a sandbox: {reason} "
                          "(or grade with --no-sandbox: every grade is then flagged unsandboxed)")
    course.grading_dir.mkdir(parents=True, exist_ok=True)
    record_names(course.grading_dir, [s for subs in found.values() for s in subs])
    total = sum(len(subs) for subs in found.values())
    results, pending = [], []
    for name, subs in found.items():
        _sync_assignment(course, name)  # the gradebook is written by one process at a time here
        _update_gradebook(course, name, roster, due)
        _record_display_names(course, subs, roster)
        for submission in subs:
            done = None if force else _done_result(course, submission)
            if done is None:
                pending.append(submission)
            else:
                results.append(done)
    with _progress_bar(total, progress) as bar:
        bar.update(len(results))
        for result in _graded(course, pending, workers, scheduler):
            bar.set_postfix_str(f"{result.assignment}/{result.student}")
            results.append(result)
            bar.update()
    results.sort(key=lambda r: (r.assignment, r.student))
    _export(course, results, roster)
    return results


def _graded(course: Course, pending: list[Submission], workers: int, scheduler: str | None) -> Iterator[SubmissionResult]:
    """Grade ``pending`` here, on ``workers`` local processes, or on a Dask cluster; yield as done."""
    if not pending:
        return
    cpus = _cores.own_cpus()
    threads = max(1, len(cpus) // workers)
    if scheduler:
        try:
            from distributed import Client, as_completed
        except ImportError:  # pragma: no cover - a declared dependency
            raise CourseError("--scheduler needs the 'distributed' package") from None
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as err:
            raise CourseError(f"cannot reach the Dask scheduler at {scheduler}: {err}") from None
        with client:
            # threads=0: each grading thread of a Dask worker is pinned to its share of its
            # machine's cores (planned here from what the workers report) and sized to it
            plan = _cores.dask_plan(client)
            futures = client.map(_grade_safely, [course] * len(pending), pending, [0] * len(pending),
                                 cpu_plan=plan, pure=False)
            for future in as_completed(futures):
                yield future.result()
        return
    if workers == 1:
        for submission in pending:
            yield _grade_safely(course, submission, None)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed as completed

    context = multiprocessing.get_context("spawn")  # no inherited kernel or database connections
    cpu_sets = context.SimpleQueue()  # each worker takes one as it starts: its own cores // workers
    for share in _cores.shares(cpus, workers):
        cpu_sets.put(share)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_cores.pin_process,
                             initargs=(cpu_sets,)) as pool:
        futures = {pool.submit(_grade_safely, course, s, threads): s for s in pending}
        for future in completed(futures):
            try:
                yield future.result()
            except Exception as err:  # the worker process itself died
                submission = futures[future]
                yield SubmissionResult(submission.student, submission.assignment, 0.0, 0.0, {},
                                       (Flag("grading-error", (), f"the grading worker failed: {err}"),))


_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                     "NUMBA_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def _grade_safely(course: Course, submission: Submission, threads: int | None,
                  cpu_plan: dict | None = None) -> SubmissionResult:
    """:func:`grade_submission` in a worker: thread pools limited, the grader's own errors reported.

    ``threads=0`` (a Dask worker): the thread is pinned to its share of the machine's cores
    from ``cpu_plan`` (see :func:`course_lib.grader._cores.dask_plan`) and the pools sized to it.
    """
    pinned: contextlib.AbstractContextManager = contextlib.nullcontext()
    if threads == 0:
        from distributed import get_worker

        sets = (cpu_plan or {}).get(get_worker().address)
        if sets:
            pinned = _cores.pinned(sets)
            threads = len(sets[0])
        else:
            threads = max(1, len(_cores.own_cpus()) // max(1, get_worker().state.nthreads))
    if threads is not None:
        # Kernels, verifiers and student workers started from here inherit the limits.
        os.environ.update({name: str(threads) for name in _THREAD_VARIABLES})
    try:
        with pinned:
            return grade_submission(course, submission)
    except Exception as err:
        score, max_score, cells = _scores(course, submission.assignment, submission.student)
        return SubmissionResult(submission.student, submission.assignment, score, max_score, cells,
                                (Flag("grading-error", (), f"{type(err).__name__}: {err}"),))


def grade_submission(course: Course, submission: Submission) -> SubmissionResult:
    """Copy one submission into ``grading/submitted``, autograde it and write its feedback.

    The assignment must already be in the gradebook (:func:`grade` puts it there).
    Never raises for a bad submission: what went wrong is in the result's flags.
    """
    student, assignment = submission.student, submission.assignment
    done_file = _done_file(course, submission)
    done_file.unlink(missing_ok=True)  # from here until the record is rewritten, it is not graded
    flags = [Flag("note", detail=note) for note in submission.notes]
    if submission.refused:
        return _refuse(course, submission, flags)
    if not course.sandboxed:
        flags.append(Flag("unsandboxed", (), "graded with --no-sandbox: the student's code ran with "
                                              "the grader's rights"))
    speedups: dict[str, float] = {}
    readable, problems = {}, {}
    for name, path in submission.notebooks.items():
        problems[name] = _unreadable_reason(path)
        readable[name] = problems[name] is None
    copy_submission(submission, course.step("submitted", student, assignment), readable)
    _write_timestamp(submission, course.step("submitted", student, assignment))
    for name, reason in problems.items():
        if reason:
            flags.append(Flag("malformed", (), f"{name}.ipynb: {reason}"))
    missing = [n for n in course.notebooks(assignment) if n not in submission.notebooks]
    if missing:
        flags.append(Flag("no-notebook", (), "not found: " + ", ".join(f"{n}.ipynb" for n in missing)))
    for step in ("autograded", "feedback"):
        _remove(course.step(step, student, assignment))

    log_file = course.grading_dir / "logs" / assignment / f"{student}.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.write_text("", encoding="utf-8")
    if any(readable.values()):
        cfg = course.config()
        cfg.CourseExecute.kernel_log = str(log_file)
        outcome = _run(course, Autograde, cfg, assignment, student, force=True, create_student=True)
        _append_log(log_file, "autograde", outcome)
        if outcome["success"]:
            flags += _autograded_flags(course, student, assignment)
            verified, speedups = _verify(course, student, assignment, log_file)
            flags += verified
            outcome = _run(course, GenerateFeedback, course.config(), assignment, student, force=True)
            _append_log(log_file, "generate_feedback", outcome)
            if not outcome["success"]:
                flags.append(Flag("grading-error", (), "feedback: " + _last_error(outcome)))
            else:  # a page a student can read, in place of nbgrader's (course_lib.grader.feedback)
                from course_lib.grader.feedback import write_submission_feedback

                write_submission_feedback(course, student, assignment)
        else:
            flags.append(Flag("grading-error", (), _last_error(outcome)))
    else:
        _record_zero(course, assignment, student)
    feedback = _write_missing_feedback(course, student, assignment, problems, missing)
    score, max_score, cells = _scores(course, assignment, student)
    result = SubmissionResult(student, assignment, score, max_score, cells, tuple(flags), feedback,
                              speedups)
    _write_done(course, submission, result)
    return result


def _refuse(course: Course, submission: Submission, flags: list[Flag]) -> SubmissionResult:
    """A submission that is not graded at all (:attr:`Submission.refused`): 0, flagged, with feedback saying why."""
    student, assignment = submission.student, submission.assignment
    flags.append(Flag("refused", (), submission.refused))
    for step in ("submitted", "autograded", "feedback"):
        _remove(course.step(step, student, assignment))
    _record_zero(course, assignment, student)
    problems = {name: submission.refused for name in course.notebooks(assignment)}
    feedback = _write_missing_feedback(course, student, assignment, problems, [])
    score, max_score, cells = _scores(course, assignment, student)
    # No done record: the refusal is checked again on every run, so a repository put right is graded.
    return SubmissionResult(student, assignment, score, max_score, cells, tuple(flags), feedback)


def _done_file(course: Course, submission: Submission) -> Path:
    return course.grading_dir / "done" / submission.assignment / f"{submission.student}.json"


def _digest(course: Course, submission: Submission) -> str:
    """What the grade depends on: the submitted files and the assignment's source notebooks."""
    h = hashlib.sha256()
    for name, path in sorted(submission.notebooks.items()):
        h.update(name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    for source in sorted((course.root / "solutions" / submission.assignment).glob("*.ipynb")):
        h.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return h.hexdigest()


def _write_done(course: Course, submission: Submission, result: SubmissionResult) -> None:
    record = {"digest": _digest(course, submission), "student": result.student,
              "assignment": result.assignment, "score": result.score, "max_score": result.max_score,
              "cell_scores": result.cell_scores,
              "flags": [[f.kind, list(f.cells), f.detail] for f in result.flags],
              "feedback": [str(p) for p in result.feedback], "speedups": result.speedups}
    target = _done_file(course, submission)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".json.partial")
    partial.write_text(json.dumps(record, indent=1), encoding="utf-8")
    os.replace(partial, target)  # atomic: a record is either whole or absent


def _done_result(course: Course, submission: Submission) -> SubmissionResult | None:
    """The recorded result if this exact submission was fully graded before, else None."""
    try:
        record = json.loads(_done_file(course, submission).read_text(encoding="utf-8"))
        if record["digest"] != _digest(course, submission):
            return None
        flags = tuple(Flag(kind, tuple(cells), detail) for kind, cells, detail in record["flags"])
        feedback = tuple(Path(p) for p in record["feedback"])
        speedups = {str(k): float(v) for k, v in record.get("speedups", {}).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    # The scores as stored now: an instructor's manual grade given since then shows.
    score, max_score, cells = _scores(course, submission.assignment, submission.student)
    return SubmissionResult(submission.student, submission.assignment, score, max_score, cells, flags, feedback,
                            speedups)


def format_table(results: list[SubmissionResult]) -> str:
    """Students down, assignments across (``score / max``), then each student's flags."""
    assignments = sorted({r.assignment for r in results})
    students = sorted({r.student for r in results})
    by_key = {(r.student, r.assignment): r for r in results}
    header = ["student", *assignments, "flags"]
    rows = []
    for student in students:
        row, flags = [student], []
        for assignment in assignments:
            result = by_key.get((student, assignment))
            row.append("" if result is None else f"{_pts(result.score)} / {_pts(result.max_score)}")
            if result is not None:
                prefix = f"{assignment}: " if len(assignments) > 1 else ""
                flags += [prefix + f.label for f in result.flags]
        rows.append(row + ["; ".join(flags)])
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return writable("\n".join(lines))


# --- private helpers -------------------------------------------------------------------------

_TAMPERING_PREFIX = "Tampering detected:"


def _driver(url: str) -> str:
    """``postgresql://`` with the driver that is installed: SQLAlchemy 2.1 assumes psycopg 3,
    the course environment pins psycopg2."""
    if url.startswith(("postgresql://", "postgres://")):
        import importlib.util

        if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2") is not None:
            return "postgresql+psycopg2://" + url.split("://", 1)[1]
    return url


def _find_root(start: str | Path | None) -> Path:
    if start is not None:
        root = Path(start).expanduser().resolve()
        if not (root / CONFIG_FILE).is_file():
            raise CourseError(f"no {CONFIG_FILE} in {root}: not a course repository")
        return root
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIG_FILE).is_file():
            return folder
    raise CourseError(f"no {CONFIG_FILE} here or in any parent folder of {here}; run this inside the "
                      "course repository or pass --root")


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    old = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _quiet_logger() -> logging.Logger:
    # nbgrader logs every step; the course command reports results itself, so the log only
    # goes to the buffer that nbgrader's capture_log attaches.
    log = logging.getLogger("course_lib.grader.nbgrading.nbgrader")
    log.propagate = False
    log.setLevel(logging.INFO)
    return log


def _run(course: Course, converter: type, cfg: Config, assignment: str, student: str | None = None,
         **traits: object) -> dict:
    log = _quiet_logger()
    coursedir = CourseDirectory(config=cfg, log=log)
    coursedir.assignment_id = assignment
    if student is not None:
        coursedir.student_id = student
    app = converter(coursedir=coursedir, config=cfg, log=log)
    for name, value in traits.items():
        setattr(app, name, value)
    with _environment(**_nbgrader_env()), _quiet_warnings():
        return nbutils.capture_log(app)


def _append_log(path: Path, step: str, outcome: dict) -> None:
    with path.open("a", encoding="utf-8", errors="backslashreplace") as fh:
        fh.write(f"=== nbgrader {step}: {'ok' if outcome['success'] else 'FAILED'}\n")
        fh.write(outcome.get("log", ""))
        fh.write(outcome.get("error", ""))


@contextlib.contextmanager
def _quiet_warnings() -> Iterator[None]:
    # nbgrader 0.9 trips SQLAlchemy 2's autoflush warnings on every submission, and nbformat
    # warns about notebooks written by old tools; neither is the instructor's business.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _nbgrader_env() -> dict[str, str]:
    # nbgrader runs the `alembic` command when it creates a gradebook, so this environment's
    # scripts folder must be on PATH even when `course` was started without activating it.
    # PYDEVD_...: keeps the kernels' debugger from warning on stderr about frozen modules.
    scripts = os.path.dirname(sys.executable)
    return {"PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")]),
            "PYDEVD_DISABLE_FILE_VALIDATION": "1"}


def _last_error(outcome: dict) -> str:
    text = outcome.get("log", "") + "\n" + outcome.get("error", "")
    errors = [line.strip() for line in text.splitlines() if line.startswith("[ERROR]")]
    if errors:
        meaningful = [e for e in errors if "Please see" not in e and "There was an error" not in e]
        return (meaningful or errors)[0].removeprefix("[ERROR]").strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown error"


def _find(folder: Path, assignment: str, notebooks: list[str], repo_prefix: str = "") -> list[Submission]:
    try:
        found = find_submissions(folder, assignment, notebooks)
    except (FileNotFoundError, ValueError) as err:
        raise CourseError(str(err)) from None
    prefix = repo_prefix.rstrip("-") + "-" if repo_prefix else ""
    if prefix:  # course-wide repositories are named PREFIX-STUDENT by GitHub Classroom
        found = [dataclasses.replace(s, student=s.student[len(prefix):])
                 if s.layout == "course-repo" and s.student.startswith(prefix) and len(s.student) > len(prefix)
                 else s for s in found]
        students = [s.student for s in found]
        twice = sorted({s for s in students if students.count(s) > 1})
        if twice:
            raise CourseError(f"two submissions of {assignment!r} for student {twice[0]!r} once {prefix!r} "
                              "is taken off the repository names; keep one")
    return found


def _update_gradebook(course: Course, assignment: str, roster: list | None, due) -> None:
    """Store the deadline and the roster's names and e-mails (in the grading process only)."""
    if not roster and due is None:
        return
    from course_lib.grader.roster import _split_name

    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        if due is not None:
            gb.update_or_create_assignment(assignment, duedate=due)
        for person in roster or []:
            first, last = _split_name(person.name)
            gb.update_or_create_student(person.id, first_name=first or None, last_name=last or None,
                                        email=person.email or None)


def _write_timestamp(submission: Submission, destination: Path) -> None:
    """nbgrader's ``timestamp.txt``: the one that came with the submission, else its last commit.

    nbgrader compares it with the assignment's due date. A notebook folder's own
    ``timestamp.txt`` (what ``nbgrader collect`` and the exchange write) wins; in a git
    repository (GitHub Classroom) the time of the last commit is the submission time.
    """
    for path in submission.notebooks.values():
        given = Path(path).parent / "timestamp.txt"
        if given.is_file():
            (destination / "timestamp.txt").write_text(given.read_text(encoding="utf-8"), encoding="utf-8")
            return
    for path in submission.notebooks.values():
        for folder in Path(path).resolve().parents:
            if (folder / ".git").exists():
                import subprocess

                try:
                    when = subprocess.run(["git", "-C", str(folder), "log", "-1", "--format=%cI"],
                                          capture_output=True, text=True, timeout=30).stdout.strip()
                except (OSError, subprocess.SubprocessError):
                    return
                if when:
                    (destination / "timestamp.txt").write_text(when + "\n", encoding="utf-8")
                return


def _sync_assignment(course: Course, assignment: str) -> None:
    """Put the assignment's cells into the gradebook, releasing into grading/release, not assignments/."""
    cfg = course.config()
    release_dir = course.grading_dir / "release"
    cfg.CourseDirectory.release_directory = str(release_dir)
    outcome = _run(course, GenerateAssignment, cfg, assignment, force=True, create_assignment=True)
    if not outcome["success"]:
        raise CourseError(f"could not load {assignment!r} into the gradebook: {_last_error(outcome)}")


def _unreadable_reason(path: Path) -> str | None:
    """None if ``path`` is a valid notebook with valid nbgrader metadata, else why not."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.read(path, as_version=4)
            nbformat.validate(nb)
    except nbformat.reader.NotJSONError:
        return "not valid JSON"
    except nbformat.ValidationError as err:
        return f"not a valid notebook ({str(err).splitlines()[0]})"
    except (UnicodeDecodeError, OSError) as err:
        return f"cannot be read ({err})"
    except Exception as err:  # nbformat raises assorted errors for JSON that is not a notebook
        return f"not a notebook ({type(err).__name__}: {err})"
    try:
        MetadataValidator().validate_nb(nb)
    except Exception as err:
        return f"nbgrader cell metadata is corrupted ({str(err).splitlines()[0] if str(err) else type(err).__name__})"
    return None


def _remove(path: Path) -> None:
    if path.exists():
        nbutils.rmtree(str(path))


def _record_zero(course: Course, assignment: str, student: str) -> None:
    """No readable notebook: every grade of the submission is zero (kept if graded by hand)."""
    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        gb.update_or_create_student(student)
        submission = gb.update_or_create_submission(assignment, student)
        for notebook in submission.notebooks:
            for grade_ in notebook.grades:
                grade_.auto_score = 0
                grade_.needs_manual_grade = False
        gb.db.commit()


def _autograded_flags(course: Course, student: str, assignment: str) -> list[Flag]:
    flags: list[Flag] = []
    for path in sorted(course.step("autograded", student, assignment).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        record = nb.metadata.get(METADATA_KEY, {})
        if record.get("restored_cells"):
            flags.append(Flag("restored", tuple(record["restored_cells"]),
                              "grade cells deleted from the submission were put back and score zero"))
        if record.get("overwritten_cells"):
            flags.append(Flag("overwritten", tuple(record["overwritten_cells"]),
                              "read-only cells edited by the student were restored from the gradebook"))
        stopped = record.get("kernel_stopped")
        if stopped:
            kind = stopped.get("kind") or ("kernel-died" if stopped["reason"] == "the kernel died"
                                           else "kernel-unresponsive")
            cell = stopped.get("grade_id") or f"cell {stopped['cell_index']}"
            flags.append(Flag(kind, (cell,), f"{stopped['reason']}; later cells were not run and score zero"))
        flags += _error_flags(nb)
        student_code = "\n".join(c.source for c in _submitted_cells(course, student, assignment, path.name))
        if "NBGRADER_EXECUTION" in student_code:
            flags.append(Flag("reads-NBGRADER_EXECUTION", (),
                              "the student's code reads NBGRADER_EXECUTION and may behave differently "
                              "while graded; it was graded on what it did while graded"))
    return flags


def _verify(course: Course, student: str, assignment: str, log_file: Path) -> tuple[list[Flag], dict[str, float]]:
    """Grade the test cells again outside the student's kernel and store that verdict.

    For speed, memory and scaling cells the out-of-kernel score replaces the in-kernel one;
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
    """
    flags: list[Flag] = []
    speedups: dict[str, float] = {}
    for path in sorted(course.step("autograded", student, assignment).glob("*.ipynb")):
        source = course.root / "solutions" / assignment / path.name
        if not source.is_file():
            continue
        try:
            verdicts = verify_notebook(source, path, timeout=course.timeout, log=log_file,
                                       memory_limit=course.memory_limit, sandboxed=course.sandboxed,
                                       notebook_timeout=course.notebook_timeout)
        except Exception as err:  # noqa: BLE001
            # The in-kernel scores cannot stand alone: the student's code ran beside its own
            # tests there, and may be what stopped the verifier. Zero, flagged for the instructor
            # (who can grade again once the cause is known).
            zeroed = _zero_tests(course, student, assignment, source, path.stem)
            kernel = ", ".join(f"{g} {_pts(got)}/{_pts(top)}" for g, (got, top) in zeroed.items())
            flags.append(Flag("unverified", tuple(zeroed), f"{path.name}: the check outside the kernel failed "
                                                           f"({type(err).__name__}: {err}); 0 points stored for "
                                                           f"its test cells (in the student's kernel: {kernel})"))
            continue
        if not verdicts:
            continue
        speedups.update({v.grade_id: v.measured for v in verdicts if v.measured is not None})
        refused_in_kernel = _refused_cells(path)
        with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
            for verdict in verdicts:
                try:
                    grade_ = gb.find_grade(verdict.grade_id, path.stem, assignment, student)
                except MissingEntry:
                    continue
                in_kernel = float(grade_.auto_score or 0.0)
                performance = is_performance_cell(verdict.grade_id)
                if performance and (verdict.refused or verdict.grade_id in refused_in_kernel):
                    # One rule on both sides (grading._refuse_microseconds): a measurement either
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
                    if in_kernel > 0:
                        flags.append(Flag("unverified", (verdict.grade_id,), f"0 points stored (in the student's "
                                                                           f"kernel {in_kernel:g}/{verdict.max_score:g}):"
                                                                           f" {verdict.detail}"))
                    continue
                if not performance and verdict.score >= in_kernel:
                    continue  # a correctness test only ever loses points to the check outside the kernel
                grade_.auto_score = min(max(verdict.score, 0.0), verdict.max_score)  # never above the cell's points
                grade_.needs_manual_grade = False
                if abs(in_kernel - verdict.score) >= max(0.25 * verdict.max_score, 0.01):
                    flags.append(Flag("verdict-differs", (verdict.grade_id,),
                                      f"in the student's kernel {in_kernel:g}/{verdict.max_score:g}, outside it "
                                      f"{verdict.score:g}/{verdict.max_score:g} (stored): {verdict.detail}"))
            gb.db.commit()
        _annotate(path, verdicts)
    return flags, speedups


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


def _refused_cells(path: Path) -> set[str]:
    """Grade ids whose cell raised ``UnreliableMeasurement`` in the student's kernel."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - unreadable: nothing was refused that we can see
        return set()
    return {cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells if cell.cell_type == "code"
            and any(o.get("output_type") == "error" and o.get("ename") == "UnreliableMeasurement"
                    for o in cell.get("outputs", []))} - {None}


def _annotate(path: Path, verdicts: list) -> None:
    nb = nbformat.read(path, as_version=4)
    by_id = {v.grade_id: v for v in verdicts}
    for cell in nb.cells:
        verdict = by_id.get(cell.metadata.get("nbgrader", {}).get("grade_id"))
        if verdict is None or cell.cell_type != "code" or not is_performance_cell(verdict.grade_id):
            continue
        kept = "" if verdict.conclusive else " (it could not be checked, so the cell scores 0)"
        text = (f"\nChecked again by the grader outside your kernel: {verdict.score:g} / "
                f"{verdict.max_score:g}{kept}. {verdict.detail}\n")
        cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=text))
    nbformat.write(nb, path)


def _error_flags(nb: nbformat.NotebookNode) -> list[Flag]:
    found: dict[str, list[str]] = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        name = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index}"
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            ename, evalue = output.get("ename", ""), str(output.get("evalue", ""))
            if ename == CELL_TIMEOUT:
                found.setdefault("timeout", []).append(name)
            elif ename == "TamperingDetected" or evalue.startswith(_TAMPERING_PREFIX):
                found.setdefault("tampering", []).append(name)
            elif ename == "UnreliableMeasurement":
                found.setdefault("unreliable", []).append(name)
    details = {"timeout": "cells ran past the time limit, were interrupted and score zero",
               "tampering": "the grading helpers detected tampering (e.g. a reassigned clock)",
               "unreliable": "a speed measurement was refused as unreliable; see the cell's message"}
    return [Flag(kind, tuple(dict.fromkeys(cells)), details[kind]) for kind, cells in found.items()]


def _submitted_cells(course: Course, student: str, assignment: str, filename: str) -> list:
    """The student's own code cells (not read-only) as submitted."""
    path = course.step("submitted", student, assignment) / filename
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:
        return []
    return [c for c in nb.cells if c.cell_type == "code" and not nbutils.is_locked(c)]


def _write_missing_feedback(course: Course, student: str, assignment: str, problems: dict[str, str | None],
                            missing: list[str]) -> tuple[Path, ...]:
    """Feedback HTML for notebooks nbgrader could not grade; returns every feedback file."""
    folder = course.step("feedback", student, assignment)
    for name in course.notebooks(assignment):
        target = folder / f"{name}.html"
        if target.exists():
            continue
        why = problems.get(name) or ("it was not in the submission" if name in missing else
                                     "grading failed; your instructor has been told")
        folder.mkdir(parents=True, exist_ok=True)
        target.write_text(_PLAIN_FEEDBACK.format(title=html.escape(f"{assignment}: {name}.ipynb"),
                                                 why=html.escape(scrub_host(writable(why)))), encoding="utf-8")
    return tuple(sorted(folder.glob("*.html")))


_PLAIN_FEEDBACK = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>
<body><h1>{title}</h1>
<p>Score: 0. Your notebook could not be graded: {why}.</p>
<p>Open it in Jupyter to check that it opens, then submit it again or ask your instructor.</p>
</body></html>
"""


def _scores(course: Course, assignment: str, student: str) -> tuple[float, float, dict[str, float]]:
    with _quiet_warnings(), Gradebook(course.db_url) as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            max_score = gb.find_assignment(assignment).max_score
            return 0.0, float(max_score), {}
        cells = {g.name: float(g.score) for nb in submission.notebooks for g in nb.grades}
        return float(submission.score), float(submission.max_score), cells


def _record_display_names(course: Course, submissions: list[Submission], roster: list | None) -> None:
    """Give a student graded under a safe id their original name in the gradebook (and grades.csv)."""
    from course_lib.grader.roster import _split_name

    on_roster = {person.id for person in roster or []}
    renamed = [s for s in submissions if s.name and s.student not in on_roster]
    if not renamed:
        return
    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        for submission in renamed:
            first, last = _split_name(submission.name)
            gb.update_or_create_student(submission.student, first_name=first or None, last_name=last or None)


def _export(course: Course, results: list[SubmissionResult], roster: list | None = None) -> None:
    from course_lib.grader.roster import write_grades

    # Not nbgrader's CsvExportPlugin: it gives every student in the gradebook a 0 for every
    # assignment, submitted or not; here a row is a graded submission (or a roster "missing").
    # Each file is written beside its place and renamed over it: an exception while writing
    # leaves the last complete file, never a truncated one.
    with _quiet_warnings(), Gradebook(course.db_url) as gb, _replacing(course.grading_dir / "grades.csv") as partial:
        write_grades(gb, partial, roster)
    flags_file = course.grading_dir / "flags.csv"
    done = {(r.assignment, r.student) for r in results}
    rows = []
    if flags_file.exists():
        with flags_file.open(newline="", encoding="utf-8", errors="backslashreplace") as fh:
            rows = [row for row in csv.DictReader(fh) if (row["assignment"], row["student"]) not in done]
    rows += [{"assignment": r.assignment, "student": r.student, "flag": f.kind, "cells": " ".join(f.cells),
              "detail": f.detail} for r in results for f in r.flags]
    rows = [{key: writable(value) for key, value in row.items()} for row in rows]
    rows.sort(key=lambda row: (row["assignment"], row["student"]))
    with _replacing(flags_file) as partial, partial.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, ["assignment", "student", "flag", "cells", "detail"])
        writer.writeheader()
        writer.writerows(rows)


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path``, renamed over it when the block ends without an error."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        yield partial
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


@contextlib.contextmanager
def _progress_bar(total: int, show: bool | None):
    from tqdm import tqdm

    # By default only for more than five submissions, and only on a terminal (disable=None).
    disable = (None if total > 5 else True) if show is None else not show
    with tqdm(total=total, file=sys.stderr, unit="submission", disable=disable, leave=False) as bar:
        yield bar


def _pts(x: float) -> str:
    return f"{x:g}"


def _points(x: float) -> str:
    return f"{x:g} point" + ("" if x == 1 else "s")
