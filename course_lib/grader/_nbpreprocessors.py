"""The course's versions of three nbgrader preprocessors (wired in by ``nbgrader_config.py``).

``CourseExecute``
    nbgrader's ``Execute``, but a kernel that dies (``os._exit``, a segfault) or stops
    answering no longer fails the whole submission: the cells that ran keep their outputs,
    every later code cell gets an error output and so scores zero.
``RestoreMissingCells``
    nbgrader's ``OverwriteCells`` with ``add_missing_cells``, but a restored grade cell
    fails instead of re-running the test (a deleted grade cell scores zero), it is placed
    robustly, and what was restored or overwritten is recorded in the notebook's metadata.
``HideHiddenTests``
    for feedback: removes the ``BEGIN/END HIDDEN TESTS`` regions from the cells and the
    hidden cells' own frames from their tracebacks, so feedback never shows hidden-test source.

A test cell marked as graded outside the kernel only
(:func:`course_lib.grader.common.graded_outside`) is not run in the student's kernel while
grading: the check outside the kernel alone decides it (:mod:`course_lib.grader.verify`).

What they record goes to ``nb.metadata["measure_first"]`` (see :data:`METADATA_KEY`), where
:mod:`course_lib.grader.execute` reads it back from the autograded notebook.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
import time
from typing import Any

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat.notebooknode import NotebookNode
from nbformat.v4 import new_output
from nbgrader import utils as nbutils
from nbgrader.preprocessors import ClearHiddenTests, Execute, NbGraderPreprocessor, OverwriteCells
from traitlets import Bool, Enum, Float, Integer, List, Unicode

from course_lib.grader import _parked
from course_lib.grader.common import GRADED_OUTSIDE_NOTE, graded_outside
from course_lib.grader.verification import StartedVerifier

__all__ = [
    "METADATA_KEY",
    "KERNEL_DIED",
    "NOT_RUN",
    "CELL_TIMEOUT",
    "CourseExecute",
    "CapOutputs",
    "RestoreMissingCells",
    "HideHiddenTests",
]

METADATA_KEY = "measure_first"
"""Notebook metadata key under which these preprocessors record what they did."""

KERNEL_DIED = "KernelDied"
"""``ename`` of the error output given to the cell during which the kernel died."""

NOT_RUN = "CellNotRun"
"""``ename`` of the error output given to the cells after a dead or unresponsive kernel."""

CELL_TIMEOUT = "CellTimeoutError"
"""``ename`` nbgrader gives a cell that ran past the timeout."""


_KERNEL_OUTPUT_CAP = "--IPKernelApp.extensions=course_lib.grader._kernel_output"


class CourseExecute(Execute):
    """nbgrader's ``Execute``; a dead or hung kernel costs the cells after it, not the submission.

    nbgrader's own ``Execute`` lets ``DeadKernelError`` escape, and nbgrader then drops the
    whole submission (the autograded notebook is deleted and no grade is saved). Here the cell
    that was running when the kernel died gets a ``KernelDied`` error, and every later code
    cell a ``CellNotRun`` error. Without those errors nbgrader would give a grade cell that
    never ran full marks, since it scores a code cell with no error output as passed.

    After a timeout the kernel is interrupted, as nbgrader does, and the next cells run. If the
    interrupted kernel does not report being idle within ``iopub_timeout`` seconds (student code
    that swallows ``KeyboardInterrupt``), nbclient would raise and nbgrader drop the submission;
    here the kernel is shut down and the remaining cells are marked as not run (instead of each
    waiting for its own timeout behind the runaway cell).

    Two limits apply to the whole kernel, watched from the grader's process (student code
    cannot lift them): ``memory_limit``, the resident memory of the kernel and every process
    it started, and ``notebook_timeout``, the seconds the whole notebook may run. A kernel
    past either is killed; the cells that ran are graded, the rest score zero, and the
    reason is recorded (``kernel_stopped.kind`` is ``memory-limit``, ``disk-quota`` or ``notebook-timeout``).

    With ``sandboxed`` (what ``course grade`` sets), the kernel runs in a
    :class:`course_lib.grader.sandbox.Sandbox`: the notebook's folder is copied into a
    private scratch folder (its working folder: relative reads of the assignment's data
    files work, writes stay there), the only course path it sees is ``course_lib``
    (read-only), its environment is the sandbox's allow-list, it talks to nbclient over
    ``ipc`` sockets in a runtime folder bound into the sandbox, and every process it started
    (daemons included) is killed when the notebook ends. The memory limit then reads the
    whole sandbox's memory.
    """

    # Every output is collected by the time the kernel is shut down; waiting for a graceful
    # exit only costs most of a second per notebook.
    shutdown_kernel = Enum(["graceful", "immediate"], default_value="immediate").tag(config=True)

    kernel_log = Unicode(
        "", help="File that receives the kernel process's own stdout and stderr (default: inherited)."
    ).tag(config=True)

    async def async_start_new_kernel(self, **kwargs: Any) -> None:
        # A cell that prints hundreds of megabytes is cut inside the kernel too, so that the
        # kernel does not buffer and send what the grader would drop (see _kernel_output).
        if _KERNEL_OUTPUT_CAP not in self.extra_arguments:
            self.extra_arguments = [*self.extra_arguments, _KERNEL_OUTPUT_CAP]
        # The kernel process writes its own warnings (not the cells' output, which travels over
        # the kernel protocol) to the inherited stderr; while grading they belong in a log.
        link = getattr(self, "_link", None)
        if link is not None:  # the verifier's line, inherited through the sandbox (see park)
            kwargs["pass_fds"] = link.kernel_ends
        try:
            if not self.kernel_log:
                return await super().async_start_new_kernel(**kwargs)
            with open(self.kernel_log, "a", encoding="utf-8") as log:
                return await super().async_start_new_kernel(stdout=log, stderr=log, **kwargs)
        finally:
            if link is not None:
                link.started()

    memory_limit = Integer(
        0, help="Bytes of resident memory the kernel and its child processes may use (0: no limit)."
    ).tag(config=True)

    notebook_timeout = Integer(0, help="Seconds the whole notebook may run (0: no limit).").tag(config=True)

    watch_interval = Float(0.2, help="Seconds between two looks at the kernel's memory and time.").tag(config=True)

    sandboxed = Bool(False, help="Run the kernel in a bubblewrap sandbox (see the class docstring).").tag(config=True)

    sandbox_read_only = List(Unicode(), help="Further paths the sandboxed kernel may read.").tag(config=True)

    park = Bool(False, help="Keep a sandboxed kernel that ran every cell, answering the verifier as its "
                            "student worker (see course_lib.grader._parked); course grade sets it.").tag(config=True)

    # nbclient binds the sync wrapper to its own coroutine, so it must be rebound here.
    start_new_kernel = run_sync(async_start_new_kernel)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Without a sandbox too, the kernel talks over Unix sockets: no TCP warning in the logs.
        # (nbgrader's Execute sets AsyncKernelManager the same way, unless one is given.)
        from course_lib._kernels import IpcKernelManager

        kwargs.setdefault("kernel_manager_class", IpcKernelManager)
        super().__init__(*args, **kwargs)

    def preprocess(self, nb: NotebookNode, resources: Any = None, km: Any = None) -> tuple[NotebookNode, Any]:
        self._stopped: dict[str, Any] | None = None
        self._limit_hit: tuple[str, str] | None = None
        self._started = time.monotonic()
        self._timings: dict[str, Any] = {"cells": []}  # where the notebook's time went (course grade --profile)
        self._done = threading.Event()
        self._box = None
        self._link = None
        self._verifier: StartedVerifier | None = None
        self._kernel_host_pid: int | None = None
        base = None
        if self.sandboxed and km is None:
            base, self._box, km = self._sandboxed_kernel(nb, resources)
        watcher = threading.Thread(target=self._watch, name="kernel-limits", daemon=True)
        watcher.start()
        parked = False
        try:
            nb, resources = super().preprocess(nb, resources, km)
            parked = base is not None and self._park(base, resources)
        finally:
            self._done.set()
            watcher.join()
            if not parked:
                self._end_kernel(base)
        if self._stopped is not None:
            nb.metadata.setdefault(METADATA_KEY, {})["kernel_stopped"] = self._stopped
        self._timings["total"] = time.monotonic() - self._started
        nb.metadata.setdefault(METADATA_KEY, {})["timings"] = self._timings
        return nb, resources

    def _end_kernel(self, base: str | None) -> None:
        """The notebook's kernel ended, with every process its sandbox holds, and its folders removed."""
        try:
            if base is not None:
                self._release_kernel()
            if self._box is not None:
                # Every process the notebook started ends with it (setsid daemons too).
                try:
                    self._box.kill()
                finally:
                    self._box.close()
        finally:
            self._box = None
            self._close_link()
            if base is not None:
                shutil.rmtree(base, ignore_errors=True)

    def _close_link(self) -> None:
        """The verifier's line closed, and the verifier started for it ended: no kernel is parked."""
        if self._verifier is not None:
            self._verifier.discard()
            self._verifier = None
        if self._link is not None:
            self._link.close()
            self._link = None

    def _park(self, base: str, resources: Any) -> bool:
        """Hand the kernel, which ran every cell, to the verify stage as its worker; whether it was.

        One execute request makes it serve the verifier's line
        (:func:`course_lib.grader._student_worker.serve_kernel`); the client stops listening
        once the kernel took it. A kernel that stopped during the notebook, or that does not
        take the request within :data:`_PARK_SECONDS`, is ended as always (the verifier then
        starts a fresh worker).
        """
        meta = (resources or {}).get("nbgrader", {})
        key = (meta.get("student"), meta.get("assignment"), meta.get("notebook"))
        if (self._link is None or self._box is None or self._stopped is not None or self._limit_hit is not None
                or None in key or getattr(self, "kc", None) is None):
            return False
        pid = self._kernel_host_pid
        if pid is None or _kernel_pid(self._box, pid) != pid:
            return False
        rfd, wfd, results = self._link.kernel_ends
        code = f"import course_lib.grader._student_worker as _w; _w.serve_kernel({rfd}, {wfd}, {results})"
        try:
            handle = self._box.handle()  # before the request: a sandbox it cannot describe is not parked
            taken = run_sync(self._async_request_serving)(code)
        except Exception:  # noqa: BLE001 - not parked: ended as always
            taken = False
        if not taken:
            return False
        box, km, kc, link, verifier = self._box, self.km, self.kc, self._link, self._verifier
        kc.stop_channels()
        self.kc = self.km = None  # nbclient's: this kernel is no longer its to use or shut down
        self._box = self._link = self._verifier = None

        def end() -> None:
            try:
                box.kill()
            finally:
                box.close()
                link.close()
                with contextlib.suppress(Exception):
                    run_sync(_async_forget_kernel)(km)
                shutil.rmtree(base, ignore_errors=True)

        _parked.park(*key, _parked.ParkedKernel(link.grader_ends, pid, handle,
                                                os.path.join(base, "s"), end, verifier=verifier))
        return True

    async def _async_request_serving(self, code: str) -> bool:
        """Send ``code`` (silently) and wait until the kernel reports being busy with it."""
        msg_id = self.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        deadline = time.monotonic() + _PARK_SECONDS
        while time.monotonic() < deadline:
            try:
                msg = await ensure_async(self.kc.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic())))
            except Exception:  # noqa: BLE001 - queue.Empty: not taken in time
                return False
            if (msg.get("parent_header", {}).get("msg_id") == msg_id and msg.get("msg_type") == "status"
                    and msg.get("content", {}).get("execution_state") == "busy"):
                return True
        return False

    def _release_kernel(self) -> None:
        """Stop the client's channels and the manager's ZeroMQ context of a kernel made here.

        nbclient cleans up only the kernel managers it created itself. Left open, each graded
        notebook keeps a heartbeat thread and ZeroMQ I/O threads that retry the dead kernel's
        sockets for as long as the grader runs: with hundreds of notebooks, a core's worth
        of CPU charged to every later measurement in the process.
        """
        if getattr(self, "km", None) is None:
            return
        try:
            self._cleanup_kernel()
        except Exception as error:  # noqa: BLE001 - the sandbox is killed next in any case
            self.log.warning("could not shut the sandboxed kernel down cleanly: %s", error)
            kc = getattr(self, "kc", None)
            if kc is not None:
                kc.stop_channels()
            self.kc = self.km = None

    def _sandboxed_kernel(self, nb: NotebookNode, resources: Any) -> tuple[str, Any, Any]:
        """A scratch copy of the notebook's folder, a sandbox around it and a kernel manager in it."""
        from jupyter_client import AsyncKernelManager

        import course_lib
        from course_lib.grader.sandbox import ALLOWED_ENV, Limits, Sandbox

        folder = (resources or {}).get("metadata", {}).get("path") or os.getcwd()
        # Short: the kernel's Unix socket paths must stay under 107 bytes.
        base = tempfile.mkdtemp(prefix="cs-")
        scratch, runtime = os.path.join(base, "w"), os.path.join(base, "rt")
        # symlinks=True: a link the student sent stays a link (to a path the sandbox lacks).
        shutil.copytree(folder, scratch, symlinks=True)
        os.mkdir(runtime)
        shared: list[str] = []
        if self.park:
            # The verifier's temporary folder, should the kernel become its worker: the files
            # its instructor cells write there (a CSV to read) must be readable in here.
            shared.append(os.path.join(base, "s"))
            os.mkdir(shared[0])
            for folder_ in (base, shared[0]):
                os.chmod(folder_, 0o755)
            self._link = _parked.KernelLink()
            # The verifier that will use it starts now, as the kernel does: its imports take
            # the other core while no student code runs (0.6-0.8 s of every verify stage).
            self._verifier = StartedVerifier(self._link.grader_ends)
        env = {k: v for k, v in os.environ.items() if k in ALLOWED_ENV and k != "PATH"}
        box = Sandbox(scratch, read_only=[os.path.dirname(course_lib.__file__), *self.sandbox_read_only, *shared],
                      read_write=[runtime], env=env,
                      limits=Limits(memory=None, processes=256, tmpfs=self.memory_limit or Limits.tmpfs))
        try:
            box.__enter__()
            manager = box.kernel_manager_class(AsyncKernelManager)
            name = self.kernel_name or nb.metadata.get("kernelspec", {}).get("name") or "python3"
            km = manager(kernel_name=name, transport="ipc", ip=os.path.join(runtime, "k"),
                         connection_file=os.path.join(runtime, "kernel.json"), config=self.config)
        except BaseException:
            box.close()
            self._close_link()
            shutil.rmtree(base, ignore_errors=True)
            raise
        return base, box, km

    def _watch(self) -> None:
        """Kill the kernel's process tree once it is past the memory or the notebook time limit."""
        import psutil

        looks = 0
        while not self._done.wait(self.watch_interval):
            pid = getattr(getattr(getattr(self, "km", None), "provisioner", None), "pid", None)
            if pid is None or self._limit_hit is not None:
                continue
            box = self._box
            looks += 1
            try:
                if box is not None:
                    # The whole sandbox: a process that left the kernel's tree still counts, and
                    # so does what it holds in files (its tmpfs /tmp and /dev/shm, memory files).
                    resident, tree = box.memory_current(), []
                else:
                    kernel = psutil.Process(pid)
                    tree = [kernel, *kernel.children(recursive=True)]
                    resident = sum(_rss(p) for p in tree)
            except (psutil.Error, OSError):
                continue
            if self.memory_limit and resident > self.memory_limit:
                self._limit_hit = ("memory-limit", f"the kernel used {_fmt_mb(resident)} of memory, above "
                                                   f"the limit of {_fmt_mb(self.memory_limit)} (files in its "
                                                   "/tmp and memory files count)")
            elif box is not None and looks % 5 == 0 and _over_disk_quota(box):
                self._limit_hit = ("disk-quota", f"the notebook wrote more than {_fmt_mb(box.limits.disk)} into "
                                                 "its folder, above the disk quota")
            elif self.notebook_timeout and time.monotonic() - self._started > self.notebook_timeout:
                self._limit_hit = ("notebook-timeout", f"the notebook ran past its time limit of "
                                                       f"{self.notebook_timeout} s")
            else:
                continue
            if box is not None:
                try:
                    box.kill()
                except Exception:  # noqa: BLE001 - the kernel is also killed below, by nbclient's shutdown
                    pass
            for process in reversed(tree):
                try:
                    process.kill()
                except psutil.Error:
                    pass

    max_output_bytes = Integer(
        1_000_000, help="Bytes of stream and display output kept per cell while it runs (the rest is "
                        "dropped as it arrives; CapOutputs then cuts further)."
    ).tag(config=True)

    def output(self, outs: list, msg: dict, display_id: Any, cell_index: int) -> NotebookNode | None:
        # A cell printing 200 MB must not make the grader hold 200 MB, nor spend the iopub
        # timeout turning it into notebook outputs: past the cap, streams and displays are
        # dropped as they arrive. Errors and results always stay, and so does one piece of
        # stderr (it fails a test cell).
        kept = sum(_output_size(o) for o in outs)
        kind = msg["msg_type"]
        if kept < self.max_output_bytes or kind not in ("stream", "display_data", "update_display_data"):
            if kind == "stream" and kept + len(msg["content"].get("text", "")) > self.max_output_bytes:
                msg["content"]["text"] = msg["content"]["text"][: self.max_output_bytes - kept]
            return super().output(outs, msg, display_id, cell_index)
        if kind == "stream" and msg["content"].get("name") == "stderr" and not any(
                o.output_type == "stream" and o.name == "stderr" for o in outs):
            msg["content"]["text"] = msg["content"]["text"][:200]
            return super().output(outs, msg, display_id, cell_index)
        return None

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        if cell.cell_type != "code":
            return cell, resources
        if self._stopped is not None:
            cell.outputs = [_error_output(NOT_RUN, f"not run: {self._stopped['reason']} in an earlier cell")]
            cell.execution_count = None
            return cell, resources
        if self.notebook_timeout and time.monotonic() - self._started > self.notebook_timeout:
            self._limit_hit = self._limit_hit or ("notebook-timeout", f"the notebook ran past its time "
                                                                      f"limit of {self.notebook_timeout} s")
            self._stop(cell, index, self._limit_hit[1], self._limit_hit[0])
            cell.outputs = [_error_output(NOT_RUN, f"not run: {self._limit_hit[1]}")]
            cell.execution_count = None
            run_sync(self._async_shutdown_unresponsive)()
            return cell, resources
        if graded_outside(cell):
            # Decided by the check outside the kernel alone (see graded_outside); 0 seconds here.
            cell.outputs = [new_output("stream", name="stdout", text=GRADED_OUTSIDE_NOTE)]
            cell.execution_count = None
            self._timings["cells"].append([index, cell.metadata["nbgrader"].get("grade_id"), 0.0])
            return cell, resources
        began = time.monotonic()
        # Everything before the first cell ran is the sandbox and the kernel starting.
        self._timings.setdefault("kernel_start", began - self._started)
        if self._link is not None and self._kernel_host_pid is None and self._box is not None:
            # Found before any of the student's code ran, which could rename the kernel or
            # start a look-alike: the verifier reads this process's clocks in /proc.
            self._kernel_host_pid = _kernel_pid(self._box)
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            if self._limit_hit is not None:
                kind, reason = self._limit_hit
                self._stop(cell, index, reason, kind)
                cell.outputs.append(_error_output(KERNEL_DIED, f"stopped by the grader: {reason}; later cells "
                                                               "were not run and score zero"))
                return cell, self.resources
            self._stop(cell, index, "the kernel died")
            cell.outputs.append(_error_output(
                KERNEL_DIED,
                "the kernel died while this cell ran (for example os._exit, a crash or running "
                "out of memory); later cells were not run and score zero",
            ))
            return cell, self.resources
        except CellTimeoutError:
            # Interrupted after the timeout, the kernel never reported being idle again
            # (nbclient raises instead of recording the timeout in the cell).
            if not _has_error(cell, CELL_TIMEOUT):
                cell.outputs.append(_error_output(CELL_TIMEOUT, "the cell ran past the time limit and "
                                                  "ignored the interrupt"))
            self._stop(cell, index, "the kernel stopped answering", "kernel-unresponsive")
            run_sync(self._async_shutdown_unresponsive)()
            return cell, self.resources
        finally:
            self._timings["cells"].append([index, cell.metadata.get("nbgrader", {}).get("grade_id"),
                                           time.monotonic() - began])
        return cell, resources

    def _stop(self, cell: NotebookNode, index: int, reason: str, kind: str = "kernel-died") -> None:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        self._stopped = {"reason": reason, "kind": kind, "cell_index": index, "grade_id": grade_id}
        self.log.warning("%s in cell %s; the remaining cells are marked as not run", reason, grade_id or index)

    async def _async_shutdown_unresponsive(self) -> None:
        if self.km is not None and await ensure_async(self.km.is_alive()):
            await ensure_async(self.km.shutdown_kernel(now=True))


_PARK_SECONDS = 10.0  # for the kernel to take the request that parks it


def _kernel_pid(box: Any, known: int | None = None) -> int | None:
    """The host pid of the kernel's interpreter in ``box``, the one process there running it.

    Before the first cell only the kernel runs the interpreter (the wrappers that started it
    exec'd into it); ``known``: that pid, checked to be still the sandbox's interpreter.
    """
    import sys

    interpreter = os.path.realpath(sys.executable)
    pids = [known] if known is not None else box.processes()
    found = []
    for pid in pids:
        try:
            if os.path.realpath(os.readlink(f"/proc/{pid}/exe")) == interpreter and pid in box.processes():
                found.append(pid)
        except OSError:
            continue
    return found[0] if len(found) == 1 else None


async def _async_forget_kernel(km: Any) -> None:
    """What nbclient does after a notebook, for a kernel that is already dead: its manager's resources."""
    if await ensure_async(km.is_alive()):
        await ensure_async(km.shutdown_kernel(now=True))
    await ensure_async(km.cleanup_resources())


class CapOutputs(NbGraderPreprocessor):
    """Cut what a cell's outputs may put into the autograded notebook and the feedback.

    Each code cell keeps at most ``max_cell_bytes`` of output and the whole notebook at
    most ``max_notebook_bytes`` (sizes of the text and of the encoded images, in bytes). A cut
    is marked where it happened, so that the student sees it. What decides a grade survives
    every cut: an error output keeps its name and message (its traceback is shortened), a
    ``stderr`` stream is shortened but never emptied (it fails a test cell), and a short
    ``text/plain`` result (a partial-credit score) is always kept.

    Examples
    --------
    >>> from nbformat.v4 import new_code_cell, new_notebook, new_output
    >>> cell = new_code_cell(outputs=[new_output("stream", name="stdout", text="x" * 300)])
    >>> nb, _ = CapOutputs(max_cell_bytes=100).preprocess(new_notebook(cells=[cell]), {})
    >>> len(cell.outputs[0].text), "cut by the grader" in cell.outputs[-1].text
    (100, True)
    """

    max_cell_bytes = Integer(100_000, help="Bytes of output one code cell may keep.").tag(config=True)
    max_notebook_bytes = Integer(2_000_000, help="Bytes of output the whole notebook may keep.").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        self._left = self.max_notebook_bytes
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, cell_index: int) -> tuple[NotebookNode, dict]:
        if cell.cell_type != "code":
            return cell, resources
        budget = min(self.max_cell_bytes, max(self._left, 0))
        total = sum(_output_size(o) for o in cell.outputs)
        if total <= budget:
            self._left -= total
            return cell, resources
        kept, used, cut = [], 0, False
        for output in cell.outputs:
            size = _output_size(output)
            if not cut and used + size <= budget:
                kept.append(output)
                used += size
                continue
            room = 0 if cut else budget - used
            cut = True
            plain = output.get("data", {}).get("text/plain", "")
            if output.output_type == "stream" and room > 0:
                output.text = output.text[:room]
                kept.append(output)
            elif _decides_grade(output):
                kept.append(_shortened(output))
            elif output.output_type == "execute_result" and len(plain) <= 1000:
                output.data = {"text/plain": plain}  # a partial-credit cell's score
                kept.append(output)
            used = budget
        kept.append(new_output("stream", name="stdout", text=(
            f"\n[output cut by the grader: this cell's outputs came to {total:,} bytes; at most "
            f"{budget:,} are kept]\n")))
        cell.outputs = kept
        self._left -= sum(_output_size(o) for o in cell.outputs)
        return cell, resources


def _output_size(output: NotebookNode) -> int:
    if output.output_type == "stream":
        return len(output.text.encode("utf-8", "replace"))
    if output.output_type == "error":
        return sum(len(t) for t in output.traceback) + len(output.ename) + len(output.evalue)
    return sum(len(v) if isinstance(v, str) else len(str(v)) for v in output.get("data", {}).values())


def _decides_grade(output: NotebookNode) -> bool:
    return output.output_type == "error" or (output.output_type == "stream" and output.name == "stderr")


def _shortened(output: NotebookNode) -> NotebookNode:
    if output.output_type == "error":
        return new_output("error", ename=output.ename, evalue=output.evalue[:1000],
                          traceback=[f"{output.ename}: {output.evalue[:1000]}", "[traceback cut by the grader]"])
    return new_output("stream", name="stderr", text=output.text[:200] + "\n[output cut by the grader]\n")


class RestoreMissingCells(OverwriteCells):
    """``OverwriteCells`` that puts deleted grade cells back as cells that score zero.

    nbgrader's ``add_missing_cells`` restores a deleted grade cell *and runs it*, so deleting
    a test could cost nothing; here the restored cell raises an ``AssertionError`` that says
    the cell was missing (its test source is not put back, so feedback cannot show it). Cells are
    placed after the nearest earlier cell of the source notebook that is still present (nbgrader's
    own placement assumes that cell is a solution or grade cell and fails otherwise).

    Recorded in ``nb.metadata["measure_first"]``: ``restored_cells`` (grade ids put back) and
    ``overwritten_cells`` (read-only cells whose source, type, points or lock the student changed,
    restored from the gradebook).
    """

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        self._restored: list[str] = []
        self._overwritten: list[str] = []
        nb, resources = super().preprocess(nb, resources)
        record = nb.metadata.setdefault(METADATA_KEY, {})
        record["restored_cells"] = self._restored
        record["overwritten_cells"] = sorted(set(self._overwritten))
        return nb, resources

    def preprocess_cell(self, cell: NotebookNode, resources: dict, cell_index: int) -> tuple[NotebookNode, dict]:
        # Every read-only cell with hidden tests differs from the gradebook (the student never
        # had the hidden part), so a changed source counts as an edit only when the cell no
        # longer matches the checksum it was released with.
        meta = cell.metadata.get("nbgrader", {})
        if "grade_id" in meta and nbutils.is_locked(cell) and "checksum" in meta \
                and nbutils.compute_checksum(cell) != meta["checksum"]:
            self._overwritten.append(meta["grade_id"])
        return super().preprocess_cell(cell, resources, cell_index)

    def report_change(self, name: str, attr: str, old: Any, new: Any) -> None:
        if attr == "checksum" and name not in self._overwritten:
            # The cell is as released: only its hidden tests, stripped from the release, are
            # being put back. Every honest submission does this; not worth a warning.
            self.log.debug("Cell %s: hidden tests put back from the gradebook", name)
            return
        super().report_change(name, attr, old, new)
        if attr != "checksum":  # type, points or lock changed: always the student's doing
            self._overwritten.append(name)

    def add_missing_grade_cells(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = [cell.name for cell in source_nb.source_cells]
        grade_cells = {cell.name: cell for cell in source_nb.grade_cells}
        solution_ids = {cell.name for cell in source_nb.solution_cells}
        for grade_id in sorted(grade_cells, key=lambda name: order.index(name) if name in order else -1):
            if grade_id in _grade_ids(nb):
                continue
            self.log.warning("Missing grade cell %s: putting it back; it scores zero", grade_id)
            source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            cell = self.missing_cell_transform(source_cell, grade_cells[grade_id].max_score,
                                               is_solution=grade_id in solution_ids)
            if cell.cell_type == "code":
                cell.source = _missing_cell_source(grade_id)
            cell.id = _free_cell_id(nb, grade_id)
            nb.cells.insert(_insert_position(nb, order, grade_id), cell)
            self._restored.append(grade_id)
        return nb, resources


class HideHiddenTests(ClearHiddenTests):
    """Feedback preprocessor: hidden-test source never reaches the student.

    Each ``BEGIN/END HIDDEN TESTS`` region becomes one comment line, and in the error outputs
    of those cells the frames that show the cell's own lines are replaced by a one-line note.
    From the first cell with hidden tests on, what the cells printed is withheld
    (:func:`course_lib.grader.feedback.withhold_after_hidden_tests`): the student's code ran
    beside the hidden tests and could have printed them.
    """

    placeholder = "# (hidden tests: not shown)"

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        # What cells printed once a hidden test had run in the kernel may quote it.
        from course_lib.grader.feedback import withhold_after_hidden_tests

        withhold_after_hidden_tests(nb)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, cell_index: int) -> tuple[NotebookNode, dict]:
        if cell.cell_type != "code" or self.begin_test_delimeter not in cell.source:
            return cell, resources
        cell.source = _replace_regions(cell.source, self.begin_test_delimeter, self.end_test_delimeter,
                                       self.placeholder)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output.traceback = _hide_own_frames(output.get("traceback", []), cell.get("execution_count"))
        return cell, resources


# --- private helpers -------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_HIDDEN_FRAME = "(a line of the hidden tests: not shown)"


def _rss(process: Any) -> int:
    try:
        return process.memory_info().rss
    except Exception:  # the process ended between listing and reading: it uses nothing
        return 0


def _over_disk_quota(box: Any) -> bool:
    """Whether the sandbox's writable folders hold more than its disk quota (a walk, so not every look)."""
    try:
        return bool(box.limits.disk) and box.disk_used() > box.limits.disk
    except OSError:
        return False


def _fmt_mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def _error_output(ename: str, evalue: str) -> NotebookNode:
    return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def _has_error(cell: NotebookNode, ename: str) -> bool:
    return any(o.get("output_type") == "error" and o.get("ename") == ename for o in cell.get("outputs", []))


def _grade_ids(nb: NotebookNode) -> list[str]:
    return [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells]


def _free_cell_id(nb: NotebookNode, grade_id: str) -> str:
    """A cell id (nbformat 4.5 requires one) that no other cell of ``nb`` uses."""
    taken = {cell.get("id") for cell in nb.cells}
    base = re.sub(r"[^A-Za-z0-9_-]", "-", grade_id)[:56] or "restored"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _insert_position(nb: NotebookNode, order: list[str], grade_id: str) -> int:
    """Just after the nearest cell that precedes ``grade_id`` in the source and is still present."""
    present = _grade_ids(nb)
    earlier = order[: order.index(grade_id)] if grade_id in order else []
    for name in reversed(earlier):
        if name in present:
            return present.index(name) + 1
    return 0


def _missing_cell_source(grade_id: str) -> str:
    message = (f"grade cell {grade_id!r} was missing from the submission; it was put back "
               "by the grader and scores zero")
    return f"# This cell was missing from the submission and was put back when grading.\n" \
           f"raise AssertionError({message!r})"


def _replace_regions(source: str, begin: str, end: str, placeholder: str) -> str:
    lines, inside = [], False
    for line in source.split("\n"):
        if begin in line:
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            lines.append(indent + placeholder)
        elif end in line:
            inside = False
        elif not inside:
            lines.append(line)
    return "\n".join(lines)


def _hide_own_frames(traceback: list[str], execution_count: int | None) -> list[str]:
    """Drop the frames that quote this cell's lines (IPython labels them ``Cell In[N], line L``)."""
    if execution_count is None:
        own = re.compile(r"^\s*(Cell In\[\d*\]|Input In \[\d*\]|<ipython-input-)")
    else:
        own = re.compile(rf"^\s*(Cell In\[{execution_count}\]|Input In \[{execution_count}\]"
                         rf"|<ipython-input-{execution_count}-)")
    kept = []
    for frame in traceback:
        if own.match(_ANSI.sub("", frame)):
            if not kept or kept[-1] != _HIDDEN_FRAME:
                kept.append(_HIDDEN_FRAME)
        else:
            kept.append(frame)
    return kept
