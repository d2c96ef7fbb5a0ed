"""The hostile samples graded through real nbgrader in the sandbox: exact scores, nothing harmed.

``examples/hostile_submissions`` (written by ``examples/make_submissions.py``) holds one
sample per class of attack: reading the reference solution (relative paths, the course
root, a committed symlink), deleting the gradebook and another student's files, appending
to ``course_lib``, a setsid daemon, signalling every process in sight, printing the
environment and printing 200 MB, plus an honest ``bystander`` and a folder named
"José García"; and, for issue 26, two samples of each class that still gave a wrong grade,
stopped the batch or slipped past a limit (a verifier failing as a whole, work done while
inputs are staged, replies that inflate when decoded, text that is not UTF-8, trees past
the search's limits, memory held in files, week 5's memory tests dodged, the grader's
paths printed). The batch (the example's samples and week 5's, as ``course grade`` with no
assignment named grades them) is graded once (module fixture); then every score and flag is
asserted, and the course, the release, the bystander's files and the machine are checked,
as are the grader's own peak memory and what the batch wrote.

Grading these samples is only safe where every place that runs student code is sandboxed:
the out-of-kernel verifier's student worker (``verification.py``) runs the answer cells
again. Where ``verify_notebook`` cannot run that worker in the sandbox, the fixture grades
without the out-of-kernel verification (``nbgrading._verify`` is replaced by a no-op) rather than let
``kills_everything`` signal every process on the machine with the grader's rights.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import inspect
import io
import os
import runpy
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from course_lib.grader import cli, nbgrading, verification
from course_lib.grader._submissions import safe_student_id
from course_lib.grader.sandbox import available

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600),
              pytest.mark.skipif(available() is not None, reason=str(available()))]

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "examples" / "hostile_submissions"
MARKER = "HOSTILE-SAMPLE-WAS-HERE"
TOKEN = "ghp_grader0secret0token0never0shown"
JOSE = safe_student_id("José García")
LATIN1 = safe_student_id(os.fsdecode(b"Jos\xe9 Garc\xeda"))
HONEST = ("bystander", JOSE)
"""The two honest students of the batch: graded right whatever the others do."""

# Points: test_count_visible 2, test_count_hidden 2, test_count_speed 4, test_unknown_visible 1,
# test_unknown_hidden 1 (10 in all). Every attack fails, so each sample scores what its honest
# answers earn; steals_solutions has none of its own.
EXPECTED = {
    "steals_solutions": (0, set()),
    "vandal": (10, set()),
    "patches_course_lib": (10, set()),
    "leaves_daemon": (10, set()),
    "kills_everything": (10, set()),
    "prints_environ": (10, set()),
    "prints_200mb": (10, set()),
    "bystander": (10, set()),
    JOSE: (10, set()),
    # nbgrader records the failed tests from the kernel's replies, traceback or not: 0 for
    # the count tests (and none of them could be checked outside); unknown_ids 2
    "callable_answer": (2, set()),
    # right in the kernel, but it cannot leave it to be checked: every count test (8 points)
    # scores 0, flagged with the kernel's figures (a rebound assert_same could have passed
    # a wrong one there); unknown_ids 2
    "callable_right_answer": (2, {"unverified"}),
    # the rebound assert_same passes the wrong answer's count tests in the kernel; outside it
    # the answer cannot be checked, so they score 0, flagged; the speed test fails anyway
    "uncheckable_wrong_answer": (2, {"unverified"}),
    # the forged report and the kill reach nothing: a slow answer's 6 points
    "forges_report": (6, set()),
    "burns_cpu": (6, set()),
    "drops_numpy": (10, set()),
    "leaks_hidden_tests": (10, set()),
    "symlink_loops": (10, set()),
    # the grader's processes are not in the sandbox's /proc: nothing to renice or to read
    "renices_others": (10, set()),
    "reads_proc_environ": (10, set()),
    # in the verifier's worker every reply is a pickle (one that would start a command in
    # the grader): never unpickled, so the answers cannot even be loaded there; every test
    # the verifier checks is stored as failed
    "sends_a_pickle": (0, {"verdict-differs"}),
    # the work done while the inputs arrived is billed to the batch: a slow answer's 6
    "smuggles_into_staging": (6, set()),
    # the results are read while the worker is stopped: none yet, the speed test fails
    "answers_before_computing": (6, set()),
    # a terabyte announced: refused unread, the worker killed, every checked test failed
    "giant_reply": (0, {"verdict-differs"}),
    "opens_network": (10, set()),
    "plants_startup_files": (10, set()),
    # the sandbox refuses its processes past the limit, and the 50 it leaves sleeping die
    # with the sandbox (checked below: no process with the marker survives)
    "fork_bomb": (10, set()),
    # --- issue 26 -------------------------------------------------------------------------
    # 1. the verifier runs past the notebook's limit (a hang at load, slow calls): every test
    # cell 0, flagged; the first had 6 in its kernel (wrong answers, assert_same rebound)
    "slow_only_in_worker": (0, {"unverified"}),
    "slow_calls_in_worker": (0, {"unverified"}),
    # 2. the slow answer's work done while inputs are staged, by a reaped child or a
    # never-reaped helper: the whole sandbox's CPU is billed, a slow answer's 6 points
    "forks_while_staged": (6, set()),
    "helper_precomputes": (6, set()),
    # 3. replies that would inflate past the decoding limit are refused unread: the
    # correctness tests cannot be decided outside (0, flagged), the speed test fails
    "declares_huge_array": (0, {"unverified", "verdict-differs"}),
    "inflates_json_tree": (0, {"unverified", "verdict-differs"}),
    # 4. a lone surrogate in the worker's messages, a Latin-1 folder name with non-UTF-8 file
    # names inside (graded under a safe id; the link's name is in a note)
    "lone_surrogate": (2, {"verdict-differs"}),
    LATIN1: (10, {"note"}),
    # 5. repositories past the search's limits: refused, that submission alone
    "deep_tree": (0, {"refused"}),
    "wide_tree": (0, {"refused"}),
    # 6. memory held in /tmp or in memory files, and a disk quota: the kernel is stopped in
    # its first answer cell, nothing after it runs
    "fills_tmp": (0, {"memory-limit"}),
    "holds_memfd": (0, {"memory-limit"}),
    "fills_disk": (0, {"disk-quota"}),
    # 7. week 5 (16 automatic points): the whole file read with tracemalloc stopped, or in a
    # forked child, earns no more than the honest whole-file read: the memory cell's 2 points
    # are lost outside the kernel (its memory cells are graded there only, so the kernel gives
    # no figure to differ from). The child's reported peaks are tracemalloc's readings and
    # agree with the grader's; the stopped tracemalloc reads 0 B in the grader's hands, beside
    # the figures the notebook reported (1 of 3 there)
    "week5_whole_file": (14, set()),
    "week5_hides_from_tracemalloc": (12, set()),
    "week5_reads_in_a_child": (14, set()),
    # 8. the grader's paths printed, or raised in the worker's messages: none in the feedback
    "prints_host_paths": (10, set()),
    "raises_host_paths": (2, {"verdict-differs"}),
}
_SAMPLES = runpy.run_path(str(ROOT / "examples" / "make_submissions.py"))
UNPICKLED, NETWORK_PORT = Path(_SAMPLES["UNPICKLED"]), _SAMPLES["NETWORK_PORT"]
PROTECTED = ("solutions", "assignments", "examples", "nbgrader_config.py")
"""Course paths that nobody edits while the tests run: compared byte for byte."""


def _worker_is_sandboxed() -> bool:
    # The verifier's API, not a guess from its source: verify_notebook(sandboxed=...) runs the
    # student worker in the sandbox (course grade passes it on unless --no-sandbox).
    return "sandboxed" in inspect.signature(verification.verify_notebook).parameters


def _digests(paths) -> dict[str, str]:
    found = {}
    for top in paths:
        top = ROOT / top
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file() or p.is_symlink())
        for path in files:
            data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
            found[str(path.relative_to(ROOT))] = hashlib.sha256(data).hexdigest()
    return found


def _git_status() -> set[str]:
    done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return set(done.stdout.splitlines())


def _hostile_processes() -> list[str]:
    # leaves_daemon's daemon carries the marker on its command line. (Other sandboxes, run
    # by others on this machine at the same time, are uid 65534 as well: not a criterion.)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if MARKER.encode() in cmdline and pid != str(os.getpid()):
            found.append(f"{pid}: {cmdline[:120]!r}")
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade every hostile sample once, sandboxed; return what it left behind and how long it took.

    One batch, as ``course grade --submissions DIR`` with no assignment named grades it: the
    example's samples and week 5's, with the two honest students among them.
    """
    base = tmp_path_factory.mktemp("hostile")
    submissions = base / "submissions"
    shutil.copytree(HOSTILE, submissions, symlinks=True)
    for relative, target in _SAMPLES["LOOP_LINKS"].items():
        (submissions / relative).symlink_to(target)
    _odd_repositories(submissions)
    bystander_sent = (submissions / "bystander" / "example" / "example.ipynb").read_bytes()
    grading = base / "grading"
    # Every temporary folder of the batch goes in one place of its own, checked empty after it
    # (/tmp itself is shared with whatever else runs on the machine). Short: socket paths.
    scratch = Path(tempfile.mkdtemp(prefix="hb-"))
    scratch.chmod(0o755)
    before = {"digests": _digests(PROTECTED), "git": _git_status(), "hostile": _hostile_processes(),
              "threads": set(threading.enumerate()), "tasks": set(os.listdir("/proc/self/task"))}
    args = ["grade", "--submissions", str(submissions), "--grading-dir", str(grading),
            "--timeout", str(CELL_TIMEOUT), "--notebook-timeout", str(NOTEBOOK_TIMEOUT), "--memory-limit", "2GB",
            "--no-progress"]
    out = io.StringIO()
    UNPICKLED.unlink(missing_ok=True)
    planted = _planted()
    listener = _Listener(NETWORK_PORT)
    with listener, pytest.MonkeyPatch.context() as patch, _TreeMemory() as memory:
        patch.setenv("GITHUB_TOKEN", TOKEN)
        patch.setenv("COURSE_DB_URL", f"sqlite:///{grading / 'gradebook.db'}")
        patch.setenv("TMPDIR", str(scratch))
        patch.setattr(tempfile, "tempdir", None)
        if not _worker_is_sandboxed():
            patch.setattr(nbgrading, "_verify", lambda *args, **kwargs: ([], {}))
        started = time.perf_counter()
        with contextlib.redirect_stdout(out):
            status = cli.main(args)
        seconds = time.perf_counter() - started
    time.sleep(1.0)  # a daemon that survived would write again within this second
    left = {"threads": [t.name for t in set(threading.enumerate()) - before["threads"]],
            "tasks": [Path(f"/proc/self/task/{t}/comm").read_text().strip()
                      for t in set(os.listdir("/proc/self/task")) - before["tasks"]
                      if Path(f"/proc/self/task/{t}").exists()],
            "tmp": sorted(p.name for p in scratch.iterdir())}
    shutil.rmtree(scratch, ignore_errors=True)
    rows = {}
    with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
        for assignment in ("example", "week5"):
            for submission in gb.find_assignment(assignment).submissions:
                grades = [g for nb in submission.notebooks for g in nb.grades]
                rows[submission.student.id] = {"score": sum(g.auto_score or 0 for g in grades),
                                               "cells": {g.name: g.auto_score for g in grades},
                                               "name": (submission.student.first_name, submission.student.last_name)}
    with (grading / "flags.csv").open(newline="", encoding="utf-8") as fh:
        flags = {}
        for row in csv.DictReader(fh):
            flags.setdefault(row["student"], set()).add(row["flag"])
    print(f"\nhostile batch: {len(rows)} submissions graded in {seconds:.1f} s "
          f"(verification {'on' if _worker_is_sandboxed() else 'off: the worker is not sandboxed yet'}); "
          f"peak memory of the grader's processes {memory.grader / 1e6:,.0f} MB ({memory.added / 1e6:,.0f} MB "
          f"over this process's {memory.before / 1e6:,.0f} MB before the batch; PSS; the sum of their "
          f"resident sets peaked at {memory.grader_rss / 1e6:,.0f} MB), with the sandboxed students' "
          f"{memory.everything / 1e6:,.0f} MB (sampled every {_TreeMemory.EVERY} s); "
          f"load average {os.getloadavg()[0]:.1f}")
    _remove_odd_repositories(submissions)
    return {"grading": grading, "status": status, "stdout": out.getvalue(), "rows": rows, "flags": flags,
            "before": before, "bystander_sent": bystander_sent, "seconds": seconds, "left": left,
            "connections": listener.seen, "planted": _planted() - planted, "memory": memory}


CELL_TIMEOUT = 30
"""Seconds a cell may run: the samples that are slow only in the worker keep each cell and
call under it, so that the notebook's limit is what stops them."""

NOTEBOOK_TIMEOUT = 60
"""Seconds a notebook may run, kernel or verifier: the samples that are slow only in the
verifier's worker are stopped by it. Both wait out the limit asleep, so it is the batch's
floor twice over: at 120 s they were 243 s of a 431 s batch (7 December 2026, load about
1). The slowest honest notebooks, week 5's, took 24-27 s in all (kernel and verifier), and
no cell of theirs over 6 s."""


def _odd_repositories(submissions: Path) -> None:
    """Make what git should not carry, in the test's copy: names that are not UTF-8, a deep and a wide tree."""
    for folder, raw in _SAMPLES["NON_UTF8"].items():
        target = os.path.join(os.fsencode(submissions), raw)
        os.rename(submissions / folder, target)
        with open(os.path.join(target, b"notes-\xff\xfe.txt"), "wb") as fh:
            fh.write(b"a file whose name is not UTF-8\n")
        os.symlink(b"notes-\xff\xfe.txt", os.path.join(target, b"link-\xe9"))
    for folder, depth in _SAMPLES["DEEP_TREES"].items():
        path = str(submissions / folder)
        for _ in range(depth):  # os.makedirs recurses once per level: not past 1,000
            path = os.path.join(path, "d")
            os.mkdir(path)
    for folder, count in _SAMPLES["WIDE_TREES"].items():
        for i in range(count):
            sub = submissions / folder / f"f{i // 1000}"
            if i % 1000 == 0:
                sub.mkdir()
            (sub / str(i)).touch()


def _remove_odd_repositories(submissions: Path) -> None:
    # shutil.rmtree recurses once per level on Python 3.11: the deep tree goes level by level.
    for folder, depth in _SAMPLES["DEEP_TREES"].items():
        for level in range(depth, 0, -1):
            os.rmdir(os.path.join(str(submissions / folder), *["d"] * level))


class _TreeMemory:
    """The peak memory of this process and its descendants while a block runs.

    ``grader``: the processes outside any sandbox (this one, the verifiers, the reference
    processes, the sandboxes' wrappers); ``everything``: with the sandboxed kernels and
    workers too. Both as proportional set sizes (PSS): a reference process forked from its
    verifier shares most of its pages with it, and a sum of resident sets would count them
    twice; ``grader_rss`` is that sum, for comparison. Sampled every ``EVERY`` seconds.
    ``before``: this process's own PSS as the block began. Under ``make test`` this process
    is a pytest-xdist worker that has run other test modules first, and what they left
    behind is not the batch's doing (CI: 1,084 MB in all where the batch alone, run by
    itself, peaked at 691 MB), so ``added`` (the peak less ``before``) is what is judged.
    """

    EVERY = 0.1

    def __init__(self) -> None:
        self.grader = self.everything = self.grader_rss = self.before = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tree-memory", daemon=True)

    def _watch(self) -> None:
        import psutil

        own = os.readlink("/proc/self/ns/pid")
        me = psutil.Process()
        while not self._stop.wait(self.EVERY):
            grader = everything = grader_rss = 0
            for process in [me, *me.children(recursive=True)]:
                try:
                    memory = process.memory_full_info()
                    inside = os.readlink(f"/proc/{process.pid}/ns/pid") != own
                except (OSError, psutil.Error):
                    continue
                everything += memory.pss
                if not inside:
                    grader, grader_rss = grader + memory.pss, grader_rss + memory.rss
            self.grader, self.everything = max(self.grader, grader), max(self.everything, everything)
            self.grader_rss = max(self.grader_rss, grader_rss)

    @property
    def added(self) -> int:
        """The grader's peak less what this process held before the block."""
        return self.grader - self.before

    def __enter__(self) -> "_TreeMemory":
        import gc

        import psutil

        gc.collect()
        self.before = psutil.Process().memory_full_info().pss
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


class _Listener:
    """A TCP server on the grader's loopback for the time of the batch; records who connected."""

    def __init__(self, port: int) -> None:
        import socket

        self.seen: list[bytes] = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="tcp-listener", daemon=True)

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                with contextlib.suppress(OSError):
                    self.seen.append(conn.recv(100) or b"(connected)")

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


def _planted() -> set[str]:
    """Start-up files holding the marker where a later Python or IPython of this machine looks."""
    import site
    import sys

    places = [Path.home() / ".ipython", Path(site.getusersitepackages()), Path("/tmp"),
              *[Path(p) for p in sys.path if p.endswith("site-packages")]]
    found = set()
    for place in places:
        for path in ([*place.glob("sitecustomize.py"), *place.glob("*.pth")] if place.name != ".ipython"
                     else place.glob("profile_*/startup/*.py")):
            with contextlib.suppress(OSError):
                if MARKER in path.read_text(errors="replace"):
                    found.add(str(path))
    return found


def test_every_hostile_sample_scores_exactly_as_expected(graded):
    scores = {s: r["score"] for s, r in graded["rows"].items()}
    expected = {s: e for s, (e, _) in EXPECTED.items()}
    # On a miss, each wrong sample's cells and flags: enough to tell a kill from a lost cell.
    assert scores == expected, {s: (graded["rows"][s]["cells"], graded["flags"].get(s))
                                for s in scores if scores[s] != expected.get(s)}
    assert {s: graded["flags"].get(s, set()) for s in EXPECTED} == {s: f for s, (_, f) in EXPECTED.items()}


def test_the_bystander_and_the_gradebook_are_untouched(graded):
    grading = graded["grading"]
    assert graded["rows"]["bystander"]["cells"] == graded["rows"][JOSE]["cells"]
    submitted = grading / "submitted" / "bystander" / "example" / "example.ipynb"
    assert submitted.read_bytes() == graded["bystander_sent"]
    for step, name in (("autograded", "example.ipynb"), ("feedback", "example.html")):
        text = (grading / step / "bystander" / "example" / name).read_text(encoding="utf-8")
        assert MARKER not in text


def test_the_course_and_the_machine_are_unchanged(graded):
    before = graded["before"]
    assert _digests(PROTECTED) == before["digests"]
    # Others may edit tracked files while this runs: what must not appear is a deletion, or
    # a changed file holding the samples' marker.
    new = _git_status() - before["git"]
    assert not [line for line in new if line[:2].strip().startswith("D")], new
    changed = [ROOT / line[3:] for line in new]
    assert not [p for p in changed if p.is_file() and MARKER in p.read_text(errors="replace")]
    tracked = subprocess.run(["git", "grep", "-l", MARKER, "--", "course_lib"], cwd=ROOT,
                             capture_output=True, text=True)
    assert tracked.stdout == "", f"course_lib was written to: {tracked.stdout}"
    assert before["hostile"] == [] and _hostile_processes() == [], "a sandboxed process outlived its submission"


def test_nothing_sent_back_is_unpickled_and_nothing_reaches_the_network(graded):
    # sends_a_pickle: a pickle that would create UNPICKLED in the grader when loaded;
    # opens_network: a connection to this listener on the grader's loopback
    assert not UNPICKLED.exists()
    assert graded["connections"] == []


def test_no_start_up_file_is_planted_outside_the_sandbox(graded):
    assert graded["planted"] == set()


def test_grading_leaves_no_thread_behind(graded):
    # Each kernel's client keeps a heartbeat thread and ZeroMQ I/O threads until it is
    # cleaned up; left behind, they retry dead sockets and eat CPU that every later
    # measurement in the grading process is charged for.
    # Process-wide singletons may stay (tqdm's monitor thread, a BLAS pool): a few threads,
    # not some per graded notebook.
    left = graded["left"]
    assert set(left["threads"]) <= {"tqdm_monitor"}, left
    assert not [t for t in left["tasks"] if t.startswith("ZMQ")], left
    assert len(left["tasks"]) < len(EXPECTED), left


def test_secrets_and_huge_outputs_stay_out_of_the_feedback(graded):
    grading = graded["grading"]
    for path in grading.rglob("*"):
        if path.is_file() and path.suffix in (".html", ".ipynb", ".csv", ".log"):
            text = path.read_text(encoding="utf-8", errors="replace")
            assert TOKEN not in text, f"the grader's token reached {path}"
            assert "COURSE_DB_URL" not in text or path.suffix == ".log", path
    environ = (grading / "autograded" / "prints_environ" / "example" / "example.ipynb").read_text()
    assert "NBGRADER_EXECUTION" in environ  # the cell did print the environment it had
    big = grading / "feedback" / "prints_200mb" / "example" / "example.html"
    notebook = grading / "autograded" / "prints_200mb" / "example" / "example.ipynb"
    assert big.stat().st_size < 3_000_000 and notebook.stat().st_size < 2_500_000
    assert "output cut by the grader" in big.read_text(encoding="utf-8")


def test_hidden_tests_never_reach_the_feedback(graded):
    # leaks_hidden_tests prints every later cell's source (hooks on the kernel's cell events)
    # and the kernel's input history; the hidden tests ran in that kernel.
    solution = (ROOT / "solutions" / "example" / "example.ipynb").read_text()
    hidden = ["_expected_count", "_list_count", "sorted(set(queries).difference(catalogue))"]
    assert all(h in solution for h in hidden)
    for student in ("leaks_hidden_tests", "bystander"):
        page = (graded["grading"] / "feedback" / student / "example" / "example.html").read_text(encoding="utf-8")
        assert [h for h in hidden if h in page] == [], student


def test_grading_logs_stay_small(graded):
    sizes = {p.name: p.stat().st_size for p in (graded["grading"] / "logs" / "example").iterdir()}
    assert max(sizes.values()) < 5_000_000, sizes


def test_a_student_name_is_kept_beside_the_safe_id(graded):
    grading = graded["grading"]
    assert graded["rows"][JOSE]["name"] == ("José", "García")
    with (grading / "grades.csv").open(newline="", encoding="utf-8") as fh:
        row = next(r for r in csv.DictReader(fh) if r["student_id"] == JOSE)
    assert (row["first_name"], row["last_name"]) == ("José", "García")
    with (grading / "students.csv").open(newline="", encoding="utf-8") as fh:
        assert {r["student"]: r["name"] for r in csv.DictReader(fh)}[JOSE] == "José García"


def test_the_batch_finishes_whatever_one_submission_does(graded):
    # Issue 26: status 1 is "done, but look" (flags); a crash or a stopped batch would be 2 or
    # a traceback. Both honest students are graded right, every file is whole and readable.
    grading = graded["grading"]
    assert graded["status"] == 1
    for student in HONEST:
        assert graded["rows"][student]["score"] == 10 and student not in graded["flags"], student
    with (grading / "grades.csv").open(newline="", encoding="utf-8") as fh:  # strict UTF-8
        grades = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(fh)}
    assert {s for _, s in grades} == set(EXPECTED)
    assert {s: float(grades[(a, s)]["score"]) for a, s in grades} == {s: e for s, (e, _) in EXPECTED.items()}
    with (grading / "flags.csv").open(newline="", encoding="utf-8") as fh:
        flagged = list(csv.DictReader(fh))
    assert {(r["student"], r["flag"]) for r in flagged} >= {(s, f) for s, (_, fs) in EXPECTED.items() for f in fs}
    surrogate = next(r["detail"] for r in flagged if r["student"] == "lone_surrogate")
    assert "bad \\ud800 byte" in surrogate  # written out, not lost
    printed = graded["stdout"]
    assert all(student in printed for student in EXPECTED), printed[-2000:]
    refused = next(r["detail"] for r in flagged if r["student"] == "deep_tree" and r["flag"] == "refused")
    assert "nested more than 64 deep" in refused


def test_the_graders_memory_stays_under_a_gigabyte(graded):
    # What the grader's own processes (this one, the verifiers and their reference processes)
    # add to this process's memory before the batch, while the batch's replies declare 300
    # million items or 1.5 GB of JSON objects, and week 5's verifiers read its 1.2-million-line file.
    memory = graded["memory"]
    assert memory.added < 1e9, (memory.added, memory.grader, memory.before, memory.grader_rss)


def test_the_verifiers_leave_no_scratch_copy_behind(graded):
    # slow_only_in_worker's verifier was killed past its limit; its worker's copy went with it.
    assert graded["left"]["tmp"] == []


def test_nothing_about_the_graders_machine_reaches_a_student(graded):
    import sys

    machine = {str(ROOT), os.path.realpath(sys.executable), sys.prefix, sys.base_prefix, str(Path.home()),
               str(graded["grading"])}
    for student in ("prints_host_paths", "raises_host_paths"):
        page = (graded["grading"] / "feedback" / student / "example" / "example.html").read_text(encoding="utf-8")
        assert [p for p in machine if p in page] == [], student
    printed = (graded["grading"] / "feedback" / "prints_host_paths" / "example" / "example.html").read_text()
    assert "&lt;python&gt;" in printed and "&lt;course&gt;" in printed  # what was printed, labelled
    raised = (graded["grading"] / "feedback" / "raises_host_paths" / "example" / "example.html").read_text()
    assert "ValueError: at &lt;python&gt;" in raised


def test_grading_refuses_to_start_without_a_sandbox(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(nbgrading, "sandbox_available",
                        lambda: "bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    status = cli.main(["grade", "example", "--submissions", str(HOSTILE), "--grading-dir", str(tmp_path / "g"),
                       "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1
    assert "apt-get install bubblewrap" in err and "--no-sandbox" in err
    assert not (tmp_path / "g" / "gradebook.db").exists()


def test_no_sandbox_grades_anyway_and_flags_every_grade(tmp_path, monkeypatch):
    submissions = tmp_path / "subs"
    shutil.copytree(HOSTILE / "bystander", submissions / "bystander")
    monkeypatch.setattr(nbgrading, "_verify", lambda *args, **kwargs: ([], {}))  # the honest sample: kernel only
    with contextlib.redirect_stdout(io.StringIO()):
        status = cli.main(["grade", "example", "--submissions", str(submissions), "--grading-dir",
                           str(tmp_path / "g"), "--no-progress", "--no-sandbox"])
    with (tmp_path / "g" / "flags.csv").open(newline="") as fh:
        flags = [(r["student"], r["flag"]) for r in csv.DictReader(fh)]
    assert status == 1 and flags == [("bystander", "unsandboxed")]


def test_output_caps_keep_what_decides_a_grade():
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from course_lib.grader._nbpreprocessors import CapOutputs

    noisy = new_code_cell(outputs=[new_output("stream", name="stdout", text="x" * 300_000),
                                   new_output("stream", name="stderr", text="warning\n" * 10_000),
                                   new_output("error", ename="AssertionError", evalue="no", traceback=["t" * 10**6])])
    score = new_code_cell(outputs=[new_output("display_data", data={"image/png": "i" * 3_000_000}),
                                   new_output("execute_result", data={"text/plain": "1.5"}, execution_count=3)])
    nb = new_notebook(cells=[noisy, score])
    CapOutputs(max_cell_bytes=100_000, max_notebook_bytes=150_000).preprocess(nb, {})
    kinds = [(o.output_type, o.get("name")) for o in noisy.outputs]
    assert kinds == [("stream", "stdout"), ("stream", "stderr"), ("error", None), ("stream", "stdout")]
    assert noisy.outputs[2].ename == "AssertionError" and noisy.outputs[1].text
    assert "output cut by the grader" in noisy.outputs[-1].text
    assert [o.data for o in score.outputs if o.output_type == "execute_result"] == [{"text/plain": "1.5"}]
    assert sum(len(str(o)) for c in nb.cells for o in c.outputs) < 160_000


@pytest.mark.parametrize("how", ["workers", "dask"])
def test_parallel_grading_runs_kernels_in_the_sandbox_too(tmp_path, how):
    # prints_environ is harmless outside a sandbox (the spawned workers run the verification
    # unpatched): its printed environment shows where its kernel ran.
    submissions = tmp_path / "subs"
    shutil.copytree(HOSTILE / "prints_environ", submissions / "prints_environ")
    args = ["grade", "example", "--submissions", str(submissions), "--grading-dir", str(tmp_path / "g"),
            "--no-progress"]
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
        if how == "workers":
            args += ["--workers", "2"]
        else:
            from distributed import LocalCluster

            cluster = stack.enter_context(LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                                       dashboard_address=None))
            args += ["--scheduler", cluster.scheduler_address]
        assert cli.main(args) in (0, 1)
    printed = (tmp_path / "g" / "autograded" / "prints_environ" / "example" / "example.ipynb").read_text()
    assert "'USER': 'nobody'" in printed and "'HOME': '/tmp/cs-" in printed
