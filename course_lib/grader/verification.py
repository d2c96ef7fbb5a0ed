"""Speed and memory verdicts measured outside the student's kernel.

nbgrader runs the tests in the student's own kernel, where the student's code can reach
everything the tests use. After autograding, ``course grade`` therefore grades every speed,
memory and scaling cell (grade ids ending ``_speed``, ``_memory``, ``_scaling``) once more,
out of the student's reach:

- a *student worker* process (:mod:`course_lib.grader._student_worker`) holds the student's
  answers: under ``course grade`` the notebook's own sandboxed kernel, kept after its last
  cell and answering the verifier (:mod:`course_lib.grader._parked`), else (and whenever
  that kernel dies or stops answering) a fresh process that runs only the notebook's
  non-test cells: the provided code, as released, and the student's answers;
- a *verifier* process, started by the grader and running no student code, executes the
  instructor's own cells (the setup, and the test cells the graded cells need) from
  ``solutions/``; the student's answers appear in it as proxies that call into the worker;
- ``assert_speedup`` and ``speedup_points`` become paired measurements: for every pair the
  verifier draws a fresh input, times the grader's reference on a pristine copy itself
  while the student worker is stopped (``SIGSTOP``, so it cannot load the machine), then
  times the student's call in the worker with its own clock (see :func:`_staged_call`:
  inputs staged before the clock starts, the result written out before the worker answers,
  transport costs not billed), and checks every result of every timed call against the
  reference's result on the same input with the verifier's own
  :func:`course_lib.grading.assert_same` (the first pair is a warm-up: Numba compiles there);
- ``assert_peak_memory_below`` runs the call under tracemalloc in the worker *and* reads the
  worker's peak resident memory from ``/proc`` (reset through ``clear_refs`` first), so
  stopping tracemalloc inside the call does not hide an allocation;
- ``assert_scaling`` times the calls by the worker's CPU time read from ``/proc``.

Results come back in the data-only format of :mod:`course_lib.grader._data` (no pickle, so
nothing the student sends can name a callable for the grader to call): an object with a
lying ``__eq__`` cannot even be received.

The other test cells run in the verifier too, the student's functions again called in the
worker, so a rebound ``assert_same`` does not help either. A test that checks a student's
figure with :func:`course_lib.timing.compare` against the grader's own function gets the
student's side timed in the worker as above, not through the proxy (whose every call would
carry the trip to the worker and back).

:func:`verify_notebook` returns one :class:`CellVerdict` per test cell; a verdict is
``conclusive`` unless the grader itself could not measure (an unreliable configuration, a
grader error), in which case the in-kernel score stands and the cell is flagged.

Examples
--------
>>> is_performance_cell("test_price_speed"), is_performance_cell("test_price_hidden")
(True, False)
"""

from __future__ import annotations

import ast
import contextlib
import copy
import json
import math
import os
import pickle
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from course_lib.grader._student_worker import _HEADER, LAUNCH, Inputs, _read_exactly, send_inputs, write_frame
from course_lib.grader._text import writable
from course_lib.grader._timed_calls import (  # shared with _remote_parallel, the verifier's twin for parallel_points
    _MAX_RESULT_BYTES, StudentCodeError, _fmt_seconds, _Inconclusive, _pack, _ReferenceProcess, _reply, _run_batch,
    _stage, _timed_reference, _Untransportable)
from course_lib.grader.sandbox import _status_kib  # a field of /proc/PID/status, in KiB

__all__ = ["CellVerdict", "StartedVerifier", "VerificationFailed", "is_performance_cell", "verify_notebook",
           "PERFORMANCE_SUFFIXES"]

PERFORMANCE_SUFFIXES = ("_speed", "_memory", "_scaling")
"""Grade ids ending in one of these are verified outside the student's kernel."""

_JUDGE = "import sys; from course_lib.grader.verification import _judge_main; sys.exit(_judge_main())"
_MAX_RESTARTS = 3     # fresh workers after a runaway call, per notebook


@dataclass(frozen=True)
class CellVerdict:
    """The out-of-kernel grade of one cell.

    ``conclusive`` is False when the grader could not measure (the in-kernel score then
    stands); ``detail`` says what was measured or what went wrong.
    """

    grade_id: str
    score: float
    max_score: float
    detail: str
    conclusive: bool = True
    measured: float | None = None
    """The speed-up measured outside the kernel (speed cells), else None."""
    refused: bool = False
    """The measurement was refused (``UnreliableMeasurement``): stored as 0, flagged ``unreliable``."""
    not_data: bool = False
    """Inconclusive because the student's answer (a value, or what a function returned) is
    not plain data and so cannot be checked outside the kernel: the student's doing."""
    undecided: bool = False
    """Every reading of the cell was too noisy to grade on (its interval spanned more than
    a quarter of the cell's points): the best was stored, and the cell is flagged."""
    readings: tuple[float, ...] = ()
    """The points of each reading, when the cell was measured more than once without settling."""


class VerificationFailed(RuntimeError):
    """The verifier failed as a whole: it ran past its time or memory limit, died, or its
    report could not be read. Every test cell of the notebook then scores 0 (see
    :func:`course_lib.grader.verify._verify`): the kernel's word alone decides nothing."""


def is_performance_cell(grade_id: str | None) -> bool:
    """Whether a grade cell's verdict is verified outside the kernel (by its grade id)."""
    return bool(grade_id) and grade_id.endswith(PERFORMANCE_SUFFIXES)


def verify_notebook(source: str | Path, autograded: str | Path, timeout: int = 60,
                    log: str | Path | None = None, memory_limit: int = 0,
                    sandboxed: bool = False, notebook_timeout: int = 0,
                    only: set[str] | None = None, profile: dict[str, float] | None = None,
                    kernel: Any = None) -> list[CellVerdict]:
    """Grade the performance cells of ``autograded`` again, outside the student's kernel.

    Parameters
    ----------
    source : path
        The instructor's notebook in ``solutions/`` (setup, answers and hidden tests).
    autograded : path
        nbgrader's autograded copy of the submission; its non-test cells are the code the
        student worker runs, in its folder (so relative data files resolve as when graded).
    timeout : int
        Seconds allowed per cell and per call of the student's code.
    log : path, optional
        File receiving the worker's and the verifier's output (default: discarded).
    memory_limit : int, optional
        Bytes the student worker may use (its address space is capped at this plus
        headroom for reservations, so an allocation past it fails with ``MemoryError``).
    sandboxed : bool, optional
        Run the student worker in a :class:`course_lib.grader.sandbox.Sandbox`, as
        ``course grade`` does (it reads nothing of the course but ``course_lib`` and a copy
        of the notebook's folder, and is frozen whole while the reference is timed).
    notebook_timeout : int, optional
        Seconds the whole verification may run (0: only the per-cell bound), as the
        notebook's kernel may: code that is slow only in the worker cannot stretch grading
        past it.
    only : set of str, optional
        Measure only these performance cells (the others are not run) and return their
        verdicts alone: a later reading of cells whose first was too noisy to grade on.
    profile : dict, optional
        Receives where the verification's time went, in seconds by stage (see
        :data:`PROFILE_STAGES`), for ``course grade --profile``.
    kernel : course_lib.grader._parked.ParkedKernel, optional
        The notebook's sandboxed kernel, kept after its last cell and answering as a student
        worker (``course grade``): the verifier uses it instead of running the notebook's
        cells again in a fresh worker, which it starts only if the kernel dies or stops
        answering. The caller ends the kernel afterwards.

    Returns
    -------
    list of CellVerdict
        One per test cell of the source notebook, in notebook order; empty if it has no
        performance cell and no cell graded outside the kernel only (then nothing needs
        verifying).

    Raises
    ------
    VerificationFailed
        when the verifier fails as a whole: past its time limit, past its memory limit
        (``memory_limit`` plus 1.5 GiB for itself and one reply, or 4 GB without a limit:
        it runs the instructor's reference, as the kernel does, and reads the worker's
        replies), dead, or with a report that cannot be read. Everything it wrote on disk
        is removed and every process it left is ended first.
    """
    # Here, in the grader, not at the module's top: the verifier process imports this module,
    # and nbformat's schema validation pulls in jsonschema's format checkers, whose grammar
    # build took 8.7 s of a 14-20 s start at load 13 (python -X importtime).
    import nbformat

    from course_lib.grader.common import graded_outside

    source_nb = nbformat.read(str(source), as_version=4)
    student_nb = nbformat.read(str(autograded), as_version=4)
    tests = [_grade_id(c) for c in source_nb.cells if c.cell_type == "code" and _is_test(c)]
    if not any(is_performance_cell(_grade_id(c)) or graded_outside(c) for c in source_nb.cells):
        return []
    if only is not None:
        tests = [g for g in tests if g in only]
    # One folder holds everything this verification writes: the folder shared read-only with
    # the worker ("s") and, beside it, the worker's scratch copy and the sandbox's staging.
    # It is removed however the verifier ends.
    base = tempfile.mkdtemp(prefix="cv-")
    job = {
        "judge_cells": [{"source": c.source, "grade_id": _grade_id(c), "points": _points(c), "graded": _is_test(c)}
                        for c in source_nb.cells if c.cell_type == "code" and _locked(c) and not _solution(c)],
        "answer_names": sorted(_answer_names(source_nb)),
        "student_cells": [c.source for c in student_nb.cells if c.cell_type == "code" and not _is_test(c)],
        "cwd": str(Path(autograded).resolve().parent),
        "timeout": int(timeout),
        "memory_limit": int(memory_limit),
        "sandboxed": bool(sandboxed),
        # The instructor's cells run in the verifier and may write files (a CSV to read) into
        # a temporary folder whose path they pass to the student's function: that folder
        # must be readable in the worker's sandbox, whose own /tmp is private.
        "tmpdir": kernel.shared if kernel is not None else os.path.join(base, "s"),
        "log": str(log) if log else os.devnull,
        "only": sorted(only) if only is not None else None,
        "attach": ({"fds": list(kernel.fds), "pid": kernel.pid, "sandbox": kernel.sandbox}
                   if kernel is not None else None),
    }
    limit = timeout * (len(job["student_cells"]) + len(tests) + 2) + 60
    if notebook_timeout > 0:
        limit = min(limit, notebook_timeout)
    memory = memory_limit + _VERIFIER_OWN if memory_limit > 0 else _VERIFIER_MEMORY
    with _removed(base):
        if kernel is None:
            os.mkdir(job["tmpdir"])
        for folder in (base, job["tmpdir"]):
            os.chmod(folder, 0o755)
        with open(job["log"], "a", encoding="utf-8", errors="backslashreplace") as log_file:
            found = _run_verifier(job, limit, memory, log_file, kernel.fds if kernel is not None else (),
                                  getattr(kernel, "verifier", None))
    if profile is not None:
        profile.update(found.get("profile", {}))
    try:
        return [CellVerdict(**_writable_fields(v)) for v in found["verdicts"]]
    except (TypeError, ValueError) as err:
        raise VerificationFailed(f"the verifier's report could not be read ({err})") from None


_VERIFIER_MEMORY = 4 * 10**9  # bytes of resident memory the verifier may use when no limit is given
# ... and above the notebook's limit, when one is: the verifier runs the instructor's reference,
# which the limit bounds as in the kernel, and has its own interpreter, the reference process's
# copy of it, and one reply being read (at most 512 MiB of bytes, 512 MiB decoded).
_VERIFIER_OWN = 3 * 2**29
_WATCH_SECONDS = 0.05         # between two looks at the verifier's memory


def _run_verifier(job: dict, limit: float, memory: int, log_file: Any, pass_fds: tuple[int, ...] = (),
                  started: StartedVerifier | None = None) -> dict:
    """Run the verifier on ``job`` within ``limit`` seconds and ``memory`` bytes; its report.

    ``pass_fds``: descriptors it inherits (a parked kernel's line, see ``job["attach"]``).
    ``started``: a verifier started ahead with those descriptors (see :class:`StartedVerifier`),
    used instead of starting one, unless it has died meanwhile.

    The verifier and the processes it starts outside the sandbox (the reference process)
    are watched from here; past either limit the whole session is killed, together with the
    sandbox groups it made (:func:`course_lib.grader.sandbox.remove_leftovers`).
    """
    from course_lib.grader.sandbox import remove_leftovers

    if started is not None and started.take(pass_fds):
        owner, proc = started.owner, started.proc
        job = {**job, "log_to_job": True}  # its stderr is the log from here on (see _judge_main)
    else:
        owner, proc = _start_verifier(log_file, pass_fds)
    watch = _TreeWatch(proc, memory)
    watch.start()
    failed = None
    try:
        out, _ = proc.communicate(json.dumps(job).encode("utf-8"), timeout=limit)
    except subprocess.TimeoutExpired:
        failed = f"the verification ran past its limit of {limit:g} s"
        out = b""
    finally:
        watch.stop()
        if failed or watch.hit or proc.returncode != 0:
            _kill_session(proc)
        remove_leftovers(owner)  # none when it closed its sandboxes itself
        if started is not None:
            started.copy_early_messages(log_file)
    if watch.hit:
        raise VerificationFailed(f"the verifier used {watch.peak / 1e6:,.0f} MB of memory, above its limit of "
                                 f"{memory / 1e6:,.0f} MB")
    if failed:
        raise VerificationFailed(failed)
    if proc.returncode != 0:
        raise VerificationFailed(f"the verifier exited with status {proc.returncode}")
    try:
        found = json.loads(out.decode("utf-8").strip().splitlines()[-1])
    except (ValueError, IndexError):
        found = None
    # The verifier's report: its verdicts, and where its time went (see PROFILE_STAGES).
    if not isinstance(found, dict) or not isinstance(found.get("verdicts"), list) or not all(
            isinstance(v, dict) for v in found["verdicts"]) or not isinstance(found.get("profile", {}), dict):
        raise VerificationFailed("the verifier's report could not be read")
    return found


def _start_verifier(stderr: Any, pass_fds: tuple[int, ...]) -> tuple[str, subprocess.Popen]:
    """(owner, process): a verifier reading its job from its standard input."""
    import secrets

    from course_lib.grader.sandbox import OWNER_VARIABLE

    # The verifier's sandbox groups carry the owner's name, so that they can be found and
    # removed however it ends (a pid could be another process's by then).
    owner = f"v{secrets.token_hex(5)}"
    # -I -P: no PYTHON* variables, no user site, and neither the working folder nor the
    # script's folder on sys.path, so a numpy.py dropped by the student's code next to the
    # notebook is never imported by the verifier.
    return owner, subprocess.Popen([sys.executable, "-I", "-P", "-c", _JUDGE], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=stderr, start_new_session=True,
                                   env={**os.environ, OWNER_VARIABLE: owner}, pass_fds=pass_fds)


class StartedVerifier:
    """A verifier process started before its notebook is graded, waiting for its job.

    Starting one (an interpreter importing NumPy, pandas and the grading package) took 0.6-0.8
    s of every notebook's verify stage. ``course grade`` starts it as the notebook's kernel
    starts (:class:`course_lib.grader._nbpreprocessors.CourseExecute`), when no student code
    runs yet, handing it the parked kernel's line (``pass_fds``); :func:`verify_notebook`
    sends it the job. What it writes before the job (normally nothing) is kept in a file of
    its own and added to the notebook's log. :meth:`discard` ends one that was never used.
    """

    def __init__(self, pass_fds: tuple[int, ...] = ()) -> None:
        self.pass_fds = tuple(pass_fds)
        self._early = tempfile.TemporaryFile()
        self.owner, self.proc = _start_verifier(self._early, self.pass_fds)
        self._taken = False

    def take(self, pass_fds: tuple[int, ...]) -> bool:
        """Whether this process can verify a job with ``pass_fds`` (once; then it is the caller's)."""
        if self._taken or tuple(pass_fds) != self.pass_fds or self.proc.poll() is not None:
            return False
        self._taken = True
        return True

    def copy_early_messages(self, log_file: Any) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._early.seek(0)
            early = self._early.read(1 << 20).decode("utf-8", "backslashreplace")
            if early:
                log_file.write(early)
            self._early.close()

    def discard(self) -> None:
        """End the process unless a job took it (a process that verified ends by itself)."""
        if not self._taken:
            self._taken = True
            _kill_session(self.proc)
            with contextlib.suppress(OSError):
                self._early.close()


class _TreeWatch:
    """The resident memory of a process and of its descendants outside any sandbox, watched.

    Sandboxed descendants (the student worker) are in another PID namespace and have their
    own limit; the verifier and its reference process are counted here. Past ``limit`` the
    session is killed at once and ``hit`` is set.
    """

    def __init__(self, proc: subprocess.Popen, limit: int) -> None:
        self.proc, self.limit, self.hit, self.peak = proc, limit, False, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="verifier-memory", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _watch(self) -> None:
        own = os.readlink("/proc/self/ns/pid")
        while not self._stop.wait(_WATCH_SECONDS):
            if self.proc.poll() is not None:
                return
            used = 0
            for pid in _descendants(self.proc.pid):
                try:
                    if os.readlink(f"/proc/{pid}/ns/pid") == own:
                        used += _status_kib(pid, "VmRSS") * 1024
                except OSError:
                    continue
            self.peak = max(self.peak, used)
            if used > self.limit:
                self.hit = True
                _kill_session(self.proc)
                return


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from each thread's ``children`` file in ``/proc``.

    Cheaper than scanning all of ``/proc`` for parents (what psutil does): the watch looks
    twenty times a second while the verifier runs, beside the measurements.
    """
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children") as fh:
                    stack.extend(int(child) for child in fh.read().split())
            except (OSError, ValueError):
                continue
    return found


def _kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL to the verifier's session (it is its leader: the reference process and the
    sandbox's wrappers are in it; the sandbox itself dies with its parent)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def _writable_fields(verdict: dict) -> dict:
    """A verdict from the report with its text fields writable (they may quote the student's messages)."""
    return {key: writable(value) if isinstance(value, str) else value for key, value in verdict.items()}


# --- the verifier process ------------------------------------------------------------------

class _Worker:
    """The connection to the student worker process."""

    def __init__(self, cwd: str, log: str, timeout: int, memory_limit: int = 0, sandboxed: bool = False,
                 shared: str | None = None, attach: dict | None = None) -> None:
        self._settings = (cwd, log, memory_limit)
        self.shared = shared  # the verifier's temporary folder, read-only in the sandbox
        self.sandboxed = sandboxed
        self.box: Any = None
        self.timeout = timeout
        self.restarts = 0
        self._cells: list[str] | None = None
        self.load_stopped = ""
        self._killing = threading.RLock()
        self.late = 0  # workers killed for running past the time limit (the others ended otherwise)
        # The notebook's kernel, parked after its last cell (course_lib.grader._parked): its
        # line, its pid and its sandbox's handle. Used until it dies; a restart is a fresh worker.
        self._attach = attach
        self._start()

    @property
    def attached(self) -> bool:
        """Whether the worker is the notebook's own kernel (whose cells ran already)."""
        return self._attach is not None

    def load(self, cells: list[str]) -> None:
        """Run the notebook's non-test cells in the worker, one at a time; they run again after a restart.

        A cell that ends the worker (past the memory limit or the disk quota, past its time
        with the alarm ignored, ``os._exit``) ends the loading there, as a kernel that dies
        runs no later cell: a fresh worker runs the cells before it, and
        :attr:`load_stopped` says why (answers defined later are missing). The notebook's
        own kernel ran them already: they are only kept, for a restart.
        """
        self._cells, self.load_stopped = cells, ""
        if self.attached:
            return
        for index, cell in enumerate(cells):
            try:
                self.request("load", [cell], self.timeout, seconds=self.timeout + 30)
            except StudentCodeError:
                if not self.dead or self.restarts >= _MAX_RESTARTS:
                    raise
                why = self.dead
                self._cells = cells[:index]
                self.restart()
                self.load_stopped = f"the worker stopped in cell {index + 1} of your notebook's code: {why}"
                return

    def restart(self) -> None:
        """A fresh worker after one that ran out of time: as a kernel goes on after an interrupt."""
        self.close()
        self._attach = None  # the notebook's kernel is not started again: a fresh worker runs its cells
        self.restarts += 1
        threads = self.threads
        self._start()
        if self._cells is not None:
            self.load(self._cells)
        if threads is not None:
            self.set_threads(threads)

    def _start(self) -> None:
        if self._attach is not None:
            self._start_attached()
            return
        cwd, log, memory_limit = self._settings
        to_worker_r, self._w = os.pipe()
        self._r, from_worker_w = os.pipe()
        # Results come back through an anonymous memory file made here and inherited as an
        # open descriptor: no path the worker could swap for a FIFO or a link, and nothing
        # left in /dev/shm if this process is killed.
        self.results_fd = os.memfd_create("course-results", 0)
        self._log = open(log, "a", encoding="utf-8")
        # The worker's output reaches the log through a pipe drained here, capped: a cell that
        # prints 200 MB must not leave a 200 MB log (what is cut is said in the log).
        out_r, out_w = os.pipe()
        self._drain = threading.Thread(target=_drain, args=(out_r, self._log, _LOG_CAP), daemon=True)
        self._drain.start()
        argv = [sys.executable, "-c", LAUNCH, str(to_worker_r), str(from_worker_w), str(self.results_fd)]
        fds = (to_worker_r, from_worker_w, self.results_fd)
        try:
            if self.sandboxed:
                self.proc, self.pid = self._start_sandboxed(argv, fds, cwd, memory_limit, out_w)
            else:
                env = dict(os.environ, MPLBACKEND="Agg", PYDEVD_DISABLE_FILE_VALIDATION="1",
                           NBGRADER_EXECUTION="autograde")
                self.proc = subprocess.Popen(
                    argv, pass_fds=fds, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out_w,
                    stderr=out_w, start_new_session=True,
                    preexec_fn=(lambda: _limit_address_space(memory_limit)) if memory_limit else None)
                self.pid = self.proc.pid
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
            os.close(out_w)
        self.dead: str | None = None
        self.threads: int | None = None
        if self.box is not None and memory_limit:
            self._start_watch(memory_limit)

    def _start_attached(self) -> None:
        """Take the parked kernel as the worker: its line, its pid, a view of its sandbox."""
        from course_lib.grader.sandbox import Sandbox

        _, log, memory_limit = self._settings
        self._w, self._r, self.results_fd = (int(fd) for fd in self._attach["fds"])
        self._log = open(log, "a", encoding="utf-8")
        self._drain = None  # the kernel's own output went to the kernel's log
        self.proc, self.pid = None, int(self._attach["pid"])
        self.box = Sandbox.attach(self._attach["sandbox"])
        self.dead = None
        self.threads = None
        if memory_limit:
            self._start_watch(memory_limit)

    def _start_watch(self, memory_limit: int) -> None:
        self._watching = threading.Event()
        threading.Thread(target=self._watch_limits, args=(self.box, memory_limit, self._watching),
                         name="worker-limits", daemon=True).start()

    def _watch_limits(self, box: Any, memory_limit: int, stop: threading.Event) -> None:
        """Kill the worker once its sandbox holds more than ``memory_limit`` (processes and
        files in its tmpfs and memory files alike) or its folder more than the disk quota."""
        looks = 0
        while not stop.wait(_LIMITS_WATCH_SECONDS):
            try:
                held = box.memory_current()
                disk = box.disk_used() if looks % 5 == 0 else 0  # a folder walk: once a second
            except Exception:  # noqa: BLE001 - the sandbox is being closed
                return
            looks += 1
            if held > memory_limit:
                self.kill(f"your code held {held / 1e6:,.0f} MB of memory, above the limit of "
                          f"{memory_limit / 1e6:,.0f} MB (files in /tmp and /dev/shm and memory files count)")
                return
            if box.limits.disk and disk > box.limits.disk:
                self.kill(f"your code wrote more than {box.limits.disk / 1e6:,.0f} MB into its folder, "
                          "above the disk quota")
                return

    def _start_sandboxed(self, argv: list[str], fds: tuple[int, ...], cwd: str,
                         memory_limit: int, output: int) -> tuple[subprocess.Popen, int]:
        """The worker in a bubblewrap sandbox, as the kernel was: a scratch copy of the
        notebook's folder, ``course_lib`` read-only, the allow-listed environment; returns the
        outer process and the host pid of the worker's interpreter (for ``/proc`` readings)."""
        import course_lib
        from course_lib.grader.sandbox import ALLOWED_ENV, Limits, Sandbox

        # Beside the shared folder, not in it (the verifier's TMPDIR points into it).
        self._base = tempfile.mkdtemp(prefix="cw-", dir=os.path.dirname(self.shared) if self.shared else None)
        scratch = os.path.join(self._base, "w")
        shutil.copytree(cwd, scratch, symlinks=True)  # a link the student sent stays a dead link
        env = {k: v for k, v in os.environ.items() if k in ALLOWED_ENV and k != "PATH"}
        env.update(MPLBACKEND="Agg", NBGRADER_EXECUTION="autograde")
        read_only = [os.path.dirname(course_lib.__file__), *([self.shared] if self.shared else [])]
        self.box = Sandbox(scratch, read_only=read_only, env=env,
                           limits=Limits(memory=(memory_limit + _ADDRESS_HEADROOM) if memory_limit else None,
                                         processes=256, tmpfs=memory_limit or Limits.tmpfs))
        self.box.__enter__()
        proc = self.box.popen(argv, pass_fds=fds, stdin=subprocess.DEVNULL, stdout=output, stderr=output)
        # The wrappers (setpriv, unshare, bwrap) carry the same command line: the worker is
        # the process running this interpreter.
        interpreter = os.path.realpath(sys.executable)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for pid in self.box.processes():
                try:
                    if (os.path.realpath(os.readlink(f"/proc/{pid}/exe")) == interpreter
                            and b"_student_worker" in Path(f"/proc/{pid}/cmdline").read_bytes()):
                        return proc, pid
                except OSError:
                    continue
            if proc.poll() is not None:
                break
            time.sleep(0.01)
        raise StudentCodeError("the student worker did not start in its sandbox")

    def send(self, message: bytes, seconds: float | None = None, inputs: Inputs | None = None) -> bytes:
        """One request and its raw reply; the worker is killed if it takes too long.

        ``inputs``: a staging request, whose buffers follow the message (see ``send_inputs``).
        """
        if self.dead:
            raise StudentCodeError(self.dead)
        try:
            if inputs is None:
                write_frame(self._w, message)
            else:
                send_inputs(self._w, message, inputs)
            limit = seconds or self.timeout
            reply = _read_reply(self._r, time.monotonic() + limit, _MAX_RESULT_BYTES)
            if isinstance(reply, str):
                if reply == "late":
                    self.late += 1
                self.kill(reply if reply != "late" else f"your code ran past the time limit of {limit:g} s")
                raise StudentCodeError(self.dead)
            return reply
        except (EOFError, BrokenPipeError, OSError):
            self.kill("your code ended the worker process (for example os._exit or a crash)")
            raise StudentCodeError(self.dead) from None

    def request(self, *message: Any, seconds: float | None = None) -> Any:
        if self.shared and self.box is not None:
            _share(self.shared)  # what the instructor's cells wrote so far, before the student reads it
        try:
            data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # e.g. a test passes one of its own functions to the student's
            raise _Inconclusive(f"the test's arguments cannot be sent to your code ({type(exc).__name__}: "
                                f"{exc})") from None
        return _reply(self.send(data, seconds))

    def pause(self) -> None:
        """Stop every student process: the whole sandbox (daemons included), else the group.

        A freeze that fails, or is not complete within ``_FREEZE_SECONDS``, is a failed
        measurement (``_Inconclusive``): timing the reference while the student's processes
        still run would charge their load to it. The sandbox is let run again first.
        """
        if self.box is not None:
            try:
                self.box.freeze(timeout=_FREEZE_SECONDS)
            except Exception as exc:  # noqa: BLE001 - SandboxError, or the cgroup file refused
                self.resume()
                raise _Inconclusive(f"the grader could not stop your processes within {_FREEZE_SECONDS:g} s "
                                    f"({exc}), so it could not measure") from None
            return
        with contextlib.suppress(ProcessLookupError, PermissionError, AttributeError):
            os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.box is not None:
            with contextlib.suppress(Exception):
                self.box.thaw()
            return
        with contextlib.suppress(ProcessLookupError, PermissionError, AttributeError):
            os.killpg(self.proc.pid, signal.SIGCONT)

    def kill(self, why: str) -> None:
        with self._killing:  # the limits' watch may kill from its own thread
            self._kill(why)

    def _kill(self, why: str) -> None:
        self.dead = self.dead or why
        if self.box is not None:
            with contextlib.suppress(Exception):
                self.box.thaw()
                self.box.kill()
        if self.proc is None:  # the notebook's kernel: its whole sandbox was killed above
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)

    def read_results(self) -> bytes:
        """What the last batch wrote into the results file."""
        size = os.fstat(self.results_fd).st_size
        if size > _MAX_RESULT_BYTES:
            raise StudentCodeError(f"your function's results take {size} bytes, more than the grader reads")
        return os.pread(self.results_fd, size, 0) if size else b""

    def warm_heap(self, mib: int) -> None:
        """Keep the memory the worker frees mapped, ``mib`` MiB of arenas (0: give it back).

        A courtesy to the student's code (see :func:`course_lib.timing.warm_heap`):
        a worker that refuses it only times as a cold process would.
        """
        with contextlib.suppress(StudentCodeError, _Untransportable):  # a dead worker fails on its next call
            self.request("heap", mib)

    def set_threads(self, threads: int) -> str:
        """Thread pools of the worker for the calls that follow (kept until changed)."""
        described = self.request("threads", threads)
        self.threads = threads
        return described if isinstance(described, str) else ""

    def close(self) -> None:
        if getattr(self, "_watching", None) is not None:
            self._watching.set()
        for fd in (self._w, self._r, self.results_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.attached:
            # The kernel stops serving at the pipe's end; the grader, which owns its sandbox,
            # ends it (a dead one was killed already).
            self._log.close()
            if self.box is not None:
                self.box.close()  # a view: closes nothing of the sandbox
            self.box = None
            return
        self.kill("closed")
        self._drain.join(5)  # the worker's end of the pipe is closed: the drain ends
        self._log.close()
        if self.box is not None:
            with contextlib.suppress(Exception):
                self.box.close()
            self.box = None
            shutil.rmtree(self._base, ignore_errors=True)


_LOG_CAP = 1_000_000  # bytes of the worker's output kept in the log
_FREEZE_SECONDS = 0.5  # a sandbox not frozen by then fails the measurement
_LIMITS_WATCH_SECONDS = 0.2  # between two looks at the worker's memory (as the kernel's watch)


def _drain(fd: int, log: Any, cap: int) -> None:
    """Copy the worker's output into the log up to ``cap`` bytes, then only read it."""
    kept = 0
    with os.fdopen(fd, "rb") as pipe:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            if kept < cap:
                piece = chunk[:cap - kept].decode("utf-8", "replace")
                kept += len(chunk)
                with contextlib.suppress(ValueError, OSError):
                    log.write(piece)
                    if kept >= cap:
                        log.write(f"\n[the grader cut the student worker's output here, at {cap:,} bytes]\n")
                    log.flush()


# Address space, not resident memory, is what the kernel can cap for a process; NumPy, Numba
# and the thread pools reserve far more of it than they touch, hence the headroom.
_ADDRESS_HEADROOM = 3 * 10**9


def _read_reply(fd: int, deadline: float, max_bytes: int) -> bytes | str:
    """One frame from the worker, read by this side's rules; why not (``"late"`` or a reason).

    The worker's own :func:`read_frame` trusts the length it reads; here a length above
    ``max_bytes`` is refused before anything is read, and the whole frame must arrive by
    ``deadline``: a worker that announces a terabyte, or sends a frame a byte at a time,
    gets nothing but a failed call.
    """
    header = _read_exactly(fd, _HEADER.size, deadline)
    if header is None:
        return "late"
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        return f"your code sent a reply of {size:,} bytes, more than the grader reads ({max_bytes:,})"
    body = _read_exactly(fd, size, deadline)
    return "late" if body is None else body


def _limit_address_space(memory_limit: int) -> None:
    import resource

    limit = memory_limit + _ADDRESS_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


class _Remote:
    """A student's function in the verifier: calling it runs it in the student worker."""

    def __init__(self, worker: _Worker, name: str) -> None:
        self.worker, self.name = worker, name
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.worker.request("call", self.name, args, kwargs)

    def __getattr__(self, attribute: str) -> Any:
        raise _Inconclusive(f"{self.name}.{attribute} cannot be checked outside your kernel")

    def __reduce__(self) -> Any:
        from course_lib.grader._student_worker import Ref

        return Ref(self.name).__reduce__()

    def __repr__(self) -> str:
        return f"<the student's {self.name} (in the student worker)>"


@dataclass
class _Measured:
    ratio: float
    low: float
    high: float
    rounds: int
    baseline_seconds: float
    candidate_seconds: float
    batch: int = 1
    """Calls of the student's function per timed batch (one round trip to the worker)."""
    path_seconds: float = 0.0
    """What an empty batch of that size costs through the same path (median), not subtracted."""
    threads: str = ""
    decided: bool = True
    """False when the interval was still too wide to grade on (see ``grading._speed._Decision``)."""
    ratios: tuple[float, ...] = ()
    """Every round's paired ratio, and each side's seconds per call in every round."""
    baseline_times: tuple[float, ...] = ()
    candidate_times: tuple[float, ...] = ()
    reference_batch: int = 1

    def describe(self) -> str:
        from course_lib.grading._checks import _cores_text

        share = self.path_seconds / max(self.candidate_seconds * self.batch, 1e-12)
        noisy = "" if self.decided else " (too wide to grade on: measured again later)"
        return (f"measured outside your kernel: {self.ratio:.3g}x, 95% interval {self.low:.3g}x to "
                f"{self.high:.3g}x{noisy} over {self.rounds} rounds; reference "
                f"{_fmt_seconds(self.baseline_seconds)} per call, yours {_fmt_seconds(self.candidate_seconds)} "
                f"(timed in batches of {self.batch} call{'s' if self.batch != 1 else ''}; the grader's round "
                f"trip adds {_fmt_seconds(self.path_seconds)} a batch, {share:.1%} of yours, included); "
                f"thread pools: {self.threads or 'as set'}; {_cores_text()}")


PROFILE_STAGES = ("worker start", "student cells", "setup and provided cells", "tests", "performance tests",
                  "staging inputs", "timed batches (student)", "timed batches (reference)", "result checks")
"""Where a verification's time goes, as ``verify_notebook(profile=...)`` reports it: the first
five add up to the verifier's run; the last four are parts of "performance tests". Beside
them, ``cell GRADE_ID`` is each graded cell's own share of "tests" or "performance tests"."""

_PROFILE: dict[str, float] = {}


@contextlib.contextmanager
def _spent(stage: str) -> Iterator[None]:
    """Add the block's wall seconds to ``stage`` in this verifier's profile."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        _PROFILE[stage] = _PROFILE.get(stage, 0.0) + time.perf_counter() - t0


_MEASUREMENTS: list[str] = []  # what the remote helpers measured in the current cell
_RATIOS: list[float] = []      # and the speed-ups among it
_UNDECIDED: list[str] = []     # readings in it too noisy to grade on (grading._speed._Decision)
_REFUSED: list[str] = []       # refusals (UnreliableMeasurement) raised in the current cell

# Batches: each side's part of a round lasts at least this long, as compare's rounds do, so
# the round trip to the worker (a pipe message each way, tens of microseconds quiet) is a
# small share of what is timed.
_ROUND_SECONDS = 0.02
_MAX_BATCH = 10_000
_MAX_BATCH_BYTES = 64 * 2**20  # pickled inputs staged for one batch
_MIN_ROUNDS = 9                # the median of 9 paired ratios has a 96% interval
# ... but a grade is settled from grading._speed._SETTLED_ROUNDS (6) on, once the ends of the
# median's interval earn the same grade (see _Decision.settled).
_MAX_ROUNDS = 60
_ROUNDS_BUDGET = 1.5           # timed seconds of rounds per second of the cell's budget
_WALL_BUDGET = 4.0             # ... and at most this many wall seconds per second of budget
_PATH_PROBES = 3               # empty batches that measure the round trip
# Seconds of one reference call past which it is not warmed: a cold call of week 8's loop (110-117
# ms, a neighbour process busy meanwhile) was 0.3% and 0.6% slower than a warmed one (medians of
# 40 and 20 paired calls in the reference process, load 1.2-1.5, December 2026).
_WARM_NEGLIGIBLE = 0.1


def _staged_call(fn: _Remote, args: tuple, whole_sandbox: bool = False) -> tuple[float, float, Any]:
    """(wall seconds, worker CPU seconds, result) of one call timed as a batch of one."""
    smuggled = _stage(fn.worker, _pack([args]))
    wall, cpu, results = _run_batch(fn.worker, fn.name, whole_sandbox)
    if len(results) != 1:
        raise StudentCodeError("the worker sent malformed results")
    return wall + smuggled, cpu + smuggled, results[0]


def _remote_correctness(candidate: _Remote, baseline: Callable, make_args: Callable, settings: Any,
                        as_compare: bool = False) -> Any:
    """As in the kernel: ``checks`` fresh inputs agree, and the per-call estimate of each side.

    The estimate is made exactly as :func:`course_lib.grading._speed._check_correctness` makes it
    (the fastest call after the first, which pays one-off costs such as Numba compiling),
    so the same refusal rule gets the same kind of figure on both sides. ``as_compare``
    (no result is checked, see :func:`_remote_speedup`): a reference whose first call lasts
    :data:`_WARM_NEGLIGIBLE` or more is not called again, since its batch is one call whatever
    the next calls read and its rounds are not warmed; the student's side still gets every call.
    """
    from course_lib import grading
    from course_lib.grading import _checks, _speed, _values

    base_t, cand_t, signature = [], [], ()
    for k in range(1, settings.checks + 1):
        args = _checks._fresh_args(make_args)
        t_c, _, result = _staged_call(candidate, args)  # the verifier's originals stay pristine
        if as_compare and base_t and base_t[0] >= _WARM_NEGLIGIBLE:
            # Week 8's before-and-after check: three calls of the provided job (0.4 s each)
            # for one figure that the first already gave; week 2's report, 0.25 s each.
            cand_t.append(t_c)
            continue
        t_b, (expected,) = _timed_reference(baseline, [args], candidate.worker)
        problem = settings.comparator(result, expected)
        if problem is not None:
            raise grading.GradingError(f"Wrong result on fresh input {k} of {settings.checks}, checked "
                                       f"outside your kernel before any timing: {problem}")
        base_t.append(t_b)
        cand_t.append(t_c)
        signature = _values._signature(expected)
    return _speed._Estimate(min(base_t[1:] or base_t), min(cand_t[1:]), signature)


def _batch_sizes(estimate: Any, input_bytes: int) -> tuple[int, int]:
    """(candidate calls, reference calls) per round: each side's part >= _ROUND_SECONDS."""
    k_c = math.ceil(_ROUND_SECONDS / max(estimate.candidate_seconds, 1e-7))
    k_c = max(1, min(k_c, _MAX_BATCH, _MAX_BATCH_BYTES // max(input_bytes, 1)))
    k_b = max(1, min(math.ceil(_ROUND_SECONDS / max(estimate.baseline_seconds, 1e-7)), _MAX_BATCH))
    return k_c, k_b


def _remote_speedup(candidate: _Remote, baseline: Callable, make_args: Callable, settings: Any,
                    fastest: float, decision: Any, as_compare: bool = False) -> _Measured:
    """The speed-up measured as :func:`course_lib.timing.compare` measures it, across processes.

    Interleaved rounds (reference then candidate, then the other way round), each side's
    part a batch of fresh inputs lasting at least ``_ROUND_SECONDS``, the median of the
    paired per-call ratios with a distribution-free interval. The reference's batch gets
    a run of the candidate's inputs that starts at a place drawn for each round where the
    worker cannot see it (the verifier's own copies, never touched by the student), so its
    results are a sampled check of the candidate's; more of the candidate's results are
    checked on a sample drawn the same way (one input before the round, for the reference to
    warm on, the rest after the results arrived), and the type and shape of every result is
    checked. ``as_compare``: the rules of :func:`course_lib.timing.compare`, for a test that
    holds a student's own figure to a fresh reading within a wide factor (see
    :func:`_remote_compare`): calls under ``min_call_seconds`` are measured anyway
    (``compare`` warns instead), rounds stop at compare's minimum once the budget is spent.
    A reference whose batch is one call of at least :data:`_WARM_NEGLIGIBLE` seconds is not
    warmed first.
    """
    from course_lib import timing
    from course_lib.grading import _speed

    worker = candidate.worker
    with timing.limit_threads(settings.threads) as threads:
        pools = worker.set_threads(threads)
        worker.warm_heap(timing._WARM_HEAP_MIB)  # freed memory stays mapped, as in compare
        try:
            estimate = _remote_correctness(candidate, baseline, make_args, settings, as_compare)
            if not as_compare:
                _speed._refuse_microseconds(estimate, fastest, settings.min_call_seconds)
            reference = _ReferenceProcess(baseline)
            try:
                return _remote_rounds(candidate, reference, baseline, make_args, settings, estimate,
                                      decision, pools, as_compare)
            finally:
                reference.close()
        finally:
            worker.warm_heap(0)


def _remote_rounds(candidate: _Remote, reference: _ReferenceProcess, baseline: Callable, make_args: Callable,
                   settings: Any, estimate: Any, decision: Any, pools: str, as_compare: bool = False) -> _Measured:
    from course_lib import timing
    from course_lib.grading import _checks, _speed

    worker = candidate.worker
    probe = _checks._fresh_args(make_args)
    k_c, k_b = _batch_sizes(estimate, _pack(probe).nbytes)
    min_rounds = timing._min_rounds(0.95) if as_compare else _MIN_ROUNDS
    # A cold reference call lost 12% of a 12 ms loop but 2.7% of a 0.53 s pandas call (see
    # _ReferenceProcess.batch), while a warming call doubles what a long reference's rounds
    # cost. It is skipped once the batch is one call of _WARM_NEGLIGIBLE or more. Week 8's job
    # speed cell (references of 0.37-0.39 s, one call a side), A/B three times each at load
    # about 1: stored 9.21x, 9.13x, 6.42x warmed and 9.05x, 9.49x, 7.76x not (in process
    # 8.0-8.8x); the cell 7.4-8.0 s against 5.1-7.2 s (7 December 2026). The warming call was
    # also the round's one sampled check of a student's batch of several calls, while the
    # reference timed the batch's first inputs, a place the student could count on; the
    # reference now times a run starting at a place drawn for each round, which is itself
    # that sampled check.
    warm = not (k_b == 1 and estimate.baseline_seconds >= _WARM_NEGLIGIBLE)
    rng = __import__("numpy").random.default_rng(int.from_bytes(os.urandom(16), "little"))
    # Extra results checked per round, on top of the k_b the reference's batch checks.
    spare = max(0, k_c - k_b)
    # The check budget spread over the fewest rounds a measurement may take (a settled one);
    # the warming call's result is one more check at no cost.
    per_round = settings.verify_budget / _speed._SETTLED_ROUNDS / max(estimate.baseline_seconds, 1e-9)
    extra = min(spare, max(1 if spare and warm else 0, int(per_round)))
    if as_compare:
        extra = 0  # compare checks no result: a sampled reference call would be work for nothing
    ratios: list[float] = []
    base_t: list[float] = []
    cand_t: list[float] = []
    path: list[float] = []
    target, started = _ROUNDS_BUDGET * settings.budget, time.perf_counter()
    spent = 0.0

    def measured(decided: bool) -> _Measured:
        low, ratio, high = _speed._median_interval(ratios)
        return _Measured(ratio, low, high, len(ratios), statistics.median(base_t), statistics.median(cand_t),
                         k_c, statistics.median(path), pools, decided, tuple(ratios), tuple(base_t),
                         tuple(cand_t), k_b)
    while True:
        inputs = [_checks._fresh_args(make_args) for _ in range(max(k_c, k_b))]
        payload = _pack(inputs[:k_c])
        # The reference times the k_b inputs from a place drawn now (wrapping round the
        # student's batch), never shown to the worker: with the batch's first inputs, a batch
        # right only there passed every check a long, unwarmed reference made.
        order = _reference_order(k_c, k_b, rng)
        # The reference process receives the same bytes first: what that costs an honest
        # process is the yardstick for the worker's staging.
        with _spent("staging inputs"):
            if k_b > k_c:
                everything = _pack(inputs)
                honest = reference.stage(everything) * payload.nbytes / max(1, everything.nbytes)
            else:
                honest = reference.stage(_pack([inputs[i] for i in order]) if order[0] else payload)
        # The reference warms on one of the student's inputs that its own timed calls do not
        # take, drawn now and never shown to the worker: that result is one of the round's
        # sampled checks, computed once instead of twice.
        warm_on = int(k_b + rng.integers(spare)) if spare else None
        for side in ((0, 1) if len(ratios) % 2 == 0 else (1, 0)):
            if side == 0:
                worker.pause()  # no student process runs while the reference is timed
                try:
                    with _spent("timed batches (reference)"):
                        t_b, expected = reference.batch(k_b, worker.threads or 1, warm_on, warm)
                        expected = [(order[i], result) for i, result in enumerate(expected)]
                        warmed = None if reference.warmed is None else (order[warm_on], reference.warmed[1])
                finally:
                    worker.resume()
            else:
                # Staged just before its batch, as compare makes a round's inputs just
                # before its loop: inputs staged before the reference's batch had left the
                # caches (800,000-float inputs: 12% slower per call, stored ratio 11% low).
                with _spent("staging inputs"):
                    smuggled = _stage(worker, payload, honest)
                with _spent("timed batches (student)"):
                    t_c, _, results = _run_batch(worker, candidate.name)
        if len(path) < _PATH_PROBES:
            path.append(_run_batch(worker, None)[0])  # the same staged inputs, no work
        with _spent("result checks"):
            _check_batch(results, expected, inputs, k_c, extra, rng, baseline, estimate, settings,
                         len(ratios) + 1, warmed)
        t_c += smuggled
        base_t.append(t_b / k_b)
        cand_t.append(t_c / k_c)
        ratios.append(base_t[-1] / cand_t[-1])
        spent += t_b + t_c
        rounds, wall = len(ratios), time.perf_counter() - started
        if rounds >= _speed._SETTLED_ROUNDS and decision.settled(*_ends(ratios)):
            return measured(True)
        if rounds < min_rounds:
            continue
        if rounds >= _MAX_ROUNDS or spent >= target or wall >= _WALL_BUDGET * settings.budget:
            close = decision.undecided(*_ends(ratios))
            if (not close or spent >= 2 * target or rounds >= 2 * _MAX_ROUNDS
                    or wall >= 2 * _WALL_BUDGET * settings.budget):
                return measured(not close)


def _reference_order(k_c: int, k_b: int, rng: Any) -> list[int]:
    """The student's inputs in the order the reference is staged them: it times the first ``k_b``.

    A run of the student's ``k_c`` inputs from a place drawn with ``rng``, wrapping round;
    when the reference's batch covers the student's (``k_b >= k_c``), no draw is needed.

    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> _reference_order(5, 2, rng), _reference_order(5, 2, rng), _reference_order(2, 3, rng)
    ([2, 3, 4, 0, 1], [2, 3, 4, 0, 1], [0, 1, 2])
    """
    if k_b >= k_c:
        return list(range(max(k_c, k_b)))
    at = int(rng.integers(k_c))
    return [(at + i) % k_c for i in range(k_c)]


def _ends(ratios: list[float]) -> tuple[float, float]:
    """The two ends of the median's 95% interval."""
    from course_lib.grading import _speed

    low, _, high = _speed._median_interval(ratios)
    return low, high


def _check_batch(results: Any, expected: list[tuple[int, Any]], inputs: list, k_c: int, extra: int,
                 rng: Any, baseline: Callable, estimate: Any, settings: Any, round_: int,
                 warmed: tuple[int, Any] | None = None) -> None:
    """Every result's type and shape; the reference's inputs' results; a sample of the rest.

    ``expected``: ``(index, reference result)`` of each input the reference's batch timed.
    ``warmed``: the same for a sampled input whose result the reference process computed
    already (see ``_ReferenceProcess.batch``); the rest of the sample is drawn from the
    other inputs.
    """
    from course_lib import grading
    from course_lib.grading import _values

    if not isinstance(results, list) or len(results) != k_c:
        raise StudentCodeError("the worker sent malformed results")
    if settings.default_check:
        for result in results:
            if _values._signature(result) != estimate.signature:
                raise grading.GradingError(
                    f"Wrong result in timed round {round_}, measured outside your kernel: expected "
                    f"{_values._describe_signature(estimate.signature)}, got "
                    f"{_values._describe_signature(_values._signature(result))}")
    checked = list(expected)
    if extra and warmed is not None:
        checked.append(warmed)
        extra -= 1
    if extra:
        taken = {i for i, _ in checked}
        rest = [i for i in range(k_c) if i not in taken]
        for i in rng.choice(rest, size=min(extra, len(rest)), replace=False):
            checked.append((int(i), baseline(*inputs[int(i)])))
    for i, reference in checked:
        if i >= k_c:
            continue
        problem = settings.comparator(results[i], reference)
        if problem is not None:
            raise grading.GradingError(
                f"Wrong result in timed round {round_}, measured outside your kernel (timed results "
                f"are checked): {problem}")


def _install_remote_helpers() -> None:
    """Replace the measuring helpers of course_lib.grading, in this process only."""
    from course_lib import grading
    from course_lib.grading import _checks, _memory, _speed, _state

    real = {name: getattr(grading, name) for name in
            ("assert_speedup", "speedup_points", "parallel_points", "assert_peak_memory_below", "assert_scaling",
             "peak_memory_points", "scaling_points")}

    def assert_speedup(candidate, baseline, make_args, at_least, budget=1.0, *, check=None, rtol=1e-9,
                       atol=0.0, margin=0.1, min_call_seconds=1e-3, checks=3, verify_budget=None, threads=1):
        if not isinstance(candidate, _Remote):
            return real["assert_speedup"](candidate, baseline, make_args, at_least, budget, check=check,
                                          rtol=rtol, atol=atol, margin=margin,
                                          min_call_seconds=min_call_seconds, checks=checks,
                                          verify_budget=verify_budget, threads=threads)
        settings = _speed._speed_settings(budget, margin, min_call_seconds, checks, verify_budget, check,
                                          rtol, atol, threads)
        needed = at_least * (1.0 - margin)
        measured = _remote_speedup(candidate, baseline, make_args, settings, at_least,
                                   _speed._Decision(passes_at=needed))
        _record(measured)
        if not measured.ratio >= needed:
            raise grading.GradingError(f"Not fast enough: {measured.describe()}; this test needs "
                                       f"{at_least:g}x (a measured {needed:.3g}x passes)")

    def speedup_points(candidate, baseline, make_args, full_at, zero_at, points, budget=1.0, *, check=None,
                       rtol=1e-9, atol=0.0, margin=0.1, min_call_seconds=1e-3, checks=3, verify_budget=None,
                       threads=1):
        if not isinstance(candidate, _Remote):
            return real["speedup_points"](candidate, baseline, make_args, full_at, zero_at, points, budget,
                                          check=check, rtol=rtol, atol=atol, margin=margin,
                                          min_call_seconds=min_call_seconds, checks=checks,
                                          verify_budget=verify_budget, threads=threads)
        settings = _speed._speed_settings(budget, margin, min_call_seconds, checks, verify_budget, check,
                                          rtol, atol, threads)
        decision = _speed._Decision(full_at=full_at, zero_at=zero_at, points=points, margin=margin)
        measured = _remote_speedup(candidate, baseline, make_args, settings, full_at, decision)
        _record(measured)
        return _speed._points_for(measured.ratio, full_at, zero_at, points, margin)

    def assert_peak_memory_below(fn, limit, /, *args, **kwargs):
        if not isinstance(fn, _Remote):
            return real["assert_peak_memory_below"](fn, limit, *args, **kwargs)
        limit_bytes = _checks._parse_bytes(limit)
        traced, resident = _remote_peak(fn, args, kwargs)
        counted = _counted_peak(traced, resident)
        _MEASUREMENTS.append(f"measured outside your kernel: {_describe_peak(traced, resident, counted)}; limit "
                             f"{_state._fmt_bytes(limit_bytes)}")
        if counted >= limit_bytes:
            raise grading.GradingError(f"Too much memory: {_describe_peak(traced, resident, counted)}; the "
                                       f"limit is {_state._fmt_bytes(limit_bytes)}")

    def assert_scaling(fn, make_input, sizes, max_exponent, *, budget=0.2, margin=0.1, min_call_seconds=1e-3):
        if not isinstance(fn, _Remote):
            return real["assert_scaling"](fn, make_input, sizes, max_exponent, budget=budget, margin=margin,
                                          min_call_seconds=min_call_seconds)
        fit, measured = _remote_exponent(fn, make_input, sizes, budget, min_call_seconds)
        _MEASUREMENTS.append(measured)
        if not fit.slope <= max_exponent + margin:
            raise grading.GradingError(f"Grows too fast: the fitted exponent is {fit.slope:.2f}; at most "
                                       f"{max_exponent:g} is allowed (a measured {max_exponent + margin:.2f} passes)")

    def parallel_points(candidate, reference, make_args, workers, full_at, zero_at, points, budget=2.0, **options):
        if not isinstance(candidate, _Remote):
            return real["parallel_points"](candidate, reference, make_args, workers, full_at, zero_at, points,
                                           budget, **options)
        from course_lib.grader._remote_parallel import remote_parallel_points

        earned, measured, ratio, decided = remote_parallel_points(candidate, reference, make_args, workers,
                                                                  full_at, zero_at, points, budget, **options)
        _MEASUREMENTS.append(measured)
        if ratio is not None:
            _RATIOS.append(ratio)
        if not decided:
            _UNDECIDED.append(measured)
        return earned

    def peak_memory_points(fn, full_at, zero_at, points, /, *args, **kwargs):
        if not isinstance(fn, _Remote):
            return real["peak_memory_points"](fn, full_at, zero_at, points, *args, **kwargs)
        full, zero = _memory._memory_thresholds(full_at, zero_at, points)
        traced, resident = _remote_peak(fn, args, kwargs)
        # The figure assert_peak_memory_below compares with its limit, so full points here need
        # exactly what passing assert_peak_memory_below(fn, full_at) needs.
        counted = _counted_peak(traced, resident)
        _MEASUREMENTS.append(f"measured outside your kernel: {_describe_peak(traced, resident, counted)}; full "
                             f"points up to {_state._fmt_bytes(int(full))}, none from "
                             f"{_state._fmt_bytes(int(zero))}")
        return _memory._log_share_points(float(counted), full, zero, float(points))

    def scaling_points(fn, make_input, sizes, full_at, zero_at, points, *, budget=0.2, margin=0.1,
                       min_call_seconds=1e-3):
        if not isinstance(fn, _Remote):
            return real["scaling_points"](fn, make_input, sizes, full_at, zero_at, points, budget=budget,
                                          margin=margin, min_call_seconds=min_call_seconds)
        _memory._check_points_thresholds(full_at, zero_at, points, increasing=False)
        fit, measured = _remote_exponent(fn, make_input, sizes, budget, min_call_seconds)
        _MEASUREMENTS.append(f"{measured}; full points up "
                             f"to {full_at + margin:.2f}, none from {zero_at + margin:.2f}")
        return _memory._exponent_points(fit.slope, full_at, zero_at, points, margin)

    for name, fn in {"assert_speedup": assert_speedup, "speedup_points": speedup_points,
                     "parallel_points": parallel_points,
                     "assert_peak_memory_below": assert_peak_memory_below,
                     "assert_scaling": assert_scaling, "peak_memory_points": peak_memory_points,
                     "scaling_points": scaling_points}.items():
        fn.__doc__ = real[name].__doc__
        setattr(grading, name, fn)

    # A speed preview measures nothing while grading (it checks NBGRADER_EXECUTION, which the
    # judge does not set): here it is replaced outright, so it never calls a remote answer.
    from course_lib import preview

    def preview_speedup(*args, **kwargs):
        return None

    preview_speedup.__doc__ = preview.preview_speedup.__doc__
    preview.preview_speedup = preview_speedup
    if hasattr(preview, "preview_parallel"):
        preview.preview_parallel = lambda *args, **kwargs: None
    for name in ("preview_peak_memory", "preview_scaling"):  # memory and growth previews, likewise
        setattr(preview, name, lambda *args, **kwargs: None)

    real_warm = grading.warm_call_seconds

    def warm_call_seconds(fn, args, calls=5):
        if not isinstance(fn, _Remote):
            return real_warm(fn, args, calls)
        return _remote_warm_call_seconds(fn, tuple(args), calls)

    warm_call_seconds.__doc__ = real_warm.__doc__
    grading.warm_call_seconds = warm_call_seconds

    real_speedup, real_exponent = grading.measured_speedup, grading.measured_exponent

    def measured_speedup(candidate, baseline, make_args, budget=1.0, *, rtol=1e-9, atol=0.0,
                         min_call_seconds=1e-3, checks=3, threads=1):
        if not isinstance(candidate, _Remote):
            return real_speedup(candidate, baseline, make_args, budget, rtol=rtol, atol=atol,
                                min_call_seconds=min_call_seconds, checks=checks, threads=threads)
        settings = _speed._speed_settings(budget, 0.0, min_call_seconds, checks, None, None, rtol, atol, threads)
        measured = _remote_speedup(candidate, baseline, make_args, settings, 1.0, _speed._Decision())
        _MEASUREMENTS.append(measured.describe())
        return float(measured.ratio)

    def measured_exponent(fn, make_input, sizes, budget=0.2, *, min_call_seconds=1e-3):
        if not isinstance(fn, _Remote):
            return real_exponent(fn, make_input, sizes, budget, min_call_seconds=min_call_seconds)
        fit, measured = _remote_exponent(fn, make_input, sizes, budget, min_call_seconds)
        _MEASUREMENTS.append(measured)
        return float(fit.slope)

    real_peak = grading.measured_peak

    def measured_peak(fn, /, *args, **kwargs):
        if not isinstance(fn, _Remote):
            return real_peak(fn, *args, **kwargs)
        traced, resident = _remote_peak(fn, args, kwargs)
        _MEASUREMENTS.append(f"measured outside your kernel: peak traced memory {_state._fmt_bytes(traced)} "
                             f"(the sandbox's memory rose by {_state._fmt_bytes(resident)})")
        return int(traced)

    for name, fn in (("measured_speedup", measured_speedup), ("measured_exponent", measured_exponent),
                     ("measured_peak", measured_peak)):
        fn.__doc__ = getattr(grading, name).__doc__
        setattr(grading, name, fn)

    real_first = grading.first_call_seconds

    def first_call_seconds(fn, args, calls=5):
        if not isinstance(fn, _Remote):
            return real_first(fn, args, calls)
        return _remote_first_call_seconds(fn, tuple(args), calls)

    first_call_seconds.__doc__ = real_first.__doc__
    grading.first_call_seconds = first_call_seconds

    from course_lib import timing

    real_compare = timing.compare

    def compare(baseline, candidate, args=(), make_args=None, budget=1.0, *, kwargs=None, check=None, warmup=1,
                min_round=0.02, confidence=0.95):
        # A hidden test that times a student's function against the grader's own with
        # timing.compare (week 2's report, week 8's before and after): called through the
        # proxy, every call would be billed the trip to the worker and back, inputs and
        # results pickled on the way (beside three busy processes, the grader's reading of
        # week 2's reference fell under a third of the student's own in 2 gradings of 12).
        # Measured as speed cells are instead; anything else as written.
        remote = isinstance(baseline, _Remote), isinstance(candidate, _Remote)
        if remote.count(True) != 1 or kwargs or check is not None or confidence != 0.95:
            return real_compare(baseline, candidate, args, make_args, budget, kwargs=kwargs, check=check,
                                warmup=warmup, min_round=min_round, confidence=confidence)
        return _remote_compare(baseline, candidate, tuple(args), make_args, budget)

    compare.__doc__ = real_compare.__doc__
    timing.compare = compare
    # The tampering check compares timing's globals with a snapshot taken at import (it
    # guards the student's kernel); in this process, which runs no student code, the
    # snapshot takes the replacement, or every later check would report it.
    from course_lib.grading import _state

    _state._accept_replacement(timing, "compare", compare)


def _remote_compare(baseline: Callable, candidate: Callable, args: tuple, make_args: Callable | None,
                    budget: float) -> Any:
    """``timing.compare`` with one side a student's function: timed in the worker, staged.

    The student's side runs in batches in the worker with its own clock, the grader's side in
    the reference process while the worker is stopped, as for every speed cell
    (:func:`_remote_speedup`). Like ``compare`` it checks no results, refuses nothing, and
    warns when the faster side takes under a millisecond a call.
    """
    from course_lib import timing
    from course_lib.grading import _speed

    started = timing._perf_counter()
    student_is_baseline = isinstance(baseline, _Remote)
    remote, local = (baseline, candidate) if student_is_baseline else (candidate, baseline)
    if make_args is None:
        make_args = lambda: args  # noqa: E731  (the staged copies are fresh objects anyway)
    settings = dataclasses.replace(_speed._speed_settings(budget, 0.0, 1e-3, 3, None, None, 1e-9, 0.0, 1),
                                   comparator=lambda result, expected: None, default_check=False)
    measured = _remote_speedup(remote, local, make_args, settings, 1.0, _speed._Decision(), as_compare=True)
    local_t, remote_t = measured.baseline_times, measured.candidate_times
    if student_is_baseline:  # measured as local over remote; compare's ratio is baseline over candidate
        base_t, cand_t, loops = remote_t, local_t, (measured.batch, measured.reference_batch)
    else:
        base_t, cand_t, loops = local_t, remote_t, (measured.reference_batch, measured.batch)
    return timing._summary(base_t, cand_t, loops, budget, 0.95, started)


def _record(measured: _Measured) -> None:
    _MEASUREMENTS.append(measured.describe())
    _RATIOS.append(measured.ratio)
    if not measured.decided:
        _UNDECIDED.append(measured.describe())


def _remote_warm_call_seconds(fn: _Remote, args: tuple, calls: int) -> float:
    """``warm_call_seconds`` outside the kernel: each call a batch of one in the student worker.

    The worker's pools are set to one thread, as the kernel's helper sets them; one untimed
    call first, then the median of ``calls`` calls timed by this process's clock, inputs
    staged before it starts (:func:`_staged_call`; the round trip is included, a fraction of
    a millisecond on a quiet machine).
    """
    from course_lib.grading import _checks

    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
        raise ValueError(f"calls must be a whole number of at least 1, got {calls!r}")
    fn.worker.set_threads(1)
    _staged_call(fn, args)  # untimed: compiles, if it has not yet
    seconds = sorted(_staged_call(fn, args)[0] for _ in range(calls))
    median = statistics.median(seconds)
    _MEASUREMENTS.append(f"measured outside your kernel: a warm call of {fn.name} took "
                         f"{_fmt_seconds(median)} (median of {calls}, round trip included); "
                         f"{_checks._cores_text()}")
    return float(median)


def _remote_first_call_seconds(fn: _Remote, args: tuple, calls: int) -> tuple[float, float]:
    """``first_call_seconds`` outside the kernel: in a fresh student worker, sandboxed as the first.

    The new worker runs the notebook's non-test cells up to and including the one that
    defines ``fn`` (the student's measuring cell comes after it and is left out), then each
    call is timed as a batch of one (:func:`_staged_call`), pools at one thread.
    """
    from course_lib.grading import _checks
    from course_lib._fresh_call import defining_cell

    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
        raise ValueError(f"calls must be a whole number of at least 1, got {calls!r}")
    cells = _JOB.get("student_cells", [])
    index = defining_cell(cells, fn.name)
    if index is None:
        raise StudentCodeError(f"no cell of your notebook defines {fn.name}")
    fresh = _Worker(_JOB["cwd"], _JOB["log"], _JOB["timeout"], _JOB.get("memory_limit", 0),
                    _JOB.get("sandboxed", False), shared=_JOB.get("tmpdir"))
    try:
        fresh.load(cells[: index + 1])
        fresh.set_threads(1)
        proxy = _Remote(fresh, fn.name)
        first = _staged_call(proxy, args)[0]
        _staged_call(proxy, args)  # untimed, as in the kernel's reading
        warm = statistics.median(_staged_call(proxy, args)[0] for _ in range(calls))
    finally:
        fresh.close()
    _MEASUREMENTS.append(f"measured outside your kernel, in a fresh worker that ran your notebook up to "
                         f"{fn.name}'s definition: first call {_fmt_seconds(first)}, warm call "
                         f"{_fmt_seconds(warm)} (median of {calls}, round trip included); "
                         f"{_checks._cores_text()}")
    return float(first), float(warm)


_JOB: dict[str, Any] = {}  # the job being judged: the student's cells, for a fresh worker

# What the sandbox's memory may rise above the traced peak before the rise counts instead:
# honest code holds memory tracemalloc does not see (parser buffers in C, SQLite's cache,
# the allocator's slack). benchmarks/memory_tolerance.py measures it on the course's memory
# cells in the sandboxed worker, warm as the graded call is, the allocator trimmed before
# each reading (see _remote_peak): for the answers that earn points the rise stayed within
# 21.2 MiB of the traced peak (pandas' C parser in region_summary: the reference 19.1-19.3
# MiB, other_full 20.2-21.2 MiB; hourly_load at most 3.0 MiB), repeated readings of one
# answer within 1 MiB (5 December 2026, load 2). 32 MiB covers that with room; the
# whole-file read hidden from tracemalloc rose by 164-167 MiB there, the same read in a
# forked child by 211 MiB. (Untrimmed, a warm worker reused the pages of earlier calls and
# the hidden read rose by only 64-71 MB.) A fixed allowance from measurements.
_RESIDENT_TOLERANCE = 32 * 2**20


def _counted_peak(traced: int, resident: int) -> int:
    """The memory figure a memory cell grades: the traced peak, or the sandbox's rise less the
    tolerance when that is larger (memory allocated out of tracemalloc's sight, or in a child)."""
    return max(int(traced), int(resident) - _RESIDENT_TOLERANCE)


def _describe_peak(traced: int, resident: int, counted: int) -> str:
    from course_lib.grading import _state

    return (f"peak traced memory {_state._fmt_bytes(traced)}, the sandbox's memory (processes and files) "
            f"rose by {_state._fmt_bytes(resident)}; counted {_state._fmt_bytes(counted)} (the larger of the "
            f"traced peak and the rise less {_state._fmt_bytes(_RESIDENT_TOLERANCE)})")


def _remote_exponent(fn: _Remote, make_input: Callable, sizes: Any, budget: float,
                     min_call_seconds: float) -> tuple[Any, str]:
    """(fit, what was measured) of the student's function's growth, timed in the worker."""
    import pandas as pd

    from course_lib import complexity, grading
    from course_lib.grading import _checks

    sizes = _checks._check_sizes(sizes)
    seconds = _remote_scaling_seconds(fn, make_input, sizes, budget)
    if seconds[-1] < min_call_seconds:
        raise grading.UnreliableMeasurement(f"the largest size takes only {_fmt_seconds(seconds[-1])}")
    fit = complexity.exponent(pd.DataFrame({"n": sizes, "seconds": seconds}))
    # "CPU time per call", not "CPU seconds": the figures are in whatever unit suits them (ms, µs)
    times = ", ".join(f"{_fmt_seconds(s)} at n={n:,}" for n, s in zip(sizes, seconds))
    return fit, f"measured outside your kernel: exponent {fit.slope:.2f} ({fit.verdict}) from CPU time per call {times}"


def _remote_peak(fn: _Remote, args: tuple, kwargs: dict) -> tuple[int, int]:
    """(tracemalloc's peak in the worker, the most resident memory the call added).

    The resident figure is the worker's own peak (``VmHWM``, reset first) or, when the
    worker runs in a sandbox, that of everything in the sandbox if larger: a call that
    hands its allocation to a forked child is measured with the child.
    """
    pid = fn.worker.pid
    # Free pages an earlier call left mapped would hide a rise (a warm process reuses them):
    # handed back first. A worker that refuses is measured as it is.
    with contextlib.suppress(StudentCodeError):
        fn.worker.request("trim")
    resident_before = _status_kib(pid, "VmRSS")
    with contextlib.suppress(OSError):  # resets the peak RSS (VmHWM) to the current RSS
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    whole = _SandboxMemory(fn.worker.box) if fn.worker.box is not None else contextlib.nullcontext()
    with whole:
        traced = fn.worker.request("peak", fn.name, args, kwargs)
    resident = max(0, _status_kib(pid, "VmHWM") - resident_before) * 1024
    if isinstance(whole, _SandboxMemory):
        resident = max(resident, whole.rise)
    if not isinstance(traced, int):
        raise StudentCodeError("the worker sent a malformed memory reading")
    return traced, resident


class _SandboxMemory:
    """The most memory everything in a sandbox added during a ``with`` block.

    What the sandbox holds (:meth:`course_lib.grader.sandbox.Sandbox.memory_current`: its
    processes' resident memory and what it keeps in tmpfs and memory files), sampled every
    ``_MEMORY_SAMPLE`` seconds from a thread, and at the end what it holds then plus how far
    each live process's own peak (``VmHWM``, reset at the start) is above its resident
    memory then, which catches a peak between two samples. A child
    forked during the call counts the pages it shares with its parent again: an upper
    bound, for calls that fork.
    """

    def __init__(self, box: Any) -> None:
        self.box, self.rise = box, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="sandbox-memory", daemon=True)

    def _sum(self, key: str) -> int:
        return sum(_status_kib(pid, key) for pid in self.box.processes()) * 1024

    def _held(self) -> int:
        try:
            return self.box.memory_current()
        except OSError:
            return self._sum("VmRSS")

    def _sample(self) -> None:
        while not self._stop.wait(_MEMORY_SAMPLE):
            self._peak = max(self._peak, self._held())

    def __enter__(self) -> _SandboxMemory:
        for pid in self.box.processes():
            with contextlib.suppress(OSError):
                Path(f"/proc/{pid}/clear_refs").write_text("5")
        self._base = self._peak = self._held()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(5)
        # Each process's own peak above its resident memory now: a rise between two samples.
        above = self._sum("VmHWM") - self._sum("VmRSS")
        self._peak = max(self._peak, self._held() + max(0, above))
        self.rise = max(0, self._peak - self._base)


_MEMORY_SAMPLE = 0.002  # seconds between samples of a sandbox's memory: touching 20 MB takes longer


def _remote_scaling_seconds(fn: _Remote, make_input: Callable, sizes: list[int], budget: float) -> list[float]:
    def one(n: int) -> float:
        return _staged_call(fn, (make_input(n),), whole_sandbox=True)[1]

    first = [one(n) for n in sizes]  # warm-up
    calls = [max(3, min(15, int(budget / max(t, 1e-9)))) for t in first]
    best = [math.inf] * len(sizes)
    for round_ in range(max(calls)):
        for i, n in enumerate(sizes):
            if round_ < calls[i]:
                best[i] = min(best[i], one(n))
    return best


def _run_cell(source: str, ns: dict) -> Any:
    """Execute a cell as IPython would; the value of a last bare expression is returned."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<grade cell>", "exec"), ns)
    if last is not None:
        return eval(compile(ast.Expression(last.value), "<grade cell>", "eval"), ns)
    return None


def _cell_score(value: Any, points: float) -> float:
    # nbgrader's rule: a numeric last value is partial credit, anything else full marks.
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(min(points, max(0.0, value)))
    return float(points)


def _judge(job: dict) -> list[dict]:
    _install_remote_helpers()
    _JOB.clear()
    _JOB.update(job)
    answers = set(job["answer_names"])
    cells = job["judge_cells"]
    graded = [c for c in cells if c["grade_id"] and c["graded"]]
    with _spent("worker start"):
        worker = _Worker(job["cwd"], job["log"], job["timeout"], job.get("memory_limit", 0),
                         job.get("sandboxed", False), shared=job.get("tmpdir"), attach=job.get("attach"))
    verdicts: list[dict] = []
    try:
        ns: dict[str, Any] = {"__name__": "__main__"}
        try:
            with _spent("student cells"):
                worker.load(job["student_cells"])
                try:
                    unreadable = _bind_answers(worker, answers, ns)
                except StudentCodeError:
                    if not worker.attached:
                        raise
                    # The notebook's kernel did not give its answers (it died, or stopped
                    # answering): a fresh worker runs the cells, as it always did.
                    worker.restart()
                    unreadable = _bind_answers(worker, answers, ns)
        except StudentCodeError as exc:
            return [asdict(CellVerdict(c["grade_id"], 0.0, c["points"], f"your code could not be loaded: {exc}"))
                    for c in graded]
        noisy: dict[int, list[CellVerdict]] = {}
        only = set(job["only"]) if job.get("only") is not None else None
        for cell in cells:
            if only is not None and cell["grade_id"] not in only and is_performance_cell(cell["grade_id"]):
                continue  # a later reading of some cells: the other measurements are not repeated
            verdict = _judge_cell(cell, ns, worker, answers, unreadable)
            if verdict is not None and only is not None and verdict.grade_id not in only:
                continue
            if verdict is not None:
                if verdict.undecided:
                    noisy[len(verdicts)] = [verdict]
                verdicts.append(asdict(verdict))
        # Later, once the other cells are done: a reading too noisy to grade on is taken
        # again (the cell runs once more, on fresh inputs), until one is decided.
        for index, readings in noisy.items():
            cell = next(c for c in graded if c["grade_id"] == readings[0].grade_id)
            while readings[-1].undecided and len(readings) <= _RETRIES:
                again = _judge_cell(cell, ns, worker, answers, unreadable)
                if again is None:
                    break
                readings.append(again)
            verdicts[index] = asdict(_settled(readings))
    finally:
        worker.close()
    return verdicts


_RETRIES = 2  # later readings of a cell whose first was too noisy to grade on


def _settled(readings: list[CellVerdict]) -> CellVerdict:
    """The verdict to store from a cell's readings: the first decided one, else the best, flagged.

    A reading that never settles is stored as the student's better one (never as 0 on a
    noisy reading), marked ``undecided`` with every reading's points in its detail.
    """
    decided = [r for r in readings if not r.undecided]
    if decided:
        chosen = decided[0]
        if len(readings) > 1:
            chosen = dataclasses.replace(chosen, detail=f"{chosen.detail} (reading {readings.index(chosen) + 1} "
                                                        f"of {len(readings)}: the earlier were too noisy to grade on)")
        return chosen
    best = max(readings, key=lambda r: r.score)
    points = ", ".join(f"{r.score:g}" for r in readings)
    return dataclasses.replace(best, readings=tuple(r.score for r in readings),
                               detail=f"{best.detail} (measured {len(readings)} times, never precisely enough "
                                      f"to grade on: {points} of {best.max_score:g} points; the best is stored)")


def _judge_cell(cell: dict, ns: dict, worker: _Worker, answers: set[str], unreadable: set[str]) -> CellVerdict | None:
    """Run one instructor cell in the verifier; the verdict if it is a graded test cell."""
    grade_id = cell["grade_id"]
    graded = bool(grade_id and cell["graded"])
    stage = ("setup and provided cells" if not graded else
             "performance tests" if is_performance_cell(grade_id) else "tests")
    # A graded cell's own seconds too, so that --profile can name the dearest tests.
    with _spent(stage), (_spent(f"cell {grade_id}") if graded else contextlib.nullcontext()):
        return _judged_cell(cell, ns, worker, answers, unreadable)


def _judged_cell(cell: dict, ns: dict, worker: _Worker, answers: set[str], unreadable: set[str]) -> CellVerdict | None:
    from course_lib import grading

    _MEASUREMENTS.clear()
    _RATIOS.clear()
    _UNDECIDED.clear()
    grade_id, points = cell["grade_id"], cell["points"]
    perf = is_performance_cell(grade_id)
    blocked = _names(cell["source"])[0] & unreadable
    refused = not_data = False
    try:
        if worker.dead and worker.restarts < _MAX_RESTARTS:
            worker.restart()
        if worker.dead and worker.late < worker.restarts + 1:
            # The student's code ended the worker (a crash, os._exit, a reply refused, a limit)
            # more often than it may: what is left is not checked, and fails, as in a kernel
            # that died. (Were it inconclusive, a correctness test would keep the kernel's
            # score, which a rebound assert_same can fake.)
            raise StudentCodeError(f"not checked: your code ended the worker {worker.restarts + 1} times, the "
                                   f"last time: {worker.dead}")
        if worker.dead:  # only ever too slow: a busy machine's share of the blame is possible
            raise _Inconclusive(f"the worker was restarted {worker.restarts} times already")
        if blocked:
            not_data = True
            raise _Inconclusive(f"{', '.join(sorted(blocked))} cannot be brought out of your "
                                "kernel to be checked")
        with _quiet():
            value = _run_cell(cell["source"], ns)
        outcome = (_cell_score(value, points), "passed", True)
    except grading.UnreliableMeasurement as exc:
        # The same rule as in the kernel, and stored as what it is: a refusal (the
        # instructor's inputs are too small to time), never graded by the other side.
        outcome = (0.0, f"refused: {exc}", True)
        refused = True
    except _Inconclusive as exc:
        outcome = (0.0, f"could not be verified: {exc}", False)
    except _Untransportable as exc:
        outcome = (0.0, str(exc), perf)
        not_data = True
    except NameError as exc:
        name = getattr(exc, "name", None)
        stopped = f" ({worker.load_stopped})" if worker.load_stopped else ""
        outcome = ((0.0, f"{name} is not defined in your notebook{stopped}", True) if name in answers
                   else (0.0, f"could not be verified: {exc}", False))
    except Exception as exc:
        outcome = (0.0, f"{type(exc).__name__}: {str(exc)[:600]}", True)
    if not (grade_id and cell["graded"]):
        return None
    parts = [] if outcome[1] == "passed" and _MEASUREMENTS else [outcome[1]]
    detail = "; ".join(parts + [m for m in _MEASUREMENTS if m not in outcome[1]])
    return CellVerdict(grade_id, min(points, max(0.0, outcome[0])), points, detail, outcome[2],
                       _RATIOS[-1] if _RATIOS else None, refused, not_data and not outcome[2],
                       undecided=bool(_UNDECIDED) and outcome[2] and not refused)


def _bind_answers(worker: _Worker, answers: set[str], ns: dict) -> set[str]:
    """Bind the student's answers in ``ns``: functions as proxies, values as copies.

    Returns the names whose values cannot be brought out of the worker as plain data.
    """
    unreadable = set()
    described = worker.request("describe", sorted(answers))
    if not isinstance(described, dict):
        raise StudentCodeError("the worker sent a malformed reply")
    for name, kind in described.items():
        if name not in answers:
            continue
        if kind == "function":
            ns[name] = _Remote(worker, name)
        elif kind == "object":
            unreadable.add(name)
        elif kind == "value":
            try:
                ns[name] = worker.request("value", name)
            except _Untransportable:
                unreadable.add(name)
            except StudentCodeError:
                pass
    return unreadable


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names a cell reads, names it binds at top level), from its syntax."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set()
    loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    defines: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defines.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defines |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            defines |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return loads, defines


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # Instructor code may print; the verifier's stdout carries only its report.
    import warnings

    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def _removed(folder: str) -> Iterator[None]:
    try:
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _share(folder: str) -> None:
    """Make what the instructor's cells wrote under ``folder`` readable by the sandbox's uid.

    ``tempfile.mkdtemp`` makes 0700 folders; the worker runs as another user and gets the
    folder read-only, so it can read the inputs but change nothing.
    """
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, name), 0o644)


def _judge_main() -> int:
    # Everything the verifier needs is imported before it moves into the student's folder
    # (where instructor cells may read the notebook's data files by relative path), and
    # before it reads its job: a verifier started ahead (StartedVerifier) imports meanwhile.
    import numpy  # noqa: F401
    import pandas  # noqa: F401

    from course_lib.timing import steady_allocator

    steady_allocator()  # the reference process is forked from here and keeps the setting

    from course_lib import complexity, grading, timing  # noqa: F401

    job = json.loads(sys.stdin.read())
    if job.get("log_to_job"):
        sys.stderr.flush()
        log = os.open(job["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log, 2)
        os.close(log)
    report = sys.stdout
    sys.stdout = sys.stderr
    if job.get("tmpdir"):
        os.environ["TMPDIR"] = tempfile.tempdir = job["tmpdir"]
    os.chdir(job["cwd"])
    verdicts = _judge(job)
    report.write(json.dumps({"verdicts": verdicts, "profile": _PROFILE}) + "\n")
    report.flush()
    return 0


# --- notebook helpers ----------------------------------------------------------------------

def _grade_id(cell: Any) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _points(cell: Any) -> float:
    return float(cell.metadata.get("nbgrader", {}).get("points", 0) or 0)


def _locked(cell: Any) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("locked") or meta.get("grade"))


def _solution(cell: Any) -> bool:
    return bool(cell.metadata.get("nbgrader", {}).get("solution"))


def _is_test(cell: Any) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def _answer_names(nb: Any) -> set[str]:
    """Names the instructor's answer cells define: what the tests may ask of the student."""
    names: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "code" and _solution(cell):
            names |= _names(re.sub(r"^\s*[%!].*$", "", cell.source, flags=re.M))[1]
    return names
