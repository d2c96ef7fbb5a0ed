"""The process that holds a student's answer code during the out-of-kernel verification.

Started by :mod:`course_lib.grader.verification` (``python -c "...; main([RFD, WFD])"``, so that this
module is imported under its own name and :class:`Ref` resolves in it).
It runs the notebook's non-test cells (the provided code and the student's answers) in an
IPython shell without a kernel, then answers requests on the pipe ``RFD`` / ``WFD``:
describe names, fetch values, call a function, measure a call's traced memory peak. Under
``course grade`` the notebook's own kernel answers the same requests once its last cell ran
(:func:`serve_kernel`); a fresh worker is started only where it cannot.

Nothing in this process is trusted by the grader: the clocks that time the calls are in the
verifying process, every result travels back in the data-only format of
:mod:`course_lib.grader._data` (no pickle: nothing in it can name a callable), and the
student's printing goes to a log file, not to the pipe. This module only has to be correct for honest code.

A timed batch is three requests, timed as a whole by the verifier's clock:

- ``threads`` sets the thread pools (BLAS/OpenMP through threadpoolctl, and Numba's if it
  is loaded) to the number the grade cell asks for, the same as the reference gets;
- ``stage`` sends a batch of pickled inputs, unpickled here before the clock starts (their
  arrays' buffers follow the request as raw bytes, read into NumPy's memory: see
  :func:`pack_inputs`);
- ``batch`` calls the function on every staged input back to back (garbage collection off,
  as in ``timeit`` and :func:`course_lib.timing.compare`), writes the results (as data) into
  the results file *before* answering, and answers. The verifier stops this process
  (``SIGSTOP``) as soon as the answer arrives and reads the results itself: work left
  running in the background cannot change them, and moving inputs is never billed.

The results file is an anonymous memory file (``memfd``) that the verifier created and
handed to this process as an open descriptor: there is no path to swap for a FIFO or a
link. One round trip per batch, not per call: a batch lasts tens of milliseconds, so the
pipe's latency is a small share of it, and the verifier measures that share with an empty
batch (``batch`` with no function) and reports it beside the verdict.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import pickle
import select
import signal
import struct
import sys
import time
import traceback
import types
from typing import Any, NamedTuple

from course_lib.grader import _data
from course_lib.timing import _trim_heap, warm_heap

__all__ = ["LAUNCH", "Inputs", "Ref", "main", "pack_inputs", "read_frame", "receive_inputs", "send_inputs",
           "serve_kernel", "write_frame"]

_HEADER = struct.Struct("!Q")


class Ref:
    """A name in the worker's namespace, as an argument: ``f(x, price=Ref("price_fast"))``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_resolve, (self.name,))


def _resolve(name: str) -> Any:
    return _NAMESPACE[name]


_NAMESPACE: dict[str, Any] = {}
_HEAP = contextlib.ExitStack()  # the arenas a speed cell keeps mapped (see the "heap" request)


def read_frame(fd: int) -> bytes:
    """One length-prefixed message from ``fd``; raises ``EOFError`` when the pipe closed."""
    size = _HEADER.unpack(_read_exactly(fd, _HEADER.size))[0]
    return _read_exactly(fd, size)


def write_frame(fd: int, data: bytes) -> None:
    """Write ``data`` to ``fd`` as one length-prefixed message."""
    _write_all(fd, memoryview(_HEADER.pack(len(data)) + data))


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, size: int, deadline: float | None = None) -> bytes | None:
    """``size`` bytes from ``fd``; None if ``deadline`` (``time.monotonic``) passes first."""
    chunks, left = [], size
    while left:
        if deadline is not None:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class Inputs(NamedTuple):
    """A batch's inputs as sent: a pickle whose array buffers travel beside it (out of band)."""

    data: bytes
    buffers: list[memoryview]

    @property
    def sizes(self) -> list[int]:
        """Each buffer's size in bytes, as the receiver needs them (:func:`receive_inputs`)."""
        return [b.nbytes for b in self.buffers]

    @property
    def nbytes(self) -> int:
        return len(self.data) + sum(self.sizes)


def pack_inputs(obj: Any) -> Inputs:
    """``obj`` pickled with its arrays' buffers out of band (pickle protocol 5).

    The receiver reads each buffer straight into memory of NumPy's own allocator, so the
    arrays it unpickles sit in memory like the ones ``compare``'s ``make_args`` made (NumPy
    asks for huge pages for blocks of 4 MB or more). Unpickled in band, a 20 MB array is
    a view of the pickle's bytes, on 4 KiB pages: a NumPy expression over 2.5 million of
    them measured 7.5-7.9 ms per call against 7.0-7.3 ms on NumPy's own memory.

    Examples
    --------
    >>> import numpy as np
    >>> staged = pack_inputs([(np.arange(3.0),)])
    >>> len(staged.buffers), staged.nbytes > 24
    (1, True)
    """
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    try:
        return Inputs(data, [b.raw() for b in buffers])
    except BufferError:  # a buffer that is not contiguous: everything in band, as before
        return Inputs(pickle.dumps(obj, protocol=5), [])


def send_inputs(fd: int, header: bytes, inputs: Inputs) -> None:
    """``header`` as a frame, then the raw bytes of every buffer (their sizes are in it)."""
    write_frame(fd, header)
    for buffer in inputs.buffers:
        _write_all(fd, buffer)


def receive_inputs(fd: int, data: bytes, sizes: list[int]) -> Any:
    """The inputs :func:`send_inputs` sent: each buffer read into a fresh NumPy block."""
    if not sizes:
        return pickle.loads(data)
    import numpy as np

    homes = []
    for size in sizes:
        home = np.empty(size, dtype=np.uint8)
        view, got = memoryview(home), 0
        while got < size:
            n = os.readv(fd, [view[got:]])
            if not n:
                raise EOFError("the other side closed the pipe")
            got += n
        homes.append(home)
    return pickle.loads(data, buffers=homes)


class _CellTimeout(BaseException):
    """Raised in a cell that runs past its time limit (a BaseException: ``except Exception`` misses it)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _CellTimeout("the cell ran past the time limit")


def _load(shell: Any, cells: list[str], timeout: int) -> list[str | None]:
    """Run each cell as Jupyter would; return one error description (or None) per cell."""
    errors: list[str | None] = []
    signal.signal(signal.SIGALRM, _on_alarm)
    for source in cells:
        signal.alarm(timeout)
        try:
            result = shell.run_cell(source, store_history=False)
            error = result.error_before_exec or result.error_in_exec
            errors.append(None if error is None else f"{type(error).__name__}: {error}")
        except _CellTimeout:
            errors.append(f"the cell ran past the time limit of {timeout} s")
        finally:
            signal.alarm(0)
    return errors


def _describe(names: list[str]) -> dict[str, str]:
    """``function`` (called through a proxy), ``value`` (copied out), ``object``, ``module`` or ``missing``."""
    kinds = {}
    for name in names:
        if name not in _NAMESPACE:
            kinds[name] = "missing"
            continue
        obj = _NAMESPACE[name]
        if isinstance(obj, types.ModuleType):  # an import: the verifier has its own
            kinds[name] = "module"
            continue
        function = isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                                    functools.partial)) or type(obj).__module__.startswith("numba")
        # A callable that is data all the same (course_lib's Stopwatch) is copied out as data.
        kinds[name] = ("function" if function else "object" if callable(obj) and not _data.is_course_data(obj)
                       else "value")
    return kinds


def _peak(fn: Any, args: tuple, kwargs: dict, start: Any, stop: Any, get: Any) -> int:
    start()
    try:
        before = get()[0]
        fn(*args, **kwargs)
        return max(0, get()[1] - before)
    finally:
        stop()


def _trim() -> bool:
    """Collect garbage and hand the allocator's free pages back to the system (glibc only).

    A memory reading compares the process's resident memory before and during a call. Pages
    an earlier call freed stay mapped in a warm process, and a call that allocates out of
    tracemalloc's sight can reuse them without its resident memory rising: trimmed first, the
    rise shows what the call itself needs. Returns whether the allocator was trimmed.
    """
    import gc

    gc.collect()
    return _trim_heap()  # not glibc: False, and the rise is read as it is


def _noop(*args: Any) -> None:
    """The empty candidate: what a batch costs with no work in it."""
    return None


def _set_threads(threads: int) -> str:
    """Set the thread pools for the calls that follow; return them in words."""
    from threadpoolctl import threadpool_limits

    from course_lib import timing

    threadpool_limits(limits=threads)  # kept in force: no context, the setting stays
    numba = sys.modules.get("numba")
    if numba is not None:
        try:
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        except Exception:  # noqa: BLE001 - no threading layer yet: nothing runs in parallel
            pass
    return timing.thread_settings()


def _run_batch(fn: Any, staged: list[tuple]) -> tuple:
    """Every staged call back to back; ("ok", results) or the first error.

    The caller turns garbage collection off before and on again only after its answer
    has gone out (see :func:`_collecting_later`): a collection triggered by the batch's
    garbage would otherwise run inside the verifier's timed window (a full collection of
    a notebook's heap took 15-20 ms, against batches of 5-20 ms).
    """
    results: list[Any] = [None] * len(staged)
    try:
        for i, args in enumerate(staged):
            results[i] = fn(*args)
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc)[:2000])
    return ("ok", results)


def _collecting_later() -> bool:
    """Turn garbage collection off for a timed batch; return whether to turn it on after."""
    enabled = gc.isenabled()
    gc.disable()  # as timeit and compare do: a collection would bill whichever side triggers it
    return enabled


def _write_results(fd: int, outcome: tuple) -> None:
    # Written over the last batch's results, then cut to length: pages of the file that are
    # there already are only copied into, not freed and allocated again (emptying the file
    # first made writing a batch of 86 MB of arrays cost more than computing them). Every
    # batch's results are checked against the reference on fresh inputs, so nothing left
    # of an earlier batch can pass for this one.
    os.lseek(fd, 0, os.SEEK_SET)
    with os.fdopen(os.dup(fd), "wb") as fh:
        _dump(outcome, fh)
        fh.flush()
        os.ftruncate(fd, fh.tell())


def _serve(rfd: int, wfd: int, shell: Any, results_fd: int = -1) -> None:
    import tracemalloc

    # Captured before any student code runs; a student who stops tracing inside the call
    # lowers this figure, which is why the verifier also reads the process's peak RSS.
    tm = (tracemalloc.start, tracemalloc.stop, tracemalloc.get_traced_memory)
    staged: Any = None
    outcome: Any = None
    collect = False
    while True:
        if collect:  # after the last batch's answer went out, outside the timed window
            gc.enable()
            collect = False
        try:
            request = pickle.loads(read_frame(rfd))
        except EOFError:
            return
        op = request[0]
        try:
            if op == "load":
                reply: tuple = ("ok", _load(shell, request[1], request[2]))
            elif op == "describe":
                reply = ("ok", _describe(request[1]))
            elif op == "value":
                reply = ("ok", _NAMESPACE[request[1]])
            elif op == "call":
                _, name, args, kwargs = request
                reply = ("ok", _NAMESPACE[name](*args, **kwargs))
            elif op == "threads":
                reply = ("ok", _set_threads(int(request[1])))
            elif op == "heap":  # speed cells: arenas kept mapped, as in compare (0: given back)
                _HEAP.close()
                if int(request[1]):
                    _HEAP.enter_context(warm_heap(int(request[1])))
                reply = ("ok", None)
            elif op == "stage":  # inputs for the next timed batch, unpickled before the clock starts
                staged = outcome = None  # the last batch's inputs and results are freed here, untimed
                staged = receive_inputs(rfd, request[1], request[2])
                reply = ("ok", None)
            elif op == "batch":  # the timed batch: its results are in the file before the answer
                fn = _noop if request[1] is None else _NAMESPACE[request[1]]
                collect = _collecting_later()
                outcome = _run_batch(fn, staged)
                _write_results(results_fd, outcome)
                reply = ("ok", None)
            elif op == "prange":  # Numba's report: prange loops it made parallel (None: not Numba's)
                from course_lib._numba_report import prange_loops

                reply = ("ok", prange_loops(_NAMESPACE[request[1]]))
            elif op == "trim":  # before a memory reading: free heap pages go back to the system
                reply = ("ok", _trim())
            elif op == "peak":
                _, name, args, kwargs = request
                reply = ("ok", _peak(_NAMESPACE[name], args, kwargs, *tm))
            else:
                reply = ("error", "ValueError", f"unknown request {op!r}")
        except Exception as exc:
            reply = ("error", type(exc).__name__, str(exc)[:2000])
        write_frame(wfd, _as_data(reply))


def _as_data(reply: tuple) -> bytes:
    """``reply`` in the data format, or a ``notdata`` reply saying why it cannot be."""
    try:
        return _data.dumps(reply)
    except Exception as exc:  # NotData, or a value whose own methods raise while read
        return _not_data(exc)


def _not_data(exc: Exception) -> bytes:
    """The ``notdata`` reply that says why a value could not be written."""
    return _data.dumps(("notdata", str(exc)[:2000]))


def _dump(outcome: tuple, fh: Any) -> None:
    try:
        _data.dump(outcome, fh)  # straight from the arrays' memory: the write is timed
    except _data.NotData as exc:  # nothing was written: the encoding fails before any write
        fh.write(_not_data(exc))


def main(argv: list[str]) -> int:
    rfd, wfd = int(argv[0]), int(argv[1])
    results_fd = int(argv[2]) if len(argv) > 2 else -1
    from course_lib.timing import steady_allocator

    steady_allocator()  # as in the kernel's compare and the verifier's reference process
    os.environ.setdefault("MPLBACKEND", "Agg")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance(user_ns=_NAMESPACE)
    shell.display_formatter.active_types = ["text/plain"]  # nothing is shown: save the work
    try:
        _serve(rfd, wfd, shell, results_fd)
    except BaseException:  # a student's os._exit never gets here; anything else is logged
        traceback.print_exc()
        return 1
    return 0


def serve_kernel(rfd: int, wfd: int, results_fd: int) -> None:
    """Answer the verifier from the notebook's own kernel, once its last cell ran.

    The grader keeps a sandboxed kernel alive after the notebook (see
    :class:`course_lib.grader._nbpreprocessors.CourseExecute`) and runs this in it: the
    answers are then read from the namespace the notebook's cells made, and not made a
    second time in a fresh worker. Nothing changes for the verifier, which trusts this
    process no more than a worker. Returns when the verifier closes the pipe.
    """
    global _NAMESPACE
    from IPython import get_ipython

    from course_lib.timing import steady_allocator

    steady_allocator()  # as a fresh worker sets it before any cell
    shell = get_ipython()
    _NAMESPACE = shell.user_ns
    try:
        _serve(rfd, wfd, shell, results_fd)
    finally:
        for fd in (rfd, wfd, results_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


LAUNCH = "import sys; from course_lib.grader._student_worker import main; sys.exit(main(sys.argv[1:]))"
"""The ``python -c`` program that starts a worker; its arguments are the two pipe fds and the
results file's fd."""
