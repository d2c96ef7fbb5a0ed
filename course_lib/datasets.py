"""The Week 1 orders data and the ETL-plus-scoring job that the course measures.

The job has four stages, each a small function you can call on its own:

``load``
    read the orders CSV (:func:`load`).
``clean``
    convert every amount to pounds sterling, either one row at a time with a
    Python function (:func:`clean_slow`, the red flag the course teaches you to
    spot) or as one column operation (:func:`clean_fast`).
``compute``
    a dense stand-in for a scoring model plus the total GBP spent per user
    (:func:`compute`).
``save``
    write the result CSV (:func:`save`).

:func:`run_etl` runs all four under a :func:`course_lib.timing.stages` stopwatch,
and :func:`buckets` sorts the stage times into compute, I/O and overhead, the
three kinds of time an accelerator does or does not help with.

Sizes scale together: the syllabus job has one million orders and scores a
50,000 x 256 matrix; a run with ``n`` orders scores ``n / 20`` rows, so every
stage keeps roughly its full-size share of the run time and a small run tells
the same story, only sooner.
"""

from __future__ import annotations

import contextlib
import numbers
import operator
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from course_lib import timing

__all__ = [
    "COUNTRIES",
    "RATES",
    "USERS",
    "FULL_SIZE",
    "FEATURES",
    "ROUNDS",
    "STAGES",
    "BUCKETS",
    "make_orders",
    "write_orders",
    "load",
    "clean_slow",
    "clean_fast",
    "score_rows_for",
    "score",
    "compute",
    "save",
    "run_etl",
    "buckets",
    "results_match",
]

COUNTRIES: tuple[str, ...] = ("GB", "US", "DE", "FR", "IN")
"""Countries an order can come from."""

RATES: Mapping[str, float] = {"GB": 1.0, "US": 0.79, "DE": 0.85, "FR": 0.85, "IN": 0.0095}
"""Pounds sterling per unit of each country's currency."""

USERS = 50_000
"""``user_id`` runs from 0 to ``USERS - 1``."""

FULL_SIZE = 1_000_000
"""Orders in the syllabus-sized job."""

FULL_SCORE_ROWS = 50_000
"""Rows the scoring model sees in the syllabus-sized job."""

FEATURES = 256
"""Columns of the scoring model's matrix."""

ROUNDS = 20
"""Rounds of ``tanh(X @ W / 16)`` in the scoring model."""

STAGES: tuple[str, ...] = ("load", "clean", "compute", "save")
"""The job's stages, in the order they run."""

BUCKETS: Mapping[str, str] = {
    "load": "I/O",
    "clean": "overhead",
    "compute": "compute",
    "save": "I/O",
}
"""Which kind of time each stage is: numeric kernels (compute), disk, parsing and
formatting (I/O), or per-row Python glue (overhead). Only compute is what an
accelerator speeds up."""

_BUCKET_ORDER = ("compute", "I/O", "overhead")


def make_orders(n: int, seed: int | None = 0) -> pd.DataFrame:
    """Generate ``n`` orders: who bought, how much, and in which currency.

    Parameters
    ----------
    n : int
        Number of orders, at least 1. The syllabus job uses ``FULL_SIZE`` (one million).
    seed : int or None, default 0
        Seed for :func:`numpy.random.default_rng`; the same seed gives the same
        orders on every machine. ``None`` draws fresh orders each call.

    Returns
    -------
    pandas.DataFrame
        Columns ``user_id`` (int64, 0 to 49,999), ``amount`` (float64, drawn from
        Normal(50, 20) and rounded to cents, so a few are negative: refunds) and
        ``country`` (one of :data:`COUNTRIES`).

    Examples
    --------
    >>> orders = make_orders(5, seed=1)
    >>> list(orders.columns)
    ['user_id', 'amount', 'country']
    >>> orders.equals(make_orders(5, seed=1))
    True
    """
    n = _check_size(n)
    seed = _check_seed(seed, allow_none=True)
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "user_id": rng.integers(0, USERS, size=n, dtype=np.int64),
            "amount": np.round(rng.normal(50.0, 20.0, size=n), 2),
            "country": rng.choice(np.array(COUNTRIES), size=n),
        }
    )


def write_orders(path: str | os.PathLike[str], n: int, seed: int | None = 0) -> Path:
    """Write :func:`make_orders` ``(n, seed)`` to a CSV file and return its path.

    The file is written beside its final name and then renamed, so an
    interrupted run never leaves a half-written file that a later run would trust.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_orders(pathlib.Path(tmp) / "orders.csv", 3, seed=0)
    ...     load(path).equals(make_orders(3, seed=0))
    True
    """
    path = Path(path)
    orders = make_orders(n, seed)
    partial = path.with_name(path.name + ".partial")
    orders.to_csv(partial, index=False)
    partial.replace(path)
    return path


def load(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The load stage: read an orders CSV written by :func:`write_orders`.

    Examples
    --------
    >>> import io
    >>> load(io.StringIO("user_id,amount,country\\n7,12.5,DE\\n")).loc[0, "amount"]
    np.float64(12.5)
    """
    orders = pd.read_csv(path)
    _check_orders(orders)
    return orders


def clean_slow(orders: pd.DataFrame) -> pd.DataFrame:
    """The clean stage, one row at a time: add ``gbp``, each amount in pounds.

    This is the version to be suspicious of. ``DataFrame.apply(..., axis=1)``
    builds a pandas Series for every row and calls a Python function on it, so
    the time goes on interpreter and pandas overhead, not on the one
    multiplication per row. Under a profiler it shows up as a lambda called once
    per order.

    Examples
    --------
    >>> orders = pd.DataFrame({"user_id": [0, 1], "amount": [10.0, 100.0],
    ...                        "country": ["US", "IN"]})
    >>> clean_slow(orders)["gbp"].tolist()
    [7.9, 0.95]
    """
    _check_orders(orders)
    try:
        # A lambda on purpose: it is the shape of code the course teaches
        # students to find with cProfile ("<lambda>", ncalls = number of rows).
        gbp = orders.apply(lambda row: row["amount"] * RATES[row["country"]], axis=1)
    except KeyError:  # a country with no rate; hide the deep apply traceback
        raise ValueError(_unknown_country_message(orders)) from None
    if len(orders) == 0:
        # apply on an empty frame returns an empty frame, not a column
        gbp = pd.Series([], index=orders.index, dtype="float64")
    return orders.assign(gbp=gbp.astype("float64"))


def clean_fast(orders: pd.DataFrame) -> pd.DataFrame:
    """The clean stage as column operations: look up every rate at once, multiply once.

    Each ``gbp`` value is the same float64 product ``amount * rate`` that
    :func:`clean_slow` computes, so the two results are identical, not merely close.

    Examples
    --------
    >>> orders = make_orders(1_000, seed=3)
    >>> clean_fast(orders).equals(clean_slow(orders))
    True
    """
    _check_orders(orders)
    rate = orders["country"].map(RATES)
    if rate.isna().any():
        raise ValueError(_unknown_country_message(orders))
    return orders.assign(gbp=orders["amount"] * rate.astype("float64"))


def score_rows_for(n: int) -> int:
    """Rows the scoring model sees in a job of ``n`` orders: ``n / 20``, at least 1.

    At full size (one million orders) that is the syllabus's 50,000 rows.

    Examples
    --------
    >>> score_rows_for(1_000_000), score_rows_for(100_000), score_rows_for(3)
    (50000, 5000, 1)
    """
    n = _check_size(n)
    return max(1, round(FULL_SCORE_ROWS * n / FULL_SIZE))


def score(spend: np.ndarray, rounds: int = ROUNDS, seed: int = 0) -> np.ndarray:
    """A dense stand-in for a scoring model: one score per row of ``spend``.

    Builds an ``len(spend) x 256`` feature matrix (column 0 the spend scaled to
    about unit size, the rest seeded noise standing in for other features),
    then applies ``X = tanh(X @ W / 16)`` ``rounds`` times with a seeded
    256 x 256 weight matrix and returns the mean of each final row. Nearly all
    the time is the matrix product: this is the job's compute bucket, the part
    an accelerator could take.

    Parameters
    ----------
    spend : numpy.ndarray
        One value per scored user (GBP spent).
    rounds : int, default 20
        Rounds of the matrix product.
    seed : int, default 0
        Seed for the features and weights (a stream independent of the orders').

    Examples
    --------
    >>> s = score(np.array([10.0, 50.0, 90.0]), rounds=2)
    >>> s.shape, bool(np.all(np.abs(s) < 1))
    ((3,), True)
    """
    spend = np.asarray(spend, dtype=np.float64)
    if spend.ndim != 1 or len(spend) == 0:
        raise ValueError(f"spend must be a non-empty 1-D array of GBP totals, got shape {spend.shape}")
    rounds = _check_count(rounds, "rounds")
    # A child of the job's seed, so the model's numbers never reuse the orders' stream.
    rng = np.random.default_rng(np.random.SeedSequence(_check_seed(seed)).spawn(1)[0])
    weights = rng.standard_normal((FEATURES, FEATURES))
    x = rng.standard_normal((len(spend), FEATURES))
    x[:, 0] = spend / 50.0 - 1.0
    for _ in range(rounds):
        # / 16 = / sqrt(256) keeps each product's spread near that of its input
        x = np.tanh(x @ weights / 16.0)
    return x.mean(axis=1)


def compute(
    cleaned: pd.DataFrame,
    score_rows: int | None = None,
    rounds: int = ROUNDS,
    seed: int = 0,
) -> pd.DataFrame:
    """The compute stage: total GBP per user, and a model score for the first users.

    Parameters
    ----------
    cleaned : pandas.DataFrame
        Output of :func:`clean_slow` or :func:`clean_fast`.
    score_rows : int, optional
        How many users (in ``user_id`` order) the model scores. Default
        :func:`score_rows_for` of the number of orders, capped at the number of
        users who ordered; at full size that is every user.
    rounds : int, default 20
        Rounds of the scoring model.
    seed : int, default 0
        Seed of the scoring model.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``user_id`` (every user with an order), columns ``orders``
        (count), ``gbp`` (sum) and ``score`` (NaN for users the model did not score).

    Examples
    --------
    >>> result = compute(clean_fast(make_orders(200, seed=0)), rounds=1)
    >>> list(result.columns), int(result["orders"].sum()), int(result["score"].notna().sum())
    (['orders', 'gbp', 'score'], 200, 10)
    """
    if "gbp" not in getattr(cleaned, "columns", ()):
        raise ValueError("compute needs the cleaned orders (with a 'gbp' column): run clean_slow or clean_fast first")
    per_user = cleaned.groupby("user_id")["gbp"]
    result = pd.DataFrame({"orders": per_user.size(), "gbp": per_user.sum()})
    if score_rows is None:
        score_rows = min(score_rows_for(max(len(cleaned), 1)), len(result))
    else:
        score_rows = _check_count(score_rows, "score_rows")
        if score_rows > len(result):
            raise ValueError(
                f"only {len(result)} users placed orders, so the model cannot score "
                f"score_rows={score_rows} of them; use at most {len(result)}"
            )
    scores = np.full(len(result), np.nan)
    scores[:score_rows] = score(result["gbp"].to_numpy()[:score_rows], rounds=rounds, seed=seed)
    result["score"] = scores
    return result


def save(result: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """The save stage: write the result CSV (``user_id`` first) and return its path."""
    path = Path(path)
    result.to_csv(path)
    return path


def run_etl(
    n: int,
    workdir: str | os.PathLike[str] | None = None,
    vectorised: bool = False,
    seed: int = 0,
    *,
    score_rows: int | None = None,
    rounds: int = ROUNDS,
) -> tuple[timing.Stopwatch, pd.DataFrame]:
    """Run the whole job on ``n`` orders and time its four stages.

    Writing the orders CSV is the job's input, not part of it, so it is not
    timed; with a ``workdir`` it is written once and reused by later runs (which
    then read it from a warm file cache: one reason to time a second run).

    Parameters
    ----------
    n : int
        Number of orders; ``FULL_SIZE`` for the syllabus job.
    workdir : path, optional
        Folder for the orders and result CSVs; default a temporary folder that
        is removed afterwards.
    vectorised : bool, default False
        Clean with :func:`clean_fast` instead of :func:`clean_slow`.
    seed : int, default 0
        Seed of the orders and of the scoring model.
    score_rows, rounds
        Passed to :func:`compute`.

    Returns
    -------
    (Stopwatch, pandas.DataFrame)
        The stopwatch (stages ``load``, ``clean``, ``compute``, ``save``) and
        the result that was saved.

    Examples
    --------
    >>> sw, result = run_etl(300, vectorised=True, rounds=1)
    >>> list(sw.table().index)
    ['load', 'clean', 'compute', 'save']
    >>> int(result["orders"].sum())
    300
    """
    n = _check_size(n)
    seed = _check_seed(seed)
    if not isinstance(vectorised, bool):
        raise TypeError(f"vectorised must be True or False, got {vectorised!r}")
    if score_rows is not None:
        _check_count(score_rows, "score_rows")
    rounds = _check_count(rounds, "rounds")
    clean = clean_fast if vectorised else clean_slow
    with _folder(workdir) as folder:
        orders_path = folder / f"orders_n{n}_seed{seed}.csv"
        if not orders_path.exists():
            write_orders(orders_path, n, seed)
        result_path = folder / f"result_{'fast' if vectorised else 'slow'}_n{n}_seed{seed}.csv"
        sw = timing.stages()
        with sw("load"):
            orders = load(orders_path)
        with sw("clean"):
            cleaned = clean(orders)
        with sw("compute"):
            result = compute(cleaned, score_rows=score_rows, rounds=rounds, seed=seed)
        with sw("save"):
            save(result, result_path)
    return sw, result


def buckets(table: pd.DataFrame, mapping: Mapping[str, str] = BUCKETS) -> pd.DataFrame:
    """Sort a stage table into compute, I/O and overhead time.

    Parameters
    ----------
    table : pandas.DataFrame
        A stage table as from ``Stopwatch.table()``: indexed by stage, with a
        ``seconds`` column (and ``cpu_seconds``, carried along when present).
    mapping : mapping, default BUCKETS
        Bucket of each stage.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``bucket`` (compute, I/O, overhead, then any others), columns
        ``seconds``, ``cpu_seconds`` (if the table has them), ``share`` (fractions
        summing to 1) and ``stages`` (which stages went in).

    Examples
    --------
    >>> table = pd.DataFrame({"seconds": [0.6, 12.8, 1.3, 2.2]},
    ...                      index=pd.Index(list(STAGES), name="stage"))
    >>> buckets(table)["share"].round(3).tolist()
    [0.077, 0.166, 0.757]
    """
    if not isinstance(table, pd.DataFrame) or "seconds" not in table.columns:
        raise TypeError("buckets needs a stage table with a 'seconds' column, such as Stopwatch.table()")
    unknown = [stage for stage in table.index if stage not in mapping]
    if unknown:
        raise ValueError(
            f"stage(s) {unknown} have no bucket; pass mapping={{stage: 'compute' | 'I/O' | 'overhead'}}"
        )
    total = float(table["seconds"].sum())
    if not total > 0:
        raise ValueError("the stage table adds up to no time at all; time a run before sorting it")
    columns = ["seconds"] + (["cpu_seconds"] if "cpu_seconds" in table.columns else [])
    labels = table.index.map(lambda stage: mapping[stage])
    summed = table[columns].groupby(labels, sort=False).sum()
    named = pd.Series(table.index, index=labels).groupby(level=0, sort=False).agg(", ".join)
    order = [b for b in _BUCKET_ORDER if b in summed.index] + [b for b in summed.index if b not in _BUCKET_ORDER]
    out = summed.loc[order]
    out["share"] = out["seconds"] / total
    out["stages"] = named.loc[order]
    out.index.name = "bucket"
    return out


def results_match(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """True when two job results agree: same users, counts and GBP, same scores.

    Users, order counts and GBP totals must be identical, bit for bit: both
    clean stages do the same float64 multiplication. Scores are compared to
    within 1e-9 relative, because a BLAS library may split a matrix product
    differently between runs (thread count, memory alignment) and so round
    differently in the last bits; NaN (unscored) must match NaN.

    Examples
    --------
    >>> orders = make_orders(500, seed=2)
    >>> results_match(compute(clean_slow(orders), rounds=2), compute(clean_fast(orders), rounds=2))
    True
    """
    if list(a.columns) != list(b.columns) or not a.index.equals(b.index):
        return False
    exact = [c for c in a.columns if c != "score"]
    if not a[exact].equals(b[exact]):
        return False
    if "score" not in a.columns:
        return True
    return bool(np.allclose(a["score"], b["score"], rtol=1e-9, atol=0.0, equal_nan=True))


def _check_size(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"n is a number of orders and must be a whole number such as 100_000, got {n!r}")
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"n is a number of orders and must be at least 1, got {n}")
    return n


def _check_count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a whole number, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return operator.index(value)


def _check_seed(seed: object, allow_none: bool = False) -> int | None:
    if seed is None and allow_none:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be a whole number such as 0, got {seed!r}")
    if seed < 0:
        raise ValueError(f"seed must not be negative, got {seed}")
    return operator.index(seed)


def _check_orders(orders: object) -> None:
    if not isinstance(orders, pd.DataFrame):
        raise TypeError(f"expected the orders as a pandas DataFrame, got {type(orders).__name__}")
    missing = [c for c in ("user_id", "amount", "country") if c not in orders.columns]
    if missing:
        raise ValueError(f"orders need columns user_id, amount and country; missing {missing}")


def _unknown_country_message(orders: pd.DataFrame) -> str:
    countries = orders["country"]
    unknown = sorted(set(countries.dropna().unique()) - set(RATES))
    if countries.isna().any():
        unknown.append("<missing>")
    return f"no exchange rate for country {unknown}; RATES knows {sorted(RATES)}"


@contextlib.contextmanager
def _folder(workdir: str | os.PathLike[str] | None):
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="measure-first-") as tmp:
            yield Path(tmp)
    else:
        folder = Path(workdir)
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
