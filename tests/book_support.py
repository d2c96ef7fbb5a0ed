"""Build the book once per test session, as `make book` does, for test_book*.py.

Not a test module: tests/test_book.py and tests/test_book_browser.py import it, so
both share one build (the first caller pays; the second gets the cached result).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROOT", "HTML", "BuildResult", "build_book"]

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
# The same command as the Makefile's `book` target, at the small size that keeps a
# cold build of the whole book within the CI budget.
COMMAND = ("build", ".", "-W", "-n", "--keep-going")
SIZE = "small"


@dataclass(frozen=True)
class BuildResult:
    returncode: int
    output: str

    @property
    def warnings(self) -> list[str]:
        # Sphinx's own "WARNING:" lines; not the kernel's "[IPKernelApp] WARNING | ...".
        # Also not tornado's "ERROR:tornado.general:Uncaught exception in ZMQStream callback":
        # the kernel messaging layer logged it once in a cold CI-style build (exit status 0,
        # every cell executed). It is not a Sphinx diagnostic, and test_book checks every
        # cell's output for errors itself.
        return [line for line in self.output.splitlines()
                if ("WARNING:" in line or "ERROR:" in line or "CRITICAL:" in line)
                and not line.startswith("ERROR:tornado.general:")]


@functools.cache
def build_book() -> BuildResult:
    """Run ``jupyter-book build . -W -n --keep-going`` with MEASURE_FIRST_SIZE=small."""
    executable = Path(sys.executable).with_name("jupyter-book")
    # strict: a false course_lib.claims claim fails the build (see course_lib/claims.py)
    env = {**os.environ, "MEASURE_FIRST_SIZE": SIZE, "MEASURE_FIRST_STRICT": "1"}
    # conftest.py sets MPLBACKEND=Agg for the tests; a notebook kernel that inherits it
    # would draw no inline figures, so the chapters' plots would silently vanish.
    env.pop("MPLBACKEND", None)
    proc = subprocess.run([str(executable), *COMMAND], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    return BuildResult(proc.returncode, proc.stdout + proc.stderr)
