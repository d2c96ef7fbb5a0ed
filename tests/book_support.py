"""Build the book once per test session, as `make book` does, for test_book*.py.

Not a test module: tests/test_book.py and tests/test_book_browser.py import it, so
both share one build (the first caller pays; the second gets the cached result).
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "HTML", "EXECUTED", "BuildResult", "build_book", "stray_outputs",
           "plumbing_in_view", "figure_problems", "standing_paragraphs", "claim_statuses",
           "images_without_alt"]

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
# The notebooks as the build executed them, and each page's glued values.
EXECUTED = ROOT / "_build" / "jupyter_execute"
HIDDEN = ("remove-input", "remove-cell")
# Calls that only hand numbers to the prose: never in a cell the reader sees.
PLUMBING = re.compile(r"\b(claims\.(claim|record|passage)|record|glue)\(")
# The same command as the Makefile's `book` target, at the small size that keeps a
# cold build of the whole book within the CI budget.
COMMAND = ("build", ".", "-W", "-n", "--keep-going")
SIZE = "small"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# A line Sphinx or Jupyter Book logs after a traceback: its end (see BuildResult.tracebacks).
_SPHINX_LINE = re.compile(r"(reading sources|looking for now-outdated|pickling environment|checking "
                          r"consistency|preparing documents|writing output|copying |build (succeeded|"
                          r"finished)|Executing: |Executed |Running Jupyter-Book|.*WARNING: |"
                          r"\[mystnb|=+$)")


@dataclass(frozen=True)
class BuildResult:
    returncode: int
    output: str

    @property
    def warnings(self) -> list[str]:
        # Sphinx's own "WARNING:" lines; not the kernel's "[IPKernelApp] WARNING | ...".
        # Also not tornado's "ERROR:tornado.general:Uncaught exception in ZMQStream callback":
        # the kernel messaging layer logged it once in a cold CI-style build (exit status 0,
        # every cell executed). It is not a Sphinx diagnostic, and test_book checks every
        # cell's output for errors itself.
        return [line for line in self.output.splitlines()
                if ("WARNING:" in line or "ERROR:" in line or "CRITICAL:" in line)
                and not line.startswith("ERROR:tornado.general:")]

    def tracebacks(self, lines: int = 30) -> str:
        """The end of each failed chapter's traceback, which myst-nb saves to a file.

        The build's own output names only the file; CI keeps nothing but the test log, so a
        failed claim's message must be copied into the test's failure to be seen there.
        """
        found = []
        for match in re.finditer(r"traceback saved in: (\S+\.err\.log)", self.output):
            path = Path(match.group(1))
            try:
                text = _ANSI.sub("", path.read_text(encoding="utf-8", errors="replace"))
            except OSError as error:
                found.append(f"{path}: unreadable ({error})")
                continue
            found.append(f"--- {path.name} (last {lines} lines) ---\n"
                         + "\n".join(text.splitlines()[-lines:]))
        # With show_tb (this book's _config.yml) the traceback follows the warning line in
        # the build's own output instead: the lines up to the next line Sphinx logs.
        out = _ANSI.sub("", self.output).splitlines()
        for i, line in enumerate(out):
            if "Executing notebook failed" not in line:
                continue
            block = []
            for following in out[i + 1:i + 400]:
                # Sphinx's next line, or the chained error that ends the build: the cell's
                # error (a ClaimFailed and its message) is just above either.
                if _SPHINX_LINE.match(following.strip()) or following.startswith(
                        ("myst_nb.core.execute.base.ExecutionError", "The above exception")):
                    break
                block.append(following)
            found.append(f"--- {line.split(': WARNING')[0].strip()}: the traceback's last {lines} lines ---\n"
                         + "\n".join(block[-lines:]))
        return "\n".join(found)


@functools.cache
def build_book() -> BuildResult:
    """Run ``jupyter-book build . -W -n --keep-going`` with MEASURE_FIRST_SIZE=small."""
    executable = Path(sys.executable).with_name("jupyter-book")
    # strict: a false course_lib.claims claim fails the build (see course_lib/claims.py)
    env = {**os.environ, "MEASURE_FIRST_SIZE": SIZE, "MEASURE_FIRST_STRICT": "1"}
    # conftest.py sets MPLBACKEND=Agg for the tests; a notebook kernel that inherits it
    # would draw no inline figures, so the chapters' plots would silently vanish.
    env.pop("MPLBACKEND", None)
    proc = subprocess.run([str(executable), *COMMAND], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    return BuildResult(proc.returncode, proc.stdout + proc.stderr)


# --- what the pages may not show: checks over an executed notebook ---------------------


def stray_outputs(notebook: dict[str, Any]) -> list[str]:
    """Outputs of hidden cells (set-up, claims) that the reader would see or that say nothing.

    A cell tagged remove-input shows its outputs without its code: a bare ``True``,
    ``False`` or ``None`` there (some call's return value) is noise, and a claim cell
    may show nothing but the box of a claim that failed. A remove-cell cell shows
    nothing on the page but still carries its outputs into the downloadable notebook:
    it may have none. The first code cell (the set-up) may print nothing either.
    """
    found = []
    code = [c for c in notebook.get("cells", []) if c.get("cell_type") == "code"]
    for index, cell in enumerate(code):
        tags = cell.get("metadata", {}).get("tags", [])
        source = "".join(cell.get("source", ""))
        where = f"code cell {index + 1} ({(source.strip().splitlines() or [''])[0][:50]!r})"
        claim_cell = re.search(r"\bclaims\.(claim|record|passage)\(", source)
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            text = "".join(data.get("text/plain", "")) if data else "".join(output.get("text", ""))
            if "measure-first-claim" in "".join(data.get("text/html", "")):
                continue                          # a failed claim's box: for the reader
            if "remove-input" in tags and output.get("output_type") == "execute_result" \
                    and text.strip() in ("True", "False", "None"):
                found.append(f"{where}: a bare {text.strip()}")
            elif index == 0 or "remove-cell" in tags or ("remove-input" in tags and claim_cell):
                what = "set-up" if index == 0 else "removed" if "remove-cell" in tags else "claim"
                found.append(f"{where}: the {what} cell shows {text.strip()[:60]!r}")
    return found


def plumbing_in_view(notebook: dict[str, Any]) -> list[str]:
    """Visible code cells (after the set-up) that call the page's plumbing."""
    found = []
    code = [c for c in notebook.get("cells", []) if c.get("cell_type") == "code"]
    for index, cell in enumerate(code[1:], start=2):
        tags = cell.get("metadata", {}).get("tags", [])
        if any(tag in tags for tag in HIDDEN):
            continue
        source = "".join(cell.get("source", ""))
        for line in source.splitlines():
            if PLUMBING.search(line.split("#")[0]):
                found.append(f"code cell {index}: {line.strip()[:80]}")
    return found


def figure_problems(notebook: dict[str, Any]) -> list[str]:
    """Figures a reader has to guess about: no labels recorded, or labels missing.

    ``course_lib.book.setup`` gives each shown figure a record of its titles and axis
    labels, in the metadata of the output that holds its PNG (under the media type
    ``course_lib.book.MIME``); a figure without it was drawn on a page that skipped
    the set-up.
    """
    from course_lib.book import MIME

    found = []
    code = [c for c in notebook.get("cells", []) if c.get("cell_type") == "code"]
    for index, cell in enumerate(code, start=1):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" not in data:
                continue
            labels = output.get("metadata", {}).get(MIME)
            if labels is None:
                found.append(f"code cell {index}: a figure with no label record")
                continue
            found += [f"code cell {index}: {problem}" for problem in labels.get("problems", [])]
    return found


def images_without_alt(html: str) -> list[str]:
    """Images a screen reader cannot describe: no alt text, or a file name as alt text.

    Sphinx writes an image's path as its alt text when none is given, so a figure whose
    alt text was lost reads as ``../_images/<hash>.png``.
    """
    from bs4 import BeautifulSoup

    found = []
    for img in BeautifulSoup(html, "html.parser").find_all("img"):
        alt = (img.get("alt") or "").strip()
        src = img.get("src", "")
        if not alt or re.search(r"\.(png|jpe?g|gif|svg)$", alt, re.IGNORECASE) or alt == src:
            found.append(f"{src}: alt {alt!r}")
    return found


def claim_statuses(glue: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each claim's recorded status, from a page's ``.glue.json``: name -> status dict."""
    statuses = {}
    for key, output in glue.items():
        if not key.endswith("__claim"):
            continue
        text = "".join(output.get("data", {}).get("text/plain", ""))
        statuses[key[: -len("__claim")]] = json.loads(ast.literal_eval(text))
    return statuses


def standing_paragraphs(source: str, statuses: dict[str, dict[str, Any]]) -> list[str]:
    """Prose that relies on a skippable claim outside the passage made for it.

    A skippable claim (one that a machine without a free core or a GPU cannot test)
    hands the page its paragraph for each outcome, under its own name; the page must
    show that passage (``{glue:md}`name``` or the directive) and may not quote the
    claim's figures anywhere else, or on a machine that skipped it the old paragraph
    would still stand.
    """
    prose = _prose(source)
    found = []
    for name, status in statuses.items():
        if not status.get("skippable"):
            continue
        quoted = sorted(set(re.findall(r"\{glue(?::text)?\}`(" + re.escape(name)
                                       + r"_[A-Za-z0-9_]+)", prose)))
        if quoted:
            found.append(f"claim {name!r} ({status['status']}): its figures {quoted} are "
                         "quoted outside its passage")
        shown = re.search(r"\{glue:md\}\s*`?" + re.escape(name) + r"\b", prose)
        if not shown:
            found.append(f"claim {name!r} ({status['status']}): the page never shows its "
                         "passage ({glue:md} " + name + ")")
    return found


def _prose(source: str) -> str:
    """A MyST notebook's text outside its code cells."""
    return re.sub(r"```\{code-cell\}.*?\n```", "", source, flags=re.S)
