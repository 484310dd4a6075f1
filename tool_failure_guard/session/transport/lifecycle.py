"""Live sessions of one connection: one lock per session, one writer per history, a bound.

Three faults this module closes (``docs/session.md``, failure model):

* **One lock per session.**  A session is held by at most one of its running
  prompt, a ``session/load`` or a ``session/close`` of it.  The check and the
  claim happen with no ``await`` between them (one event loop), so a load
  racing a prompt of the same session -- two prompts at once, the same prompt
  id, duplicate call ids -- cannot happen: whichever comes second is refused
  with a clear error naming what holds the session.  Overlapping loads of one
  session are refused the same way, so a reload always closes the servers of
  the load before it and never leaves two server sets behind.
* **One writer per history.**  Each live session holds an exclusive
  ``fcntl.flock`` on ``<state dir>/sessions/<session id>.lock`` (created 0600).
  A second agent process on the same state directory that opens the same
  session is refused ("open in another agent process"), instead of both
  appending to one history.  The lock is released when the session is closed
  or evicted, when the connection ends, and by the kernel when the process
  exits however it exits.
* **Bounded live sessions.**  At most ``limit`` sessions are live per
  connection (default :data:`DEFAULT_MAX_LIVE_SESSIONS`).  Opening one more
  closes the least recently used *idle* session first: its MCP servers are
  shut down, its writer lock released and its close reported (``clean``); it
  stays on disk and ``session/load`` brings it back.  When every live session
  is busy, the new one is refused with a clear error.  The evicted session is
  held (as by ``session/close``) until its servers are down and its lock is
  free, so a load of it meanwhile is refused ("is being closed") instead of
  bringing it back live while its lock is released under it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from acp.exceptions import RequestError

from tool_failure_guard.session.persistence.history import check_session_id

if TYPE_CHECKING:
    from tool_failure_guard.session.pipeline.session import GuardedSession
    from tool_failure_guard.session.tools.mcp import SessionMcp

_log = logging.getLogger("session.lifecycle")

#: Live sessions per connection unless ``AgentConfig.max_live_sessions`` says otherwise.
DEFAULT_MAX_LIVE_SESSIONS = 16

#: What holds a session, as the refusal names it.
PROMPT = "prompt"
LOAD = "load"
CLOSE = "close"
_HELD_BY = {
    PROMPT: "has a prompt running",
    LOAD: "is being loaded",
    CLOSE: "is being closed",
}


class SessionInUse(Exception):
    """Another agent process holds this session's history (its writer lock)."""


class WriterLock:
    """An exclusive ``flock`` on one session's lock file, held while the session is live."""

    def __init__(self, state_dir: Path, session_id: str) -> None:
        folder = state_dir / "sessions"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = folder / f"{check_session_id(session_id)}.lock"
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            where = f" (pid {holder})" if holder else ""
            raise SessionInUse(
                f"session {session_id} is open in another agent process{where} on this "
                "state directory; close it there first"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        with contextlib.suppress(OSError):  # the pid is a courtesy for the error message
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class LiveSessions:
    """The connection's live sessions (least recently used first), their servers and locks."""

    def __init__(self, state_dir: Path, limit: int = DEFAULT_MAX_LIVE_SESSIONS) -> None:
        if limit < 1:
            raise ValueError(f"max live sessions must be at least 1, not {limit}")
        self.state_dir = state_dir
        self.limit = limit
        #: Insertion order is recency: a used session moves to the end.
        self.sessions: dict[str, GuardedSession] = {}
        #: The MCP servers of each live session.
        self.mcp: dict[str, SessionMcp] = {}
        self._holders: dict[str, str] = {}
        self._writers: dict[str, WriterLock] = {}

    # -- one lock per session ------------------------------------------------------

    @contextlib.contextmanager
    def hold(self, session_id: str, holder: str) -> Iterator[None]:
        """Hold ``session_id`` for ``holder``; refused at once if something else holds it."""
        current = self._holders.get(session_id)
        if current is not None:
            raise RequestError.invalid_request(
                {
                    "sessionId": session_id,
                    "details": f"the session {_HELD_BY[current]}; {holder} refused",
                }
            )
        self._holders[session_id] = holder
        try:
            yield
        finally:
            del self._holders[session_id]

    def held(self, session_id: str) -> bool:
        return session_id in self._holders

    def touch(self, session_id: str) -> None:
        """Mark a session most recently used."""
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self.sessions[session_id] = session

    # -- one writer per history ----------------------------------------------------

    def claim_writer(self, session_id: str) -> None:
        """Hold the session's writer lock (already held by this connection: nothing to do).

        Raises a JSON-RPC invalid-request error when another process holds it.
        """
        if session_id in self._writers:
            return
        try:
            self._writers[session_id] = WriterLock(self.state_dir, session_id)
        except SessionInUse as exc:
            raise RequestError.invalid_request(
                {"sessionId": session_id, "details": str(exc)}
            ) from None
        except OSError as exc:
            _log.error("cannot lock session %s: %s", session_id, exc)
            raise RequestError.internal_error(
                {"details": "the session history could not be locked"}
            ) from exc

    # -- the bound -----------------------------------------------------------------

    async def make_room(self, keep: str | None = None) -> None:
        """Close least recently used idle sessions until one more fits (``keep`` stays)."""
        while len([sid for sid in self.sessions if sid != keep]) >= self.limit:
            idle = next(
                (
                    sid
                    for sid, session in self.sessions.items()
                    if sid != keep and not session.running and not self.held(sid)
                ),
                None,
            )
            if idle is None:
                raise RequestError.invalid_request(
                    {
                        "details": f"{len(self.sessions)} sessions are live and busy (at most "
                        f"{self.limit} per connection); close one or wait for its prompt"
                    }
                )
            _log.info("closing idle session %s (at most %d live sessions)", idle, self.limit)
            # Held while it closes (its servers may take seconds): a load of it meanwhile
            # is refused, so it never comes back live while this release frees its lock.
            with self.hold(idle, CLOSE):
                await self.release(idle, "clean")

    # -- closing ---------------------------------------------------------------------

    async def close_servers(self, session_id: str) -> None:
        mcp = self.mcp.pop(session_id, None)
        if mcp is not None:
            await mcp.close()

    async def release(self, session_id: str, reason: str) -> None:
        """Forget a live session: report it closed, stop its servers, free its writer lock."""
        session = self.sessions.pop(session_id, None)
        # Taken now, released once the servers are down: only the lock this session held
        # is ever freed here, never one a later open of the session claimed meanwhile.
        writer = self._writers.pop(session_id, None)
        if session is not None:
            session.report_closed(reason)
        try:
            await self.close_servers(session_id)
        finally:
            if writer is not None:
                writer.release()

    def release_writers(self) -> None:
        """The connection ended: free every writer lock (sessions were reported already)."""
        for writer in self._writers.values():
            writer.release()
        self._writers.clear()
