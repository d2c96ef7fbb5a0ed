"""The instructor's grading machinery, apart from the helpers students import.

Students' notebooks import :mod:`course_lib.grading` (the checks grade cells call) and
the measuring helpers; nothing here is imported by them. This subpackage is what runs
on the instructor's side:

``nbgrading``
    release, and grade a batch with flags and feedback on top of nbgrader: the pipeline
    that chains the stages below, each submission through each stage once.
``intake``, ``execute``, ``verify``, ``score``
    the stages of a submission: find and copy in, run in the student's kernel, grade
    again outside it and store the verdicts, read the scores back and record the grading
    as done (the feedback and export stages are ``feedback`` and ``exports``).
``common``
    what every stage shares: the course, ``CourseError``, a flag, a submission's result.
``_nbgrader``
    nbgrader as the stages call it: its environment, quiet, its converters run.
``verification``
    the out-of-kernel verifier that re-grades speed, memory and scaling cells.
``_student_worker``
    the process that holds a student's answers while they are verified.
``_timed_calls``
    timed calls into the student worker and the reference process, shared by the verifier
    and ``_remote_parallel`` (its twin for ``parallel_points``).
``_data``
    the data-only format in which the worker sends results back (no pickle).
``_nbpreprocessors``, ``_submissions``
    nbgrader preprocessors, and finding submissions in the layouts instructors use.
``collect``
    ``course collect``: when the course's own fetch saw each repository's notebooks.
``exports``
    every submission's standing (late penalty included), ``grades.csv`` and the LMS sheets.
``roster``
    the class list, matched to the graded students.
``marking``
    ``course mark``: the answers marked by hand.
``feedback``
    the page a student gets back.
``report``
    the course report (one HTML page).
``student_repo``
    the repository students open, without solutions or hidden tests.
``cli``
    the ``course`` command.
"""

__all__: list[str] = []
