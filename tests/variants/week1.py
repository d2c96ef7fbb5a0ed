"""Week 1 submissions for the grading proof (tests/test_assignments.py).

The speed points follow the course's rule for alternative answers: the technique the
notebook teaches earns all of them, a loop that is merely tidier earns little or nothing,
and anything in between earns what its measured speed-up earns on the log scale between the
cell's thresholds (here both points from 100x, none at 60x or less). The expected ranges
below come from in-process measurements (``timing.compare``, one thread, 50,000 fresh
readings, December 2026, the 2-core course machine shared with other jobs) and are wide
enough for a 2-core grader with one busy neighbour.

``slow``: every answer right, but the stage still calls a Python function for every
reading (a tidier ``apply``), so it runs at about the speed of the provided ``price``: all
the correctness points, none of the speed points.

``wrong``: a vectorised stage that forgets economy7's night rate: fast, but its results
differ, so it loses the stage's correctness points and the speed points.

``zip``: a loop over the three columns as Python lists (``zip`` over ``.tolist()``): no
pandas call per row, 60x-67x measured; merely tidier, so between 0 and 1.5 of the 2 speed
points (about 0.5 at its usual speed).

``itertuples``: a loop over ``itertuples()``, 11x-14x measured: no speed point.

``hint``: written from Part 4's collapsed hint (``Series.map`` with a dict,
``.astype("float64")`` on the categorical result, comparisons and ``numpy.select``),
150x-160x measured: full marks, which also checks that following the hint works.

``loc``: whole columns another way: the day rate for every row, then ``.loc`` overwrites the
peak and the night rows (191x-197x measured in process, load 1.7): full marks.

The give-aways the notebook no longer makes, each with the submission that would have
profited from it:

``guessed_stage``: a student who does not trust the stage table and names the stage that
looks heavy in the code, ``DOMINANT = "segment"`` (the dense model), then "speeds up" segment
(its matrix products on one thread) and answers questions 2 to 4 from that stage's profile
and tables. The measurement itself is honest, so Part 1 keeps ``timed_job`` and the measured
table (3 points); the visible test finds that ``DOMINANT`` is not the largest stage of the
student's own table, the hidden test that it is not the grader's; Part 4 keeps its visible
point (the replacement is right for segment) and loses the hidden and speed points, since
they test the stage that dominates in the grader's measurement; questions 2 to 4 are wrong
(segment's profile gives about 0 calls per reading and a few large NumPy calls; fixing it
changes nothing for the accelerator). 8 of 16.

``small_job``: the stage table measured on 4,000 readings instead of ``N_JOB`` (40,000): the
shares look right and ``DOMINANT`` is right, but the total is about a tenth of the grader's
own run: the 2 points for the measured table are lost, and only those (14 of 16). Its one
timed run is short (price 66 ms, segment 10 ms, quiet): under ``make test``'s load (2-3.7 on
2 cores, December 2026) a stall in it once named another stage, in the kernel or in the
verifier's re-run of the cell, and the three points that rest on ``DOMINANT`` went too
(11): both are what that notebook earns; the measured table's 2 points are lost either way.

``form_only``: the quiz answered from the form of the options alone, by a student who has
done none of the measuring: the longest option of each multiple-choice question (the first
of equals), and for question 2 the first number its text names. The letters are worked out
from the solution notebook when this file is loaded, so the variant follows the quiz as it
is edited; it scores what chance would give or less (the right option is never much longer
than the others): 0 or 1 of the 4 quiz points.
"""

import re
from pathlib import Path

import nbformat

SLOW_PRICE = '''
def faster_stage(readings):
    """The stage DOMINANT names, faster: the same result for the same ``given`` input."""
    def cost(row):
        tariff, hour = row["tariff"], row["hour"]
        if tariff == "economy7" and hour < 7:
            return row["kwh"] * NIGHT_RATE
        return row["kwh"] * (PEAK_RATE[tariff] if 16 <= hour < 19 else DAY_RATE[tariff])

    if len(readings) == 0:
        return readings.assign(pence=pd.Series([], index=readings.index, dtype="float64"))
    return readings.assign(pence=readings.apply(cost, axis=1).astype("float64"))
'''

WRONG_PRICE = '''
def faster_stage(readings):
    """The stage DOMINANT names, faster: the same result for the same ``given`` input."""
    hour = readings["hour"].to_numpy()
    day = readings["tariff"].map(DAY_RATE).to_numpy(dtype="float64")
    peak = readings["tariff"].map(PEAK_RATE).to_numpy(dtype="float64")
    rate = np.where((hour >= 16) & (hour < 19), peak, day)  # economy7's night rate forgotten
    return readings.assign(pence=readings["kwh"] * rate)
'''

ZIP_PRICE = '''
def faster_stage(readings):
    """The provided rules in a loop over the columns as Python lists: no pandas call per row."""
    pence = []
    for tariff, hour, kwh in zip(readings["tariff"].tolist(), readings["hour"].tolist(),
                                 readings["kwh"].tolist()):
        if tariff == "economy7" and hour < 7:
            rate = NIGHT_RATE
        elif 16 <= hour < 19:
            rate = PEAK_RATE[tariff]
        else:
            rate = DAY_RATE[tariff]
        pence.append(kwh * rate)
    return readings.assign(pence=pd.Series(pence, index=readings.index, dtype="float64"))
'''

ITERTUPLES_PRICE = '''
def faster_stage(readings):
    """The provided rules in a loop over itertuples(): no row Series built per reading."""
    pence = []
    for row in readings.itertuples(index=False):
        if row.tariff == "economy7" and row.hour < 7:
            rate = NIGHT_RATE
        elif 16 <= row.hour < 19:
            rate = PEAK_RATE[row.tariff]
        else:
            rate = DAY_RATE[row.tariff]
        pence.append(row.kwh * rate)
    return readings.assign(pence=pd.Series(pence, index=readings.index, dtype="float64"))
'''

HINT_PRICE = '''
def faster_stage(readings):
    """Every rate at once, as Part 4's hint says: map with a dict, comparisons, np.select."""
    hour = readings["hour"]
    tariff = readings["tariff"]
    day = tariff.map(DAY_RATE).astype("float64")  # map keeps the column categorical
    peak = tariff.map(PEAK_RATE).astype("float64")
    rate = np.select([(tariff == "economy7") & (hour < 7), (hour >= 16) & (hour < 19)],
                     [NIGHT_RATE, peak], default=day)
    return readings.assign(pence=readings["kwh"] * rate)
'''

LOC_PRICE = '''
def faster_stage(readings):
    """Whole columns: the day rate everywhere, then .loc overwrites the peak and night rows."""
    rate = readings["tariff"].map(DAY_RATE).astype("float64")
    peak = (readings["hour"] >= 16) & (readings["hour"] < 19)
    rate.loc[peak] = readings.loc[peak, "tariff"].map(PEAK_RATE).astype("float64")
    night = (readings["tariff"] == "economy7") & (readings["hour"] < 7)
    rate.loc[night] = NIGHT_RATE
    return readings.assign(pence=readings["kwh"] * rate)
'''

GUESSED_STAGE_MEASURE = '''
text = make_readings_csv(N_JOB, seed=1)
timed_job(text)
job_stopwatch, job_result = timed_job(text)
stage_table = job_stopwatch.table()
DOMINANT = "segment"  # the dense model must be the heavy part
stage_table
'''

GUESSED_STAGE_FAST = '''
def faster_stage(priced):
    """The segment stage, with its matrix products on one thread."""
    with timing.limit_threads(1):
        return segment(priced)
'''

GUESSED_STAGE_QUIZ = '''
q1 = "b"
_small = profiling.profile(JOB[DOMINANT], stage_input(DOMINANT, 2_000, seed=0))
_large = profiling.profile(JOB[DOMINANT], stage_input(DOMINANT, 4_000, seed=0))
q2 = round(float((_large["ncalls"].sum() - _small["ncalls"].sum()) / 2_000))
q3 = "a"  # segment's profile: a few large NumPy calls
q4 = "a"  # "fixing" segment left both tables alike
'''

SMALL_JOB_MEASURE = '''
text = make_readings_csv(4_000, seed=1)  # a tenth of N_JOB, to save time
timed_job(text)
job_stopwatch, job_result = timed_job(text)
stage_table = job_stopwatch.table()
DOMINANT = stage_table["seconds"].idxmax()
stage_table
'''


_ABSOLUTE = re.compile(r"\b(always|never|only|all|none|nothing|must|cannot|can't)\b", re.I)


def form_only_quiz(week: str, prefix: str = "q") -> str:
    """The quiz cell of a student who reads only the form of the options.

    For each question of ``solutions/WEEK/WEEK.ipynb``: the longest option (the first of
    equals); where every letter that applies is asked for, every option without an
    absolute word; where a number is asked for, the first number the question names.
    Week 2's variants use it too.
    """
    path = Path(__file__).resolve().parents[2] / "solutions" / week / f"{week}.ipynb"
    text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                     if c.cell_type == "markdown")
    lines = []
    for number, block in re.findall(r"\*\*Question (\d+)\.\*\*(.*?)(?=\*\*Question|\Z)", text, re.S):
        options = [(letter, " ".join(option.split())) for letter, option
                   in re.findall(r"^- \(([a-z])\) (.*(?:\n  .*)*)", block, re.M)]
        if "every letter that applies" in " ".join(block.split()):
            picked = [letter for letter, option in options if not _ABSOLUTE.search(option)]
            lines.append(f"{prefix}{number} = {', '.join(picked or [o[0] for o in options])!r}")
        elif options:
            lines.append(f"{prefix}{number} = {max(options, key=lambda o: len(o[1]))[0]!r}")
        else:
            first = re.search(r"\d[\d,_]*", block).group().replace(",", "")
            lines.append(f"{prefix}{number} = {first}")
    return "\n".join(lines) + "\n"


VARIANTS = {
    "slow": {"faster_stage": SLOW_PRICE},
    "wrong": {"faster_stage": WRONG_PRICE},
    "zip": {"faster_stage": ZIP_PRICE},
    "itertuples": {"faster_stage": ITERTUPLES_PRICE},
    "hint": {"faster_stage": HINT_PRICE},
    "loc": {"faster_stage": LOC_PRICE},
    "guessed_stage": {"measure": GUESSED_STAGE_MEASURE, "faster_stage": GUESSED_STAGE_FAST,
                      "quiz": GUESSED_STAGE_QUIZ},
    "small_job": {"measure": SMALL_JOB_MEASURE},
    "form_only": {"quiz": form_only_quiz("week1")},
}

QUIZ = ("test_q1", "test_q2", "test_q3", "test_q4")

EXPECT = {
    "zip": {"correctness": "full", "test_faster_speed": (0, 1.5)},
    "itertuples": {"correctness": "full", "test_faster_speed": 0},
    "hint": {"total": "full"},
    "loc": {"total": "full"},
    "guessed_stage": {"test_timed_job_visible": 1, "test_stage_table_visible": 0,
                      "test_stage_table_measured": 2, "test_dominant_hidden": 0,
                      "test_buckets_visible": 1, "test_buckets_hidden": 1,
                      "test_amdahl_visible": 1, "test_faster_visible": 1,
                      "test_faster_hidden": 0, "test_faster_speed": 0,
                      "test_q1": 1, "test_q2": 0, "test_q3": 0, "test_q4": 0, "total": 8},
    "small_job": {"test_stage_table_measured": 0, "test_faster_speed": "full", "total": (11, 14)},
    "form_only": {"total": (12, 13), **{cell: (0, 1) for cell in QUIZ}},
}
