"""Grading at scale: several worker processes, a Dask cluster, a PostgreSQL gradebook.

Each test grades the same four samples and asserts their exact scores, that every
submission was graded exactly once (one record, one gradebook submission with all its
grades) and that a rerun grades nothing. The PostgreSQL test starts a throw-away server on
loopback (``.ci/run`` installs PostgreSQL where it is missing) and skips, saying why, only
when no PostgreSQL binaries can be found.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_lib.grader import cli, nbgrading

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {"correct_fast": 10, "correct_slow": 6, "rebinds_assert_same": 2, "wrong": 0}


@pytest.fixture()
def submissions(tmp_path):
    folder = tmp_path / "submissions"
    for student in SAMPLES:
        shutil.copytree(ROOT / "examples" / "submissions" / student, folder / student)
    return folder


def _grade(submissions: Path, grading: Path, *extra: str) -> int:
    return cli.main(["grade", "example", "--submissions", str(submissions), "--grading-dir", str(grading),
                     "--timeout", "8", "--no-progress", *extra])


def _check_graded_once(grading: Path, db_url: str) -> dict[str, int]:
    with nbgrading._environment(**nbgrading._nbgrader_env()), Gradebook(nbgrading._driver(db_url)) as gb:
        subs = gb.find_assignment("example").submissions
        scores = {s.student.id: s.score for s in subs}
        assert all(len(nb.grades) == 5 for s in subs for nb in s.notebooks)
        assert len(subs) == len(scores)
    assert scores == SAMPLES
    done = {p.stem: p.stat().st_mtime_ns for p in (grading / "done" / "example").glob("*.json")}
    assert set(done) == set(SAMPLES)
    return done


def _cores_told(grading: Path, student: str = "correct_fast") -> str:
    """What the speed cell's out-of-kernel verdict says about the cores the notebook had."""
    nb = nbformat.read(grading / "autograded" / student / "example" / "example.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_count_speed")
    text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
    found = re.search(r"graded with \d+ cores? \(this notebook's CPU affinity\)", text)
    return found.group(0) if found else text


def _share(workers: int) -> str:
    share = max(1, len(os.sched_getaffinity(0)) // workers)
    return f"graded with {share} core{'s' if share != 1 else ''} (this notebook's CPU affinity)"


def test_two_workers_grade_every_submission_once(submissions, tmp_path):
    grading = tmp_path / "grading"
    assert _grade(submissions, grading, "--workers", "2") == cli.EXIT_FLAGGED  # rebinds_assert_same
    done = _check_graded_once(grading, f"sqlite:///{grading / 'gradebook.db'}")
    assert _cores_told(grading) == _share(2)  # each worker pinned to its own cores // 2
    assert "verdict-differs" in (grading / "flags.csv").read_text()
    assert _grade(submissions, grading, "--workers", "2") == cli.EXIT_FLAGGED
    assert _check_graded_once(grading, f"sqlite:///{grading / 'gradebook.db'}") == done  # nothing regraded


def test_a_dask_cluster_grades_every_submission_once(submissions, tmp_path):
    from distributed import LocalCluster

    grading = tmp_path / "grading"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        assert _grade(submissions, grading, "--scheduler", cluster.scheduler_address) == cli.EXIT_FLAGGED
    _check_graded_once(grading, f"sqlite:///{grading / 'gradebook.db'}")
    assert _cores_told(grading) == _share(2)  # two one-thread workers on this machine: half each


def test_an_unreachable_scheduler_is_a_one_line_error(submissions, tmp_path, capsys):
    port = _free_port()
    assert _grade(submissions, tmp_path / "g", "--scheduler", f"tcp://127.0.0.1:{port}") == cli.EXIT_USAGE
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err


def test_a_postgresql_gradebook_with_two_workers(submissions, tmp_path, postgres_url):
    grading = tmp_path / "grading"
    assert _grade(submissions, grading, "--workers", "2", "--db", postgres_url) == cli.EXIT_FLAGGED
    assert not (grading / "gradebook.db").exists()
    done = _check_graded_once(grading, postgres_url)
    assert _grade(submissions, grading, "--workers", "2", "--db", postgres_url) == cli.EXIT_FLAGGED
    assert _check_graded_once(grading, postgres_url) == done


# --- a throw-away PostgreSQL server on loopback ----------------------------------------------

@pytest.fixture(scope="module")
def postgres_url():
    binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb")) or [shutil.which("initdb") or ""]
    initdb = binaries[-1]
    if not initdb or not os.path.exists(initdb):
        pytest.skip("no PostgreSQL found (.ci/run installs Debian's postgresql package)")
    bindir = Path(initdb).parent
    data = Path(tempfile.mkdtemp(prefix="course-pg-"))
    port = _free_port()
    as_user = _run_as_postgres_user(data)
    subprocess.run(as_user + [str(bindir / "initdb"), "-D", str(data / "db"), "-A", "trust", "-U", "grader"],
                   check=True, capture_output=True)
    subprocess.run(as_user + [str(bindir / "pg_ctl"), "-D", str(data / "db"), "-w", "-l", str(data / "log"),
                              "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1", "start"],
                   check=True, capture_output=True)
    try:
        subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "grader",
                        "measure_first"], check=True, capture_output=True)
        yield f"postgresql://grader@127.0.0.1:{port}/measure_first"
    finally:
        subprocess.run(as_user + [str(bindir / "pg_ctl"), "-D", str(data / "db"), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


def _run_as_postgres_user(data: Path) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the 'postgres' system user."""
    if os.geteuid() != 0:
        return []
    shutil.chown(data, "postgres")
    return ["runuser", "-u", "postgres", "--"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
