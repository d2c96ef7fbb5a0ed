"""The seven-part workload profile: what a job's shape says about CPU, GPU or TPU.

Before asking for an accelerator, describe the job in seven parts: parallelism,
arithmetic intensity, memory bandwidth versus compute, branching, data size and transfer,
batch versus latency, and precision. Each part takes one of a few levels, and each level
carries a short statement of what it implies and a small score for each chip. The
recommendation is the chip with the highest total: simple, transparent arithmetic that a
reader can check against :meth:`WorkloadProfile.summary`, and a prior to test by
measurement, never a substitute for it.

The roofline helpers turn two numbers measured on a machine (peak FLOP/s and memory
bandwidth) into the performance a kernel of given arithmetic intensity can reach.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "CHIPS",
    "LEVELS",
    "QUESTIONS",
    "WorkloadProfile",
    "Recommendation",
    "etl_job",
    "dense_batch_job",
    "arithmetic_intensity",
    "ridge_point",
    "roofline",
    "plot_roofline",
]

CHIPS = ("CPU", "GPU", "TPU")  # also the tie-break order: the machine you already have first

QUESTIONS = {
    "parallelism": "How much independent work is there at once?",
    "arithmetic_intensity": "How many arithmetic operations per byte moved from memory?",
    "memory_vs_compute": "What limits the speed now: Python overhead or I/O, memory bandwidth, or arithmetic?",
    "branching": "How much data-dependent control flow (if/else per element, irregular loops)?",
    "data_transfer": "How costly is moving the data to the device and back, next to the work done on it?",
    "batch_vs_latency": "Large batches for throughput, or one small request at a time?",
    "precision": "The narrowest number format the results tolerate (reduced: bfloat16, float16, int8)?",
}

# For each part and level: what it implies, and its score for (CPU, GPU, TPU). Positive
# favours a chip, negative counts against it; 3 marks a deciding factor (time spent in
# the interpreter or in I/O is a cost no accelerator removes).
_RULES: dict[str, dict[str, tuple[str, tuple[int, int, int]]]] = {
    "parallelism": {
        "low": ("Little independent work: one fast CPU core does it; an accelerator needs "
                "thousands of operations in flight to be busy.", (2, -2, -2)),
        "medium": ("Some independent tasks: use the CPU's cores first (processes, threads, "
                   "prange); it takes more than that to fill a GPU.", (1, 0, -1)),
        "high": ("Many independent, identical operations: the shape GPUs and TPUs are "
                 "built for.", (0, 2, 2)),
    },
    "arithmetic_intensity": {
        "low": ("Few operations per byte: memory sets the speed, and extra FLOP/s sit "
                "idle.", (1, -1, -2)),
        "medium": ("Each byte is reused a few times: an accelerator can help once the data "
                   "live on it.", (0, 1, 0)),
        "high": ("Many operations per byte (dense matrix products, convolutions): an "
                 "accelerator's peak compute pays off.", (-1, 2, 2)),
    },
    "memory_vs_compute": {
        "overhead": ("Time goes to per-row Python glue or I/O, which no chip runs faster: "
                     "vectorise first, then measure again.", (3, -3, -3)),
        "memory": ("Bandwidth-bound: the best speed-up is about the ratio of memory "
                   "bandwidths, and only once the data are on the device.", (0, 1, -1)),
        "balanced": ("Both limits are close: a roofline plot shows which one each chip "
                     "would hit.", (0, 1, 1)),
        "compute": ("Arithmetic-bound: peak FLOP/s decides. GPUs have far more of it for "
                    "any arithmetic; TPUs mainly for matrix products.", (-1, 2, 1)),
    },
    "branching": {
        "low": ("Uniform control flow: every lane does the same step, as GPUs and TPUs "
                "need.", (0, 1, 1)),
        "medium": ("Some branches: GPU threads that diverge wait for one another; TPUs "
                   "want static shapes.", (1, 0, -1)),
        "high": ("Data-dependent branching and irregular loops: CPUs' branch predictors "
                 "and caches are made for this.", (2, -2, -3)),
    },
    "data_transfer": {
        "low": ("The data are small or stay on the device: the transfer is paid once and "
                "amortised.", (0, 1, 1)),
        "medium": ("Transfers are noticeable: time them beside the compute in any "
                   "accelerator benchmark.", (0, 0, 0)),
        "high": ("Moving the data (PCIe: tens of GB/s) costs more than the accelerator "
                 "saves; Amdahl's law without transfers already flatters it.", (2, -2, -2)),
    },
    "batch_vs_latency": {
        "batch": ("Large batches keep an accelerator full; throughput is what counts.", (0, 1, 2)),
        "mixed": ("Some of each: batch where you can, and measure the latency you must "
                  "meet.", (0, 0, 0)),
        "latency": ("One small request at a time: launch and transfer latency dominate, "
                    "and a CPU answers in microseconds.", (2, -1, -2)),
    },
    "precision": {
        "float64": ("Double precision: full speed on CPUs; many GPUs run float64 far slower "
                    "than float32, and TPUs have no native float64.", (1, -1, -3)),
        "float32": ("Single precision: the usual GPU format; TPUs' matrix units are fastest "
                    "in bfloat16.", (0, 1, 0)),
        "reduced": ("bfloat16, float16 or int8 tolerated: tensor cores and TPU matrix units "
                    "reach their highest throughput.", (-1, 2, 2)),
    },
}

LEVELS = {part: tuple(levels) for part, levels in _RULES.items()}

_CLOSE = 2  # a winning margin of this many points or fewer is called a close call


@dataclass(frozen=True)
class Recommendation:
    """The outcome of :meth:`WorkloadProfile.recommend`.

    Attributes
    ----------
    chip : str
        ``"CPU"``, ``"GPU"`` or ``"TPU"``: the highest total score.
    scores : dict
        Total score per chip.
    runner_up : str
        The next best chip.
    margin : int
        Points between the winner and the runner-up.
    reasons : tuple of str
        The implications of (up to three) parts that favour the winner most over the
        average of the other two chips.
    """

    chip: str
    scores: dict[str, int]
    runner_up: str
    margin: int
    reasons: tuple[str, ...]

    @property
    def close(self) -> bool:
        """True when the margin is small enough that only measurement can decide."""
        return self.margin <= _CLOSE

    def __str__(self) -> str:
        totals = ", ".join(f"{chip} {score:+d}" for chip, score in self.scores.items())
        head = f"{self.chip} first (scores {totals})"
        if self.close:
            head += f"; a close call with {self.runner_up}: measure on both"
        because = " ".join(self.reasons)
        return f"{head}. Why: {because} This ranks a description; only timing the job decides."


@dataclass(frozen=True)
class WorkloadProfile:
    """A job described in the seven parts of the workload profile.

    Each part takes one level from :data:`LEVELS` (case and surrounding spaces are
    ignored):

    ============================  ============================================
    part                          levels
    ============================  ============================================
    ``parallelism``               ``"low"``, ``"medium"``, ``"high"``
    ``arithmetic_intensity``      ``"low"``, ``"medium"``, ``"high"``
    ``memory_vs_compute``         ``"overhead"``, ``"memory"``, ``"balanced"``, ``"compute"``
    ``branching``                 ``"low"``, ``"medium"``, ``"high"``
    ``data_transfer``             ``"low"``, ``"medium"``, ``"high"``
    ``batch_vs_latency``          ``"batch"``, ``"mixed"``, ``"latency"``
    ``precision``                 ``"float64"``, ``"float32"``, ``"reduced"``
    ============================  ============================================

    ``memory_vs_compute="overhead"`` is the Week 1 finding: time spent in per-row Python
    or in I/O is neither memory- nor compute-bound, and no accelerator speeds it up.

    Scoring rules (:meth:`recommend`): every level gives each chip a score from -3 to
    +3, shown in the CPU, GPU and TPU columns of :meth:`summary`. The scores are added
    per chip and the highest total wins; a tie goes to the more general chip, in the
    order CPU, GPU, TPU. The reasons given are the (up to three) parts whose scores
    favour the winner most over the average of the other two chips. A margin of 2
    points or fewer is reported as a close call.

    Examples
    --------
    >>> job = WorkloadProfile(parallelism="high", arithmetic_intensity="high",
    ...     memory_vs_compute="compute", branching="low", data_transfer="low",
    ...     batch_vs_latency="batch", precision="float64")
    >>> job.recommend().chip
    'GPU'
    >>> job.summary().loc["precision", "favours"]
    'CPU'
    """

    parallelism: str
    arithmetic_intensity: str
    memory_vs_compute: str
    branching: str
    data_transfer: str
    batch_vs_latency: str
    precision: str
    name: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        for part in _RULES:
            # frozen dataclass: normalised levels are written through object.__setattr__
            object.__setattr__(self, part, _check_level(part, getattr(self, part)))
        for text in ("name", "notes"):
            if not isinstance(getattr(self, text), str):
                raise TypeError(f"{text} must be a string, got {type(getattr(self, text)).__name__}")

    def parts(self) -> dict[str, str]:
        """The seven parts and their levels, in the syllabus's order."""
        return {part: getattr(self, part) for part in _RULES}

    def summary(self) -> pd.DataFrame:
        """One row per part: its level, what that implies, and the score for each chip.

        Returns
        -------
        pandas.DataFrame
            Index ``part``; columns ``level``, ``implication``, ``CPU``, ``GPU``, ``TPU``
            (scores, summed by :meth:`recommend`) and ``favours`` (the chip or chips
            with the top score for that part, ``"-"`` if it does not discriminate).

        Examples
        --------
        >>> row = etl_job().summary().loc["memory_vs_compute"]
        >>> row["level"], int(row["CPU"]), int(row["GPU"])
        ('overhead', 3, -3)
        """
        rows = []
        for part, level in self.parts().items():
            implication, scores = _RULES[part][level]
            rows.append({"part": part, "level": level, "implication": implication,
                         **dict(zip(CHIPS, scores)), "favours": _favours(scores)})
        return pd.DataFrame(rows).set_index("part")

    def recommend(self) -> Recommendation:
        """The chip with the highest total score, with the reasons behind it.

        Examples
        --------
        >>> rec = etl_job().recommend()
        >>> rec.chip, rec.scores
        ('CPU', {'CPU': 9, 'GPU': -6, 'TPU': -10})
        """
        table = self.summary()
        totals = {chip: int(table[chip].sum()) for chip in CHIPS}
        ranked = sorted(CHIPS, key=lambda chip: -totals[chip])  # stable: ties keep CHIPS order
        chip, runner_up = ranked[0], ranked[1]
        others = [other for other in CHIPS if other != chip]
        advantage = table[chip] - table[others].mean(axis=1)
        top = advantage[advantage > 0].sort_values(ascending=False, kind="stable").head(3)
        reasons = tuple(table.loc[part, "implication"] for part in top.index)
        return Recommendation(chip=chip, scores=totals, runner_up=runner_up,
                              margin=totals[chip] - totals[runner_up], reasons=reasons)


def etl_job() -> WorkloadProfile:
    """The Week 1 ETL-plus-scoring job, profiled before any fix.

    Its time goes to a per-row Python function (clean) and to reading and writing CSV
    (load, save); the dense scoring step is a small share.

    Examples
    --------
    >>> etl_job().recommend().chip
    'CPU'
    """
    return WorkloadProfile(
        name="Week 1 ETL job (before vectorising)",
        parallelism="medium",
        arithmetic_intensity="low",
        memory_vs_compute="overhead",
        branching="medium",
        data_transfer="high",
        batch_vs_latency="batch",
        precision="float64",
        notes=(
            "Rows are independent, but load and save are serial CSV I/O and clean is a "
            "Python function per row: interpreter overhead, not arithmetic. One multiply "
            "per amount read is low intensity; moving a million rows to a device to do "
            "that multiply costs more than it saves. Money wants float64."
        ),
    )


def dense_batch_job() -> WorkloadProfile:
    """A batch-scoring job dominated by dense float32 matrix products.

    Examples
    --------
    >>> dense_batch_job().recommend().chip in ("GPU", "TPU")
    True
    """
    return WorkloadProfile(
        name="batch scoring with dense matrix products",
        parallelism="high",
        arithmetic_intensity="high",
        memory_vs_compute="compute",
        branching="low",
        data_transfer="low",
        batch_vs_latency="batch",
        precision="float32",
        notes="Large batches of X @ W with the weights kept on the device between batches.",
    )


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """Arithmetic intensity: floating-point operations per byte moved to or from memory.

    Parameters
    ----------
    flops : float
        Operations the kernel performs, >= 0.
    bytes_moved : float
        Bytes it reads and writes, > 0.

    Examples
    --------
    A product of two n x n float64 matrices does 2 n^3 operations on 3 n^2 values of
    8 bytes (read both, write one), so its intensity grows with n:

    >>> n = 1_000
    >>> round(arithmetic_intensity(2 * n**3, 3 * n**2 * 8), 1)
    83.3

    ``y = a * x + y`` on float64 does 2 operations per element and moves 24 bytes
    (reads x and y, writes y): far below any chip's ridge point.

    >>> round(arithmetic_intensity(2 * n, 24 * n), 4)
    0.0833
    """
    _check_number(flops, "flops", allow_zero=True)
    _check_number(bytes_moved, "bytes_moved")
    return float(flops) / float(bytes_moved)


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The arithmetic intensity where a kernel stops being memory-bound: ``peak / bandwidth``.

    Examples
    --------
    >>> ridge_point(1e12, 100e9)   # 1 TFLOP/s and 100 GB/s: 10 flops per byte to saturate
    10.0
    """
    _check_number(peak_flops, "peak_flops")
    _check_number(bandwidth, "bandwidth")
    return float(peak_flops) / float(bandwidth)


def roofline(ai: float | np.ndarray, peak_flops: float, bandwidth: float) -> float | np.ndarray:
    """Attainable FLOP/s for arithmetic intensity ``ai``: ``min(peak_flops, ai * bandwidth)``.

    Below the ridge point memory bandwidth limits a kernel (the sloped roof); above it,
    peak compute does (the flat roof).

    Parameters
    ----------
    ai : float or array
        Arithmetic intensity in FLOP per byte, >= 0.
    peak_flops : float
        Peak compute of the chip, FLOP/s.
    bandwidth : float
        Memory bandwidth, bytes/s.

    Examples
    --------
    >>> roofline(2.0, peak_flops=1e12, bandwidth=100e9)    # memory-bound: 2 * 100 GB/s
    200000000000.0
    >>> roofline(50.0, peak_flops=1e12, bandwidth=100e9)   # compute-bound: the peak
    1000000000000.0
    """
    _check_number(peak_flops, "peak_flops")
    _check_number(bandwidth, "bandwidth")
    values = np.asarray(ai, dtype=float)
    if np.any(~np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"arithmetic intensity must be finite and >= 0 (FLOP per byte), got {ai!r}")
    attainable = np.minimum(float(peak_flops), values * float(bandwidth))
    return float(attainable) if attainable.ndim == 0 else attainable


def plot_roofline(
    peak_flops: float,
    bandwidth: float,
    kernels: Mapping[str, float] | None = None,
    ax: Any = None,
) -> Any:
    """Draw the roofline of one machine, with kernels marked at their intensity.

    Parameters
    ----------
    peak_flops, bandwidth : float
        Measured peak FLOP/s and memory bandwidth (bytes/s) of the machine.
    kernels : mapping of str to float, optional
        Kernel name to arithmetic intensity; each is drawn at its attainable FLOP/s.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> ax = plot_roofline(1e12, 100e9, kernels={"axpy": 1 / 12, "matmul": 83.3})
    >>> ax.get_xscale(), [line.get_label() for line in ax.get_lines()][-2:]
    ('log', ['axpy', 'matmul'])
    """
    ridge = ridge_point(peak_flops, bandwidth)
    kernels = dict(kernels or {})
    for name, value in kernels.items():
        _check_number(value, f"intensity of {name!r}")
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots()
    # Span the ridge and every kernel with some room either side.
    points = [ridge, *kernels.values()]
    ai = np.geomspace(min(points) / 10, max(points) * 10, 200)
    ax.loglog(ai, roofline(ai, peak_flops, bandwidth), "-", color="black",
              label=f"roof: {bandwidth / 1e9:.3g} GB/s, {peak_flops / 1e9:.3g} GFLOP/s")
    ax.axvline(ridge, linestyle=":", color="grey", label=f"ridge point {ridge:.3g} FLOP/byte")
    for name, value in kernels.items():
        ax.loglog([value], [roofline(value, peak_flops, bandwidth)], "o", label=name)
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title("Roofline")
    ax.legend()
    return ax


# --- private helpers -------------------------------------------------------------------


def _check_level(part: str, value: Any) -> str:
    choices = ", ".join(repr(level) for level in _RULES[part])
    if not isinstance(value, str):
        raise TypeError(f"{part} takes one of {choices}; got {value!r}")
    level = value.strip().lower()
    if level not in _RULES[part]:
        raise ValueError(f"{part} ({QUESTIONS[part]}) takes one of {choices}; got {value!r}")
    return level


def _favours(scores: tuple[int, int, int]) -> str:
    best = max(scores)
    if all(score == best for score in scores):
        return "-"
    return "/".join(chip for chip, score in zip(CHIPS, scores) if score == best)


def _check_number(value: Any, name: str, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
