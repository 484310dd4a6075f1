"""The per-session state store: one private file per (CLI, session), updated under a lock.

A coding CLI runs a fresh hook process per event, and runs the per-call hooks
of parallel calls concurrently, so what the guard remembers between events
lives in one file per session, and every update holds an exclusive
``fcntl.flock`` on it from read to write: concurrent hooks queue, none loses
another's update.

The folder is the operator's, never the project's:
``$XDG_STATE_HOME/tool-failure-guard/hooks/<cli>/`` (``~/.local/state`` when
unset), or the ``--state-dir`` the installer wrote on the hook's command line.
Folders are 0700 and files 0600 whatever the umask
(:mod:`tool_failure_guard.private_files`); a folder another user owns is
refused.  A session id becomes a file name only when it is plainly safe, else
its SHA-256.

A file that cannot be read as the store wrote it (damaged, bigger than
:data:`MAX_STATE_BYTES`, another format) or that nobody touched for
:data:`STALE_AFTER_S` starts over empty, with one line on stderr naming why:
the streak resets, the hook never crashes over it.  A state that would grow
past the bound is written empty instead (the streak resets, said on stderr).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from tool_failure_guard.private_files import PRIVATE_FILE_MODE, private_directory

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

#: The largest state file read or written (1 MiB); past it the session starts over.
MAX_STATE_BYTES: Final = 1024 * 1024
#: A state file untouched for this long (24 h) is stale: the session starts over.
STALE_AFTER_S: Final = 24 * 3600.0
#: Session files untouched for this long (7 days) are removed when a new session starts.
PRUNE_AFTER_S: Final = 7 * 24 * 3600.0
#: The most folder entries one prune looks at (the rest wait for the next new session).
MAX_PRUNE_SCAN: Final = 10_000
#: The version of the file format; a file with another one starts over.
STATE_VERSION: Final = 1
#: The session ids kept as file names as they are; any other id is hashed.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class StateError(OSError):
    """The state folder or file cannot be used (not ours, not a regular file, no access)."""


def default_state_dir(cli: str, environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/tool-failure-guard/hooks/<cli>`` (an absolute XDG path only, per the
    XDG spec; else ``~/.local/state``)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "tool-failure-guard" / "hooks" / cli


def session_file_name(session_id: str) -> str:
    """A file name for ``session_id``: the id itself when plainly safe, else its SHA-256."""
    if _SAFE_NAME.fullmatch(session_id) and ".." not in session_id:
        return f"{session_id}.json"
    import hashlib  # only for an id that is not plainly safe (keeps it off the common path)

    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"sha256-{digest}.json"


def _warn(message: str) -> None:
    print(f"tool-failure-guard hook: {message}", file=sys.stderr)


class StateStore:
    """The state folder of one CLI; :meth:`session` is one locked read-modify-write."""

    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int = MAX_STATE_BYTES,
        stale_after_s: float = STALE_AFTER_S,
        clock: Callable[[], float] = time.time,
        warn: Callable[[str], None] = _warn,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.stale_after_s = stale_after_s
        self._clock = clock
        self._warn = warn

    def ensure_directory(self) -> None:
        """Create the folder (0700) or check it: a directory of this user only, else StateError."""
        directory = self.directory
        private_directory(directory)
        info = os.lstat(directory)
        if not stat.S_ISDIR(info.st_mode):
            raise StateError(f"state folder {str(directory)!r} is not a directory")
        if info.st_uid != os.geteuid():
            raise StateError(f"state folder {str(directory)!r} belongs to another user")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise StateError(f"state folder {str(directory)!r} is readable by others")

    def path_of(self, session_id: str) -> Path:
        return self.directory / session_file_name(session_id)

    @contextlib.contextmanager
    def session(self, session_id: str) -> Iterator[dict[str, Any]]:
        """The session's state as a dict, locked until the block ends, then written back.

        A block that raises writes nothing: the file keeps what it held.
        """
        self.ensure_directory()
        path = self.path_of(session_id)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(path, flags, PRIVATE_FILE_MODE)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise StateError(f"state file {str(path)!r} is a symbolic link") from None
            raise
        try:
            info = os.fstat(fd)
            created = info.st_size == 0
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                raise StateError(f"state file {str(path)!r} is not a regular file of this user")
            if stat.S_IMODE(info.st_mode) != PRIVATE_FILE_MODE:
                os.fchmod(fd, PRIVATE_FILE_MODE)
            fcntl.flock(fd, fcntl.LOCK_EX)
            state = self._load(fd, session_id)
            # a reset file is rewritten even when the block changes nothing
            before = json.dumps(state, sort_keys=True) if state is not None else None
            state = {} if state is None else state
            yield state
            if json.dumps(state, sort_keys=True) != before:
                self._store(fd, state, session_id)
        finally:
            os.close(fd)  # releases the lock
        if created:  # a new session: the folder's long-forgotten sessions go
            self.prune(keep=path)

    def prune(self, *, keep: Path | None = None) -> int:
        """Remove this user's session files untouched for :data:`PRUNE_AFTER_S`; how many.

        The bound is far past the stale one, so a file a live session still uses is never
        removed under it (its next update would then start over anyway).
        """
        removed, now, own = 0, self._clock(), os.geteuid()
        with os.scandir(self.directory) as entries:
            for number, entry in enumerate(entries):
                if number >= MAX_PRUNE_SCAN:
                    break
                if not entry.name.endswith(".json") or (keep and entry.path == str(keep)):
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                    if (
                        stat.S_ISREG(info.st_mode)
                        and info.st_uid == own
                        and now - info.st_mtime > PRUNE_AFTER_S
                    ):
                        os.unlink(entry.path)
                        removed += 1
                except OSError:  # gone meanwhile, or not ours to remove
                    continue
        return removed

    def _load(self, fd: int, session_id: str) -> dict[str, Any] | None:
        """The stored state; {} for a new file; None when it had to start over."""
        info = os.fstat(fd)
        if info.st_size == 0:
            return {}
        if info.st_size > self.max_bytes:
            self._warn(
                f"state of session {session_id!r} is larger than {self.max_bytes} bytes; "
                "the streak starts over"
            )
            return None
        age = self._clock() - info.st_mtime
        if age > self.stale_after_s:
            self._warn(
                f"state of session {session_id!r} is stale (untouched for {age:.0f} s, "
                f"bound {self.stale_after_s:.0f} s); the streak starts over"
            )
            return None
        data = os.pread(fd, self.max_bytes + 1, 0)
        try:
            value = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError):
            self._warn(
                f"state of session {session_id!r} is damaged (not JSON); the streak starts over"
            )
            return None
        if not isinstance(value, dict) or value.get("version") != STATE_VERSION:
            self._warn(
                f"state of session {session_id!r} is not version {STATE_VERSION}; "
                "the streak starts over"
            )
            return None
        body = value.get("state")
        if not isinstance(body, dict):
            self._warn(
                f"state of session {session_id!r} is damaged (no state object); "
                "the streak starts over"
            )
            return None
        return body

    def _store(self, fd: int, state: dict[str, Any], session_id: str) -> None:
        data = json.dumps(
            {"version": STATE_VERSION, "state": state}, separators=(",", ":")
        ).encode()
        if len(data) > self.max_bytes:
            self._warn(
                f"state of session {session_id!r} would be larger than {self.max_bytes} "
                "bytes; the streak starts over"
            )
            data = json.dumps({"version": STATE_VERSION, "state": {}}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
