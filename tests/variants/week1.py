"""Week 1 submissions for the grading proof (tests/test_assignments.py).

The speed points follow the course's rule for alternative answers: the technique the
notebook teaches earns all of them, a loop that is merely tidier earns little or nothing,
and anything in between earns what its measured speed-up earns on the log scale between the
cell's thresholds (here all 4 points from 100x, none at 60x or less). The expected ranges
below come from in-process measurements (``timing.compare``, one thread, 50,000 fresh
readings, December 2026, the 2-core course machine shared with other jobs) and are wide
enough for a 2-core grader with one busy neighbour.

``slow``: every answer right, but the price stage still calls a Python function for
every reading (a tidier ``apply``), so it runs at about the speed of ``price_slow``:
all the correctness points, none of the speed points.

``wrong``: a vectorised price stage that forgets economy7's night rate: fast, but its
results differ, so it loses the price correctness points and the speed points.

``zip``: a loop over the three columns as Python lists (``zip`` over ``.tolist()``): no
pandas call per row, 60x-67x measured; merely tidier, so between 0 and 3 of the 4 speed
points (about 1 at its usual speed).

``itertuples``: a loop over ``itertuples()``, 11x-14x measured: no speed point.

``hint``: written from the hint in Part 4 (``Series.map`` with a dict, ``.astype("float64")``
on the categorical result, comparisons and ``numpy.select``), 150x-160x measured: full marks,
which also checks that following the hint works.

``loc``: whole columns another way: the day rate for every row, then ``.loc`` overwrites the
peak and the night rows (191x-197x measured in process, load 1.7): full marks.
"""

SLOW_PRICE = '''
def price_fast(readings):
    """The price stage without a Python call per reading: the same result as ``price_slow``."""
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
def price_fast(readings):
    """The price stage without a Python call per reading: the same result as ``price_slow``."""
    hour = readings["hour"].to_numpy()
    day = readings["tariff"].map(DAY_RATE).to_numpy(dtype="float64")
    peak = readings["tariff"].map(PEAK_RATE).to_numpy(dtype="float64")
    rate = np.where((hour >= 16) & (hour < 19), peak, day)  # economy7's night rate forgotten
    return readings.assign(pence=readings["kwh"] * rate)
'''

ZIP_PRICE = '''
def price_fast(readings):
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
def price_fast(readings):
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
def price_fast(readings):
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
def price_fast(readings):
    """Whole columns: the day rate everywhere, then .loc overwrites the peak and night rows."""
    rate = readings["tariff"].map(DAY_RATE).astype("float64")
    peak = (readings["hour"] >= 16) & (readings["hour"] < 19)
    rate.loc[peak] = readings.loc[peak, "tariff"].map(PEAK_RATE).astype("float64")
    night = (readings["tariff"] == "economy7") & (readings["hour"] < 7)
    rate.loc[night] = NIGHT_RATE
    return readings.assign(pence=readings["kwh"] * rate)
'''

VARIANTS = {
    "slow": {"price_fast": SLOW_PRICE},
    "wrong": {"price_fast": WRONG_PRICE},
    "zip": {"price_fast": ZIP_PRICE},
    "itertuples": {"price_fast": ITERTUPLES_PRICE},
    "hint": {"price_fast": HINT_PRICE},
    "loc": {"price_fast": LOC_PRICE},
}

EXPECT = {
    "zip": {"correctness": "full", "test_price_speed": (0, 3)},
    "itertuples": {"correctness": "full", "test_price_speed": 0},
    "hint": {"total": "full"},
    "loc": {"total": "full"},
}
