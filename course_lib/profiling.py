"""Profilers as tidy tables: where a function's time goes, by function and by line.

:func:`profile` runs a function under :mod:`cProfile` and returns one row per function
called, the columns ``pstats`` prints (``ncalls``, ``tottime``, ``cumtime``,
``percall``) as a pandas DataFrame sorted by cumulative time. ``tottime`` is time spent
inside a function's own code; ``cumtime`` adds everything it called, so a large
``cumtime`` marks an expensive branch of the call tree and a large ``tottime`` a hot
loop. :func:`hotspot` picks the top row. :func:`line_profile` goes one level finer with
``line_profiler``: one row per source line of one function, which is what you want when a
single NumPy expression dominates.

Neither profiler is free: cProfile writes a record whenever a function is entered or
left, line_profiler whenever a line it watches runs. Code that spends its time in a
few large calls hardly notices; code that does little work in each of many small calls
pays for those records over and over, and under the profiler it looks slower than it
is. So a profile answers *where* the time goes, as shares of the run, and a plain timer
(``timing.stages()``, ``timing.bench()``) answers *how much* time there is.
"""

from __future__ import annotations

import cProfile
import functools
import inspect
import os
import pstats
import types
from collections.abc import Callable
from typing import Any

import pandas as pd
from line_profiler import LineProfiler

__all__ = ["profile", "to_table", "hotspot", "line_profile"]

COLUMNS = ["function", "location", "ncalls", "primcalls", "tottime", "cumtime", "percall"]
BUILTIN = "built-in"  # the location of C functions, which have no file or line

_RANKABLE = ("tottime", "cumtime", "ncalls", "primcalls", "percall")


def profile(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> pd.DataFrame:
    """Run ``fn(*args, **kwargs)`` under cProfile and tabulate the statistics.

    Parameters
    ----------
    fn : callable
        The function to profile; ``args`` and ``kwargs`` are passed to it.

    Returns
    -------
    pandas.DataFrame
        One row per function that ran, sorted by ``cumtime`` (largest first), with
        columns

        ``function``
            the function's name (C functions as cProfile names them, e.g.
            ``"<built-in method builtins.sum>"``);
        ``location``
            ``"file.py:line"`` where it is defined, or ``"built-in"``;
        ``ncalls``, ``primcalls``
            calls in all, and calls that were not recursive (pstats prints ``12/3``
            for 12 calls of which 3 primitive);
        ``tottime``
            seconds inside the function itself, callees excluded;
        ``cumtime``
            seconds including everything it called;
        ``percall``
            ``tottime / ncalls``.

        ``fn``'s return value is kept in ``table.attrs["result"]``.

    Notes
    -----
    pandas copies ``attrs`` (deeply) into every frame derived from the table, such as
    ``table.head()``. If the result is large, take it out once:
    ``result = table.attrs.pop("result")``.

    Examples
    --------
    >>> def helper(k):
    ...     return sum(range(k))
    >>> def job():
    ...     return [helper(100) for _ in range(10)]
    >>> table = profile(job)
    >>> table.iloc[0]["function"]     # the profiled function includes everything: top cumtime
    'job'
    >>> int(table.loc[table["function"] == "helper", "ncalls"].iloc[0])
    10
    >>> table.attrs["result"][:2]
    [4950, 4950]
    """
    if not callable(fn):
        raise TypeError(f"profile expects a function to call, got {type(fn).__name__}")
    profiler = cProfile.Profile()
    result = profiler.runcall(fn, *args, **kwargs)
    table = to_table(profiler)
    table.attrs["result"] = result
    return table


def to_table(stats: pstats.Stats | cProfile.Profile | str | os.PathLike) -> pd.DataFrame:
    """Tabulate cProfile statistics collected any other way.

    Use it on a ``cProfile.Profile`` used as a context manager, a ``pstats.Stats``, or a
    file written by ``python -m cProfile -o run.prof script.py`` or ``Profile.dump_stats``.
    The profiler's own bookkeeping (``Profile.disable``, ``__exit__``) is left out.

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`profile`, sorted by ``cumtime`` (largest first).
        ``table.attrs["entry_points"]`` lists ``(function, location)`` of the functions
        called directly from the profiled code, which :func:`hotspot` skips when ranking
        by ``cumtime``.

    Examples
    --------
    >>> import cProfile
    >>> with cProfile.Profile() as pr:
    ...     total = sum(x * x for x in range(1_000))
    >>> table = to_table(pr)
    >>> list(table.columns)
    ['function', 'location', 'ncalls', 'primcalls', 'tottime', 'cumtime', 'percall']
    >>> bool(table["function"].str.contains("_lsprof").any())   # the profiler is left out
    False
    """
    if isinstance(stats, cProfile.Profile):
        stats = pstats.Stats(stats)
    elif isinstance(stats, (str, os.PathLike)):
        if not os.path.exists(stats):
            raise FileNotFoundError(f"no profile file at {os.fspath(stats)!r}")
        stats = pstats.Stats(os.fspath(stats))
    elif not isinstance(stats, pstats.Stats):
        raise TypeError(
            "to_table expects a cProfile.Profile, a pstats.Stats or the path of a saved "
            f"profile, got {type(stats).__name__}"
        )
    rows = []
    entry_points = []
    for key, (primcalls, ncalls, tottime, cumtime, callers) in stats.stats.items():
        if _is_profiler(key):
            continue
        function, location = _name(key), _location(key)
        rows.append((function, location, ncalls, primcalls, tottime, cumtime, tottime / max(ncalls, 1)))
        # No recorded caller means it was called straight from the code being profiled.
        if not [c for c in callers if not _is_profiler(c)]:
            entry_points.append((function, location))
    table = pd.DataFrame(rows, columns=COLUMNS).astype(
        {"ncalls": "int64", "primcalls": "int64", "tottime": "float64", "cumtime": "float64", "percall": "float64"}
    )
    table = table.sort_values(["cumtime", "tottime"], ascending=False, kind="stable", ignore_index=True)
    table.attrs["entry_points"] = entry_points
    return table


def hotspot(
    fn_or_table: pd.DataFrame | Callable[..., Any],
    /,
    *args: Any,
    by: str = "tottime",
    exclude_builtins: bool = False,
    **kwargs: Any,
) -> pd.Series:
    """The function at the top of a profile: where to look first.

    Parameters
    ----------
    fn_or_table : DataFrame or callable
        A table from :func:`profile` or :func:`to_table`, or a function to profile with
        ``args`` and ``kwargs``.
    by : {"tottime", "cumtime", "ncalls", "primcalls", "percall"}, default "tottime"
        ``"tottime"`` finds the hot loop; ``"cumtime"`` the most expensive branch below
        the code you profiled (the entry points themselves, whose cumulative time is
        the whole run, are skipped unless nothing else is left).
    exclude_builtins : bool, default False
        Skip C functions (``location == "built-in"``) to find the Python code that
        calls them.

    Returns
    -------
    pandas.Series
        The top row, indexed by the table's columns.

    Examples
    --------
    >>> def slow(k):
    ...     total = 0
    ...     for i in range(k):
    ...         total += i * i
    ...     return total
    >>> def job():
    ...     return [slow(2_000) for _ in range(20)]
    >>> hotspot(job)["function"]
    'slow'
    """
    if isinstance(fn_or_table, pd.DataFrame):
        if args or kwargs:
            raise TypeError("arguments are for profiling a function; a table has already been measured")
        table = fn_or_table
    elif callable(fn_or_table):
        table = profile(fn_or_table, *args, **kwargs)
    else:
        raise TypeError(f"hotspot expects a profile table or a function, got {type(fn_or_table).__name__}")
    if by not in _RANKABLE:
        raise ValueError(f"by must be one of {', '.join(_RANKABLE)}; got {by!r}")
    missing = set(COLUMNS) - set(table.columns)
    if missing:
        raise ValueError(f"not a profile table (from profile() or to_table()): missing {sorted(missing)}")
    entry_points = set(map(tuple, table.attrs.get("entry_points", [])))
    rows = _without_attrs(table)
    if exclude_builtins:
        rows = rows[rows["location"] != BUILTIN]
    if by == "cumtime":
        below = rows[[(f, loc) not in entry_points for f, loc in zip(rows["function"], rows["location"])]]
        if len(below):
            rows = below
    if rows.empty:
        raise ValueError("the profile has no rows left to rank; did the function call any Python code?")
    return rows.sort_values(by, ascending=False, kind="stable").iloc[0]


def line_profile(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> pd.DataFrame:
    """Run ``fn(*args, **kwargs)`` under line_profiler: time per source line of ``fn``.

    Only ``fn``'s own lines are timed; a line that calls another function is charged
    with that call's whole time, which is how one expensive call stands out.

    Parameters
    ----------
    fn : function
        A function written in Python (decorated functions, methods and
        ``functools.partial`` objects are followed to the code inside).

    Returns
    -------
    pandas.DataFrame
        One row per line of ``fn``'s source, including lines that never ran, with
        columns ``line`` (line number in the file), ``hits`` (times executed),
        ``seconds`` (total), ``share`` (of the seconds of all lines; sums to 1 when any
        time was recorded) and ``source`` (the text, as ``inspect.getsource`` gives it).
        ``fn``'s return value is kept in ``table.attrs["result"]`` and the summed
        seconds in ``table.attrs["total_seconds"]``.

    Examples
    --------
    >>> import numpy as np
    >>> def job(n):
    ...     x = np.ones((n, n))
    ...     y = x @ x
    ...     return float(y[0, 0])
    >>> table = line_profile(job, 600)
    >>> table["hits"].tolist()        # the def line itself never runs
    [0, 1, 1, 1]
    >>> table.loc[table["share"].idxmax(), "source"].strip()
    'y = x @ x'
    >>> table.attrs["result"]
    600.0
    """
    target = _python_function(fn)
    try:
        lines, first = inspect.getsourcelines(target)
    except (OSError, TypeError) as err:
        raise ValueError(
            f"cannot read the source of {getattr(target, '__qualname__', target)!r} ({err}); "
            "line_profile needs a function defined in a file or a notebook cell"
        ) from None
    profiler = LineProfiler()
    profiler.add_function(target)
    result = profiler.runcall(fn, *args, **kwargs)
    stats = profiler.get_stats()
    hits: dict[int, int] = {}
    ticks: dict[int, int] = {}
    # Only ``target`` was added, so every entry is its own; there can be more than one
    # when line_profiler had to copy the code object (the function was profiled before).
    for entries in stats.timings.values():
        for lineno, nhits, total in entries:
            hits[lineno] = hits.get(lineno, 0) + nhits
            ticks[lineno] = ticks.get(lineno, 0) + total
    numbers = range(first, first + len(lines))
    seconds = [ticks.get(n, 0) * stats.unit for n in numbers]
    total = sum(seconds)
    table = pd.DataFrame(
        {
            "line": list(numbers),
            "hits": [hits.get(n, 0) for n in numbers],
            "seconds": seconds,
            "share": [s / total if total > 0 else 0.0 for s in seconds],
            "source": [text.rstrip("\n") for text in lines],
        }
    ).astype({"line": "int64", "hits": "int64", "seconds": "float64", "share": "float64"})
    table.attrs["result"] = result
    table.attrs["total_seconds"] = total
    return table


# --- private helpers -------------------------------------------------------------------


def _is_profiler(key: tuple[str, int, str]) -> bool:
    # cProfile records its own disable() and the context manager's __exit__.
    filename, _, name = key
    return "_lsprof.Profiler" in name or os.path.basename(filename) == "cProfile.py"


def _name(key: tuple[str, int, str]) -> str:
    return key[2]


def _location(key: tuple[str, int, str]) -> str:
    filename, line, _ = key
    if filename == "~" and line == 0:  # how pstats marks C functions
        return BUILTIN
    return f"{os.path.basename(filename)}:{line}"


def _without_attrs(table: pd.DataFrame) -> pd.DataFrame:
    # pandas deep-copies attrs into every derived frame; the profiled function's result
    # may be large (or not copyable at all), and ranking rows does not need it.
    saved = table.attrs
    table.attrs = {}
    try:
        return table.copy()
    finally:
        table.attrs = saved


def _python_function(fn: Any) -> types.FunctionType:
    if not callable(fn):
        raise TypeError(f"line_profile expects a function to call, got {type(fn).__name__}")
    target = fn
    while True:
        if isinstance(target, functools.partial):
            target = target.func
        elif isinstance(target, types.MethodType):
            target = target.__func__
        elif hasattr(target, "__wrapped__"):
            target = target.__wrapped__
        else:
            break
    if not isinstance(target, types.FunctionType):
        raise TypeError(
            f"line_profile times the lines of a function written in Python; {fn!r} has no "
            "Python source lines (a built-in or C function?). Profile the Python code that "
            "calls it instead, or use profile() for a per-function view"
        )
    return target
