"""What Numba itself says it made parallel: the ``prange`` loops it turned into parallel regions.

A count of threads at work cannot tell a parallel loop from a serial one with a thread
beside it that only burns CPU (measured: a serial ``@njit`` count plus such a thread had
1.89 threads "at work"). Numba's own record can: every function compiled with
``parallel=True`` keeps, per compiled signature, its *parfor diagnostics*, and each parallel
region there lists the patterns it came from; a user's ``prange`` loop shows as
``("prange", "user", ...)``. A ``range`` loop, or ``@njit`` without ``parallel=True``,
leaves none (``parallel=True`` alone may still make an ``np.zeros`` parallel: that is not
the loop).

The grader reads this in the process that compiled the function (the student's kernel, or
its worker outside the kernel). It is evidence beside a wall-time speed-up, never instead
of one: a student who rebuilt Numba's records could fake it, not the speed-up.

Examples
--------
>>> prange_loops(len) is None  # not a Numba function at all
True
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["prange_loops"]


def prange_loops(fn: Any) -> int | None:
    """Parallel regions Numba made from ``prange`` loops in ``fn``'s compiled versions.

    Returns None when ``fn`` is not a function compiled by Numba (or Numba is not
    loaded), 0 when none of its compiled versions has a parallel ``prange`` loop (it was
    compiled without ``parallel=True``, its loop is a ``range``, or it was never called).
    """
    numba = sys.modules.get("numba")
    if numba is None:
        return None
    from numba.core.dispatcher import Dispatcher

    if not isinstance(fn, Dispatcher):
        return None
    if not fn.targetoptions.get("parallel"):
        return 0
    found = 0
    for compiled in list(fn.overloads.values()):
        diagnostics = (getattr(compiled, "metadata", None) or {}).get("parfor_diagnostics")
        for region in getattr(diagnostics, "initial_parfors", None) or ():
            if any(_is_prange(pattern) for pattern in getattr(region, "patterns", ())):
                found += 1
    return found


def _is_prange(pattern: Any) -> bool:
    # ("prange", "user", "") for a loop the user wrote as prange; a bare "prange" in some
    # Numba versions.
    return pattern == "prange" or (isinstance(pattern, tuple) and bool(pattern) and pattern[0] == "prange")
