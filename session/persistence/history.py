"""Conversation history and its append-only persistence (one JSON Lines file per session).

A session's history is a list of :class:`Message` values.  Every message is
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
:func:`assemble` gives every function call exactly one response.

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
from typing import Any, Literal

import attrs

from tool_failure_guard.session.persistence.private_files import (
    append_binary,
    append_text,
    private_directory,
)

#: Environment variable naming the state directory (``--state-dir`` wins).
STATE_DIR_ENV_VAR = "TOOL_FAILURE_GUARD_STATE_DIR"
FORMAT_VERSION = 2
#: Versions this loader reads (version 1 files are a subset of version 2).
READABLE_VERSIONS = frozenset({1, 2})
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
_log = logging.getLogger("session.history")
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


class HistoryError(Exception):
    """A session history could not be read or written."""


class HistoryWriteError(HistoryError):
    """Appending to the history failed: nothing may pretend it was recorded."""


#: The ACP tool kinds a function call may be shown as.
TOOL_KINDS = frozenset(
    {
        "read",
        "edit",
        "delete",
        "move",
        "search",
        "execute",
        "think",
        "fetch",
        "switch_mode",
        "other",
    }
)
#: Terminal statuses of a function response (the outcome contract's terminal axis).
TERMINAL_STATUSES = frozenset({"success", "error", "cancelled"})
#: The terminal error type of a response synthesized on load for a call with no outcome.
INTERRUPTED = "interrupted"
INTERRUPTED_TEXT = (
    "The agent stopped before this call's outcome was recorded; "
    "the call may or may not have taken effect."
)

#: The keys each part kind may carry (``kind`` always).
_PART_KEYS: dict[str, frozenset[str]] = {
    "text": frozenset({"text"}),
    "function_call": frozenset({"call_id", "name", "title", "tool_kind", "args", "duplicate"}),
    "function_response": frozenset(
        {"call_id", "name", "status", "error_type", "text", "duplicate"}
    ),
    "system": frozenset({"text"}),
    "notice": frozenset({"text"}),
    "queued_input": frozenset({"text"}),
}
#: The part kinds each message kind may hold.
_MESSAGE_PARTS: dict[str, frozenset[str]] = {
    "prompt": frozenset({"text", "queued_input"}),
    "model": frozenset({"text", "function_call"}),
    "tool_results": frozenset({"function_response", "system", "notice", "queued_input"}),
    "continuation": frozenset({"system"}),
}


def _field(data: Mapping[str, Any], key: str, kind: type, where: str, default: Any) -> Any:
    """``data[key]`` if it has exactly the type ``kind`` (bool is not an int), else an error."""
    if key not in data:
        return default
    value = data[key]
    if type(value) is not kind:
        raise HistoryError(f"{where}: {key} must be {_TYPE_NAMES[kind]}, got {_json_type(value)}")
    return value


_TYPE_NAMES: dict[type, str] = {
    str: "a string",
    bool: "true or false",
    dict: "an object",
    list: "a list",
    int: "an integer",
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {str: "string", bool: "boolean", dict: "object", list: "list", int: "integer"}.get(
        type(value), type(value).__name__
    )


def _check_keys(data: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise HistoryError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")


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
        """Read one part strictly: every key known, every value of its exact type and enum."""
        if not isinstance(data, dict):
            raise HistoryError(f"{where}: a part must be an object")
        kind = data.get("kind")
        if not isinstance(kind, str) or kind not in _PART_KINDS:
            raise HistoryError(f"{where}: unknown part kind {kind!r}")
        _check_keys(data, _PART_KEYS[kind] | {"kind"}, where)
        error_type = data.get("error_type")
        if error_type is not None and type(error_type) is not str:
            raise HistoryError(
                f"{where}: error_type must be a string or null, got {_json_type(error_type)}"
            )
        part = cls(
            kind=kind,  # type: ignore[arg-type]  # checked against _PART_KINDS above
            text=_field(data, "text", str, where, ""),
            call_id=_field(data, "call_id", str, where, ""),
            name=_field(data, "name", str, where, ""),
            title=_field(data, "title", str, where, ""),
            tool_kind=_field(data, "tool_kind", str, where, ""),
            args=_field(data, "args", dict, where, {}),
            status=_field(data, "status", str, where, ""),
            error_type=error_type,
            duplicate=_field(data, "duplicate", bool, where, False),
        )
        if kind in ("function_call", "function_response") and not part.call_id:
            raise HistoryError(f"{where}: a {kind} needs a call_id")
        if kind == "function_call" and part.tool_kind and part.tool_kind not in TOOL_KINDS:
            raise HistoryError(f"{where}: unknown tool_kind {part.tool_kind!r}")
        if kind == "function_response" and part.status not in TERMINAL_STATUSES:
            raise HistoryError(
                f"{where}: status must be one of {', '.join(sorted(TERMINAL_STATUSES))}, "
                f"got {part.status!r}"
            )
        return part


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
        _check_keys(data, frozenset({"type", "role", "kind", "prompt_id", "parts"}), where)
        role = data.get("role")
        kind = data.get("kind")
        parts = data.get("parts")
        if not isinstance(kind, str) or kind not in _MESSAGE_KINDS:
            raise HistoryError(f"{where}: unknown message kind {kind!r}")
        expected_role = "model" if kind == "model" else "user"
        if role != expected_role:
            raise HistoryError(f"{where}: a {kind} message has role {expected_role}, got {role!r}")
        if not isinstance(parts, list):
            raise HistoryError(f"{where}: parts must be a list")
        prompt_id = _field(data, "prompt_id", str, where, "")
        read = tuple(Part.from_json(p, f"{where} part {i}") for i, p in enumerate(parts))
        for index, part in enumerate(read):
            if part.kind not in _MESSAGE_PARTS[kind]:
                raise HistoryError(
                    f"{where} part {index}: a {kind} message cannot hold a {part.kind} part"
                )
        return cls(
            role=role,
            kind=kind,  # type: ignore[arg-type]  # checked against _MESSAGE_KINDS above
            prompt_id=prompt_id,
            parts=read,
        )

    def texts(self, kind: PartKind) -> list[str]:
        return [part.text for part in self.parts if part.kind == kind]


@attrs.frozen(kw_only=True)
class SettledCall:
    """One call's function response, persisted the moment the call settled.

    The batch's ``tool_results`` message (written after the drain) repeats the
    response and is authoritative; this record only matters when that message
    never got written (a crash or a disconnect mid-batch).
    """

    prompt_id: str
    part: Part

    def to_json(self) -> dict[str, Any]:
        return {"type": "call_settled", "prompt_id": self.prompt_id, "part": self.part.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> SettledCall:
        _check_keys(data, frozenset({"type", "prompt_id", "part"}), where)
        part = Part.from_json(data.get("part"), f"{where} part")
        if part.kind != "function_response":
            raise HistoryError(f"{where}: a call_settled record holds a function_response")
        return cls(prompt_id=_field(data, "prompt_id", str, where, ""), part=part)


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
    _check_keys(data, frozenset({"type", "version", "session_id", "cwd"}), where)
    version = data.get("version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise HistoryError(f"{where}: unsupported history version {version!r}")
    if data.get("session_id") != session_id:
        raise HistoryError(f"{where}: the header names another session")
    cwd: str = _field(data, "cwd", str, where, "")
    return cwd


def _pending_record(texts: Sequence[str]) -> dict[str, Any]:
    return {"type": "pending_input", "texts": list(texts)}


def _read_pending(data: dict[str, Any], where: str) -> tuple[str, ...]:
    _check_keys(data, frozenset({"type", "texts"}), where)
    texts = data.get("texts")
    if not isinstance(texts, list) or not all(type(t) is str for t in texts):
        raise HistoryError(f"{where}: texts must be a list of strings")
    return tuple(texts)


def interrupted_response(call: Part) -> Part:
    """The response synthesized for ``call`` when no outcome of it was persisted."""
    return Part(
        kind="function_response",
        call_id=call.call_id,
        name=call.name,
        status="cancelled",
        error_type=INTERRUPTED,
        text=INTERRUPTED_TEXT,
        duplicate=call.duplicate,
    )


def assemble(records: Sequence[Message | SettledCall]) -> tuple[list[Message], list[str]]:
    """The model-facing history of persisted ``records``, and the calls answered ``interrupted``.

    Every model message's function calls get exactly one function response, in
    the model's call order, in the user message that follows it: the batch's
    ``tool_results`` response if it was written, else the response persisted
    when the call settled (``call_settled``), else a synthesized ``cancelled``
    / ``interrupted`` one.  A response for no open call (its model message was
    lost) is dropped, so the history stays a valid call/response sequence.
    """
    messages: list[Message] = []
    interrupted: list[str] = []
    open_calls: list[Part] = []
    open_prompt = ""
    settled: dict[str, Part] = {}

    def answers(given: dict[str, Part]) -> list[Part]:
        parts = []
        for call in open_calls:
            part = given.get(call.call_id) or settled.get(call.call_id)
            if part is None:
                part = interrupted_response(call)
                interrupted.append(call.call_id)
            parts.append(part)
        return parts

    for record in records:
        if isinstance(record, SettledCall):
            if any(call.call_id == record.part.call_id for call in open_calls):
                settled[record.part.call_id] = record.part
            else:
                _log.warning(
                    "history: an outcome for no open call %s was ignored", record.part.call_id
                )
            continue
        message = record
        if open_calls and message.kind == "tool_results":
            given = {p.call_id: p for p in message.parts if p.kind == "function_response"}
            stray = set(given) - {call.call_id for call in open_calls}
            if stray:
                _log.warning("history: responses for no open call were dropped: %s", sorted(stray))
            rest = [p for p in message.parts if p.kind != "function_response"]
            message = attrs.evolve(message, parts=(*answers(given), *rest))
            open_calls, settled = [], {}
        else:
            if open_calls:
                closing = Message(
                    role="user",
                    kind="tool_results",
                    prompt_id=open_prompt,
                    parts=tuple(answers({})),
                )
                messages.append(closing)
                open_calls, settled = [], {}
            if message.kind == "tool_results":
                stray_parts = [p for p in message.parts if p.kind == "function_response"]
                if stray_parts:
                    _log.warning("history: responses without their calls were dropped")
                    message = attrs.evolve(
                        message,
                        parts=tuple(p for p in message.parts if p.kind != "function_response"),
                    )
        messages.append(message)
        if message.kind == "model":
            open_calls = [p for p in message.parts if p.kind == "function_call"]
            open_prompt = message.prompt_id
    if open_calls:
        messages.append(
            Message(
                role="user", kind="tool_results", prompt_id=open_prompt, parts=tuple(answers({}))
            )
        )
    return messages, interrupted


def open_calls(messages: Sequence[Message]) -> bool:
    """Whether the last model message's calls are still unanswered."""
    for message in reversed(messages):
        if message.kind == "tool_results":
            return False
        if message.kind == "model":
            return any(p.kind == "function_call" for p in message.parts)
    return False


def answered_call_ids(messages: list[Message]) -> set[str]:
    """Call ids that already have a function response in ``messages``."""
    return {
        part.call_id
        for message in messages
        for part in message.parts
        if part.kind == "function_response"
    }


def function_calls(
    messages: Sequence[Message],
) -> tuple[list[tuple[str, str, Mapping[str, Any]]], list[tuple[str, str, Mapping[str, Any]]]]:
    """The function calls of ``messages`` as (id, name, arguments): answered ones, open ones.

    A call is answered when the ``tool_results`` message after its model
    message holds a response with its id; the last model message's calls are
    open while no ``tool_results`` message follows it.
    """
    answered: list[tuple[str, str, Mapping[str, Any]]] = []
    waiting: list[tuple[str, str, Mapping[str, Any]]] = []
    for message in messages:
        if message.kind == "model":
            waiting = [
                (p.call_id, p.name, p.args) for p in message.parts if p.kind == "function_call"
            ]
        elif message.kind == "tool_results" and waiting:
            ids = {p.call_id for p in message.parts if p.kind == "function_response"}
            answered.extend(call for call in waiting if call[0] in ids)
            waiting = []
    return answered, waiting
