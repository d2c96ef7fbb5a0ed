"""What every stage of the grader shares: the course, the errors, a flag, a submission's result.

The stages of ``course grade`` (:mod:`course_lib.grader.nbgrading` chains them) and the
modules beside them (feedback, exports, the student repository, marking, the report) all
speak of a :class:`Course`, raise :class:`CourseError` for bad input and hand on
:class:`Flag` and :class:`SubmissionResult`. They live here, in a module that imports no
other module of the grader but :mod:`course_lib.grader._text`, so that any of them can
import it without importing the hub (the import circles this module was made to end).
:class:`Course` reads ``nbgrader_config.py`` with traitlets; nbgrader itself is not
imported here.

Examples
--------
>>> Flag("timeout", ("test_speed",)).label
'timeout:test_speed'
>>> str(Flag("malformed", detail="not valid JSON"))
'malformed'
>>> SubmissionResult("ana", "week1", 3.0, 4.0, flags=(Flag("late"),)).has_flag("late")
True
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from course_lib.grader._text import writable

__all__ = ["CONFIG_FILE", "Course", "CourseError", "Flag", "GRADED_OUTSIDE", "GRADED_OUTSIDE_NOTE",
           "SubmissionResult", "graded_outside"]

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
    ``tampering``, ``unreliable``, ``verdict-differs``, ``undecided``, ``unverified``,
    ``reads-NBGRADER_EXECUTION``, ``grading-error``, ``unsandboxed``, ``refused``, ``disk-quota``,
    ``late``, ``claimed-time``, ``note``; ``cells`` are the grade ids concerned; ``detail`` is a
    sentence for the report. Every part is made writable as UTF-8 when the flag is made (see
    :mod:`course_lib.grader._text`): a detail may quote a student's message or file name.
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
    profile: dict[str, float] = field(default_factory=dict)
    """Seconds this grading spent per stage (see :mod:`course_lib.grader.profile`)."""
    penalty: float = 0.0
    """The late penalty taken off ``score`` (see :mod:`course_lib.grader.exports`)."""
    status: str = "graded"
    """``graded`` or ``late``."""
    skipped: bool = False
    """Graded before and unchanged since, so not graded again (its scores are the gradebook's now)."""

    @property
    def flagged(self) -> bool:
        return bool(self.flags)

    def has_flag(self, kind: str) -> bool:
        return any(flag.kind == kind for flag in self.flags)


# --- private helpers -------------------------------------------------------------------------

def _driver(url: str) -> str:
    """``postgresql://`` with the driver that is installed: SQLAlchemy 2.1 assumes psycopg 3,
    the course environment pins psycopg2."""
    if url.startswith(("postgresql://", "postgres://")):
        import importlib.util

        if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2") is not None:
            return "postgresql+psycopg2://" + url.split("://", 1)[1]
    return url


def _find_root(start: str | Path | None) -> Path:
    """The folder holding ``nbgrader_config.py``: ``start`` itself, else found upwards from here."""
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
    """Set environment variables for the block, then put back what was there."""
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


GRADED_OUTSIDE = "# Graded outside your kernel."
"""A line that marks a test cell graded only outside the student's kernel (see :func:`graded_outside`)."""

GRADED_OUTSIDE_NOTE = ("This check is made by the grader outside your notebook's kernel, once your "
                       "notebook has run; its verdict follows.\n")
"""What the kernel's run gives such a cell instead of running it (kept in the feedback)."""


def graded_outside(cell: Any) -> bool:
    r"""Whether a cell is a locked test cell that only the check outside the kernel grades.

    Such a cell checks a student's own figures against the grader's own measurement of the
    same code (a table of seconds, a claimed speed-up): costly, and in the kernel worth
    nothing, since a correctness test there only ever caps the verdict made outside it, where
    the student's code cannot reach the check. So the kernel does not run it while grading
    (:class:`course_lib.grader._nbpreprocessors.CourseExecute`) and the verifier's verdict is stored
    (:func:`course_lib.grader.verify._verify`). The mark is the line :data:`GRADED_OUTSIDE`
    in the cell's source: the kernel reads it in the instructor's source, which nbgrader
    restores into every locked cell before it runs, and the verifier in the solution itself.

    Examples
    --------
    >>> from nbformat.v4 import new_code_cell
    >>> cell = new_code_cell(GRADED_OUTSIDE + "\nassert_same(f(), 1)")
    >>> cell.metadata["nbgrader"] = {"grade": True, "grade_id": "t", "locked": True, "solution": False}
    >>> graded_outside(cell)
    True
    >>> cell.metadata["nbgrader"]["locked"] = False  # a cell the student may edit never is
    >>> graded_outside(cell)
    False
    """
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return (cell.get("cell_type") == "code" and bool(meta.get("grade")) and bool(meta.get("locked"))
            and not meta.get("solution")
            and any(line.strip() == GRADED_OUTSIDE for line in cell.get("source", "").splitlines()))
