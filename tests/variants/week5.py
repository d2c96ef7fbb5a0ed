"""Week 5 submissions that tests/test_assignments.py grades besides the reference.

``slow``: right but memory-hungry. ``region_summary`` loads the whole file (the
provided version under the student's name); ``compact`` turns the text columns into
categories and stops there, 5.6x smaller where 8x is needed. Every correctness point,
no memory point.

``wrong``: small but wrong. ``region_summary`` reads in chunks and averages the
chunks' means (the classic chunking mistake: chunks hold different numbers of readings
per region); ``compact`` stores ``kwh`` as float32, which changes most amounts in the
last digits. No memory point, and not every correctness point.
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
    """Text columns as categories; the integers keep their 8 bytes."""
    return readings.astype({"region": "category", "status": "category"})
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
}
