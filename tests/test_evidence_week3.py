import math
import time

import numpy as np
import pandas as pd
import pytest

from course_lib import _evidence_week3 as evidence
from course_lib import complexity, grading


def _table(sizes, seconds):
    return pd.DataFrame({"n": sizes, "seconds": seconds})


QUADRATIC = _table([500, 1_000, 2_000, 4_000], [0.001, 0.004, 0.016, 0.064])


@pytest.mark.parametrize("table", [
    QUADRATIC.drop(columns="seconds"),                         # no seconds
    QUADRATIC.iloc[:3],                                        # three sizes
    _table([500, 1_000, 3_000, 6_000], [1, 2, 3, 4]),          # not doubling
    _table([250, 500, 1_000, 2_000], [1, 2, 3, 4]),            # below the smallest size allowed
    _table([1_000, 2_000, 4_000, 8_000, 16_000], [1, 2, 3, 4, 5]),  # above the largest
    _table([500.5, 1_001, 2_002, 4_004], [1, 2, 3, 4]),        # a size that is no whole number
    QUADRATIC.to_dict("list"),                                 # not a table
    None,
])
def test_sizes_that_break_the_rules_are_refused(table):
    assert evidence.doubling_sizes(table, 500, 8_000) is None


def test_sizes_of_a_table_within_the_rules():
    assert evidence.doubling_sizes(QUADRATIC, 500, 8_000) == [500, 1_000, 2_000, 4_000]


def test_honest_figures_pass_every_check():
    checks = evidence.growth_checks(QUADRATIC, 2.0, ("t", "k"), grader_slope=1.85, smallest=500, largest=8_000)
    assert checks == dict.fromkeys(checks, True)


@pytest.mark.parametrize("exponent, grader_slope, failing", [
    (1.0, 1.95, ["fitted", "grader's exponent"]),  # an exponent typed from theory
    (2.0, 1.05, ["grader's exponent"]),            # a table of another function
    (2.0, math.nan, ["grader's exponent"]),        # the grader could not measure
])
def test_each_check_fails_on_its_own(exponent, grader_slope, failing):
    checks = evidence.growth_checks(QUADRATIC, exponent, ("t", "k"), grader_slope, 500, 8_000)
    failed = [check for check, holds in checks.items() if not holds]
    assert len(failed) == len(failing) and all(any(word in check for check in failed) for word in failing), failed


@pytest.mark.parametrize("table, exponent", [(None, 2.0), (QUADRATIC, "2.0"), (QUADRATIC, True),
                                             (_table([500, 1_000, 2_000, 4_000], [1, 0, 2, 3]), 2.0)])
def test_malformed_answers_fail_without_raising(table, exponent):
    checks = evidence.growth_checks(table, exponent, ("t", "k"), 2.0, 500, 8_000)
    assert not all(checks.values())


@pytest.mark.parametrize("table", [None, QUADRATIC.drop(columns="seconds"), QUADRATIC.iloc[:0],
                                   _table([1, 2], [0.5, -1.0])])
def test_a_table_without_positive_seconds_has_no_largest(table):
    assert math.isnan(evidence.largest_seconds(table))


@pytest.mark.parametrize("yours, graders, holds", [
    (0.064, 0.2, True), (0.064, 0.3, False), (0.5, 0.1, False), (64.0, 0.064, False),  # milliseconds
    (math.nan, 0.1, False), (0.1, math.nan, False), (0.1, 0.0, False)])
def test_seconds_within_a_factor(yours, graders, holds):
    assert evidence.within_factor(yours, graders, 4) is holds


def test_the_grader_exponent_is_the_public_measurement_the_verifier_replaces(monkeypatch):
    # Looked up when called: outside the kernel the verifier's measured_exponent answers.
    monkeypatch.setattr(grading, "measured_exponent", lambda fn, make_input, sizes, budget: 1.93)
    assert evidence.grader_exponent(sorted, list, [1, 2, 4]) == 1.93


def test_the_grader_exponent_tells_quadratic_from_linear_work():
    def count_new(values):  # list membership: quadratic
        seen = []
        for value in values:
            if value not in seen:
                seen.append(value)
        return len(seen)

    def make_input(n):
        return np.random.default_rng().permutation(n).tolist()

    quadratic = evidence.grader_exponent(count_new, make_input, [1_000, 2_000, 4_000], budget=0.05)
    linear = evidence.grader_exponent(lambda values: sum(1 for value in values if value % 2),
                                      lambda n: make_input(20 * n), [1_000, 2_000, 4_000], budget=0.05)
    assert quadratic > 1.6 and linear < 1.4, (quadratic, linear)
    table = complexity.doubling(count_new, make_input, [1_000, 2_000, 4_000], budget=0.05, clock="cpu")
    assert abs(complexity.exponent(table).slope - quadratic) < 0.3


def test_the_grader_speedup_is_the_public_measurement_the_verifier_replaces(monkeypatch):
    monkeypatch.setattr(grading, "measured_speedup", lambda *a, **k: 45.0)
    assert evidence.grader_speedup(sorted, sorted, lambda: ([1],)) == 45.0


def test_the_grader_speedup_measures_a_fourfold_baseline():
    def quick(token):
        time.sleep(0.03)
        return token

    def slow(token):
        time.sleep(0.12)
        return token

    ratio = evidence.grader_speedup(quick, slow, lambda: (float(np.random.default_rng().random()),), budget=0.2)
    assert 3 < ratio < 5, ratio


def test_two_tables_imply_the_ratio_of_their_lines():
    slow = _table([1_000, 2_000, 4_000], [0.004, 0.016, 0.064])   # 4e-9 n**2
    fast = _table([2_000, 4_000, 8_000], [0.002, 0.004, 0.008])   # 1e-6 n
    assert evidence.implied_speedup(slow, fast, 8_000) == pytest.approx(0.256 / 0.008)
    assert evidence.implied_speedup(slow, fast, 1_000) == pytest.approx(0.004 / 0.001)


@pytest.mark.parametrize("table", [None, QUADRATIC.iloc[:1], _table([500, 1_000], [0.001, 0.0]),
                                   _table([500, 500], [0.001, 0.002]), QUADRATIC.drop(columns="n")])
def test_no_speedup_is_implied_by_a_table_without_a_line(table):
    assert math.isnan(evidence.implied_speedup(table, QUADRATIC, 8_000))
    assert math.isnan(evidence.implied_speedup(QUADRATIC, table, 8_000))
