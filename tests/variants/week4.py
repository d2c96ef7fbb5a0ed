"""Week 4 submissions for tests/test_assignments.py: slow, wrong, and pandas' rank.

Each maps the ``grade_id`` of an answer cell of ``solutions/week4/week4.ipynb`` to the
source that replaces it; answer cells not named keep the reference solution.

The speed points follow the course's rule for alternative answers: the technique the
notebook teaches earns all of them, a loop that is merely tidier earns little or nothing,
and anything in between earns what its measured speed-up earns on the log scale between the
cell's thresholds (here all 7 points from 20x, none at 2x or less). The ranges come from
in-process measurements (``timing.compare``, one thread, 50,000 fresh sale lines, December
2026, the 2-core course machine shared with other jobs).

``rank_astype``: the hotspot fixed with pandas,
``pd.Series(totals).rank(method="min", ascending=False).astype(np.int64)``: 49x-57x measured,
one sort like the reference's; every point.
"""

VARIANTS = {
    # Correct and still slow: it "optimises" the loop that looks guilty (shop_revenue, with
    # np.add.at) and keeps the real hotspot, so the report is no faster. Every correctness
    # point; no speed point.
    "slow": {
        "sales_report": '''
def sales_report(sales, prices):
    """The provided pipeline with the explicit loop vectorised, and the hotspot left alone."""
    lines = valid_lines(sales)
    revenue = line_revenue(lines, prices)
    by_shop = np.zeros(N_SHOPS)
    np.add.at(by_shop, lines["shop"], revenue)
    return {
        "shop_revenue": by_shop,
        "product_rank": rank_products(product_revenue(lines, revenue, len(prices))),
    }
''',
    },
    # Fast and wrong: it names the guilty-looking loop as the hotspot, and ranks with a
    # double argsort, which breaks ties by product number instead of sharing the better
    # rank (products that sold nothing tie at 0.0). No speed point, however fast.
    "wrong": {
        "hotspot": '''
hotspot_name = "shop_revenue"
''',
        "sales_report": '''
def sales_report(sales, prices):
    """Ordinal ranks from a double argsort: fast, but equal totals get different ranks."""
    lines = valid_lines(sales)
    revenue = line_revenue(lines, prices)
    totals = product_revenue(lines, revenue, len(prices))
    return {
        "shop_revenue": shop_revenue(lines, revenue),
        "product_rank": np.argsort(np.argsort(-totals, kind="stable"), kind="stable") + 1,
    }
''',
    },
    # The hotspot fixed with pandas' rank: equal totals share the better ("min") rank, as in
    # the provided version. Every point.
    "rank_astype": {
        "sales_report": '''
import pandas as pd


def sales_report(sales, prices):
    """The report with each product's rank from pandas: one sort, ties sharing the better rank."""
    lines = valid_lines(sales)
    revenue = line_revenue(lines, prices)
    totals = product_revenue(lines, revenue, len(prices))
    return {
        "shop_revenue": shop_revenue(lines, revenue),
        "product_rank": pd.Series(totals).rank(method="min", ascending=False).astype(np.int64).to_numpy(),
    }
''',
    },
}

EXPECT = {
    "rank_astype": {"total": "full"},
}
