"""``python -m course_lib.demo``: the course's method in one run, on this machine.

Measure the Week 1 ETL job stage by stage, sort its time into compute, I/O and
overhead, ask Amdahl's law what an accelerator could buy, then make the honest
fix (vectorise the clean stage), check that the answer did not change and
measure again.

The demo is a list of steps (:data:`STEPS`) that share one :class:`Demo`
state; later parts of the course append their own steps to the list.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np
import pandas as pd

from course_lib import amdahl, datasets, timing

__all__ = ["Demo", "STEPS", "DEFAULT_N", "DEFAULT_S", "main"]

DEFAULT_N = 100_000
"""Orders in the demo's job: a tenth of the syllabus size, a few seconds on a laptop."""

DEFAULT_S = 20.0
"""The speed-up an accelerator is assumed to give the compute bucket."""


@dataclass
class Demo:
    """What the demo's steps share: the settings, the runs so far, and where to print.

    ``runs`` maps a name (``"slow"``, ``"fast"``, ``"warm-up slow"``, ...) to the
    ``(Stopwatch, result)`` pair that :func:`course_lib.datasets.run_etl` returned.
    A step that finds something wrong appends to ``problems``; :func:`main` then
    exits with status 1.
    """

    n: int
    seed: int = 0
    s: float = DEFAULT_S
    workdir: Path | None = None
    out: TextIO = field(default_factory=lambda: sys.stdout)
    runs: dict[str, tuple[timing.Stopwatch, pd.DataFrame]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    shown: set[str] = field(default_factory=set)

    def say(self, *lines: str) -> None:
        """Print lines to the demo's output."""
        for line in lines:
            print(line, file=self.out)

    def once(self, key: str, *lines: str) -> None:
        """Print lines the first time ``key`` comes up, and not again."""
        if key not in self.shown:
            self.shown.add(key)
            self.say(*lines)

    def heading(self, title: str) -> None:
        """Print a section heading."""
        self.say("", title, "=" * len(title))

    def run(self, name: str, vectorised: bool) -> tuple[timing.Stopwatch, pd.DataFrame]:
        """Run the ETL job, remember it under ``name`` and return it."""
        self.runs[name] = datasets.run_etl(self.n, self.workdir, vectorised=vectorised, seed=self.seed)
        return self.runs[name]


def show_environment(demo: Demo) -> None:
    """Step: the context every measurement needs beside it."""
    demo.heading("Where this runs")
    demo.say(timing.format_environment())
    demo.say(f"Job: {demo.n:,} orders (the syllabus size is {datasets.FULL_SIZE:,}), seed {demo.seed}.")


def warm_up(demo: Demo) -> None:
    """Step: run each version once, untimed, so one-off costs stay out of the figures."""
    demo.heading("Warm-up")
    demo.say(
        "The first run pays one-off costs (imports, a cold file cache, starting BLAS threads),",
        "so each version runs once untimed and the figures below come from a second run.",
    )
    slow, _ = demo.run("warm-up slow", vectorised=False)
    fast, _ = demo.run("warm-up fast", vectorised=True)
    demo.say(f"warm-up runs: per-row clean {slow.total:.3f} s, vectorised clean {fast.total:.3f} s")


def measure_slow(demo: Demo) -> None:
    """Step: the job as written, with its per-row clean stage."""
    demo.heading("1. The job as written (clean = per-row Python function)")
    sw, _ = demo.run("slow", vectorised=False)
    _report(demo, sw, "warm-up slow")


def measure_fast(demo: Demo) -> None:
    """Step: the honest fix, then the same measurements again."""
    demo.heading("2. After vectorising the clean stage")
    sw, _ = demo.run("fast", vectorised=True)
    _report(demo, sw, "warm-up fast")


def verify(demo: Demo) -> None:
    """Step: the answer must not change; only then do the speed-ups count."""
    demo.heading("3. Same answer, and how much faster")
    (slow, slow_result), (fast, fast_result) = demo.runs["slow"], demo.runs["fast"]
    if not datasets.results_match(slow_result, fast_result):
        demo.problems.append("the vectorised job gave a different result")
        demo.say("MISMATCH: the vectorised job gave a different result; its speed-up means nothing.")
        return
    scored = slow_result["score"].notna()
    diff = float(np.max(np.abs(slow_result["score"][scored] - fast_result["score"][scored])))
    scores = "bit for bit as well" if diff == 0 else f"largest difference {diff:.1e}"
    before, after = (_compute_share(sw) for sw in (slow, fast))
    demo.say(
        f"Results identical: {len(slow_result):,} users, order counts and GBP totals bit for bit; "
        f"{int(scored.sum()):,} model scores, {scores}.",
        "",
        f"clean:     {slow.seconds['clean']:.3f} s -> {fast.seconds['clean']:.4f} s, "
        f"{_ratio(slow.seconds['clean'], fast.seconds['clean'])} faster",
        f"whole job: {slow.total:.3f} s -> {fast.total:.3f} s, {_ratio(slow.total, fast.total)} faster",
        "",
        f"Amdahl ceiling for an accelerator: {amdahl.ceiling(before):.2f}x before the fix, "
        f"{amdahl.ceiling(after):.2f}x after it.",
        (
            "Compute now dominates the run: this is when an accelerator becomes worth discussing."
            if after > 0.5
            else "Compute is still less than half the run: look at the other stages before any accelerator."
        ),
    )


STEPS: list[Callable[[Demo], None]] = [show_environment, warm_up, measure_slow, measure_fast, verify]
"""The demo, in order. Append a function ``step(demo: Demo) -> None`` to extend it."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run every step in :data:`STEPS`; return 0 if none found a problem, else 1."""
    args = _parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="measure-first-demo-") as tmp:
        demo = Demo(n=args.n, seed=args.seed, s=args.s, workdir=Path(tmp))
        for step in STEPS:
            step(demo)
    if demo.problems:
        demo.say("", "Problems: " + "; ".join(demo.problems))
        return 1
    return 0


def _report(demo: Demo, sw: timing.Stopwatch, warm_name: str) -> None:
    table = sw.table()
    groups = datasets.buckets(table)
    p = _compute_share(sw)
    demo.say(
        "Stage table (wall = perf_counter, CPU = process_time, share of the wall total):",
        _format_times(table, total=sw.total, label="stage"),
        f"(the untimed warm-up run of this version took {demo.runs[warm_name][0].total:.3f} s)",
    )
    if (table["cpu_seconds"] > 1.2 * table["seconds"]).any():
        demo.once(
            "cpu above wall",
            "CPU above wall means more than one thread was busy: BLAS runs the matrix product on "
            "several cores, and its threads keep spinning briefly afterwards."
        )
    demo.say(
        "",
        "Buckets (only compute is what an accelerator speeds up):",
        _format_times(groups, total=sw.total, label="bucket"),
        "",
        f"Amdahl: compute is {p:.1%} of the run. An accelerator {demo.s:g}x faster on it gives the whole job "
        f"{amdahl.speedup(p, demo.s):.2f}x; even an infinitely fast one gives at most {amdahl.ceiling(p):.2f}x.",
    )


def _compute_share(sw: timing.Stopwatch) -> float:
    groups = datasets.buckets(sw.table())
    return float(groups["share"].get("compute", 0.0))


def _format_times(table: pd.DataFrame, total: float, label: str) -> str:
    shown = table.rename(columns={"seconds": "wall s", "cpu_seconds": "CPU s"})
    shown = shown[[c for c in ("wall s", "CPU s", "share", "stages") if c in shown.columns]]
    totals = {"wall s": total, "CPU s": shown["CPU s"].sum(), "share": 1.0, "stages": ""}
    shown.loc["total"] = [totals[c] for c in shown.columns]
    shown.index.name = label
    formatters = {"wall s": "{:.3f}".format, "CPU s": "{:.3f}".format, "share": "{:.1%}".format}
    return shown.to_string(col_space=8, formatters={c: f for c, f in formatters.items() if c in shown.columns})


def _ratio(before: float, after: float) -> str:
    return f"{before / after:.1f}x" if after > 0 else "immeasurably"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m course_lib.demo",
        description="Measure the Week 1 ETL job, find what dominates, fix it, check the answer, measure again.",
    )
    parser.add_argument("--n", type=_positive_int, default=DEFAULT_N, help=f"orders in the job (default {DEFAULT_N:,})")
    parser.add_argument("--seed", type=_seed, default=0, help="seed of the orders and the model (default 0)")
    parser.add_argument(
        "--s", type=_speedup, default=DEFAULT_S, help=f"assumed accelerator speed-up of compute (default {DEFAULT_S:g})"
    )
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of orders such as 100_000, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"the job needs at least 1 order, got {value}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole-number seed such as 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a seed must not be negative, got {value}")
    return value


def _speedup(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a speed-up such as 20, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"a speed-up must be positive, got {value:g}")
    return value


if __name__ == "__main__":
    sys.exit(main())
