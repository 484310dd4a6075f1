"""The per-session state store: one private file per (CLI, session), updated under a lock.

A coding CLI runs a fresh hook process per event, and runs the per-call hooks
of parallel calls concurrently, so what the guard remembers between events
lives in one file per session, and every update holds an exclusive
``fcntl.flock`` on it from read to write: concurrent hooks queue, none loses
another's update.  A wait for that lock is bounded (:data:`LOCK_WAIT_S`, far
under a CLI's hook timeout): past it the hook fails open, naming the lock.

A state is written whole or not at all: into a new file beside it, renamed
over the session's file while the lock is held (a lock is on the file's inode,
which the rename replaces, so whoever took the lock checks afterwards that the
name still leads to the inode it locked, else takes the new one's).  A write
that fails (a full disk, a file size limit) leaves the previous state as it
was and says so.  A new session's file is created whole too (linked into
place), so an empty file is always a damaged one.

The folder is the operator's, never the project's:
``$XDG_STATE_HOME/tool-failure-guard/hooks/<cli>/`` (``~/.local/state`` when
unset), or the ``--state-dir`` the installer wrote on the hook's command line;
:mod:`tool_failure_guard.hooks.state_folder` creates it private or refuses it
untouched, and prunes only the guard's own files.  Files are 0600.  A session
id becomes a file name only when it is plainly safe, else its SHA-256.

A file that cannot be read as the store wrote it (damaged, empty, bigger than
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

from tool_failure_guard.hooks.state_folder import (
    MAX_STATE_BYTES,
    PRUNE_AFTER_S,
    StateError,
    ensure_state_folder,
    prune,
)
from tool_failure_guard.private_files import PRIVATE_FILE_MODE

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = ["MAX_STATE_BYTES", "PRUNE_AFTER_S", "StateError", "StateStore", "default_state_dir"]

#: A state file untouched for this long (24 h) is stale: the session starts over.
STALE_AFTER_S: Final = 24 * 3600.0
#: The most seconds a hook waits for a session's lock before it fails open.
LOCK_WAIT_S: Final = 5.0
#: The version of the file format; a file with another one starts over.
STATE_VERSION: Final = 1
#: The session ids kept as file names as they are; any other id is hashed.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


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
    """The state folder of one CLI; :meth:`session` is one locked read-modify-write.

    ``lock_wait_s`` bounds the wait for a session's lock (the class's value is
    :data:`LOCK_WAIT_S`; the warm worker sets a shorter one for the whole process,
    below its client's wait for an answer).
    """

    lock_wait_s: float = LOCK_WAIT_S

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
        """Create the folder (0700) or check that it is the guard's: else StateError."""
        ensure_state_folder(self.directory)

    def path_of(self, session_id: str) -> Path:
        return self.directory / session_file_name(session_id)

    @contextlib.contextmanager
    def session(self, session_id: str) -> Iterator[dict[str, Any]]:
        """The session's state as a dict, locked until the block ends, then written back.

        A block that raises writes nothing: the file keeps what it held.
        """
        self.ensure_directory()
        path = self.path_of(session_id)
        fd, created = self._open_locked(path)
        try:
            state = self._load(fd, session_id)
            # a reset file is rewritten even when the block changes nothing
            before = json.dumps(state, sort_keys=True) if state is not None else None
            state = {} if state is None else state
            yield state
            if json.dumps(state, sort_keys=True) != before:
                self._store(path, state, session_id)
        finally:
            os.close(fd)  # releases the lock
        if created:  # a new session: the folder's long-forgotten sessions go
            self.prune(keep=path)

    def prune(self, *, keep: Path | None = None) -> int:
        """Remove the guard's own files untouched for :data:`PRUNE_AFTER_S`; how many."""
        return prune(self.directory, keep=keep, now=self._clock())

    def _open_locked(self, path: Path) -> tuple[int, bool]:
        """The session file opened and locked (whether this call created it), bounded."""
        deadline = time.monotonic() + self.lock_wait_s
        created = False
        flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        while True:
            try:
                fd = os.open(path, flags)
            except FileNotFoundError:
                created = self._create(path) or created
                continue
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise StateError(f"state file {str(path)!r} is a symbolic link") from None
                raise
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                    raise StateError(f"state file {str(path)!r} is not a regular file of this user")
                self._lock(fd, path, deadline)
                try:
                    now = os.lstat(path)
                except FileNotFoundError:
                    now = None
            except BaseException:
                os.close(fd)
                raise
            if now is not None and (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino):
                return fd, created
            os.close(fd)  # renamed over (or pruned) while we waited: take the new file

    def _lock(self, fd: int, path: Path, deadline: float) -> None:
        """``flock(fd, LOCK_EX)``, waiting at most until ``deadline`` (else StateError)."""
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            left = deadline - time.monotonic()
            if left <= 0:
                raise StateError(
                    f"state file {str(path)!r} stayed locked by another process for "
                    f"{self.lock_wait_s:g} s (the bound)"
                )
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.025)

    def _create(self, path: Path) -> bool:
        """Put an empty state at ``path`` whole (False: another process was first)."""
        temp = self._write_temp(path, self._encode({}))
        try:
            os.link(temp, path)
            return True
        except FileExistsError:
            return False
        except OSError as error:  # a file system without hard links: rename when still absent
            if error.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            if os.path.lexists(path):
                return False
            os.rename(temp, path)
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)

    def _write_temp(self, path: Path, data: bytes) -> str:
        """``data`` in a new 0600 file beside ``path``, whole (else removed, and raised)."""
        temp = str(path.parent / f".{path.name}.{os.urandom(8).hex()}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(temp, flags, PRIVATE_FILE_MODE)
        try:
            try:
                if os.fstat(fd).st_mode & 0o777 != PRIVATE_FILE_MODE:
                    os.fchmod(fd, PRIVATE_FILE_MODE)  # exactly 0600, whatever the umask
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        return temp

    def _encode(self, state: dict[str, Any]) -> bytes:
        return json.dumps(
            {"version": STATE_VERSION, "state": state}, separators=(",", ":")
        ).encode()

    def _load(self, fd: int, session_id: str) -> dict[str, Any] | None:
        """The stored state; None when it had to start over (said on stderr)."""
        info = os.fstat(fd)
        if info.st_size == 0:
            self._warn(
                f"state of session {session_id!r} is empty (a write was cut short); "
                "the streak starts over"
            )
            return None
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
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
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

    def _store(self, path: Path, state: dict[str, Any], session_id: str) -> None:
        """Write ``state`` whole, renamed over ``path`` (the caller holds the lock)."""
        data = self._encode(state)
        if len(data) > self.max_bytes:
            self._warn(
                f"state of session {session_id!r} would be larger than {self.max_bytes} "
                "bytes; the streak starts over"
            )
            data = self._encode({})
        temp = None
        try:
            temp = self._write_temp(path, data)
            os.rename(temp, path)
        except OSError as error:
            if temp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
            raise StateError(
                f"state of session {session_id!r} could not be written "
                f"({error.strerror or type(error).__name__}); it keeps its previous content, "
                "this event is not recorded"
            ) from None
