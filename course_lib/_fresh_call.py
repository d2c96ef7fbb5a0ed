"""A function's first call and a warm call, read in a fresh process that ran the notebook so far.

A notebook that asks the student to time a first call (a Numba function compiling) must
check that figure against the grader's own reading *of the same code*, not against the
effect the chapter predicts: a kernel compiled eagerly, with explicit signatures, pays its
compile when it is defined, and its honest first call is as quick as a warm one.

The only place a first call can be read again is a fresh process. This module builds one
from the notebook: the cells run so far in this kernel (IPython's input history), up to and
including the last one that defines the function, run in a new interpreter, then the
function is called once and timed (the first call), once more untimed, and ``calls`` more
times (the warm call, their median). Outside the kernel, the grader's verifier does the
same in a fresh student worker (:mod:`course_lib.grader.verification`).

Examples
--------
>>> defining_cell(["x = 1", "def f(a):\\n    return a", "f(2)"], "f")
1
>>> defining_cell(["x = 1"], "f") is None
True
"""

from __future__ import annotations

import ast
import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

__all__ = ["defining_cell", "fresh_call_seconds"]

# What the new interpreter runs: the cells, one by one, in one IPython shell (they may hold
# magics), then the timed calls. Its only output is one line of JSON on stdout.
_SCRIPT = r"""
import gc, json, pickle, statistics, sys, time
from IPython.core.interactiveshell import InteractiveShell
cells, name, args_path, calls = json.loads(sys.stdin.read())
shell = InteractiveShell.instance()
for source in cells:
    result = shell.run_cell(source, store_history=False, silent=True)
    if not result.success:
        print(json.dumps({"error": f"a cell before the call failed: {result.error_in_exec or result.error_before_exec!r}"}))
        sys.exit(0)
fn = shell.user_ns[name]
with open(args_path, "rb") as fh:
    args = pickle.load(fh)
from course_lib.timing import limit_threads
with limit_threads(1):
    gc.disable()
    t0 = time.perf_counter(); fn(*args); first = time.perf_counter() - t0
    fn(*args)
    warm = []
    for _ in range(calls):
        t0 = time.perf_counter(); fn(*args); warm.append(time.perf_counter() - t0)
print(json.dumps({"first": first, "warm": statistics.median(warm)}))
"""


def defining_cell(cells: Sequence[str], name: str) -> int | None:
    """Index of the last cell whose top level binds ``name`` (a ``def``, an assignment, an import)."""
    found = None
    for i, source in enumerate(cells):
        if name in _bound_names(source):
            found = i
    return found


def fresh_call_seconds(fn: Any, args: Sequence[Any], calls: int = 5, timeout: float = 50.0) -> tuple[float, float]:
    """(first call, warm call) in seconds, in a new process that ran this notebook's cells so far.

    Uses IPython's input history of the running kernel; where there is none (a plain
    Python session), or no cell defines ``fn``, both readings are taken in this process,
    where ``fn`` may already be warm.

    Raises
    ------
    RuntimeError
        when the new process fails (a cell before the definition raises, a time-out).
    """
    name = getattr(fn, "__name__", None)
    cells = _history()
    index = defining_cell(cells, name) if name else None
    if index is None:
        return _in_this_process(fn, tuple(args), calls)
    with tempfile.TemporaryDirectory(prefix="first-call-") as tmp:
        args_path = os.path.join(tmp, "args.pickle")
        with open(args_path, "wb") as fh:
            pickle.dump(tuple(args), fh, protocol=pickle.HIGHEST_PROTOCOL)
        job = json.dumps([cells[: index + 1], name, args_path, int(calls)])
        try:
            done = subprocess.run([sys.executable, "-c", _SCRIPT], input=job, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"the fresh process did not finish within {timeout:g} s") from None
    lines = done.stdout.strip().splitlines()
    try:
        reading = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise RuntimeError(f"the fresh process failed: {done.stderr.strip()[-400:]}") from None
    if "error" in reading:
        raise RuntimeError(reading["error"])
    return float(reading["first"]), float(reading["warm"])


def _history() -> list[str]:
    """The cells this IPython kernel ran before the one running now (transformed: no magics)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return []
    shell = get_ipython()
    if shell is None:
        return []
    inputs = list(shell.user_ns.get("In", []) or [])[1:-1]  # In[0] is empty; the last is this cell
    return [shell.transform_cell(source) if isinstance(source, str) else "" for source in inputs]


def _bound_names(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def _in_this_process(fn: Any, args: tuple, calls: int) -> tuple[float, float]:
    import gc
    import statistics
    import time

    from course_lib.timing import limit_threads

    with limit_threads(1):
        enabled = gc.isenabled()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn(*args)
            first = time.perf_counter() - t0
            fn(*args)
            warm = []
            for _ in range(calls):
                t0 = time.perf_counter()
                fn(*args)
                warm.append(time.perf_counter() - t0)
        finally:
            if enabled:
                gc.enable()
    return first, float(statistics.median(warm))
