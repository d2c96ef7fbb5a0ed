"""Timed calls across processes: a batch in the student worker, the grader's reference in its own.

The verifier (:mod:`course_lib.grader.verification`) and its twin for ``parallel_points``
(:mod:`course_lib.grader._remote_parallel`) time the student's function in the student
worker and the grader's reference in a process forked for it, the two driven alike: the
batch's inputs staged before the clock starts (:func:`_stage`), one round trip per batch,
results written into a memory file before the answer, the time to write them not billed
(:func:`_write_seconds`), and waits for a core taken out (:class:`_Waits`). Both modules
import these from here; neither imports the other's internals, so the verifier can use its
twin without a circle.

``worker`` below is the verifier's student worker (``verification._Worker``): what is used
of it is ``send``, ``pause``, ``resume``, ``read_results``, ``pid``, ``box``, ``threads``
and ``timeout``.

Examples
--------
>>> _fmt_seconds(0.0123), _fmt_seconds(2.5)
('12.3 ms', '2.50 s')
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from course_lib.grader import _data
from course_lib.grader._student_worker import (Inputs, _write_results, pack_inputs, read_frame, receive_inputs,
                                              send_inputs, write_frame)

__all__: list[str] = []  # the verifier's plumbing: verification and _remote_parallel import the private names

class StudentCodeError(Exception):
    """The student's code failed while being verified (raised, crashed, ran too long, sent junk)."""


class _Untransportable(StudentCodeError):
    """A result that is not plain data: wrong for a speed test, unverifiable for other tests."""


class _Inconclusive(Exception):
    """The grader could not measure; the in-kernel verdict stands."""


_MAX_RESULT_BYTES = 2**29  # 512 MiB: a reply or a batch's results, held in the grader's memory
_MAX_DECODED_BYTES = 2**29  # what reading one reply may allocate, estimated before allocating (_data.loads)
_CHILD_CPU_SLACK = 0.02  # seconds: two clock ticks of /proc/PID/stat
_OTHERS_SLACK = 0.002  # seconds of other processes' CPU in a timed batch that is rounding, not work


def _reply(data: bytes) -> Any:
    try:
        reply = _data.loads(data, max_bytes=_MAX_RESULT_BYTES, max_decoded=_MAX_DECODED_BYTES)
    except _data.NotData as exc:
        raise _Untransportable(f"your function's result could not be read ({exc})") from None
    if not isinstance(reply, tuple) or not reply or reply[0] not in ("ok", "error", "notdata"):
        raise StudentCodeError("the worker sent a malformed reply")
    if reply[0] == "notdata":
        raise _Untransportable(f"your function returned something that is not plain data ({reply[1]})")
    if reply[0] == "error":
        raise StudentCodeError(f"your code raised {reply[1]}: {reply[2]}")
    return reply[1]


def _pack(inputs: list) -> Inputs:
    """A batch's inputs ready to stage; a test's own objects that cannot travel are inconclusive."""
    try:
        return pack_inputs(inputs)
    except Exception as exc:
        raise _Inconclusive(f"the inputs cannot be sent to your code ({type(exc).__name__}: {exc})") from None


def _stage(worker: Any, payload: Inputs, honest: float | None = None) -> float:
    """Send a batch's pickled inputs to the worker; return the CPU seconds to bill for it.

    The worker unpickles the inputs before any clock starts. The CPU that its whole sandbox
    spends meanwhile (every process, children reaped or not: a helper forked to compute the
    answers while the inputs arrive is counted) beyond what an honest process spends
    receiving the same bytes (``honest``: the reference process's CPU for the same staging,
    read from the kernel's accounting) is work smuggled into the staging step, and is billed
    to the batch. Without ``honest``, this process's own cost of unpickling the bytes stands
    in; it misses the page faults of a process that keeps the inputs, so it is only used for
    single calls. Staging is bounded in time too (:func:`_stage_seconds`): past it the
    worker is killed, as for a call past its time limit.
    """
    before, own = _sandbox_cpu(worker), time.thread_time()
    header = pickle.dumps(("stage", payload.data, payload.sizes),
                          protocol=pickle.HIGHEST_PROTOCOL)
    _reply(worker.send(header, seconds=_stage_seconds(payload.nbytes, worker.timeout), inputs=payload))
    own = time.thread_time() - own  # writing into the pipe costs about what reading from it does
    staging = _sandbox_cpu(worker) - before
    if honest is None:
        t0 = time.thread_time()
        pickle.loads(payload.data, buffers=[bytearray(b) for b in payload.buffers])  # a copy, as the worker reads
        honest = own + time.thread_time() - t0
    return max(0.0, staging - 1.5 * honest - 0.002)


def _stage_seconds(nbytes: int, timeout: float) -> float:
    """Wall seconds a worker may take to receive ``nbytes`` of inputs: 2 s plus 50 ms a MiB.

    Staging only copies bytes into the worker and unpickles them; nothing in it needs to
    wait. Never more than the call's own time limit.
    """
    return min(float(timeout), 2.0 + 0.05 * nbytes / 2**20)


def _sandbox_cpu(worker: Any) -> float:
    """CPU seconds of everything in the worker's sandbox so far (else of the worker process)."""
    if worker.box is not None:
        try:
            return worker.box.cpu_time()
        except OSError:
            raise _Inconclusive("the sandbox's CPU time cannot be read on this system") from None
    return _cpu_seconds(worker.pid)


def _run_batch(worker: Any, name: str | None, whole_sandbox: bool = False) -> tuple[float, float, Any]:
    """(seconds to bill, CPU seconds, outcome) of one timed batch in the student worker.

    The verifier's clock runs from the request to the answer; the worker has written its
    results into the results file before answering, and is stopped the moment the answer
    arrives, so background work cannot touch them afterwards. The time this process needs
    to pickle and write the same results is subtracted: moving data costs the student
    nothing. CPU that other processes of the sandbox spent during the batch (a helper
    computing half the work on another core) is added to its time, so work spread over
    processes is billed as the work it is. ``name`` None runs the empty candidate (the
    round trip alone). ``whole_sandbox`` (scaling): the CPU figure is the whole sandbox's.
    """
    pid = worker.pid
    message = pickle.dumps(("batch", name), protocol=pickle.HIGHEST_PROTOCOL)
    box = worker.box
    box_before = box.cpu_time() if box is not None else 0.0
    before = _cpu_seconds(pid)
    waits = _Waits(pid)
    t0 = time.perf_counter()
    raw = worker.send(message)
    wall = time.perf_counter() - t0
    worker.pause()  # background work cannot touch the results from here on
    try:
        cpu = _cpu_seconds(pid) - before
        wall = waits.discount(wall, cpu, worker.threads or 1)
        # Everything in the sandbox, not only the worker (a child's time reaches its reaper's
        # accounts when it is reaped). Without a cgroup, reaped children tick every 10 ms,
        # so less than that more than the worker's own (ns) figure is rounding, not a child.
        others = max(0.0, box.cpu_time() - box_before - cpu) if box is not None else 0.0
        if whole_sandbox and others > _CHILD_CPU_SLACK:
            cpu += others
        elif not whole_sandbox and others > _OTHERS_SLACK:
            wall += others
        _reply(raw)
        data = worker.read_results()
    finally:
        worker.resume()
    outcome = _reply(data) if data else None
    if not isinstance(outcome, list):
        raise StudentCodeError("the worker sent malformed results")
    transport = _write_seconds(outcome)
    if whole_sandbox:
        # A scaling measurement keeps the cost of writing the result: it grows with the
        # result, not faster than the work that made it, and subtracting an estimate of it
        # from a call of similar cost left noise that sometimes went below zero.
        return max(wall - transport, 1e-7), max(cpu, 1e-7), outcome
    return max(wall - transport, 1e-7), max(cpu - transport, 1e-7), outcome


def _write_seconds(obj: Any) -> float:
    """What writing ``obj`` as data into a memory file costs this process (the worker did the same).

    CPU time of this thread, not wall time: a preemption of the verifier while it writes
    is not the student's saving, and the subtraction applies to both of the worker's
    readings (wall and CPU).

    The write is the worker's own (:func:`_student_worker._write_results`: over what the
    file holds, then cut to length), into a file that already holds the same data, as the
    worker's holds its last batch's results: after one untimed write, the faster of two
    timed ones (an estimate under the worker's cost is billed, never forgiven). A single
    write into a new file on the verifier's trimmed heap (then through a joined copy of
    the whole) faulted in every page of a 32 MB result and came to 29-39 ms, three times
    what the worker spent; taken out of a batch of real work it left the clock's floor
    and a speed-up of millions (December 2026).
    """
    fd = os.memfd_create("course-own", 0)
    try:
        _write_results(fd, ("ok", obj))  # untimed: the file and the pages as the worker has them
        return min(_timed_write(fd, obj), _timed_write(fd, obj))
    except Exception:  # noqa: BLE001 - nothing to subtract if it cannot be written here either
        return 0.0
    finally:
        os.close(fd)


def _timed_write(fd: int, obj: Any) -> float:
    t0 = time.thread_time()
    _write_results(fd, ("ok", obj))
    return time.thread_time() - t0


def _timed_reference(baseline: Callable, inputs: list[tuple], worker: Any) -> tuple[float, list]:
    """Seconds for the reference's batch, timed here while the worker is stopped; its results."""
    import gc

    results: list[Any] = [None] * len(inputs)
    worker.pause()
    enabled = gc.isenabled()
    gc.disable()  # as in the worker and in compare
    try:
        t0 = time.perf_counter()
        for i, args in enumerate(inputs):
            results[i] = baseline(*args)
        seconds = time.perf_counter() - t0
    finally:
        if enabled:
            gc.enable()
        worker.resume()
    return seconds, results


class _Waits:
    """Time a batch spent waiting for a core, to take out of its wall time.

    Timing across processes adds what timing in one process never sees: the worker has to
    be woken for the batch and the verifier for the answer, and on a busy machine each
    waits on the run queue behind other processes for a few milliseconds. That is other
    processes' load, not the code's cost, and it would weigh most on the shorter side of a
    round. The kernel counts it per thread (the second field of ``schedstat``, run_delay):
    the wait of the process's main thread and of this thread during the batch is
    subtracted, for the student's batches and the reference's alike.

    What is left is never less than the CPU the process used, spread over the threads it
    was allowed: a main thread kept waiting on purpose while helper threads compute has its
    wait forgiven, but not their work. And a wait can be over-counted: the kernel books a
    thread's run-queue delay when the wait ends, so a wait that began before the batch (a
    worker thawed, then kept off its core) lands inside it. Beside a busy competitor on 2
    cores, a batch's waits plus its CPU often came to more than its wall time (113 ms wall,
    74 ms waited, 39 ms CPU). An earlier rule that charged the whole wall time whenever that
    happened measured week 1's honest ``.loc`` answer at 80-110x in some runs and 171-197x
    in others (in process 193-196x); with the CPU as the floor, 171-182x in three runs at
    load 4-6 (December 2026).
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.theirs = _run_delay(f"/proc/{pid}/task/{pid}/schedstat")
        self.mine = _run_delay("/proc/thread-self/schedstat")

    def discount(self, wall: float, cpu: float, threads: int) -> float:
        theirs = _run_delay(f"/proc/{self.pid}/task/{self.pid}/schedstat") - self.theirs
        mine = _run_delay("/proc/thread-self/schedstat") - self.mine
        waited = max(0.0, theirs) + max(0.0, mine)
        if waited <= 0:
            return wall
        return min(wall, max(wall - waited, cpu / max(threads, 1)))


def _run_delay(path: str) -> float:
    try:
        with open(path) as fh:
            return int(fh.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


class _ReferenceProcess:
    """The grader's reference, timed in a process of its own, the same way as the student's.

    Forked from the verifier when a speed cell starts measuring (it inherits the reference
    function and the thread settings; it runs no student code), and driven exactly as the
    student worker is: the batch's inputs staged before the clock, one round trip per batch,
    results written into a memory file before the answer. Both sides then pay the same
    round trip and get the same treatment from the scheduler. Timing the reference inside
    the verifier, which sleeps while the worker runs and so is favoured when it wakes,
    measured the student's answers up to 3-4x slower than ``compare`` did on a loaded machine.
    """

    def __init__(self, baseline: Callable) -> None:
        to_r, self._w = os.pipe()
        self._r, from_w = os.pipe()
        self.results_fd = os.memfd_create("course-reference", 0)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: serve batches until the verifier closes the pipe
            code = 1
            try:
                os.close(self._w)
                os.close(self._r)
                _serve_reference(to_r, from_w, self.results_fd, baseline)
                code = 0
            finally:
                os._exit(code)
        os.close(to_r)
        os.close(from_w)
        self.pid = pid

    def stage(self, payload: Inputs) -> float:
        """Stage the inputs; return the CPU seconds the reference process spent receiving them.

        Its garbage collection of the last batch's inputs (which it reports) is left out:
        the worker does not collect there, and 60 ms of the verifier's inherited heap counted
        as "receiving" let a student's worker do 90 ms of work per batch unbilled.
        """
        before = _cpu_seconds(self.pid)
        header = b"stage " + pickle.dumps((payload.data, payload.sizes),
                                          protocol=pickle.HIGHEST_PROTOCOL)
        send_inputs(self._w, header, payload)
        answer = read_frame(self._r)
        if not answer.startswith(b"ok "):
            raise RuntimeError("the reference process could not stage its inputs")
        return max(0.0, _cpu_seconds(self.pid) - before - int(answer[3:]) / 1e9)

    def batch(self, calls: int, threads: int, warm_on: int | None = None, warm: bool = True) -> tuple[float, list]:
        """(seconds per batch, results) of ``calls`` timed calls on the first staged inputs.

        ``warm_on``: the staged input the untimed warming call takes (default the last); its
        result is kept in :attr:`warmed` as ``(index, result)``, a reference result the
        verifier then need not compute again to check the student's result on that input.
        ``warm=False``: no warming call (the caller judged its few milliseconds negligible).
        """
        # A process that has slept while the other side ran starts its next call slower
        # (measured: a 12 ms loop reference took 14 ms per call cold, 12.4-12.8 after one
        # untimed call, in process 13.0-13.4; a 0.53 s pandas reference 2.7% slower cold,
        # median of 40 paired rounds): compare runs both sides in one busy process, so the
        # reference is warmed before its clock starts. Its input is one the timed calls
        # reach last or not at all.
        self.warmed = None
        if warm:
            write_frame(self._w, b"warm" if warm_on is None else b"warm %d" % warm_on)
            if read_frame(self._r) != b"ok":
                raise RuntimeError("the reference process could not warm up")
            if warm_on is not None:
                self.warmed = (warm_on, self.results()[0])
        before = _cpu_seconds(self.pid)
        waits = _Waits(self.pid)
        t0 = time.perf_counter()
        write_frame(self._w, b"batch %d" % calls)
        answer = read_frame(self._r)
        seconds = time.perf_counter() - t0
        seconds = waits.discount(seconds, _cpu_seconds(self.pid) - before, threads)
        results = self.results(answer)
        return max(seconds - _write_seconds(results), 1e-7), results

    def results(self, answer: bytes = b"ok") -> list:
        """The results of the last call or batch, read from the results file (written as the worker writes)."""
        outcome = _data.loads(os.pread(self.results_fd, os.fstat(self.results_fd).st_size, 0))
        if answer != b"ok" or outcome[0] != "ok":
            raise RuntimeError(f"the reference failed: {outcome[1:]}")
        return outcome[1]

    def close(self) -> None:
        if getattr(self, "_watching", None) is not None:
            self._watching.set()
        for fd in (self._w, self._r, self.results_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(self.pid, 0)


def _serve_reference(rfd: int, wfd: int, results_fd: int, baseline: Callable) -> None:
    import gc

    from course_lib.timing import warm_heap

    # The verifier's heap, inherited at the fork (pandas, NumPy, the instructor's cells), is
    # set aside: each staging collects the last batch's garbage, and a full collection that
    # walked the inherited objects too cost tens of milliseconds a round, in every round.
    gc.freeze()
    with warm_heap():  # as compare's calls and the worker's timed batches run
        _serve_reference_batches(rfd, wfd, results_fd, baseline)


def _serve_reference_batches(rfd: int, wfd: int, results_fd: int, baseline: Callable) -> None:
    import gc

    from course_lib.grader._student_worker import _collecting_later, _run_batch, _write_results

    staged: list = []
    while True:
        try:
            message = read_frame(rfd)
        except EOFError:
            return
        collect = False
        if message.startswith(b"warm"):  # one untimed call just before the timed batch (see batch())
            chosen = message[5:]  # "warm INDEX": on that input, its result kept
            if staged:
                collect = _collecting_later()
                outcome = _run_batch(baseline, staged[int(chosen):][:1] if chosen else staged[-1:])
                if chosen:
                    _write_results(results_fd, outcome)
            write_frame(wfd, b"ok")
        elif message.startswith(b"batch "):  # as the worker does: no collection until answered
            collect = _collecting_later()
            _write_results(results_fd, _run_batch(baseline, staged[:int(message[6:])]))
            write_frame(wfd, b"ok")
        elif message.startswith(b"stage "):  # read as the worker reads (receive_inputs)
            staged = []
            t0 = time.thread_time_ns()
            gc.collect()  # the last batch's inputs and results go, untimed and not billed
            collected = time.thread_time_ns() - t0
            staged = receive_inputs(rfd, *pickle.loads(message[6:]))
            write_frame(wfd, b"ok %d" % collected)
        else:
            raise RuntimeError(f"unknown request {message[:20]!r}")
        if collect:
            gc.enable()


def _cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by every thread of ``pid``, from the kernel's accounting."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
    except OSError:
        raise _Inconclusive("the worker's CPU time cannot be read on this system") from None
    return total / 1e9


def _fmt_seconds(seconds: float) -> str:
    """Seconds in the unit that suits them, to three figures."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"
