"""Submission times a student cannot set: when the course's own collection saw each notebook.

A commit's dates are whatever the student's machine says (``GIT_COMMITTER_DATE``), so the
last commit's date cannot decide whether a GitHub Classroom submission was on time: a push
made after the deadline can be dated before it. Here the time of a submission held in a git
repository is the time at which the instructor's collection first saw its notebooks as they
are graded:

- ``course collect ASSIGNMENT --submissions DIR`` fetches every repository under ``DIR``
  (``git fetch`` of the branch it tracks, then the working tree is reset to what was
  pushed), finds the assignment's notebooks in each as ``course grade`` finds them, and
  appends to ``grading/collected/ASSIGNMENT.json``, per student, an *observation*: the
  SHA-256 of each notebook, the commit id, the commit's own date (the student's claim, kept
  only to be shown) and the time the collection began (the instructor's clock). Nothing is
  appended for a student whose notebooks did not change since the last observation.
- Run it at the deadline (a cron or ``at`` job). The first collection that begins at or after
  the assignment's due date records what it finds at the due date itself: that is what was
  there when the deadline passed, except what is pushed during the run, which for a large
  class takes minutes. Every later collection that finds a notebook changed records it at
  its own start, after the due date: late.
- ``course grade`` then takes a repository's submission time from the first observation
  whose notebooks are the ones being graded (:func:`submission_time`). A repository with no
  such observation (never collected, or pulled by hand since) is graded with its last
  commit's date, which the grader calls the student's claim in ``grades.csv``
  (``time_source``) and flags.

Examples
--------
>>> record = {"students": {"ada": [{"time": "2026-12-10T17:00:00", "notebooks": {"week1": "ab12"},
...                                 "commit": "c0ffee", "claimed": "2026-12-10T09:00:00+00:00"}]}}
>>> submission_time(record, "ada", {"week1": "ab12"}).time.isoformat()
'2026-12-10T17:00:00'
>>> submission_time(record, "ada", {"week1": "ff00"}) is None
True
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SubmissionTime", "CollectReport", "collect", "submission_time", "time_of", "read_record",
           "record_path", "notebook_digests", "last_commit", "repository_of", "COLLECTED_DIR", "TIME_FILE"]

COLLECTED_DIR = "collected"
"""Folder of the grading folder holding one collection record per assignment."""

TIME_FILE = "submission-time.json"
"""Written beside nbgrader's ``timestamp.txt`` in ``submitted/STUDENT/ASSIGNMENT``: its source."""

_GIT_TIMEOUT = 120      # seconds for one git command on one repository
_PARALLEL_FETCHES = 8   # repositories fetched at a time: network-bound, not CPU-bound
_LATE_RUN_WARNING = datetime.timedelta(minutes=15)


@dataclass(frozen=True)
class SubmissionTime:
    """When a submission was made, and on whose word.

    ``source`` is ``collected`` (the course's collection saw it at ``time``),
    ``timestamp.txt`` (nbgrader's collect or exchange wrote it) or ``commit date`` (the
    repository's last commit: the student's claim). ``claimed`` is the commit's own date,
    shown beside a collected time, never used for it.
    """

    time: datetime.datetime
    source: str
    commit: str = ""
    claimed: str = ""

    def as_record(self) -> dict:
        return {"timestamp": _iso(self.time), "source": self.source, "commit": self.commit,
                "claimed": self.claimed}


@dataclass
class CollectReport:
    """What one ``course collect`` run did."""

    started: datetime.datetime
    counts_as: datetime.datetime
    recorded: list[str] = field(default_factory=list)
    """Students whose notebooks were new or changed: an observation was appended."""
    unchanged: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Repository folder -> why it could not be fetched (what it held is still recorded)."""
    not_git: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def record_path(grading_dir: str | Path, assignment: str) -> Path:
    """``grading/collected/ASSIGNMENT.json``."""
    return Path(grading_dir) / COLLECTED_DIR / f"{assignment}.json"


def read_record(grading_dir: str | Path, assignment: str) -> dict:
    """The collection record of ``assignment`` (empty when it was never collected).

    Raises
    ------
    ValueError
        when the record exists but cannot be read (it is the instructor's evidence: never
        silently replaced).
    """
    path = record_path(grading_dir, assignment)
    if not path.exists():
        return {"assignment": assignment, "runs": [], "students": {}}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"the collection record {path} cannot be read ({err}); restore it from a backup") from None
    if not isinstance(record, dict) or not isinstance(record.get("students"), dict):
        raise ValueError(f"the collection record {path} is not one course collect wrote")
    return record


def submission_time(record: dict, student: str, digests: dict[str, str]) -> SubmissionTime | None:
    """The time of the first observation of ``student`` whose notebooks have ``digests``, or None."""
    for seen in record.get("students", {}).get(student, []):
        if seen.get("notebooks") == digests:
            return SubmissionTime(_parse(seen["time"]), "collected", seen.get("commit", ""), seen.get("claimed", ""))
    return None


def time_of(grading_dir: str | Path, submission) -> tuple[SubmissionTime, str] | None:
    """When ``submission`` (a :class:`course_lib.grader._submissions.Submission`) was made, or None.

    Returns the time and the text of nbgrader's ``timestamp.txt`` for it. In order: the
    ``timestamp.txt`` beside its notebooks (what ``nbgrader collect`` and the exchange write);
    for a git repository, the collection record's first observation of these notebooks
    (:func:`submission_time`), else the last commit's date, the student's claim.
    """
    from nbgrader.utils import parse_utc

    paths = [Path(p) for p in submission.notebooks.values()]
    for path in paths:
        given = path.parent / "timestamp.txt"
        if given.is_file():
            text = given.read_text(encoding="utf-8")
            try:
                return SubmissionTime(parse_utc(text.strip()), "timestamp.txt"), text
            except (ValueError, OverflowError):
                return None  # nbgrader reports an unreadable timestamp.txt itself
    repo = repository_of(submission)
    commit = last_commit(repo) if repo is not None else None
    if commit is None:
        return None
    try:
        record = read_record(grading_dir, submission.assignment)
    except ValueError:
        record = {}
    seen = submission_time(record, submission.student, notebook_digests(submission.notebooks))
    if seen is None:
        seen = SubmissionTime(_parse(commit[1]), "commit date", commit[0], commit[1])
    return seen, _iso(seen.time) + "+00:00\n"


def notebook_digests(notebooks: dict[str, Path]) -> dict[str, str]:
    """SHA-256 of each notebook file, by notebook name: what an observation compares."""
    return {name: hashlib.sha256(Path(path).read_bytes()).hexdigest() for name, path in sorted(notebooks.items())}


def repository_of(submission) -> Path | None:
    """The git repository a submission came in: its Classroom or course-wide repository, or None.

    Only the submission's own folder counts (``DIR/ASSIGNMENT-STUDENT`` or ``DIR/REPO``), never
    a repository around the submissions folder (the course's own, say): a folder of a zip
    export has no commit to date it by.
    """
    paths = [Path(p) for p in submission.notebooks.values()]
    if not paths or submission.layout not in ("classroom", "course-repo"):
        return None
    if submission.layout == "course-repo":  # REPO/assignments/ASSIGNMENT/NAME.ipynb
        root = paths[0].parents[2]
    else:  # ASSIGNMENT-STUDENT/anywhere/NAME.ipynb: the outermost folder named so
        named = [f for f in paths[0].parents if f.name.startswith(f"{submission.assignment}-")]
        root = named[-1] if named else None
    return root if root is not None and (root / ".git").exists() else None


def last_commit(repo: str | Path) -> tuple[str, str] | None:
    """(commit id, committer date as written, ISO) of the git repository ``repo``, or None."""
    done = _git(Path(repo), "log", "-1", "--format=%H%n%cI")
    if done.returncode != 0:
        return None
    lines = done.stdout.split()
    return (lines[0], lines[1]) if len(lines) == 2 else None


def collect(grading_dir: str | Path, submissions: str | Path, assignment: str,
            find: Callable[[Path], list], due: datetime.datetime | None = None, *,
            fetch: bool = True, now: Callable[[], datetime.datetime] | None = None) -> CollectReport:
    """Fetch every repository in ``submissions`` and record what each holds of ``assignment``.

    Parameters
    ----------
    grading_dir : path
        The grading folder; the record goes to ``collected/ASSIGNMENT.json`` in it.
    submissions : path
        The folder of cloned repositories (``gh classroom clone student-repos`` makes it).
    assignment : str
        The assignment's name.
    find : callable
        ``find(folder)`` -> the assignment's submissions in ``folder``, as ``course grade``
        finds them (so the students' ids are the ones grading uses).
    due : datetime, optional
        The due date (naive UTC). The first collection at or after it records what it finds
        at the due date.
    fetch : bool
        Fetch and reset the repositories first (False: record them as they are).
    now : callable, optional
        The clock (naive UTC ``datetime``); the default is this machine's.

    Raises
    ------
    ValueError
        when the existing record cannot be read.
    """
    clock = now or _utcnow
    started = clock().replace(microsecond=0)
    record = read_record(grading_dir, assignment)
    deadline_run = due is not None and started >= due and not any(
        _parse(run["started"]) >= due for run in record.get("runs", []))
    counts_as = due if deadline_run else started
    report = CollectReport(started, counts_as)
    if deadline_run and started - due > _LATE_RUN_WARNING:
        report.warnings.append(f"this is the first collection since the due date {_iso(due)} and it began "
                               f"{_duration(started - due)} after it: what was pushed in between counts as on time")
    folder = Path(submissions)
    repositories = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and (p / ".git").exists())
    if fetch:
        with ThreadPoolExecutor(max_workers=_PARALLEL_FETCHES) as pool:
            for repo, problem in zip(repositories, pool.map(_update, repositories)):
                if problem:
                    report.failed[repo.name] = problem
    students = record.setdefault("students", {})
    for submission in find(folder):
        if not submission.notebooks:
            continue
        repo = repository_of(submission)
        commit = last_commit(repo) if repo is not None else None
        if commit is None:
            report.not_git.append(submission.student)
            continue
        digests = notebook_digests(submission.notebooks)
        seen = students.setdefault(submission.student, [])
        if seen and seen[-1].get("notebooks") == digests:
            report.unchanged.append(submission.student)
            continue
        seen.append({"time": _iso(counts_as), "run": len(record.get("runs", [])), "commit": commit[0],
                     "claimed": commit[1], "notebooks": digests})
        report.recorded.append(submission.student)
    record.setdefault("runs", []).append({"started": _iso(started), "counts_as": _iso(counts_as),
                                          "due": _iso(due) if due else "", "failed": report.failed})
    _write_json(record_path(grading_dir, assignment), record)
    return report


# --- private helpers -------------------------------------------------------------------------

def _update(repo: Path) -> str:
    """Fetch the branch ``repo`` tracks and reset its working tree to it; "" or why not."""
    upstream = _git(repo, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
    if upstream.returncode != 0 or "/" not in upstream.stdout.strip():
        return "no branch it tracks (a plain folder, or a clone without a remote): recorded as it is"
    remote = upstream.stdout.strip().split("/", 1)[0]
    for args in (("fetch", "--quiet", "--prune", remote), ("reset", "--quiet", "--hard", "@{upstream}")):
        done = _git(repo, *args)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            return f"git {args[0]} failed: {lines[-1] if lines else f'status {done.returncode}'}"
    return ""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    # No prompt for credentials (a batch must not hang on one private repository), no hooks.
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C"}
    try:
        return subprocess.run(["git", "-c", "core.hooksPath=/dev/null", "-C", str(repo), *args],
                              capture_output=True, text=True, timeout=_GIT_TIMEOUT, env=env)
    except (OSError, subprocess.SubprocessError) as err:
        return subprocess.CompletedProcess(args, 1, "", str(err))


def _write_json(path: Path, data: dict) -> None:
    # atomic: a record is whole or absent, never half written when a run is stopped
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True), encoding="utf-8")
    os.replace(partial, path)


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def _iso(when: datetime.datetime) -> str:
    return when.isoformat(timespec="seconds")


def _parse(text: str) -> datetime.datetime:
    when = datetime.datetime.fromisoformat(text)
    return when.astimezone(datetime.timezone.utc).replace(tzinfo=None) if when.tzinfo else when


def _duration(delta: datetime.timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"
