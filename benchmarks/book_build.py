"""Cold strict builds of the book, quiet and beside CPU-bound competitors: every claim must hold.

Each build executes every chapter from scratch (a fresh output folder, so a fresh execution
cache) with ``MEASURE_FIRST_STRICT=1``, exactly as ``make book`` does: a claim that does not
hold on this machine fails the build (``course_lib/claims.py``). The ``busy`` build runs
beside CPU-bound processes (``--competitors``, default one, the "busy neighbour" every demo
in the book is sized for) that this script starts and stops itself. The script prints, per
build, the wall time, the exit status, the load average before and after, the claims per
chapter (counted in the executed notebooks), how many held and how many were skipped
(a claim this machine could not test: no GPU, no free core, a tool that cannot run), and
any Sphinx warning. ``--keep DIR`` keeps each build's HTML in ``DIR/<condition>`` to read.

Usage::

    .venv/bin/python benchmarks/book_build.py                  # quiet, then busy; small size
    .venv/bin/python benchmarks/book_build.py --only busy --competitors 2
    .venv/bin/python benchmarks/book_build.py --size full --only quiet --keep /tmp/books

Exit status 0 only if every build passed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
# A claim in a chapter is a call of claims.claim("name", ...) in a code cell.
CLAIM = re.compile(r"claims\.claim\(\s*[\"']")


@contextlib.contextmanager
def competitors(count: int) -> Iterator[None]:
    """``count`` CPU-bound processes (busy loops) for as long as the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(count)]
    if procs:
        time.sleep(1.0)  # spinning before the first chapter starts
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def claims_per_chapter(executed: Path) -> dict[str, int]:
    """Claims checked per chapter, counted in the notebooks the build executed."""
    counts = {}
    for nb in sorted(executed.rglob("*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8")).get("cells", [])
        source = "\n".join("".join(c.get("source", "")) for c in cells if c.get("cell_type") == "code")
        counts[nb.stem] = len(CLAIM.findall(source))
    return counts


def claim_statuses(executed: Path) -> dict[str, int]:
    """How many claims held, failed or were skipped, from the pages' recorded statuses."""
    counts: dict[str, int] = {}
    for glue in executed.rglob("*.glue.json"):
        for key, output in json.loads(glue.read_text(encoding="utf-8")).items():
            if key.endswith("__claim"):
                text = "".join(output.get("data", {}).get("text/plain", ""))
                status = json.loads(text.strip("'"))["status"]
                counts[status] = counts.get(status, 0) + 1
    return counts


def build(size: str, busy: int, keep: Path | None = None) -> dict:
    """One cold build into a temporary folder; its time, status, claims and warnings.

    ``busy`` is the number of CPU-bound competitors to run beside it.
    """
    out = Path(tempfile.mkdtemp(prefix="book-bench-"))
    env = {**os.environ, "MEASURE_FIRST_SIZE": size, "MEASURE_FIRST_STRICT": "1"}
    env.pop("MPLBACKEND", None)  # as the Makefile: inline figures in the chapters' kernels
    load_before = os.getloadavg()[0]
    try:
        with competitors(busy):
            started = time.perf_counter()
            done = subprocess.run([str(JUPYTER_BOOK), "build", ".", "-W", "-n", "--keep-going",
                                   "--path-output", str(out)], cwd=ROOT, env=env,
                                  capture_output=True, text=True)
            seconds = time.perf_counter() - started
        # Sphinx colours its log: drop the escape codes before reading it.
        output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
        warnings = [line for line in output.splitlines()
                    if re.search(r"WARNING:|ERROR:|CRITICAL:", line) and "IPKernelApp" not in line
                    and not line.startswith("ERROR:tornado.general:")]
        failed = re.findall(r"ClaimFailed\W+claim '([^']+)' does not hold[^\n]*", output)
        condition = f"busy ({busy} competitors)" if busy else "quiet"
        if keep is not None:
            target = keep / ("busy" if busy else "quiet")
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(out / "_build", target)
            (target / "build.log").write_text(output, encoding="utf-8")
        return {"size": size, "condition": condition, "seconds": seconds,
                "returncode": done.returncode, "load_before": load_before, "load_after": os.getloadavg()[0],
                "claims": claims_per_chapter(out / "_build" / "jupyter_execute"),
                "statuses": claim_statuses(out / "_build" / "jupyter_execute"),
                "failed_claims": sorted(set(failed)), "warnings": warnings[:20],
                "tcp_warnings": output.count("running over TCP")}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def report(result: dict) -> str:
    minutes, seconds = divmod(round(result["seconds"]), 60)
    lines = [f"{result['size']} size, {result['condition']}: {minutes} min {seconds:02d} s, "
             f"exit status {result['returncode']} (load average {result['load_before']:.2f} before, "
             f"{result['load_after']:.2f} after)"]
    claims = result["claims"]
    lines.append(f"  claims: {sum(claims.values())} in all; "
                 + ", ".join(f"{name} {n}" for name, n in claims.items()))
    lines.append("  claim statuses: " + ", ".join(f"{k} {v}" for k, v in
                                                  sorted(result["statuses"].items())))
    lines.append(f"  kernel TCP warnings: {result['tcp_warnings']}")
    if result["failed_claims"]:
        lines.append("  claims that did not hold: " + ", ".join(result["failed_claims"]))
    lines += [f"  {w}" for w in result["warnings"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=["small", "full"], default="small")
    parser.add_argument("--only", choices=["quiet", "busy"])
    parser.add_argument("--competitors", type=int, default=1,
                        help="CPU-bound processes beside the busy build (default 1)")
    parser.add_argument("--keep", type=Path, help="keep each build's output in DIR/quiet, DIR/busy")
    args = parser.parse_args(argv)
    conditions = [args.only == "busy"] if args.only else [False, True]
    ok = True
    for busy in conditions:
        result = build(args.size, args.competitors if busy else 0, args.keep)
        print(report(result), flush=True)
        ok = ok and result["returncode"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
