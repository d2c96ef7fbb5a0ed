"""Week 8 submissions for tests/test_assignments.py: correct but slow, and fast but wrong.

Each maps the ``grade_id`` of an answer cell of ``solutions/week8/week8.ipynb`` to the
source that replaces it; answer cells not named keep the reference solution (the report
cell included, so each variant's report is measured on that variant's own job).

The speed points follow the course's rule for alternative answers: the technique the
notebook teaches earns all of them, a loop that is merely tidier earns little or nothing
(here all 6 points from 6x, none at 3.5x or less, on the log scale in between). The ranges
come from in-process measurements (``timing.compare``, one thread, 300 meters x 1 day of
fresh readings, December 2026, the 2-core course machine shared with other jobs).

``group_loop``: one ``groupby`` pass to split the table, then the provided arithmetic in a
loop over the groups: correct, tidier, and still a dozen pandas calls per meter. The whole
job 1.4x-1.5x measured: every correctness point, no speed point.
"""

VARIANTS = {
    # Correct and still one pass over the table per meter: the loop is tidied (one boolean
    # mask per meter, reused) but the algorithm is the provided one, so the whole job stays
    # about as slow as job_slow. Every correctness point (its report is complete and
    # truthful, speed-up about 1x); no speed point.
    "slow": {
        "bill_fast": '''
def bill_fast(priced):
    """bill_slow, tidied: still a scan of the whole table for every meter."""
    lines = []
    for meter in priced["meter"].unique():
        mine = priced[priced["meter"] == meter]
        plan = mine["plan"].iloc[0]
        used = mine["wh"].sum()
        lines.append({"meter": meter, "plan": plan, "kwh": used / 1000,
                      "peak_share": mine.loc[mine["band"] == 2, "wh"].sum() / used,
                      "peak_kw": mine["wh"].max() * 2 / 1000,
                      "pounds": (mine["millipence"].sum()
                                 + 1000 * STANDING[plan] * mine["day"].nunique()) / 100_000})
    return pd.DataFrame(lines)
''',
    },
    # Fast and wrong, in a way a one-night input cannot show: grouped in one pass, but the
    # standing charge is added once per meter instead of once per day of readings. On one
    # day of readings it agrees with bill_slow; on every longer input each bill is too
    # small. Correctness points lost; no speed point, because the speed test first checks
    # the whole job on multi-day inputs.
    "wrong": {
        "bill_fast": '''
def bill_fast(priced):
    """One grouped pass, with the standing charge counted once per meter."""
    by_meter = priced.groupby("meter", sort=False)
    used = by_meter["wh"].sum()
    at_peak = priced["wh"].where(priced["band"] == 2, 0).groupby(priced["meter"], sort=False).sum()
    plan = by_meter["plan"].first()
    standing = 1000 * plan.map(STANDING)  # should be times the number of days
    return pd.DataFrame({
        "meter": used.index.to_numpy(),
        "plan": plan.to_numpy(),
        "kwh": (used / 1000).to_numpy(),
        "peak_share": (at_peak / used).to_numpy(),
        "peak_kw": (by_meter["wh"].max() * 2 / 1000).to_numpy(),
        "pounds": ((by_meter["millipence"].sum() + standing) / 100_000).to_numpy(),
    })
''',
    },
    # The per-group loop: split once with groupby, then the provided arithmetic per meter.
    # Correct and tidier, about 1.5x for the whole job: no speed point.
    "group_loop": {
        "bill_fast": '''
def bill_fast(priced):
    """One pass that splits the table by meter, then the provided arithmetic for each group."""
    lines = []
    for meter, mine in priced.groupby("meter", sort=False):
        plan = mine["plan"].iloc[0]
        used = mine["wh"].sum()
        lines.append({"meter": meter, "plan": plan, "kwh": used / 1000,
                      "peak_share": mine.loc[mine["band"] == 2, "wh"].sum() / used,
                      "peak_kw": mine["wh"].max() * 2 / 1000,
                      "pounds": (mine["millipence"].sum()
                                 + 1000 * STANDING[plan] * mine["day"].nunique()) / 100_000})
    return pd.DataFrame(lines)
''',
    },
}

EXPECT = {
    "group_loop": {"correctness": "full", "test_job_speed": 0},
}
