"""``parallel_points`` measured outside the student's kernel: the verifier's twin of the kernel's.

:func:`course_lib.grading.parallel_points` times the student's function on one worker and
on several, beside the grader's serial version. In the verifier (see
:mod:`course_lib.grader.verification`) the student's function runs in the student worker,
one call per timed batch (inputs staged before the clock starts, results written before
the answer, the worker stopped as soon as it answers), and the grader's version in a
reference process forked from the verifier, while the whole student sandbox is frozen.

While each call runs, a thread of the verifier samples the threads of the process that
runs it, and of that process's children, from ``/proc`` (:class:`course_lib._concurrency.Sampler`):
the student's code cannot reach those accounts. A call's time is its wall time less the
least any of its working threads waited for a core, exactly as in the kernel, and the
rounds, the verdict and its wording are the kernel's own functions
(``grading._parallel._parallel_rounds``, ``_parallel_result``, ``_parallel_points_for``).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from typing import Any

from course_lib import _concurrency
from course_lib.grader import _timed_calls as v
from course_lib.grader._student_worker import read_frame, write_frame

__all__ = ["remote_parallel_points"]


def remote_parallel_points(candidate: Any, reference: Callable, make_args: Callable, workers: int,
                           full_at: float, zero_at: float, points: float, budget: float = 2.0, *,
                           within: float = 1.1, min_concurrency: float = 1.25, rtol: float = 1e-9,
                           atol: float = 0.0, margin: float = 0.1, min_call_seconds: float = 0.02,
                           checks: int = 3, compiled: Any = None) -> tuple[float, str, float | None, bool]:
    """(points, what was measured, the speed-up or None, decided) for ``candidate``, a ``_Remote``.

    ``decided`` is False when the speed-up's interval was too wide to grade on
    (``grading._speed._Decision``): the verifier measures the cell again later.

    ``compiled``, the student's Numba kernel (a ``_Remote`` too), is looked up in the
    worker, where it was compiled: Numba's report on it is read there.

    Raises what the kernel's ``parallel_points`` raises (``GradingError``,
    ``UnreliableMeasurement``), and ``StudentCodeError`` when the worker fails.
    """
    from course_lib import grading, timing
    from course_lib.grading import _parallel, _speed

    settings = _parallel._parallel_settings(workers, full_at, zero_at, points, budget, within, min_concurrency,
                                            rtol, atol, margin, min_call_seconds, checks)
    decision = _speed._Decision(full_at=full_at, zero_at=zero_at, points=points, margin=margin)
    worker = candidate.worker
    with timing.limit_threads(settings.workers) as threads:
        pools = worker.set_threads(threads)
        try:
            result = _measure(candidate, reference, make_args, settings, decision, pools)
        except _parallel._NoParallelPoints as exc:
            return 0.0, f"measured outside your kernel: {exc}", None, True
    decided = not decision.undecided(result.low, result.high)
    described = f"measured outside your kernel: {result.describe()}"
    if not decided:
        described += " (the interval is too wide to grade on: measured again later)"
    try:
        if compiled is not None:
            loops = compiled.worker.request("prange", compiled.name)
            if loops is not None and (isinstance(loops, bool) or not isinstance(loops, int)):
                raise v.StudentCodeError("the worker sent a malformed report")
            _parallel._require_prange(loops, compiled.name)
        earned = _parallel._parallel_points_for(result, settings)
    except grading.GradingError as exc:
        raise grading.GradingError(f"{exc} (measured outside your kernel)") from None
    return earned, described, result.ratio, decided


def _measure(candidate: Any, reference: Callable, make_args: Callable, settings: Any,
             decision: Any, pools: str) -> Any:
    from course_lib import grading
    from course_lib.grading import _checks, _parallel, _values

    worker = candidate.worker
    workers = settings.workers

    def student(args: tuple) -> tuple[float, Any, _concurrency.Usage]:
        return _worker_call(worker, candidate.name, args)

    # 1. Correctness, and the bound that makes timing pointless (as in the kernel).
    signature: tuple = ()
    estimates = []
    for k in range(1, settings.checks + 1):
        args = _checks._fresh_args(make_args)
        t_ref, (expected,) = v._timed_reference(reference, [args], worker)
        t_many, many, _ = student((*args, workers))
        _parallel._check_parallel_result(many, expected, settings, f"with {workers} workers on fresh input {k} "
                                         f"of {settings.checks}, checked outside your kernel")
        if k == 1:
            _parallel._raise_if_hopeless(t_ref, t_many, settings)
        t_one, one, _ = student((*args, 1))
        _parallel._check_parallel_result(one, expected, settings, f"with 1 worker on fresh input {k} of "
                                         f"{settings.checks}, checked outside your kernel")
        _parallel._check_identical(many, one, workers, k)
        estimates.append(t_one)
        signature = _values._signature(expected)
    one_estimate = min(estimates[1:])
    if one_estimate / settings.full_at < settings.min_call_seconds:
        raise grading.UnreliableMeasurement(
            f"Unreliable measurement (a grading configuration problem, not your code): one worker takes "
            f"{v._fmt_seconds(one_estimate)} per call, too short to sample a parallel run at "
            f"{settings.full_at:g}x. Instructor: use larger inputs in make_args.")

    # 2. Rounds: the reference and one worker on the same input, the parallel run on another,
    # which is the next round's shared input: the reference's timed call there checks the
    # parallel run's result a round later (an untimed call of its own cost 0.11 s of each of
    # week 7's rounds). Only one worker then meets an input the parallel run had: keeping
    # results could only make the one-worker run faster, which lowers the speed-up.
    process = v._ReferenceProcess(reference)
    pending: tuple[int, Any, tuple] | None = None  # the last round's parallel run: round, result, input

    def check_many(result: Any, expected: Any, i: int) -> None:
        _parallel._check_parallel_result(result, expected, settings,
                                         f"with {workers} workers in timed round {i + 1}, checked outside "
                                         "your kernel")

    try:
        def one_round(i: int) -> Any:
            nonlocal pending
            shared = pending[2] if pending else _checks._fresh_args(make_args)
            other = _checks._fresh_args(make_args)
            sides = ("reference", "one", "many") if i % 2 == 0 else ("many", "one", "reference")
            seconds, results, usage = {}, {}, {}
            for side in sides:
                if side == "reference":
                    worker.pause()  # no student process runs while the reference is timed
                    try:
                        seconds[side], results[side], usage[side] = _reference_call(process, shared)
                    finally:
                        worker.resume()
                else:
                    seconds[side], results[side], usage[side] = student(
                        (*shared, 1) if side == "one" else (*other, workers))
            for side in ("one", "many"):
                if settings.tolerance.check_dtype and _values._signature(results[side]) != signature:
                    raise grading.GradingError(
                        f"Wrong result in timed round {i + 1}, measured outside your kernel: expected "
                        f"{_values._describe_signature(signature)}, got "
                        f"{_values._describe_signature(_values._signature(results[side]))}")
            _parallel._check_parallel_result(results["one"], results["reference"], settings,
                                             f"with 1 worker in timed round {i + 1}, checked outside your kernel")
            if pending:
                check_many(pending[1], results["reference"], pending[0])
            pending = (i, results["many"], other)
            many = usage["many"]
            return _parallel._ParallelRound(seconds["reference"], seconds["one"], seconds["many"],
                                            many.concurrency, many.workers,
                                            many.waited / many.wall if many.wall > 0 else 0.0)

        rounds = _parallel._parallel_rounds(one_round, settings, decision)
        if pending:  # the last round's parallel run: one untimed call of the reference
            check_many(pending[1], reference(*pending[2]), pending[0])
    finally:
        process.close()
    return _parallel._parallel_result(rounds, settings, pools)


def _worker_call(worker: Any, name: str, args: tuple) -> tuple[float, Any, _concurrency.Usage]:
    """(seconds on cores of its own, result, usage) of one call in the student worker.

    Staged and timed as a batch of one (see ``_timed_calls._run_batch``), with the worker's
    threads and children sampled from here while it runs. CPU the worker spends staging
    beyond an honest unpickling is billed; writing the result is not.
    """
    smuggled = v._stage(worker, v._pack([args]))
    message = pickle.dumps(("batch", name), protocol=pickle.HIGHEST_PROTOCOL)
    sampler = _concurrency.Sampler(worker.pid)
    sampler.start()
    t0 = time.perf_counter()
    try:
        raw = worker.send(message)
    except BaseException:
        sampler.readings()  # stops the sampling thread
        raise
    wall = time.perf_counter() - t0
    worker.pause()  # background work cannot touch the results from here on
    try:
        used = sampler.stop(wall)
        v._reply(raw)
        data = worker.read_results()
    finally:
        worker.resume()
    outcome = v._reply(data) if data else None
    if not isinstance(outcome, list) or len(outcome) != 1:
        raise v.StudentCodeError("the worker sent malformed results")
    seconds = max(used.unloaded - v._write_seconds(outcome), 1e-7) + smuggled
    return seconds, outcome[0], used


def _reference_call(process: Any, args: tuple) -> tuple[float, Any, _concurrency.Usage]:
    """(seconds on cores of its own, result, usage) of one call of the grader's version.

    Driven as ``_ReferenceProcess.batch`` drives it, sampled the way the student's calls
    are (no other discount), so both sides are timed alike.
    """
    process.stage(v._pack([args]))
    sampler = _concurrency.Sampler(process.pid)
    sampler.start()
    t0 = time.perf_counter()
    write_frame(process._w, b"batch 1")
    answer = read_frame(process._r)
    used = sampler.stop(time.perf_counter() - t0)
    results = process.results(answer)
    return max(used.unloaded - v._write_seconds(results), 1e-7), results[0], used
