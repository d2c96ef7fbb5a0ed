"""What every grading check shares: quiet output, the instructor's arguments checked, the student's call, formatting.

:func:`_grading_session` silences warnings and captures stray output while a check runs
(nbgrader scores any stderr output as a failed cell) and attaches it to a failure's message;
:func:`_fresh_args` and :func:`_call_candidate` call ``make_args`` and the student's function,
turning an exception in the latter into a :class:`~course_lib.grading.GradingError` that
names it; the ``_check_*`` functions and :func:`_parse_bytes` reject a bad configuration
with a message that says what was expected; the ``_fmt_*`` functions write the figures of
every verdict.
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from course_lib.grading._errors import GradingError
from course_lib.grading._state import _available_cores

# What the package's other modules, preview, the verifier and the course CLI use from here.
__all__ = [
    "_call_candidate", "_check_number", "_check_sizes", "_cores_text", "_fmt_ratio", "_fmt_seconds",
    "_fresh_args", "_grading_session", "_parse_bytes",
]


_OUTPUT_SHOWN = 2000  # characters of captured output attached to a failure


def _fresh_args(make_args: Callable[[], tuple[Any, ...]]) -> tuple[Any, ...]:
    made = make_args()
    if not isinstance(made, tuple):
        raise TypeError(
            f"make_args must return a tuple of positional arguments, got {type(made).__name__}; "
            "for a single argument return (x,), not x"
        )
    return made


def _call_candidate(candidate: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    try:
        return candidate(*args)
    except GradingError:
        raise
    except Exception as exc:
        raise GradingError(f"Your function raised {type(exc).__name__}: {exc}") from exc


def _cores_text(cores: int | None = None) -> str:
    """How many cores this notebook is graded with, for every speed verdict."""
    cores = _available_cores() if cores is None else cores
    return f"graded with {cores} core{'s' if cores != 1 else ''} (this notebook's CPU affinity)"


@contextlib.contextmanager
def _grading_session() -> Any:
    """Silence warnings (Numba's included) and capture stray output while grading.

    nbgrader scores any stderr output as a failed cell, so nothing may reach it
    while a check passes. What was captured is attached to the message when a
    check fails, where it may explain the failure.
    """
    buffer = io.StringIO()
    try:
        with warnings.catch_warnings():
            # "ignore" for every category covers NumbaWarning, NumbaPerformanceWarning
            # and NumbaDeprecationWarning, and needs no import of numba.
            warnings.simplefilter("ignore")
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
                yield buffer
    except GradingError as exc:
        output = buffer.getvalue()
        if output.strip():
            shown = output if len(output) <= _OUTPUT_SHOWN else "..." + output[-_OUTPUT_SHOWN:]
            exc.args = (f"{exc.args[0]}\n\nOutput printed while grading:\n{shown}",) + exc.args[1:]
        raise


def _check_number(value: Any, name: str, positive: bool = False, finite: bool = True) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if math.isnan(value) or (finite and math.isinf(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")


def _check_sizes(sizes: Sequence[int]) -> list[int]:
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
        raise TypeError(f"sizes must be a sequence of ints such as [1_000, 2_000, 4_000], got {sizes!r}")
    sizes = list(sizes)
    if len(sizes) < 2:
        raise ValueError(f"fitting an exponent needs at least two sizes, got {sizes!r}")
    for n in sizes:
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ValueError(f"sizes must be positive whole numbers, got {n!r}")
    if any(b <= a for a, b in zip(sizes, sizes[1:])):
        raise ValueError(f"sizes must be strictly increasing, got {sizes!r}")
    return sizes


_BYTE_UNITS = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def _parse_bytes(limit: int | str) -> int:
    if isinstance(limit, bool):
        raise TypeError("limit must be a number of bytes or a string such as '50 MB', got a bool")
    if isinstance(limit, int):
        value = float(limit)
    elif isinstance(limit, str):
        text = limit.strip().replace("_", "")
        number = text.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ").strip()
        unit = text[len(number):].strip().lower() or "b"
        try:
            value = float(number) * _BYTE_UNITS[unit]
        except (ValueError, KeyError):
            raise ValueError(
                f"limit must look like '50 MB' (units B, kB, MB, GB or KiB, MiB, GiB), got {limit!r}"
            ) from None
    else:
        raise TypeError(f"limit must be a number of bytes or a string such as '50 MB', got {type(limit).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"limit must be a positive amount of memory, got {limit!r}")
    return int(value)


def _fmt_seconds(seconds: float) -> str:
    if not math.isfinite(seconds):
        return f"{seconds} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _fmt_ratio(ratio: float) -> str:
    return f"{ratio:.3g}" if math.isfinite(ratio) else str(ratio)

