"""Claims: what a chapter says about a measurement, checked where it was measured.

A chapter of the book never hard-codes a measured number or a conclusion. The cell that
measures something hands the numbers to the page with :func:`record` (MyST-NB's
``glue``, read back in the prose as ``{glue:text}`name:.2f```) and states every
relationship the prose relies on with :func:`claim`::

    from course_lib import claims
    SIZE = claims.begin()                 # records "size", pins BLAS/Numba to 1 thread
    ratio = slow_s / fast_s
    claims.claim("vec_faster", ratio > 3, "the vectorised version is faster", ratio=ratio)

and the prose then reads "the vectorised version was {glue:text}`vec_faster_ratio:.1f`
times faster".

Naming rule
    every keyword figure ``f`` given to ``claim("name", ...)`` is recorded as
    ``name_f`` (``vec_faster_ratio`` above), so a claim's figures never collide with
    another claim's on the same page.

When a claim does not hold
    the cell shows a warning box (the sentence, the measured figures, and that this
    machine did not show it), so a reader whose machine behaves differently learns
    something instead of reading a false sentence. In a strict build
    (``MEASURE_FIRST_STRICT=1``, which ``make book``, CI and the tests set) :func:`claim`
    then raises :class:`ClaimFailed`; the book's ``execute: raise_on_error: true`` turns
    that into a failed build, and ``show_tb: true`` puts the claim's name and sentence
    in the build log beside the page's name.

When a claim cannot be tested here
    some sentences need something this machine may lack: a free second core, a GPU, a
    tool that may not run. Such a claim takes ``applies=`` (whether the build can test
    it) and two passages, ``shown=`` (the paragraph when it held) and ``otherwise=``
    (the honest paragraph for a machine where it could not be tested), both
    ``str.format`` templates over the claim's figures. :func:`claim` puts the one that
    fits under the claim's own name, and the page shows it with a ``{glue:md}``
    directive, so a skipped claim never leaves its paragraph standing::

        claims.claim("pool_wins", low > 1, "the pool beats the loop", applies=free,
                     shown="The pool ran {ratio:.2f} times as fast ...",
                     otherwise="No second core was free ... ({ratio:.2f}x)", ratio=r)

    A paragraph that depends on an outcome in more ways than held-or-skipped is chosen
    in the cell and handed over with :func:`passage`.

Every claim also records its status (``name__claim``: ``{"status": "held" | "skipped" |
"failed", "skippable": bool}``), which ``tests/test_book.py`` reads to check that no
skippable claim's figures are quoted outside its passage.

Thread pools
    a timing that involves BLAS (NumPy's ``@``, ``np.dot``) or Numba must not depend on
    how many threads those libraries start on a busy machine. :func:`begin` pins both
    to one thread for the whole page; :func:`single_threaded` does it for one block.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = [
    "SIZES",
    "ClaimFailed",
    "size",
    "sized",
    "strict",
    "record",
    "claim",
    "passage",
    "STATUS_SUFFIX",
    "begin",
    "pin_threads",
    "single_threaded",
]

SIZES = ("small", "full")
SIZE_VARIABLE = "MEASURE_FIRST_SIZE"
STRICT_VARIABLE = "MEASURE_FIRST_STRICT"
# A claim's status is recorded as ``<name>__claim``; figures may not start with "_".
STATUS_SUFFIX = "__claim"


class ClaimFailed(AssertionError):
    """A sentence of the book that this build's measurements did not bear out."""


def size() -> str:
    """The book's size knob: ``"small"`` or ``"full"`` from ``MEASURE_FIRST_SIZE``.

    Unset means ``"full"`` (the syllabus sizes); ``make book`` sets ``small``.

    Examples
    --------
    >>> import os
    >>> os.environ["MEASURE_FIRST_SIZE"] = "small"
    >>> size()
    'small'
    """
    value = os.environ.get(SIZE_VARIABLE, "full").strip().lower() or "full"
    if value not in SIZES:
        raise ValueError(f"{SIZE_VARIABLE} must be 'small' or 'full', not {value!r}")
    return value


def sized(small: Any, full: Any) -> Any:
    """Pick the value for this build's size.

    Examples
    --------
    >>> import os
    >>> os.environ["MEASURE_FIRST_SIZE"] = "small"
    >>> sized(small=200_000, full=1_000_000)
    200000
    """
    return small if size() == "small" else full


def strict() -> bool:
    """Whether a false claim must fail the build (``MEASURE_FIRST_STRICT`` is 1/true/yes).

    Examples
    --------
    >>> import os
    >>> os.environ["MEASURE_FIRST_STRICT"] = "0"
    >>> strict()
    False
    """
    return os.environ.get(STRICT_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def record(name: str, value: Any) -> None:
    """Keep a measured value for the page's text, as MyST-NB's ``glue(display=False)``.

    NumPy scalars are unwrapped to Python numbers, so ``{glue:text}`name:.2f``` formats
    them like any float. Outside a notebook kernel this does nothing visible.

    Examples
    --------
    >>> import numpy as np
    >>> record("ratio", np.float64(3.5))
    """
    _check_name(name, "a recorded name")
    from myst_nb import glue

    glue(name, _plain(value), display=False)


def claim(name: str, condition: Any, sentence: str, *, applies: bool | None = None,
          shown: str | None = None, otherwise: str | None = None, **figures: Any) -> None:
    """Check a sentence the prose relies on; record its figures as ``name_<figure>``.

    Parameters
    ----------
    name : str
        A page-unique identifier for the claim; also the prefix of its figures' names.
    condition : bool-like
        Whether this build's measurements bear the sentence out.
    sentence : str
        The sentence (or its gist) that the prose states, as a reader would read it.
    applies : bool, optional
        Whether this machine can test the claim at all (a free core, a GPU). Given, it
        makes the claim *skippable*: ``shown`` and ``otherwise`` are then required, and
        when ``applies`` is false the claim is not checked and ``otherwise`` is the
        paragraph the page shows.
    shown, otherwise : str, optional
        The paragraph when the claim held, and the one for a machine that could not
        test it: ``str.format`` templates over ``figures``, recorded as Markdown under
        ``name`` for a ``{glue:md}`` directive.
    **figures
        The measured numbers behind it; each is recorded as ``name_<keyword>``.

    Returns
    -------
    None
        Nothing, so that a claim cell shows nothing when the claim holds. When it was
        tested and did not hold, a warning box is displayed; in a strict build
        :class:`ClaimFailed` is raised after it.

    Examples
    --------
    >>> import os
    >>> os.environ["MEASURE_FIRST_STRICT"] = "0"
    >>> claim("slope_linear", 0.8 < 1.02 < 1.2, "the slope is near 1", slope=1.02)
    """
    _check_name(name, "a claim's name")
    bad = [key for key in figures if key.startswith("_")]
    if bad:
        raise ValueError(f"a claim's figure names may not start with '_': {bad}")
    skippable = applies is not None
    if skippable and (shown is None or otherwise is None):
        raise ValueError(
            f"claim {name!r} can be skipped (applies=...), so the page needs both of its "
            "paragraphs: pass shown='...' (it held) and otherwise='...' (not testable here)"
        )
    if not skippable and (shown is not None or otherwise is not None):
        raise ValueError(f"claim {name!r}: shown=/otherwise= go with applies=...")
    for key, value in figures.items():
        record(f"{name}_{key}", value)
    tested = not skippable or bool(applies)
    holds = bool(condition) if tested else False
    status = "skipped" if not tested else "held" if holds else "failed"
    record(name + STATUS_SUFFIX, json.dumps({"status": status, "skippable": skippable}))
    if skippable:
        template = shown if tested else otherwise
        passage(name, template.format(**{k: _plain(v) for k, v in figures.items()}))
    if not tested or holds:
        return
    _show_failure(name, sentence, figures)
    if strict():
        shown_figures = ", ".join(f"{k}={_fmt(v)}" for k, v in figures.items()) or "no figures"
        raise ClaimFailed(
            f"claim {name!r} does not hold on this machine: {sentence!r} ({shown_figures}); "
            f"{STRICT_VARIABLE}=1 makes a false claim fail the build"
        )


def passage(name: str, text: str) -> None:
    """Hand the page a paragraph chosen from this build's outcome, as Markdown.

    For prose that depends on a measurement in more ways than a sentence with a number
    in it: which of two versions won, a degenerate value (one worker, a share of zero)
    that a template would make read wrongly. The page shows it with::

        ```{glue:md} name
        :format: myst
        ```

    Examples
    --------
    >>> passage("winner_text", "The set version won at every size.")
    """
    _check_name(name, "a passage's name")
    from IPython.display import Markdown
    from myst_nb import glue

    glue(name, Markdown(text), display=False)


def begin(threads: int | None = 1) -> str:
    """A chapter's first cell: record the size as ``size`` and pin thread pools.

    Parameters
    ----------
    threads : int or None
        Threads for BLAS/OpenMP pools and Numba for the rest of the page (see
        :func:`pin_threads`); ``None`` leaves them as they are.

    Returns
    -------
    str
        ``size()``, to keep as the page's ``SIZE``.

    Examples
    --------
    >>> import os
    >>> os.environ["MEASURE_FIRST_SIZE"] = "full"
    >>> begin(threads=None)
    'full'
    """
    current = size()
    record("size", current)
    if threads is not None:
        pin_threads(threads)
    return current


def pin_threads(threads: int = 1) -> None:
    """Limit BLAS/OpenMP pools (threadpoolctl) and, if imported, Numba to ``threads``.

    On a 2-core machine with one busy neighbour, ``np.dot`` of 200,000 floats took
    5.3 ms with OpenBLAS's two threads against 0.18 ms with one: a timing that lets
    the pool choose measures the neighbour. Call it again after importing Numba.

    Examples
    --------
    >>> pin_threads(1)
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads)
    numba = sys.modules.get("numba")
    if numba is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run a block with BLAS/OpenMP pools and Numba (if imported) on one thread.

    Examples
    --------
    >>> import numpy as np
    >>> with single_threaded():
    ...     _ = np.ones(1000) @ np.ones(1000)
    """
    from course_lib import timing

    # One implementation of "pools to n threads" for the book and the grader alike.
    with timing.limit_threads(1):
        yield


def _check_name(name: Any, what: str) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{what} must be a Python identifier, got {name!r}")


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _fmt(value: Any) -> str:
    value = _plain(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _show_failure(name: str, sentence: str, figures: dict[str, Any]) -> None:
    from IPython.display import display

    items = "".join(
        f"<li><code>{html.escape(k)}</code> = {html.escape(_fmt(v))}</li>"
        for k, v in figures.items()
    )
    body = (
        '<div class="admonition warning measure-first-claim">'
        '<p class="admonition-title">This machine did not show it</p>'
        f"<p>The text says: <em>{html.escape(sentence)}</em>. "
        "The measurement made while building this page does not bear that out "
        f"(claim <code>{html.escape(name)}</code>):</p>"
        f"<ul>{items}</ul>"
        "<p>Read the numbers above rather than the sentence: timings depend on the "
        "machine and on what else it was doing.</p></div>"
    )
    plain = (
        f"CLAIM NOT SHOWN on this machine ({name}): {sentence}\n"
        + "\n".join(f"  {k} = {_fmt(v)}" for k, v in figures.items())
    )
    display({"text/html": body, "text/plain": plain}, raw=True)
