"""Amdahl's and Gustafson's laws: how much a partial speed-up can buy.

Amdahl: if a share ``p`` of a job's run time gets ``s`` times faster, the whole job gets
``1 / ((1 - p) + p / s)`` times faster, and never more than ``1 / (1 - p)`` however large
``s`` is. Measure the shares first (``timing.stages()``), then ask this module what
accelerating a stage can possibly give, before writing any fast code.

Gustafson: when a faster machine is used to run a *bigger* job in the same time, the
serial part stays fixed and the scaled speed-up grows with the number of workers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from numbers import Real

import numpy as np
import pandas as pd

__all__ = ["speedup", "ceiling", "required_fraction", "gustafson", "from_stages", "plot"]


def speedup(p: float, s: float) -> float:
    """Whole-job speed-up when a fraction ``p`` of the run time gets ``s`` times faster.

    Parameters
    ----------
    p : float
        Share of the original run time that is sped up, in [0, 1].
    s : float
        Speed-up of that share, > 0; ``float("inf")`` for "free". A value below 1 is a
        slow-down of that share (overhead), which the formula handles just as well.

    Returns
    -------
    float
        ``1 / ((1 - p) + p / s)``.

    Examples
    --------
    >>> round(speedup(0.9, 10), 2)
    5.26
    >>> round(speedup(0.077, 20), 2)  # a stage with 7.7% of the time, made 20x faster
    1.08
    >>> speedup(0.5, float("inf"))
    2.0
    """
    _check_fraction(p)
    _check_speedup(s)
    remaining = (1.0 - p) + p / s  # p / inf == 0.0: the share costs nothing any more
    return math.inf if remaining == 0 else 1.0 / remaining


def ceiling(p: float) -> float:
    """The most any speed-up of the share ``p`` can give: ``1 / (1 - p)``.

    Examples
    --------
    >>> round(ceiling(0.9), 6)  # 90% of the time sped up: at most 10x, however fast
    10.0
    >>> round(ceiling(0.5), 6)
    2.0
    >>> ceiling(1.0)
    inf
    """
    _check_fraction(p)
    return math.inf if p == 1 else 1.0 / (1.0 - p)


def required_fraction(target: float, s: float) -> float:
    """The share ``p`` of the run time that must get ``s`` times faster to reach ``target``.

    This inverts :func:`speedup`: ``speedup(required_fraction(t, s), s) == t``.

    Parameters
    ----------
    target : float
        Whole-job speed-up wanted, > 0.
    s : float
        Speed-up available for the accelerated share, > 0 (may be ``inf``).

    Raises
    ------
    ValueError
        When no share in [0, 1] reaches ``target``: a speed-up ``s`` applied to the
        whole job (``p = 1``) gives exactly ``s``, so ``target > s`` is out of reach, and
        speeding part of a job up can never make it slower (``target < 1`` with ``s > 1``).

    Examples
    --------
    >>> round(required_fraction(5, 10), 4)  # 5x overall from a 10x kernel
    0.8889
    >>> round(required_fraction(2, float("inf")), 4)  # even "free" needs half the run time
    0.5
    >>> required_fraction(20, 10)
    Traceback (most recent call last):
    ...
    ValueError: target speed-up 20 is out of reach with s = 10: accelerating the whole job (p = 1) gives exactly 10, so the target must lie between 1 and 10
    """
    _check_positive("target", target)
    _check_speedup(s)
    if s == 1:
        # s = 1 changes nothing, whatever the share: only target 1 is reachable.
        if target == 1:
            return 0.0
        raise ValueError(
            f"target speed-up {target!r} is out of reach with s = 1: a share that is not "
            "made faster leaves the whole job at speed-up 1"
        )
    p = (1.0 - 1.0 / target) / (1.0 - 1.0 / s)
    # A round trip through speedup() can land a few ulps outside [0, 1]; snap those.
    if -_ROUNDING <= p < 0.0:
        p = 0.0
    elif 1.0 < p <= 1.0 + _ROUNDING:
        p = 1.0
    if not 0.0 <= p <= 1.0:
        low, high = sorted((1.0, s))
        raise ValueError(
            f"target speed-up {target!r} is out of reach with s = {s!r}: accelerating the "
            f"whole job (p = 1) gives exactly {s!r}, so the target must lie between "
            f"{_fmt(low)} and {_fmt(high)}"
        )
    return p


def gustafson(p: float, n: float) -> float:
    """Gustafson's scaled speed-up with ``n`` workers: ``(1 - p) + p * n``.

    Here the job grows with the machine. ``p`` is the parallel share of the run time
    measured *on the parallel machine*; the answer says how much longer one worker would
    need for the same (bigger) job.

    Parameters
    ----------
    p : float
        Parallel share of the run time on ``n`` workers, in [0, 1].
    n : float
        Number of workers, a finite number >= 1.

    Examples
    --------
    >>> gustafson(0.9, 10)
    9.1
    >>> gustafson(0.0, 64)  # nothing parallel: more workers buy nothing
    1.0
    """
    _check_fraction(p)
    _check_real("n", n)
    if not (math.isfinite(n) and n >= 1):
        raise ValueError(f"n is a number of workers and must be a finite number >= 1, got {n!r}")
    return (1.0 - p) + p * n


def from_stages(
    table: pd.DataFrame | pd.Series, accelerated: str | Iterable[str], s: float
) -> float:
    """Whole-job speed-up when the named stages of a measured job get ``s`` times faster.

    Parameters
    ----------
    table : pandas.DataFrame or pandas.Series
        Measured stages, indexed by stage name, with a ``"seconds"`` column, as
        ``timing.stages().table()`` returns; a Series of seconds per stage also works.
    accelerated : str or iterable of str
        The stage or stages to speed up.
    s : float
        Speed-up of those stages, > 0 (may be ``inf``).

    Returns
    -------
    float
        ``speedup(p, s)`` with ``p`` the accelerated stages' share of the total seconds.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({"seconds": [1.0, 7.0, 2.0]},
    ...                      index=pd.Index(["load", "clean", "save"], name="stage"))
    >>> round(from_stages(table, ["clean"], s=10), 3)  # p = 0.7
    2.703
    >>> round(from_stages(table, "clean", s=float("inf")), 3)  # the ceiling
    3.333
    """
    seconds = _stage_seconds(table)
    names = _stage_names(accelerated)
    known = [str(name) for name in seconds.index]
    unknown = [name for name in names if name not in seconds.index]
    if unknown:
        raise ValueError(
            f"unknown stage(s) {unknown}: the table has stages {known}"
        )
    total = float(seconds.sum())
    if total <= 0:
        raise ValueError(f"the stages take {total!r} seconds in total; nothing to speed up")
    _check_speedup(s)
    # Clip: summing the parts can exceed the total by an ulp when one stage dominates.
    p = min(1.0, float(seconds.loc[list(names)].sum()) / total)
    return speedup(p, s)


def plot(
    ps: Sequence[float] = (0.5, 0.75, 0.9, 0.95), s_max: float = 1000, ax=None
):
    """Plot whole-job speed-up against ``s`` (log scale) for several shares ``p``.

    Each ``p`` gets a solid curve and, in the same colour, its ceiling ``1 / (1 - p)``
    as a dashed horizontal line (none for ``p = 1``, whose ceiling is infinite).

    Parameters
    ----------
    ps : sequence of float
        Shares to draw, each in [0, 1].
    s_max : float
        Largest ``s`` on the x axis, > 1.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; a new figure is made when omitted.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> ax = plot(ps=(0.5, 0.9), s_max=100)
    >>> [line.get_label() for line in ax.lines if line.get_linestyle() == "-"]
    ['p = 0.5', 'p = 0.9']
    """
    ps = list(ps) if not isinstance(ps, Real) else [ps]
    if not ps:
        raise ValueError("ps is empty: give at least one share p to plot")
    for p in ps:
        _check_fraction(p)
    _check_real("s_max", s_max)
    if not (math.isfinite(s_max) and s_max > 1):
        raise ValueError(f"s_max must be a finite number > 1 for a log-scale axis, got {s_max!r}")
    if ax is None:
        import matplotlib.pyplot as plt  # imported lazily: plotting is optional

        _, ax = plt.subplots()
    s = np.logspace(0, math.log10(s_max), 200)
    for p in ps:
        curve = 1.0 / ((1.0 - p) + p / s)
        (line,) = ax.plot(s, curve, linestyle="-", label=f"p = {p:g}")
        if p < 1:
            ax.axhline(ceiling(p), color=line.get_color(), linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("speed-up s of the accelerated share")
    ax.set_ylabel("whole-job speed-up")
    ax.set_title("Amdahl's law: dashed lines are the ceilings 1 / (1 - p)")
    ax.legend(title="accelerated share")
    return ax


# Relative slack for snapping results that floating-point round trips push a few ulps
# outside [0, 1]; far below any share a measurement could tell apart.
_ROUNDING = 1e-9


def _check_real(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    if math.isnan(value):
        raise ValueError(f"{name} is NaN; a missing measurement cannot be used here")


def _check_fraction(p: object) -> None:
    _check_real("p", p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p is a share of run time and must be in [0, 1], got {p!r}")


def _check_positive(name: str, value: object) -> None:
    _check_real(name, value)
    if value <= 0:
        raise ValueError(f"{name} is a speed-up factor and must be positive, got {value!r}")


def _check_speedup(s: object) -> None:
    _check_positive("s", s)


def _fmt(x: float) -> str:
    return f"{x:g}"


def _stage_seconds(table: object) -> pd.Series:
    if isinstance(table, pd.DataFrame):
        if "seconds" not in table.columns:
            raise ValueError(
                f"the table needs a 'seconds' column (as Stopwatch.table() gives); "
                f"it has columns {list(table.columns)}"
            )
        seconds = table["seconds"]
    elif isinstance(table, pd.Series):
        seconds = table
    else:
        raise TypeError(
            "table must be a pandas DataFrame with a 'seconds' column indexed by stage "
            f"(as timing.stages().table() gives), got {type(table).__name__}"
        )
    seconds = pd.to_numeric(seconds, errors="raise").astype(float)
    bad = seconds[~np.isfinite(seconds) | (seconds < 0)]
    if len(bad):
        raise ValueError(
            f"seconds must be finite and >= 0; bad values for stage(s) {list(bad.index)}"
        )
    return seconds


def _stage_names(accelerated: object) -> list[str]:
    # A lone string is one stage name, not an iterable of one-letter stages.
    if isinstance(accelerated, str):
        return [accelerated]
    if not isinstance(accelerated, Iterable):
        raise TypeError(
            f"accelerated must be a stage name or a list of stage names, got {accelerated!r}"
        )
    # dict.fromkeys keeps order and drops repeats, so a stage is never counted twice.
    return list(dict.fromkeys(accelerated))
