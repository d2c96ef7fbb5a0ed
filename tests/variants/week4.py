"""Week 4 submissions for tests/test_assignments.py: the decoys, a wrong hot line, pandas' rank,
and the give-aways issue 27 removed.

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

The profile itself is graded: ``stage_shares`` against the grader's own three profiles
(each share within 0.15), ``hotspot_name`` as the largest of those shares and of the
grader's, ``hot_line_seconds`` against the grader's line profile (within a factor 3). A
name or a line right by guesswork, with shares or seconds that were not measured, keeps
at most the hotspot's one point; shares read from ``tottime`` point at the wrong stage;
``form_only`` answers the quiz by the form of its options alone and earns nothing there.
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
    # Measures honestly but names the decoy as the hotspot (the loops look guilty): not the
    # largest of its own shares nor the grader's, so the hotspot's point is lost, nothing else.
    "decoy_named": {
        "hotspot": '''
hotspot_name = "daily_revenue"
''',
    },
    # Names the second most expensive stage, the matrix product: it is not within the
    # grader's factor 1.5 of the hotspot, so the hotspot's point is lost.
    "second_named": {
        "hotspot": '''
hotspot_name = "bought_together"
''',
    },
    # The right hotspot, but the line guessed rather than measured: the one line that sorts
    # looks the most expensive and takes 0.5-7% of the function. The hot line's 2 points lost.
    "wrong_line": {
        "hot_line": '''
hot_line = "descending = sorted(totals[shop].tolist(), reverse=True)"
''',
    },
    # Shares read from tottime instead of cumtime: the matrix product (an operator, no call)
    # keeps its time as its own, rank_products passes its to list.index. The "hotspot" is then
    # bought_together, the wrong stage: no point for the shares, none for the name.
    "tottime_shares": {
        "profiles": '''
with timing.limit_threads(1):
    sales_report_slow(*make_sales(50_000, seed=0))
    tables = [profiling.profile(sales_report_slow, *make_sales(50_000, seed=seed)) for seed in (1, 2, 3)]
own = [dict(zip(table["function"], table["tottime"])) for table in tables]
whole = sum(dict(zip(table["function"], table["cumtime"]))["sales_report_slow"] for table in tables)
stage_shares = {stage: sum(times[stage] for times in own) / whole for stage in STAGES}
''',
    },
    # No profile: shares typed as the code reads (the loops look guilty, the sort looks
    # dear) with the right hotspot guessed. The shares lose their 2 points; the name, the
    # largest of them and the grader's top, keeps its one.
    "guessed_shares": {
        "profiles": '''
stage_shares = {"valid_lines": 0.05, "line_revenue": 0.05, "daily_revenue": 0.3,
                "product_totals": 0.05, "rank_products": 0.4, "bought_together": 0.15}
''',
    },
    # The hot line's time copied in milliseconds from a report printed with
    # output_unit=1e-3: a thousand times the grader's seconds, both points lost.
    "ms_line": {
        "line_profile": '''
from line_profiler import LineProfiler

lp = LineProfiler()
lp.add_function(rank_products)
with timing.limit_threads(1):
    lp.runcall(sales_report_slow, *make_sales(50_000, seed=4))
lp.print_stats(output_unit=1e-3)
stats = lp.get_stats()
hot_line_seconds = max(ticks for entries in stats.timings.values() for _, _, ticks in entries) * stats.unit * 1e3
''',
    },
    # The quiz answered from the options' form alone (the longest option): no point.
    "form_only": {
        "quiz": '''
q1 = "c"
q2 = "b"
q3 = "c"
''',
    },
}

EXPECT = {
    "rank_astype": {"total": "full"},
    # totals are of the 16 automatic points (the written explanations are marked by hand)
    "decoy_named": {"test_stage_shares": 2, "test_hotspot": 0, "test_hot_line": 2, "performance": "full",
                    "total": 15},
    "second_named": {"test_stage_shares": 2, "test_hotspot": 0, "test_hot_line": 2, "performance": "full",
                     "total": 15},
    "wrong_line": {"test_hotspot": 1, "test_hot_line": 0, "performance": "full", "total": 14},
    "tottime_shares": {"test_stage_shares": 0, "test_hotspot": 0, "test_hot_line": 2, "performance": "full",
                       "total": 13},
    "guessed_shares": {"test_stage_shares": 0, "test_hotspot": 1, "performance": "full", "total": 14},
    "ms_line": {"test_hot_line": 0, "total": 14},
    "form_only": {"test_q1": 0, "test_q2": 0, "test_q3": 0, "total": 13},
}
