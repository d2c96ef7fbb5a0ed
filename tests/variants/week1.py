"""Week 1 submissions for the grading proof (tests/test_assignments.py).

``slow``: every answer right, but the price stage still calls a Python function for
every reading (a tidier ``apply``), so it runs at about the speed of ``price_slow``:
all the correctness points, none of the speed points.

``wrong``: a vectorised price stage that forgets economy7's night rate: fast, but its
results differ, so it loses the price correctness points and the speed points.
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

VARIANTS = {
    "slow": {"price_fast": SLOW_PRICE},
    "wrong": {"price_fast": WRONG_PRICE},
}
