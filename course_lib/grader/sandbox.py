"""A bubblewrap sandbox for one submission's untrusted code (issue 14).

Student code runs in two places while it is graded: nbgrader's Jupyter kernel and the
student worker that the out-of-kernel verifier drives. Both must run without the grader's
rights. A :class:`Sandbox` wraps a command line so that it runs under ``bwrap`` with

* new user, PID, network, IPC, UTS and cgroup namespaces (``--unshare-all``), a new
  session (no ``TIOCSTI`` into the grader's terminal), ``--die-with-parent`` and
  ``--disable-userns`` (no nested namespaces to hide processes in);
* uid/gid 65534 inside; the grader's processes are not even visible (new ``/proc``), so
  they cannot be signalled, traced, reniced or have their ``autogroup`` rewritten;
* uid/gid 65534 on the host too when the grader runs as root (see "Root callers" below),
  so that a process that escaped every namespace would still own nothing;
* a file system made of the system (``/usr`` and the ``/bin``/``/lib`` links), a short
  list of harmless ``/etc`` files, the Python installation and virtual environment, all
  read-only; of the course only the paths the caller lists; a private scratch folder
  (the caller's, read-write, also ``HOME`` and the working folder) and a private
  ``/tmp``;
* an environment built from an allow-list (never ``GITHUB_TOKEN``, ``COURSE_DB_URL``...);
* rlimits (processes, address space, file size, open files) set by ``prlimit`` *inside*
  the sandbox, so that the process count is the sandbox's own and not the grader's uid's;
* when the machine delegates cgroup v2 (we test whether we can create a child group),
  its own cgroup: :meth:`Sandbox.freeze` through ``cgroup.freeze`` (reaches setsid
  daemons and reparented grandchildren), CPU of every process that ever ran in it
  (``cpu.stat``), ``memory.peak``/``memory.max``/``pids.max`` when those controllers are
  enabled in cgroup v2, and ``cgroup.kill``. Without cgroup v2 the same methods fall back
  to signals and ``/proc`` on every process of the sandbox's PID namespace
  (:attr:`Sandbox.mode` says which);
* memory held in files counted as memory: the sandbox's ``/tmp`` and ``/dev/shm`` are
  tmpfs mounts capped at ``Limits.tmpfs`` bytes each, and :meth:`Sandbox.memory_current`
  counts what they hold and what anonymous memory files (``memfd``) hold beside the
  processes' resident memory. Where the machine has a cgroup v2 memory controller its
  ``memory.stat`` is read (``anon + shmem``); else a cgroup v1 memory group when one can be made (its ``rss`` and
  ``shmem``: tmpfs, memfds and System V segments alike); else the sum of the processes'
  resident sets plus the tmpfs mounts' use (``statvfs``) plus every open memfd's size, an
  upper bound (a memfd both mapped and open counts twice) that misses only System V
  segments. :meth:`Sandbox.disk_used` measures the writable folders for a quota.

Root callers
------------
``bwrap`` maps the sandbox's uid to the uid that started it, so a sandbox started by root
would hold uid 0 on the host. As root, :meth:`Sandbox.wrap` therefore starts ``bwrap`` as
the unprivileged uid 65534 (``setpriv --reuid=65534 --regid=65534 --clear-groups``, every
capability dropped), and ``bwrap`` builds its user namespace unprivileged. ``bwrap`` then
resolves every bind source as uid 65534 (it canonicalises even ``--bind-fd`` sources, so
passing descriptors opened by root does not help), and paths such as the interpreter under
``/root/.pyenv`` (``/root`` is 0700) or a ``pytest`` temporary folder are out of its reach.
So, still as root but in a private mount namespace of its own (``unshare --mount``), the
wrapper first bind-mounts each course, Python, scratch and runtime path onto an empty
folder of a 0755 staging folder (private to this sandbox, removed by :meth:`close`), and
``bwrap`` binds the staged copies to the original paths inside. The host's mount table is
never touched. Inside, only the bound folders' own modes apply: the scratch and runtime
folders are given to uid 65534 (``chown``), read-only paths must be world-readable.

How the lead should wire it in
------------------------------
(a) **nbgrader's kernel** (done: ``CourseExecute`` in ``_nbpreprocessors.py`` with
``sandboxed=True``, which ``course grade`` sets). nbclient's kernel manager class is
configurable; ``Sandbox.kernel_manager_class(AsyncKernelManager)`` gives one whose kernels
start here, or hand nbclient a ready ``km = sandbox.kernel_manager(runtime_dir)``
(``NotebookClient(nb, km=km)``):
it uses ``transport="ipc"`` with the connection file and sockets in ``runtime_dir``,
which must be one of the sandbox's ``read_write`` folders (TCP cannot work: the sandbox
has its own empty network namespace). Keep ``runtime_dir`` short: a Unix socket path
is limited to 107 bytes.
(b) **the student worker.** Replace ``subprocess.Popen(argv, ...)`` in
``verification.py`` with ``sandbox.popen(argv, ...)`` (same keywords; the pipes work
unchanged since the file descriptors are inherited through ``bwrap``); bind the copy of
the student's notebook folder read-only and ``course_lib`` read-only; use
``sandbox.freeze()``/``thaw()`` instead of ``SIGSTOP``/``SIGCONT`` to the worker's pid,
``sandbox.cpu_time()`` instead of reading ``/proc/PID/stat``, ``sandbox.memory_peak()``
for the memory tests, and leave the ``with`` block to end everything.

Examples
--------
>>> from course_lib.grader.sandbox import Sandbox, available
>>> if available() is None:                                  # doctest: +SKIP
...     with Sandbox(scratch) as box:
...         box.run([sys.executable, "-c", "print(1 + 1)"]).returncode
0
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["Limits", "Sandbox", "SandboxError", "available", "remove_leftovers", "ALLOWED_ENV"]

ALLOWED_ENV = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "MPLBACKEND", "NBGRADER_EXECUTION",
    "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONIOENCODING",
    "PYTHONNOUSERSITE", "PYTHONWARNINGS",
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS", "NUMBA_NUM_THREADS", "RAYON_NUM_THREADS",
})
"""Variables a caller may pass into the sandbox (and any ``LC_*``); everything else is refused."""

_UID = 65534  # "nobody" in Debian: owns nothing that matters
_DROP = ("/usr/bin/setpriv", f"--reuid={_UID}", f"--regid={_UID}", "--clear-groups",
         "--inh-caps=-all", "--bounding-set=-all")
# How a root caller starts bwrap: as uid 65534 with no capability left, so that bwrap's
# user namespace maps the sandbox's uid to 65534 on the host (not to 0).
_SCRUBBED = ("/usr/bin/env", "-i", "PATH=/usr/bin:/bin")
# Every launcher (ours, jupyter_client's) starts the wrapper with a clean environment:
# bwrap's pid 1 inside keeps the environment it was started with in /proc/1/environ.
_ETC_FILES = ("passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "ld.so.conf",
              "ld.so.conf.d", "localtime", "timezone", "ssl", "ca-certificates", "fonts",
              "mime.types", "alternatives", "matplotlibrc", "os-release", "locale.alias")
# Everything else in /etc stays out: the sandbox's processes are the caller's uid on the host
# (bwrap maps the inside uid to it), so a root-owned 0640 file such as /etc/shadow would be
# readable if bound. Only world-readable, secret-free files are listed.
_NAMESPACES = ("--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent")
# --unshare-all leaves out the user namespace when bwrap runs as root: ask for it, since
# the sandbox's uid must be one that owns nothing, and nested user namespaces are refused
# so that no process can hide in a PID namespace of its own.
_CGROUP_PREFIX = "course-sandbox"
_counter = itertools.count()


class SandboxError(RuntimeError):
    """The sandbox could not be set up or controlled."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for everything in one sandbox.

    ``None`` leaves a limit off. ``memory`` caps the cgroup's ``memory.max`` when the memory
    controller is delegated, else each process's address space (``RLIMIT_AS``, a cruder
    bound: virtual, not resident, memory). ``processes`` goes to ``pids.max`` (cgroup v2
    when delegated, else a v1 pids group when one is writable) and always to
    ``RLIMIT_NPROC`` inside the sandbox's user namespace, which alone does not bind a root
    caller (:attr:`Sandbox.process_limit` says which applies). ``tmpfs`` caps each of the
    sandbox's own tmpfs mounts (``/tmp``, ``/dev/shm``); ``disk`` is the quota of its
    writable folders, which the caller enforces with :meth:`Sandbox.disk_used` (the kernel
    has no per-folder quota that an unprivileged sandbox could set).

    Examples
    --------
    >>> Limits(memory=2 * 2**30).processes
    512
    """

    processes: int | None = 512
    memory: int | None = 8 * 2**30
    file_size: int | None = 2**30
    open_files: int | None = 1024
    cpu_seconds: int | None = None
    tmpfs: int | None = 2**30
    disk: int | None = 2**30

    def __post_init__(self) -> None:
        for name in ("processes", "memory", "file_size", "open_files", "cpu_seconds", "tmpfs", "disk"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"Limits.{name} must be a positive int or None, got {value!r}")


def available() -> str | None:
    """None when bubblewrap can build a sandbox here, else a one-line reason and the fix.

    Examples
    --------
    >>> available() in (None,) or "bubblewrap" in available()
    True
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    prefix: list[str] = []
    if os.geteuid() == 0:
        missing = [tool for tool in ("/usr/bin/setpriv", "/usr/bin/unshare") if not os.path.exists(tool)]
        if missing:
            return (f"{' and '.join(missing)} missing: a root grader needs them to run bubblewrap "
                    "unprivileged; apt-get install util-linux")
        prefix = list(_DROP)
    try:
        done = subprocess.run(
            [*prefix, bwrap, *_NAMESPACES, "--ro-bind", "/usr", "/usr",
             "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
             "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--uid", str(_UID),
             "--gid", str(_UID), "--", "/bin/true"],
            capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap cannot run here ({error}); apt-get install bubblewrap"
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return (f"bubblewrap is installed but cannot create namespaces here ({reason}); "
                "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)")
    return None


class Sandbox:
    """One submission's sandbox: wrap commands with :meth:`wrap` or start them with :meth:`popen`.

    Parameters
    ----------
    scratch : path
        The caller's folder, bound read-write at the same path; the working folder and
        ``HOME``. Left in place (with what the code wrote) when the sandbox ends.
    read_only : paths
        Course paths the code may read (e.g. ``course_lib`` and the copy of the notebook's
        folder), bound read-only at the same paths. Never the whole course.
    read_write : paths
        Further folders bound read-write at the same paths (e.g. a kernel's runtime
        folder with its connection file and sockets).
    env : mapping
        Extra environment, only names in :data:`ALLOWED_ENV` or ``LC_*``.
    limits : Limits
        Resource limits; see :class:`Limits`.
    use_cgroup : bool
        Try cgroup v2 (default); False forces the signal fallback.

    Examples
    --------
    >>> with Sandbox(scratch, read_only=[course / "course_lib"]) as box:  # doctest: +SKIP
    ...     worker = box.popen([sys.executable, "-m", "worker"], stdin=PIPE, stdout=PIPE)
    ...     box.freeze(); box.cpu_time(); box.thaw()
    """

    def __init__(self, scratch: str | os.PathLike, *, read_only: Iterable[str | os.PathLike] = (),
                 read_write: Iterable[str | os.PathLike] = (), env: Mapping[str, str] | None = None,
                 limits: Limits = Limits(), use_cgroup: bool = True) -> None:
        self.scratch = _existing_dir(scratch, "scratch folder")
        self.read_only = tuple(_existing(p, "read-only path") for p in read_only)
        self.read_write = tuple(_existing_dir(p, "read-write folder") for p in read_write)
        self.limits = limits
        self.env = _checked_env(env or {})
        self.token = f"sbx-{secrets.token_hex(6)}"
        self._use_cgroup = use_cgroup
        self._cgroup: Path | None = None
        self._pids_v1: Path | None = None
        self._memory_v1: Path | None = None
        self._started: list[subprocess.Popen] = []
        self._pidns: str | None = None
        self._peak_seen = 0
        self._open = False
        self._stage: Path | None = None
        self._staged: dict[Path, Path] = {}
        self._attached = False  # a view of another process's sandbox (see attach): it owns it

    # --- life cycle ---------------------------------------------------------------------

    def __enter__(self) -> "Sandbox":
        reason = available()
        if reason is not None:
            raise SandboxError(reason)
        if self._use_cgroup:
            self._cgroup = _make_cgroup(self.limits)
        if self.limits.processes is not None and not self._has_pids_max():
            # RLIMIT_NPROC does not bind a root caller (the sandbox's host uid is then 0,
            # which the kernel exempts), so count processes in a cgroup v1 pids group.
            self._pids_v1 = _make_pids_v1(self.limits.processes)
        if self._use_cgroup and not (self._cgroup is not None and (self._cgroup / "memory.stat").exists()):
            # No memory controller in the v2 group: a v1 memory group, where the machine has one,
            # counts what the sandbox holds in tmpfs and memory files as well as its processes.
            self._memory_v1 = _make_memory_v1(self.limits.memory)
        if os.geteuid() == 0:
            self._prepare_drop()
        self._open = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End every process of the sandbox and remove its cgroup; the scratch folder stays.

        On a view made by :meth:`attach` it only closes the view: the owner ends the sandbox.
        """
        if not self._open:
            return
        if self._attached:
            self._open = False
            return
        self.kill()
        for process in self._started:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for group in (self._cgroup, self._pids_v1, self._memory_v1):
            if group is not None:
                _remove_cgroup(group)
        self._cgroup = self._pids_v1 = self._memory_v1 = None
        if self._stage is not None:
            # Only empty mount points are left here (the mounts lived in the wrapper's
            # private mount namespace), so nothing of the course is deleted.
            shutil.rmtree(self._stage, ignore_errors=True)
            self._stage = None
        self._open = False

    def handle(self) -> dict[str, Any]:
        """What another process needs to watch, stop and end this sandbox (see :meth:`attach`): plain data.

        Taken once the sandbox runs something (in the signal fallback its PID namespace is
        found through the processes it started).
        """
        self._check_open()
        if self._cgroup is None and self._namespace() is None:
            # A view could then find none of its processes: freezing would stop nothing.
            raise SandboxError("the sandbox's processes cannot be told apart yet (nothing runs in it)")
        return {"scratch": str(self.scratch), "read_write": [str(p) for p in self.read_write],
                "disk": self.limits.disk, "token": self.token, "pidns": self._namespace(),
                **{key: str(group) if group is not None else None for key, group in
                   (("cgroup", self._cgroup), ("pids_v1", self._pids_v1), ("memory_v1", self._memory_v1))}}

    @classmethod
    def attach(cls, handle: Mapping[str, Any]) -> "Sandbox":
        """A view of a sandbox that another process made and owns, from its :meth:`handle`.

        The view freezes, thaws, reads and kills the sandbox's processes as the owner would;
        it starts nothing, and :meth:`close` leaves the sandbox and its groups to the owner.
        The verifier takes the notebook's kernel as its worker this way (see
        :class:`course_lib.grader._nbpreprocessors.CourseExecute`).
        """
        view = cls(handle["scratch"], read_write=handle["read_write"], limits=Limits(disk=handle["disk"]))
        view.token = handle["token"]
        view._pidns = handle["pidns"]
        view._cgroup, view._pids_v1, view._memory_v1 = (
            Path(handle[key]) if handle[key] else None for key in ("cgroup", "pids_v1", "memory_v1"))
        view._attached = view._open = True
        return view

    @property
    def mode(self) -> str:
        """``"cgroup"`` when the sandbox has its own cgroup v2 group, else ``"signals"``."""
        return "cgroup" if self._cgroup is not None else "signals"

    @property
    def cgroup(self) -> Path | None:
        """The sandbox's cgroup folder, or None in the signal fallback."""
        return self._cgroup

    # --- starting code ------------------------------------------------------------------

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """The command line that runs ``argv`` in this sandbox (for any launcher).

        In cgroup mode it starts with a two-line ``sh`` that moves itself into the
        sandbox's cgroup and then ``exec``-s bwrap, so every process bwrap starts is born
        inside the group; no window exists in which a child could fork outside it.

        Examples
        --------
        >>> box.wrap(["python", "-c", "pass"])[:2]           # doctest: +SKIP
        ['/bin/sh', '-c']
        """
        self._check_open()
        if not argv:
            raise ValueError("the command to run in the sandbox is empty")
        command = [shutil.which("bwrap") or "bwrap", *self._bwrap_options(), "--",
                   *_prlimit(self.limits), *map(str, argv)]
        joins = [group / "cgroup.procs" for group in (self._cgroup, self._pids_v1, self._memory_v1) if group]
        script = "".join(f"echo $$ > {shlex.quote(str(f))} || exit 125; " for f in joins)
        if self._stage is not None:
            # Root: bind the sources onto the staging folder in a private mount namespace,
            # then start bwrap as uid 65534 (see "Root callers" in the module docstring).
            # Every step is an exec in the same process, so the pid Popen sees is bwrap's.
            mounts = "".join(f"/usr/bin/mount --bind {shlex.quote(str(src))} {shlex.quote(str(dst))} "
                             "|| exit 125; " for src, dst in self._staged.items())
            inner = f"{mounts}exec {' '.join(_DROP)} \"$@\""
            return [*_SCRUBBED, "/bin/sh", "-c",
                    script + 'exec /usr/bin/unshare --mount --propagation private -- /bin/sh -c "$0" sh "$@"',
                    inner, *command]
        if not joins:
            return [*_SCRUBBED, *command]
        return [*_SCRUBBED, "/bin/sh", "-c", script + 'exec "$@"', "sh", *command]

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` in the sandbox; keywords as for :class:`subprocess.Popen`.

        ``env`` and ``cwd`` are refused: the environment is the sandbox's allow-list and
        the working folder is the scratch folder.
        """
        for key in ("env", "cwd", "preexec_fn", "start_new_session", "process_group"):
            if key in kwargs:
                raise TypeError(f"Sandbox.popen sets {key} itself; pass env= to Sandbox instead")
        process = subprocess.Popen(self.wrap(argv), cwd=self.scratch, env={"PATH": "/usr/bin:/bin"},
                                   **kwargs)
        self._started.append(process)
        return process

    def run(self, argv: Sequence[str], timeout: float | None = None, **kwargs: Any
            ) -> subprocess.CompletedProcess:
        """Run ``argv`` to the end in the sandbox, as :func:`subprocess.run` (output captured as text)."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        kwargs.setdefault("text", True)
        process = self.popen(argv, **kwargs)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            process.communicate()
            raise
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    def kernel_manager_class(self, base: type | None = None) -> type:
        """A subclass of ``base`` (default ``jupyter_client.KernelManager``) whose kernels start here.

        Pass ``jupyter_client.AsyncKernelManager`` for nbclient. For a root caller the
        connection file (written by the grader, mode 0600) and its folder are handed to the
        sandbox's uid 65534, so that the kernel can read the file and create its sockets.
        """
        from jupyter_client import KernelManager

        sandbox = self

        class SandboxedKernelManager(base or KernelManager):  # type: ignore[misc, valid-type]
            def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
                return sandbox.wrap(super().format_kernel_cmd(extra_arguments))

            async def _async_signal_kernel(self, signum: int) -> None:
                # jupyter_client signals the launcher's process group, which is bwrap's;
                # the kernel is in a session of its own in the sandbox (--new-session), so
                # an interrupt (SIGINT after a cell timeout) must be sent to it directly.
                sandbox.signal(signum)

            def write_connection_file(self, **kwargs: Any) -> Any:
                written = super().write_connection_file(**kwargs)
                if sandbox._stage is not None:
                    os.chown(self.connection_file, _UID, _UID)
                    os.chown(os.path.dirname(self.connection_file), _UID, _UID)
                return written

        return SandboxedKernelManager

    def kernel_manager(self, runtime_dir: str | os.PathLike, kernel_name: str = "python3",
                       **kwargs: Any) -> Any:
        """A kernel manager (not started) for a kernel in this sandbox, talking over ``ipc``.

        ``runtime_dir`` holds the connection file and the kernel's Unix sockets; it must be
        one of the ``read_write`` folders or inside the scratch folder.

        Examples
        --------
        >>> km = box.kernel_manager(scratch / "rt")          # doctest: +SKIP
        >>> km.start_kernel(); kc = km.client(); kc.start_channels()  # doctest: +SKIP
        """
        runtime = Path(runtime_dir).resolve()
        if not any(runtime == p or p in runtime.parents for p in (self.scratch, *self.read_write)):
            raise ValueError(f"{runtime} is not bound read-write into the sandbox; "
                             "put it in the scratch folder or pass it in read_write")
        runtime.mkdir(parents=True, exist_ok=True)
        ip = str(runtime / "k")
        if len(ip) + 8 > 107:
            raise ValueError(f"{runtime} is too long for Unix sockets (107 bytes); use a shorter folder")
        return self.kernel_manager_class()(
            kernel_name=kernel_name, transport="ipc", ip=ip,
            connection_file=str(runtime / "kernel.json"), **kwargs)

    # --- controlling what runs ----------------------------------------------------------

    def processes(self) -> list[int]:
        """Host pids of every live process in the sandbox (the student's and bwrap's own)."""
        if self._cgroup is not None:
            return _cgroup_pids(self._cgroup)
        namespace = self._namespace()
        if namespace is None:
            return []
        return [pid for pid in _all_pids() if _readlink(f"/proc/{pid}/ns/pid") == namespace]

    def signal(self, signum: int) -> None:
        """Send ``signum`` to every process the sandbox runs, bwrap's own processes excepted.

        This is how a kernel in the sandbox is interrupted (``SIGINT``): it does not share a
        process group with anything outside.
        """
        bwrap = os.path.realpath(shutil.which("bwrap") or "/usr/bin/bwrap")
        for pid in self.processes():
            exe = _readlink(f"/proc/{pid}/exe")
            if exe is not None and os.path.realpath(exe) != bwrap:
                _signal(pid, signum)

    def freeze(self, timeout: float = 5.0) -> None:
        """Stop every process in the sandbox, daemons and grandchildren included.

        Raises
        ------
        SandboxError
            if the processes are not all stopped within ``timeout`` seconds.
        """
        if self._cgroup is not None:
            (self._cgroup / "cgroup.freeze").write_text("1")
            _wait_for(lambda: _cgroup_event(self._cgroup, "frozen") == 1, timeout,
                      "the sandbox's cgroup did not freeze")
            return
        # Repeat until a pass finds nothing new: a process may fork between the scan and
        # the signal, and its child must be stopped too.
        stopped: set[int] = set()
        deadline = time.monotonic() + timeout
        while True:
            fresh = [pid for pid in self.processes() if pid not in stopped]
            if not fresh:
                break
            for pid in fresh:
                _signal(pid, signal.SIGSTOP)
                stopped.add(pid)
            if time.monotonic() > deadline:
                raise SandboxError("the sandbox's processes kept forking while being stopped")
        _wait_for(lambda: all(_state(pid) in ("T", "t", "Z", "X", None) for pid in stopped),
                  timeout, "the sandbox's processes did not stop")

    def thaw(self) -> None:
        """Let every process in the sandbox run again."""
        if self._cgroup is not None:
            (self._cgroup / "cgroup.freeze").write_text("0")
            return
        for pid in self.processes():
            _signal(pid, signal.SIGCONT)

    def cpu_time(self) -> float:
        """CPU seconds (user + system) used by everything in the sandbox so far, exited work included.

        In cgroup mode this is the group's ``cpu.stat`` (every process that ever ran in it);
        in the fallback it is the sum over live processes of their threads' own times (the
        nanoseconds of ``schedstat``, so that a batch of milliseconds is measurable) and of
        their reaped children's times (``cutime``, in clock ticks; bwrap's pid 1 reaps
        orphans, so their time is in its ``cutime``).
        """
        if self._cgroup is not None:
            for line in (self._cgroup / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
        ticks = os.sysconf("SC_CLK_TCK")
        return sum(_process_seconds(pid, ticks) for pid in self.processes())

    def memory_current(self) -> int:
        """Bytes of memory the sandbox holds now, in its processes and in files (see the module's docstring).

        ``anon + shmem`` of a cgroup v2 group's ``memory.stat`` (``memory.current`` would
        count the page cache of files merely read); else ``rss + shmem`` of a cgroup v1
        memory group; else the processes' resident sets plus :meth:`files_held`.
        """
        if self._cgroup is not None and (self._cgroup / "memory.stat").exists():
            total = _v1_held(self._cgroup, ("anon", "shmem"))
        elif self._memory_v1 is not None:
            total = _v1_held(self._memory_v1)
        else:
            total = sum(_status_kib(pid, "VmRSS") for pid in self.processes()) * 1024 + self.files_held()
        self._peak_seen = max(self._peak_seen, total)
        return total

    def files_held(self) -> int:
        """Bytes held in the sandbox's tmpfs mounts and in the memory files its processes have open.

        Read from outside: ``statvfs`` of ``/tmp`` and ``/dev/shm`` as a process of the
        sandbox sees them (``/proc/PID/root``), and the size of every ``memfd`` among the
        processes' open files, each counted once.
        """
        own = _readlink("/proc/self/ns/pid")
        inside = [pid for pid in self.processes() if _readlink(f"/proc/{pid}/ns/pid") not in (None, own)]
        held, seen, views = 0, set(), set()
        for pid in inside:  # each bwrap started here has mounts of its own: one look at each
            view = _readlink(f"/proc/{pid}/ns/mnt")
            if view is None or view in views:
                continue
            views.add(view)
            for mount in ("tmp", "dev/shm"):
                try:
                    fs = os.statvfs(f"/proc/{pid}/root/{mount}")
                except OSError:
                    continue
                held += (fs.f_blocks - fs.f_bfree) * fs.f_frsize
        for pid in inside:
            held += _memfd_bytes(pid, seen)
        return held

    def disk_used(self, max_entries: int = 100_000) -> float:
        """Bytes the sandbox's writable folders hold on disk; ``inf`` past ``max_entries`` entries.

        Walked without recursion and without following links, so a deep or wide tree
        costs at most ``max_entries`` ``lstat`` calls; more entries than that is itself
        over any quota.
        """
        total, entries = 0, 0
        stack = [str(p) for p in (self.scratch, *self.read_write)]
        while stack:
            try:
                with os.scandir(stack.pop()) as found:
                    for entry in found:
                        entries += 1
                        if entries > max_entries:
                            return math.inf
                        try:
                            info = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        total += info.st_blocks * 512
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
            except OSError:
                continue
        return total

    def memory_peak(self) -> int:
        """The most memory the sandbox has used: ``memory.peak`` when available.

        Without the memory controller it is the larger of the highest sum sampled so far
        (by this or :meth:`memory_current`) and the sum of each live process's own peak
        (``VmHWM``): an upper bound, since the processes need not have peaked together.
        """
        if self._cgroup is not None and (self._cgroup / "memory.peak").exists():
            return int((self._cgroup / "memory.peak").read_text())
        current = self.memory_current()
        hwm = sum(_status_kib(pid, "VmHWM") for pid in self.processes()) * 1024
        if self._memory_v1 is None:
            hwm += self.files_held()
        self._peak_seen = max(self._peak_seen, current, hwm)
        return self._peak_seen

    def kill(self, timeout: float = 10.0) -> None:
        """End every process in the sandbox now (``cgroup.kill``, else SIGKILL to each)."""
        if self._cgroup is not None and (self._cgroup / "cgroup.kill").exists():
            (self._cgroup / "cgroup.kill").write_text("1")
        else:
            for pid in self.processes():
                _signal(pid, signal.SIGKILL)
        # SIGKILL to the namespace's init ends the whole PID namespace; the outer bwrap
        # then exits on its own.
        for process in self._started:
            if process.poll() is None:
                process.kill()
        _wait_for(lambda: not self.processes(), timeout, "processes of the sandbox survived kill()")

    # --- private ------------------------------------------------------------------------

    def _has_pids_max(self) -> bool:
        return self._cgroup is not None and (self._cgroup / "pids.max").exists()

    @property
    def process_limit(self) -> str:
        """How the process limit is enforced: ``"pids.max"``, ``"pids.max (v1)"`` or ``"RLIMIT_NPROC"``.

        ``RLIMIT_NPROC`` alone does not bind when the caller is root (see :meth:`__enter__`).
        """
        if self._has_pids_max():
            return "pids.max"
        return "pids.max (v1)" if self._pids_v1 is not None else "RLIMIT_NPROC"

    def _check_open(self) -> None:
        if not self._open:
            raise SandboxError("use the Sandbox in a with block (or call __enter__) before starting code")

    def _bwrap_options(self) -> list[str]:
        options = [*_NAMESPACES, "--new-session", "--hostname", self.token, "--uid", str(_UID), "--gid", str(_UID),
                   "--ro-bind", "/usr", "/usr"]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            top = Path("/") / name
            if top.is_symlink():
                options += ["--symlink", os.readlink(top), str(top)]
            elif top.is_dir():
                options += ["--ro-bind", str(top), str(top)]
        for name in _ETC_FILES:
            options += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        size = ["--size", str(self.limits.tmpfs)] if self.limits.tmpfs and _bwrap_has_size() else []
        # /dev/shm would otherwise be a folder of the /dev tmpfs, uncapped and writable.
        options += ["--proc", "/proc", "--dev", "/dev", *size, "--tmpfs", "/tmp", *size, "--tmpfs", "/dev/shm"]
        for path in _python_paths():
            options += ["--ro-bind", self._source(path), str(path)]
        for path in self.read_only:
            options += ["--ro-bind", self._source(path), str(path)]
        for path in (*self.read_write, self.scratch):
            options += ["--bind", self._source(path), str(path)]
        options += ["--chdir", str(self.scratch), "--clearenv"]
        for key, value in self._environment().items():
            options += ["--setenv", key, value]
        return options

    def _source(self, path: Path) -> str:
        """Where bwrap finds ``path``: its staged mount point for a root caller, else itself."""
        return str(self._staged.get(path, path))

    def _prepare_drop(self) -> None:
        """Give the writable folders to uid 65534 and make a mount point for every bind source."""
        for folder in (*self.read_write, self.scratch):
            _chown_tree(folder, _UID)
        self._stage = Path(tempfile.mkdtemp(prefix="course-sandbox-stage-"))
        self._stage.chmod(0o755)  # bwrap, as uid 65534, must reach the mount points
        for index, path in enumerate((*_python_paths(), *self.read_only, *self.read_write, self.scratch)):
            point = self._stage / str(index)
            if path.is_dir():
                point.mkdir()
            else:
                point.touch()
            self._staged[path] = point

    def _environment(self) -> dict[str, str]:
        venv_bin = Path(sys.prefix) / "bin"
        env = {"PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
               "PYTHONNOUSERSITE": "1", "MPLBACKEND": "Agg"}
        env.update(self.env)
        env.update({"HOME": str(self.scratch), "TMPDIR": "/tmp", "USER": "nobody"})
        return env

    def _namespace(self) -> str | None:
        # The PID namespace is that of bwrap's child (the sandbox's pid 1), whose parent is
        # the outer bwrap we started, or that a launcher such as jupyter_client started:
        # that one is found by the unique hostname on its command line.
        if self._pidns is not None:
            return self._pidns
        outer = {p.pid for p in self._started if p.poll() is None} | set(_pids_with_arg(self.token))
        for pid in _all_pids():
            if _ppid(pid) in outer:
                namespace = _readlink(f"/proc/{pid}/ns/pid")
                if namespace and namespace != _readlink("/proc/self/ns/pid"):
                    self._pidns = namespace
                    return namespace
        return None


# --- private helpers ----------------------------------------------------------------------

def _existing(path: str | os.PathLike, what: str) -> Path:
    resolved = Path(path).resolve()
    if not resolved.exists():
        raise FileNotFoundError(f"sandbox {what} not found: {path}")
    return resolved


def _existing_dir(path: str | os.PathLike, what: str) -> Path:
    resolved = _existing(path, what)
    if not resolved.is_dir():
        raise NotADirectoryError(f"sandbox {what} is not a folder: {path}")
    return resolved


def _checked_env(env: Mapping[str, str]) -> dict[str, str]:
    for key, value in env.items():
        if key not in ALLOWED_ENV and not key.startswith("LC_"):
            raise ValueError(f"{key} may not enter the sandbox (allowed: LC_* and "
                             f"{', '.join(sorted(ALLOWED_ENV))})")
        if not isinstance(value, str):
            raise TypeError(f"sandbox environment value for {key} must be a str, got {value!r}")
    return dict(env)


def _chown_tree(folder: Path, uid: int) -> None:
    # Symlinks are changed themselves, never what they point to (a student's symlink could
    # point anywhere in the course).
    os.chown(folder, uid, uid, follow_symlinks=False)
    for parent, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            os.chown(os.path.join(parent, name), uid, uid, follow_symlinks=False)


def _python_paths() -> list[Path]:
    # The venv's python is often a symlink into another installation (pyenv under /root),
    # so the resolved interpreter's prefix is needed as well as both prefixes.
    interpreter = Path(sys.executable).resolve()
    candidates = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                               sys.base_exec_prefix)}
    candidates.add(interpreter.parent.parent)
    kept = [p for p in candidates if p != Path("/") and Path("/usr") not in (p, *p.parents)]
    return sorted(p for p in kept if not any(q in p.parents for q in kept))


def _prlimit(limits: Limits) -> list[str]:
    # Set inside the sandbox: RLIMIT_NPROC is then counted in the sandbox's own user
    # namespace, not against every process of the caller's uid.
    options = ["/usr/bin/prlimit"]
    pairs = [("nproc", limits.processes), ("fsize", limits.file_size),
             ("nofile", limits.open_files), ("cpu", limits.cpu_seconds)]
    if limits.memory is not None:
        pairs.append(("as", limits.memory))
    options += [f"--{name}={value}" for name, value in pairs if value is not None]
    return [*options, "--"]


def _cgroup2_mount() -> Path | None:
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def _own_cgroup() -> Path | None:
    mount = _cgroup2_mount()
    if mount is None:
        return None
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            candidate = mount / line[3:].lstrip("/")
            return candidate if candidate.is_dir() else mount
    return None


def _make_cgroup(limits: Limits) -> Path | None:
    parent = _own_cgroup()
    if parent is None or not os.access(parent, os.W_OK):
        return None
    available_controllers = set((parent / "cgroup.controllers").read_text().split())
    enabled = set((parent / "cgroup.subtree_control").read_text().split())
    for controller in ("memory", "pids", "cpu") :
        if controller in available_controllers and controller not in enabled:
            try:  # refused in a non-root group that has processes ("no internal processes")
                (parent / "cgroup.subtree_control").write_text(f"+{controller}")
            except OSError:
                pass
    group = parent / f"{_CGROUP_PREFIX}-{_owner()}-{next(_counter)}-{secrets.token_hex(3)}"
    try:
        group.mkdir()
    except OSError:
        return None
    if not (group / "cgroup.freeze").exists():
        group.rmdir()
        return None
    if limits.memory is not None and (group / "memory.max").exists():
        (group / "memory.max").write_text(str(limits.memory))
        if (group / "memory.swap.max").exists():
            (group / "memory.swap.max").write_text("0")
    if limits.processes is not None and (group / "pids.max").exists():
        (group / "pids.max").write_text(str(limits.processes))
    return group


def _make_pids_v1(limit: int) -> Path | None:
    # A hybrid cgroup host (v2 mounted beside v1 controllers) keeps "pids" in v1.
    return _make_v1("pids", {"pids.max": str(limit)})


def _make_memory_v1(limit: int | None) -> Path | None:
    # memory.limit_in_bytes only when a limit is asked for: the kernel's sandbox is watched
    # from outside instead (see CourseExecute), so that going over is reported, not OOM-killed.
    settings = {"memory.swappiness": "0"}
    if limit is not None:
        settings["memory.limit_in_bytes"] = str(limit)
    return _make_v1("memory", settings, required=("memory.stat",))


def _v1_parent(controller: str) -> Path | None:
    """The folder of this process's own group in the cgroup v1 hierarchy of ``controller``."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        mine = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    mount = next((Path(f[1]) for f in map(str.split, mounts)
                  if len(f) > 3 and f[2] == "cgroup" and controller in f[3].split(",")), None)
    if mount is None:
        return None
    own = next((line.split(":", 2)[2] for line in mine
                if len(line.split(":")) > 2 and controller in line.split(":")[1].split(",")), "/")
    return mount / own.lstrip("/")


def _make_v1(controller: str, settings: dict[str, str], required: tuple[str, ...] = ()) -> Path | None:
    parent = _v1_parent(controller)
    if parent is None:
        return None
    group = parent / f"{_CGROUP_PREFIX}-{_owner()}-{next(_counter)}-{secrets.token_hex(3)}"
    try:
        group.mkdir()
        if any(not (group / name).exists() for name in required):
            raise OSError(f"{controller} group without {required}")
        for name, value in settings.items():
            if (group / name).exists():
                (group / name).write_text(value)
    except OSError:
        if group.is_dir():
            with contextlib.suppress(OSError):
                group.rmdir()
        return None
    return group


OWNER_VARIABLE = "COURSE_SANDBOX_OWNER"
"""Set in a process's environment, it names the groups of the sandboxes the process makes
(else its pid does), so that whoever started it can remove them once it is gone, with no
risk of taking a reused pid's groups (:func:`remove_leftovers`)."""


def _owner() -> str:
    return os.environ.get(OWNER_VARIABLE) or str(os.getpid())


def remove_leftovers(owner: int | str) -> int:
    """End and remove every sandbox group made by ``owner`` that is still there; return how many.

    ``owner`` is the :data:`OWNER_VARIABLE` of a process, or its pid. A process that made
    sandboxes and was killed (a verifier past its time limit) leaves its groups behind,
    possibly with processes in them.
    """
    parents = [p for p in (_own_cgroup(), _v1_parent("pids"), _v1_parent("memory")) if p is not None]
    removed = 0
    for parent in parents:
        try:
            groups = [g for g in parent.iterdir() if g.name.startswith(f"{_CGROUP_PREFIX}-{owner}-")]
        except OSError:
            continue
        for group in groups:
            if (group / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (group / "cgroup.kill").write_text("1")
            for member in _cgroup_pids(group):
                _signal(member, signal.SIGKILL)
            _remove_cgroup(group)
            removed += not group.exists()
    return removed


def _v1_held(group: Path, keys: tuple[str, ...] = ("rss", "shmem", "swap")) -> int:
    """Anonymous and shared (tmpfs, memfd, System V) memory charged to a memory group.

    The ``memory.stat`` keys of cgroup v1 (``rss``, ``shmem``, ``swap``, hierarchical as
    ``total_*``) by default; cgroup v2 calls them ``anon`` and ``shmem``.
    """
    stat = {}
    with contextlib.suppress(OSError, ValueError):
        for line in (group / "memory.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            stat[key] = int(value)
    return sum(stat.get(f"total_{key}", stat.get(key, 0)) for key in keys)


def _memfd_bytes(pid: int, seen: set) -> int:
    """Bytes held by the memory files ``pid`` has open that ``seen`` (inodes) does not hold yet."""
    held = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        target = _readlink(f"/proc/{pid}/fd/{fd}")
        if not target or not target.startswith("/memfd:"):
            continue
        try:
            info = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            held += info.st_blocks * 512
    return held


_SIZE_SUPPORT: list[bool] = []


def _bwrap_has_size() -> bool:
    """Whether this bwrap takes ``--size`` (0.5 and later) to cap a tmpfs."""
    if not _SIZE_SUPPORT:
        try:
            done = subprocess.run([shutil.which("bwrap") or "bwrap", "--help"], capture_output=True, text=True,
                                  timeout=10)
            _SIZE_SUPPORT.append("--size" in done.stdout + done.stderr)
        except (OSError, subprocess.SubprocessError):
            _SIZE_SUPPORT.append(False)
    return _SIZE_SUPPORT[0]


def _remove_cgroup(group: Path) -> None:
    try:
        _wait_for(lambda: not _cgroup_pids(group), 5.0, "")
        group.rmdir()
    except (OSError, SandboxError):
        pass  # a group that cannot go is empty and harmless; never hide the real result


def _cgroup_pids(group: Path) -> list[int]:
    try:
        return [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _cgroup_event(group: Path, key: str) -> int | None:
    for line in (group / "cgroup.events").read_text().splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return None


def _wait_for(condition, timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SandboxError(message)
        time.sleep(0.005)


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ")".
    return text[text.rindex(")") + 2:].split()


def _ppid(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def _state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def _process_seconds(pid: int, ticks: int) -> float:
    """CPU seconds of ``pid``, its exited threads and its reaped children.

    The live threads' ``schedstat`` is exact; ``utime + stime`` (in ticks, rounded down)
    also holds threads that have exited, so the larger of the two is taken; ``cutime +
    cstime`` holds the reaped children.
    """
    fields = _stat_fields(pid)
    if not fields:
        return 0.0
    # utime, stime, cutime, cstime are fields 14-17 of /proc/PID/stat (11-14 after the name)
    own, reaped = int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])
    return max(_thread_seconds(pid), own / ticks) + reaped / ticks


def _thread_seconds(pid: int) -> float:
    """CPU seconds of every live thread of ``pid`` (``schedstat``, nanoseconds)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for task in tasks:
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def _status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pids_with_arg(arg: str) -> list[int]:
    found = []
    needle = arg.encode()
    for pid in _all_pids():
        try:
            if needle in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                found.append(pid)
        except OSError:
            continue
    return found


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
