"""nbgrader settings for Measure First.

Read by every ``nbgrader ...`` command run from this folder and by the ``course`` command
(``course release``, ``course grade``), so both grade the same way.

Layout
------
- ``solutions/ASSIGNMENT/``: the instructor's source notebooks (solutions, hidden tests).
- ``assignments/ASSIGNMENT/``: the student versions, generated and committed.
- ``grading/``: git-ignored; ``submitted/``, ``autograded/``, ``feedback/`` and the SQLite
  gradebook ``gradebook.db``.

Environment variables (``course`` sets them from its options ``--grading-dir``, ``--db`` and
``--timeout``; set them yourself when you run ``nbgrader`` directly):

``COURSE_GRADING_DIR``
    the grading folder (default ``grading`` next to this file).
``COURSE_DB_URL``
    the gradebook's database URL, e.g. ``postgresql://grader@localhost/measure_first``
    (default: SQLite at ``<grading folder>/gradebook.db``).
``COURSE_CELL_TIMEOUT``
    seconds one cell may run while graded before it is interrupted and scores zero (default 60).
``COURSE_NOTEBOOK_TIMEOUT``
    seconds a whole notebook may run while graded; then its kernel is stopped, what ran is
    graded and the rest scores zero (default 900).
``COURSE_MEMORY_LIMIT``
    bytes of resident memory a notebook's kernel (with the processes it starts) may use
    while graded; past it the kernel is stopped, as above (default 4000000000, 4 GB).
"""

import os

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    OverwriteKernelspec,
    SaveAutoGrades,
)

from course_lib.grader._nbpreprocessors import CapOutputs
from course_lib.grader.nbgrading import CourseExecute, HideHiddenTests, RestoreMissingCells

c = get_config()  # noqa: F821 (nbgrader provides get_config when it reads this file)

ROOT = os.path.dirname(os.path.abspath(__file__))
GRADING = os.path.abspath(os.environ.get("COURSE_GRADING_DIR") or os.path.join(ROOT, "grading"))


def _step(name):
    """A grading sub-folder as nbgrader wants it: relative to ROOT when it lies inside ROOT.

    nbgrader builds regular expressions from these names, so a relative name keeps odd
    characters of the absolute path out of them.
    """
    path = os.path.join(GRADING, name)
    relative = os.path.relpath(path, ROOT)
    return path if relative.startswith(os.pardir) else relative


c.CourseDirectory.root = ROOT
# The gradebook's course row: nbgrader's own default, which Gradebook() also uses. With the
# empty default of CourseDirectory, PostgreSQL (unlike SQLite) refuses every assignment row.
c.CourseDirectory.course_id = "default_course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "assignments"
c.CourseDirectory.submitted_directory = _step("submitted")
c.CourseDirectory.autograded_directory = _step("autograded")
c.CourseDirectory.feedback_directory = _step("feedback")
c.CourseDirectory.solution_directory = _step("solution")
c.CourseDirectory.db_url = os.environ.get("COURSE_DB_URL") or "sqlite:///" + os.path.join(GRADING, "gradebook.db")

# A cell that runs longer than this is interrupted and scores zero; the next cells still run.
c.Execute.timeout = int(os.environ.get("COURSE_CELL_TIMEOUT") or 60)

# Limits on the whole kernel, watched from the grader's process: a runaway notebook is
# stopped, scored for what it reached and flagged, and the batch goes on.
c.CourseExecute.notebook_timeout = int(os.environ.get("COURSE_NOTEBOOK_TIMEOUT") or 900)
c.CourseExecute.memory_limit = int(os.environ.get("COURSE_MEMORY_LIMIT") or 4_000_000_000)

# A deleted grade cell is put back and scores zero (nbgrader's own add_missing_cells would put
# it back and run it). RestoreMissingCells also records what it restored, for the report.
c.OverwriteCells.add_missing_cells = True

# nbgrader's default pipelines, with three course versions swapped in:
# RestoreMissingCells for OverwriteCells, CourseExecute for Execute (a kernel that dies, e.g.
# by os._exit, no longer loses the submission: what ran is graded, the rest scores zero),
# and HideHiddenTests so that feedback never shows hidden-test source.
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    RestoreMissingCells,
    CheckCellMetadata,
]
c.Autograde.autograde_preprocessors = [
    CourseExecute,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    CapOutputs,  # bytes per cell and per notebook: one 200 MB line passes LimitOutput's line count
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
