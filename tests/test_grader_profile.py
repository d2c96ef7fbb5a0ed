"""course_lib.grader.profile: where ``course grade --profile`` says a notebook's time went."""

from __future__ import annotations

import pytest

from course_lib.grader.profile import format_profile, kernel_stages, top_cells, top_stages, verifier_stages

TIMINGS = {"kernel_start": 0.5,
           "cells": [[0, "setup", 0.2], [1, None, 4.0], [2, "side_by_side", 18.0],
                     [3, "test_side_hidden", 3.0], [4, "test_job_speed", 2.0], [5, None, 1.0]]}
IS_TEST = {"test_side_hidden": True, "test_job_speed": True}
IS_PERFORMANCE = {"test_job_speed": True}


def test_the_kernel_is_split_by_kind_of_cell_and_each_cell_keeps_its_own_seconds():
    split = kernel_stages(TIMINGS, 30.0, IS_TEST, IS_PERFORMANCE)
    assert split["autograde: notebook cells"] == pytest.approx(0.2 + 4.0 + 18.0 + 1.0)
    assert split["autograde: tests"] == pytest.approx(3.0)
    assert split["autograde: performance tests"] == pytest.approx(2.0)
    # What the recorded cells and start do not explain, and no cell counted twice in it.
    assert split["autograde: nbgrader's own work"] == pytest.approx(30.0 - 0.5 - 28.2)
    assert split["autograde: cell side_by_side"] == pytest.approx(18.0)
    assert split["autograde: cell #1"] == pytest.approx(4.0)      # unmarked: by its place
    assert split["autograde: cell test_job_speed"] == pytest.approx(2.0)


def test_the_verifiers_cells_are_parts_not_stages():
    report = {"worker start": 0.1, "student cells": 20.0, "tests": 15.0, "performance tests": 12.0,
              "timed batches (reference)": 9.0, "cell test_side_hidden": 14.0, "cell test_job_speed": 11.0}
    split = verifier_stages(report, 50.0)
    # The verifier's own start is what its stages leave of its run: cells are not subtracted again.
    assert split["verify: verifier start"] == pytest.approx(50.0 - 0.1 - 20.0 - 15.0 - 12.0)
    assert split["verify: cell test_side_hidden"] == 14.0
    assert [k for k, _ in top_stages(split)] == ["verify: student cells", "verify: tests",
                                                 "verify: performance tests"]


def test_the_dearest_cells_are_named_per_notebook_and_never_added_to_its_total():
    row = {**kernel_stages(TIMINGS, 30.0, IS_TEST, IS_PERFORMANCE),
           **verifier_stages({"student cells": 20.0, "tests": 14.5, "cell test_side_hidden": 14.0}, 40.0)}
    assert top_cells(row, 2) == [("autograde: cell side_by_side", 18.0),
                                 ("verify: cell test_side_hidden", 14.0)]
    text = format_profile([("week8", row)])
    assert "70.0 s in all" in text                      # 30 s of autograde + 40 s of verify
    assert "dearest cells: autograde: side_by_side 18.0, verify: test_side_hidden 14.0, " \
           "autograde: #1 4.0" in text
    assert "cell " not in text.split("notebook ")[0]  # no cell rows in the table of stages


def test_a_profile_without_cells_prints_no_cells_line():
    text = format_profile([("week1", {"autograde": 10.0, "verify": 5.0})])
    assert "15.0 s in all" in text and "dearest cells" not in text
