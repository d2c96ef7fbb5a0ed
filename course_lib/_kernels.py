"""A kernel manager whose kernel talks over Unix sockets (``ipc``) in a private folder.

jupyter_client starts kernels on TCP ports of the loopback interface by default, and
ipykernel then warns, on every start, that TCP without encryption can be overheard.
Over ``ipc`` the sockets are files, readable only by their owner, so there is nothing to
warn about. The course starts kernels in three places, all through this class (or, while
grading, the sandbox's own ``ipc`` manager): the self-check, grading without a sandbox,
and the book's build (``book/_ext/measure_first_kernels.py``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from jupyter_client import AsyncKernelManager
from jupyter_client.utils import run_sync
from traitlets import default

__all__ = ["IpcKernelManager"]


class IpcKernelManager(AsyncKernelManager):
    """``AsyncKernelManager`` with ``transport="ipc"``; its sockets in a folder removed at shutdown.

    Examples
    --------
    >>> km = IpcKernelManager(kernel_name="python3")
    >>> km.transport, os.path.basename(km.ip)
    ('ipc', 'kernel')
    >>> km.cleanup_resources()
    """

    @default("transport")
    def _transport_default(self) -> str:
        return "ipc"

    @default("ip")
    def _ip_default(self) -> str:
        # Absolute: the kernel starts in the notebook's folder, this process may be elsewhere.
        # Short: a Unix socket path must stay under 107 bytes (the folder from mkdtemp is).
        self._socket_dir = tempfile.mkdtemp(prefix="kernel-")
        return os.path.join(self._socket_dir, "kernel")

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart and getattr(self, "_socket_dir", None):
            shutil.rmtree(self._socket_dir, ignore_errors=True)

    # the sync wrapper is bound to the coroutine it was made from: rebind it to this one
    cleanup_resources = run_sync(_async_cleanup_resources)
