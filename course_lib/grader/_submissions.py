"""Finding students' notebooks in a folder of submissions, in either layout the course meets.

nbgrader's layout
    ``DIR/STUDENT/ASSIGNMENT/NOTEBOOK.ipynb`` (what ``nbgrader collect`` or a zip export gives).
A course-wide repository per student
    ``DIR/REPO/assignments/ASSIGNMENT/NOTEBOOK.ipynb`` (layout ``course-repo``; the student
    id is ``REPO``, from which ``course grade --repo-prefix`` takes Classroom's prefix off).
GitHub Classroom's layout
    ``DIR/ASSIGNMENT-STUDENT/...``: one cloned repository per student, the notebook anywhere
    inside it (``gh classroom clone student-repos`` names the folders this way).

A folder may mix both. What is found is a list of :class:`Submission`; nothing is copied
until :func:`copy_submission` puts one into nbgrader's ``submitted`` folder.

Student names as LMS exports write them ("José García") are graded under an nbgrader-safe
id from :func:`safe_student_id`: the name itself when it is already safe, else an ASCII
slug and a short hash of the name. The id is deterministic (the same name always gives the
same id, whichever Unicode normal form the zip used), and :func:`record_names` keeps the
original names beside the grades so that reports can show them (:func:`read_names`).

Symbolic links in a submission are never followed: a notebook or folder that is a link is
skipped with a note, so a link cannot pull the grader's files into a submission, and a
repository with links to ``.`` cannot make the search walk forever. A repository is walked
without recursion and within limits (:data:`WALK_LIMITS`: depth, entries, seconds): one
that exceeds them (1,200 nested folders, a million files) is *refused*, that submission
alone, with a message that says which limit it passed; the rest of the batch is graded.
A folder whose name is not valid UTF-8 (a zip made with a Latin-1 name) is read as
Windows-1252 for display, and its id is made from its bytes.

:func:`answered` goes the other way, for samples, benchmarks and proofs: it makes a
submission from a released notebook by filling its answer cells.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import os
import re
import shutil
import time
import unicodedata
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from course_lib.grader._text import display_name, writable

__all__ = ["Submission", "find_submissions", "copy_submission", "UNREADABLE_SUFFIX", "grade_id", "answered",
           "safe_student_id", "record_names", "read_names", "NAMES_FILE", "WALK_LIMITS"]

UNREADABLE_SUFFIX = ".unreadable"
"""Suffix under which an unreadable notebook is kept, so nbgrader skips it but nothing is lost."""

NAMES_FILE = "students.csv"
"""File in the grading folder that maps each safe student id to the name it was made from."""

_STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9.@-]+")
_SLUG_LENGTH = 40
_SKIP_DIRS = {".git", ".ipynb_checkpoints", "__pycache__", ".venv", "node_modules"}

WALK_LIMITS = {"depth": 64, "entries": 50_000, "seconds": 30.0}
"""How far one repository is searched for its notebook: nested folders, entries seen, seconds."""


@dataclass(frozen=True)
class Submission:
    """One student's submission of one assignment, as found on disk.

    ``student`` is the nbgrader-safe id (see :func:`safe_student_id`), ``name`` the name
    the folder gave when it differs. ``notebooks`` maps a notebook name (without
    ``.ipynb``) to the file found for it; a notebook of the assignment that was not found
    (or was a symbolic link) is absent. ``notes`` are remarks for the
    report, e.g. that several copies of a notebook were found and which one was used.
    """

    student: str
    assignment: str
    layout: str
    notebooks: dict[str, Path]
    notes: tuple[str, ...] = ()
    name: str = ""
    refused: str = ""
    """Why the submission is not graded at all (its folder is past :data:`WALK_LIMITS`); empty if graded."""

    @property
    def display_name(self) -> str:
        """The student's name as the submission folder spelled it (``student`` when it was safe)."""
        return self.name or self.student


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
        if two folders claim the same student.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"submissions folder not found: {folder}")
    found: dict[str, Submission] = {}
    for child in sorted(p for p in folder.iterdir() if _real_dir(p) and p.name not in _SKIP_DIRS):
        submission = _nbgrader_submission(child, assignment, notebook_names) or \
            _course_repo_submission(child, assignment, notebook_names) or \
            _classroom_submission(child, assignment, notebook_names)
        if submission is None:
            continue
        safe = safe_student_id(submission.student)
        if safe != submission.student:
            submission = dataclasses.replace(submission, student=safe, name=display_name(submission.student))
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
        if Path(path).is_symlink() or not Path(path).is_file():
            continue  # only regular files: a link could point at anything the grader can read
        suffix = ".ipynb" if readable.get(name, True) else ".ipynb" + UNREADABLE_SUFFIX
        shutil.copyfile(path, destination / f"{name}{suffix}")


def safe_student_id(name: str) -> str:
    """The nbgrader-safe id under which the student called ``name`` is graded.

    A name that is already safe (letters, digits and ``_ . @ -``, starting with a letter or
    digit) is its own id. Any other name becomes an ASCII slug (accents dropped, other runs
    of unsafe characters turned into ``_``, at most 40 characters) followed by ``-`` and
    the first 8 hex digits of the SHA-256 of the name in Unicode NFC form: two names that
    slug alike ("Jose Garcia", "José García") keep different ids, and the same name always
    gives the same id. The original is kept by :func:`record_names` for display.

    Raises
    ------
    ValueError
        for an empty name.

    Examples
    --------
    >>> safe_student_id("ana.lopez@uni.es")
    'ana.lopez@uni.es'
    >>> safe_student_id("José García")
    'Jose_Garcia-978edf99'
    >>> safe_student_id("Jose\u0301 Garci\u0301a")        # the same name, decomposed (macOS zip)
    'Jose_Garcia-978edf99'
    >>> safe_student_id(os.fsdecode(b"Jos\\xe9 Garc\\xeda"))  # the same name in Latin-1 bytes: another folder
    'Jose_Garcia-0de82448'
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a student name must be a non-empty string, got {name!r}")
    try:
        canonical = unicodedata.normalize("NFC", name)
        raw = canonical.encode("utf-8")
    except UnicodeEncodeError:
        # Not UTF-8 (a folder named in Latin-1): the slug from the name as read, the digest
        # from the bytes themselves, so that two such folders never share an id.
        canonical = unicodedata.normalize("NFC", display_name(name))
        raw = os.fsencode(name) if _escapes_only(name) else writable(name).encode("utf-8")
    if _STUDENT_ID.match(canonical) and raw == canonical.encode("utf-8"):
        return canonical
    ascii_name = unicodedata.normalize("NFKD", canonical).encode("ascii", "ignore").decode()
    slug = _UNSAFE_RUN.sub("_", ascii_name).strip("_.@-")[:_SLUG_LENGTH].rstrip("_.@-")
    digest = hashlib.sha256(raw).hexdigest()[:8]
    return f"{slug}-{digest}" if slug else f"student-{digest}"


def record_names(grading_dir: Path, submissions: list[Submission]) -> Path:
    """Add the original names of ``submissions`` whose id differs to ``grading_dir/students.csv``.

    Earlier entries are kept (a later run may grade fewer students); the file has the
    columns ``student`` (the safe id, as in ``grades.csv``) and ``name``.
    """
    path = Path(grading_dir) / NAMES_FILE
    names = read_names(grading_dir)
    names.update({s.student: writable(s.name) for s in submissions if s.name})
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "name"])
        writer.writerows(sorted(names.items()))
    os.replace(partial, path)  # whole or as before, never cut short
    return path


def read_names(grading_dir: Path) -> dict[str, str]:
    """The safe id -> original name map kept by :func:`record_names` (empty when none was kept).

    Examples
    --------
    >>> names = read_names(course.grading_dir)              # doctest: +SKIP
    >>> names.get(row["student"], row["student"])           # doctest: +SKIP
    """
    path = Path(grading_dir) / NAMES_FILE
    if not path.exists():
        return {}
    with path.open(newline="", encoding="utf-8") as fh:
        return {row["student"]: row["name"] for row in csv.DictReader(fh)}


# --- private helpers -------------------------------------------------------------------------

def _nbgrader_submission(child: Path, assignment: str, names: list[str]) -> Submission | None:
    folder = child / assignment
    if not _real_dir(folder):
        return None
    notebooks, notes = {}, []
    for name in names:
        path = folder / f"{name}.ipynb"
        if path.is_symlink():
            notes.append(f"{name}.ipynb is a symbolic link; links are not followed")
        elif path.is_file():
            notebooks[name] = path
    return Submission(child.name, assignment, "nbgrader", notebooks, tuple(notes))


def _course_repo_submission(child: Path, assignment: str, names: list[str]) -> Submission | None:
    # One repository per student for the whole course (what `course student-repo` makes):
    # DIR/REPO/assignments/ASSIGNMENT/NAME.ipynb; the caller may take a prefix off REPO.
    folder = child / "assignments" / assignment
    if not (_real_dir(child / "assignments") and _real_dir(folder)):
        return None
    found = _nbgrader_submission(child / "assignments", assignment, names)  # same rules for links
    return Submission(child.name, assignment, "course-repo", found.notebooks, found.notes)


def _classroom_submission(child: Path, assignment: str, names: list[str]) -> Submission | None:
    prefix = f"{assignment}-"
    if not child.name.startswith(prefix) or len(child.name) == len(prefix):
        return None
    notebooks, notes = {}, []
    links: list[Path] = []
    try:
        found = _walk_notebooks(child, {f"{name}.ipynb" for name in names}, links)
    except _TooLarge as why:
        return Submission(child.name[len(prefix):], assignment, "classroom", {}, (),
                          refused=f"the repository was not searched for its notebook: {why}")
    for name in names:
        copies = sorted((p for p in found if p.name == f"{name}.ipynb"),
                        key=lambda p: (len(p.parts), str(p)))
        if copies:
            notebooks[name] = copies[0]
        if len(copies) > 1:
            notes.append(f"{len(copies)} copies of {name}.ipynb; graded {copies[0].relative_to(child)}")
    if links:
        shown = ", ".join(str(p.relative_to(child)) for p in links[:3])
        more = f" and {len(links) - 3} more" if len(links) > 3 else ""
        notes.append(f"{len(links)} symbolic link(s) not followed: {shown}{more}")
    return Submission(child.name[len(prefix):], assignment, "classroom", notebooks, tuple(writable(n) for n in notes))


class _TooLarge(Exception):
    """A repository past one of :data:`WALK_LIMITS`; the message says which."""


def _walk_notebooks(root: Path, filenames: set[str], links: list[Path]) -> list[Path]:
    """The files named in ``filenames`` under ``root``; links are recorded in ``links``, never followed.

    A stack, not recursion, and bounded by :data:`WALK_LIMITS`: a tree past any of them
    raises :class:`_TooLarge`. os.scandir's entry types do not follow links, so a
    repository with links to "." or ".." is walked once.
    """
    limits, found, seen = WALK_LIMITS, [], 0
    deadline = time.monotonic() + limits["seconds"]
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as scanned:
                entries = list(scanned)
        except OSError:
            continue  # unreadable: nothing found there
        seen += len(entries)
        if seen > limits["entries"]:
            raise _TooLarge(f"it holds more than {limits['entries']:,} files and folders")
        if time.monotonic() > deadline:
            raise _TooLarge(f"searching it took more than {limits['seconds']:g} s")
        for entry in sorted(entries, key=lambda e: e.name, reverse=True):
            path = Path(entry.path)
            if entry.is_symlink():
                links.append(path)
            elif entry.is_dir(follow_symlinks=False):
                if entry.name in _SKIP_DIRS:
                    continue
                if depth + 1 > limits["depth"]:
                    raise _TooLarge(f"its folders are nested more than {limits['depth']} deep")
                stack.append((path, depth + 1))
            elif entry.name in filenames and entry.is_file(follow_symlinks=False):
                found.append(path)
    links.sort()
    return found


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _escapes_only(name: str) -> bool:
    """Whether every surrogate in ``name`` stands for a byte (so ``os.fsencode`` gives its bytes)."""
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in name)
