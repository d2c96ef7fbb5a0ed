"""Reaching nbgrader's gradebook from the grader: its environment, without its noise, and the scores in it.

Every stage that reads or writes the gradebook (verify, score, feedback, export, marking)
opens it the same way::

    with _environment(**_nbgrader_env()), _quiet_warnings(), Gradebook(course.db_url) as gb:
        ...

These helpers live apart from the stages so that the feedback and the exports can read
the gradebook without importing the module that grades (see :mod:`course_lib.grader.common`).
nbgrader is imported only inside :func:`_scores`: importing it takes about two seconds.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from course_lib.grader.common import Course

__all__: list[str] = []  # the grader's own plumbing: the stages import the private names they use


@contextlib.contextmanager
def _quiet_warnings() -> Iterator[None]:
    """Silence warnings for the block: nbgrader's and nbformat's are not the instructor's business."""
    # nbgrader 0.9 trips SQLAlchemy 2's autoflush warnings on every submission, and nbformat
    # warns about notebooks written by old tools.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _nbgrader_env() -> dict[str, str]:
    """The environment variables nbgrader needs set while it opens or creates a gradebook."""
    # nbgrader runs the `alembic` command when it creates a gradebook, so this environment's
    # scripts folder must be on PATH even when `course` was started without activating it.
    # PYDEVD_...: keeps the kernels' debugger from warning on stderr about frozen modules.
    scripts = os.path.dirname(sys.executable)
    return {"PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")]),
            "PYDEVD_DISABLE_FILE_VALIDATION": "1"}


def _scores(course: Course, assignment: str, student: str) -> tuple[float, float, dict[str, float]]:
    """(score, max score, points by grade id) of one submission as the gradebook has them now.

    A submission not in the gradebook scores 0 of the assignment's points, with no cells.
    """
    from nbgrader.api import Gradebook, MissingEntry

    with _quiet_warnings(), Gradebook(course.db_url) as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            max_score = gb.find_assignment(assignment).max_score
            return 0.0, float(max_score), {}
        cells = {g.name: float(g.score) for nb in submission.notebooks for g in nb.grades}
        return float(submission.score), float(submission.max_score), cells
