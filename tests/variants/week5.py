"""Week 5 submissions that tests/test_assignments.py grades besides the reference.

The memory points follow the course's rule for alternative answers: the technique the
notebook teaches earns all of them, a half measure earns what its measurement earns on the
cell's log scale (peak traced memory: all 6 points up to 20 MB, none from 100 MB; deep
memory: all 5 points at 8 times smaller, none at 4 times). Memory is measured exactly, so
the expected ranges are narrow: the peaks and factors below were measured in process
(``memory.peak``, ``memory.frame_memory``; December 2026, pandas 3.1) on the graded sizes.

``slow``: right but memory-hungry. ``region_summary`` loads the whole file (the provided
version under the student's name: 173 MB); ``compact`` only shrinks the integers (1.1x
smaller). Every correctness point, no memory point.

``wrong``: small but wrong. ``region_summary`` reads in chunks and averages the
chunks' means (the classic chunking mistake: chunks hold different numbers of readings
per region); ``compact`` stores ``kwh`` as float32, which changes most amounts in the
last digits. No memory point, and not every correctness point.

``half_measures``: ``region_summary`` reads the whole file at once, but only the three
columns it needs, with the text as categories (53 MB: about 2.4 of 6 points); ``compact``
turns the text columns into categories and stops there (5.6x: about 2.5 of 5 points).

``other_full``: ``region_summary`` in 50,000-line chunks of every column (no ``usecols``:
8.9 MB); ``compact`` with categories and ``int32`` / ``int8`` integers (9.8x). Both are
below the full-points marks: every point.
"""

VARIANTS = {
    "slow": {
        "region_summary": '''\
def region_summary(path, chunksize=50_000):
    """Per region: loads the whole file, as region_summary_whole does."""
    readings = pd.read_csv(path)
    valid = readings[readings["status"] != "fault"]
    return valid.groupby("region")["kwh"].agg(
        readings="count", total_kwh="sum", mean_kwh="mean", max_kwh="max")
''',
        "compact": '''\
def compact(readings):
    """The integers in the smallest types that hold them; the text columns left as they are."""
    return readings.astype({"meter": "uint16", "hour": "uint8"})
''',
    },
    "wrong": {
        "region_summary": '''\
def region_summary(path, chunksize=50_000):
    """Per region, in chunks; the mean is a mean of the chunks' means (wrong)."""
    partial = []
    for chunk in pd.read_csv(path, usecols=["region", "kwh", "status"], chunksize=chunksize):
        valid = chunk[chunk["status"] != "fault"]
        partial.append(valid.groupby("region")["kwh"].agg(
            readings="count", total_kwh="sum", mean_kwh="mean", max_kwh="max"))
    return pd.concat(partial).groupby(level="region").agg(
        readings=("readings", "sum"), total_kwh=("total_kwh", "sum"),
        mean_kwh=("mean_kwh", "mean"), max_kwh=("max_kwh", "max"))
''',
        "compact": '''\
def compact(readings):
    """Categories, small integers, and float32 amounts (which changes their values)."""
    return pd.DataFrame({
        "meter": readings["meter"].astype("uint16"),
        "region": readings["region"].astype("category"),
        "hour": readings["hour"].astype("uint8"),
        "kwh": readings["kwh"].astype("float32"),
        "status": readings["status"].astype("category"),
    })
''',
    },
    "half_measures": {
        "region_summary": '''\
def region_summary(path, chunksize=50_000):
    """The whole file at once, but only the three columns needed, the text as categories."""
    readings = pd.read_csv(path, usecols=["region", "kwh", "status"],
                           dtype={"region": "category", "status": "category"})
    valid = readings[readings["status"] != "fault"]
    summary = valid.groupby("region", observed=True)["kwh"].agg(
        readings="count", total_kwh="sum", mean_kwh="mean", max_kwh="max")
    summary.index = summary.index.astype(str)
    return summary
''',
        "compact": '''\
def compact(readings):
    """Text columns as categories; the integers keep their 8 bytes."""
    return readings.astype({"region": "category", "status": "category"})
''',
    },
    "other_full": {
        "region_summary": '''\
def region_summary(path, chunksize=50_000):
    """Per region, in chunks of every column; counts, totals and maxima combined, the mean last."""
    partial = []
    for chunk in pd.read_csv(path, chunksize=chunksize):
        valid = chunk[chunk["status"] != "fault"]
        partial.append(valid.groupby("region")["kwh"].agg(readings="count", total_kwh="sum",
                                                          max_kwh="max"))
    combined = pd.concat(partial).groupby(level="region").agg(
        readings=("readings", "sum"), total_kwh=("total_kwh", "sum"), max_kwh=("max_kwh", "max"))
    combined.insert(2, "mean_kwh", combined["total_kwh"] / combined["readings"])
    return combined
''',
        "compact": '''\
def compact(readings):
    """Categories for the text, 4- and 1-byte integers (not the smallest, but small)."""
    return readings.astype({"region": "category", "status": "category",
                            "meter": "int32", "hour": "int8"})
''',
    },
}

EXPECT = {
    "half_measures": {"correctness": "full", "test_summary_memory": (1.8, 3.0),
                      "test_compact_memory": (2.2, 2.8)},
    "other_full": {"total": "full"},
}
