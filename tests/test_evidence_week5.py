"""course_lib._evidence_week5: a reported figure against the grader's reading of it."""

import numpy as np
import pytest

from course_lib import grading
from course_lib._evidence_week5 import agreement_points, traced_peak_bytes
from course_lib.memory import peak


@pytest.mark.parametrize("size", [10_000, 1_000_000, 30_000_000])
def test_the_peak_read_back_is_the_peak_the_course_measures(size):
    ours = traced_peak_bytes(bytearray, size)
    assert ours == pytest.approx(peak(bytearray, size).peak, rel=1e-3, abs=2_000)


def test_the_peak_goes_through_grading_measured_peak_when_called(monkeypatch):
    # the verifier replaces that function while it grades: the reading must use the replacement
    seen = []

    def replaced(fn, *args, **kwargs):
        seen.append((fn, args, kwargs))
        return 4_000_000

    monkeypatch.setattr(grading, "measured_peak", replaced)
    assert traced_peak_bytes(bytearray, 12, key=3) == 4_000_000
    assert seen == [(bytearray, (12,), {"key": 3})]


def test_the_peak_is_tracemallocs_not_the_memory_cells_figure():
    # an honest answer reports tracemalloc's peak; the grader's reading is the same figure
    assert 8_000_000 <= traced_peak_bytes(lambda n: bytearray(n), 8_000_000) < 8_200_000


def test_a_function_that_allocates_nothing_reads_as_at_least_one_byte():
    assert 1 <= traced_peak_bytes(lambda: None) < 1_000


@pytest.mark.parametrize("claimed, expected", [(6.6e6, 2.0), (9.9e6, 2.0), (4.4e6, 2.0), (13.2e6, 1.17),
                                               (3.3e6, 1.17), (19.8e6, 0.0), (1e3, 0.0)])
def test_agreement_is_full_within_the_first_factor_and_none_beyond_the_second(claimed, expected):
    assert agreement_points(claimed, 6.6e6, 1.5, 3, 2) == expected


@pytest.mark.parametrize("claimed", [np.float64(5.0), np.int64(5), 5, 5.0])
def test_numpy_numbers_are_numbers(claimed):
    assert agreement_points(claimed, 5.0, 1.5, 3, 1) == 1.0


@pytest.mark.parametrize("claimed", [None, "6 MB", True, 0, -1.0, float("nan"), float("inf"), [6e6]])
def test_a_figure_that_is_not_a_positive_number_is_a_wrong_answer_naming_it(claimed):
    with pytest.raises(AssertionError, match="whole_peak must be a positive number"):
        agreement_points(claimed, 6.6e6, 1.5, 3, 2, name="whole_peak")


@pytest.mark.parametrize("measured, full, zero", [(0, 1.5, 3), (5.0, 0.5, 3), (5.0, 3, 3), (float("nan"), 1.5, 3)])
def test_bad_settings_are_the_instructors_error(measured, full, zero):
    with pytest.raises(ValueError):
        agreement_points(5.0, measured, full, zero, 1)
