"""The submission sandbox: what code inside can and cannot reach, and control from outside."""

import json
import os
import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest

from course_lib.grader import sandbox as sb
from course_lib.grader.sandbox import Limits, Sandbox, SandboxError, available

REPO = Path(__file__).resolve().parents[1]
needs_bwrap = pytest.mark.skipif(available() is not None, reason=str(available()))


@pytest.fixture
def course(tmp_path):
    """A course with a secret in solutions/, a gradebook folder and one notebook folder."""
    root = tmp_path / "course"
    (root / "solutions" / "a1").mkdir(parents=True)
    (root / "solutions" / "a1" / "answers.txt").write_text("the reference answer")
    (root / "grading").mkdir()
    (root / "submitted" / "a1").mkdir(parents=True)
    (root / "submitted" / "a1" / "data.txt").write_text("the student's own file")
    return root


@pytest.fixture
def scratch(tmp_path):
    folder = tmp_path / "scratch"
    folder.mkdir()
    return folder


@pytest.fixture(params=["cgroup", "signals"])
def mode(request):
    return request.param


def _box(scratch, course, mode, **kwargs):
    box = Sandbox(scratch, read_only=[REPO / "course_lib", course / "submitted" / "a1"],
                  use_cgroup=(mode == "cgroup"), **kwargs)
    box.__enter__()
    if box.mode != mode:
        box.close()
        pytest.skip(f"no delegated cgroup v2 here: the sandbox runs in {box.mode} mode")
    return box


def _python(box, code, **kwargs):
    return box.run([sys.executable, "-c", textwrap.dedent(code)], timeout=60, **kwargs)


def _started_at(pid):
    fields = sb._stat_fields(pid)
    return fields[19] if fields else None   # starttime, field 22 of /proc/PID/stat


def _wait_for_file(path, timeout=20):
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)
    return path.read_text()


# --- availability and bad input ---------------------------------------------------------------

def test_available_says_how_to_install_when_bwrap_is_missing(monkeypatch):
    monkeypatch.setattr(sb.shutil, "which", lambda name: None)
    reason = available()
    assert reason is not None and "apt-get install bubblewrap" in reason
    assert "\n" not in reason


@needs_bwrap
def test_available_is_none_where_bwrap_works():
    assert available() is None


def test_bad_input_gets_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="scratch folder not found"):
        Sandbox(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="GITHUB_TOKEN may not enter the sandbox"):
        Sandbox(tmp_path, env={"GITHUB_TOKEN": "ghp_x"})
    with pytest.raises(ValueError, match="Limits.processes must be a positive int"):
        Limits(processes=0)
    with pytest.raises(SandboxError, match="with block"):
        Sandbox(tmp_path).wrap(["true"])


# --- what code inside cannot reach ------------------------------------------------------------

PROBE = """
import json, os, socket, sys
grader, port, course = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
results = {}
def attempt(name, action):
    try:
        action()
        results[name] = "allowed"
    except Exception as error:
        results[name] = type(error).__name__
attempt("kill grader", lambda: os.kill(grader, 0))
attempt("renice grader", lambda: os.setpriority(os.PRIO_PROCESS, grader, 19))
attempt("write autogroup", lambda: open(f"/proc/{grader}/autogroup", "w").write("19"))
attempt("read solutions", lambda: open(f"{course}/solutions/a1/answers.txt").read())
attempt("write grading", lambda: open(f"{course}/grading/gradebook.db", "w").write("x"))
attempt("write notebook folder", lambda: open(f"{course}/submitted/a1/data.txt", "w").write("x"))
attempt("read shadow", lambda: open("/etc/shadow").read())
attempt("connect loopback", lambda: socket.create_connection(("127.0.0.1", port), timeout=2))
attempt("read own file", lambda: open(f"{course}/submitted/a1/data.txt").read())
attempt("write scratch", lambda: open("out.txt", "w").write("x"))
attempt("import course_lib", lambda: __import__("course_lib.grading"))
results["course listing"] = sorted(os.listdir(course))  # only mount points of what is bound
results["uid"] = os.getuid()
results["env"] = sorted(os.environ)
results["home"] = os.environ["HOME"]
print(json.dumps(results))
"""


@needs_bwrap
def test_code_inside_cannot_reach_the_grader_or_the_course(scratch, course, mode, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    monkeypatch.setenv("COURSE_DB_URL", "postgresql://grader@db/course")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    box = _box(scratch, course, mode, env={"OMP_NUM_THREADS": "1"})
    try:
        done = box.run([sys.executable, "-c", PROBE, str(os.getpid()),
                        str(server.getsockname()[1]), str(course)], timeout=60)
    finally:
        box.close()
        server.close()
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    for name in ("kill grader", "renice grader", "write autogroup", "read solutions",
                 "write grading", "write notebook folder", "read shadow", "connect loopback"):
        assert results[name] != "allowed", f"{name} was allowed inside the sandbox"
    assert results["kill grader"] == "ProcessLookupError"  # the grader is not even visible
    for name in ("read own file", "write scratch", "import course_lib"):
        assert results[name] == "allowed", f"{name}: {results[name]}"
    assert results["course listing"] == ["submitted"]
    assert results["uid"] == 65534
    assert results["home"] == str(scratch)
    assert "GITHUB_TOKEN" not in results["env"] and "COURSE_DB_URL" not in results["env"]
    assert "OMP_NUM_THREADS" in results["env"]
    assert not (course / "grading" / "gradebook.db").exists()
    assert (scratch / "out.txt").read_text() == "x"


# --- control from outside ---------------------------------------------------------------------

DAEMON = """
import os, time, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:          # the grandchild: a setsid daemon reparented to pid 1
        n = 0
        while True:
            n += 1
            with open("counter.tmp", "w") as f:
                f.write(str(n))
            os.replace("counter.tmp", "counter")
            time.sleep(0.01)
    os._exit(0)
print("started", flush=True)
time.sleep(600)
"""


@needs_bwrap
def test_freeze_stops_a_setsid_grandchild_and_exit_ends_it(scratch, course, mode):
    box = _box(scratch, course, mode)
    try:
        worker = box.popen([sys.executable, "-c", DAEMON])
        _wait_for_file(scratch / "counter")
        time.sleep(0.1)
        box.freeze()
        frozen = (scratch / "counter").read_text()
        time.sleep(0.4)
        assert (scratch / "counter").read_text() == frozen, "the daemon kept running while frozen"
        box.thaw()
        deadline = time.monotonic() + 15   # generous: a loaded machine may schedule it late
        while int((scratch / "counter").read_text()) == int(frozen):
            assert time.monotonic() < deadline, "thaw did not resume the daemon"
            time.sleep(0.05)
        inside = {pid: _started_at(pid) for pid in box.processes()}
        assert len(inside) >= 3          # pid 1, the worker and the daemon at least
        group = box.cgroup
    finally:
        box.close()
    assert worker.poll() is not None
    # the same pid with the same start time is the same process (pids are reused)
    alive = [(pid, sb._readlink(f"/proc/{pid}/exe")) for pid, start in inside.items()
             if _started_at(pid) == start and sb._state(pid) not in ("Z", None)]
    assert alive == [], f"processes of the sandbox survived its end: {alive}"
    assert group is None or not group.exists(), "the cgroup was not removed"
    assert scratch.is_dir(), "the scratch folder belongs to the caller and must stay"


@needs_bwrap
def test_a_view_from_the_handle_freezes_and_kills_but_leaves_the_sandbox_to_its_owner(scratch, course, mode):
    # The verifier takes a parked kernel as its worker through such a view (another process):
    # it must stop everything inside while the reference is timed, end it when it misbehaves,
    # and leave the sandbox itself (its groups) to the grader that made it.
    box = _box(scratch, course, mode)
    try:
        box.popen([sys.executable, "-c", DAEMON])
        _wait_for_file(scratch / "counter")
        view = Sandbox.attach(json.loads(json.dumps(box.handle())))  # plain data, as sent to the verifier
        assert view.mode == box.mode and sorted(view.processes()) == sorted(box.processes())
        view.freeze()
        frozen = (scratch / "counter").read_text()
        time.sleep(0.4)
        assert (scratch / "counter").read_text() == frozen, "the daemon kept running while frozen"
        view.thaw()
        assert view.memory_current() > 0 and view.cpu_time() > 0
        view.close()  # the view only: the daemon goes on
        deadline = time.monotonic() + 15
        while (scratch / "counter").read_text() == frozen:
            assert time.monotonic() < deadline, "closing the view stopped the sandbox"
            time.sleep(0.05)
        assert box.processes(), "closing the view ended the sandbox"
        Sandbox.attach(box.handle()).kill()
        assert box.processes() == []
        assert box.cgroup is None or box.cgroup.exists(), "the view removed the owner's cgroup"
    finally:
        box.close()


@needs_bwrap
def test_cpu_time_includes_exited_children(scratch, course, mode):
    box = _box(scratch, course, mode)
    try:
        box.popen([sys.executable, "-c", textwrap.dedent("""
            import os, time
            if os.fork() == 0:
                end = time.process_time() + 0.6
                while time.process_time() < end:
                    pass
                os._exit(0)
            os.wait()
            open("done", "w").write("1")
            time.sleep(600)
        """)])
        _wait_for_file(scratch / "done", timeout=60)
        assert box.cpu_time() >= 0.5
    finally:
        box.close()


@needs_bwrap
def test_memory_peak_covers_a_freed_allocation(scratch, course, mode):
    box = _box(scratch, course, mode)
    try:
        box.popen([sys.executable, "-c", textwrap.dedent("""
            import time
            block = bytearray(200 * 2**20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            del block
            open("done", "w").write("1")
            time.sleep(600)
        """)])
        _wait_for_file(scratch / "done", timeout=60)
        assert box.memory_peak() >= 180 * 2**20
        assert box.memory_current() < box.memory_peak()
    finally:
        box.close()


@needs_bwrap
def test_memory_held_in_tmpfs_and_memory_files_counts(scratch, course, mode):
    # Issue 26: 300 MB in /tmp and 200 MB in a memfd are the sandbox's memory, whichever
    # accounting the machine allows (a cgroup's, or resident sets plus files read from outside).
    box = _box(scratch, course, mode)
    try:
        box.popen([sys.executable, "-c", textwrap.dedent("""
            import os, time
            with open("/tmp/held", "wb") as f:
                for _ in range(300):
                    f.write(b"x" * 2**20)
            fd = os.memfd_create("held")
            for _ in range(200):
                os.write(fd, b"y" * 2**20)
            open("done", "w").write("1")
            time.sleep(600)
        """)])
        _wait_for_file(scratch / "done", timeout=60)
        assert box.memory_current() >= 480 * 2**20
        assert box.memory_peak() >= 480 * 2**20
    finally:
        box.close()


@needs_bwrap
def test_tmpfs_mounts_are_capped_and_the_scratch_is_measured(scratch, course):
    with Sandbox(scratch, limits=Limits(tmpfs=50 * 2**20)) as box:
        done = _python(box, """
            for where in ("/tmp/a", "/dev/shm/a"):
                try:
                    with open(where, "wb") as f:
                        f.write(b"x" * 80 * 2**20)
                except OSError as error:
                    print("refused", where, error.errno)
            with open("kept", "wb") as f:
                f.write(b"z" * 3 * 2**20)
        """)
        assert done.stdout.count("refused") == 2 and " 28" in done.stdout, done.stdout + done.stderr  # ENOSPC
        assert 3 * 2**20 <= box.disk_used() < 4 * 2**20
        for i in range(30):
            (scratch / f"f{i}").touch()
        assert box.disk_used(max_entries=20) == float("inf")


@needs_bwrap
def test_groups_left_by_a_killed_process_are_removed(tmp_path):
    import subprocess

    scratch = tmp_path / "s"
    scratch.mkdir()
    maker = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from course_lib.grader.sandbox import Sandbox
        box = Sandbox({str(scratch)!r}).__enter__()
        box.popen(["sleep", "600"])
        print(box.cgroup or box._pids_v1 or box._memory_v1, flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    group = maker.stdout.readline().strip()
    maker.kill()
    maker.wait()
    if group == "None":
        pytest.skip("no cgroup can be made here: nothing is left behind")
    assert Path(group).is_dir()
    assert sb.remove_leftovers(f"{maker.pid}-") == 0  # another owner's name: nothing taken
    assert sb.remove_leftovers(maker.pid) >= 1
    assert not Path(group).exists()


@needs_bwrap
def test_limits_bound_processes_and_file_size(scratch, course):
    with Sandbox(scratch, limits=Limits(processes=16, file_size=2**20)) as box:
        if box.process_limit == "RLIMIT_NPROC" and os.geteuid() == 0:
            pytest.skip("no pids cgroup here, and RLIMIT_NPROC does not bind a root caller")
        done = _python(box, """
            import os, subprocess
            started = 0
            try:
                for _ in range(40):
                    subprocess.Popen(["sleep", "30"])
                    started += 1
            except OSError as error:
                print("fork refused", type(error).__name__, started)
            try:
                with open("big", "wb") as f:
                    f.write(b"x" * 2**21)
            except OSError as error:
                print("write refused", error.errno)
        """)
    assert "fork refused" in done.stdout, done.stdout + done.stderr
    assert int(done.stdout.split("fork refused")[1].split()[1]) < 16
    assert "write refused 27" in done.stdout  # EFBIG
    assert (scratch / "big").stat().st_size <= 2**20


# --- a Jupyter kernel inside ------------------------------------------------------------------

@needs_bwrap
def test_a_jupyter_kernel_runs_inside_over_ipc(scratch, course):
    with Sandbox(scratch, read_only=[REPO / "course_lib"]) as box:
        km = box.kernel_manager(scratch / "rt")
        km.start_kernel()
        try:
            client = km.client()
            client.start_channels()
            client.wait_for_ready(timeout=60)
            assert _execute(client, "1+1") == "2"
            secret = course / "solutions" / "a1" / "answers.txt"
            assert "FileNotFoundError" in _execute(client, f"open({str(secret)!r}).read()")
            assert _execute(client, "import os; os.getuid()") == "65534"
            client.stop_channels()
        finally:
            km.shutdown_kernel(now=True)
    assert km.transport == "ipc" and not box.processes()


def _execute(client, code):
    """The kernel's text result of ``code``, or the name of the error it raised."""
    outputs = []
    reply = client.execute_interactive(code, timeout=60, output_hook=outputs.append)
    if reply["content"]["status"] == "error":
        return reply["content"]["ename"]
    results = [m["content"]["data"]["text/plain"] for m in outputs if m["msg_type"] == "execute_result"]
    return results[-1]


# --- a root grader: the sandbox is not root on the host ---------------------------------------

@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="the host uid question only arises for a root grader")
def test_a_root_grader_runs_code_as_an_unprivileged_host_uid(scratch, course, tmp_path):
    secret = tmp_path / "root-only.txt"        # outside every bind, 0600 root
    secret.write_text("root's secret")
    secret.chmod(0o600)
    with Sandbox(scratch, read_only=[REPO / "course_lib"]) as box:
        worker = box.popen([sys.executable, "-c", textwrap.dedent(f"""
            import os, sys, time
            try:
                open({str(secret)!r}).read(); print("read", flush=True)
            except OSError as error:
                print(type(error).__name__, flush=True)
            open("ready", "w").write(str(os.getpid()))
            time.sleep(600)
        """)], stdout=sb.subprocess.PIPE, text=True)
        _wait_for_file(scratch / "ready", timeout=60)
        pythons = [pid for pid in box.processes()
                   if (sb._readlink(f"/proc/{pid}/exe") or "").startswith(str(Path(sys.executable).resolve().parent))]
        host_uids = {pid: Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[:4]
                     for pid in box.processes()}
        box.kill()
        first_line = worker.stdout.readline().strip()
    assert pythons, "the sandboxed python was not found among the sandbox's processes"
    for pid, uids in host_uids.items():   # real, effective, saved and file-system uid
        assert uids == [str(sb._UID)] * 4, f"pid {pid} has host uids {uids}"
    assert first_line in ("FileNotFoundError", "PermissionError")
    assert (scratch / "ready").stat().st_uid == sb._UID  # written by the sandbox's own uid


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="the host uid question only arises for a root grader")
def test_a_bound_root_only_file_stays_unreadable(scratch, tmp_path):
    # Binding does not lift a file's own permissions: a 0600 root file in a bound folder
    # is unreadable for uid 65534, where a sandbox mapped to root could read it.
    folder = tmp_path / "bound"
    folder.mkdir()
    (folder / "secret").write_text("x")
    (folder / "secret").chmod(0o600)
    with Sandbox(scratch, read_only=[folder]) as box:
        done = _python(box, f"open({str(folder / 'secret')!r}).read()")
    assert "PermissionError" in done.stderr


@needs_bwrap
def test_an_interrupt_reaches_a_kernel_in_its_own_session(scratch):
    # jupyter_client signals the launcher's process group (bwrap's); a kernel in the sandbox
    # has a session of its own, so a cell timeout's SIGINT must be sent to it directly.
    with Sandbox(scratch, read_only=[REPO / "course_lib"]) as box:
        km = box.kernel_manager(scratch / "rt")
        km.start_kernel()
        try:
            client = km.client()
            client.start_channels()
            client.wait_for_ready(timeout=60)
            msg_id = client.execute("import time\nwhile True: time.sleep(0.01)")
            time.sleep(1.0)
            km.interrupt_kernel()
            reply = client.get_shell_msg(timeout=30)
            while reply["parent_header"].get("msg_id") != msg_id:  # kernel_info replies queued before it
                reply = client.get_shell_msg(timeout=30)
            assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
            client.stop_channels()
        finally:
            km.shutdown_kernel(now=True)
