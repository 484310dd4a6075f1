"""The hook's state folder: the guard's own, or refused untouched; pruned of the guard's files only.

The folder comes from the installed command line (``--state-dir``) or the XDG
default, so it may name a folder that holds the user's own files (``~/.claude``
with ``settings.json`` and ``.credentials.json``).  The guard therefore acts
only on what it can tell is its own:

- a folder it creates is made 0700 (whatever the umask) and marked with
  :data:`MARKER_NAME`;
- an existing folder is used only when it is a real directory (not a symbolic
  link) of this user that nobody else can enter, and either carries the marker
  or holds nothing but files the guard writes (a folder of an earlier version:
  it is then marked).  Anything else is refused with a :class:`StateError`
  naming why, and **nothing in it is changed**: no mode is narrowed, no file
  removed;
- the prune removes only files whose name is one the guard writes *and* whose
  content is the guard's (a session state, a temporary file of one, an unheld
  worker lock), untouched for :data:`PRUNE_AFTER_S`.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from pathlib import Path

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

#: The file that marks a folder as the guard's state folder.
MARKER_NAME: Final = ".tool-failure-guard-state"
_MARKER_TEXT: Final = b"tool-failure-guard hook state folder: the guard's own files only\n"
#: The largest state file read or written (1 MiB); past it the session starts over.
MAX_STATE_BYTES: Final = 1024 * 1024
#: The guard's files untouched for this long (7 days) are removed when a new session starts.
PRUNE_AFTER_S: Final = 7 * 24 * 3600.0
#: The most folder entries one prune (or the adoption of an unmarked folder) looks at.
MAX_PRUNE_SCAN: Final = 10_000
#: A session's state file (see ``state.session_file_name``).
SESSION_FILE: Final = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9._-]{0,127}|sha256-[0-9a-f]{64})\.json")
#: A state file being written (renamed over the session's file when whole).
TEMP_FILE: Final = re.compile(r"\.[A-Za-z0-9._-]{1,140}\.json\.[0-9a-f]{16}\.tmp")
#: A warm worker's socket and lock (``channel.socket_name`` / ``channel.lock_name``).
WORKER_FILE: Final = re.compile(r"worker-[0-9a-f]{16}\.(?:sock|lock)")
#: How a state file the guard wrote begins.
_STATE_START: Final = b'{"version":'


class StateError(OSError):
    """The state folder or file cannot be used (not ours, not a regular file, no access)."""


def ensure_state_folder(directory: Path) -> None:
    """Create ``directory`` (0700, marked) or check that it is the guard's; else StateError."""
    created = True
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        created = False
    except FileNotFoundError:  # its parents first (with the default modes)
        directory.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            created = False
    info = os.lstat(directory)
    name = repr(str(directory))
    if stat.S_ISLNK(info.st_mode):
        raise StateError(f"state folder {name} is a symbolic link (refused, left untouched)")
    if not stat.S_ISDIR(info.st_mode):
        raise StateError(f"state folder {name} is not a directory")
    if info.st_uid != os.geteuid():
        raise StateError(f"state folder {name} belongs to another user")
    if created:  # our own new folder: exactly 0700, whatever the umask made of it
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(directory, 0o700)
        _write_marker(directory)
        return
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise StateError(
            f"state folder {name} can be read or entered by others (refused, left untouched; "
            "`chmod 700` it to use it)"
        )
    if _is_marked(directory):
        return
    foreign = _foreign_entry(directory)
    if foreign is not None:
        raise StateError(
            f"state folder {name} was not created by the guard and holds {foreign!r} "
            "(refused, left untouched: give the hook a folder of its own)"
        )
    _write_marker(directory)  # an earlier version's folder: the guard's files only


def _is_marked(directory: Path) -> bool:
    try:
        info = os.lstat(directory / MARKER_NAME)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()


def _write_marker(directory: Path) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(directory / MARKER_NAME, flags, 0o600)
    try:
        os.write(fd, _MARKER_TEXT)
    finally:
        os.close(fd)


def _foreign_entry(directory: Path) -> str | None:
    """The first entry the guard would not have written (None: all are its own)."""
    with os.scandir(directory) as entries:
        for number, entry in enumerate(entries):
            if number >= MAX_PRUNE_SCAN:
                return f"more than {MAX_PRUNE_SCAN} entries"
            name = entry.name
            if (
                name == MARKER_NAME
                or re.fullmatch(WORKER_FILE, name)
                or re.fullmatch(TEMP_FILE, name)
            ):
                continue
            if re.fullmatch(SESSION_FILE, name) and _is_state_file(entry.path, allow_empty=True):
                continue
            return name
    return None


def _read_own(path: str, limit: int) -> bytes | None:
    """Up to ``limit`` + 1 bytes of a regular file of this user (None otherwise), never blocking."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return None
        return os.read(fd, limit + 1)
    finally:
        os.close(fd)


def _is_state_file(path: str, *, allow_empty: bool = False) -> bool:
    """Whether ``path`` holds a state the guard wrote: ``{"version": int, "state": {...}}``."""
    data = _read_own(path, MAX_STATE_BYTES)
    if data is None or len(data) > MAX_STATE_BYTES:
        return False
    if not data:
        return allow_empty
    if not data.startswith(_STATE_START):
        return False
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return (
        isinstance(value, dict)
        and set(value) == {"version", "state"}
        and isinstance(value["version"], int)
        and isinstance(value["state"], dict)
    )


def _is_temp_file(path: str) -> bool:
    data = _read_own(path, len(_STATE_START))
    return data is not None and (not data or data.startswith(_STATE_START))


def _is_unheld_lock(path: str) -> bool:
    """A worker lock file nobody holds (taken here and left held: the caller unlinks it)."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    os.unlink(path)  # under the lock: no worker starts on it meanwhile
    os.close(fd)
    return True


def prune(directory: Path, *, keep: Path | None = None, now: float | None = None) -> int:
    """Remove the guard's own files untouched for :data:`PRUNE_AFTER_S`; how many.

    Only in a marked folder, only regular files of this user, only names the guard
    writes, and only when the content is the guard's too.  The bound is far past the
    state's stale one, so a file a live session still uses is never removed under it.
    """
    if not _is_marked(directory):
        return 0
    removed, now, own = 0, time.time() if now is None else now, os.geteuid()
    with os.scandir(directory) as entries:
        for number, entry in enumerate(entries):
            if number >= MAX_PRUNE_SCAN:
                break
            name = entry.name
            if keep is not None and entry.path == str(keep):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
                if (
                    not stat.S_ISREG(info.st_mode)
                    or info.st_uid != own
                    or now - info.st_mtime <= PRUNE_AFTER_S
                ):
                    continue
                if re.fullmatch(WORKER_FILE, name) and name.endswith(".lock"):
                    removed += _is_unheld_lock(entry.path)
                    continue
                if (re.fullmatch(SESSION_FILE, name) and _is_state_file(entry.path)) or (
                    re.fullmatch(TEMP_FILE, name) and _is_temp_file(entry.path)
                ):
                    os.unlink(entry.path)
                    removed += 1
            except OSError:  # gone meanwhile, or not ours to remove
                continue
    return removed
