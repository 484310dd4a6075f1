"""The values a session history is made of, and their strict JSON form.

A history is a list of :class:`Message` values, each holding :class:`Part`
values; :class:`SettledCall` is one call's outcome persisted the moment it
settled.  ``from_json`` reads strictly: every key known, every value of its
exact JSON type and enum, a part kind only where its message kind allows it,
so a corrupt or hand-edited line is an error naming the line and the key, never
a silently different conversation.  Persistence is
:mod:`tool_failure_guard.session.persistence.history`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

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


class HistoryError(Exception):
    """A session history could not be read or written."""


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


def read_field(data: Mapping[str, Any], key: str, kind: type, where: str, default: Any) -> Any:
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


def check_keys(data: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
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
        check_keys(data, _PART_KEYS[kind] | {"kind"}, where)
        error_type = data.get("error_type")
        if error_type is not None and type(error_type) is not str:
            raise HistoryError(
                f"{where}: error_type must be a string or null, got {_json_type(error_type)}"
            )
        part = cls(
            kind=kind,  # type: ignore[arg-type]  # checked against _PART_KINDS above
            text=read_field(data, "text", str, where, ""),
            call_id=read_field(data, "call_id", str, where, ""),
            name=read_field(data, "name", str, where, ""),
            title=read_field(data, "title", str, where, ""),
            tool_kind=read_field(data, "tool_kind", str, where, ""),
            args=read_field(data, "args", dict, where, {}),
            status=read_field(data, "status", str, where, ""),
            error_type=error_type,
            duplicate=read_field(data, "duplicate", bool, where, False),
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
        check_keys(data, frozenset({"type", "role", "kind", "prompt_id", "parts"}), where)
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
        prompt_id = read_field(data, "prompt_id", str, where, "")
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
        check_keys(data, frozenset({"type", "prompt_id", "part"}), where)
        part = Part.from_json(data.get("part"), f"{where} part")
        if part.kind != "function_response":
            raise HistoryError(f"{where}: a call_settled record holds a function_response")
        return cls(prompt_id=read_field(data, "prompt_id", str, where, ""), part=part)
