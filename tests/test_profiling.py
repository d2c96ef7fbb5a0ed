import cProfile
import functools
import inspect
import pstats

import numpy as np
import pandas as pd
import pytest

from course_lib import profiling


# --- code to profile ------------------------------------------------------------------


def slow_helper(k):
    total = 0
    for i in range(k):
        total += i * i
    return total


def job(calls=1_000, k=1_000):
    results = []
    for _ in range(calls):
        results.append(slow_helper(k))
    return sum(results)


def middle():
    return job(200)


def outer():
    return middle() + 1


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def builtin_heavy():
    for _ in range(5_000):  # some time of its own, far above the list comprehension's
        pass
    return sum(range(300_000))


def calls_builtin_heavy():
    return [builtin_heavy() for _ in range(3)]


def location_of(fn):
    return f"test_profiling.py:{fn.__code__.co_firstlineno}"


def row(table, fn):
    rows = table[table["location"] == location_of(fn)]
    assert len(rows) == 1, f"{fn.__name__} should appear once in the profile"
    return rows.iloc[0]


@pytest.fixture(scope="module")
def job_table():
    return profiling.profile(job)


# --- profile ----------------------------------------------------------------------------


def test_profile_counts_every_call_of_the_helper(job_table):
    helper = row(job_table, slow_helper)
    assert helper["function"] == "slow_helper"
    assert helper["ncalls"] == 1_000 and helper["primcalls"] == 1_000
    assert row(job_table, job)["ncalls"] == 1


def test_the_helper_has_the_highest_tottime(job_table):
    assert job_table.loc[job_table["tottime"].idxmax(), "function"] == "slow_helper"


def test_profile_is_sorted_by_cumulative_time_with_the_profiled_function_first(job_table):
    assert job_table["cumtime"].is_monotonic_decreasing
    assert job_table.iloc[0]["function"] == "job"
    # cumtime includes the callees, tottime does not.
    assert row(job_table, job)["cumtime"] >= row(job_table, slow_helper)["cumtime"]
    assert (job_table["cumtime"] >= job_table["tottime"] - 1e-9).all()


def test_percall_is_tottime_per_call(job_table):
    np.testing.assert_allclose(job_table["percall"], job_table["tottime"] / job_table["ncalls"])


def test_columns_and_types(job_table):
    assert list(job_table.columns[:7]) == profiling.COLUMNS
    assert job_table["ncalls"].dtype == "int64" and job_table["tottime"].dtype == "float64"


def test_result_and_arguments_are_passed_through():
    table = profiling.profile(job, 10, k=5)
    assert table.attrs["result"] == 10 * slow_helper(5)
    assert row(table, slow_helper)["ncalls"] == 10


def test_recursive_calls_are_split_into_total_and_primitive():
    table = profiling.profile(fib, 10)
    r = row(table, fib)
    assert r["ncalls"] == 177  # naive fib(10) makes 2 * F(11) - 1 calls
    assert r["primcalls"] == 1  # only the outermost call was not recursive
    assert table.attrs["result"] == 55


def test_c_functions_are_marked_built_in_and_profiler_entries_are_left_out():
    table = profiling.profile(builtin_heavy)
    builtins = table[table["location"] == profiling.BUILTIN]
    assert builtins["function"].str.contains("sum").any()
    assert not table["function"].str.contains("_lsprof|disable").any()


def test_exceptions_from_the_profiled_function_propagate():
    with pytest.raises(ZeroDivisionError):
        profiling.profile(lambda: 1 / 0)


def test_profile_rejects_a_non_callable():
    with pytest.raises(TypeError, match="function to call"):
        profiling.profile(42)


# --- to_table ---------------------------------------------------------------------------


def test_to_table_reads_a_context_manager_profile():
    with cProfile.Profile() as pr:
        job(50)
    table = profiling.to_table(pr)
    assert row(table, slow_helper)["ncalls"] == 50
    assert not table["location"].str.contains("cProfile.py").any()
    assert not table["function"].str.contains("_lsprof").any()


def test_to_table_reads_stats_and_saved_files(tmp_path):
    pr = cProfile.Profile()
    pr.runcall(job, 30)
    path = tmp_path / "run.prof"
    pr.dump_stats(path)
    for source in (pstats.Stats(pr), path, str(path)):
        assert row(profiling.to_table(source), slow_helper)["ncalls"] == 30


@pytest.mark.parametrize("bad, error", [(42, TypeError), ("no/such/file.prof", FileNotFoundError)])
def test_to_table_rejects_what_is_not_a_profile(bad, error):
    with pytest.raises(error):
        profiling.to_table(bad)


# --- hotspot ----------------------------------------------------------------------------


def test_hotspot_picks_the_helper_from_a_table(job_table):
    top = profiling.hotspot(job_table)
    assert isinstance(top, pd.Series)
    assert top["function"] == "slow_helper" and top["ncalls"] == 1_000


def test_hotspot_profiles_a_function_itself():
    assert profiling.hotspot(job, 500)["function"] == "slow_helper"


@pytest.mark.parametrize("by, expected", [("tottime", "slow_helper"), ("ncalls", "slow_helper"), ("cumtime", "middle")])
def test_hotspot_ranks_by_the_chosen_column(by, expected):
    # By cumtime, the profiled function (whose cumtime is the whole run) is skipped:
    # the answer is the most expensive branch below it.
    table = profiling.profile(outer)
    assert profiling.hotspot(table, by=by)["function"] == expected


def test_hotspot_can_skip_builtins():
    table = profiling.profile(calls_builtin_heavy)
    assert "sum" in profiling.hotspot(table)["function"]
    assert profiling.hotspot(table, exclude_builtins=True)["function"] == "builtin_heavy"


def test_hotspot_does_not_copy_the_profiled_result():
    # pandas deep-copies attrs into derived frames; a generator cannot be copied.
    def make_generator():
        job(20)
        return (i for i in range(3))

    table = profiling.profile(make_generator)
    assert profiling.hotspot(table)["function"] == "slow_helper"
    assert list(table.attrs["result"]) == [0, 1, 2]


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda t: profiling.hotspot(t, by="speed"), ValueError, "by must be one of"),
        (lambda t: profiling.hotspot(t, 5), TypeError, "already been measured"),
        (lambda t: profiling.hotspot(pd.DataFrame({"x": [1]})), ValueError, "not a profile table"),
        (lambda t: profiling.hotspot("job"), TypeError, "profile table or a function"),
        (lambda t: profiling.hotspot(t[t["location"] == "nowhere"]), ValueError, "no rows"),
    ],
)
def test_hotspot_rejects_bad_input(job_table, call, error, match):
    with pytest.raises(error, match=match):
        call(job_table)


# --- line_profile -----------------------------------------------------------------------


def numpy_heavy(n):
    x = np.ones((n, n))
    label = "result"
    y = x @ x
    if n < 0:
        label = "never"
    return {label: float(y.sum())}


def loop_five():
    total = 0
    for i in range(5):
        total += i
    return total


@pytest.fixture(scope="module")
def numpy_table():
    return profiling.line_profile(numpy_heavy, 600)


def test_line_profile_finds_the_dominant_line(numpy_table):
    top = numpy_table.loc[numpy_table["share"].idxmax()]
    assert top["source"].strip() == "y = x @ x"
    assert top["share"] > 0.5


def test_line_shares_sum_to_one(numpy_table):
    assert numpy_table["share"].sum() == pytest.approx(1.0)
    assert numpy_table["seconds"].sum() == pytest.approx(numpy_table.attrs["total_seconds"])
    np.testing.assert_allclose(numpy_table["share"], numpy_table["seconds"] / numpy_table["seconds"].sum())


def test_every_source_line_is_listed_with_its_number(numpy_table):
    assert "\n".join(numpy_table["source"]) + "\n" == inspect.getsource(numpy_heavy)
    first = numpy_heavy.__code__.co_firstlineno
    assert numpy_table["line"].tolist() == list(range(first, first + len(numpy_table)))


def test_lines_that_never_ran_have_zero_hits(numpy_table):
    by_source = dict(zip(numpy_table["source"].str.strip(), numpy_table["hits"]))
    assert by_source['label = "never"'] == 0
    assert by_source["def numpy_heavy(n):"] == 0
    assert by_source["y = x @ x"] == 1
    assert numpy_table.attrs["result"] == {"result": 600.0**3}


def test_hits_count_loop_iterations():
    table = profiling.line_profile(loop_five)
    hits = dict(zip(table["source"].str.strip(), table["hits"]))
    assert hits["total += i"] == 5
    assert hits["return total"] == 1
    assert table.attrs["result"] == 10


def test_a_function_can_be_line_profiled_again():
    # line_profiler copies the code object of a function it has seen before.
    for _ in range(2):
        table = profiling.line_profile(loop_five)
        assert dict(zip(table["source"].str.strip(), table["hits"]))["total += i"] == 5


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


@logged
def decorated_loop():
    total = 0
    for i in range(5):
        total += i
    return total


class Box:
    def loop(self, k):
        return sum(i for i in range(k))


@pytest.mark.parametrize(
    "fn, args, line",
    [
        (decorated_loop, (), "total += i"),
        (Box().loop, (4,), "return sum(i for i in range(k))"),
        (functools.partial(job, 3), (), "results.append(slow_helper(k))"),
    ],
)
def test_line_profile_follows_wrappers_to_the_code_inside(fn, args, line):
    table = profiling.line_profile(fn, *args)
    assert table.loc[table["source"].str.strip() == line, "hits"].iloc[0] > 0


@pytest.mark.parametrize(
    "fn, error, match",
    [
        (len, TypeError, "no Python source lines"),
        (42, TypeError, "function to call"),
    ],
)
def test_line_profile_rejects_what_has_no_python_lines(fn, error, match):
    with pytest.raises(error, match=match):
        profiling.line_profile(fn, [1])


def test_line_profile_explains_missing_source():
    namespace = {}
    exec("def made_up(x):\n    return x + 1\n", namespace)
    with pytest.raises(ValueError, match="cannot read the source"):
        profiling.line_profile(namespace["made_up"], 1)
