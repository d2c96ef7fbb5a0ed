"""course_lib.book: a chapter's set-up, usable cores, and what a labelled figure is."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from course_lib import book  # noqa: E402


@pytest.fixture
def glued(monkeypatch):
    calls = {}
    import myst_nb

    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True:
                        calls.__setitem__(name, value))
    return calls


@pytest.mark.parametrize("size, budget", [("small", 0.3), ("full", 1.0)])
def test_setup_picks_the_budget_for_the_size_and_records_it(monkeypatch, glued, size,
                                                            budget):
    monkeypatch.setenv("MEASURE_FIRST_SIZE", size)
    page = book.setup(budget=(0.3, 1.0), precision=None)
    assert (page.size, page.budget) == (size, budget)
    assert glued["size"] == size and glued["budget"] == budget
    assert glued["cores"] == page.cores >= 1
    assert page.workdir is None


def test_setup_makes_a_scratch_folder_when_asked(monkeypatch, glued, tmp_path):
    monkeypatch.chdir(tmp_path)
    page = book.setup(workdir=True, precision=None)
    assert page.workdir.is_dir() and page.workdir != tmp_path
    moved = book.setup(chdir=True, precision=None)
    from pathlib import Path

    assert Path.cwd() == moved.workdir


def test_a_cgroup_quota_caps_the_usable_cores(monkeypatch):
    monkeypatch.setattr(book, "_cgroup_quota", lambda: 1.5)
    assert book.usable_cores() == 1
    monkeypatch.setattr(book, "_cgroup_quota", lambda: None)
    assert book.usable_cores() >= 1


def _labels(draw):
    fig, axes = draw()
    fig.canvas.draw()
    try:
        return book.figure_problems(book.figure_labels(fig))
    finally:
        plt.close(fig)


def test_a_labelled_figure_has_no_problems():
    def draw():
        fig, ax = plt.subplots()
        ax.plot([1, 2], [3, 4])
        ax.set(xlabel="workers", ylabel="speed-up", title="scaling")
        return fig, ax
    assert _labels(draw) == []


def test_bar_names_label_an_axis_and_a_shared_axis_counts_once():
    def draw():
        fig, (left, right) = plt.subplots(1, 2, sharey=True)
        for ax in (left, right):
            ax.barh(["numpy", "numba"], [1, 2])
            ax.set_xlabel("speed-up")
        fig.suptitle("two panels, one title")
        return fig, (left, right)
    assert _labels(draw) == []


def test_missing_titles_and_labels_are_named():
    def draw():
        fig, (left, right) = plt.subplots(1, 2)
        left.plot([1, 2], [1, 2])
        left.set(xlabel="n", ylabel="seconds")
        right.hist([1, 2, 2, 3])
        right.set(xlabel="ms")
        return fig, (left, right)
    assert _labels(draw) == ["panel 1 has no title", "panel 2 has no title",
                             "panel 2 has no y-axis label"]


def test_alt_text_says_what_each_panel_shows():
    fig, (left, right) = plt.subplots(1, 2)
    left.barh(["load", "clean"], [1.0, 2.0])
    left.set(xlabel="seconds", title="as written")
    right.plot([1, 2], [3, 4], label="quiet")
    right.plot([1, 2], [4, 5], label="busy")
    right.legend()
    right.set(xlabel="round", ylabel="$n^2$ calls", title="paired")
    fig.suptitle("Two views")
    fig.legend(["no competitors"], loc="upper center")
    fig.canvas.draw()
    try:
        alt = book.figure_alt(book.figure_labels(fig))
    finally:
        plt.close(fig)
    assert alt == ("Two views. 2 plots. Plot 1: as written. Horizontal axis: seconds. "
                   "Vertical axis: load, clean. Plot 2: paired. Horizontal axis: round. "
                   "Vertical axis: n^2 calls. Legend: quiet, busy. "
                   "Legend for all plots: no competitors.")


def test_alt_text_names_every_tick_of_an_axis_named_in_words():
    # A size axis labelled "500, 1k, 2k": the 500 is a name too (the full-size read found
    # it dropped from week 3's alt text); an axis of plain numbers names nothing.
    fig, (named, plain) = plt.subplots(1, 2)
    for ax in (named, plain):
        ax.plot([500, 1000, 2000], [1, 2, 3])
        ax.set(xlabel="n", ylabel="seconds", title="growth")
    named.set_xticks([500, 1000, 2000], ["500", "1k", "2k"])
    plain.set_xticks([500, 1000, 2000])
    fig.canvas.draw()
    try:
        labels = book.figure_labels(fig)
    finally:
        plt.close(fig)
    assert labels["axes"][0]["xnames"] == ["500", "1k", "2k"]
    assert labels["axes"][1]["xnames"] == []
    assert "Horizontal axis: n (500, 1k, 2k)." in book.figure_alt(labels)


def test_a_shown_figure_records_its_alt_text():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    ax.set(xlabel="n", ylabel="seconds", title="growth")
    try:
        _, labels = book._label_record(fig)
    finally:
        plt.close(fig)
    assert labels["alt"] == "Plot: growth. Horizontal axis: n. Vertical axis: seconds."
    assert labels["problems"] == []


def test_pin_limits_every_loaded_blas_pool():
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=None):
        book.pin(blas=1)
        assert all(p["num_threads"] == 1 for p in threadpool_info()
                   if p["user_api"] == "blas")


def _cost_record(tmp_path, chapters):
    import json

    path = tmp_path / "costs.json"
    path.write_text(json.dumps({size: {"machine": {"cores": 2}, "chapters": entries}
                                for size, entries in chapters.items()}))
    return path


def _entry(sha, seconds=120.0, process=300.0, everything=250.0, date="2025-01-02T10:00+00:00"):
    return {"seconds": seconds, "peak_process_mb": process, "peak_all_mb": everything,
            "load_max": 3.0, "sha256": sha, "recorded": date}


def test_chapter_costs_reads_minutes_and_the_larger_memory_peak(tmp_path):
    path = _cost_record(tmp_path, {
        "full": {"book/a.md": _entry("x", 600.0, 300.0, 900.0)},
        "small": {"book/a.md": _entry("x", 60.0, 200.0, 150.0, "2025-01-01T09:00+00:00")}})
    table = book.chapter_costs(path)
    row = table.loc["book/a.md"]
    assert row["full minutes"] == 10.0 and row["small minutes"] == 1.0
    # the sampled sum of the kernel and its workers can exceed the largest process
    # MiB in the record, decimal GB on the page (as the chapters count memory)
    assert row["full peak GB"] == pytest.approx(900 * 2**20 / 1e9)
    assert row["small peak GB"] == pytest.approx(200 * 2**20 / 1e9)
    assert list(table.columns[:3]) == ["full minutes", "full peak GB", "full load"]
    assert table.attrs["recorded"] == {"full": ("2025-01-02", "2025-01-02"),
                                       "small": ("2025-01-01", "2025-01-01")}


def test_chapter_costs_marks_a_chapter_edited_since_it_was_measured(tmp_path):
    import hashlib
    from pathlib import Path

    doc = "book/week3_algorithms.md"
    now = hashlib.sha256((Path(book.__file__).parents[1] / doc).read_bytes()).hexdigest()
    path = _cost_record(tmp_path, {
        "full": {doc: _entry(now), "book/week2_timing.md": _entry("old"),
                 "book/not_here.md": _entry("y")},
        "small": {doc: _entry("older")}})
    changed = book.chapter_costs(path)["changed"]
    assert changed["book/week2_timing.md"] is True
    assert changed["book/not_here.md"] is None          # no source to compare with
    assert changed[doc] is True                          # one size measured an older text
    only_full = _cost_record(tmp_path, {"full": {doc: _entry(now)}})
    assert book.chapter_costs(only_full)["changed"][doc] is False


def test_a_missing_cost_record_says_how_to_make_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="benchmarks/chapter_costs.py"):
        book.chapter_costs(tmp_path / "none.json")
