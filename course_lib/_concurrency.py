"""Who did a call's work: CPU time and time spent waiting for a core, per thread, from /proc.

A parallel run is only as fast as the cores it gets. On a machine where other programs
keep a core busy, two threads of a correct parallel version take turns with them, and
the wall time says "no speed-up" although the code would have used both cores. The
kernel keeps, for every thread, the time it ran on a core and the time it was ready to
run but waited for one (``/proc/PID/task/TID/schedstat``: run time, run-queue delay).
Sampled while a call runs, they tell

- which threads and processes did the work (each with at least a tenth of its CPU time);
- how many of them ran or were ready to run, on average over the call's wall time (its
  *concurrency*: at most 1 for serial code, whatever the load; near 2 for two threads that
  both compute; for threads that take turns on Python's GIL between 1 and, on a busy
  machine, about 1.7, since a thread handed the GIL then waits for a core like any other:
  what such threads earn is decided by their speed-up, not by this count);
- how long the call waited for cores. Two estimates, the larger taken: the least any of
  its working threads waited over the whole call, and, sampling interval by sampling
  interval, the least any thread that was running or ready to run in that interval (at
  least half of it) waited in it, summed: the second also sees the phases in which one
  thread works alone (a process pool being started and joined). The call's wall time less
  that wait is what it would have taken on cores of its own, and never less than the CPU
  time of its busiest thread.

Threads a call starts and ends (a thread pool made inside the call) are read while they
live: the sampler reads every ``interval`` seconds, so a thread's last few milliseconds
may be missed, which only lowers the figures. Child processes (a process pool) are
found through ``/proc/PID/task/TID/children``.

:class:`Sampler` samples from a thread of the calling process: use it on *another*
process (the grader's verifier watching the student's worker). In one's own process a
sampling thread competes for the GIL with the code it measures (measured: the serial
week 7 estimate ran 3.5 times slower beside a thread reading ``/proc`` every 5 ms), so
:class:`ExternalSampler` samples from a small process of its own instead.

This module imports only the standard library: :class:`ExternalSampler` runs it as a
script (``python -I -S _concurrency.py PID``).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

__all__ = ["Usage", "Sampler", "ExternalSampler", "usage", "path_wait", "available"]

_INTERVAL = 0.005  # seconds between samples
_WORKER_SHARE = 0.1  # a thread or process with at least this share of the CPU time did the work


@dataclass(frozen=True)
class Usage:
    """What a call used, from per-thread accounts sampled while it ran.

    ``wall`` the call's wall seconds; ``cpu`` CPU seconds of every thread and process of
    the tree; ``workers`` how many threads did at least a tenth of that; ``waited`` the
    least any of them waited for a core; ``concurrency`` how many of them ran or were
    ready to run, on average.
    """

    wall: float
    cpu: float
    workers: int
    waited: float
    concurrency: float
    busiest: float = 0.0
    """CPU seconds of the busiest working thread."""

    @property
    def unloaded(self) -> float:
        """Wall seconds less the wait for a core: the time on cores of its own (>= the busiest thread's CPU)."""
        return max(self.wall - self.waited, self.busiest, 1e-9)

    def describe(self) -> str:
        return (f"{self.workers} thread{'s' if self.workers != 1 else ''} or process"
                f"{'es' if self.workers != 1 else ''} did the work, {self.concurrency:.2f} of them running "
                f"or ready to run on average; {self.cpu * 1e3:.3g} ms of CPU in {self.wall * 1e3:.3g} ms, "
                f"{self.waited * 1e3:.3g} ms of it waiting for a core")


def available() -> bool:
    """Whether this system keeps per-thread run and wait times (Linux with schedstat)."""
    return _read_schedstat(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/schedstat") is not None


def usage(deltas: dict, wall: float, path_wait: float = 0.0) -> Usage:
    """Summarise per-thread ``(cpu_ns, delay_ns)`` increments over a call of ``wall`` seconds.

    ``path_wait`` is the interval-by-interval estimate of the wait (see :func:`path_wait`).

    Examples
    --------
    Two threads that each computed 90 ms of a 100 ms call, one of them kept waiting 10 ms:

    >>> u = usage({(1, 1): (1_000_000, 0), (1, 2): (90_000_000, 10_000_000),
    ...            (1, 3): (90_000_000, 0)}, wall=0.1)
    >>> u.workers, round(u.concurrency, 2), u.waited
    (2, 1.9, 0.0)
    """
    values = [(max(0, c), max(0, d)) for c, d in deltas.values()]
    total = sum(c for c, _ in values)
    workers = [(c, d) for c, d in values if total > 0 and c >= _WORKER_SHARE * total]
    if not workers or wall <= 0:
        return Usage(max(wall, 0.0), total / 1e9, len(workers), 0.0, 0.0)
    waited = max(min(d for _, d in workers) / 1e9, path_wait)
    return Usage(wall, total / 1e9, len(workers), waited, sum(c + d for c, d in workers) / 1e9 / wall,
                 max(c for c, _ in workers) / 1e9)


def path_wait(series: list) -> float:
    """Seconds every thread that wanted to run was kept waiting, summed over sampling intervals.

    ``series`` is ``[(seconds, {(pid, tid): (cpu_ns, delay_ns)}), ...]`` in time order, the
    first reading taken before the call. In each interval the threads that ran or waited
    for at least half of it are the ones the call was waiting on; the least any of them
    waited is time in which none of them could go on.

    Examples
    --------
    One thread alone, waiting 2 ms of each 5 ms interval, then two threads, one of them
    never kept waiting:

    >>> series = [(0.0, {(1, 1): (0, 0)}), (0.005, {(1, 1): (3_000_000, 2_000_000)}),
    ...           (0.010, {(1, 1): (3_000_000, 2_000_000), (1, 2): (3_000_000, 2_000_000),
    ...                    (1, 3): (5_000_000, 0)})]
    >>> round(path_wait(series), 6)
    0.002
    """
    waited = 0.0
    for (t0, before), (t1, after) in zip(series, series[1:]):
        span = (t1 - t0) * 1e9
        if span <= 0:
            continue
        active = []
        for key, (cpu, delay) in after.items():
            cpu0, delay0 = before.get(key, (0, 0))
            if (cpu - cpu0) + (delay - delay0) >= 0.5 * span:
                active.append(max(0, delay - delay0))
        if active:
            waited += min(active) / 1e9
    return waited


class Sampler:
    """Samples the threads of ``pid`` and its descendants from a thread of this process.

    ``start()`` reads every thread's accounts; ``stop(wall)`` reads them a last time and
    returns the :class:`Usage` of what ran in between (threads born in between count from
    zero). Processes listed in ``skip`` (pids) are left out, with their descendants.
    """

    def __init__(self, pid: int, interval: float = _INTERVAL, skip: frozenset[int] = frozenset()) -> None:
        self.pid, self.interval, self.skip = pid, interval, frozenset(skip)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._series = [(time.monotonic(), _snapshot(self.pid, self.skip))]
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="course-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            self._series.append((time.monotonic(), _snapshot(self.pid, self.skip)))

    def readings(self) -> tuple[dict, float]:
        """Stop sampling; the per-thread ``(cpu_ns, delay_ns)`` increments since ``start``, and
        the interval-by-interval wait (:func:`path_wait`)."""
        if self._thread is not None:
            self._done.set()
            self._thread.join()
            self._thread = None
        self._series.append((time.monotonic(), _snapshot(self.pid, self.skip)))
        return _increments(self._series), path_wait(self._series)

    def stop(self, wall: float) -> Usage:
        deltas, waited = self.readings()
        return usage(deltas, wall, waited)


class ExternalSampler:
    """A :class:`Sampler` of this very process, run in a small process of its own.

    Use as a context manager; ``start()`` returns when the first reading is taken,
    ``stop(wall)`` when the last one is.
    """

    def __init__(self, interval: float = _INTERVAL) -> None:
        self.interval = interval

    def __enter__(self) -> ExternalSampler:
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__), str(os.getpid()), str(self.interval)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
        if self._proc.stdout.readline() != b"ready\n":
            self.__exit__()
            raise RuntimeError("the CPU sampler did not start")
        return self

    def start(self) -> None:
        self._proc.stdin.write(b"s")
        if self._proc.stdout.readline() != b"ok\n":
            raise RuntimeError("the CPU sampler stopped")

    def stop(self, wall: float) -> Usage:
        self._proc.stdin.write(b"e")
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the CPU sampler stopped")
        rows, waited = json.loads(line)
        return usage({tuple(k): tuple(v) for k, v in rows}, wall, waited)

    def __exit__(self, *exc: object) -> None:
        try:
            self._proc.stdin.close()
            self._proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait()


# --- reading /proc ----------------------------------------------------------------------------


def _read_schedstat(path: str) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as fh:
            fields = fh.read().split()
        return int(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):
        return None


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def _snapshot(pid: int, skip: frozenset[int]) -> dict:
    """``{(pid, tid): (cpu_ns, delay_ns)}`` for every thread of ``pid`` and its descendants."""
    found: dict = {}
    todo, seen = [pid], set(skip)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for tid in _tasks(p):
            accounts = _read_schedstat(f"/proc/{p}/task/{tid}/schedstat")
            if accounts is not None:
                found[(p, int(tid))] = accounts
            try:
                with open(f"/proc/{p}/task/{tid}/children", "rb") as fh:
                    todo += [int(c) for c in fh.read().split()]
            except (OSError, ValueError):
                pass
    return found


def _increments(series: list) -> dict:
    """Per thread, its last reading less its first (zero for a thread born since)."""
    first, last = series[0][1], {}
    for _, reading in series:
        last.update(reading)
    zero = (0, 0)
    return {k: (c - first.get(k, zero)[0], d - first.get(k, zero)[1]) for k, (c, d) in last.items()}


def _serve(pid: int, interval: float) -> None:
    """The sampler process: ``s`` starts a call, ``e`` ends it (one JSON line back), EOF quits."""
    skip = frozenset({os.getpid()})  # this process is a child of the one it samples
    out = sys.stdout.buffer
    out.write(b"ready\n")
    out.flush()
    rfd = sys.stdin.fileno()
    series: list | None = None
    while True:
        ready, _, _ = select.select([rfd], [], [], interval if series is not None else None)
        if not ready:
            series.append((time.monotonic(), _snapshot(pid, skip)))
            continue
        data = os.read(rfd, 64)
        if not data:
            return
        for command in data:
            if command == ord("s"):
                series = [(time.monotonic(), _snapshot(pid, skip))]
                out.write(b"ok\n")
            elif command == ord("e") and series is not None:
                series.append((time.monotonic(), _snapshot(pid, skip)))
                rows = [[list(k), list(v)] for k, v in _increments(series).items()]
                out.write(json.dumps([rows, path_wait(series)]).encode() + b"\n")
                series = None
        out.flush()


if __name__ == "__main__":
    _serve(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else _INTERVAL)
