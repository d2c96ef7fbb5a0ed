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

The pipeline
------------
Each stage is a module of its own, takes the previous stage's result and hands on its own;
this module chains them, and a submission meets each once, in this order (the names are
the stage timer's, as ``course grade --profile`` prints them):

1. find submissions: :func:`course_lib.grader.intake.find`, a ``Submission`` per student;
2. copy in: :func:`course_lib.grader.intake.copy_in`, a ``CopiedIn``;
3. autograde, in the student's kernel: :func:`course_lib.grader.execute.autograde`, an ``Executed``;
4. verify, outside it: ``course_lib.grader.verify._verify``, a ``Verified``;
5. later reading, only for cells left ``undecided``: the same stage on those cells;
6. feedback: :func:`course_lib.grader.feedback.write_pages`, the pages;
7. gradebook and records: :mod:`course_lib.grader.score`, a :class:`SubmissionResult`;
8. export, once per batch: :mod:`course_lib.grader.exports`, ``grades.csv`` and ``flags.csv``.

A submission whose verification left cells ``undecided`` (every reading too noisy to grade
on) stops after the verify stage and comes back to :func:`grade` as its ``Verified``; once
the rest of the batch is graded, those cells are measured once more and only then are its
feedback written and its grading recorded, so the feedback is written once, from the
settled scores. :func:`grade_submission` alone runs every stage but the later reading, and
needs only a :class:`Course` and a :class:`Submission`, so that a batch can be spread over
worker processes. The errors and shared types are in :mod:`course_lib.grader.common`.

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
scaling cells get that verdict, other tests only ever lose points to it, and a stored score
below the kernel's is flagged ``verdict-differs`` with both figures. The kernel also runs under a memory limit and a
whole-notebook time limit, watched from the grader's process (``memory-limit``,
``notebook-timeout``). A finished submission is recorded under ``grading/done``; grading again
skips it while it is unchanged, so a stopped run resumes.

Examples
--------
The shared types are :mod:`course_lib.grader.common`'s, found here too:

>>> from course_lib.grader import common
>>> Course is common.Course and CourseError is common.CourseError and Flag is common.Flag
True
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.converters import GenerateAssignment

from course_lib import timing
from course_lib.grader import _cores, _parked
from course_lib.grader._nbgrader import _last_error, _nbgrader_env, _quiet_warnings, _run
from course_lib.grader._nbpreprocessors import CourseExecute, HideHiddenTests, RestoreMissingCells
from course_lib.grader._submissions import Submission, record_names
# The stages, in the order a submission meets them.
from course_lib.grader.intake import copy_in, find as _find
from course_lib.grader.execute import _kernel_timings, autograde
from course_lib.grader.verify import Verified, _verify  # called here as _verify, where a test can replace it
from course_lib.grader.feedback import refresh_feedback, write_pages
from course_lib.grader.score import _done_file, _done_result, _scores, _write_done
from course_lib.grader.exports import _export, _with_standing, format_table, recorded_results
# Re-exported: ``nbgrading.Course``, ``nbgrading.CourseError`` ... stay where callers find them.
from course_lib.grader.common import CONFIG_FILE, Course, CourseError, Flag, SubmissionResult, _environment
from course_lib.grader.common import _driver  # noqa: F401 - the CLI's tests call nbgrading._driver
from course_lib.grader.sandbox import available as sandbox_available

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
    undecided: list[Verified] = []
    with _progress_bar(total, progress) as bar:
        bar.update(len(results))
        for graded in _graded(course, pending, workers, scheduler):
            bar.set_postfix_str(f"{graded.assignment}/{graded.student}")
            (undecided if isinstance(graded, Verified) else results).append(graded)
            bar.update()
    # Later in the batch: cells whose every reading was too noisy to grade on are measured
    # once more, now that the other submissions are done (the machine may be quieter); only
    # then are those submissions' feedback pages written and their grading recorded.
    results += [_settle(course, verified) for verified in undecided]
    results.sort(key=lambda r: (r.assignment, r.student))
    rows = _export(course, results, roster)
    refresh_feedback(course, [(r.student, r.assignment) for r in results if r.skipped])
    return _with_standing(results, rows)


def _graded(course: Course, pending: list[Submission], workers: int,
            scheduler: str | None) -> Iterator[SubmissionResult | Verified]:
    """Grade ``pending`` here, on ``workers`` local processes, or on a Dask cluster; yield as done.

    A submission left ``undecided`` comes back as its :class:`Verified` (see :func:`_grade_safely`).
    """
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
                                 cpu_plan=plan, defer=True, pure=False)
            for future in as_completed(futures):
                yield future.result()
        return
    if workers == 1:
        for submission in pending:
            yield _grade_safely(course, submission, None, defer=True)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed as completed

    context = multiprocessing.get_context("spawn")  # no inherited kernel or database connections
    cpu_sets = context.SimpleQueue()  # each worker takes one as it starts: its own cores // workers
    for share in _cores.shares(cpus, workers):
        cpu_sets.put(share)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_cores.pin_process,
                             initargs=(cpu_sets,)) as pool:
        futures = {pool.submit(_grade_safely, course, s, threads, None, True): s for s in pending}
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
                  cpu_plan: dict | None = None, defer: bool = False) -> SubmissionResult | Verified:
    """:func:`grade_submission` in a worker: thread pools limited, the grader's own errors reported.

    ``threads=0`` (a Dask worker): the thread is pinned to its share of the machine's cores
    from ``cpu_plan`` (see :func:`course_lib.grader._cores.dask_plan`) and the pools sized to it.
    ``defer``: a submission with ``undecided`` cells comes back as its :class:`Verified`,
    for :func:`grade` to measure them again at the end of the batch before its feedback.
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
            verified = _through_verify(course, submission)
            return verified if defer and verified.undecided else _finish(course, verified)
    except Exception as err:
        return _failed(course, submission, err)


def grade_submission(course: Course, submission: Submission) -> SubmissionResult:
    """Grade one submission through every stage: copy in, autograde, verify, feedback, record.

    The assignment must already be in the gradebook (:func:`grade` puts it there).
    Never raises for a bad submission: what went wrong is in the result's flags. Cells the
    verifier could not decide keep their best reading, flagged ``undecided`` (:func:`grade`
    measures them once more at the end of its batch before writing their feedback).
    """
    return _finish(course, _through_verify(course, submission))


def _through_verify(course: Course, submission: Submission) -> Verified:
    """Stages 1 to 3 of one submission: copy in, autograde in its kernel, verify outside it."""
    student, assignment = submission.student, submission.assignment
    _done_file(course, submission).unlink(missing_ok=True)  # not graded until the record is rewritten
    sw = timing.stages()  # the grader measured with the course's own stage timer
    flags = [Flag("note", detail=note) for note in submission.notes]
    if not course.sandboxed and not submission.refused:
        flags.append(Flag("unsandboxed", (), "graded with --no-sandbox: the student's code ran with "
                                              "the grader's rights"))
    with sw("copy in"):
        copied = copy_in(course, submission)
    log_file = course.grading_dir / "logs" / assignment / f"{student}.log"
    if not submission.refused:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        log_file.write_text("", encoding="utf-8")
    verified: list[Flag] = []
    speedups: dict[str, float] = {}
    verifier: dict[str, float] = {}
    try:
        with sw("autograde"):
            executed = autograde(course, copied, log_file)
        if executed.ran:
            with sw("verify"):
                verified, speedups = _verify(course, student, assignment, log_file, profile=verifier)
    finally:
        _parked.release(student, assignment)  # a kernel parked for a verification that did not run
    return Verified(executed, (*flags, *copied.flags, *executed.flags, *verified), speedups, dict(sw.seconds),
                    verifier)


def _later_reading(course: Course, verified: Verified) -> Verified:
    """The cells a submission's verification left ``undecided``, measured once more late in the batch.

    A decided reading replaces the stored score; a reading still too noisy keeps the better
    of the stored score and its own (never 0 on a noisy reading), flagged again. Never
    raises: a failure here leaves the first reading standing, with a note.
    """
    cells = verified.undecided
    log_file = verified.executed.log_file
    sw = timing.stages()
    try:
        with sw("later reading"):
            flags, speedups = _verify(course, verified.student, verified.assignment, log_file, only=cells)
    except Exception as err:  # noqa: BLE001 - the first reading stands, and says why
        return dataclasses.replace(verified, flags=verified.flags + (
            Flag("note", (), f"the later reading of {', '.join(sorted(cells))} failed: {err}"),))
    kept = tuple(f for f in verified.flags if f.kind != "undecided" and not (
        f.kind == "verdict-differs" and set(f.cells) <= cells))
    return dataclasses.replace(verified, flags=kept + tuple(flags), speedups={**verified.speedups, **speedups},
                               seconds={**verified.seconds, **sw.seconds})


def _finish(course: Course, verified: Verified) -> SubmissionResult:
    """Stages 4 and 5 of one submission: its feedback pages, then its scores read back and recorded."""
    executed = verified.executed
    submission = executed.copied.submission
    student, assignment = submission.student, submission.assignment
    sw = timing.stages()
    with sw("feedback"):
        pages, flags = write_pages(course, executed.copied, executed.log_file, executed.ran)
    with sw("gradebook and records"):
        score, max_score, cells = _scores(course, assignment, student)
    profile = {} if submission.refused else _profile(course, student, assignment, {**verified.seconds, **sw.seconds},
                                                     verified.verifier)
    result = SubmissionResult(student, assignment, score, max_score, cells, verified.flags + flags, pages,
                              verified.speedups, profile)
    if not submission.refused:  # a refusal is checked again on every run, so a repository put right is graded
        _write_done(course, submission, result)
    return result


def _settle(course: Course, verified: Verified) -> SubmissionResult:
    """The rest of the way for a submission handed back ``undecided``: the later reading, feedback, record.

    Never raises: the grader's own failure is a ``grading-error`` flag, as in :func:`_grade_safely`.
    """
    try:
        return _finish(course, _later_reading(course, verified))
    except Exception as err:  # noqa: BLE001 - one submission's failure never stops the batch
        return _failed(course, verified.executed.copied.submission, err)


def _failed(course: Course, submission: Submission, err: Exception) -> SubmissionResult:
    """The result of a submission whose grading the grader itself failed: the scores stored, flagged."""
    score, max_score, cells = _scores(course, submission.assignment, submission.student)
    return SubmissionResult(submission.student, submission.assignment, score, max_score, cells,
                            (Flag("grading-error", (), f"{type(err).__name__}: {err}"),))


def _profile(course: Course, student: str, assignment: str, seconds: dict[str, float],
             verifier: dict[str, float]) -> dict[str, float]:
    """The stage timer's readings, with autograde and verify split into their parts."""
    from course_lib.grader.profile import kernel_stages, verifier_stages

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


# --- private helpers -------------------------------------------------------------------------


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


def _sync_assignment(course: Course, assignment: str) -> None:
    """Put the assignment's cells into the gradebook, releasing into grading/release, not assignments/."""
    cfg = course.config()
    release_dir = course.grading_dir / "release"
    cfg.CourseDirectory.release_directory = str(release_dir)
    outcome = _run(course, GenerateAssignment, cfg, assignment, force=True, create_assignment=True)
    if not outcome["success"]:
        raise CourseError(f"could not load {assignment!r} into the gradebook: {_last_error(outcome)}")


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


@contextlib.contextmanager
def _progress_bar(total: int, show: bool | None):
    from tqdm import tqdm

    # By default only for more than five submissions, and only on a terminal (disable=None).
    disable = (None if total > 5 else True) if show is None else not show
    with tqdm(total=total, file=sys.stderr, unit="submission", disable=disable, leave=False) as bar:
        yield bar


