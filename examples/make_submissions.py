"""Write the sample submissions of the example assignment from its released notebook.

Each sample is the student notebook ``assignments/example/example.ipynb`` with its two
answer cells filled in (or broken) one way; the student id names the kind::

    python examples/make_submissions.py          # rewrite examples/submissions/
    python examples/make_submissions.py --check  # exit 1 if they are out of date

Run it after ``course release example`` so the samples keep the released cells and
checksums. ``tests/test_grading_e2e.py`` grades every sample and asserts its exact score.
"""

from __future__ import annotations

import argparse
import textwrap
import os
import sys
from pathlib import Path

import nbformat

from course_lib.grader._submissions import answered, grade_id

ROOT = Path(__file__).resolve().parents[1]
RELEASED = ROOT / "assignments" / "example" / "example.ipynb"
OUT = ROOT / "examples" / "submissions"

COUNT_HEAD = 'def count_known(catalogue, queries):\n    """How many of ``queries`` are in ``catalogue`` (a repeated query counts every time)."""\n'
UNKNOWN_HEAD = 'def unknown_ids(catalogue, queries):\n    """The distinct ids in ``queries`` that are not in ``catalogue``, sorted."""\n'

FAST = COUNT_HEAD + """\
    known = set(catalogue)
    return sum(1 for q in queries if q in known)
"""

SLOW = COUNT_HEAD + """\
    count = 0
    for q in queries:
        if q in catalogue:  # still a list: every test scans it
            count += 1
    return count
"""

UNKNOWN = UNKNOWN_HEAD + """\
    return sorted(set(queries) - set(catalogue))
"""

WRONG_COUNT = COUNT_HEAD + "    return len(set(catalogue) & set(queries))\n"

FRESH_WORKER_MARK = "LOADED-IN-A-FRESH-WORKER"
FRESH_WORKER_SAYS_SO = f"""

import os
import sys

if "course_lib.grader._student_worker" in sys.modules:  # a fresh worker of the verifier's
    print("{FRESH_WORKER_MARK}")
"""
SAMPLES: dict[str, dict[str, str]] = {
    # fast and right: full marks
    "correct_fast": {"count_known": FAST, "unknown_ids": UNKNOWN},
    # right but still scanning the list: the speed test fails
    "correct_slow": {"count_known": SLOW, "unknown_ids": UNKNOWN},
    # fast but counts distinct ids; unknown ids unsorted with repeats
    "wrong": {
        "count_known": WRONG_COUNT,
        "unknown_ids": UNKNOWN_HEAD + "    return [q for q in queries if q not in catalogue]\n",
    },
    # the first miss never advances i: every call on a real input runs forever
    "infinite_loop": {
        "count_known": COUNT_HEAD + """\
    known = set(catalogue)
    count, i = 0, 0
    while i < len(queries):
        if queries[i] in known:
            count += 1
            i += 1
    return count
""",
        "unknown_ids": UNKNOWN,
    },
    # slow, and hides its own time from time.perf_counter
    "patches_perf_counter": {
        "count_known": SLOW + """

import time

_real_clock = time.perf_counter
_hidden = 0.0


def _clock_without_my_time():
    return _real_clock() - _hidden


def _timed_out_of_sight(fn):
    def wrapper(*args):
        global _hidden
        start = _real_clock()
        result = fn(*args)
        _hidden += _real_clock() - start
        return result
    return wrapper


count_known = _timed_out_of_sight(count_known)
time.perf_counter = _clock_without_my_time
""",
        "unknown_ids": UNKNOWN,
    },
    # slow, but remembers answers: unbeatable on a benchmark that repeats its input
    "memoises": {
        "count_known": """\
_answers = {}


""" + SLOW.replace("def count_known(", "def _count(") + """

def count_known(catalogue, queries):
    key = (tuple(catalogue), tuple(queries))
    if key not in _answers:
        _answers[key] = _count(catalogue, queries)
    return _answers[key]
""",
        "unknown_ids": UNKNOWN,
    },
    # an answer that claims to equal anything
    "always_equal": {
        "count_known": """\
class _Anything(int):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


""" + COUNT_HEAD + "    return _Anything(0)\n",
        "unknown_ids": UNKNOWN,
    },
    # kills the kernel when timed on large inputs, hoping the speed test is skipped
    "os_exit": {
        "count_known": FAST.replace("    known = set(catalogue)\n", """\
    import os

    if len(queries) > 20_000:  # only the speed test uses inputs this large
        os._exit(0)
    known = set(catalogue)
"""),
        "unknown_ids": UNKNOWN,
    },
    # slow, and while graded makes the provided baseline slower to look fast next to it
    "nbgrader_execution": {
        "count_known": SLOW + """

import os

if os.environ.get("NBGRADER_EXECUTION") == "autograde":
    _baseline = count_known_slow

    def count_known_slow(catalogue, queries):
        for _ in range(20):
            result = _baseline(catalogue, queries)
        return result
""",
        "unknown_ids": UNKNOWN,
    },
    # slow, and replaces the speed test's helper with one that always passes
    "rebinds_assert_speedup": {
        "count_known": SLOW + """

def assert_speedup(*args, **kwargs):  # the hidden speed test now calls this one
    return None
""",
        "unknown_ids": UNKNOWN,
    },
    # slow, and makes the grading package's own measurement report a 50x speed-up (patched in
    # course_lib.grading._speed, where assert_speedup looks it up)
    "patches_grading_internals": {
        "count_known": SLOW + """

import course_lib.grading._speed as _grading


def _flattering_measurement(*args, **kwargs):
    return _grading._SpeedResult(ratio=50.0, low=45.0, high=55.0, rounds=20, baseline_seconds=0.05,
                                 candidate_seconds=0.001, measurements=1)


_grading._measure_speedup = _flattering_measurement
""",
        "unknown_ids": UNKNOWN,
    },
    # counts distinct ids (wrong), and replaces the tests' comparison with one that never fails
    "rebinds_assert_same": {
        "count_known": WRONG_COUNT + """

def assert_same(*args, **kwargs):  # every later test cell now calls this one
    return None
""",
        "unknown_ids": UNKNOWN,
    },
    # wrong, and makes NumPy's and pandas' comparison functions say "equal" to everything
    "patches_numpy_compare": {
        "count_known": WRONG_COUNT + """

import numpy as np
import pandas as pd


def _always_true(*args, **kwargs):
    return True


def _never_raises(*args, **kwargs):
    return None


np.array_equal = np.allclose = np.array_equiv = np.isclose = _always_true
np.testing.assert_array_equal = np.testing.assert_allclose = np.testing.assert_equal = _never_raises
pd.testing.assert_frame_equal = pd.testing.assert_series_equal = _never_raises
""",
        "unknown_ids": UNKNOWN,
    },
    # right and fast, then grabs memory until something stops it
    "memory_hog": {
        "count_known": FAST,
        "unknown_ids": UNKNOWN + """

import numpy as np

_ballast = []
for _ in range(200):  # 80 GB if nothing stops it
    _ballast.append(np.ones(50_000_000))
""",
    },
    # slow, but returns a fast wrong answer whenever it is being timed
    "games_the_timer": {
        "count_known": """import inspect


""" + SLOW.replace("def count_known(", "def _count(") + """

def count_known(catalogue, queries):
    if any(frame.filename.endswith("timing.py") for frame in inspect.stack(0)):
        return 0  # inside a timed loop: nobody checks, surely
    return _count(catalogue, queries)
""",
        "unknown_ids": UNKNOWN,
    },
    # right and fast; says so in the grading log should a fresh worker of the verifier's run
    # its cells (it does not: the notebook's own kernel answers the verifier)
    "served_by_its_kernel": {"count_known": FAST + FRESH_WORKER_SAYS_SO, "unknown_ids": UNKNOWN},
    # the same, and its kernel ends itself as it starts to answer the verifier: a fresh worker
    # runs the cells instead (once, said in the log) and grades them in full
    "dies_when_serving": {"count_known": FAST + FRESH_WORKER_SAYS_SO + """

import importlib.abc


class _DieWhenServing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "course_lib.grader._student_worker":
            os._exit(3)
        return None


sys.meta_path.insert(0, _DieWhenServing())
""", "unknown_ids": UNKNOWN},
}


# Hostile samples (issue 14): each attacks the grader from an answer cell and then answers
# honestly, so a sandbox that holds gives an exact, known score. They live apart from the
# samples above (in examples/hostile_submissions) because grading them is only safe where
# every place that runs student code is sandboxed; tests/test_sandbox_grading.py grades them.
HOSTILE_OUT = ROOT / "examples" / "hostile_submissions"
MARKER = "HOSTILE-SAMPLE-WAS-HERE"
"""Text every hostile sample writes wherever it manages to write: found anywhere, it got out."""

_COURSE_ROOT = """import os
import course_lib

# The course repository is wherever the imported course_lib comes from.
_root = os.path.dirname(os.path.dirname(os.path.abspath(course_lib.__file__)))
"""

_DAEMON = f"""import os
import sys

_DAEMON = '''
import time
# {MARKER}: the daemon
while True:
    for path in ("daemon.txt", "../../bystander/example/example.ipynb"):
        try:
            with open(path, "a") as fh:
                fh.write("{MARKER}")
        except OSError:
            pass
    time.sleep(0.05)
'''
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", _DAEMON])
    os._exit(0)
os.wait()

"""

UNPICKLED = f"/tmp/{MARKER}-unpickled"
"""The file a pickle sent by sends_a_pickle would create in the grader, were it unpickled."""
NETWORK_PORT = 47123
"""The loopback port opens_network tries (tests/test_sandbox_grading.py listens on it)."""
_IN_WORKER = """import sys

_ATTACK = {body!r}


def _attack(module, _ns=globals(), _source=_ATTACK):
    _ns["_w"] = module
    exec(_source, _ns)


def _when_serving(attack):
    # The notebook's kernel becomes the verifier's worker once it imports the module that
    # serves it: then the attack runs, with the module just loaded.
    import importlib.abc
    import importlib.util

    class _Hook(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "course_lib.grader._student_worker":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                attack(module)

            spec.loader.exec_module = exec_module
            return spec

    return _Hook()


if "course_lib.grader._student_worker" in sys.modules:  # a fresh worker of the verifier's
    _attack(sys.modules["course_lib.grader._student_worker"])
else:
    sys.meta_path.insert(0, _when_serving(_attack))
"""


def _in_worker(body: str) -> str:
    """A cell that runs ``body`` (indented by 4) where the verifier's student worker is: at once
    in a fresh worker, and in the notebook's kernel when it starts serving the verifier."""
    return _IN_WORKER.format(body=textwrap.dedent(body))

HOSTILE: dict[str, dict[str, str]] = {
    # reads the reference solution (relative paths, the course root, a committed symlink)
    # and runs its answers; with nothing found, the answers stay undefined and score 0
    "steals_solutions": {
        "count_known": _COURSE_ROOT + """import json

_found = None
for _path in ("../../../solutions/example/example.ipynb", "../../../../solutions/example/example.ipynb",
              "../../../../../solutions/example/example.ipynb",
              "course/solutions/example/example.ipynb",  # the link committed beside this notebook
              os.path.join(_root, "solutions", "example", "example.ipynb")):
    try:
        with open(_path, encoding="utf-8") as _fh:
            _found = json.load(_fh)
        break
    except OSError:
        continue
if _found is not None:
    for _cell in _found["cells"]:
        if _cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") in ("count_known", "unknown_ids"):
            exec("".join(_cell["source"]))
""",
        "unknown_ids": "# taken from the reference solution, together with count_known\n",
    },
    # deletes the gradebook and another student's files, or failing that writes into them
    "vandal": {
        "count_known": _COURSE_ROOT + f"""import shutil

_targets = ["../../../gradebook.db", "../../../../grading/gradebook.db",
            os.path.join(_root, "grading", "gradebook.db"),
            "../../bystander/example/example.ipynb", "../../../submitted/bystander/example/example.ipynb",
            "../../../feedback/bystander/example/example.html",
            os.path.join(_root, "examples", "hostile_submissions", "bystander", "example", "example.ipynb"),
            os.path.join(_root, "solutions", "example", "example.ipynb")]
for _target in _targets:
    try:
        with open(_target, "a") as _fh:
            _fh.write("{MARKER}")
    except OSError:
        pass
    try:
        os.remove(_target)
    except OSError:
        pass
for _folder in ("../../bystander", "../../../submitted/bystander"):
    shutil.rmtree(_folder, ignore_errors=True)

""" + FAST,
        "unknown_ids": UNKNOWN,
    },
    # appends to the course's own modules, so that later kernels and the grader run it
    "patches_course_lib": {
        "count_known": _COURSE_ROOT + f"""import glob

for _module in glob.glob(os.path.join(_root, "course_lib", "**", "*.py"), recursive=True):
    try:
        with open(_module, "a") as _fh:
            _fh.write("\\n# {MARKER}\\n")
    except OSError:
        pass

""" + FAST,
        "unknown_ids": UNKNOWN,
    },
    # a setsid double-forked daemon that keeps writing after the kernel is gone
    "leaves_daemon": {"count_known": _DAEMON + FAST, "unknown_ids": UNKNOWN},
    # signals its parent, pid 1 and every process it can see, after answering the first task
    "kills_everything": {
        "count_known": FAST,
        "unknown_ids": UNKNOWN + """

import os
import signal

for _pid in [os.getppid(), 1] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if _pid != os.getpid():
        try:
            os.kill(_pid, signal.SIGKILL)
        except OSError:
            pass
""",
    },
    # prints the environment, hoping for the grader's tokens in the feedback
    "prints_environ": {"count_known": "import os\n\nprint(dict(os.environ))\n\n" + FAST, "unknown_ids": UNKNOWN},
    # prints 200 MB into the notebook
    "prints_200mb": {
        "count_known": FAST + """

for _ in range(200):
    print("x" * 1_000_000)
""",
        "unknown_ids": UNKNOWN,
    },
    # an honest student whose files the others attack
    "bystander": {"count_known": FAST, "unknown_ids": UNKNOWN},
    # a folder named as an LMS export names it: graded under a safe id, the name kept
    "José García": {"count_known": FAST, "unknown_ids": UNKNOWN},
    # a wrong answer that is a callable object (it cannot leave the kernel to be checked)
    # and a kernel that publishes no traceback, hoping no test is seen to fail
    "callable_answer": {
        "count_known": """class _Counter:
    def __call__(self, catalogue, queries):
        return 0  # wrong


count_known = _Counter()
get_ipython().showtraceback = lambda *args, **kwargs: None
""",
        "unknown_ids": UNKNOWN,
    },
    # a right answer, but a callable object: fine in the kernel, yet it cannot leave the kernel
    # to be checked, so the grader cannot trust what the kernel says of it
    "callable_right_answer": {
        "count_known": """class _Counter:
    def __call__(self, catalogue, queries):
        known = set(catalogue)
        return sum(1 for q in queries if q in known)


count_known = _Counter()
""",
        "unknown_ids": UNKNOWN,
    },
    # in the verifier's worker only: writes a forged report of full marks (1006 points a cell)
    # to the verifier's standard output through /proc/PPID/fd/1, then kills it
    "forges_report": {
        "count_known": SLOW + """

import json
import os
import signal
import sys

if "course_lib.grader._student_worker" in sys.modules:
    _forged = json.dumps([{"grade_id": g, "score": 1006.0, "max_score": 4.0, "detail": "passed",
                           "conclusive": True, "measured": 99.0, "refused": False}
                          for g in ("test_count_visible", "test_count_hidden", "test_count_speed")])
    for _pid in (os.getppid(), 1):
        try:
            with open(f"/proc/{_pid}/fd/1", "w") as _out:
                _out.write(_forged + "\\n")
            os.kill(_pid, signal.SIGKILL)
        except OSError:
            pass
""",
        "unknown_ids": UNKNOWN,
    },
    # a slow answer with CPU burners in new sessions, out of the worker's process group, to
    # slow the reference down while it is timed
    "burns_cpu": {
        "count_known": SLOW + """

import os
import subprocess
import sys

for _ in range(2):
    subprocess.Popen([sys.executable, "-c", "while True: pass  # HOSTILE-SAMPLE-WAS-HERE"],
                     start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
""",
        "unknown_ids": UNKNOWN,
    },
    # drops numpy.py and pandas.py into its working folder, for any Python started there
    "drops_numpy": {
        "count_known": f"""for _name in ("numpy.py", "pandas.py", "course_lib.py"):
    with open(_name, "w") as _fh:
        _fh.write("# {MARKER}\\nraise SystemExit(0)\\n")

""" + FAST,
        "unknown_ids": UNKNOWN,
    },
    # prints every later cell's source (the hidden tests, run in this kernel) into its output
    "leaks_hidden_tests": {
        "count_known": """get_ipython().events.register("pre_run_cell", lambda info: print(info.raw_cell))
get_ipython().events.register("post_run_cell", lambda result: print(result.info.raw_cell))

""" + FAST,
        "unknown_ids": UNKNOWN + """
print(list(get_ipython().user_ns.get("In", [])))
""",
    },
    # lowers the priority of every other process it can see, the verifier's and the
    # reference's included (their scheduler autogroup, then setpriority)
    "renices_others": {
        "count_known": """import os

for _pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if _pid == os.getpid():
        continue
    try:
        with open(f"/proc/{_pid}/autogroup", "w") as _fh:
            _fh.write("19")
    except OSError:
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, _pid, 19)
    except OSError:
        pass

""" + FAST,
        "unknown_ids": UNKNOWN,
    },
    # prints the environment of every process it can see, hoping for the grader's tokens
    "reads_proc_environ": {
        "count_known": """import os

for _pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        with open(f"/proc/{_pid}/environ", "rb") as _fh:
            print(_pid, _fh.read().replace(b"\\0", b" ")[:2000])
    except OSError:
        pass

""" + FAST,
        "unknown_ids": UNKNOWN,
    },
    # a wrong answer that is a callable object (it cannot leave the kernel to be checked)
    # and a rebound assert_same, so that the kernel's correctness tests pass
    "uncheckable_wrong_answer": {
        "count_known": """class _Counter:
    def __call__(self, catalogue, queries):
        return 0  # wrong


count_known = _Counter()


def assert_same(*args, **kwargs):  # every later test cell in this kernel calls this one
    return None
""",
        "unknown_ids": UNKNOWN,
    },
    # in the verifier's worker: every reply becomes a pickle that, unpickled, would start a
    # command in the grader (subprocess.Popen reached through a NumPy submodule)
    "sends_a_pickle": {
        "count_known": _in_worker(f"""    def _text(s):
        return b"\\x8c" + bytes([len(s.encode())]) + s.encode()

    _payload = (b"\\x80\\x04" + _text("numpy.testing._private.utils") + _text("subprocess.Popen")
                + b"\\x93](" + _text("touch") + _text("{UNPICKLED}") + b"e\\x85R.")
    _w._as_data = lambda reply: _payload

""") + FAST,
        "unknown_ids": UNKNOWN,
    },
    # a slow answer that does its work while the worker receives the inputs (before any
    # clock starts) and answers the timed calls from that cache
    "smuggles_into_staging": {
        "count_known": SLOW + _in_worker("""    _cache, _real = {}, _w.pickle

    class _Loading:
        @staticmethod
        def loads(data):
            obj = _real.loads(data)
            if isinstance(obj, list) and all(isinstance(a, tuple) and len(a) == 2 for a in obj):
                for args in obj:
                    _cache[id(args[1])] = _slow(*args)
            return obj

        def __getattr__(self, name):
            return getattr(_real, name)

    _slow = count_known

    def count_known(catalogue, queries):
        hit = _cache.pop(id(queries), None)
        return _slow(catalogue, queries) if hit is None else hit

    _w.pickle = _Loading()
"""),
        "unknown_ids": UNKNOWN,
    },
    # a slow answer that answers a timed batch at once and writes the results from a thread
    # afterwards, hoping they are read after the clock stopped
    "answers_before_computing": {
        "count_known": SLOW + _in_worker("""    import threading

    _staged, _write = [None], _w._write_results

    def _run_batch(fn, staged):
        _staged[0] = (fn, staged)
        return ("ok", [])

    def _write_results(fd, outcome):
        fn, staged = _staged[0]
        threading.Thread(target=lambda: _write(fd, ("ok", [fn(*a) for a in staged])), daemon=True).start()

    _w._run_batch, _w._write_results = _run_batch, _write_results
"""),
        "unknown_ids": UNKNOWN,
    },
    # in the worker, once the answers are loaded: every reply announces a terabyte and
    # streams zeros, to exhaust the grader's memory
    "giant_reply": {
        "count_known": _in_worker("""    import os

    _sent, _plain = [], _w.write_frame

    def _flood(fd, data):
        _sent.append(1)
        if len(_sent) == 1:
            return _plain(fd, data)
        os.write(fd, _w._HEADER.pack(2**40))
        while True:
            os.write(fd, bytes(1 << 20))

    _w.write_frame = _flood

""") + FAST,
        "unknown_ids": UNKNOWN,
    },
    # tries to reach a server on the grader's loopback (a database, another kernel)
    "opens_network": {
        "count_known": f"""import socket

for _port in ({NETWORK_PORT}, 5432, 8888):
    try:
        with socket.create_connection(("127.0.0.1", _port), timeout=1) as _s:
            _s.sendall(b"{MARKER}")
    except OSError as _exc:
        print("no connection:", _exc)

""" + FAST,
        "unknown_ids": UNKNOWN,
    },
    # plants start-up files for any later Python or IPython it might share a home or a
    # folder with: IPython startup, sitecustomize, a .pth in the user's site-packages
    "plants_startup_files": {
        "count_known": f"""import os
import site
import sys

_evil = "print('{MARKER}')\\n"
_places = [os.path.expanduser("~/.ipython/profile_default/startup/00-evil.py"),
           os.path.join(site.getusersitepackages(), "evil.pth"),
           "/tmp/sitecustomize.py", "sitecustomize.py",
           *[os.path.join(p, "sitecustomize.py") for p in sys.path if p.endswith("site-packages")]]
for _path in _places:
    try:
        os.makedirs(os.path.dirname(_path) or ".", exist_ok=True)
        with open(_path, "w") as _fh:
            _fh.write(("import os; " if _path.endswith(".pth") else "") + _evil)
    except OSError as _exc:
        print("cannot plant", _path, _exc)

""" + FAST,
        "unknown_ids": UNKNOWN,
    },
    # starts processes until the sandbox refuses more, then leaves 50 of them sleeping (so
    # that its own kernel can still start threads: its score does not depend on a race)
    "fork_bomb": {
        "count_known": f"""import subprocess

_started = []
try:
    while len(_started) < 5000:
        _started.append(subprocess.Popen(["/bin/bash", "-c", "exec -a {MARKER} sleep 120"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
except OSError as _exc:
    print("stopped after", len(_started), "processes:", _exc)
for _p in _started[50:]:
    _p.kill()
    _p.wait()

""" + FAST,
        "unknown_ids": UNKNOWN,
    },
    # a submission folder whose links point at itself, a loop for any search that follows them
    # (made by tests/test_sandbox_grading.py in its copy, see LOOP_LINKS)
    "symlink_loops": {"count_known": FAST, "unknown_ids": UNKNOWN},
}

# Issue 26: each class of attack that still gave a wrong grade, stopped the batch or slipped
# past a limit, twice, by different mechanisms. They are in HOSTILE too (nbgrader's layout)
# unless they need a Classroom repository (HOSTILE_CLASSROOM) or week 5's memory cells
# (HOSTILE_WEEK5); tests/test_sandbox_grading.py grades them all in one batch.
_SURROGATE = "\\ud800"
_ANSWERS_AS = """    import struct

    _head = {head}
    _bomb, _plain = b"MFDATA01" + struct.pack("<Q", len(_head)) + _head, _w._as_data

    def _as_data(reply):
        value = reply[1] if len(reply) > 1 else None
        if reply[0] == "ok" and (type(value) is int or (type(value) is list and value
                                                        and all(type(v) is int for v in value))):
            return _bomb
        return _plain(reply)

    _w._as_data = _as_data
    _w._dump = lambda outcome, fh: fh.write(_as_data(outcome))  # a batch's results too
"""
"""In the worker: every answer (a number, or a batch's list of numbers), as a reply or as a
batch's results, replaced by a data header holding the JSON tree ``head``."""
_FROM_STAGING = """
    def count_known(catalogue, queries):
        hit = _cache.pop(id(queries), None)
        return _slow(catalogue, queries) if hit is None else hit

    _w.receive_inputs = _staging
"""
"""In the worker, after a ``_staging`` that fills ``_cache`` while inputs arrive: answer from it."""
HOSTILE.update({
    # 1. the verifier fails as a whole. Wrong, with assert_same rebound (6 points in the
    # kernel), and in the worker only both answer cells take 25 s (each under the 30 s a
    # cell may take in tests/test_sandbox_grading.py) and every call 10 s more: the
    # verification runs past the notebook's limit (60 s there), and every test cell must
    # score 0.
    "slow_only_in_worker": {
        "count_known": WRONG_COUNT + """

def assert_same(*args, **kwargs):  # every later test cell in this kernel calls this one
    return None

""" + _in_worker("""    import time

    time.sleep(25)
    _wrong = count_known

    def count_known(catalogue, queries):
        time.sleep(10)
        return _wrong(catalogue, queries)
"""),
        "unknown_ids": UNKNOWN + "\n" + _in_worker("""    __import__("time").sleep(25)
"""),
    },
    # 1. right answers, but every call takes 20 s in the worker (under the 30 s a call may
    # take): the verification as a whole runs past the notebook's limit.
    "slow_calls_in_worker": {
        "count_known": FAST + _in_worker("""    import time

    _fast = count_known

    def count_known(catalogue, queries):
        time.sleep(20)
        return _fast(catalogue, queries)
"""),
        "unknown_ids": UNKNOWN,
    },
    # 2. a slow answer that forks a child to compute every staged input's answer while the
    # inputs are received (before any clock), waits for it, and answers the timed calls
    # from that cache: the child's CPU is the sandbox's, billed to the batch.
    "forks_while_staged": {
        "count_known": SLOW + _in_worker("""    import json
    import os

    _slow, _receive, _cache = count_known, _w.receive_inputs, {}

    def _staging(fd, data, sizes):
        staged = _receive(fd, data, sizes)
        if isinstance(staged, list) and all(isinstance(a, tuple) and len(a) == 2 for a in staged):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                with os.fdopen(w, "w") as out:
                    json.dump([_slow(*args) for args in staged], out)
                os._exit(0)
            os.close(w)
            with os.fdopen(r) as inp:
                answers = json.load(inp)
            os.waitpid(pid, 0)
            for args, answer in zip(staged, answers):
                _cache[id(args[1])] = answer
        return staged
""" + _FROM_STAGING),
        "unknown_ids": UNKNOWN,
    },
    # 2. the same work done by a helper started at load time in a session of its own (never
    # reaped, not a child of the worker), fed each batch's inputs while they are staged
    "helper_precomputes": {
        "count_known": SLOW + _in_worker("""    import os
    import pickle

    _slow, _receive, _cache = count_known, _w.receive_inputs, {}
    _jobs_r, _jobs_w = os.pipe()
    _done_r, _done_w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(_jobs_w)
            os.close(_done_r)
            with os.fdopen(_jobs_r, "rb") as jobs, os.fdopen(_done_w, "wb") as done:
                while True:
                    staged = pickle.load(jobs)
                    pickle.dump([_slow(*args) for args in staged], done)
                    done.flush()
        os._exit(0)
    os.wait()
    os.close(_jobs_r)
    os.close(_done_w)
    _jobs, _done = os.fdopen(_jobs_w, "wb"), os.fdopen(_done_r, "rb")

    def _staging(fd, data, sizes):
        staged = _receive(fd, data, sizes)
        if isinstance(staged, list) and all(isinstance(a, tuple) and len(a) == 2 for a in staged):
            pickle.dump(staged, _jobs)
            _jobs.flush()
            for args, answer in zip(staged, pickle.load(_done)):
                _cache[id(args[1])] = answer
        return staged
""" + _FROM_STAGING),
        "unknown_ids": UNKNOWN,
    },
    # 3. every answer comes back as 97 bytes declaring an object array of 300 million items
    "declares_huge_array": {
        "count_known": FAST + _in_worker(_ANSWERS_AS.format(
            head="""b'{"tree":{"ndarray":{"shape":[300000000],"items":[]}},"sizes":[]}'""")),
        "unknown_ids": UNKNOWN,
    },
    # 3. every answer comes back as 24 MB of JSON (within the 512 MiB a reply may have)
    # that would become about 1.5 GB of Python objects once parsed
    "inflates_json_tree": {
        "count_known": FAST + _in_worker(_ANSWERS_AS.format(
            head="""b'{"tree":{"list":[' + b'{"list":[]},' * 2_000_000 + b'null]},"sizes":[]}'""")),
        "unknown_ids": UNKNOWN,
    },
    # 4. in the worker, every call raises with a lone surrogate in its message: it reaches
    # the verdicts, the flags and the feedback
    "lone_surrogate": {
        "count_known": FAST + _in_worker(f"""
    def count_known(catalogue, queries):
        raise ValueError("bad {_SURROGATE} byte")
"""),
        "unknown_ids": UNKNOWN,
    },
    # 6. 3 GB written into /tmp (a tmpfs: memory, not disk) under the course's memory limit,
    # in files of 768 MB (a file may not pass 1 GB)
    "fills_tmp": {
        "count_known": FAST + """
import time

try:
    for _i in range(4):
        with open(f"/tmp/ballast-{_i}", "wb") as _fh:
            for _ in range(12):  # 12 x 64 MB
                _fh.write(b"x" * 64_000_000)
except OSError as _exc:
    print("stopped writing:", _exc)
time.sleep(30)  # held while the grader looks
""",
        "unknown_ids": UNKNOWN,
    },
    # 6. 3 GB held in anonymous memory files, in no process's resident memory
    "holds_memfd": {
        "count_known": FAST + """
import os
import time

_held = []
try:
    for _ in range(6):
        _fd = os.memfd_create("ballast")
        for _ in range(8):  # 8 x 64 MB a file
            os.write(_fd, b"y" * 64_000_000)
        _held.append(_fd)
except OSError as _exc:
    print("stopped writing:", _exc)
time.sleep(30)  # held while the grader looks
""",
        "unknown_ids": UNKNOWN,
    },
    # 6. 1.8 GB written to disk in the notebook's own folder (each file under the 1 GB a file may take)
    "fills_disk": {
        "count_known": FAST + """
import time

try:
    for _i in range(3):
        with open(f"ballast-{_i}", "wb") as _fh:
            for _ in range(10):
                _fh.write(b"z" * 60_000_000)
except OSError as _exc:
    print("stopped writing:", _exc)
time.sleep(30)  # held while the grader looks
""",
        "unknown_ids": UNKNOWN,
    },
    # 8. prints where the grader keeps the course and Python: its interpreter, its modules,
    # the sandbox's command line (bwrap's, pid 1) and its mount list
    "prints_host_paths": {
        "count_known": """import sys

import course_lib

print(sys.executable, course_lib.__file__, sys.prefix, sys.base_prefix, sys.path)
with open("/proc/1/cmdline", "rb") as _fh:
    print(_fh.read().replace(b"\\0", b" ").decode(errors="replace"))
with open("/proc/self/mountinfo") as _fh:
    print(_fh.read())

""" + FAST,
        "unknown_ids": UNKNOWN,
    },
    # 8. in the worker, every call raises with those paths in its message, which reaches the
    # speed cell's verdict in the feedback
    "raises_host_paths": {
        "count_known": FAST + _in_worker("""    import course_lib

    def count_known(catalogue, queries):
        raise ValueError(f"at {sys.executable} with {course_lib.__file__} in {sys.path}")
"""),
        "unknown_ids": UNKNOWN,
    },
})

HOSTILE_CLASSROOM: dict[str, dict[str, str]] = {
    # 4. a Classroom repository whose folder name is in Latin-1 bytes, holding a file and a
    # link whose names are not UTF-8 (made in the test's copy: see NON_UTF8); honest answers
    "latin1_folder": {"count_known": FAST, "unknown_ids": UNKNOWN},
    # 5. a repository with 1,200 nested folders beside its notebook (made in the test's copy)
    "deep_tree": {"count_known": FAST, "unknown_ids": UNKNOWN},
    # 5. a repository with 60,000 files beside its notebook (made in the test's copy)
    "wide_tree": {"count_known": FAST, "unknown_ids": UNKNOWN},
}
"""Hostile samples in GitHub Classroom's layout: ``example-NAME/example.ipynb``."""

NON_UTF8 = {"example-latin1_folder": b"example-Jos\xe9 Garc\xeda"}
"""Classroom folders renamed to bytes that are not UTF-8 in a test's copy (git and Jupyter Book
would have to carry such names otherwise); each gets a file and a link with such names too."""
DEEP_TREES = {"example-deep_tree": 1_200}
"""Folders nested this deep in a test's copy (a committed one would slow every tool that walks the repository)."""
WIDE_TREES = {"example-wide_tree": 60_000}
"""Empty files made in a test's copy, spread over folders of 1,000."""

_WHOLE_FILE = """    readings = pd.read_csv(path)
    valid = readings[readings["status"] != "fault"]
    return valid.groupby("region")["kwh"].agg(readings="count", total_kwh="sum", mean_kwh="mean", max_kwh="max")
"""
_SUMMARY_HEAD = ('def region_summary(path, chunksize=50_000):\n'
                 '    """Per region, over the readings that are not faults: the count, total, mean and largest kWh."""\n')
HOSTILE_WEEK5: dict[str, dict[str, str]] = {
    # 7. the honest control: the whole file at once (week 5's provided version, renamed)
    "week5_whole_file": {"region_summary": _SUMMARY_HEAD + _WHOLE_FILE},
    # 7. the same read with tracemalloc stopped around the whole computation, started again after
    "week5_hides_from_tracemalloc": {"region_summary": _SUMMARY_HEAD + """    import tracemalloc

    tracing = tracemalloc.is_tracing()
    tracemalloc.stop()
    try:
        readings = pd.read_csv(path)
        valid = readings[readings["status"] != "fault"]
        summary = valid.groupby("region")["kwh"].agg(readings="count", total_kwh="sum", mean_kwh="mean",
                                                      max_kwh="max")
        del readings, valid
    finally:
        if tracing:
            tracemalloc.start()
    return summary
"""},
    # 7. the same read in a forked child, the summary sent back through a pipe
    "week5_reads_in_a_child": {"region_summary": _SUMMARY_HEAD + """    import pickle

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        readings = pd.read_csv(path)
        valid = readings[readings["status"] != "fault"]
        summary = valid.groupby("region")["kwh"].agg(readings="count", total_kwh="sum", mean_kwh="mean",
                                                      max_kwh="max")
        with os.fdopen(w, "wb") as out:
            pickle.dump(summary, out)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as inp:
        summary = pickle.load(inp)
    os.waitpid(pid, 0)
    return summary
"""},
}
"""Hostile samples of week 5 (its memory cells): the other answers are the reference solution's."""


HOSTILE_LINKS = {"steals_solutions/example/course": "../../../.."}
"""Symbolic links committed in hostile samples: path -> target (here: the course repository)."""

LOOP_LINKS = {**{f"symlink_loops/{name}": "." for name in ("a", "b", "c")},
              **{f"symlink_loops/example/{name}": ".." for name in ("up", "again")}}
"""Links that make symlink_loops a loop, made only in a test's copy of the samples: committed,
they would send any tool that follows links through the repository (Jupyter Book's search
for source files) down 3**40 paths."""


def build_hostile() -> dict[str, str]:
    """Every hostile sample as file text, keyed by its path relative to ``examples/hostile_submissions``."""
    released = nbformat.read(RELEASED, as_version=4)
    files = {f"{student}/example/example.ipynb": nbformat.writes(answered(released, answers)) + "\n"
             for student, answers in sorted(HOSTILE.items())}
    files.update({f"example-{name}/example.ipynb": nbformat.writes(answered(released, answers)) + "\n"
                  for name, answers in sorted(HOSTILE_CLASSROOM.items())})
    week5 = nbformat.read(ROOT / "assignments" / "week5" / "week5.ipynb", as_version=4)
    reference = solution_answers("week5")
    files.update({f"{student}/week5/week5.ipynb": nbformat.writes(answered(week5, {**reference, **answers})) + "\n"
                  for student, answers in sorted(HOSTILE_WEEK5.items())})
    return dict(sorted(files.items()))


def solution_answers(assignment: str) -> dict[str, str]:
    """The reference solution's answer cells of ``assignment``, by grade id, without the solution markers."""
    source = nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    answers = {}
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution") and not meta.get("grade"):
            answers[meta["grade_id"]] = "".join(line for line in cell.source.splitlines(keepends=True)
                                                if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    return answers


def build() -> dict[str, str]:
    """Every sample as file text, keyed by its path relative to ``examples/submissions``."""
    released = nbformat.read(RELEASED, as_version=4)
    text = nbformat.writes(released) + "\n"
    files = {"untouched/example/example.ipynb": text,
             # cut short as if the upload broke off: not valid JSON
             "malformed_json/example/example.ipynb": text[: len(text) // 2]}
    for student, answers in SAMPLES.items():
        files[f"{student}/example/example.ipynb"] = nbformat.writes(answered(released, answers)) + "\n"
    deleted = answered(released, SAMPLES["correct_fast"])
    deleted.cells = [c for c in deleted.cells if grade_id(c) != "test_count_visible"]
    files["deleted_grade_cell/example/example.ipynb"] = nbformat.writes(deleted) + "\n"
    return dict(sorted(files.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report samples that are out of date")
    args = parser.parse_args(argv)
    stale = []
    for out, files in ((OUT, build()), (HOSTILE_OUT, build_hostile())):
        for relative, text in files.items():
            path = out / relative
            if path.exists() and path.read_text(encoding="utf-8") == text:
                continue
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    for relative, target in HOSTILE_LINKS.items():
        path = HOSTILE_OUT / relative
        if path.is_symlink() and os.readlink(path) == target:
            continue
        stale.append(path.relative_to(ROOT))
        if not args.check:
            path.unlink(missing_ok=True)
            path.symlink_to(target)
    if args.check:
        for relative in stale:
            print(f"out of date: {relative}")
        return 1 if stale else 0
    print(f"wrote {len(stale)} sample(s) in {OUT.relative_to(ROOT)} and {HOSTILE_OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
