"""course_lib.preview's memory and growth previews: what a student sees before submitting.

The speed previews are tested through ``course check`` in ``tests/test_student_env.py``;
these are the memory and scaling previews on their own: a labelled verdict with the points
on stdout, never an exception for the student's code, nothing at all while grading.
"""

from __future__ import annotations

import numpy as np
import pytest

from course_lib import preview
from course_lib.check import _has_code


def _allocate(n):
    return float(np.ones(n).sum())


def test_memory_preview_prints_the_peak_and_the_points(capsys):
    preview.preview_peak_memory(_allocate, "5 MB", "20 MB", 2, 1_250_000)  # 10 MB: halfway
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith("Memory preview on this machine (not your grade: the graded test measures again):")
    assert "_allocate: peak traced memory 10.0 MB." in out
    assert "gives 2 points up to 5.0 MB and none from 20.0 MB" in out and "1 of 2 points" in out


def test_scaling_preview_prints_the_exponent_and_the_points(capsys):
    def linear(xs):
        return sum(x * x for x in xs)

    preview.preview_scaling(linear, lambda n: np.random.default_rng().random(n).tolist(),
                            [50_000, 100_000, 200_000], 1.5, 1.8, 3, budget=0.05)
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("Scaling preview on this machine (not your grade")
    assert "linear: fitted exponent" in out and "3 of 3 points" in out
    assert "(a measured 1.60 earns them) and none from 1.8 (a measured 1.90)" in out


def test_previews_say_when_the_students_code_raises(capsys):
    preview.preview_peak_memory(lambda: 1 / 0, "5 MB", "20 MB", 2)
    preview.preview_scaling(lambda xs: 1 / 0, lambda n: np.random.default_rng().random(n), [1_000, 2_000],
                            1.5, 1.8, 3)
    out, err = capsys.readouterr()
    assert err == "" and "Traceback" not in out
    assert out.count("not measured: your function raised ZeroDivisionError") == 2


def test_previews_do_nothing_while_grading_but_refuse_wrong_thresholds(capsys, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    preview.preview_peak_memory(lambda: 1 / 0, "5 MB", "20 MB", 2)
    preview.preview_scaling(lambda xs: 1 / 0, lambda n: n, [1_000, 2_000], 1.5, 1.8, 3)
    assert capsys.readouterr() == ("", "")
    with pytest.raises(ValueError, match="full_at must be below zero_at"):
        preview.preview_peak_memory(_allocate, "20 MB", "5 MB", 2, 10)
    with pytest.raises(ValueError, match="full_at must be below zero_at"):
        preview.preview_scaling(sorted, lambda n: n, [1_000, 2_000], 1.8, 1.5, 3)


def test_a_cell_with_only_a_memory_or_scaling_preview_is_a_hidden_test():
    assert not _has_code("# Hidden memory test\npreview_peak_memory(f, '20 MB', '100 MB', 6, path)\n")
    assert not _has_code("preview_scaling(f, m, [1, 2], 1.5, 1.8, 3)\n")
    assert _has_code("preview_scaling(f, m, [1, 2], 1.5, 1.8, 3)\nassert f(1) == 1\n")
