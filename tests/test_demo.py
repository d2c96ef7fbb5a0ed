"""Tests for course_lib.demo: the `make demo` job, run small."""

from __future__ import annotations

import re

import pytest

from course_lib import amdahl, datasets, demo


@pytest.fixture(scope="module")
def output() -> str:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = demo.main(["--n", "5000"])
    assert status == 0
    return buffer.getvalue()


def test_demo_prints_the_environment_first(output):
    assert output.index("Python:") < output.index("Warm-up") < output.index("Stage table")
    assert "5,000 orders" in output


def test_demo_says_it_warms_up(output):
    assert "untimed" in output and "warm-up runs:" in output


def test_demo_prints_two_stage_tables_and_two_bucket_tables(output):
    stage_tables = re.findall(r"^\s+wall s\s+CPU s\s+share\s*\nstage", output, flags=re.M)
    bucket_tables = re.findall(r"^\s+wall s\s+CPU s\s+share\s+stages\s*\nbucket", output, flags=re.M)
    assert len(stage_tables) == 2 and len(bucket_tables) == 2
    for stage in datasets.STAGES:
        rows = re.findall(rf"^{stage}\s+\d+\.\d{{3}}\s+\d+\.\d{{3}}\s+\d+\.\d%", output, flags=re.M)
        assert len(rows) == (4 if stage == "compute" else 2), stage  # "compute" is a bucket too
    for bucket in ("I/O", "overhead"):
        assert len(re.findall(rf"^{re.escape(bucket)}\s+\d+\.\d{{3}}", output, flags=re.M)) == 2


def test_demo_amdahl_figures_follow_from_the_compute_share(output):
    found = re.findall(
        r"compute is (\d+\.\d)% of the run\. An accelerator 20x faster on it gives the whole job "
        r"(\d+\.\d\d)x; even an infinitely fast one gives at most (\d+\.\d\d)x",
        output,
    )
    assert len(found) == 2
    for share, with_20x, ceiling in found:
        # The share is printed to 0.1% and the figures to 0.01, so each printed figure lies
        # between the figures of the share's rounding interval, give or take 0.005. (A fixed
        # tolerance fails at large shares, where a 0.05% step moves the 20x figure by 0.02.)
        low, high = (float(share) - 0.05) / 100, min(1.0, (float(share) + 0.05) / 100)
        assert amdahl.speedup(low, 20) - 0.005 <= float(with_20x) <= amdahl.speedup(high, 20) + 0.005
        assert amdahl.ceiling(low) - 0.005 <= float(ceiling) <= amdahl.ceiling(high) + 0.005
        assert float(with_20x) <= float(ceiling)

def test_vectorising_clean_shrinks_its_share(output):
    # The clean stage gets tens of times faster, so its share must fall. (Compute's share
    # usually rises too, but on a loaded machine the BLAS product can slow down enough
    # between the two runs to hide that: it is not asserted.)
    shares = [float(s) for s in re.findall(r"^clean\s+\d+\.\d{3}\s+\d+\.\d{3}\s+(\d+\.\d)%", output, flags=re.M)]
    assert len(shares) == 2
    before, after = shares
    assert after < before / 2, "vectorising clean leaves it a much smaller share of the run"


def test_demo_verifies_before_reporting_speedups(output):
    assert "Results identical" in output
    assert output.index("Results identical") < output.index("x faster\n")
    match = re.search(r"clean: +(\d+\.\d+) s -> (\d+\.\d+) s, (\d+\.\d)x faster", output)
    assert match and float(match.group(3)) == pytest.approx(float(match.group(1)) / float(match.group(2)), rel=0.1)
    assert re.search(r"whole job: +\d+\.\d+ s -> \d+\.\d+ s, \d+\.\dx faster", output)


def test_demo_fails_loudly_when_results_differ(monkeypatch, capsys):
    monkeypatch.setattr(datasets, "results_match", lambda a, b: False)
    assert demo.main(["--n", "500"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "faster" not in out.split("MISMATCH")[1]


def test_steps_can_be_appended(monkeypatch, capsys):
    seen = []

    def extra(d: demo.Demo) -> None:
        seen.append(sorted(d.runs))
        d.say("an extra step")

    monkeypatch.setattr(demo, "STEPS", [*demo.STEPS, extra])
    assert demo.main(["--n", "300", "--s", "5"]) == 0
    assert seen == [["fast", "slow", "warm-up fast", "warm-up slow"]]
    out = capsys.readouterr().out
    assert out.rstrip().endswith("an extra step")
    assert "An accelerator 5x faster" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--n", "0"], "at least 1 order"),
        (["--n", "lots"], "whole number"),
        (["--s", "-2"], "must be positive"),
        (["--seed", "-1"], "must not be negative"),
    ],
)
def test_bad_arguments_are_rejected_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        demo.main(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_underscores_are_allowed_in_sizes(monkeypatch):
    sizes = []
    monkeypatch.setattr(demo, "STEPS", [lambda d: sizes.append(d.n)])
    assert demo.main(["--n", "1_000"]) == 0
    assert sizes == [1000]
