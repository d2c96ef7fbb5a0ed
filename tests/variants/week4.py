"""Week 4 submissions for tests/test_assignments.py: the decoys, a wrong hot line, pandas' rank.

Each maps the ``grade_id`` of an answer cell of ``solutions/week4/week4.ipynb`` to the
source that replaces it; answer cells not named keep the reference solution.

The pipeline has three suspects: ``daily_revenue``, two nested Python loops that look guilty
and take 2-8% of the run; ``bought_together``, one large matrix product, 15-27%; and
``rank_products``, one sort and a list search per product, 70-80% (shares from cProfile,
one thread, 50,000 lines, the 2-core course machine with busy neighbours). So the speed
points follow the course's rule for alternative answers with Amdahl's ceiling in view: a fix
of the hotspot reaches about 4x for the whole report and earns all of them (full at 1.8x,
none at 1.25x); a faster decoy, which cannot gain more than its few percent, earns none. The
ranges come from in-process measurements (``timing.compare`` in ``timing.limit_threads(1)``,
50,000 fresh sale lines, the 2-core course machine shared with other jobs); see ``EXPECT``.
"""

VARIANTS = {
    # Correct and still slow: it vectorises the guilty-looking loops of daily_revenue (the
    # decoy: one np.add.at) and leaves the real hotspot alone. Measured 1.01x-1.06x: every
    # correctness point, no speed point.
    "slow": {
        "sales_report": '''
def sales_report(sales, prices):
    """The provided pipeline with the nested loops of daily_revenue vectorised, the hotspot left alone."""
    lines = valid_lines(sales)
    revenue = line_revenue(lines, prices)
    totals = product_totals(lines, revenue, len(prices))
    daily = np.zeros((N_SHOPS, N_DAYS))
    np.add.at(daily, (lines["shop"], lines["period"] // PERIODS_PER_DAY), revenue)
    return {
        "daily_revenue": daily,
        "product_rank": rank_products(totals),
        "bought_together": bought_together(lines, len(prices)),
    }
''',
    },
    # Fast and wrong: it names the guilty-looking loop as the hotspot, and ranks with a
    # double argsort, which breaks ties by product number instead of sharing the better
    # rank (products that sold nothing at a shop tie at 0.0). No speed point, however fast.
    "wrong": {
        "hotspot": '''
hotspot_name = "daily_revenue"
''',
        "sales_report": '''
def sales_report(sales, prices):
    """Ordinal ranks from a double argsort: fast, but equal totals get different ranks."""
    lines = valid_lines(sales)
    revenue = line_revenue(lines, prices)
    totals = product_totals(lines, revenue, len(prices))
    order = np.argsort(np.argsort(-totals, axis=1, kind="stable"), axis=1, kind="stable")
    return {
        "daily_revenue": daily_revenue(lines, revenue),
        "product_rank": order + 1,
        "bought_together": bought_together(lines, len(prices)),
    }
''',
    },
    # The hotspot fixed with pandas' rank along each shop's row: equal totals share the
    # better ("min") rank, as in the provided version. Every point.
    "rank_astype": {
        "sales_report": '''
import pandas as pd


def sales_report(sales, prices):
    """The report with each product's rank from pandas: one sort per shop, ties sharing the better rank."""
    lines = valid_lines(sales)
    revenue = line_revenue(lines, prices)
    totals = product_totals(lines, revenue, len(prices))
    ranks = pd.DataFrame(totals).rank(axis=1, method="min", ascending=False).astype(np.int64).to_numpy()
    return {
        "daily_revenue": daily_revenue(lines, revenue),
        "product_rank": ranks,
        "bought_together": bought_together(lines, len(prices)),
    }
''',
    },
    # Names the decoy as the hotspot (the loops look guilty, the profile says otherwise) but
    # otherwise answers as the reference: the hotspot's 4 points lost, nothing else.
    "decoy_named": {
        "hotspot": '''
hotspot_name = "daily_revenue"
''',
    },
    # Names the second most expensive stage, the matrix product: it is not within the
    # grader's factor 1.5 of the hotspot, so the hotspot's 4 points are lost.
    "second_named": {
        "hotspot": '''
hotspot_name = "bought_together"
''',
    },
    # The right hotspot, but the line guessed rather than measured: the one line that sorts
    # looks the most expensive and takes 0.5-3% of the function. The hot line's 2 points lost.
    "wrong_line": {
        "hot_line": '''
hot_line = "descending = sorted(totals[shop].tolist(), reverse=True)"
''',
    },
}

EXPECT = {
    "rank_astype": {"total": "full"},
    # totals are of the 20 automatic points (the written explanation is marked by hand)
    "decoy_named": {"test_hotspot": 0, "test_hot_line": 2, "performance": "full", "total": 16},
    "second_named": {"test_hotspot": 0, "test_hot_line": 2, "performance": "full", "total": 16},
    "wrong_line": {"test_hotspot": 4, "test_hot_line": 0, "performance": "full", "total": 18},
}
