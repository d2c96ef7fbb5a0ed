"""Stage 1 of ``course grade``: find the submissions, copy each into the grading folder.

:func:`find` lists an assignment's submissions in a folder (nbgrader's layout, GitHub
Classroom's repositories, a course-wide repository per student); :func:`copy_in` copies
one into ``grading/submitted/STUDENT/ASSIGNMENT`` with the time it was handed in, checks
that each notebook can be graded at all, and hands on a :class:`CopiedIn` to the next
stage, :func:`course_lib.grader.execute.autograde`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader import utils as nbutils
from nbgrader.nbgraderformat import MetadataValidator

from course_lib.grader._submissions import Submission, copy_submission, find_submissions
from course_lib.grader.common import Course, CourseError, Flag

__all__ = ["CopiedIn", "find", "copy_in"]


@dataclass(frozen=True)
class CopiedIn:
    """A submission in ``grading/submitted``: which of its notebooks can be graded, and why not the others.

    Examples
    --------
    >>> from course_lib.grader._submissions import Submission
    >>> sub = Submission("ana", "week1", "nbgrader", {"w1": Path("w1.ipynb")})
    >>> CopiedIn(sub, {"w1": False}, {"w1": "not valid JSON"}, (), ()).gradable
    False
    """

    submission: Submission
    readable: dict[str, bool]
    """By notebook name: valid JSON, a valid notebook, valid nbgrader metadata."""
    problems: dict[str, str | None]
    """By notebook name: why it cannot be graded, or None."""
    missing: tuple[str, ...]
    """The assignment's notebooks the submission does not have."""
    flags: tuple[Flag, ...]
    """``malformed`` and ``no-notebook``."""

    @property
    def gradable(self) -> bool:
        """At least one notebook that nbgrader can run."""
        return any(self.readable.values())


def find(folder: Path, assignment: str, notebooks: list[str], repo_prefix: str = "") -> list[Submission]:
    """The submissions of ``assignment`` in ``folder``, in any layout :func:`find_submissions` knows.

    ``repo_prefix``: the GitHub Classroom assignment name taken off course-wide
    repositories' folder names (``PREFIX-STUDENT``) to give the student ids.

    Raises
    ------
    CourseError
        for a folder that cannot be read, or two submissions left for one student once the
        prefix is taken off.
    """
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


def copy_in(course: Course, submission: Submission) -> CopiedIn:
    """Copy a submission into ``grading/submitted``, its earlier grading's output removed.

    A notebook that cannot be read is copied byte for byte beside the others (see
    :func:`course_lib.grader._submissions.copy_submission`) and flagged ``malformed``; one
    not in the submission is flagged ``no-notebook``. A submission refused before grading
    (:attr:`Submission.refused`: a folder past the walk's limits) is not copied: every
    notebook gets the reason as its problem, and the submission is flagged ``refused``.
    """
    student, assignment = submission.student, submission.assignment
    if submission.refused:
        for step in ("submitted", "autograded", "feedback"):
            _remove(course.step(step, student, assignment))
        problems = {name: submission.refused for name in course.notebooks(assignment)}
        return CopiedIn(submission, {}, problems, (), (Flag("refused", (), submission.refused),))
    flags: list[Flag] = []
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
    return CopiedIn(submission, readable, problems, tuple(missing), tuple(flags))


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
    """Remove a folder of the grading tree, if it is there."""
    if path.exists():
        nbutils.rmtree(str(path))
