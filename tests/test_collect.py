"""Tests for course_lib.grader.collect: submission times from the course's own fetches, not commit dates.

Real git repositories with a bare "GitHub" remote each; the collection's clock is given.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from course_lib.grader import collect
from classroom import classroom_repo, git, push
from course_lib.grader._submissions import Submission, find_submissions

DUE = datetime.datetime(2026, 12, 10, 17, 0)


def at(hour: int, minute: int = 0) -> datetime.datetime:
    return datetime.datetime(2026, 12, 10, hour, minute)


def test_a_push_after_the_deadline_dated_before_it_is_seen_late(tmp_path):
    subs, work = _classroom(tmp_path, "ada")
    push(work, "week1.ipynb", "first try", "2026-12-10T16:00:00+00:00")
    report = _collect(tmp_path, subs, at(16, 30))
    assert report.recorded == ["ada"] and report.counts_as == at(16, 30)
    _collect(tmp_path, subs, at(17, 0) + datetime.timedelta(seconds=40))  # the deadline's collection
    push(work, "week1.ipynb", "after the deadline", "2026-12-10T16:45:00+00:00")  # GIT_COMMITTER_DATE forged
    report = _collect(tmp_path, subs, at(18, 10))
    assert report.recorded == ["ada"] and not report.failed
    [found] = find_submissions(subs, "week1", ["week1"])
    when, text = collect.time_of(tmp_path / "grading", found)
    assert (when.source, when.time, when.claimed) == ("collected", at(18, 10), "2026-12-10T16:45:00+00:00")
    assert text == "2026-12-10T18:10:00+00:00\n"  # what nbgrader's timestamp.txt gets
    assert (subs / "week1-ada" / "week1.ipynb").read_text() == "after the deadline"  # the clone was updated


def test_the_first_collection_after_the_due_date_counts_as_made_at_it(tmp_path):
    subs, work = _classroom(tmp_path, "ada")
    push(work, "week1.ipynb", "done", "2026-12-10T16:59:00+00:00")
    report = _collect(tmp_path, subs, at(17, 30))  # the cron job started late
    assert report.counts_as == DUE and report.warnings and "began 30 min after it" in report.warnings[0]
    [found] = find_submissions(subs, "week1", ["week1"])
    assert collect.time_of(tmp_path / "grading", found)[0].time == DUE  # on time: not after the due date
    assert _collect(tmp_path, subs, at(18, 0)).counts_as == at(18, 0)  # later runs keep their own time


def test_unchanged_notebooks_keep_their_first_time(tmp_path):
    subs, work = _classroom(tmp_path, "ada")
    push(work, "week1.ipynb", "done", "2026-12-10T16:00:00+00:00")
    _collect(tmp_path, subs, at(16, 30))
    git(work, "commit", "-q", "--allow-empty", "-m", "nothing new", when="2026-12-10T18:00:00+00:00")
    git(work, "push", "-q", "origin", "main")
    report = _collect(tmp_path, subs, at(18, 30))
    assert report.unchanged == ["ada"] and report.recorded == []
    [found] = find_submissions(subs, "week1", ["week1"])
    assert collect.time_of(tmp_path / "grading", found)[0].time == at(16, 30)


def test_an_uncollected_repository_has_only_its_commit_date_the_students_claim(tmp_path):
    subs, work = _classroom(tmp_path, "ada")
    push(work, "week1.ipynb", "done", "2026-12-10T16:00:00+00:00")
    git(subs / "week1-ada", "pull", "-q")  # fetched by hand, never collected
    [found] = find_submissions(subs, "week1", ["week1"])
    when, _ = collect.time_of(tmp_path / "grading", found)
    assert (when.source, when.time) == ("commit date", at(16, 0))


def test_a_timestamp_txt_wins_and_a_surrounding_repository_is_never_used(tmp_path):
    # a folder of a zip export inside a git checkout (the course's own, say) has no commit
    outer = tmp_path / "course"
    folder = outer / "submissions" / "ana" / "week1"
    folder.mkdir(parents=True)
    (folder / "week1.ipynb").write_text("{}")
    git(outer, "init", "-q", "-b", "main")
    git(outer, "add", ".")
    git(outer, "commit", "-qm", "course", when="2026-12-09T10:00:00+00:00")
    submission = Submission("ana", "week1", "nbgrader", {"week1": folder / "week1.ipynb"})
    assert collect.time_of(tmp_path / "grading", submission) is None
    (folder / "timestamp.txt").write_text("2026-12-10 16:00:00 UTC\n")
    when, text = collect.time_of(tmp_path / "grading", submission)
    assert (when.source, when.time, text) == ("timestamp.txt", at(16, 0), "2026-12-10 16:00:00 UTC\n")


def test_a_course_wide_repository_is_dated_by_its_own_weeks_notebooks(tmp_path):
    remote = tmp_path / "github" / "measure-first-ada.git"
    remote.mkdir(parents=True)
    git(remote, "init", "-q", "--bare", "-b", "main")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(remote), "work")
    push(work, "assignments/week1/week1.ipynb", "week 1", "2026-12-10T16:00:00+00:00")
    subs = tmp_path / "subs"
    subs.mkdir()
    git(subs, "clone", "-q", str(remote), "measure-first-ada")
    _collect(tmp_path, subs, at(16, 30), prefix="measure-first")
    push(work, "assignments/week2/week2.ipynb", "week 2 started", "2026-12-11T09:00:00+00:00")
    report = _collect(tmp_path, subs, at(20, 0), prefix="measure-first")
    assert report.unchanged == ["ada"]  # another week's commit does not make week 1 late
    record = collect.read_record(tmp_path / "grading", "week1")
    assert [seen["time"] for seen in record["students"]["ada"]] == ["2026-12-10T16:30:00"]


def test_a_repository_that_cannot_be_fetched_is_reported_and_recorded_as_it_is(tmp_path):
    subs, work = _classroom(tmp_path, "ada")
    push(work, "week1.ipynb", "done", "2026-12-10T16:00:00+00:00")
    git(subs / "week1-ada", "pull", "-q")
    git(subs / "week1-ada", "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    report = _collect(tmp_path, subs, at(16, 30))
    assert "git fetch failed" in report.failed["week1-ada"] and report.recorded == ["ada"]


def test_an_unreadable_record_is_never_replaced(tmp_path):
    path = collect.record_path(tmp_path, "week1")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="cannot be read.*restore it"):
        collect.read_record(tmp_path, "week1")
    with pytest.raises(ValueError):
        collect.collect(tmp_path, tmp_path, "week1", lambda folder: [], DUE, now=lambda: at(17, 0))
    assert path.read_text() == "{not json"


def test_the_record_is_plain_json_with_every_run(tmp_path):
    subs, work = _classroom(tmp_path, "ada")
    push(work, "week1.ipynb", "done", "2026-12-10T16:00:00+00:00")
    _collect(tmp_path, subs, at(16, 30))
    record = json.loads(collect.record_path(tmp_path / "grading", "week1").read_text())
    assert record["runs"] == [{"started": "2026-12-10T16:30:00", "counts_as": "2026-12-10T16:30:00",
                               "due": "2026-12-10T17:00:00", "failed": {}}]
    [seen] = record["students"]["ada"]
    assert len(seen["commit"]) == 40 and seen["notebooks"]["week1"] == collect.notebook_digests(
        {"week1": subs / "week1-ada" / "week1.ipynb"})["week1"]


# --- helpers ---------------------------------------------------------------------------------

def _collect(tmp: Path, subs: Path, now: datetime.datetime, prefix: str = "") -> collect.CollectReport:
    from course_lib.grader.nbgrading import _find

    return collect.collect(tmp / "grading", subs, "week1", lambda folder: _find(folder, "week1", ["week1"], prefix),
                           DUE, now=lambda: now)


def _classroom(tmp: Path, login: str) -> tuple[Path, Path]:
    subs = tmp / "subs"
    return subs, classroom_repo(tmp, subs, f"week1-{login}")
