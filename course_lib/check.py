"""A student's self-check: run a graded notebook's visible tests and print what they score.

From inside the notebook (save it first: the check runs the saved file)::

    from course_lib.check import check
    check("part2")      # the visible tests of Part 2 (and every cell before them)
    check("task2")      # the same in a notebook whose sections are tasks (weeks 3 to 8)
    check()             # every visible test

From a terminal, in the notebook's folder: ``course check week1.ipynb`` (or
``python -m course_lib check week1.ipynb`` where ``course`` is not on ``PATH``).

The notebook runs from the top in a fresh kernel started in its folder, with
``NBGRADER_EXECUTION=validate`` set as ``nbgrader validate`` sets it, so nothing the open
notebook's kernel holds can make a test pass. A test cell is scored the way nbgrader
scores it: zero if it raises or writes to stderr, the number it returns if it returns
one (partial credit), otherwise full marks. Hidden tests are not in the notebook you
have: they run only when the notebook is graded, and the check says what they are worth
and, for speed tests, what the notebook's text says they need and what the cell's speed
preview (:mod:`course_lib.preview`) measured on this machine: a preview, not the grade.

This module needs nbformat, nbclient and ipykernel only, not nbgrader nor the
instructor's ``course_lib.grader``, so that the student repository can leave both out.
"""

from __future__ import annotations

import ast
import datetime
import hashlib
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CheckedCell", "CheckResult", "CheckError", "check", "check_notebook", "find_notebook",
           "parts", "main"]

#: Exit statuses of :func:`main`, the same as the ``course`` command's.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class CheckError(ValueError):
    """A notebook or a part that cannot be checked; the message says why in one line."""


@dataclass(frozen=True)
class CheckedCell:
    """One grade cell: ``status`` is ``passed``, ``failed``, ``hidden``, ``manual`` or ``not-run``.

    ``part`` is the ``## Part N: ...`` heading the cell is under ("" before any); ``note``
    is what the cell's own comment says it needs, for hidden speed tests; ``preview`` is
    what the cell's visible speed preview measured on this machine (see
    :mod:`course_lib.preview`), if it has one.
    """

    grade_id: str
    status: str
    points: float
    max_points: float
    message: str = ""
    note: str = ""
    part: str = ""
    preview: str = ""


@dataclass(frozen=True)
class CheckResult:
    """What :func:`check_notebook` found; ``passed`` is True when no visible test failed."""

    notebook: Path
    cells: tuple[CheckedCell, ...]
    warnings: tuple[str, ...] = ()
    part: int | None = None

    @property
    def passed(self) -> bool:
        return all(cell.status not in ("failed", "not-run") for cell in self.cells)

    @property
    def visible_points(self) -> tuple[float, float]:
        """Points scored and available in the visible tests."""
        visible = [c for c in self.cells if c.status in ("passed", "failed", "not-run")]
        return sum(c.points for c in visible), sum(c.max_points for c in visible)

    @property
    def hidden_points(self) -> float:
        return sum(c.max_points for c in self.cells if c.status == "hidden")

    def report(self) -> str:
        """The printable report: one line per grade cell, then the totals.

        Examples
        --------
        >>> cells = (CheckedCell("test_sum_visible", "passed", 1.0, 1.0, part="Part 1: sum"),
        ...          CheckedCell("test_sum_speed", "hidden", 0.0, 4.0, part="Part 1: sum"))
        >>> print(CheckResult(Path("week0.ipynb"), cells).report())  # doctest: +NORMALIZE_WHITESPACE
        Checking week0.ipynb: visible tests only; hidden tests run when it is graded.
        Part 1: sum
          PASS  test_sum_visible  1 / 1
          ----  test_sum_speed    4 points in hidden tests
        Visible tests: 1 of 1 passed, 1 / 1 point; another 4 points in hidden tests.
        """
        word = self.cells[0].part.split()[0] if self.cells and self.cells[0].part else "Part"
        scope = f"{word} {self.part}, " if self.part else ""
        lines = [f"Checking {self.notebook.name}: {scope}visible tests only; "
                 "hidden tests run when it is graded."]
        lines += [f"  warning: {w}" for w in self.warnings]
        width = max([len(c.grade_id) for c in self.cells] + [10])
        heading = ""
        for cell in self.cells:
            if cell.part != heading:
                heading = cell.part
                lines.append(heading)
            head = f"{cell.grade_id:<{width}}"
            if cell.status == "hidden":
                lines.append(f"  ----  {head}  {_points(cell.max_points)} in hidden tests")
                if cell.note:
                    lines.append(f"        {'':<{len(head)}}  graded only when submitted: {cell.note}")
                lines += [f"        {'':<{len(head)}}  {line}" for line in cell.preview.splitlines()]
            elif cell.status == "manual":
                lines.append(f"  ----  {head}  {_points(cell.max_points)}, graded by hand")
            else:
                tag = {"passed": "PASS", "failed": "FAIL", "not-run": "FAIL"}[cell.status]
                line = f"  {tag}  {head}  {_pts(cell.points)} / {_pts(cell.max_points)}"
                lines.append((line + (f"  {cell.message}" if cell.message else "")).rstrip())
        got, available = self.visible_points
        visible = [c for c in self.cells if c.status in ("passed", "failed", "not-run")]
        n_passed = sum(c.status == "passed" for c in visible)
        lines.append(f"Visible tests: {n_passed} of {len(visible)} passed, {_pts(got)} / "
                     f"{_points(available)}; another {_points(self.hidden_points)} in hidden tests.")
        return "\n".join(lines)

    def __repr__(self) -> str:  # what Jupyter shows as Out[..]: short, the report is printed
        visible = [c for c in self.cells if c.status in ("passed", "failed", "not-run")]
        n_passed = sum(c.status == "passed" for c in visible)
        return f"<CheckResult {self.notebook.name}: {n_passed} of {len(visible)} visible tests passed>"


def check(part: int | str | None = None, notebook: str | Path | None = None, *,
          timeout: int = 60) -> CheckResult | None:
    """Check the notebook this is called from (saved copy), print the report, return the result.

    Does nothing (returns None) while the notebook is itself being checked or graded
    (``NBGRADER_EXECUTION`` set), so a ``check()`` cell left in a notebook is harmless.

    Parameters
    ----------
    part : int or str, optional
        ``2``, ``"part2"``, ``"Part 2"`` or ``"task2"``: report only the tests of that
        part, or task (the notebooks have one or the other; the cells before it run too,
        since it needs them). Default: every test.
    notebook : str or Path, optional
        The notebook to check; by default the one whose kernel runs this call (see
        :func:`find_notebook`).
    timeout : int
        Seconds a cell may run before it is interrupted and fails.

    Examples
    --------
    >>> check("part9", notebook="/no/such/week1.ipynb")
    Traceback (most recent call last):
    ...
    course_lib.check.CheckError: notebook not found: /no/such/week1.ipynb
    """
    if os.environ.get("NBGRADER_EXECUTION"):
        # this cell is itself being run by a check (or by the grader): checking again from
        # here would start a kernel inside the kernel, for ever
        print("check(): skipped while the notebook is being checked or graded")
        return None
    path = Path(notebook) if notebook is not None else find_notebook()
    result = check_notebook(path, part=part, timeout=timeout)
    saved = datetime.datetime.fromtimestamp(path.stat().st_mtime)
    print(f"(the copy saved at {saved:%H:%M:%S}: save the notebook first if you changed it since)")
    print(result.report())
    return result


def check_notebook(path: str | Path, part: int | str | None = None, *, timeout: int = 60) -> CheckResult:
    """Run the notebook at ``path`` in a fresh kernel and score its visible tests.

    Raises
    ------
    CheckError
        if the file is missing, is not a notebook, or has no part ``part``.
    """
    import nbformat

    path = _locate(Path(path).expanduser())
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except nbformat.reader.NotJSONError:
        raise CheckError(f"{path} is not a readable notebook: not valid JSON") from None
    except Exception as err:  # schema, encoding: one line for the student, not a traceback
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckError(f"{path} is not a readable notebook: {reason}") from None
    titles = parts(nb)
    number = _part_number(part, titles) if part is not None else None
    numbering = _cell_parts(nb)
    last = max((i for i, n in enumerate(numbering) if n == number), default=len(nb.cells) - 1) \
        if number is not None else len(nb.cells) - 1
    warnings = [f"read-only cell {cell.metadata['nbgrader']['grade_id']!r} was edited; the original "
                "is put back when it is graded" for cell in nb.cells if _edited_locked(cell)]
    ran, last_words = _execute(nb, path, last, timeout)
    if ran <= last:
        grade_id = nb.cells[ran].metadata.get("nbgrader", {}).get("grade_id")
        where = f"cell {ran + 1} of the notebook" + (f" ({grade_id!r})" if grade_id else "")
        warnings.append(f"the kernel died while {where} ran"
                        + (f"; its last words: {last_words}" if last_words else ""))
    cells = tuple(_checked(cell, titles.get(numbering[i], ""), i < ran) for i, cell in enumerate(nb.cells)
                  if _is_grade(cell) and i <= last and (number is None or numbering[i] == number))
    return CheckResult(path, cells, tuple(warnings), number)


def parts(nb) -> dict[int, str]:
    """The notebook's parts: number -> heading, from its ``## Part N: ...`` (or ``## Task N: ...``) cells.

    Examples
    --------
    >>> import nbformat
    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## Part 1: time it")])
    >>> parts(nb)
    {1: 'Part 1: time it'}
    """
    found = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for match in _PART.finditer(cell.source):
                found.setdefault(int(match.group(1)), match.group(0).lstrip("# ").strip())
    return found


def find_notebook() -> Path:
    """The notebook whose kernel runs this code, as JupyterLab, Notebook 7 or VS Code name it.

    JupyterLab and Notebook 7 (jupyter_server 2) put the notebook's path in the kernel's
    ``JPY_SESSION_NAME`` and in ``__session__``; VS Code sets ``__vsc_ipynb_file__``.
    Failing those, the only notebook in the working folder is taken.

    Raises
    ------
    CheckError
        if none of these names a notebook that exists.
    """
    candidates: list[str] = []
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        shell = None
    if shell is not None:
        candidates += [shell.user_ns.get(name) for name in ("__vsc_ipynb_file__", "__session__")]
    candidates.append(os.environ.get("JPY_SESSION_NAME"))
    for name in filter(None, candidates):
        if not str(name).endswith(".ipynb"):
            continue
        path = Path(name)
        # a session path is relative to the server's root; the kernel starts in the notebook's folder
        for option in (path, Path.cwd() / path.name):
            if option.is_file():
                return option.resolve()
    here = sorted(Path.cwd().glob("*.ipynb"))
    if len(here) == 1:
        return here[0].resolve()
    raise CheckError("cannot tell which notebook this is; name it: check(notebook='week1.ipynb')")


def main(argv: Sequence[str] | None = None) -> int:
    """``course check NOTEBOOK [--part N] [--timeout S]``; return the exit status.

    0 when every visible test passed, 1 when one failed, 2 for bad usage or input (one line
    on stderr says why).

    Examples
    --------
    >>> main(["/no/such/week1.ipynb"])
    2
    """
    import argparse

    parser = argparse.ArgumentParser(
        prog="course check", description="Run your notebook in a fresh kernel and show which visible "
                                         "tests pass. Hidden tests run only when it is graded.",
        epilog="Exit status: 0 every visible test passed; 1 one failed; 2 usage or input error.")
    parser.add_argument("notebook", type=Path, help="the notebook to check (save it first)")
    parser.add_argument("--part", metavar="N", help="only the tests of part N")
    parser.add_argument("--timeout", type=int, default=60, metavar="S",
                        help="seconds a cell may run (default 60)")
    args = parser.parse_args(argv)
    try:
        if args.timeout <= 0:
            raise CheckError(f"a timeout must be positive, got {args.timeout}")
        result = check_notebook(args.notebook, part=args.part, timeout=args.timeout)
    except CheckError as err:
        print(f"course check: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(result.report())
    return EXIT_OK if result.passed else EXIT_FAILED


# --- private helpers -------------------------------------------------------------------------

_PART = re.compile(r"^#{1,4}\s*(?:Part|Task)\s+(\d+)\b[^\n]*", re.MULTILINE | re.IGNORECASE)
_SPEED_NOTE = re.compile(r"^#\s*Hidden (?:speed|memory|scaling) test[^:]*:\s*", re.IGNORECASE)
_PREVIEWS = {"preview_speedup", "preview_parallel", "preview_peak_memory", "preview_scaling"}


def _locate(path: Path) -> Path:
    # The notebooks say `course check week1.ipynb`; a terminal opens at the repository's
    # root, so a bare name is also looked for in assignments/*/ below the working folder.
    if path.is_file():
        return path
    if len(path.parts) == 1:
        found = sorted(Path.cwd().glob(f"assignments/*/{path.name}"))
        if len(found) == 1:
            return found[0]
    raise CheckError(f"notebook not found: {path}")


def _part_number(part: int | str, known: dict[int, str]) -> int:
    # "part2" and "task2" name the same section: weeks 1 and 2 have parts, the others tasks
    text = str(part).strip().lower().replace(" ", "").removeprefix("part").removeprefix("task")
    if not text.isdigit() or int(text) not in known:
        word = next((title.split()[0].lower() for title in known.values()), "part")
        listed = ", ".join(f"'{word}{n}'" for n in sorted(known)) or "none"
        raise CheckError(f"no part {part!r} in this notebook; its {word}s: {listed}")
    return int(text)


def _cell_parts(nb) -> list[int]:
    numbering, current = [], 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = _PART.search(cell.source)
            current = int(match.group(1)) if match else current
        numbering.append(current)
    return numbering


def _execute(nb, path: Path, last: int, timeout: int) -> tuple[int, str]:
    """Run cells ``0..last`` in a fresh kernel: how many got to run, and what the kernel last
    wrote to its own stderr if it died before the end (else "")."""
    import tempfile

    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from nbformat.v4 import new_output

    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    env = {**os.environ, "NBGRADER_EXECUTION": "validate", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    env.pop("JPY_SESSION_NAME", None)  # the fresh kernel is not the open notebook's
    from course_lib._kernels import IpcKernelManager

    # ipc: the kernel talks to us over Unix sockets, so it has no reason to warn that TCP is unencrypted
    client = NotebookClient(nb, timeout=timeout, allow_errors=True, interrupt_on_timeout=True,
                            kernel_name="python3", kernel_manager_class=IpcKernelManager,
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    # The kernel process's own stderr goes to a file, not to the student's terminal: what the
    # cells write reaches their outputs anyway (ipykernel captures the descriptors while a
    # cell runs), and what is left is the kernel's housekeeping, such as ZeroMQ's rare
    # "Assertion failed: pfd.revents & POLLIN" as its context closes after the last cell.
    # It is shown only when the kernel died, when its last words say why.
    with tempfile.TemporaryFile() as log:
        with client.setup_kernel(env=env, stderr=log):
            for index, cell in enumerate(nb.cells[:last + 1]):
                try:
                    client.execute_cell(cell, index)
                except CellTimeoutError:
                    cell.outputs.append(new_output("error", ename="CellTimeoutError",
                                                   evalue=f"ran longer than {timeout} s and was interrupted",
                                                   traceback=[]))
                except DeadKernelError:
                    return index, _last_words(log)
    return last + 1, ""


def _last_words(log) -> str:
    """The last non-blank line a kernel wrote to ``log`` (a binary file), at most 200 characters."""
    log.seek(0)
    lines = [line.strip() for line in log.read()[-4096:].decode("utf-8", "replace").splitlines()]
    return next((line[:200] for line in reversed(lines) if line), "")


def _is_grade(cell) -> bool:
    return bool(cell.metadata.get("nbgrader", {}).get("grade"))


def _checked(cell, part: str, ran: bool) -> CheckedCell:
    meta = cell.metadata["nbgrader"]
    grade_id, max_points = meta["grade_id"], float(meta.get("points", 0))
    if meta.get("solution") or cell.cell_type != "code":
        return CheckedCell(grade_id, "manual", 0.0, max_points, part=part)
    if not _has_code(cell.source):
        note = next((_SPEED_NOTE.sub("", line) for line in [_comment(cell.source)]
                     if _SPEED_NOTE.match(line)), "")
        preview = _preview_text(cell) if ran else ""
        return CheckedCell(grade_id, "hidden", 0.0, max_points, note=note, part=part, preview=preview)
    if not ran:
        return CheckedCell(grade_id, "not-run", 0.0, max_points, "not run: the kernel died before it", part=part)
    score = _score(cell, max_points)
    if score == max_points:
        return CheckedCell(grade_id, "passed", score, max_points, part=part)
    return CheckedCell(grade_id, "failed", score, max_points, _first_problem(cell), part=part)


def _score(cell, max_points: float) -> float:
    # nbgrader's rule (nbgrader.utils.determine_grade): an error or stderr scores zero, a
    # number returned is partial credit, anything else full marks.
    for output in cell.outputs:
        if output.output_type == "error" or (output.output_type == "stream" and output.name == "stderr"):
            return 0.0
        if output.output_type == "execute_result":
            try:
                value = float(output.get("data", {}).get("text/plain", ""))
            except ValueError:
                return max_points
            return min(value, max_points) if value >= 0 else max_points
    return max_points


def _first_problem(cell) -> str:
    for output in cell.outputs:
        if output.output_type == "error":
            message = f"{output.ename}: {output.evalue}".strip().rstrip(":")
            return message.splitlines()[0] if message else output.ename
        if output.output_type == "stream" and output.name == "stderr":
            return "wrote to stderr: " + (output.text.strip().splitlines() or [""])[0]
    return "partial credit"


def _comment(source: str) -> str:
    """The cell's leading comment as one line (it may wrap over several ``#`` lines)."""
    lines = []
    for line in source.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# ").strip() if lines else line.strip())
    return " ".join(lines)


def _has_code(source: str) -> bool:
    """Whether the cell holds a visible test: code other than speed-preview calls."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return True  # running it fails the cell, which is the honest verdict
    return any(not _is_preview_call(node) for node in body)


def _is_preview_call(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, (ast.Name, ast.Attribute))
            and getattr(node.value.func, "id", getattr(node.value.func, "attr", "")) in _PREVIEWS)


def _preview_text(cell) -> str:
    """What a hidden test cell's preview (speed, memory or scaling) printed, or why it could not run."""
    shown = []
    for output in cell.outputs:
        if output.output_type == "stream" and output.name == "stdout":
            shown.append(output.text.strip())
        elif output.output_type == "error":
            shown.append(f"preview failed: {output.ename}: {output.evalue}".strip().splitlines()[0])
    return "\n".join(filter(None, shown))


def _edited_locked(cell) -> bool:
    # nbgrader's checksum (nbgrader.utils.compute_checksum), so that nbgrader need not be installed
    meta = cell.metadata.get("nbgrader", {})
    if "checksum" not in meta or "grade_id" not in meta or meta.get("solution"):
        return False
    grade = bool(meta.get("grade"))
    if not (grade or meta.get("locked")):
        return False
    digest = hashlib.md5()
    for part in (cell.source, cell.cell_type, str(grade), str(bool(meta.get("solution"))), "True",
                 meta["grade_id"]):
        digest.update(part.encode("utf-8"))
    if grade:
        digest.update(str(float(meta["points"])).encode("utf-8"))
    return digest.hexdigest() != meta["checksum"]


def _pts(x: float) -> str:
    return f"{x:g}"


def _points(x: float) -> str:
    return f"{x:g} point" + ("" if x == 1 else "s")
