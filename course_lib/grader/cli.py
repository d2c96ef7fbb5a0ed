"""``course``: release assignments, grade submissions, and let students check their work.

::

    course release [ASSIGNMENT]                  regenerate assignments/ from solutions/
    course collect ASSIGNMENT --submissions DIR  fetch the students' repositories, record what and when
    course grade [ASSIGNMENT] --submissions DIR  collect, autograde, feedback, grades.csv, table
    course mark ASSIGNMENT [STUDENT CELL POINTS] list the answers marked by hand, or record a mark
    course feedback [ASSIGNMENT]                 feedback, grades.csv, flags.csv again from the gradebook
    course export --format canvas|moodle|long   grades as a learning management system imports them
    course check NOTEBOOK                        a student's self-check of the visible tests
    course student-repo DIR [--url URL] [--git]  the public repository students open, without solutions
    course new NAME                              a new source notebook solutions/NAME/NAME.ipynb to edit
    course calibrate ASSIGNMENT [--runs N]       measure the solution's performance cells, suggest thresholds
    course selftest ASSIGNMENT                   grade the reference, the release and the variants to expected scores
    course reset [--yes]                         delete the grading folder's state (keeps .venv and sources)

Exit status (scripts may rely on it)
------------------------------------
0
    done: released; every submission graded and none flagged; every visible test passed.
1
    done, but look: some submission is flagged for review (unreadable, grade cell put back,
    timeout, kernel died, tampering, ...), or ``check`` found a failing visible test.
2
    nothing done: bad usage or input (missing folder, unknown assignment, unreadable
    notebook given to ``check``, no course repository found); one line on stderr says why.

The folders and the gradebook come from ``nbgrader_config.py``; ``--grading-dir``, ``--db``
and ``--timeout`` override them (or set ``COURSE_GRADING_DIR``, ``COURSE_DB_URL``,
``COURSE_CELL_TIMEOUT``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main", "EXIT_OK", "EXIT_FLAGGED", "EXIT_USAGE"]

EXIT_OK = 0
EXIT_FLAGGED = 1
EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``course`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit status.

    Examples
    --------
    >>> main(["release", "no-such-assignment", "--root", "/"])
    2
    """
    args = _parser().parse_args(argv)
    # Imported here: printing --help needs none of the grader (nbgrading takes two seconds to import).
    from course_lib.grader.common import CourseError

    try:
        return args.run(args)
    except CourseError as err:
        print(f"course {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"course {args.command}: interrupted", file=sys.stderr)
        return 130


# --- private helpers -------------------------------------------------------------------------

def _release(args: argparse.Namespace) -> int:
    from course_lib.grader import nbgrading

    course = nbgrading.Course.locate(root=args.root)
    names = [args.assignment] if args.assignment else course.assignments()
    if not names:
        raise nbgrading.CourseError(f"no assignments in {course.root / 'solutions'}")
    for name in names:
        if not args.no_validate:
            _validate(course, name)
        folder = nbgrading.release(course, name)
        print(f"released {name} -> {_show(folder, course.root)}")
    return EXIT_OK


def _validate(course, name: str) -> None:
    from course_lib.grader import authoring, nbgrading

    problems = authoring.validate_release(course, name)
    if problems:
        raise nbgrading.CourseError(f"not releasing {name}: {'; '.join(problems)} "
                                    f"(see course selftest {name}; --no-validate skips this check)")


def _new(args: argparse.Namespace) -> int:
    from course_lib.grader import authoring, nbgrading

    course = nbgrading.Course.locate(root=args.root)
    try:
        path = authoring.new_assignment(course.root, args.name)
    except ValueError as err:
        raise nbgrading.CourseError(str(err)) from None
    print(f"new assignment -> {_show(path, course.root)}")
    print(f"Next: edit it (Jupyter's Create Assignment toolbar shows the cells' roles), then "
          f"course calibrate {args.name}, course selftest {args.name}, course release {args.name}.")
    return EXIT_OK


def _calibrate(args: argparse.Namespace) -> int:
    from course_lib.grader import authoring, nbgrading

    course = nbgrading.Course.locate(root=args.root, timeout=args.timeout)
    course.notebooks(args.assignment)
    load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the start"
    cells = authoring.calibrate(course, args.assignment, runs=args.runs, busy=not args.no_busy,
                                log=lambda line: print(line, file=sys.stderr, flush=True))
    print(authoring.format_calibration(args.assignment, cells, load))
    return EXIT_FLAGGED if any(c.problems or c.unstable for c in cells) else EXIT_OK


def _selftest(args: argparse.Namespace) -> int:
    from course_lib.grader import authoring, nbgrading

    course = nbgrading.Course.locate(root=args.root, timeout=args.timeout)
    course.notebooks(args.assignment)
    rows = authoring.selftest(course, args.assignment, variants=args.variants)
    print(authoring.format_selftest(args.assignment, rows))
    return EXIT_OK if all(r.ok for r in rows) else EXIT_FLAGGED


def _reset(args: argparse.Namespace) -> int:
    from course_lib.grader import nbgrading

    course = nbgrading.Course.locate(root=args.root, grading_dir=args.grading_dir)
    folder = course.grading_dir
    if not folder.exists():
        print(f"nothing to reset: {_show(folder, course.root)} does not exist")
        return EXIT_OK
    if course.root == folder or course.root.is_relative_to(folder) or (course.root / "solutions") == folder:
        raise nbgrading.CourseError(f"refusing to delete {folder}: it holds the course itself")
    if not args.yes:
        if not sys.stdin.isatty():
            raise nbgrading.CourseError(f"this deletes {folder} (gradebook, grades, feedback, collection records); "
                                        "add --yes to confirm")
        answer = input(f"Delete {folder} (gradebook, grades, feedback, logs, collection records)? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return EXIT_OK
    shutil.rmtree(folder)
    print(f"deleted {_show(folder, course.root)} (a PostgreSQL gradebook given by --db is not touched)")
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from course_lib.grader import nbgrading, report

    course = nbgrading.Course.locate(root=args.root, grading_dir=args.grading_dir, db_url=args.db)
    path = report.write_report(course, args.output)
    print(f"Report: {_show(path, course.root)}")
    return EXIT_OK


def _grade(args: argparse.Namespace) -> int:
    from course_lib.grader import nbgrading

    course = nbgrading.Course.locate(root=args.root, grading_dir=args.grading_dir, db_url=args.db,
                                     timeout=args.timeout, notebook_timeout=args.notebook_timeout,
                                     memory_limit=args.memory_limit, sandboxed=not args.no_sandbox)
    if args.assignment:
        course.notebooks(args.assignment)  # unknown assignment: one-line error before any work
    roster = _roster(args.roster, course.root)
    results = nbgrading.grade(course, args.submissions, [args.assignment] if args.assignment else None,
                              progress=False if args.no_progress else None, force=args.force,
                              workers=args.workers, scheduler=args.scheduler, roster=roster,
                              due=args.due, repo_prefix=args.repo_prefix or os.environ.get("COURSE_REPO_PREFIX", ""),
                              warn=_warner("grade"))
    print(nbgrading.format_table(results))
    print()
    if args.profile:
        from course_lib.grader.profile import format_profile

        print(format_profile((f"{r.assignment}/{r.student}", r.profile) for r in results))
        print()
    graded = [r for r in results if not r.skipped]
    skipped = [r for r in results if r.skipped]
    print(f"Graded:    {len(graded)} submission{'' if len(graded) == 1 else 's'}{_listed(graded)}")
    if skipped:
        print(f"Skipped:   {len(skipped)} unchanged since graded (feedback and grades.csv brought up to date; "
              f"--force grades them again){_listed(skipped)}")
    feedback = course.grading_dir / "feedback"
    print(f"Feedback:  {_show(feedback, course.root)}/STUDENT/ASSIGNMENT/*.html")
    print(f"Grades:    {_show(course.grading_dir / 'grades.csv', course.root)}")
    print(f"Flags:     {_show(course.grading_dir / 'flags.csv', course.root)}")
    print(f"Logs:      {_show(course.grading_dir / 'logs', course.root)}/ASSIGNMENT/STUDENT.log")
    print(f"Gradebook: {_show_url(course.db_url, course.root)}")
    flagged = [r for r in results if r.flagged]
    if flagged:
        print(f"{len(flagged)} of {len(results)} submissions flagged for review.")
        return EXIT_FLAGGED
    return EXIT_OK


def _collect(args: argparse.Namespace) -> int:
    from course_lib.grader import collect, nbgrading

    course = nbgrading.Course.locate(root=args.root, grading_dir=args.grading_dir, db_url=args.db)
    names = course.notebooks(args.assignment)
    if not args.submissions.is_dir():
        raise nbgrading.CourseError(f"submissions folder not found: {args.submissions}")
    prefix = args.repo_prefix or os.environ.get("COURSE_REPO_PREFIX", "")
    due = args.due if args.due is not None else _stored_due(course, args.assignment)
    if args.due is not None:
        course.grading_dir.mkdir(parents=True, exist_ok=True)
        nbgrading._update_gradebook(course, args.assignment, None, args.due)
    try:
        report = collect.collect(course.grading_dir, args.submissions, args.assignment,
                                 lambda folder: nbgrading._find(folder, args.assignment, names, prefix), due,
                                 fetch=not args.no_fetch)
    except ValueError as err:
        raise nbgrading.CourseError(str(err)) from None
    for line in report.warnings:
        print(f"course collect: warning: {line}", file=sys.stderr)
    for repo, why in sorted(report.failed.items()):
        print(f"course collect: warning: {repo}: {why}", file=sys.stderr)
    counted = "" if report.counts_as == report.started else f" (the first since the due date: counts as {report.counts_as} UTC)"
    print(f"Collected {args.assignment} at {report.started} UTC{counted}: {len(report.recorded)} new or changed"
          f"{_listed_ids(report.recorded)}, {len(report.unchanged)} unchanged, {len(report.failed)} not fetched, "
          f"{len(report.not_git)} not in a git repository")
    print(f"Record:    {_show(collect.record_path(course.grading_dir, args.assignment), course.root)}")
    return EXIT_FLAGGED if report.failed else EXIT_OK


def _mark(args: argparse.Namespace) -> int:
    from course_lib.grader import marking, nbgrading

    course = nbgrading.Course.locate(root=args.root, grading_dir=args.grading_dir, db_url=args.db)
    given = [args.student, args.cell, args.points]
    if any(x is not None for x in given) and not all(x is not None for x in given):
        raise nbgrading.CourseError("to record a mark give STUDENT CELL POINTS; with the assignment alone it "
                                    "lists the answers that wait for one")
    if args.points is not None:
        cell = marking.record_mark(course, args.assignment, args.student, args.cell, args.points, args.comment)
        print(f"marked {args.assignment} {cell.student} {cell.grade_id}: {cell.points:g} / {cell.max_points:g}"
              + (f" ({cell.comment})" if cell.comment else ""))
        print(f"Next: course feedback {args.assignment} (feedback pages and grades.csv from the gradebook)")
        return EXIT_OK
    cells = marking.manual_cells(course, args.assignment) if args.all else marking.unmarked(course, args.assignment)
    for cell in cells:
        state = "waits for a mark" if cell.points is None else f"{cell.points:g} / {cell.max_points:g}"
        print(f"== {cell.student}  {cell.grade_id}  ({cell.max_points:g} points)  {state}")
        print("\n".join("   " + line for line in (cell.answer or "(no answer)").splitlines()))
        if cell.comment:
            print(f"   comment: {cell.comment}")
    waiting = sum(1 for c in cells if c.points is None)
    print(f"{waiting} answer{'' if waiting == 1 else 's'} of {args.assignment} wait{'s' if waiting == 1 else ''} "
          f"for a mark: course mark {args.assignment} STUDENT CELL POINTS [--comment TEXT]")
    return EXIT_OK


def _feedback(args: argparse.Namespace) -> int:
    from course_lib.grader import nbgrading

    course = nbgrading.Course.locate(root=args.root, grading_dir=args.grading_dir, db_url=args.db)
    if args.assignment:
        course.notebooks(args.assignment)
    roster = _roster(args.roster, course.root)
    rows = nbgrading._export(course, [], roster)
    wanted = [(r.student, r.assignment) for r in rows if r.submitted
              and (not args.assignment or r.assignment == args.assignment)]
    written = nbgrading.refresh_feedback(course, wanted)
    results = nbgrading.recorded_results(course, rows, args.assignment)
    print(nbgrading.format_table(results))
    print()
    print(f"Feedback:  {len(written)} page{'' if len(written) == 1 else 's'} written again from the gradebook, "
          f"nothing graded again ({_show(course.grading_dir / 'feedback', course.root)}/STUDENT/ASSIGNMENT/*.html)")
    print(f"Grades:    {_show(course.grading_dir / 'grades.csv', course.root)}")
    print(f"Flags:     {_show(course.grading_dir / 'flags.csv', course.root)}")
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    from course_lib.grader import exports, nbgrading

    course = nbgrading.Course.locate(root=args.root, grading_dir=args.grading_dir, db_url=args.db)
    for name in args.assignment or []:
        course.notebooks(name)
    roster = _roster(args.roster, course.root)
    rows = exports.grade_rows(course, roster, assignments=args.assignment or None)
    if not rows:
        raise nbgrading.CourseError(f"nothing graded yet in {course.grading_dir} (run course grade first)")
    target = args.output or course.grading_dir / f"grades-{args.format}.csv"
    exports.write_export(rows, target, args.format)
    if args.format == "canvas":
        unnamed = sorted({r.student for r in rows if not (r.lms.get("canvas_id") or r.lms.get("sis_user_id")
                                                          or r.lms.get("sis_login_id"))})
        if unnamed:
            print(f"course export: warning: {len(unnamed)} student{'s have' if len(unnamed) != 1 else ' has'} no "
                  f"canvas_id, sis_user_id or sis_login_id in the roster; Canvas will look them up by name"
                  f"{_listed_ids(unnamed)}", file=sys.stderr)
    late = sum(1 for r in rows if r.status == "late")
    print(f"{args.format} export -> {_show(Path(target), course.root)}: {len({r.student for r in rows})} students, "
          f"{len({r.assignment for r in rows})} assignment(s), {late} late submission(s), scores after the late "
          "penalty")
    return EXIT_OK


def _stored_due(course, assignment: str):
    from nbgrader.api import Gradebook, MissingEntry

    from course_lib.grader._nbgrader import _nbgrader_env, _quiet_warnings
    from course_lib.grader.common import _environment

    if course.db_url.startswith("sqlite:///") and not Path(course.db_url.removeprefix("sqlite:///")).exists():
        return None
    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        try:
            return gb.find_assignment(assignment).duedate
        except MissingEntry:
            return None


def _warner(command: str):
    def warn(line: str) -> None:
        print(f"course {command}: warning: {line}", file=sys.stderr)
    return warn


def _listed(results: list) -> str:
    return _listed_ids([f"{r.assignment}/{r.student}" for r in results])


def _listed_ids(ids: list[str], most: int = 12) -> str:
    if not ids:
        return ""
    more = f" and {len(ids) - most} more" if len(ids) > most else ""
    return ": " + ", ".join(ids[:most]) + more


def _roster(given: Path | None, root: Path) -> list | None:
    from course_lib.grader import nbgrading
    from course_lib.grader.roster import read_roster

    path = given or (root / "roster.csv" if (root / "roster.csv").is_file() else None)
    if path is None:
        return None
    if not path.is_file():
        raise nbgrading.CourseError(f"roster not found: {path}")
    try:
        return read_roster(path)
    except ValueError as err:
        raise nbgrading.CourseError(str(err)) from None


def _due(text: str):
    from course_lib.grader.roster import parse_due

    try:
        return parse_due(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _check(args: argparse.Namespace) -> int:
    # the students' own self-check (course_lib.check), so both commands report alike
    from course_lib import check
    from course_lib.grader.common import CourseError

    try:
        result = check.check_notebook(args.notebook, part=args.part, timeout=args.timeout or 60)
    except check.CheckError as err:
        raise CourseError(str(err)) from None
    print(result.report())
    return EXIT_OK if result.passed else EXIT_FLAGGED


def _student_repo(args: argparse.Namespace) -> int:
    from course_lib.grader import nbgrading, student_repo

    course = nbgrading.Course.locate(root=args.root)
    dest = student_repo.write_student_repo(course.root, args.dir, url=args.url, force=args.force, git=args.git)
    config = (dest / "_config.yml").read_text(encoding="utf-8")
    print(f"student repository -> {dest}  (public at {student_repo.repository_url(config)}: push it there)")
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="course",
        description="Release assignments, grade submissions with nbgrader, check a notebook.",
        epilog="Exit status: 0 done; 1 done but flagged submissions or failing checks; 2 usage or input error.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    release = commands.add_parser("release", help="regenerate assignments/ from solutions/",
                                  description="Regenerate the student version of an assignment "
                                              "(all when none is named) with nbgrader generate_assignment.")
    release.add_argument("assignment", nargs="?", help="assignment name (a folder of solutions/)")
    release.add_argument("--no-validate", action="store_true",
                         help="release without first grading the solution (full marks) and the untouched "
                              "release (no performance points) in a temporary grading folder")
    _add_root(release)
    release.set_defaults(run=_release)

    grade = commands.add_parser("grade", help="autograde a folder of submissions",
                                description="Collect the submissions, autograde them, write feedback and "
                                            "grades.csv, and print a students x assignments table.")
    grade.add_argument("assignment", nargs="?", help="assignment name (default: every assignment found)")
    grade.add_argument("--submissions", required=True, type=Path, metavar="DIR",
                       help="DIR/STUDENT/ASSIGNMENT/*.ipynb, or GitHub Classroom's DIR/ASSIGNMENT-STUDENT/...")
    grade.add_argument("--db", metavar="URL", help="gradebook URL, e.g. postgresql://user@host/course "
                                                   "(default: SQLite in the grading folder)")
    grade.add_argument("--timeout", type=_seconds, metavar="S", help="seconds a cell may run (default 60)")
    grade.add_argument("--notebook-timeout", type=_seconds, metavar="S",
                       help="seconds a whole notebook may run (default 900)")
    grade.add_argument("--memory-limit", type=_bytes, metavar="SIZE",
                       help="memory a notebook's kernel may use, e.g. 2GB (default 4GB)")
    grade.add_argument("--grading-dir", type=Path, metavar="DIR",
                       help="where submitted/, autograded/, feedback/ and the gradebook go (default grading/)")
    grade.add_argument("--no-progress", action="store_true", help="no progress bar")
    grade.add_argument("--no-sandbox", action="store_true",
                       help="run student code without the bubblewrap sandbox (every grade is flagged "
                            "'unsandboxed'); by default grading refuses to start without one")
    grade.add_argument("--profile", action="store_true",
                       help="print where each notebook's grading time went, stage by stage")
    grade.add_argument("--workers", type=_count, default=1, metavar="N",
                       help="grade N submissions at a time, each in its own process (default 1)")
    grade.add_argument("--scheduler", metavar="ADDRESS",
                       help="grade on a Dask distributed cluster, e.g. tcp://10.0.0.5:8786 (workers must "
                            "see the course and grading folders at the same paths)")
    grade.add_argument("--roster", type=Path, metavar="FILE",
                       help="CSV with columns id, name, email: names and e-mails for the gradebook and "
                            "grades.csv, and a 'missing' row for who did not submit (default roster.csv "
                            "in the course repository, when there is one)")
    grade.add_argument("--due", type=_due, metavar="WHEN",
                       help="deadline stored as the assignment's due date, e.g. '2026-12-10 17:00' (UTC) "
                            "or '2026-12-10T17:00+01:00'; a late submission is flagged 'late', marked late in "
                            "the table, grades.csv, its feedback and the report, and loses nbgrader's late "
                            "penalty (c.LateSubmissionPlugin.penalty_method in nbgrader_config.py) wherever "
                            "its score appears")
    grade.add_argument("--repo-prefix", metavar="PREFIX",
                       help="course-wide repositories DIR/PREFIX-STUDENT/assignments/ASSIGNMENT/: the "
                            "GitHub Classroom assignment name to take off (or set COURSE_REPO_PREFIX)")
    grade.add_argument("--force", action="store_true",
                       help="grade again what was already graded (default: only new or changed submissions)")
    _add_root(grade)
    grade.set_defaults(run=_grade)

    collect = commands.add_parser("collect", help="fetch the students' repositories and record when each was seen",
                                  description="Fetch every git repository in DIR (git fetch, then the working tree "
                                              "reset to what was pushed) and record, per student, the notebooks "
                                              "found and the time of this collection, which course grade then "
                                              "takes as the submission time (a commit's own date is set by the "
                                              "student's machine). Run it at the deadline: the first collection "
                                              "at or after the due date counts as made at the due date; a "
                                              "later one that finds a notebook changed records it as late.")
    collect.add_argument("assignment", help="assignment name (a folder of solutions/)")
    collect.add_argument("--submissions", required=True, type=Path, metavar="DIR",
                         help="the cloned repositories (gh classroom clone student-repos writes them)")
    collect.add_argument("--due", type=_due, metavar="WHEN",
                         help="the deadline, stored as course grade --due stores it (default: the due date "
                              "already in the gradebook)")
    collect.add_argument("--repo-prefix", metavar="PREFIX", help="as for course grade (or COURSE_REPO_PREFIX)")
    collect.add_argument("--no-fetch", action="store_true",
                         help="record the repositories as they are, without fetching them")
    _add_grading(collect)
    collect.set_defaults(run=_collect)

    mark = commands.add_parser("mark", help="list the answers marked by hand, or record a mark",
                               description="With ASSIGNMENT alone: every answer marked by hand (the written "
                                           "explanation) that waits for a mark, with its text. With STUDENT CELL "
                                           "POINTS: record that mark in the gradebook, as formgrader would. Then "
                                           "course feedback writes the feedback and grades.csv again.")
    mark.add_argument("assignment", help="assignment name")
    mark.add_argument("student", nargs="?", help="the student: graded id, folder name or GitHub user name")
    mark.add_argument("cell", nargs="?", help="the cell's grade id, e.g. written_explanation")
    mark.add_argument("points", nargs="?", type=_number, help="the points given")
    mark.add_argument("--comment", metavar="TEXT", help="a comment the student reads in the feedback")
    mark.add_argument("--all", action="store_true", help="list the answers already marked too")
    _add_grading(mark)
    mark.set_defaults(run=_mark)

    feedback = commands.add_parser("feedback", help="write feedback, grades.csv and flags.csv again, no regrading",
                                   description="Write every feedback page, grades.csv and flags.csv again from "
                                               "the gradebook as it is now (manual marks and comments, the due "
                                               "date, late penalties), without grading anything again.")
    feedback.add_argument("assignment", nargs="?", help="only this assignment's feedback pages")
    feedback.add_argument("--roster", type=Path, metavar="FILE", help="as for course grade (default roster.csv)")
    _add_grading(feedback)
    feedback.set_defaults(run=_feedback)

    export = commands.add_parser("export", help="grades as a learning management system imports them",
                                 description="Write the grades (after late penalties) as Canvas's gradebook "
                                             "import (--format canvas), Moodle's CSV grade import (moodle) or "
                                             "one row per student and assignment (long, as grades.csv).")
    export.add_argument("--format", required=True, choices=("canvas", "moodle", "long"), help="the file's layout")
    export.add_argument("--output", type=Path, metavar="FILE", help="default GRADING/grades-FORMAT.csv")
    export.add_argument("--assignment", action="append", metavar="NAME",
                        help="only this assignment (repeat for several; default all)")
    export.add_argument("--roster", type=Path, metavar="FILE",
                        help="names, e-mails and LMS ids (sis_user_id, sis_login_id, canvas_id, section, "
                             "idnumber) of the students (default roster.csv)")
    _add_grading(export)
    export.set_defaults(run=_export)

    check = commands.add_parser("check", help="run a notebook's visible tests, with points",
                                description="Run your notebook in a fresh kernel and show which visible "
                                            "tests pass. Hidden tests run only when it is graded.")
    check.add_argument("notebook", type=Path, help="the notebook to check")
    check.add_argument("--part", metavar="N", help="only the tests of part N (and the cells before them)")
    check.add_argument("--timeout", type=_seconds, metavar="S", help="seconds a cell may run (default 60)")
    check.set_defaults(run=_check)

    report = commands.add_parser("report", help="write the class report (HTML)",
                                 description="Per assignment: the distribution of scores and of the "
                                             "speed-ups measured outside the kernels, and the flagged "
                                             "submissions, as one HTML page.")
    report.add_argument("--grading-dir", type=Path, metavar="DIR", help="the grading folder (default grading/)")
    report.add_argument("--db", metavar="URL", help="gradebook URL (default: SQLite in the grading folder)")
    report.add_argument("--output", type=Path, metavar="FILE", help="where to write it (default GRADING/report.html)")
    _add_root(report)
    report.set_defaults(run=_report)

    student = commands.add_parser("student-repo", help="write the repository students open in Codespaces",
                                  description="Write the book, course_lib, the released assignments, the "
                                              "devcontainer and a student README into DIR: no solutions, "
                                              "hidden tests, gradebook or instructor tests.")
    student.add_argument("dir", type=Path, metavar="DIR", help="where to write it (must not exist or be empty)")
    student.add_argument("--force", action="store_true", help="replace what DIR holds (its .git is kept)")
    student.add_argument("--git", action="store_true", help="git init DIR and commit the result")
    student.add_argument("--url", metavar="URL",
                         help="the public repository, https://github.com/ORG/REPO, that the book is "
                              "published from and links to (default: repository.url in _config.yml)")
    _add_root(student)
    student.set_defaults(run=_student_repo)

    new = commands.add_parser("new", help="write a new source notebook solutions/NAME/NAME.ipynb",
                              description="Write a gradable skeleton (locked setup cell, an answer cell, a "
                                          "correctness cell and a hidden speed cell) to edit into a new "
                                          "assignment. Refuses an existing name.")
    new.add_argument("name", help="the assignment's name: lower-case letters, digits and _")
    _add_root(new)
    new.set_defaults(run=_new)

    calibrate = commands.add_parser("calibrate", help="measure the solution's performance cells",
                                    description="Run the solution's speed, memory and scaling cells as the "
                                                "grader measures submissions, N times quiet and N times beside "
                                                "a CPU-bound competitor; print the measurements next to the "
                                                "thresholds, the margin left and suggested thresholds.")
    calibrate.add_argument("assignment", help="assignment name (a folder of solutions/)")
    calibrate.add_argument("--runs", type=_count, default=3, metavar="N", help="runs per condition (default 3)")
    calibrate.add_argument("--no-busy", action="store_true", help="skip the runs beside a competitor")
    calibrate.add_argument("--timeout", type=_seconds, metavar="S", help="seconds a cell may run (default 60)")
    _add_root(calibrate)
    calibrate.set_defaults(run=_calibrate)

    selftest = commands.add_parser("selftest", help="grade the reference, the release and variants",
                                   description="Grade the solution, the untouched release and the variants of "
                                               "tests/variants/ASSIGNMENT.py in a temporary grading folder and "
                                               "check each gets its expected scores.")
    selftest.add_argument("assignment", help="assignment name (a folder of solutions/)")
    selftest.add_argument("--variants", type=Path, metavar="FILE",
                          help="the variants file (default tests/variants/ASSIGNMENT.py when it exists)")
    selftest.add_argument("--timeout", type=_seconds, metavar="S", help="seconds a cell may run (default 60)")
    _add_root(selftest)
    selftest.set_defaults(run=_selftest)

    reset = commands.add_parser("reset", help="delete the grading folder (gradebook, grades, feedback)",
                                description="Delete the grading folder and everything graded in it; "
                                            "sources, assignments and .venv are kept.")
    reset.add_argument("--grading-dir", type=Path, metavar="DIR", help="the grading folder (default grading/)")
    reset.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    _add_root(reset)
    reset.set_defaults(run=_reset)
    return parser


def _add_grading(parser: argparse.ArgumentParser) -> None:
    """--grading-dir, --db and --root: where a command finds what was graded."""
    parser.add_argument("--grading-dir", type=Path, metavar="DIR", help="the grading folder (default grading/)")
    parser.add_argument("--db", metavar="URL", help="gradebook URL (default: SQLite in the grading folder)")
    _add_root(parser)


def _add_root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, metavar="DIR",
                        help="the course repository (default: found upwards from here by nbgrader_config.py)")


def _seconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of seconds such as 60, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a timeout must be positive, got {value}")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of points such as 2 or 1.5, got {text!r}") from None


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number such as 2, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"the number of workers must be at least 1, got {value}")
    return value


def _bytes(text: str) -> int:
    from course_lib.grading._checks import _parse_bytes

    try:
        value = _parse_bytes(int(text) if text.strip().isdigit() else text)
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"expected a size such as 2GB or 500MB, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a memory limit must be positive, got {text!r}")
    return value


def _show(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _show_url(url: str, root: Path) -> str:
    if url.startswith("sqlite:///"):
        return _show(Path(url.removeprefix("sqlite:///")), root)
    # never print a password that the URL may carry
    scheme, _, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if at and ":" in credentials:
        return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"
    return url


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
