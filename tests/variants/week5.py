"""Week 5 submissions that tests/test_assignments.py grades besides the reference.

The notebook is worth 16 automatic points (the three written explanations, 6 points, are
marked by hand and left out here): correctness 5, memory and speed 6 (``region_summary``'s
peak 2, ``compact``'s deep memory 2, ``hourly_load``'s peak 1 and speed 1), and 5 for the
measurements the student records (``test_summary_peaks`` 3, ``test_compact_columns`` 1,
``test_hourly_peaks`` 1), each graded against the grader's own reading of the same code, on
inputs no call has read, and only for a right answer.

The memory and speed points follow the course's rule for alternative answers: the technique
the notebook teaches earns all of them, a half measure earns what its measurement earns on the
cell's log scale (peak traced memory of ``region_summary``: all 2 points up to 20 MB, none
from 100 MB; deep memory: all 2 points at 8 times smaller, none at 4 times; peak traced memory
of ``hourly_load``: the point up to 75 kB, none from 100 MB; its speed-up over
``hourly_load_pandas``: the point from 4x, none at 2.5x). Memory is measured exactly, so the
expected memory ranges are narrow: the peaks and factors below were measured in process
(``memory.peak``, ``memory.frame_memory``; December 2026, pandas 3.1, SQLite 3.40) on the
graded sizes. The speed-ups were measured in process too (``timing.compare``, one thread,
budget 1, load average 3-5 on the 2-core course machine), and the ranges are wide enough for a
2-core grader with a busy neighbour. Unless a variant replaces them, the measurement cells are
the reference's: they measure the variant's own functions, honestly, and earn their points.

``slow``: right but memory-hungry. ``region_summary`` loads the whole file (the provided
version under the student's name: 173 MB); ``compact`` only shrinks the integers (1.1x
smaller); ``hourly_load`` reads the whole table into pandas and filters there (the provided
version: 142 MB, 1.0x). Every correctness point and every measurement point, no memory or
speed point.

``wrong``: small or fast but wrong. ``region_summary`` reads in chunks and averages the
chunks' means (the classic chunking mistake: chunks hold different numbers of readings
per region); ``compact`` stores ``kwh`` as float32, which changes most amounts in the
last digits; ``hourly_load`` pushes everything into SQL but ends the range with
``hour < last_hour`` (the last hour is lost). No memory, speed or measurement point, and not
every correctness point: Task 3's two correctness points are both lost.

``half_measures``: ``region_summary`` reads the whole file at once, but only the three
columns it needs, with the text as categories (53 MB: about 0.8 of 2 points); ``compact``
turns the text columns into categories and stops there (5.6x: about 1 of 2 points);
``hourly_load`` filters in SQL and aggregates in pandas over the 12,000 rows the filter lets
through (1.8 MB: about 0.56 of the memory point; 11.8x: the speed point).

``other_full``: ``region_summary`` in 50,000-line chunks of every column (no ``usecols``:
8.9 MB); ``compact`` with categories and ``int32`` / ``int8`` integers (9.8x);
``hourly_load`` aggregating in SQL through ``cursor.execute(...).fetchall()`` and building the
table from its rows (23.9 kB, 15.3x). All below the full-points marks: every point.

``cursor_loop``: ``hourly_load`` streams every row of the table through the cursor and sums in
a Python loop (the other answers are the reference's). It holds almost nothing in memory
(8.1 kB: the memory point) but moves every row into Python: 1.6x-2.0x, no speed point.

Two that remember what they read, to be given nothing for it:

``identity_cache``: the provided whole-file and whole-table reads, kept in a dictionary keyed
on the file's identity (device, inode, size, modification time). A test that measured memory
on a file the function had already read, or timed calls on hard links of a few databases
(they share an inode), let the cache answer (5.2 MB measured instead of 142 MB). Every
measured call now reads a file no call has read before: every correctness point, no memory or
speed point. Its recorded peaks are honest readings of the cache at work, and agree with the
grader's: the first chunk size measured read the file, and the later ones, which found it in
the cache, still copied its valid rows (every column) before grouping them: 152.7 MB, then
112.7 MB (in process), within 1.5x of the grader's readings on its new files (every one a
first read): every measurement point.

``content_cache``: the same, keyed on a hash of the file's bytes (reading a 60,000-row
database's bytes is cheap; parsing them into a table is not): a copy or a new link of a file
read before would hit. Every timed call's database differs in content from every other, and
memory is measured on the first call on a file: every correctness point, no memory or speed
point, and the same measurement points as ``identity_cache``.

Measurements made the wrong way (the functions are the reference's):

``guessed``: figures written down instead of measured. ``whole_peak`` is the file's size on
disk (24 MB: "the whole file in memory") and each chunk's peak that size in proportion to
its lines; ``hourly_peaks`` says 10 MB and 1 kB. Every figure is 5 to 25 times off the
grader's reading: no measurement point.

``careless``: real measurements, each with one slip. ``chunk_peaks`` has two chunk sizes, not
three (two thirds of its 2 points); ``columns_before`` and ``columns_after`` come from
``memory_usage()`` without ``deep=True`` (a text column counted at 8 bytes a row instead of
about 60: the point is lost); ``hourly_peaks`` was measured on ``SMALL_DB`` instead of
``READINGS_DB`` (the provided version's peak 60 times too small: half the point is lost).
"""

SLOW_HOURLY = '''\
def hourly_load(path, region, first_hour, last_hour):
    """Per hour: reads the whole table into pandas, as hourly_load_pandas does."""
    with contextlib.closing(open_read_only(path)) as db:
        readings = pd.read_sql("SELECT * FROM readings", db)
    chosen = readings[(readings["region"] == region)
                      & readings["hour"].between(first_hour, last_hour)
                      & (readings["status"] != "fault")]
    return chosen.groupby("hour")["kwh"].agg(
        readings="count", total_kwh="sum", mean_kwh="mean", max_kwh="max")
'''

WRONG_HOURLY = '''\
def hourly_load(path, region, first_hour, last_hour):
    """Filter and aggregation in SQLite, but the range stops before last_hour (wrong)."""
    query = """
        SELECT hour, COUNT(*) AS readings, SUM(kwh) AS total_kwh,
               AVG(kwh) AS mean_kwh, MAX(kwh) AS max_kwh
        FROM readings
        WHERE region = ? AND hour >= ? AND hour < ? AND status != 'fault'
        GROUP BY hour ORDER BY hour
    """
    with contextlib.closing(open_read_only(path)) as db:
        load = pd.read_sql(query, db, params=(region, first_hour, last_hour), index_col="hour",
                           dtype={"readings": "int64", "total_kwh": "float64",
                                  "mean_kwh": "float64", "max_kwh": "float64"})
    load.index = load.index.astype("int64")
    return load
'''

SQL_FILTER_HOURLY = '''\
def hourly_load(path, region, first_hour, last_hour):
    """The filter in SQLite; the aggregation in pandas, over every row the filter lets through."""
    query = ("SELECT hour, kwh FROM readings "
             "WHERE region = ? AND hour BETWEEN ? AND ? AND status != 'fault'")
    with contextlib.closing(open_read_only(path)) as db:
        chosen = pd.read_sql(query, db, params=(region, first_hour, last_hour),
                             dtype={"hour": "int64", "kwh": "float64"})
    return chosen.groupby("hour")["kwh"].agg(
        readings="count", total_kwh="sum", mean_kwh="mean", max_kwh="max")
'''

FETCHALL_HOURLY = '''\
def hourly_load(path, region, first_hour, last_hour):
    """Filter and aggregation in SQLite through the cursor; the table built from its rows."""
    query = ("SELECT hour, COUNT(*), SUM(kwh), SUM(kwh) / COUNT(*), MAX(kwh) FROM readings "
             "WHERE region = ? AND hour >= ? AND hour <= ? AND status <> 'fault' "
             "GROUP BY hour ORDER BY hour")
    with contextlib.closing(open_read_only(path)) as db:
        rows = db.execute(query, (region, first_hour, last_hour)).fetchall()
    table = pd.DataFrame(rows, columns=["hour", "readings", "total_kwh", "mean_kwh", "max_kwh"])
    return table.astype({"hour": "int64", "readings": "int64", "total_kwh": "float64",
                         "mean_kwh": "float64", "max_kwh": "float64"}).set_index("hour")
'''

CURSOR_LOOP_HOURLY = '''\
def hourly_load(path, region, first_hour, last_hour):
    """Every row streamed through the cursor, one at a time: little memory, a Python loop."""
    totals = {}  # hour -> [readings, total, largest]
    with contextlib.closing(open_read_only(path)) as db:
        for row_region, hour, kwh, status in db.execute(
                "SELECT region, hour, kwh, status FROM readings"):
            if row_region == region and first_hour <= hour <= last_hour and status != "fault":
                seen = totals.setdefault(hour, [0, 0.0, kwh])
                seen[0] += 1
                seen[1] += kwh
                seen[2] = max(seen[2], kwh)
    hours = sorted(totals)
    return pd.DataFrame({
        "readings": np.array([totals[h][0] for h in hours], dtype=np.int64),
        "total_kwh": np.array([totals[h][1] for h in hours], dtype=np.float64),
        "mean_kwh": np.array([totals[h][1] / totals[h][0] for h in hours], dtype=np.float64),
        "max_kwh": np.array([totals[h][2] for h in hours], dtype=np.float64),
    }, index=pd.Index(np.array(hours, dtype=np.int64), name="hour"))
'''

IDENTITY_KEY = '''
import os

_TABLES = {}


def _identity(path):
    """The file's identity: device, inode, size and modification time."""
    info = os.stat(path)
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
'''

CONTENT_KEY = '''
import hashlib

_TABLES = {}


def _identity(path):
    """A hash of the file's bytes: the same for a copy or another link of the file."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
'''

READERS = '''

def _whole_file(path):
    key = _identity(path)
    if key not in _TABLES:
        _TABLES[key] = pd.read_csv(path)
    return _TABLES[key]


def _whole_table(path):
    key = _identity(path)
    if key not in _TABLES:
        with contextlib.closing(open_read_only(path)) as db:
            _TABLES[key] = pd.read_sql("SELECT * FROM readings", db)
    return _TABLES[key]
'''

IDENTITY_CACHE = IDENTITY_KEY + READERS
CONTENT_CACHE = CONTENT_KEY + READERS

CACHED_ANSWERS = '''

def region_summary(path, chunksize=50_000):
    """The provided whole-file read, remembered for the next call on the same file."""
    readings = _whole_file(path)
    valid = readings[readings["status"] != "fault"]
    return valid.groupby("region")["kwh"].agg(
        readings="count", total_kwh="sum", mean_kwh="mean", max_kwh="max")
'''

CACHED_HOURLY = '''

def hourly_load(path, region, first_hour, last_hour):
    """The provided whole-table read, remembered for the next call on the same file."""
    readings = _whole_table(path)
    chosen = readings[(readings["region"] == region)
                      & readings["hour"].between(first_hour, last_hour)
                      & (readings["status"] != "fault")]
    return chosen.groupby("hour")["kwh"].agg(
        readings="count", total_kwh="sum", mean_kwh="mean", max_kwh="max")
'''

GUESSED_PEAKS = """\
whole_peak = READINGS_CSV.stat().st_size  # "the whole file in memory": guessed, not measured
chunk_peaks = {size: whole_peak * size // 1_000_000 for size in (10_000, 50_000, 200_000)}
"""

GUESSED_HOURLY_PEAKS = """\
hourly_peaks = {"hourly_load_pandas": 10_000_000, "hourly_load": 1_000}  # guessed
"""

CARELESS_PEAKS = """\
whole_peak = peak(region_summary_whole, READINGS_CSV).peak
chunk_peaks = {size: peak(region_summary, READINGS_CSV, chunksize=size).peak for size in (10_000, 50_000)}
"""

CARELESS_COLUMNS = """\
table = make_readings(200_000, seed=5)
columns_before = table.memory_usage()  # shallow: the text columns' strings are not counted
columns_after = compact(table).memory_usage()
columns_before["total"], columns_after["total"] = columns_before.sum(), columns_after.sum()
"""

CARELESS_HOURLY_PEAKS = """\
hourly_peaks = {  # measured on the small database by mistake
    "hourly_load_pandas": peak(hourly_load_pandas, SMALL_DB, "north", 16, 21).peak,
    "hourly_load": peak(hourly_load, SMALL_DB, "north", 16, 21).peak,
}
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
        "hourly_load": SLOW_HOURLY,
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
        "hourly_load": WRONG_HOURLY,
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
        "hourly_load": SQL_FILTER_HOURLY,
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
        "hourly_load": FETCHALL_HOURLY,
    },
    "cursor_loop": {"hourly_load": CURSOR_LOOP_HOURLY},
    "identity_cache": {"region_summary": IDENTITY_CACHE + CACHED_ANSWERS, "hourly_load": IDENTITY_CACHE + CACHED_HOURLY},
    "content_cache": {"region_summary": CONTENT_CACHE + CACHED_ANSWERS, "hourly_load": CONTENT_CACHE + CACHED_HOURLY},
    "guessed": {"summary_peaks": GUESSED_PEAKS, "hourly_peaks": GUESSED_HOURLY_PEAKS},
    "careless": {"summary_peaks": CARELESS_PEAKS, "compact_columns": CARELESS_COLUMNS,
                 "hourly_peaks": CARELESS_HOURLY_PEAKS},
}

_MEASURED = {"test_summary_peaks": "full", "test_compact_columns": "full", "test_hourly_peaks": "full"}
_CORRECT = {"test_summary_visible": "full", "test_summary_hidden": "full", "test_compact_visible": "full",
            "test_hourly_visible": "full", "test_hourly_hidden": "full"}

EXPECT = {
    "wrong": {"performance": 0, "correctness": "less", "test_hourly_visible": 0, "test_hourly_hidden": 0,
              "test_summary_peaks": 0, "test_compact_columns": 0, "test_hourly_peaks": 0},
    "half_measures": {"correctness": "full", "test_summary_memory": (0.6, 1.0),
                      "test_compact_memory": (0.85, 1.15), "test_hourly_memory": (0.45, 0.67),
                      "test_hourly_speed": "full"},
    "other_full": {"total": "full"},
    "cursor_loop": {"correctness": "full", "test_summary_memory": "full", "test_compact_memory": "full",
                    "test_hourly_memory": "full", "test_hourly_speed": (0, 0.25)},
    "identity_cache": {**_CORRECT, "test_summary_memory": 0, "test_compact_memory": "full",
                       "test_hourly_memory": 0, "test_hourly_speed": 0, "test_summary_peaks": "full",
                       "test_compact_columns": "full", "test_hourly_peaks": "full"},
    "content_cache": {**_CORRECT, "test_summary_memory": 0, "test_compact_memory": "full",
                      "test_hourly_memory": 0, "test_hourly_speed": 0, "test_summary_peaks": "full",
                      "test_compact_columns": "full", "test_hourly_peaks": "full"},
    "guessed": {"performance": "full", **_CORRECT, "test_summary_peaks": 0, "test_compact_columns": "full",
                "test_hourly_peaks": 0},
    "careless": {"performance": "full", **_CORRECT, "test_summary_peaks": (2.2, 2.4), "test_compact_columns": 0,
                 "test_hourly_peaks": (0.45, 0.55)},
}
