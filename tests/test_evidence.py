"""The readings that stand between a student's own figure and the points it earns."""

import pytest

from course_lib import _evidence as evidence


def _counted(readings):
    """A take() that hands out ``readings`` in turn, and the list of calls it got."""
    calls = []

    def take():
        calls.append(1)
        return readings[len(calls) - 1]
    return take, calls


def test_a_check_holds_when_a_later_reading_agrees():
    take, calls = _counted([{"exp (1.4)": False, "speed": True}, {"exp (1.1)": True, "speed": False}])
    assert evidence.agreed_checks(take) == {"exp (1.1)": True, "speed": True}
    assert len(calls) == 2  # every check had held once: no third reading


def test_no_further_reading_once_every_check_held():
    take, calls = _counted([{"a": True, "b": True}] * 3)
    assert evidence.agreed_checks(take, readings=3) == {"a": True, "b": True}
    assert len(calls) == 1


def test_a_check_off_in_every_reading_fails_after_the_last():
    take, calls = _counted([{"a": True, "b": False}] * 5)
    assert evidence.agreed_checks(take, readings=3) == {"a": True, "b": False}
    assert len(calls) == 3


def test_readings_with_other_checks_are_refused():
    take, _ = _counted([{"a": False}, {"a": True, "b": True}])
    with pytest.raises(ValueError, match="same checks"):
        evidence.agreed_checks(take)


def test_the_best_reading_stands_and_stops_at_full_points():
    take, calls = _counted([1.2, 3.0, 0.0])
    assert evidence.best_score(take, full=3) == 3.0
    assert len(calls) == 2


def test_a_short_score_is_read_the_given_number_of_times():
    take, calls = _counted([1.0, 0.4, 2.5, 3.0])
    assert evidence.best_score(take, full=3, readings=3) == 2.5
    assert len(calls) == 3


def test_week3_cells_still_find_agreed_checks_in_their_module():
    from course_lib import _evidence_week3

    assert _evidence_week3.agreed_checks is evidence.agreed_checks
