"""Conversation history and its append-only persistence (one JSON Lines file per session).

A session's history is a list of :class:`Message` values.  Every message is
appended to ``<state dir>/sessions/<session id>.jsonl`` (opened, written,
flushed and fsync'ed per message) *before* the session acts on it, so that a
``session/load`` after a reconnect or an agent restart replays exactly what
happened -- including the stop message -- and so that a write failure is seen
at the moment it happens.  The file is never rewritten: lines are only
appended.  The first line is a header naming the session and its directory.

Only the conversation is persisted.  The guard's streak deliberately is not: a
loaded session starts its next prompt with a fresh guard.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

#: Environment variable naming the state directory (``--state-dir`` wins).
STATE_DIR_ENV_VAR = "TOOL_FAILURE_GUARD_STATE_DIR"
FORMAT_VERSION = 1
#: The record appended after a torn line (a crash mid-write) before the next record.
_TORN_MARKER = {"type": "torn_line"}

PartKind = Literal[
    "text",  # user prompt text, or the model's own text
    "function_call",  # a call of a model turn
    "function_response",  # a settled call's result, sent back to the model
    "system",  # fixed system context (the reminder, a todo reminder)
    "notice",  # system context that was also shown to the user (a stop message)
    "queued_input",  # mid-turn user input drained between batches
]
MessageKind = Literal["prompt", "model", "tool_results", "continuation"]

_PART_KINDS = frozenset(PartKind.__args__)  # type: ignore[attr-defined]
_MESSAGE_KINDS = frozenset(MessageKind.__args__)  # type: ignore[attr-defined]
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


class HistoryError(Exception):
    """A session history could not be read or written."""


class HistoryWriteError(HistoryError):
    """Appending to the history failed: nothing may pretend it was recorded."""


@attrs.frozen(kw_only=True)
class Part:
    kind: PartKind
    text: str = ""
    call_id: str = ""
    name: str = ""  #: the tool name the model used
    title: str = ""  #: the title shown to the client for a function call
    tool_kind: str = ""  #: the ACP tool kind for a function call
    args: Mapping[str, Any] = attrs.field(factory=dict, eq=False, hash=False)
    status: str = ""  #: terminal status of a function response
    error_type: str | None = None  #: terminal error type of a function response
    duplicate: bool = False  #: a provider-duplicate response (never executed, never shown)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        for field in ("text", "call_id", "name", "title", "tool_kind", "status"):
            value = getattr(self, field)
            if value:
                data[field] = value
        if self.args:
            data["args"] = dict(self.args)
        if self.error_type is not None:
            data["error_type"] = self.error_type
        if self.duplicate:
            data["duplicate"] = True
        return data

    @classmethod
    def from_json(cls, data: Any, where: str) -> Part:
        if not isinstance(data, dict):
            raise HistoryError(f"{where}: a part must be an object")
        kind = data.get("kind")
        if kind not in _PART_KINDS:
            raise HistoryError(f"{where}: unknown part kind {kind!r}")
        try:
            return cls(
                kind=kind,  # type: ignore[arg-type]  # checked against _PART_KINDS above
                text=str(data.get("text", "")),
                call_id=str(data.get("call_id", "")),
                name=str(data.get("name", "")),
                title=str(data.get("title", "")),
                tool_kind=str(data.get("tool_kind", "")),
                args=dict(data.get("args", {})),
                status=str(data.get("status", "")),
                error_type=data.get("error_type"),
                duplicate=bool(data.get("duplicate", False)),
            )
        except (TypeError, ValueError) as exc:
            raise HistoryError(f"{where}: {exc}") from exc


@attrs.frozen(kw_only=True)
class Message:
    role: Literal["user", "model"]
    kind: MessageKind
    parts: tuple[Part, ...]
    prompt_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "message",
            "role": self.role,
            "kind": self.kind,
            "prompt_id": self.prompt_id,
            "parts": [part.to_json() for part in self.parts],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> Message:
        role = data.get("role")
        kind = data.get("kind")
        parts = data.get("parts")
        if role not in ("user", "model"):
            raise HistoryError(f"{where}: role must be user or model, got {role!r}")
        if kind not in _MESSAGE_KINDS:
            raise HistoryError(f"{where}: unknown message kind {kind!r}")
        if not isinstance(parts, list):
            raise HistoryError(f"{where}: parts must be a list")
        return cls(
            role=role,
            kind=kind,  # type: ignore[arg-type]  # checked against _MESSAGE_KINDS above
            prompt_id=str(data.get("prompt_id", "")),
            parts=tuple(Part.from_json(p, f"{where} part {i}") for i, p in enumerate(parts)),
        )

    def texts(self, kind: PartKind) -> list[str]:
        return [part.text for part in self.parts if part.kind == kind]


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
    """The append-only JSON Lines files of all sessions under one state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    def path(self, session_id: str) -> Path:
        return self.state_dir / "sessions" / f"{check_session_id(session_id)}.jsonl"

    def exists(self, session_id: str) -> bool:
        return self.path(session_id).is_file()

    def create(self, session_id: str, cwd: str) -> None:
        path = self.path(session_id)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryWriteError(f"cannot create {path.parent}: {exc}") from exc
        header = {"type": "session", "version": FORMAT_VERSION, "session_id": session_id}
        header["cwd"] = cwd
        self._append_line(path, header)

    def append(self, session_id: str, message: Message) -> None:
        self._append_line(self.path(session_id), message.to_json())

    @staticmethod
    def _append_line(path: Path, data: Mapping[str, Any]) -> None:
        line = json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            with path.open("a+b") as handle:
                if handle.tell() > 0:
                    handle.seek(-1, os.SEEK_END)
                    if handle.read(1) != b"\n":
                        # The previous write was torn (a crash mid-line): end that line
                        # and mark it, so the loader skips it instead of failing.
                        line = "\n" + json.dumps(_TORN_MARKER) + "\n" + line
                handle.write(line.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise HistoryWriteError(f"cannot append to {path}: {exc}") from exc

    def load(self, session_id: str) -> tuple[str, list[Message]]:
        """Return the recorded working directory and messages of ``session_id``."""
        path = self.path(session_id)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise HistoryError(f"no history for session {session_id}") from None
        except OSError as exc:
            raise HistoryError(f"cannot read {path}: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise HistoryError(f"{path}: not UTF-8 text ({exc.reason})") from exc
        cwd = ""
        messages: list[Message] = []
        for number, data in _parse_lines(lines, path):
            where = f"{path}:{number}"
            if data.get("type") == "session":
                cwd = str(data.get("cwd", ""))
            elif data.get("type") == "message":
                messages.append(Message.from_json(data, where))
            else:
                raise HistoryError(f"{where}: unknown record type {data.get('type')!r}")
        return cwd, messages


def _parse_lines(lines: list[str], path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            torn = number == len(lines) or _is_torn_marker(lines[number])
            if torn:  # a torn line (crash mid-write): the record was never complete
                continue
            raise HistoryError(f"{path}:{number}: not JSON: {exc.msg}") from exc
        except RecursionError:
            raise HistoryError(f"{path}:{number}: JSON nested too deeply") from None
        if data == _TORN_MARKER:
            continue
        if not isinstance(data, dict):
            raise HistoryError(f"{path}:{number}: a record must be an object")
        yield number, data


def _is_torn_marker(line: str) -> bool:
    try:
        return bool(json.loads(line) == _TORN_MARKER)
    except json.JSONDecodeError:
        return False


def answered_call_ids(messages: list[Message]) -> set[str]:
    """Call ids that already have a function response in ``messages``."""
    return {
        part.call_id
        for message in messages
        for part in message.parts
        if part.kind == "function_response"
    }
