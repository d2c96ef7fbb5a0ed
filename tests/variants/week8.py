"""Week 8 submissions for tests/test_assignments.py, each with the score it should get.

Each maps the ``grade_id`` of an answer cell of ``solutions/week8/week8.ipynb`` to the
source that replaces it; answer cells not named keep the reference solution (the report
cell included, so each variant's report is measured on that variant's own job). Variants
that change one line of a reference cell take the reference's source and replace that
line (:func:`_edited`), so they stay in step with the solution.

The capstone's job has two slow stages of different kinds: ``parse`` (a ``strptime`` per
log line: text parsing in the interpreter) dominates, about three quarters of the job on
the course machine; ``sessionise`` (a pandas filter of the whole table per user, then a
Python loop over the clicks) looks the guiltier and takes about a fifth; ``report`` has a
``for`` loop that is cheap (eight site sections). The speed points follow the course's rule
for alternative answers: the technique the notebook teaches (measure, then fix what
dominates) earns all of them, a tidier loop little or nothing, a fix of the stage that does
not dominate almost nothing (Amdahl: at most about 1.3x). All 6 points from 2.5x, none at
1.5x or less, on the log scale in between (out of the kernel, as stored, the reference
measured 7.7x quiet and 7.47x beside a competitor: ``course calibrate week8``, 5 December).

Measured in process (``timing.compare``, one thread, budget 1, one night's log of 40,000
lines from 300 users, fresh for every call; December 2026, the 2-core course machine shared
with other jobs, load average about 5), whole-job speed-up over ``job_slow``: the reference
8.0x, ``numba`` 8.0x, ``line_loop`` 3.4x, ``dominant_only`` 2.6x, ``non_dominant`` 1.28x,
``group_loop`` 1.19x, ``slow`` 0.98x.

``line_loop`` is not merely tidier: ``fromisoformat`` is C code that replaces the costly
``strptime``, so it removes most of what dominated, and earns what its speed earns.
"""

import re
from pathlib import Path

import nbformat

_SOLUTION = Path(__file__).resolve().parents[2] / "solutions" / "week8" / "week8.ipynb"


def _reference(grade_id):
    """The source of one answer cell of the instructor's solution, markers removed."""
    for cell in nbformat.read(_SOLUTION, as_version=4).cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return "\n".join(line for line in cell.source.splitlines()
                             if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
    raise KeyError(grade_id)


def _edited(grade_id, old, new):
    """The reference's answer cell ``grade_id`` with ``old`` replaced by ``new`` (once)."""
    source = _reference(grade_id)
    if source.count(old) != 1:
        raise ValueError(f"{grade_id}: {old!r} found {source.count(old)} times in the reference")
    return source.replace(old, new)


# The provided stages, tidied: every correctness point, about 1x. The stages carry the names
# the report cell times (parse_fast, sessionise_fast), so its report is measured on this job.
SLOW_JOB = '''
def parse_fast(text):
    """parse(text), tidied: still one strptime per line."""
    rows = [line.split(" ") for line in text.splitlines()]
    return pd.DataFrame({
        "t": [calendar.timegm(datetime.datetime.strptime(r[0], "%Y-%m-%dT%H:%M:%S").timetuple())
              for r in rows],
        "user": [int(r[1][1:]) for r in rows],
        "path": [r[2] for r in rows],
        "status": [int(r[3]) for r in rows],
        "bytes": [int(r[4]) for r in rows],
    })


def sessionise_fast(events):
    """The provided sessionise: one filter of the whole table per user."""
    return sessionise(events)


def job_fast(text):
    return report(summarise(sessionise_fast(parse_fast(text))))
'''

# The whole kernel with ">=" for ">": a pause of exactly GAP seconds opens a new session. A
# pause is a whole number of minutes, so exactly 30 of them happens about once in 86 pauses:
# the small visible inputs have none, every night's log has a dozen or more.
WRONG_KERNELS = _edited("kernels", "(t[1:] - t[:-1] > GAP)", "(t[1:] - t[:-1] >= GAP)").replace(
    "t[i] - t[i - 1] > GAP", "t[i] - t[i - 1] >= GAP")

# The per-user loop kept, but over groupby's groups (one split of the table instead of a
# filter per user), and the provided parse: the stage that dominates is untouched.
GROUP_LOOP_JOB = '''
def sessionise_fast(events):
    """One pass that splits the clicks by user, then the provided rule for each group."""
    parts = [mine.sort_values("t", kind="stable") for _, mine in events.groupby("user", sort=True)]
    ordered = pd.concat(parts).reset_index(drop=True)
    ordered["session"] = session_ids_loop(ordered["user"].to_numpy(), ordered["t"].to_numpy())
    return ordered


def parse_fast(text):
    """The provided parse, untouched."""
    return parse(text)


def job_fast(text):
    return report(summarise(sessionise_fast(parse_fast(text))))
'''

# A tidier loop over the lines: datetime.fromisoformat (written in C) in place of strptime,
# still a Python tuple per line; sessionise fixed as in the reference.
LINE_LOOP_JOB = _edited("job_fast", "def sessionise_fast(events):", '''def parse_lines(text):
    """parse(text) in a tidier loop: fromisoformat instead of strptime."""
    utc = datetime.timezone.utc
    rows = []
    for line in text.splitlines():
        stamp, user, path, status, sent = line.split(" ")
        when = datetime.datetime.fromisoformat(stamp).replace(tzinfo=utc)
        rows.append((int(when.timestamp()), int(user[1:]), path, int(status), int(sent)))
    return pd.DataFrame(rows, columns=["t", "user", "path", "status", "bytes"])


parse_fast = parse_lines  # the stage the report times and job_fast calls


def sessionise_fast(events):''')

# Measure-first skipped: the stage that looks worst (the per-user filter) fixed properly, the
# stage that dominates left alone, and the guess written down as the dominant stage.
NON_DOMINANT_ANSWERS = _edited("answers_task1",
                               'dominant_stage = str(before_sw.table()["seconds"].idxmax())',
                               'dominant_stage = "sessionise"')
NON_DOMINANT_JOB = _edited("job_fast", "def job_fast(text):", '''parse_fast = parse  # left alone


def job_fast(text):''')

# Only the stage that dominates fixed: parse by pandas, the provided sessionise kept.
DOMINANT_ONLY_JOB = _edited("job_fast", "def job_fast(text):", '''sessionise_fast = sessionise  # left alone


def job_fast(text):''')

# The Numba kernel in the job instead of the NumPy one: the other route, full marks.
NUMBA_JOB = _edited("job_fast", 'ordered["session"] = session_ids_numpy(', 'ordered["session"] = session_ids_numba(')

# A report that claims what was not found: the wrong kernels, and results_identical typed in.
LIAR_REPORT = _edited("report", '''    "results_identical": same_result(after_result, before_result)
                         and same_result(job_fast(boundary), job_slow(boundary)),''',
                      '''    "results_identical": True,  # "it looked the same"''')

# A report whose timings were typed in (a classmate's figures, a speed-up to impress): the
# context is real, the numbers are not this notebook's.
INVENTED_REPORT = _edited("report", '''    "stages_before": before_sw.seconds,
    "stages_after": after_sw.seconds,''', '''    "stages_before": {"parse": 4.1, "sessionise": 1.2, "summarise": 0.05, "report": 0.04},
    "stages_after": {"parse": 0.03, "sessionise": 0.004, "summarise": 0.005, "report": 0.004},''').replace(
    '"speedup": whole_job.ratio,', '"speedup": 125.0,')

# Task 1 answered from the guess: the stage that looks worst, and a stage table typed in to
# match it. Its total (1.4 s) is near the grader's, its shares are not: no Task 1 point.
GUESSED_ANSWERS = _edited("answers_task1", "stage_seconds = before_sw.seconds",
                          'stage_seconds = {"parse": 0.2, "sessionise": 1.1, "summarise": 0.05, "report": 0.05}'
                          ).replace('dominant_stage = str(before_sw.table()["seconds"].idxmax())  # from the measurement, not a guess',
                                    'dominant_stage = "sessionise"  # the per-user filter looked worst')

# Task 1 measured, but on a small part of the night's log to save time. With 300 users the
# per-user work outweighs the per-line work on a small log: at 1,000 lines sessionise took 84%
# of the job (three runs, load 0.4; the whole night's log: 21-36%), so the measurement names the
# wrong stage and its shares are at least 0.45 from the grader's: no Task 1 point. (The report,
# measured on the whole night, is unharmed.) A tenth of the log (4,000 lines: sessionise 64-82%)
# sits at the share test's edge and keeps 0 to about a tenth of the point, by the load.
SMALL_LOG_ANSWERS = _edited("answers_task1", "before_sw, before_result = run_job(night_log)",
                            "before_sw, before_result = run_job(make_log(1_000, NIGHT_USERS, seed=1))")


def _longest_options() -> dict[str, str]:
    """Task 1's answers with each question answered by its longest option (a form tell)."""
    text = "\n".join(c.source for c in nbformat.read(_SOLUTION, as_version=4).cells
                     if c.cell_type == "markdown" and "**Question" in c.source)
    source = _reference("answers_task1")
    for n, block in enumerate(re.split(r"\*\*Question \d+\.\*\*", text)[1:], 1):
        options = dict(re.findall(r"^- \(([a-z])\) (.*)$", block, flags=re.MULTILINE))
        longest = max(options, key=lambda letter: len(options[letter]))
        source = re.sub(rf'^q{n} = "[a-z]"', f'q{n} = "{longest}"', source, flags=re.MULTILINE)
    return source


VARIANTS = {
    "slow": {"job_fast": SLOW_JOB},
    "wrong": {"kernels": WRONG_KERNELS},
    "group_loop": {"job_fast": GROUP_LOOP_JOB},
    "line_loop": {"job_fast": LINE_LOOP_JOB},
    "non_dominant": {"answers_task1": NON_DOMINANT_ANSWERS, "job_fast": NON_DOMINANT_JOB},
    "dominant_only": {"job_fast": DOMINANT_ONLY_JOB},
    "liar_identical": {"kernels": WRONG_KERNELS, "report": LIAR_REPORT},
    "liar_timings": {"report": INVENTED_REPORT},
    "numba": {"job_fast": NUMBA_JOB},
    "guessed": {"answers_task1": GUESSED_ANSWERS},
    "small_log": {"answers_task1": SMALL_LOG_ANSWERS},
    "quiz_longest": {"answers_task1": _longest_options()},
}

# Tasks 1 and 4 hold the student's figures to the grader's own measurements (test_stages_hidden,
# test_dominant_hidden, test_before_after_hidden); the speed cell is worth 4 points.
EXPECT = {
    "group_loop": {"correctness": "full", "test_job_speed": 0},
    "line_loop": {"correctness": "full", "test_job_speed": (2, 4)},
    "non_dominant": {"test_dominant_hidden": 0, "test_stages_hidden": "full", "test_job_speed": (0, 1),
                     "test_report_hidden": "full", "test_before_after_hidden": "full"},
    "dominant_only": {"correctness": "full", "test_job_speed": (1.5, 4)},
    # The report's own figures are honest, so its table point stands; its typed claim does not.
    "liar_identical": {"test_report_hidden": "full", "test_before_after_hidden": 1, "test_job_speed": 0,
                       "test_kernels_hidden": 0},
    # The typed-in stages happen to break the report's own consistency too (amdahl_ceiling is
    # computed from the measured table): (0, 1) there; the grader's figures refute the rest.
    "liar_timings": {"test_report_hidden": (0, 1), "test_before_after_hidden": 0, "test_job_speed": "full",
                     "test_stages_hidden": "full", "test_dominant_hidden": "full"},
    "numba": {"total": "full"},
    "guessed": {"test_dominant_hidden": 0, "test_stages_hidden": 0, "test_q1": "full", "performance": "full",
                "test_before_after_hidden": "full"},
    "small_log": {"test_dominant_hidden": 0, "test_stages_hidden": 0, "performance": "full",
                  "test_before_after_hidden": "full"},
    "quiz_longest": {"test_q1": 0, "test_dominant_hidden": "full", "test_stages_hidden": "full",
                     "performance": "full"},
}
