"""Finding students' notebooks in a folder of submissions, in either layout the course meets.

nbgrader's layout
    ``DIR/STUDENT/ASSIGNMENT/NOTEBOOK.ipynb`` (what ``nbgrader collect`` or a zip export gives).
GitHub Classroom's layout
    ``DIR/ASSIGNMENT-STUDENT/...``: one cloned repository per student, the notebook anywhere
    inside it (``gh classroom clone student-repos`` names the folders this way).

A folder may mix both. What is found is a list of :class:`Submission`; nothing is copied
until :func:`copy_submission` puts one into nbgrader's ``submitted`` folder.

:func:`answered` goes the other way, for samples, benchmarks and proofs: it makes a
submission from a released notebook by filling its answer cells.
"""

from __future__ import annotations

import copy
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Submission", "find_submissions", "copy_submission", "UNREADABLE_SUFFIX", "grade_id", "answered"]

UNREADABLE_SUFFIX = ".unreadable"
"""Suffix under which an unreadable notebook is kept, so nbgrader skips it but nothing is lost."""

_STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")
_SKIP_DIRS = {".git", ".ipynb_checkpoints", "__pycache__", ".venv", "node_modules"}


@dataclass(frozen=True)
class Submission:
    """One student's submission of one assignment, as found on disk.

    ``notebooks`` maps a notebook name (without ``.ipynb``) to the file found for it; a
    notebook of the assignment that was not found is absent. ``notes`` are remarks for the
    report, e.g. that several copies of a notebook were found and which one was used.
    """

    student: str
    assignment: str
    layout: str
    notebooks: dict[str, Path]
    notes: tuple[str, ...] = ()


def grade_id(cell) -> str | None:
    """The nbgrader ``grade_id`` of a notebook cell, or None for a cell nbgrader does not track."""
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def answered(released, answers: dict[str, str]):
    """A copy of the released notebook whose cells named in ``answers`` hold the given sources.

    ``answers`` maps a ``grade_id`` to the source that a student would have written there;
    trailing newlines are dropped, as the notebook editors do. The released notebook is
    left as it was.

    Examples
    --------
    >>> import nbformat
    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
    ...     "raise NotImplementedError()", metadata={"nbgrader": {"grade_id": "f"}})])
    >>> answered(nb, {"f": "def f():\\n    return 1\\n"}).cells[0].source
    'def f():\\n    return 1'
    >>> nb.cells[0].source
    'raise NotImplementedError()'
    """
    nb = copy.deepcopy(released)
    for cell in nb.cells:
        if grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)].rstrip("\n")
    return nb


def find_submissions(folder: Path, assignment: str, notebook_names: list[str]) -> list[Submission]:
    """Every submission of ``assignment`` under ``folder``, sorted by student id.

    Raises
    ------
    FileNotFoundError
        if ``folder`` does not exist or is not a folder.
    ValueError
        if two folders claim the same student, or a folder name is not a usable student id.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"submissions folder not found: {folder}")
    found: dict[str, Submission] = {}
    for child in sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in _SKIP_DIRS):
        submission = _nbgrader_submission(child, assignment, notebook_names) or \
            _classroom_submission(child, assignment, notebook_names)
        if submission is None:
            continue
        if not _STUDENT_ID.match(submission.student):
            raise ValueError(f"{child}: {submission.student!r} is not a usable student id "
                             "(letters, digits and _ . @ - only)")
        if submission.student in found:
            raise ValueError(f"two submissions of {assignment!r} for student {submission.student!r}: "
                             f"{child} and another folder; keep one")
        found[submission.student] = submission
    return [found[student] for student in sorted(found)]


def copy_submission(submission: Submission, destination: Path, readable: dict[str, bool]) -> None:
    """Replace ``destination`` (nbgrader's submitted/STUDENT/ASSIGNMENT) with this submission.

    Only the notebooks are copied: nbgrader supplies every other file of the assignment from
    the source folder. A notebook that ``readable`` marks False is kept under the name
    ``NAME.ipynb.unreadable``, so that nbgrader treats it as missing (and scores it zero)
    while the bytes the student sent stay with the submission.
    """
    destination = Path(destination)
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    for name, path in submission.notebooks.items():
        suffix = ".ipynb" if readable.get(name, True) else ".ipynb" + UNREADABLE_SUFFIX
        shutil.copyfile(path, destination / f"{name}{suffix}")


# --- private helpers -------------------------------------------------------------------------

def _nbgrader_submission(child: Path, assignment: str, names: list[str]) -> Submission | None:
    folder = child / assignment
    if not folder.is_dir():
        return None
    notebooks = {name: folder / f"{name}.ipynb" for name in names if (folder / f"{name}.ipynb").is_file()}
    return Submission(child.name, assignment, "nbgrader", notebooks)


def _classroom_submission(child: Path, assignment: str, names: list[str]) -> Submission | None:
    prefix = f"{assignment}-"
    if not child.name.startswith(prefix) or len(child.name) == len(prefix):
        return None
    notebooks, notes = {}, []
    for name in names:
        copies = sorted(_walk_notebooks(child, f"{name}.ipynb"), key=lambda p: (len(p.parts), str(p)))
        if copies:
            notebooks[name] = copies[0]
        if len(copies) > 1:
            notes.append(f"{len(copies)} copies of {name}.ipynb; graded {copies[0].relative_to(child)}")
    return Submission(child.name[len(prefix):], assignment, "classroom", notebooks, tuple(notes))


def _walk_notebooks(root: Path, filename: str):
    for path in root.iterdir():
        if path.is_dir():
            if path.name not in _SKIP_DIRS:
                yield from _walk_notebooks(path, filename)
        elif path.name == filename:
            yield path
