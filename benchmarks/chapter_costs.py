"""What each chapter costs to run, in time and memory, at the small or the full size.

A reader who opens a chapter from the book's rocket menu, or runs a downloaded notebook,
runs it at the full size unless they set ``MEASURE_FIRST_SIZE=small`` (an unset variable
means ``full``: ``course_lib.claims.size``). This script runs chapters one after another
as a reader's Jupyter would: each in a fresh kernel, strict (``MEASURE_FIRST_STRICT=1``,
so a claim that does not hold stops the chapter), in ``book/`` as the book build does,
with a 600 s limit per cell (``_config.yml``). Per chapter it records:

- ``seconds``: wall time, kernel start to the last cell;
- ``cpu_seconds``: CPU time of the executing process, its kernel and everything the
  kernel started and waited for (from ``os.wait4``);
- ``peak_process_mb``: the largest resident set of any one of those processes (the
  kernel's high-water mark as the kernel keeps it, ``ru_maxrss``: no sampling gap can
  miss it);
- ``peak_all_mb``: the kernel and its child processes together (worker pools), sampled
  every ``--every`` seconds (a short peak between two samples can be missed);
- the load average before, after and at most during the chapter, and the claims'
  statuses from the executed notebook.

``--record`` merges the result into ``course_lib/chapter_costs.json`` under its size, with
each chapter's source hash, so a page that reads the record (``book/index.md``) can say
which chapters changed since. The executed notebooks can be kept (``--keep DIR``).

Usage::

    .venv/bin/python benchmarks/chapter_costs.py --size full --record     # every chapter
    .venv/bin/python benchmarks/chapter_costs.py --size small book/week3_algorithms.md
    .venv/bin/python benchmarks/chapter_costs.py --size full --competitors 1 --keep /tmp/nb \\
        book/week3_algorithms.md

Exit status 0 only if every chapter ran to its end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from book_build import competitors  # noqa: E402  (a sibling script, not a package)

from course_lib.book import COSTS, _notebook_pages  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RECORD = COSTS              # course_lib/chapter_costs.json: book.chapter_costs reads it
CELL_TIMEOUT = 600          # seconds per cell, as _config.yml's execute.timeout


def source_hash(doc: str) -> str:
    """SHA-256 of a chapter's source, to tell later whether the record still fits it."""
    return hashlib.sha256((ROOT / doc).read_bytes()).hexdigest()


def execute_one(doc: str, output: Path) -> int:
    """Run one chapter as the book does (a child process of :func:`run`)."""
    import jupytext
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = jupytext.read(ROOT / doc)
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str((ROOT / doc).parent)}})
    try:
        client.execute()
        status = 0
    except CellExecutionError as error:
        print(str(error)[-3000:], file=sys.stderr)
        status = 1
    nbformat.write(notebook, output)
    return status


def run(doc: str, size: str, every: float, keep: Path | None) -> dict:
    """Execute ``doc`` in a child process and measure it; returns its record."""
    import psutil

    folder = keep or Path(tempfile.mkdtemp(prefix="chapter-costs-"))
    folder.mkdir(parents=True, exist_ok=True)
    output = folder / Path(doc).with_suffix(".ipynb").name
    env = {**os.environ, "MEASURE_FIRST_SIZE": size, "MEASURE_FIRST_STRICT": "1"}
    env.pop("MPLBACKEND", None)     # as the Makefile: inline figures in the kernel
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    log = tempfile.TemporaryFile(mode="w+")      # a pipe left unread could fill and block
    child = subprocess.Popen([sys.executable, __file__, "--execute-one", doc, str(output)],
                             cwd=ROOT, env=env, stdout=log, stderr=log, text=True)
    watched = psutil.Process(child.pid)
    peak_all, load_max = 0, load_before
    while child.poll() is None:
        with_children = 0
        try:
            for proc in watched.children(recursive=True):   # the kernel and its workers
                try:
                    with_children += proc.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        peak_all = max(peak_all, with_children)
        load_max = max(load_max, os.getloadavg()[0])
        time.sleep(every)
    seconds = time.perf_counter() - started
    # Popen.poll has reaped the child; its rusage (with every descendant it waited for)
    # is in this process's RUSAGE_CHILDREN, which is why each chapter gets a fresh
    # measuring process in main() when more than one runs.
    usage = os_children_usage()
    log.seek(0)
    errors = log.read()
    log.close()
    return {"doc": doc, "sha256": source_hash(doc), "returncode": child.returncode,
            "seconds": round(seconds, 1), "cpu_seconds": round(usage["cpu"], 1),
            "peak_process_mb": round(usage["maxrss_mb"], 1),
            "peak_all_mb": round(peak_all / 2**20, 1),
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
            "load_max": round(load_max, 2), "claims": claim_statuses(output),
            "error": errors.strip()[-600:] if child.returncode else ""}


def os_children_usage() -> dict:
    """CPU seconds and the largest resident set of this process's reaped descendants."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu": usage.ru_utime + usage.ru_stime, "maxrss_mb": usage.ru_maxrss / 1024}


def claim_statuses(notebook_path: Path) -> dict[str, int]:
    """How many of the chapter's claims held, failed or were skipped."""
    counts: dict[str, int] = {}
    if not notebook_path.exists():
        return counts
    cells = json.loads(notebook_path.read_text(encoding="utf-8")).get("cells", [])
    for cell in cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name", "")
            if name.endswith("__claim"):
                # text/plain in a book build; papermill's record type under nbclient
                data = output.get("data", {})
                text = "".join(next((v for k, v in data.items() if k.endswith("text/plain")),
                                    ""))
                status = json.loads(text.strip("'"))["status"]
                counts[status] = counts.get(status, 0) + 1
    return counts


def machine() -> dict:
    """What the record was measured on."""
    import psutil

    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor()) \
        if Path("/proc/cpuinfo").exists() else platform.processor()
    return {"cpu": model, "cores": len(os.sched_getaffinity(0)),
            "memory_gb": round(psutil.virtual_memory().total / 1e9, 1),  # decimal, as the pages say
            "python": platform.python_version(), "system": platform.system()}


def record(results: list[dict], size: str, busy: int) -> None:
    """Merge ``results`` into RECORD under ``size`` (chapters not run keep their entry)."""
    data = json.loads(RECORD.read_text(encoding="utf-8")) if RECORD.exists() else {}
    entry = data.get(size, {"chapters": {}})
    for result in results:
        entry["chapters"][result["doc"]] = {
            **{k: v for k, v in result.items() if k not in ("doc", "error")},
            "competitors": busy,
            "recorded": dt.datetime.now().astimezone().isoformat(timespec="minutes")}
    entry["machine"] = machine()
    data[size] = entry
    RECORD.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def report(result: dict) -> str:
    claims = ", ".join(f"{k} {v}" for k, v in sorted(result["claims"].items())) or "none"
    line = (f"{result['doc']}: {result['seconds']:.0f} s wall, {result['cpu_seconds']:.0f} s "
            f"CPU, largest process {result['peak_process_mb']:.0f} MB, all processes "
            f"{result['peak_all_mb']:.0f} MB (sampled); load {result['load_before']:.1f} "
            f"before, {result['load_after']:.1f} after, {result['load_max']:.1f} at most; "
            f"claims: {claims}; exit status {result['returncode']}")
    return line + (f"\n  {result['error']}" if result["error"] else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="book/NAME.md (default: every page)")
    parser.add_argument("--size", choices=["small", "full"], default="full")
    parser.add_argument("--competitors", type=int, default=0,
                        help="CPU-bound processes beside the chapters (default none)")
    parser.add_argument("--every", type=float, default=0.2,
                        help="seconds between memory samples (default 0.2)")
    parser.add_argument("--keep", type=Path, help="keep the executed notebooks in DIR")
    parser.add_argument("--record", action="store_true",
                        help=f"merge the results into {RECORD.relative_to(ROOT)}")
    parser.add_argument("--execute-one", nargs=2, metavar=("DOC", "OUT"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--measure-one", metavar="DOC", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.execute_one:
        return execute_one(args.execute_one[0], Path(args.execute_one[1]))
    if args.measure_one:
        print(json.dumps(run(args.measure_one, args.size, args.every, args.keep)))
        return 0
    # every page of _toc.yml with code to run, in reading order
    docs = args.chapters or _notebook_pages(ROOT)
    unknown = [d for d in docs if not (ROOT / d).is_file()]
    if unknown:
        parser.error(f"no such chapter: {', '.join(unknown)} "
                     "(give paths like book/week3_algorithms.md)")
    results = []
    with competitors(args.competitors):
        for doc in docs:
            # A measuring process per chapter: RUSAGE_CHILDREN then covers that chapter only.
            command = [sys.executable, __file__, "--measure-one", doc, "--size", args.size,
                       "--every", str(args.every)]
            if args.keep:
                command += ["--keep", str(args.keep)]
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{doc}: the measuring process failed:\n{done.stderr[-2000:]}")
                return 1
            result = json.loads(done.stdout.strip().splitlines()[-1])
            print(report(result), flush=True)
            results.append(result)
    if args.record:
        # A chapter stopped part-way (a claim that did not hold) would understate its cost.
        finished = [r for r in results if r["returncode"] == 0]
        for result in results:
            if result["returncode"] != 0:
                print(f"{result['doc']}: stopped part-way, not recorded (its entry, if any, "
                      "is kept)")
        record(finished, args.size, args.competitors)
    return 0 if all(r["returncode"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
