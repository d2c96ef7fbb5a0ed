"""Measure First: helpers for measuring, comparing and explaining Python performance.

One module per concern; import the one you need::

    from course_lib import timing, memory, amdahl, rng, complexity, profiling

``timing``
    stage timers, calibrated benchmarks and noise-robust comparisons.
``memory``
    size estimates and peak traced memory.
``amdahl``
    Amdahl's and Gustafson's laws.
``rng``
    independent random streams for parallel work.
``complexity``
    doubling experiments and fitted exponents.
``profiling``
    cProfile and line_profiler results as tidy tables.
``workload``
    the seven-part workload profile.
``datasets``
    the Week 1 orders data and ETL job.
``grading``
    the checks that nbgrader grade cells call.
``answers``
    quiz answers read one way in every graded notebook (a letter, letters, a number).
``grader``
    the instructor's grading machinery (batch grading, the out-of-kernel verifier,
    the report, the student repository and the ``course`` command), kept apart so
    that either can be read without the other.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
