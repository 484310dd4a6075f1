"""Where the hook's warm worker listens, and the bounds of one exchange with it.

The worker (:mod:`tool_failure_guard.hooks.worker`) and its client
(:mod:`tool_failure_guard.hooks.client`) meet at a Unix socket inside the hook's
private state folder (0700, this user's: :mod:`tool_failure_guard.hooks.state`
checks it), so only its owner can connect.  The socket's name carries the
install's key (:func:`install_key`): an upgraded install never talks to a
worker of the old one.  Beside it, the worker's lock file holds the worker's
pid under an exclusive ``flock`` for as long as it lives, so concurrent hooks
start at most one.

The key is cheap (four files' stamps), so it does not see every change: the
worker itself compares the stamps of every module of the package and of the
distribution's metadata (:func:`code_stamps`) with those it started with,
before each request and while idle, and retires on a change (no event is
answered by code a fresh hook process would no longer load).

One exchange: the client sends one header line (JSON: every field of the
hook's ``HookOptions`` and the request id) and the payload, then closes its
side; the worker answers one JSON object (the stdout and stderr text the
in-process hook would have written, or ``refused``) and closes.  Stdlib only:
the client's start-up is the hook's cost.
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


def metadata_files(root: str = PACKAGE_ROOT) -> list[str]:
    """The installed distribution's ``METADATA`` and ``RECORD`` (a reinstall rewrites them).

    The ``tool_failure_guard-*.dist-info`` folders beside the package (an installed
    one) and the one ``importlib.metadata`` finds (an editable install's, in the
    environment).  Run by the worker once, at its start.
    """
    folders: set[str] = set()
    try:
        names = os.listdir(root)
    except OSError:
        names = []
    folders.update(
        os.path.join(root, name)
        for name in names
        if name.startswith("tool_failure_guard-") and name.endswith(".dist-info")
    )
    try:
        from importlib import metadata

        found = getattr(metadata.distribution("tool-failure-guard"), "_path", None)
    except Exception:  # no metadata (a source tree never installed): the modules only
        found = None
    if found is not None:
        folders.add(str(found))
    return [
        os.path.join(folder, name) for folder in sorted(folders) for name in ("METADATA", "RECORD")
    ]


def code_stamps(files: list[str], package: str = _PACKAGE) -> list[tuple[str, int, int, int]]:
    """(path, inode, mtime ns, size) of every ``.py`` under ``package`` and of ``files``.

    A change to any module (an edit, a ``git pull`` in an editable clone, a
    reinstall: new files, removed files, rewritten ones) changes the list.
    """
    stamps: list[tuple[str, int, int, int]] = []
    folders = [package]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    info = entry.stat(follow_symlinks=False)
                    stamps.append((entry.path, info.st_ino, info.st_mtime_ns, info.st_size))
                elif entry.name != "__pycache__" and entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
    for path in files:
        try:
            info = os.stat(path)
            stamps.append((path, info.st_ino, info.st_mtime_ns, info.st_size))
        except OSError:
            stamps.append((path, -1, -1, -1))
    stamps.sort()
    return stamps


def code_digest(stamps: list[tuple[str, int, int, int]]) -> str:
    """A short digest of :func:`code_stamps` (what a worker's lock file records)."""
    data = "\0".join(f"{p}:{i}:{m}:{s}" for p, i, m, s in stamps).encode("utf-8", "surrogateescape")
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
