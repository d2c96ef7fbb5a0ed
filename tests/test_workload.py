import dataclasses

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given, strategies as st

from course_lib import workload
from course_lib.workload import WorkloadProfile

DENSE = dict(
    parallelism="high",
    arithmetic_intensity="high",
    memory_vs_compute="compute",
    branching="low",
    data_transfer="low",
    batch_vs_latency="batch",
    precision="float32",
)

PARTS = [
    "parallelism",
    "arithmetic_intensity",
    "memory_vs_compute",
    "branching",
    "data_transfer",
    "batch_vs_latency",
    "precision",
]


def test_the_seven_parts_are_the_syllabus_parts_in_order():
    names = [f.name for f in dataclasses.fields(WorkloadProfile)]
    assert names[:7] == PARTS
    assert list(workload.LEVELS) == PARTS == list(workload.QUESTIONS)


# --- recommendations ---------------------------------------------------------------------


def test_dense_matmul_batch_job_goes_to_an_accelerator():
    rec = WorkloadProfile(**DENSE).recommend()
    assert rec.chip in ("GPU", "TPU")
    assert rec.scores["CPU"] < min(rec.scores["GPU"], rec.scores["TPU"])
    assert workload.dense_batch_job().recommend().chip in ("GPU", "TPU")


def test_the_week_one_etl_job_stays_on_the_cpu():
    job = workload.etl_job()
    rec = job.recommend()
    assert rec.chip == "CPU"
    assert not rec.close
    assert job.memory_vs_compute == "overhead"
    assert any("Python" in reason for reason in rec.reasons)
    assert str(rec).startswith("CPU first")


def test_float64_pulls_a_dense_job_away_from_the_tpu():
    rec = WorkloadProfile(**{**DENSE, "precision": "float64"}).recommend()
    assert rec.chip == "GPU"
    assert rec.scores["TPU"] < WorkloadProfile(**DENSE).recommend().scores["TPU"]


def test_a_latency_bound_branchy_service_stays_on_the_cpu():
    rec = WorkloadProfile(
        parallelism="low", arithmetic_intensity="medium", memory_vs_compute="memory",
        branching="high", data_transfer="medium", batch_vs_latency="latency", precision="float32",
    ).recommend()
    assert rec.chip == "CPU"


def test_scores_are_the_column_sums_of_the_summary():
    job = workload.etl_job()
    table = job.summary()
    rec = job.recommend()
    assert rec.scores == {chip: int(table[chip].sum()) for chip in workload.CHIPS}
    ordered = sorted(rec.scores.values(), reverse=True)
    assert rec.scores[rec.chip] == ordered[0]
    assert rec.margin == ordered[0] - ordered[1] == rec.scores[rec.chip] - rec.scores[rec.runner_up]
    assert 1 <= len(rec.reasons) <= 3
    assert set(rec.reasons) <= set(table["implication"])


@given(st.fixed_dictionaries({part: st.sampled_from(levels) for part, levels in workload.LEVELS.items()}))
def test_every_profile_gets_the_top_scoring_chip_with_ties_to_the_more_general(parts):
    rec = WorkloadProfile(**parts).recommend()
    best = max(rec.scores.values())
    assert rec.scores[rec.chip] == best
    # Ties go to the first chip in CPU, GPU, TPU order.
    assert rec.chip == next(chip for chip in workload.CHIPS if rec.scores[chip] == best)
    assert rec.close == (rec.margin <= 2)
    assert rec.runner_up != rec.chip


def test_summary_has_one_row_per_part_with_implications():
    table = WorkloadProfile(**DENSE).summary()
    assert list(table.index) == PARTS
    assert list(table.columns) == ["level", "implication", "CPU", "GPU", "TPU", "favours"]
    assert table.loc["precision", "level"] == "float32"
    assert table["implication"].str.len().min() > 20
    assert table.loc["data_transfer", "favours"] == "GPU/TPU"
    assert workload.etl_job().summary().loc["memory_vs_compute", "favours"] == "CPU"


# --- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "part, value, error, match",
    [
        ("parallelism", "huge", ValueError, "'low', 'medium', 'high'"),
        ("precision", "fp8", ValueError, "'float64', 'float32', 'reduced'"),
        ("memory_vs_compute", "io", ValueError, "overhead"),
        ("batch_vs_latency", "", ValueError, "batch"),
        ("branching", 3, TypeError, "branching takes one of"),
        ("data_transfer", None, TypeError, "data_transfer"),
    ],
)
def test_bad_levels_are_rejected_with_the_choices(part, value, error, match):
    with pytest.raises(error, match=match):
        WorkloadProfile(**{**DENSE, part: value})


def test_levels_ignore_case_and_spaces():
    job = WorkloadProfile(**{**DENSE, "precision": " Float32 ", "parallelism": "HIGH"})
    assert job.precision == "float32" and job.parallelism == "high"


def test_a_missing_part_is_an_error():
    parts = dict(DENSE)
    del parts["precision"]
    with pytest.raises(TypeError, match="precision"):
        WorkloadProfile(**parts)


def test_notes_must_be_text_and_the_profile_is_frozen():
    with pytest.raises(TypeError, match="notes"):
        WorkloadProfile(**DENSE, notes=42)
    job = WorkloadProfile(**DENSE, notes="weights stay on the device")
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.precision = "float64"


# --- roofline maths -------------------------------------------------------------------------


def test_arithmetic_intensity_of_matmul_and_axpy():
    n = 1_000
    assert workload.arithmetic_intensity(2 * n**3, 3 * n**2 * 8) == pytest.approx(2 * n / 24)
    assert workload.arithmetic_intensity(2 * n, 24 * n) == pytest.approx(1 / 12)
    assert workload.arithmetic_intensity(0, 8) == 0.0


def test_roofline_is_the_lower_of_the_two_roofs():
    peak, bw = 2e12, 200e9
    assert workload.ridge_point(peak, bw) == pytest.approx(10.0)
    assert workload.roofline(1.0, peak, bw) == pytest.approx(200e9)  # memory-bound
    assert workload.roofline(10.0, peak, bw) == pytest.approx(peak)  # exactly at the ridge
    assert workload.roofline(1e3, peak, bw) == pytest.approx(peak)  # compute-bound
    ai = np.array([0.1, 1.0, 100.0])
    np.testing.assert_allclose(workload.roofline(ai, peak, bw), [20e9, 200e9, peak])


@given(st.floats(0, 1e4), st.floats(1e9, 1e15), st.floats(1e9, 1e13))
def test_roofline_never_exceeds_either_roof(ai, peak, bw):
    attainable = workload.roofline(ai, peak, bw)
    assert attainable <= peak * (1 + 1e-12)
    assert attainable <= ai * bw * (1 + 1e-12)
    assert attainable == pytest.approx(min(peak, ai * bw))


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: workload.arithmetic_intensity(10, 0), ValueError),
        (lambda: workload.arithmetic_intensity(-1, 8), ValueError),
        (lambda: workload.arithmetic_intensity("10", 8), TypeError),
        (lambda: workload.roofline(-1.0, 1e12, 1e11), ValueError),
        (lambda: workload.roofline(1.0, 0, 1e11), ValueError),
        (lambda: workload.roofline(1.0, 1e12, float("inf")), ValueError),
        (lambda: workload.ridge_point(1e12, -5), ValueError),
        (lambda: workload.plot_roofline(1e12, 1e11, kernels={"bad": -1}), ValueError),
    ],
)
def test_roofline_inputs_are_checked(call, error):
    with pytest.raises(error):
        call()


def test_plot_roofline_marks_each_kernel_on_the_roof():
    peak, bw = 1e12, 100e9
    fig, ax = plt.subplots()
    try:
        assert workload.plot_roofline(peak, bw, {"axpy": 1 / 12, "matmul": 83.3}, ax=ax) is ax
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        marks = {line.get_label(): line for line in ax.get_lines()}
        assert marks["axpy"].get_ydata()[0] == pytest.approx(bw / 12)
        assert marks["matmul"].get_ydata()[0] == pytest.approx(peak)
    finally:
        plt.close(fig)


def test_arithmetic_bound_float32_work_goes_to_the_gpu_first_with_the_tpu_a_close_call():
    # Monte Carlo pricing and float32 X @ W share these seven answers: element-wise
    # arithmetic is GPU-shaped, and only matrix products in bfloat16 are TPU-shaped.
    rec = WorkloadProfile(**DENSE).recommend()
    assert (rec.chip, rec.runner_up, rec.close) == ("GPU", "TPU", True)
    reduced = WorkloadProfile(**{**DENSE, "precision": "reduced"}).recommend()
    assert reduced.scores["TPU"] > rec.scores["TPU"]
