"""Week 4 submissions for tests/test_assignments.py: correct but slow, and fast but wrong.

Each maps the ``grade_id`` of an answer cell of ``solutions/week4/week4.ipynb`` to the
source that replaces it; answer cells not named keep the reference solution.
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
}
