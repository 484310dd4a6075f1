"""State is private: the agent's directories are 0700 and its files 0600, whatever the umask.

The history holds what the model read (the content of a 0600 secret
included), so the state directory, its ``sessions/`` directory, every history
and sidecar file and a ``--telemetry file:`` file are readable by their owner
only.  Modes are set explicitly (``chmod`` after creation), so a permissive
umask cannot widen them, and an existing directory or file the agent owns
with a wider mode is narrowed when the agent opens it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO, TextIO

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def _narrow(path: Path | int, mode: int) -> None:
    """Set ``mode`` on an object we own whose permission bits are not already ``mode``."""
    info = os.fstat(path) if isinstance(path, int) else os.stat(path)
    if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) == mode:
        return
    with contextlib.suppress(OSError):  # a read-only file system keeps what it has
        if isinstance(path, int):
            os.fchmod(path, mode)
        else:
            os.chmod(path, mode)


def private_directory(path: Path) -> None:
    """Create ``path`` (parents with default modes) as a 0700 directory, or narrow it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=PRIVATE_DIR_MODE)
    _narrow(path, PRIVATE_DIR_MODE)


def _open_fd(path: Path, read: bool) -> int:
    flags = os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | (os.O_RDWR if read else os.O_WRONLY)
    fd = os.open(path, flags, PRIVATE_FILE_MODE)
    try:
        _narrow(fd, PRIVATE_FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_text(path: Path) -> TextIO:
    """``path`` opened for appending UTF-8 text, 0600."""
    return os.fdopen(_open_fd(path, read=False), "a", encoding="utf-8")


def append_binary(path: Path) -> BinaryIO:
    """``path`` opened for reading and appending bytes (``a+b``), 0600."""
    return os.fdopen(_open_fd(path, read=True), "a+b")
