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
from pathlib import Path
from typing import Any

import nbformat
from nbgrader import utils as nbutils
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import Autograde, GenerateAssignment, GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from nbgrader.nbgraderformat import MetadataValidator
from traitlets.config import Config

from course_lib.grader._nbpreprocessors import (
    CELL_TIMEOUT,
    METADATA_KEY,
    CourseExecute,
    HideHiddenTests,
    RestoreMissingCells,
)
from course_lib import timing
from course_lib.grader import _cores
from course_lib.grader._submissions import Submission, copy_submission, find_submissions, record_names
from course_lib.grader._gradebook import _nbgrader_env, _quiet_warnings, _scores
from course_lib.grader._text import scrub_host, writable
# Re-exported: ``nbgrading.Course``, ``nbgrading.CourseError`` ... stay where callers find them.
from course_lib.grader.common import CONFIG_FILE, Course, CourseError, Flag, SubmissionResult, _environment
from course_lib.grader.common import _driver  # noqa: F401 - the CLI's tests call nbgrading._driver
from course_lib.grader.sandbox import available as sandbox_available
from course_lib.grader.verification import CellVerdict, is_performance_cell, verify_notebook

__all__ = [
    "CONFIG_FILE",
    "Course",
    "CourseError",
    "Flag",
    "SubmissionResult",
    "release",
    "grade",
    "grade_submission",
    "refresh_feedback",
    "recorded_results",
    "format_table",
    "CourseExecute",
    "RestoreMissingCells",
    "HideHiddenTests",
]

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
          repo_prefix: str = "", warn=None) -> list[SubmissionResult]:
    """Collect, autograde and give feedback on every submission in ``submissions``.

    Writes ``grading/grades.csv`` (one row per graded submission of the whole gradebook, with
    nbgrader's export columns and its standing) and ``grading/flags.csv`` (one row per flag). ``assignments`` defaults to every assignment
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
    the gradebook and ``grades.csv``, matched to the graded students as
    :func:`course_lib.grader.roster.match_roster` matches (original names, safe ids, GitHub
    user names). ``due``: the deadline (naive UTC ``datetime``) stored as the assignments' due
    date; a submission's time is its ``timestamp.txt`` (nbgrader's layout) or, for a git
    repository, the time ``course collect`` first saw its notebooks (the last commit's date,
    the student's claim, when it never did; :mod:`course_lib.grader.collect`). Lateness and
    nbgrader's ``LateSubmissionPlugin`` penalty are computed once for every submission
    (:func:`course_lib.grader.exports.grade_rows`): the results' ``score`` is after the
    penalty, and a late submission is flagged ``late``. ``repo_prefix``: the GitHub
    Classroom assignment name of course-wide repositories
    (``DIR/PREFIX-STUDENT/assignments/...``), taken off their folder names to give the student
    ids. ``warn``: called with one line for every roster row without a submission and every
    submission on no roster row.

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
    match = _match(course, found, roster, warn) if roster else None
    total = sum(len(subs) for subs in found.values())
    results, pending = [], []
    for name, subs in found.items():
        _sync_assignment(course, name)  # the gradebook is written by one process at a time here
        _update_gradebook(course, name, match, due)
        _record_display_names(course, subs, match)
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
    # Later in the batch: cells whose every reading was too noisy to grade on are measured
    # once more, now that the other submissions are done (the machine may be quieter).
    by_key = {(s.assignment, s.student): s for s in pending}
    results = [_settle(course, by_key[(r.assignment, r.student)], r)
               if r.has_flag("undecided") and (r.assignment, r.student) in by_key else r for r in results]
    results.sort(key=lambda r: (r.assignment, r.student))
    rows = _export(course, results, roster)
    refresh_feedback(course, [(r.student, r.assignment) for r in results if r.skipped])
    return _with_standing(results, rows)


def refresh_feedback(course: Course, submissions: list[tuple[str, str]] | None = None) -> list[Path]:
    """Write the feedback pages again from the gradebook as it is now; return them.

    ``submissions``: (student, assignment) pairs, default every graded submission that has
    autograded notebooks. Nothing is graded again: the pages take in manual marks and
    comments given since (formgrader, ``course mark``), a changed due date and the late
    penalty, so that they say what ``grades.csv`` says.
    """
    from course_lib.grader.exports import grade_rows
    from course_lib.grader.feedback import write_submission_feedback

    if submissions is not None and not submissions:
        return []
    rows = {(r.student, r.assignment): r for r in grade_rows(course) if r.submitted}  # one pass over the gradebook
    wanted = sorted(rows) if submissions is None else submissions
    written: list[Path] = []
    for student, assignment in wanted:
        if (student, assignment) in rows and any(course.step("autograded", student, assignment).glob("*.ipynb")):
            written += write_submission_feedback(course, student, assignment, rows[(student, assignment)])
    return written


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
    sw = timing.stages()  # the grader measured with the course's own stage timer
    verifier: dict[str, float] = {}
    flags = [Flag("note", detail=note) for note in submission.notes]
    if submission.refused:
        return _refuse(course, submission, flags)
    if not course.sandboxed:
        flags.append(Flag("unsandboxed", (), "graded with --no-sandbox: the student's code ran with "
                                              "the grader's rights"))
    speedups: dict[str, float] = {}
    with sw("copy in"):
        readable, problems, missing = _copy_in(course, submission, flags)

    log_file = course.grading_dir / "logs" / assignment / f"{student}.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.write_text("", encoding="utf-8")
    if any(readable.values()):
        cfg = course.config()
        cfg.CourseExecute.kernel_log = str(log_file)
        with sw("autograde"):
            outcome = _run(course, Autograde, cfg, assignment, student, force=True, create_student=True)
        _append_log(log_file, "autograde", outcome)
        if outcome["success"]:
            flags += _autograded_flags(course, student, assignment)
            with sw("verify"):
                verified, speedups = _verify(course, student, assignment, log_file, profile=verifier)
            flags += verified
            with sw("feedback"):
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
    with sw("gradebook and records"):
        feedback = _write_missing_feedback(course, student, assignment, problems, missing)
        score, max_score, cells = _scores(course, assignment, student)
    result = SubmissionResult(student, assignment, score, max_score, cells, tuple(flags), feedback,
                              speedups, _profile(course, student, assignment, sw, verifier))
    _write_done(course, submission, result)
    return result


def _settle(course: Course, submission: Submission, result: SubmissionResult) -> SubmissionResult:
    """One more reading of the cells a submission's grading left ``undecided``, then its feedback again.

    A decided reading replaces the stored score; a reading still too noisy keeps the better
    of the stored score and its own (never 0 on a noisy reading), flagged again. Never
    raises: a failure here leaves the first grading's result standing.
    """
    student, assignment = submission.student, submission.assignment
    cells = {c for f in result.flags if f.kind == "undecided" for c in f.cells}
    log_file = course.grading_dir / "logs" / assignment / f"{student}.log"
    try:
        flags, speedups = _verify(course, student, assignment, log_file, only=cells)
        outcome = _run(course, GenerateFeedback, course.config(), assignment, student, force=True)
        _append_log(log_file, "generate_feedback (after the later reading)", outcome)
        if outcome["success"]:
            from course_lib.grader.feedback import write_submission_feedback

            write_submission_feedback(course, student, assignment)
    except Exception as err:  # noqa: BLE001 - the first grading stands, and says why
        return dataclasses.replace(result, flags=result.flags + (
            Flag("note", (), f"the later reading of {', '.join(sorted(cells))} failed: {err}"),))
    kept = tuple(f for f in result.flags if f.kind != "undecided" and not (
        f.kind == "verdict-differs" and set(f.cells) <= cells))
    score, max_score, scores = _scores(course, assignment, student)
    settled = dataclasses.replace(result, score=score, max_score=max_score, cell_scores=scores,
                                  flags=kept + tuple(flags), speedups={**result.speedups, **speedups})
    _write_done(course, submission, settled)
    return settled


def _profile(course: Course, student: str, assignment: str, sw: Any, verifier: dict[str, float]) -> dict[str, float]:
    """The stage timer's readings, with autograde and verify split into their parts."""
    from course_lib.grader.profile import kernel_stages, verifier_stages

    seconds = sw.seconds
    split: dict[str, float] = {}
    for name, spent in seconds.items():
        if name == "autograde":
            timings, is_test, is_performance = _kernel_timings(course, student, assignment)
            split.update(kernel_stages(timings, spent, is_test, is_performance))
        elif name == "verify":
            split.update(verifier_stages(verifier, spent))
        else:
            split[name] = spent
    return split


def _kernel_timings(course: Course, student: str, assignment: str) -> tuple[dict, dict, dict]:
    """What the kernel's preprocessor recorded of its cells' times, summed over the notebooks."""
    timings: dict[str, Any] = {"kernel_start": 0.0, "cells": []}
    is_test, is_performance = {}, {}
    for path in sorted(course.step("autograded", student, assignment).glob("*.ipynb")):
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001 - a profile is not worth a failed grading
            continue
        record = nb.metadata.get(METADATA_KEY, {}).get("timings", {})
        timings["kernel_start"] += float(record.get("kernel_start", 0.0))
        timings["cells"] += record.get("cells", [])
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade_id"):
                is_test[meta["grade_id"]] = bool(meta.get("grade")) and not meta.get("solution")
                is_performance[meta["grade_id"]] = is_performance_cell(meta["grade_id"])
    return timings, is_test, is_performance


def _copy_in(course: Course, submission: Submission, flags: list[Flag]) -> tuple[dict, dict, list[str]]:
    """Copy a submission into ``grading/submitted``; (readable notebooks, problems, missing names)."""
    student, assignment = submission.student, submission.assignment
    readable, problems = {}, {}
    for name, path in submission.notebooks.items():
        problems[name] = _unreadable_reason(path)
        readable[name] = problems[name] is None
    copy_submission(submission, course.step("submitted", student, assignment), readable)
    _write_timestamp(submission, course.step("submitted", student, assignment), course.grading_dir)
    for name, reason in problems.items():
        if reason:
            flags.append(Flag("malformed", (), f"{name}.ipynb: {reason}"))
    missing = [n for n in course.notebooks(assignment) if n not in submission.notebooks]
    if missing:
        flags.append(Flag("no-notebook", (), "not found: " + ", ".join(f"{n}.ipynb" for n in missing)))
    for step in ("autograded", "feedback"):
        _remove(course.step(step, student, assignment))
    return readable, problems, missing


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
    # and its time: a later `course collect` can date the same notebooks differently
    from course_lib.grader.collect import time_of

    found = time_of(course.grading_dir, submission)
    h.update(json.dumps(found[0].as_record() if found else None).encode())
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
                            speedups, skipped=True)


def recorded_results(course: Course, rows: list, assignment: str | None = None) -> list[SubmissionResult]:
    """The graded submissions as ``grades.csv`` and ``flags.csv`` have them now, for a table.

    ``rows``: every submission's standing (:func:`course_lib.grader.exports.grade_rows`).
    """
    flags: dict[tuple[str, str], list[Flag]] = {}
    path = course.grading_dir / "flags.csv"
    if path.exists():
        with path.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                flags.setdefault((row["assignment"], row["student"]), []).append(
                    Flag(row["flag"], tuple(row["cells"].split()), row["detail"]))
    return [SubmissionResult(r.student, r.assignment, r.score, r.max_score, {}, tuple(flags.get((r.assignment, r.student), ())),
                             penalty=r.penalty, status=r.status, skipped=True)
            for r in rows if r.submitted and (assignment is None or r.assignment == assignment)]


def format_table(results: list[SubmissionResult]) -> str:
    """Students down, assignments across (``score / max``, after any late penalty, and ``late``), then flags."""
    assignments = sorted({r.assignment for r in results})
    students = sorted({r.student for r in results})
    by_key = {(r.student, r.assignment): r for r in results}
    header = ["student", *assignments, "flags"]
    rows = []
    for student in students:
        row, flags = [student], []
        for assignment in assignments:
            result = by_key.get((student, assignment))
            late = f" late (-{_pts(result.penalty)})" if result is not None and result.status == "late" else ""
            row.append("" if result is None else f"{_pts(result.score)} / {_pts(result.max_score)}{late}")
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


def _update_gradebook(course: Course, assignment: str, match, due) -> None:
    """Store the deadline, and the names and e-mails of the roster's rows under the ids they matched."""
    if match is None and due is None:
        return
    from course_lib.grader.roster import _split_name

    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        if due is not None:
            gb.update_or_create_assignment(assignment, duedate=due)
        for student, person in (match.rows.items() if match is not None else ()):
            if student not in match.ids:
                continue  # a roster row without a submission: a 'missing' row, not a gradebook student
            first, last = _split_name(person.name)
            gb.update_or_create_student(student, first_name=first or None, last_name=last or None,
                                        email=person.email or None)


def _match(course: Course, found: dict[str, list[Submission]], roster: list, warn) -> object:
    """Match the roster to the graded students (this run's and the gradebook's); warn of what is left.

    Raises
    ------
    CourseError
        when two roster rows name the same student.
    """
    from course_lib.grader.roster import match_roster

    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        graded = {s.student.id for a in gb.assignments for s in a.submissions}
    try:
        match = match_roster(roster, graded | {s.student for subs in found.values() for s in subs})
    except ValueError as err:
        raise CourseError(f"roster: {err}") from None
    say = warn or (lambda line: None)
    for name, subs in found.items():
        here = {s.student for s in subs}
        for student, person in sorted(match.rows.items()):
            if student not in here:
                say(f"roster row {person.id!r} has no submission of {name}: a 'missing' row in grades.csv")
        for submission in subs:
            if submission.student not in match.ids:
                folder = f" (folder {submission.name!r})" if submission.name else ""
                say(f"the submission of {name} by {submission.student!r}{folder} matches no roster row (by id, "
                    "name or GitHub user name): no roster name or e-mail for it")
    return match


def _write_timestamp(submission: Submission, destination: Path, grading_dir: Path | None = None) -> None:
    """nbgrader's ``timestamp.txt``, and beside it where that time came from (``submission-time.json``).

    nbgrader compares ``timestamp.txt`` with the assignment's due date. A notebook folder's
    own ``timestamp.txt`` (what ``nbgrader collect`` and the exchange write) is copied; for a
    git repository (GitHub Classroom) the time is the one ``course collect`` recorded for
    these notebooks, else the last commit's date, the student's claim
    (:func:`course_lib.grader.collect.time_of`).
    """
    from course_lib.grader.collect import TIME_FILE, time_of

    found = time_of(grading_dir or destination, submission)
    if found is None:
        return
    when, text = found
    (destination / "timestamp.txt").write_text(text, encoding="utf-8")
    (destination / TIME_FILE).write_text(json.dumps(when.as_record()), encoding="utf-8")


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


def _verify(course: Course, student: str, assignment: str, log_file: Path,
            only: set[str] | None = None, profile: dict[str, float] | None = None,
            ) -> tuple[list[Flag], dict[str, float]]:
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

    ``only``: a later reading of these performance cells alone (see :func:`_settle`): a
    decided verdict replaces the stored score, an undecided one keeps the better of the two.
    """
    flags: list[Flag] = []
    speedups: dict[str, float] = {}
    for path in sorted(course.step("autograded", student, assignment).glob("*.ipynb")):
        source = course.root / "solutions" / assignment / path.name
        if not source.is_file():
            continue
        try:
            spent: dict[str, float] = {}
            verdicts = verify_notebook(source, path, timeout=course.timeout, log=log_file,
                                       memory_limit=course.memory_limit, sandboxed=course.sandboxed,
                                       notebook_timeout=course.notebook_timeout, only=only, profile=spent)
            if profile is not None:
                for stage, seconds in spent.items():
                    profile[stage] = profile.get(stage, 0.0) + seconds
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
        timed_out = _cells_with_error(path, CELL_TIMEOUT)
        with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
            for verdict in verdicts:
                try:
                    grade_ = gb.find_grade(verdict.grade_id, path.stem, assignment, student)
                except MissingEntry:
                    continue
                in_kernel = float(grade_.auto_score or 0.0)
                performance = is_performance_cell(verdict.grade_id)
                if only is not None:
                    _store_later_reading(grade_, verdict, in_kernel, flags)
                    continue
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
                if not performance:
                    stored = _correctness_score(in_kernel, verdict, verdict.grade_id in timed_out)
                    if stored is None:
                        continue  # the kernel's score stands
                    if stored > in_kernel:
                        flags.append(Flag("note", (verdict.grade_id,), f"this test ran past the time limit in "
                                                                       f"the student's kernel; outside it, it "
                                                                       f"scored {stored:g}/{verdict.max_score:g} "
                                                                       "(stored)"))
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
                elif abs(in_kernel - verdict.score) >= max(0.25 * verdict.max_score, 0.01):
                    flags.append(Flag("verdict-differs", (verdict.grade_id,),
                                      f"in the student's kernel {in_kernel:g}/{verdict.max_score:g}, outside it "
                                      f"{verdict.score:g}/{verdict.max_score:g} (stored): {verdict.detail}"))
            gb.db.commit()
        _annotate(path, verdicts, later=only is not None)
    return flags, speedups


def _correctness_score(in_kernel: float, verdict: CellVerdict, timed_out: bool) -> float | None:
    """What to store for a correctness test once it was checked outside the kernel (None: the kernel's).

    A correctness test only ever loses points to the check outside the kernel (a rebound
    ``assert_same`` passes in the kernel, never outside it), with one exception: a test
    the kernel stopped at the time limit, which the check outside the kernel ran to the
    end. A busy machine slows every cell, and a correct answer must not lose its points to
    that; the check outside passed it out of the student's reach (flagged, for a look).

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


def _refused_cells(path: Path) -> set[str]:
    """Grade ids whose cell raised ``UnreliableMeasurement`` in the student's kernel."""
    return _cells_with_error(path, "UnreliableMeasurement")


def _cells_with_error(path: Path, ename: str) -> set[str]:
    """Grade ids whose cell ended with an error named ``ename`` in the student's kernel."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - unreadable: no such error that we can see
        return set()
    return {cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells if cell.cell_type == "code"
            and any(o.get("output_type") == "error" and o.get("ename") == ename
                    for o in cell.get("outputs", []))} - {None}


def _annotate(path: Path, verdicts: list, later: bool = False) -> None:
    """Append each cell's out-of-kernel verdict to its outputs, where the feedback shows it.

    Every performance cell's; and a correctness cell's that failed on either side, when the
    verifier could decide it: its message is the grader's own, made where the student's code
    never saw a hidden test, so the feedback shows it where the kernel's own is withheld.
    ``later``: the verdicts of a later reading in the batch (see :func:`_settle`).
    """
    nb = nbformat.read(path, as_version=4)
    by_id = {v.grade_id: v for v in verdicts}
    for cell in nb.cells:
        verdict = by_id.get(cell.metadata.get("nbgrader", {}).get("grade_id"))
        if verdict is None or cell.cell_type != "code":
            continue
        if not is_performance_cell(verdict.grade_id):
            failed_in_kernel = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
            if verdict.conclusive and not verdict.refused and (verdict.score < verdict.max_score or failed_in_kernel):
                text = (f"\nChecked again by the grader outside your kernel: {verdict.score:g} / "
                        f"{verdict.max_score:g}. {verdict.detail}\n")
                cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=text))
            continue
        kept = "" if verdict.conclusive else " (it could not be checked, so the cell scores 0)"
        when = "Measured again later in the grading run" if later else "Checked again by the grader"
        text = (f"\n{when} outside your kernel: {verdict.score:g} / "
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


def _record_display_names(course: Course, submissions: list[Submission], match=None) -> None:
    """Give a student graded under a safe id their original name in the gradebook (and grades.csv)."""
    from course_lib.grader.roster import _split_name

    on_roster = set(match.ids) if match is not None else set()
    renamed = [s for s in submissions if s.name and s.student not in on_roster]
    if not renamed:
        return
    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        for submission in renamed:
            first, last = _split_name(submission.name)
            gb.update_or_create_student(submission.student, first_name=first or None, last_name=last or None)


def _export(course: Course, results: list[SubmissionResult], roster: list | None = None) -> list:
    """Write ``grades.csv`` and ``flags.csv``; return every submission's standing (``GradeRow``).

    The standing is computed once, here, for every submission in the gradebook (late
    penalties written back): ``grades.csv``, the ``late`` and ``claimed-time`` flags and
    the results' scores all come from it.
    """
    from course_lib.grader.exports import _write_csv, grade_rows, write_long

    # Not nbgrader's CsvExportPlugin: it gives every student in the gradebook a 0 for every
    # assignment, submitted or not; here a row is a graded submission (or a roster "missing").
    rows = grade_rows(course, roster, store=True)
    write_long(rows, course.grading_dir / "grades.csv")
    flags_file = course.grading_dir / "flags.csv"
    done = {(r.assignment, r.student) for r in results}
    kept = []
    if flags_file.exists():
        with flags_file.open(newline="", encoding="utf-8", errors="backslashreplace") as fh:
            kept = [row for row in csv.DictReader(fh) if (row["assignment"], row["student"]) not in done
                    and row["flag"] not in _STANDING_FLAGS]
    kept += [{"assignment": r.assignment, "student": r.student, "flag": f.kind, "cells": " ".join(f.cells),
              "detail": f.detail} for r in results for f in r.flags if f.kind not in _STANDING_FLAGS]
    kept += [{"assignment": row.assignment, "student": row.student, "flag": f.kind, "cells": "", "detail": f.detail}
             for row in rows for f in _standing_flags(row)]
    kept.sort(key=lambda row: (row["assignment"], row["student"]))
    _write_csv(flags_file, _FLAG_COLUMNS, [[row[c] for c in _FLAG_COLUMNS] for row in kept])
    return rows


_FLAG_COLUMNS = ["assignment", "student", "flag", "cells", "detail"]
_STANDING_FLAGS = ("late", "claimed-time")


def _standing_flags(row) -> list[Flag]:
    """The flags a submission's standing raises: ``late``, and ``claimed-time`` for a time only its commit gives."""
    flags = []
    if row.status == "late":
        flags.append(Flag("late", (), f"{row.late_text()}: {row.time_text()}"))
    if row.submitted and row.duedate is not None and row.time_source == "commit date":
        flags.append(Flag("claimed-time", (), "its time is the last commit's date, which the student's machine "
                                              "sets: no course collect saw these notebooks (run it at the deadline)"))
    return flags


def _with_standing(results: list[SubmissionResult], rows: list) -> list[SubmissionResult]:
    """``results`` with the scores after the late penalty and the standing's flags."""
    by_key = {(row.assignment, row.student): row for row in rows}
    updated = []
    for result in results:
        row = by_key.get((result.assignment, result.student))
        if row is None or not row.submitted:
            updated.append(result)
            continue
        flags = tuple(f for f in result.flags if f.kind not in _STANDING_FLAGS) + tuple(_standing_flags(row))
        updated.append(dataclasses.replace(result, score=row.score, max_score=row.max_score, penalty=row.penalty,
                                           status=row.status, flags=flags))
    return updated


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
