"""Week 6 submissions that tests/test_assignments.py grades besides the reference.

The notebook is worth 16 automatic points: correctness 3, the speed test 6 (all from 10x,
none at 3x or less), the measurements of Task 2 5 (the first and warm calls of ``admit``
against the grader's reading of the same code in a fresh process, 3; a warm call of
``admit_slow`` and the student's speed-up against the grader's readings, 2) and two questions;
the three written explanations (6 points) are marked by hand and left out here.

``slow``: right but not compiled. ``admit`` moves the state into arrays, as the reference
does, but runs the loop in the interpreter (no ``@njit``): the same decisions as
``admit_slow``, and no faster (indexing NumPy arrays one element at a time in the
interpreter costs more than lists and dictionaries). Every correctness point and no speed
point. Its measurements are honest: with nothing to compile, its first call is no longer
than its warm ones, its speed-up is below 1, and the grader's readings of the same code say
so too, so they earn the 5 points of Task 2 (the checks grade the measurement, not the
effect the chapter predicts). The answers to the two questions are the reference's.

``wrong``: compiled and fast, but the refill is not capped at ``capacity``, so a client that
was quiet for a while gets a burst of more than ``capacity`` tokens. No speed point and no
point for its measurements (both check results first), and not every correctness point.

The speed points follow the course's rule for alternative answers: the technique the
notebook teaches earns all of them, a loop that is merely tidier earns little or nothing,
and anything in between earns what its measured speed-up earns on the log scale between the
cell's thresholds. The ranges come from in-process measurements (``timing.compare``, one
thread, 300,000 fresh requests, December 2026, the 2-core course machine shared with other
jobs) and are wide enough for a 2-core grader with one busy neighbour.

``typed_dict``: ``admit_slow`` compiled as it is, with ``numba.typed.Dict`` for the clients'
state (where a student lands who passes the columns in as arrays and lets the dictionaries
stay): the same decisions, 5.0x-6.1x measured (the reference 36x-39x): about half the speed
points (up to 5.1 of 6; none at load averages 4-5, see EXPECT). Its own measurements are
honest (in a fresh process: first call 1.31 s, warm call 25 ms, against the reference's
0.93 s and 2.5 ms), so they earn the 5 points of Task 2.

``eager``: the kernel compiled eagerly, from an explicit signature, when it is defined (a good
practice: no compile inside the first call a user waits for). The honest first call is then
about as quick as a warm one, and so is the grader's reading of it: full marks (under the
old check, which wanted the first call 5 times the warm one, it lost all 3).

Ways to get the measurements wrong:

``invented``: figures typed in instead of measured (a first call of 0.2 s and a warm one of
20 ms, ``admit_slow`` at 5 s, a speed-up of 1,000: guesses that the compile is quick, the
interpreter very slow and Numba worth a factor of a thousand): at most about a point of the
5. (With ``admit_slow`` guessed at 2 s and a speed-up of 200, a self-test at load averages of
8 to 13, where the grader's copy took longer by the wall clock, gave the guesses 1.15 of 2.)

``compile_in_warm``: the "warm" figure is the mean of the first two calls, so half of the
compile is inside it (answer (b) of question 1): the first call is then only about twice the
warm figure, and the first/warm check gives nothing; the other two figures are honest.

``speedup_inverted``: ``timing.compare(admit, admit_slow, ...)``, the arguments the wrong way
round, so ``speedup`` is the slow version's speed relative to the compiled one (about 0.03):
a thousand times off the grader's ratio, no point for it; ``slow_call_s`` keeps its point.

``form_only``: the two questions answered by the look of the options alone, the longest option
each time (a student who has not read the chapter): neither is right, so the questions earn
nothing; the rest is the reference's.
"""

# The honest first call of admit, timed as the reference times it.
FIRST_CALL = """\
import time

requests = make_requests(300_000, seed=3)
start = time.perf_counter()
admit(requests, 2.0, 10.0)
first_call_s = time.perf_counter() - start
"""



def _median_of_five(fn: str, name: str) -> str:
    """Code that sets ``name`` to the median seconds of five calls of ``fn`` on the requests."""
    return f"""\
times = []
for _ in range(5):
    start = time.perf_counter()
    {fn}(requests, 2.0, 10.0)
    times.append(time.perf_counter() - start)
{name} = float(np.median(times))
"""


SLOW_CALL = _median_of_five("admit_slow", "slow_call_s")  # honest

VARIANTS = {
    "slow": {
        "admit": '''\
def admit(requests, rate, capacity):
    """The token buckets in arrays, looped over in the interpreter."""
    times = requests["time"].to_numpy()
    clients = requests["client"].to_numpy()
    costs = requests["cost"].to_numpy()
    n_clients = int(clients.max()) + 1
    tokens = np.full(n_clients, float(capacity))
    last_seen = np.zeros(n_clients)
    seen = np.zeros(n_clients, dtype=bool)
    admitted = np.zeros(times.shape[0], dtype=bool)
    for i in range(times.shape[0]):
        c = clients[i]
        if seen[c]:
            tokens[c] = min(capacity, tokens[c] + (times[i] - last_seen[c]) * rate)
        else:
            seen[c] = True
        last_seen[c] = times[i]
        if tokens[c] >= costs[i]:
            tokens[c] -= costs[i]
            admitted[i] = True
    return admitted
''',
    },
    "wrong": {
        "admit": '''\
@njit
def admit_kernel(times, clients, costs, n_clients, rate, capacity):
    """Compiled, but the refill is never capped at capacity."""
    tokens = np.full(n_clients, capacity)
    last_seen = np.zeros(n_clients)
    seen = np.zeros(n_clients, dtype=np.bool_)
    admitted = np.zeros(times.shape[0], dtype=np.bool_)
    for i in range(times.shape[0]):
        c = clients[i]
        if seen[c]:
            tokens[c] += (times[i] - last_seen[c]) * rate
        else:
            seen[c] = True
        last_seen[c] = times[i]
        if tokens[c] >= costs[i]:
            tokens[c] -= costs[i]
            admitted[i] = True
    return admitted


def admit(requests, rate, capacity):
    clients = requests["client"].to_numpy()
    return admit_kernel(requests["time"].to_numpy(), clients, requests["cost"].to_numpy(),
                        int(clients.max()) + 1, float(rate), float(capacity))
''',
    },
    "typed_dict": {
        "admit": '''\
from numba import types
from numba.typed import Dict


@njit
def admit_kernel(times, clients, costs, rate, capacity):
    """The provided loop, compiled, with the clients' state in typed dictionaries."""
    tokens = Dict.empty(key_type=types.int64, value_type=types.float64)
    last_seen = Dict.empty(key_type=types.int64, value_type=types.float64)
    admitted = np.zeros(times.shape[0], dtype=np.bool_)
    for i in range(times.shape[0]):
        client = clients[i]
        if client in tokens:
            tokens[client] = min(capacity, tokens[client] + (times[i] - last_seen[client]) * rate)
        else:
            tokens[client] = capacity
        last_seen[client] = times[i]
        if tokens[client] >= costs[i]:
            tokens[client] -= costs[i]
            admitted[i] = True
    return admitted


def admit(requests, rate, capacity):
    return admit_kernel(requests["time"].to_numpy(), requests["client"].to_numpy(),
                        requests["cost"].to_numpy(), float(rate), float(capacity))
''',
    },
    "eager": {
        "admit": '''\
@njit("boolean[:](float64[:], int64[:], int64[:], int64, float64, float64)")
def admit_kernel(times, clients, costs, n_clients, rate, capacity):
    """The token buckets, compiled when defined, for these argument types only."""
    tokens = np.full(n_clients, capacity)
    last_seen = np.zeros(n_clients)
    seen = np.zeros(n_clients, dtype=np.bool_)
    admitted = np.zeros(times.shape[0], dtype=np.bool_)
    for i in range(times.shape[0]):
        c = clients[i]
        if seen[c]:
            tokens[c] = min(capacity, tokens[c] + (times[i] - last_seen[c]) * rate)
        else:
            seen[c] = True
        last_seen[c] = times[i]
        if tokens[c] >= costs[i]:
            tokens[c] -= costs[i]
            admitted[i] = True
    return admitted


def admit(requests, rate, capacity):
    # Writable copies: pandas hands out read-only views of its columns (copy-on-write), and
    # the signature above is for writable arrays.
    clients = requests["client"].to_numpy(dtype=np.int64, copy=True)
    return admit_kernel(requests["time"].to_numpy(dtype=np.float64, copy=True), clients,
                        requests["cost"].to_numpy(dtype=np.int64, copy=True), int(clients.max()) + 1,
                        float(rate), float(capacity))
''',
    },
    "invented": {
        "measurements": """\
import time

requests = make_requests(300_000, seed=3)
first_call_s = 0.2   # typed in, not measured
warm_call_s = 0.02
slow_call_s = 5.0
speedup = 1000.0
""",
    },
    "compile_in_warm": {
        "measurements": FIRST_CALL + """\
start = time.perf_counter()
admit(requests, 2.0, 10.0)
second_call_s = time.perf_counter() - start
warm_call_s = (first_call_s + second_call_s) / 2  # the compile is half inside this figure
""" + SLOW_CALL + """\
speedup = timing.compare(admit_slow, admit, budget=0.5,
                         make_args=lambda: (make_requests(300_000, seed=None), 2.0, 10.0)).ratio
""",
    },
    "speedup_inverted": {
        "measurements": FIRST_CALL + _median_of_five("admit", "warm_call_s") + SLOW_CALL + """\
# the arguments the wrong way round: admit_slow's speed relative to admit
speedup = timing.compare(admit, admit_slow, budget=0.5,
                         make_args=lambda: (make_requests(300_000, seed=None), 2.0, 10.0)).ratio
""",
    },
    "form_only": {
        "questions": """\
q1 = "a"  # the longest option
q2 = "d"  # the longest option
""",
    },
}

_OTHER_CORRECTNESS = {"test_admit_visible": "full", "test_admit_hidden": "full", "test_q1": "full", "test_q2": "full"}
# Honest figures earn the measurement points in full on a machine with one busy neighbour. The
# student's figures are wall-clock readings, and outside the kernel the grader's leave out the
# time a call waited for a core: in a self-test at load averages 8 to 13 (four self-tests at
# once on the 2-core machine) honest figures of the reference's admit and of slow's earned
# 2.52-2.85 of 3 and 1.89 of 2 (a warm call up to 4.4 times the grader's reading), so the
# ranges reach down to there; the ways of getting them wrong earn at most about a point.
_MEASURED = {"test_first_and_warm": (2.0, 3), "test_slow_and_speedup": (1.5, 2)}

EXPECT = {
    "slow": {"performance": 0, **_OTHER_CORRECTNESS, **_MEASURED},
    "eager": {"test_admit_speed": "full", **_OTHER_CORRECTNESS, **_MEASURED},
    # typed_dict's speed: in two self-tests at load averages 4.3-5 (2 cores, three other jobs)
    # the out-of-kernel reading fell below the 2.7x where credit starts (in process at the
    # same load, timing.compare measured 4.67x): 0 is in the range on such a machine.
    "typed_dict": {**_OTHER_CORRECTNESS, **_MEASURED, "test_admit_speed": (0, 5.1)},
    "invented": {"test_admit_speed": "full", **_OTHER_CORRECTNESS, "test_first_and_warm": (0, 1.0),
                 "test_slow_and_speedup": (0, 1.0)},
    "compile_in_warm": {"test_admit_speed": "full", **_OTHER_CORRECTNESS, "test_first_and_warm": 0,
                        "test_slow_and_speedup": _MEASURED["test_slow_and_speedup"]},
    "speedup_inverted": {"test_admit_speed": "full", **_OTHER_CORRECTNESS,
                         "test_first_and_warm": _MEASURED["test_first_and_warm"], "test_slow_and_speedup": (0.5, 1)},
    "form_only": {"test_q1": 0, "test_q2": 0, "test_admit_speed": "full", **_MEASURED},
}
