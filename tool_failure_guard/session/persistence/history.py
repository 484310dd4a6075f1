"""Conversation history and its append-only persistence (one JSON Lines file per session).

A session's history is a list of :class:`Message` values
(:mod:`~tool_failure_guard.session.persistence.messages`).  Every message is
appended to ``<state dir>/sessions/<session id>.jsonl`` (written, flushed and
fsync'ed per record) *before* the session acts on it, so that a
``session/load`` after a reconnect or an agent restart replays exactly what
happened -- including the stop message -- and so that a write failure is seen
at the moment it happens.  The file is never rewritten: lines are only
appended.  The first line is a header naming the session and its directory.

Besides messages the file holds ``call_settled`` records (one call's response,
written the moment it settled, so a crash mid-batch loses no outcome) and
``pending_input`` snapshots (the agent-side input queue).  Loading validates
every line strictly, skips a corrupt one into a sidecar file, and
:func:`~tool_failure_guard.session.persistence.assembly.assemble` gives every function
call exactly one response.

Only the conversation is persisted.  The guard's streak deliberately is not: a
loaded session starts its next prompt with a fresh guard.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from tool_failure_guard.private_files import (
    append_binary,
    append_text,
    private_directory,
)
from tool_failure_guard.session.persistence.assembly import assemble
from tool_failure_guard.session.persistence.messages import (
    HistoryError,
    Message,
    SettledCall,
    check_keys,
    read_field,
)

#: Environment variable naming the state directory (``--state-dir`` wins).
STATE_DIR_ENV_VAR = "TOOL_FAILURE_GUARD_STATE_DIR"
FORMAT_VERSION = 2
#: Versions this loader reads (version 1 files are a subset of version 2).
READABLE_VERSIONS = frozenset({1, 2})
#: The record appended after a torn line (a crash mid-write) before the next record.
_TORN_MARKER = {"type": "torn_line"}

_log = logging.getLogger("session.history")
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


class HistoryWriteError(HistoryError):
    """Appending to the history failed: nothing may pretend it was recorded."""


@attrs.frozen(kw_only=True)
class LoadedHistory:
    """What ``session/load`` needs from a history file."""

    cwd: str
    #: The model-facing history: every function call answered exactly once, in call order.
    messages: list[Message]
    #: The agent-side input queue as last persisted (pushed or requeued, not yet delivered).
    pending_input: tuple[str, ...] = ()
    #: Line numbers skipped as corrupt (kept aside in the sidecar file).
    skipped_lines: tuple[int, ...] = ()
    #: Calls that had no persisted outcome and were answered ``interrupted``.
    interrupted_calls: tuple[str, ...] = ()


def default_state_dir() -> Path:
    """``$TOOL_FAILURE_GUARD_STATE_DIR``, else ``$XDG_DATA_HOME/tool-failure-guard``."""
    explicit = os.environ.get(STATE_DIR_ENV_VAR)
    if explicit:
        return Path(explicit)
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "tool-failure-guard"


def check_session_id(session_id: str) -> str:
    if not _SESSION_ID.match(session_id):
        raise HistoryError(f"session id {session_id!r} is not a valid session id")
    return session_id


class HistoryStore:
    """The append-only JSON Lines files of all sessions under one state directory.

    Every record is one line, written with one ``write`` and made durable with
    ``fsync`` before the call returns (see "fsync policy" in docs/session.md).
    Error messages name the file by session id only, never the absolute state
    path, since they may be sent to a client.
    """

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    def path(self, session_id: str) -> Path:
        return self.state_dir / "sessions" / f"{check_session_id(session_id)}.jsonl"

    def corrupt_path(self, session_id: str) -> Path:
        """The sidecar that keeps corrupt lines aside for inspection."""
        return self.state_dir / "sessions" / f"{check_session_id(session_id)}.corrupt.jsonl"

    def exists(self, session_id: str) -> bool:
        return self.path(session_id).is_file()

    def create(self, session_id: str, cwd: str) -> None:
        path = self.path(session_id)
        try:
            private_directory(self.state_dir)
            private_directory(path.parent)
        except OSError as exc:
            raise HistoryWriteError(
                f"cannot create the sessions directory: {exc.strerror or exc}"
            ) from exc
        header = {"type": "session", "version": FORMAT_VERSION, "session_id": session_id}
        header["cwd"] = cwd
        self._append_lines(session_id, [header])

    def append(
        self, session_id: str, message: Message, *, pending_input: Sequence[str] | None = None
    ) -> None:
        """Append ``message``; with ``pending_input``, the queue snapshot in the same write."""
        records: list[Mapping[str, Any]] = [message.to_json()]
        if pending_input is not None:
            records.append(_pending_record(pending_input))
        self._append_lines(session_id, records)

    def append_settled(self, session_id: str, settled: SettledCall) -> None:
        """Persist one call's outcome the moment it settled."""
        self._append_lines(session_id, [settled.to_json()])

    def append_pending_input(self, session_id: str, texts: Sequence[str]) -> None:
        """Persist a snapshot of the agent-side input queue (the last one wins on load)."""
        self._append_lines(session_id, [_pending_record(texts)])

    def _append_lines(self, session_id: str, records: Sequence[Mapping[str, Any]]) -> None:
        path = self.path(session_id)
        text = "".join(
            json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n" for data in records
        )
        try:
            with append_binary(path) as handle:
                if handle.tell() > 0:
                    handle.seek(-1, os.SEEK_END)
                    if handle.read(1) != b"\n":
                        # The previous write was torn (a crash mid-line): end that line
                        # and mark it, so the loader skips it instead of failing.
                        text = "\n" + json.dumps(_TORN_MARKER) + "\n" + text
                handle.write(text.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise HistoryWriteError(
                f"cannot append to the history of session {session_id}: {exc.strerror or exc}"
            ) from exc

    def load(self, session_id: str) -> tuple[str, list[Message]]:
        """Return the recorded working directory and model-facing messages of ``session_id``."""
        loaded = self.load_session(session_id)
        return loaded.cwd, loaded.messages

    def load_session(self, session_id: str) -> LoadedHistory:
        """Read, validate and assemble a history; corrupt lines go to the sidecar.

        Raises :class:`HistoryError` only when there is no history to load at all.
        """
        path = self.path(session_id)
        name = f"{session_id}.jsonl"
        try:
            raw_lines = path.read_bytes().split(b"\n")
        except FileNotFoundError:
            raise HistoryError(f"no history for session {session_id}") from None
        except OSError as exc:
            raise HistoryError(f"cannot read {name}: {exc.strerror or exc}") from None
        if raw_lines and raw_lines[-1] == b"":
            raw_lines.pop()
        cwd = ""
        records: list[Message | SettledCall] = []
        pending: tuple[str, ...] = ()
        corrupt: list[tuple[int, str, bytes]] = []
        for number, raw in enumerate(raw_lines, start=1):
            if not raw.strip():
                continue
            where = f"{name}:{number}"
            try:
                data = _decode_line(raw, where)
                if data is None or data == _TORN_MARKER:
                    continue
                kind = data.get("type")
                if kind == "session":
                    cwd = _read_header(data, session_id, where)
                elif kind == "message":
                    records.append(Message.from_json(data, where))
                elif kind == "call_settled":
                    records.append(SettledCall.from_json(data, where))
                elif kind == "pending_input":
                    pending = _read_pending(data, where)
                else:
                    raise HistoryError(f"{where}: unknown record type {kind!r}")
            except _TornLine:
                if number == len(raw_lines) or _is_torn_marker(raw_lines[number]):
                    continue  # a crash mid-write: the record was never complete
                corrupt.append((number, f"{where}: not JSON", raw))
            except HistoryError as exc:
                corrupt.append((number, str(exc), raw))
        for number, error, _ in corrupt:
            _log.warning(
                "session %s: skipped corrupt history line %d (%s)", session_id, number, error
            )
        if corrupt:
            self._keep_aside(session_id, corrupt)
        messages, interrupted = assemble(records)
        return LoadedHistory(
            cwd=cwd,
            messages=messages,
            pending_input=pending,
            skipped_lines=tuple(number for number, _, _ in corrupt),
            interrupted_calls=tuple(interrupted),
        )

    def _keep_aside(self, session_id: str, corrupt: list[tuple[int, str, bytes]]) -> None:
        """Append corrupt lines to the sidecar, each (line number, text) only once."""
        sidecar = self.corrupt_path(session_id)
        seen: set[tuple[int, str]] = set()
        try:
            for line in sidecar.read_text(encoding="utf-8", errors="replace").splitlines():
                with contextlib.suppress(ValueError, TypeError, KeyError, RecursionError):
                    entry = json.loads(line)
                    seen.add((int(entry["line"]), str(entry["text"])))
        except FileNotFoundError:
            pass
        except OSError as exc:
            _log.warning("cannot read the corrupt-line sidecar of %s: %s", session_id, exc)
        fresh = []
        for number, error, raw in corrupt:
            text = raw.decode("utf-8", errors="backslashreplace")
            if (number, text) not in seen:
                fresh.append({"line": number, "error": error, "text": text})
        if not fresh:
            return
        data = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in fresh)
        try:
            with append_text(sidecar) as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            _log.warning("cannot keep corrupt lines of %s aside: %s", session_id, exc)


class _TornLine(Exception):
    """A line that is not JSON (maybe a torn write, decided by what follows it)."""


def _decode_line(raw: bytes, where: str) -> dict[str, Any] | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HistoryError(f"{where}: not UTF-8 text ({exc.reason})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise _TornLine from None
    except RecursionError:
        raise HistoryError(f"{where}: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise HistoryError(f"{where}: a record must be an object")
    return data


def _is_torn_marker(raw: bytes) -> bool:
    try:
        return bool(json.loads(raw) == _TORN_MARKER)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def _read_header(data: dict[str, Any], session_id: str, where: str) -> str:
    check_keys(data, frozenset({"type", "version", "session_id", "cwd"}), where)
    version = data.get("version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise HistoryError(f"{where}: unsupported history version {version!r}")
    if data.get("session_id") != session_id:
        raise HistoryError(f"{where}: the header names another session")
    cwd: str = read_field(data, "cwd", str, where, "")
    return cwd


def _pending_record(texts: Sequence[str]) -> dict[str, Any]:
    return {"type": "pending_input", "texts": list(texts)}


def _read_pending(data: dict[str, Any], where: str) -> tuple[str, ...]:
    check_keys(data, frozenset({"type", "texts"}), where)
    texts = data.get("texts")
    if not isinstance(texts, list) or not all(type(t) is str for t in texts):
        raise HistoryError(f"{where}: texts must be a list of strings")
    return tuple(texts)
