"""A chapter's set-up, in one call: size, budget, cores, scratch folder, labelled figures.

Every chapter of the book starts with one hidden cell that imports what the page uses and
calls :func:`setup`. It leaves no output: the page states its size and machine in the
prose, through the figures :func:`setup` records (``size``, ``cores``, ``load``,
``budget``)::

    from course_lib import book
    page = book.setup(budget=(0.3, 1.0), workdir=True)
    page.size, page.budget, page.cores, page.workdir

What it does, so that no chapter repeats it:

- records the size (``MEASURE_FIRST_SIZE``) and pins BLAS/OpenMP pools (and Numba, if
  imported) to one thread (:func:`course_lib.claims.begin`);
- counts the cores this process may really use (:func:`usable_cores`: the affinity mask
  and a container's CPU quota, not ``os.cpu_count()``);
- makes a scratch folder that is removed when the kernel exits (``workdir=True``), and
  optionally works inside it (``chdir=True``: a page whose worker processes import a
  module it writes there);
- checks every figure the page shows (:func:`figure_problems`): each panel titled (or the
  figure), each axis labelled (or its ticks are words). The labels travel with the image
  in its output's metadata, under the media type :data:`MIME`, where
  ``tests/test_book.py`` reads them, with alt text written from them
  (:func:`figure_alt`) that ``book/_ext/measure_first_figures.py`` gives the page's
  ``<img>``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from course_lib import claims

__all__ = ["Page", "setup", "usable_cores", "figure_problems", "figure_labels",
           "figure_alt", "pin", "chapter_costs", "MIME", "COSTS"]

# The media type under which a shown figure's titles and axis labels are recorded.
MIME = "application/vnd.measure-first.figure+json"
# What each chapter cost to run at each size, as benchmarks/chapter_costs.py records it.
COSTS = Path(__file__).with_name("chapter_costs.json")


@dataclass(frozen=True)
class Page:
    """What a chapter's first cell established; every field is also recorded for the prose.

    Attributes
    ----------
    size : str
        ``"small"`` or ``"full"`` (recorded as ``size``).
    budget : float
        Seconds of timed rounds per comparison at this size (recorded as ``budget``).
    cores : int
        Cores this process may use (recorded as ``cores``).
    load : float
        One-minute load average when the page started (recorded as ``load``; NaN where
        the system has none).
    workdir : Path or None
        The page's scratch folder, removed when the kernel exits.
    """

    size: str
    budget: float
    cores: int
    load: float
    workdir: Path | None

    @property
    def numba_threads(self) -> int:
        """Threads a ``prange`` loop may use here: the cores, within Numba's own limit."""
        import numba

        return max(1, min(self.cores, numba.config.NUMBA_NUM_THREADS))


def setup(*, budget: tuple[float, float] = (0.3, 1.0), workdir: bool = False,
          chdir: bool = False, precision: int | None = 3, threads: int = 1) -> Page:
    """Set a chapter up; returns the :class:`Page` and records its figures for the prose.

    Parameters
    ----------
    budget : (float, float)
        Seconds per timing at the small and at the full size.
    workdir : bool
        Make a scratch folder (removed at exit).
    chdir : bool
        Also make it the working directory (implies ``workdir``).
    precision : int or None
        pandas' display precision for the page's tables; ``None`` leaves it.
    threads : int
        BLAS/OpenMP (and Numba) threads for the page (see :func:`pin`).

    Examples
    --------
    >>> import os
    >>> os.environ["MEASURE_FIRST_SIZE"] = "small"
    >>> page = setup(budget=(0.3, 1.0), precision=None)
    >>> page.size, page.budget, page.cores >= 1
    ('small', 0.3, True)
    """
    size = claims.begin(threads=threads)
    chosen = claims.sized(*budget)
    cores = usable_cores()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    folder = None
    if workdir or chdir:
        folder = Path(tempfile.mkdtemp(prefix=f"{_page_name()}-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        if chdir:
            os.chdir(folder)
    if precision is not None:
        import pandas as pd

        pd.set_option("display.precision", precision)
    for name, value in (("budget", chosen), ("cores", cores), ("load", load)):
        claims.record(name, value)
    _check_figures()
    return Page(size=size, budget=float(chosen), cores=cores, load=load, workdir=folder)


def pin(blas: int = 1, numba: int | None = None) -> None:
    """Pin every loaded BLAS/OpenMP pool to ``blas`` threads, and Numba to ``numba``.

    Call it again after something loads a BLAS of its own (Numba compiling ``X @ b``
    loads SciPy's OpenBLAS, whose pool starts with a thread per core). ``numba=None``
    leaves Numba's thread count as it is.

    Examples
    --------
    >>> pin(blas=1)
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=blas)
    module = sys.modules.get("numba")
    if numba is not None and module is not None:
        module.set_num_threads(max(1, min(numba, module.config.NUMBA_NUM_THREADS)))


def usable_cores() -> int:
    """Cores this process may run on: its affinity mask, capped by a cgroup CPU quota.

    ``os.cpu_count()`` counts the machine's cores; a container or a ``taskset`` can
    allow fewer, and neither says how many other programs leave free.

    Examples
    --------
    >>> usable_cores() >= 1
    True
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        cores = min(cores, max(1, int(quota)))
    return max(1, cores)


def chapter_costs(path: str | os.PathLike[str] | None = None) -> Any:
    """What each chapter cost to run at each size, as ``benchmarks/chapter_costs.py`` saw it.

    A build runs at one size and cannot time the other, so these figures come from a
    record: every chapter run in a fresh kernel, one after another, strict, as a
    reader's Jupyter would run it. The record keeps each chapter's source hash; a
    chapter edited since it was measured is marked, so a page can say its figures may
    no longer fit.

    Parameters
    ----------
    path : path, optional
        The record; by default :data:`COSTS`, beside this module.

    Returns
    -------
    pandas.DataFrame
        One row per chapter (``book/NAME.md``), in the table of contents' order where
        it is at hand, with for each recorded size ``SIZE minutes`` (wall time),
        ``SIZE peak GB`` (10^9 bytes, as the chapters count memory: the larger of the largest process's own high-water mark
        and the sampled sum over the kernel and the processes it started) and
        ``SIZE load`` (the highest one-minute load average while it ran); then
        ``changed``: ``True`` where the chapter's source differs from the measured one,
        ``None`` where the source is not at hand.
        ``attrs["machines"]`` holds each size's machine, ``attrs["recorded"]`` each
        size's first and last date, and ``attrs["missing"]`` the notebook pages of the
        book's table of contents with no entry at some size (``None`` where the table
        of contents is not at hand).

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> rec = {"full": {"machine": {"cores": 2}, "chapters": {"book/x.md": {
    ...     "seconds": 90.0, "peak_process_mb": 300.0, "peak_all_mb": 250.0,
    ...     "load_max": 2.5, "sha256": "0", "recorded": "2025-01-01T10:00+00:00"}}}}
    >>> path = Path(tempfile.mkdtemp()) / "costs.json"
    >>> _ = path.write_text(json.dumps(rec))
    >>> chapter_costs(path).loc["book/x.md", ["full minutes", "full peak GB"]].tolist()
    [1.5, 0.3145728]
    """
    import hashlib
    import json

    import pandas as pd

    source = Path(path) if path is not None else COSTS
    if not source.is_file():
        raise FileNotFoundError(
            f"no record of the chapters' costs at {source}: make one with "
            "`python benchmarks/chapter_costs.py --size full --record` (and --size small)")
    record = json.loads(source.read_text(encoding="utf-8"))
    sizes = [size for size in claims.SIZES[::-1] if size in record]   # full, then small
    rows: dict[str, dict[str, Any]] = {}
    for size in sizes:
        for doc, entry in record[size]["chapters"].items():
            row = rows.setdefault(doc, {"sha256": set()})
            row[f"{size} minutes"] = entry["seconds"] / 60
            # The record keeps MiB (ru_maxrss is in KiB); the pages speak decimal GB.
            row[f"{size} peak GB"] = max(entry["peak_process_mb"],
                                         entry["peak_all_mb"]) * 2**20 / 1e9
            row[f"{size} load"] = entry["load_max"]
            row["sha256"].add(entry["sha256"])
    root = Path(__file__).resolve().parents[1]
    for doc, row in rows.items():
        chapter = root / doc
        hashes = row.pop("sha256")
        row["changed"] = (None if not chapter.is_file() else
                          hashlib.sha256(chapter.read_bytes()).hexdigest() not in hashes
                          or len(hashes) > 1)
    pages = _notebook_pages(root)
    listed = [d for d in pages or [] if d in rows]
    order = listed + [d for d in rows if d not in listed]
    table = pd.DataFrame.from_dict(rows, orient="index").loc[order]
    table["changed"] = pd.Series({doc: rows[doc]["changed"] for doc in order},
                                 dtype=object)       # True, False or None, as said
    table.index.name = "chapter"
    table.attrs["machines"] = {size: record[size].get("machine", {}) for size in sizes}
    table.attrs["recorded"] = {size: (min(dates), max(dates)) for size in sizes
                               for dates in [[e["recorded"][:10] for e in
                                              record[size]["chapters"].values()]]}
    table.attrs["missing"] = None if pages is None else [
        doc for doc in pages
        if any(doc not in record.get(size, {}).get("chapters", {})
               for size in claims.SIZES)]
    return table


def figure_labels(fig: Any) -> dict[str, Any]:
    """What a reader sees labelling a figure: its title and each panel's title and axes.

    Returns ``{"title": str, "axes": [{"title", "xlabel", "ylabel", "xticks",
    "yticks", "xnames", "ynames", "legend"}, ...], "legend": [...]}``, with
    ``xticks``/``yticks`` true when the ticks are words (bar names) rather than
    numbers, ``xnames``/``ynames`` those words, and ``legend`` the entries of the
    panel's legend (at the top level: of the figure's own). Only panels that show
    something are listed.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> _ = ax.plot([1, 2], [3, 4]); _ = ax.set(xlabel="n", title="t")
    >>> figure_labels(fig)["axes"][0]["ylabel"]
    ''
    >>> plt.close(fig)
    """
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
    panels = []
    for ax in fig.get_axes():
        if not ax.get_visible() or not _shows_something(ax):
            continue
        legend = ax.get_legend()
        panels.append({
            "title": ax.get_title() or ax.get_title("left") or ax.get_title("right"),
            "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
            # Bar names label an axis; so does a shared axis whose ticks another panel names.
            "xticks": any(_worded(a.get_xticklabels())
                          for a in ax.get_shared_x_axes().get_siblings(ax)),
            "yticks": any(_worded(a.get_yticklabels())
                          for a in ax.get_shared_y_axes().get_siblings(ax)),
            "xnames": _words(ax.get_xticklabels()),
            "ynames": _words(ax.get_yticklabels()),
            "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
        })
    legends = [t.get_text() for legend in getattr(fig, "legends", [])
               for t in legend.get_texts()]
    return {"title": title, "axes": panels, "legend": legends}


def figure_alt(labels: dict[str, Any]) -> str:
    """Alt text for a figure, written from its labels (from :func:`figure_labels`).

    What a reader who cannot see the image needs first: what each panel shows and
    what its axes measure, with the names of bars and legend entries. The values
    themselves are the page's to state, in its tables and prose.

    Examples
    --------
    >>> figure_alt({"title": "", "axes": [{"title": "Per round", "xlabel": "round",
    ...     "ylabel": "", "xnames": [], "ynames": [], "legend": ["quiet", "busy"]}]})
    'Plot: Per round. Horizontal axis: round. Legend: quiet, busy.'
    """
    panels = labels.get("axes", [])
    title = _readable(labels.get("title", ""))
    parts = [_panel_alt(panel) for panel in panels]
    legend = _named(labels.get("legend", []))
    ending = [f"Legend for all plots: {legend}."] if legend else []
    if len(parts) == 1:
        heading = "Plot:" if not title else f"Plot: {title}."
        return " ".join([heading, parts[0], *ending]).strip()
    heading = (f"{title}. " if title else "") + f"{len(parts)} plots."
    return " ".join([heading] + [f"Plot {k}: {text}" for k, text in
                                 enumerate(parts, start=1)] + ending)


def figure_problems(labels: dict[str, Any]) -> list[str]:
    """What a figure's labels (from :func:`figure_labels`) leave the reader to guess.

    Every panel needs a title unless the figure has one, and each of its axes a label
    unless its ticks are words.

    Examples
    --------
    >>> figure_problems({"title": "", "axes": [{"title": "", "xlabel": "n",
    ...     "ylabel": "", "xticks": False, "yticks": False}]})
    ['panel 1 has no title', 'panel 1 has no y-axis label']
    """
    problems = []
    for k, panel in enumerate(labels["axes"], start=1):
        if not (panel["title"].strip() or labels["title"].strip()):
            problems.append(f"panel {k} has no title")
        for axis in ("x", "y"):
            if not (panel[f"{axis}label"].strip() or panel[f"{axis}ticks"]):
                problems.append(f"panel {k} has no {axis}-axis label")
    if not labels["axes"]:
        problems.append("the figure shows nothing")
    return problems


# --- private helpers ------------------------------------------------------------------


def _page_name() -> str:
    name = os.environ.get("JPY_SESSION_NAME") or "measure-first"
    return re.sub(r"[^A-Za-z0-9_]+", "_", Path(name).stem)[:40] or "page"


def _notebook_pages(root: Path) -> list[str] | None:
    """The table of contents' pages that have code to run, or None without a ``_toc.yml``."""
    toc = root / "_toc.yml"
    if not toc.is_file():
        return None
    names = re.findall(r"^\s*(?:root|- file):\s*(\S+)\s*$", toc.read_text(encoding="utf-8"),
                       flags=re.M)
    pages = []
    for name in names:
        page = root / f"{name}.md"
        text = page.read_text(encoding="utf-8") if page.is_file() else ""
        parts = text.split("---", 2)              # "", the front matter, the page
        if len(parts) == 3 and "jupytext:" in parts[1] and "```{code-cell}" in parts[2]:
            pages.append(f"{name}.md")
    return pages


def _cgroup_quota() -> float | None:
    """CPUs' worth of time a cgroup allows (v2 ``cpu.max``, v1 CFS quota), or None."""
    with contextlib.suppress(OSError, ValueError):
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    with contextlib.suppress(OSError, ValueError):
        base = Path("/sys/fs/cgroup/cpu")
        quota = int((base / "cpu.cfs_quota_us").read_text())
        period = int((base / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 else quota / period
    return None


def _shows_something(ax: Any) -> bool:
    return bool(ax.lines or ax.patches or ax.collections or ax.images or ax.containers)


def _worded(ticks: Any) -> bool:
    # Numeric ticks may be mathtext ("$\mathdefault{10^{3}}$"): drop it before looking
    # for letters.
    texts = [re.sub(r"\$[^$]*\$", "", t.get_text()) for t in ticks]
    return any(any(c.isalpha() for c in text) for text in texts)


def _words(ticks: Any) -> list[str]:
    # An axis with any worded tick is a named axis ("500", "1k", "2k"): every label names
    # a position then, the numbers too. An axis of numbers alone names none: its values
    # are the page's to state.
    if not _worded(ticks):
        return []
    return [t.get_text() for t in ticks if t.get_text().strip()]


def _readable(text: str) -> str:
    """A label without mathtext marks: "$n^2$" reads "n^2"."""
    text = re.sub(r"\\mathdefault\{([^}]*)\}", r"\1", text)
    return re.sub(r"\s+", " ", text.replace("$", "")).strip()


def _named(names: list[str], most: int = 8) -> str:
    names = [_readable(n) for n in names if _readable(n)]
    if len(names) > most:
        return ", ".join(names[:most]) + f" and {len(names) - most} more"
    return ", ".join(names)


def _panel_alt(panel: dict[str, Any]) -> str:
    sentences = []
    title = _readable(panel.get("title", ""))
    if title:
        sentences.append(f"{title}.")
    for axis, side in (("x", "Horizontal"), ("y", "Vertical")):
        label = _readable(panel.get(f"{axis}label", ""))
        names = _named(panel.get(f"{axis}names", []))
        if label and names:
            sentences.append(f"{side} axis: {label} ({names}).")
        elif label or names:
            sentences.append(f"{side} axis: {label or names}.")
    legend = _named(panel.get("legend", []))
    if legend:
        sentences.append(f"Legend: {legend}.")
    return " ".join(sentences)


def _check_figures() -> None:
    """Record each figure the page shows with its labels, in its output's metadata.

    A display formatter of its own (media type :data:`MIME`) returns no data, only
    metadata, so a renderer sees nothing new while the notebook keeps the record beside
    the PNG. It is registered for ``FigureBase``: activating matplotlib's inline backend
    removes every formatter's entry for ``Figure`` itself (IPython's
    ``select_figure_formats``), and lookups follow the class hierarchy.
    """
    try:
        from IPython import get_ipython
        from IPython.core.formatters import BaseFormatter
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or MIME in shell.display_formatter.formatters:
        return
    from matplotlib.figure import FigureBase

    from traitlets import ObjectName, Unicode

    class _LabelFormatter(BaseFormatter):
        format_type = Unicode(MIME)
        # Only figures: no object has this method, so nothing else gets a record.
        print_method = ObjectName("_repr_measure_first_figure_labels_")

        def _check_return(self, r: Any, obj: Any) -> Any:
            # (None, labels): metadata only, no data for a renderer to trip on.
            return r if r is None or (isinstance(r, tuple) and r[0] is None) else None

    formatter = _LabelFormatter(parent=shell.display_formatter)
    formatter.for_type(FigureBase, _label_record)
    shell.display_formatter.formatters[MIME] = formatter


def _label_record(fig: Any) -> tuple[None, dict[str, Any]] | None:
    if not fig.get_axes():
        return None                              # nothing is drawn for an empty figure
    labels = figure_labels(fig)
    labels["problems"] = figure_problems(labels)
    labels["alt"] = figure_alt(labels)
    return None, labels
