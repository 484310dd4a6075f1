"""Where the hook's warm worker listens, and the bounds of one exchange with it.

The worker (:mod:`tool_failure_guard.hooks.worker`) and its client
(:mod:`tool_failure_guard.hooks.client`) meet at a Unix socket inside the hook's
private state folder (0700, this user's: :mod:`tool_failure_guard.hooks.state`
checks it), so only its owner can connect.  The socket's name carries the
install's key (:func:`install_key`): an upgraded install never talks to a
worker of the old one.  Beside it, the worker's lock file holds the worker's
pid under an exclusive ``flock`` for as long as it lives, so concurrent hooks
start at most one.

One exchange: the client sends one header line (JSON: cli, mode, state folder,
request id) and the payload, then closes its side; the worker answers one
JSON object (the stdout and stderr text the in-process hook would have
written) and closes.  Stdlib only: the client's start-up is the hook's cost.
"""

from __future__ import annotations

import os
import sys
import zlib

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

#: The most bytes of the request's header line.
MAX_HEADER_BYTES: Final = 64 * 1024
#: The most bytes of the worker's answer (the answer and stderr text, as JSON).
MAX_REPLY_BYTES: Final = 8 * 1024 * 1024
#: The longest socket path bound or connected to directly (``sun_path`` holds 108 bytes on
#: Linux, 104 on BSDs); a longer one is reached through the folder's ``/proc/self/fd`` link.
_MAX_DIRECT_PATH: Final = 100
_PACKAGE: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The folder holding the ``tool_failure_guard`` package the hook runs (the worker runs it too).
PACKAGE_ROOT: Final = os.path.dirname(_PACKAGE)
#: Files whose stamps make the install's key (a reinstall rewrites them).
_STAMPED: Final = ("__init__.py", "hooks/run.py", "hooks/worker.py", "core/__init__.py")


def install_key() -> str:
    """The install's key: Python's version, the package folder and its files' stamps.

    A new install or upgrade rewrites the package's files (new stamps), so its hooks
    name another socket and start a worker of their own; the old worker idles out.
    (Not the interpreter's path: a venv's ``python`` is reached by several names.)
    """
    parts = [sys.version, _PACKAGE]
    for name in _STAMPED:
        try:
            info = os.stat(os.path.join(_PACKAGE, name))
        except OSError:
            parts.append("-")
            continue
        parts.append(f"{info.st_ino}:{info.st_mtime_ns}:{info.st_size}")
    data = "\0".join(parts).encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def socket_name(key: str) -> str:
    return f"worker-{key}.sock"


def lock_name(key: str) -> str:
    return f"worker-{key}.lock"


class Address:
    """A socket path usable with ``bind``/``connect`` whatever the folder's length.

    A long folder is opened (``O_PATH``) and reached through ``/proc/self/fd/N``;
    :meth:`close` releases that descriptor.
    """

    __slots__ = ("_fd", "path")

    def __init__(self, directory: str, name: str) -> None:
        full = os.path.join(directory, name)
        self._fd: int | None = None
        self.path = full
        if len(os.fsencode(full)) <= _MAX_DIRECT_PATH:
            return
        o_path = getattr(os, "O_PATH", None)
        if o_path is None or not os.path.isdir("/proc/self/fd"):
            raise OSError(f"socket path {full!r} is longer than {_MAX_DIRECT_PATH} bytes")
        self._fd = os.open(directory, o_path | os.O_DIRECTORY | os.O_CLOEXEC)
        self.path = f"/proc/self/fd/{self._fd}/{name}"

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def private_folder(directory: str) -> bool:
    """True when ``directory`` is a folder of this user that nobody else can enter."""
    try:
        info = os.lstat(directory)
    except OSError:
        return False
    return (
        (info.st_mode & 0o170000) == 0o040000
        and info.st_uid == os.geteuid()
        and not info.st_mode & 0o077
    )
