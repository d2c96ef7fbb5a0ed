"""The book's chapters run in kernels that talk over Unix sockets, not TCP.

myst-nb executes the chapters through jupyter-cache, which calls ``nbclient.execute``
with nbclient's default kernel manager: TCP on the loopback interface, and every kernel
then logs "Kernel is running over TCP without encryption" into the build's output, once
per chapter. Neither offers a setting for the kernel manager, so this extension changes
nbclient's default (a traitlets dynamic default, looked up by its ``_<name>_default``
name) to :class:`course_lib._kernels.IpcKernelManager` for the build's process.
"""

from __future__ import annotations

from typing import Any

__all__ = ["setup"]


def setup(app: Any) -> dict[str, Any]:
    from nbclient import NotebookClient

    NotebookClient._kernel_manager_class_default = _ipc_kernel_manager
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def _ipc_kernel_manager(client: Any) -> type:
    from course_lib._kernels import IpcKernelManager

    return IpcKernelManager
