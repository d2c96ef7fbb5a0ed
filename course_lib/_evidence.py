"""A student's own figures against the grader's reading: read again before they cost points.

Private to the hidden tests of ``solutions/``. Many graded cells check a figure the student
measured (a table of seconds, a stage's share, a speed-up, a first and a warm call) against
the grader's own reading of the same code, taken while grading. The two readings are
minutes apart on a shared machine, so a single disagreeing reading is not evidence against
an honest figure: an unlucky reading is taken again, and the figure stands if any reading
agreed. A figure typed in, or measured of other code, stays off in every reading, so the
extra readings cost a dishonest answer nothing but the grader's time.

Two shapes: :func:`agreed_checks` for all-or-nothing checks (each holds if any reading
agreed), :func:`best_score` for partial credit (the best reading's points stand).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["agreed_checks", "best_score"]


def agreed_checks(take: Callable[[], dict[str, bool]], readings: int = 3) -> dict[str, bool]:
    """Each check of ``take()`` held if any of up to ``readings`` readings agreed.

    ``take`` measures once and returns the checks of a student's figures against that
    reading, by what they check (the same checks, in the same order, every time; their
    wording may quote each reading's figure). A further reading is taken only while some
    check has held in none so far. The student's figures were measured minutes before the
    grader's, at another moment of a busy machine, so one disagreeing reading is not
    evidence against them; figures of other code, or typed in, stay off in every reading.
    The wording returned is the last reading's.

    Examples
    --------
    >>> readings = iter([{"a": True, "b (1.0)": False}, {"a": False, "b (1.2)": True}])
    >>> agreed_checks(lambda: next(readings))
    {'a': True, 'b (1.2)': True}
    >>> agreed_checks(lambda: {"a": True, "b": False}, readings=2)
    {'a': True, 'b': False}
    """
    taken = [list(take().items())]
    while len(taken) < readings and not all(any(held for _, held in row) for row in zip(*taken)):
        taken.append(list(take().items()))
    if len({len(reading) for reading in taken}) > 1:
        raise ValueError("each reading must give the same checks")
    return {wording: any(held for _, held in row) for (wording, _), row in zip(taken[-1], zip(*taken))}


def best_score(take: Callable[[], float], full: float, readings: int = 3) -> float:
    """The best points of up to ``readings`` readings; a further one only while short of ``full``.

    ``take`` measures once and returns the cell's points against that reading. Figures of
    other code score low in every reading; an honest figure that met one unlucky reading
    gets the points of the next.

    Examples
    --------
    >>> readings = iter([2.4, 3.0, 1.0])
    >>> best_score(lambda: next(readings), full=3)
    3.0
    >>> best_score(lambda: 0.5, full=3, readings=2)
    0.5
    """
    best = take()
    for _ in range(readings - 1):
        if best >= full:
            break
        best = max(best, take())
    return best
