"""``replay``'s input: one JSON line, held to the batch receipt's strict schema.

:func:`parse_batch` parses a line and names what is wrong with it
(:class:`ReplayError`).  :func:`fast_batch` is the per-line fast path: it
checks the common shape with exact type tests and answers None at the first
doubt, so the slow parser always decides what an error says.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import attrs

from tool_failure_guard.guard import (
    BatchReceipt,
    GuardMode,
    InputBoundary,
    Observation,
)


class ReplayError(ValueError):
    """A line of replay input is malformed; the message says what is wrong."""


@attrs.frozen
class ReplayBatch:
    """One parsed input line."""

    prompt: str
    mode: GuardMode | None
    receipt: BatchReceipt
    boundary: InputBoundary


_BATCH_KEYS = {
    "prompt": str,
    "mode": str,
    "complete": bool,
    "hasExternalInput": bool,
    "hasQueuedPrompt": bool,
    "inputReliable": bool,
    "observations": list,
}
_OBSERVATION_KEYS: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "callId": ("call_id", str),
    "terminalStatus": ("terminal_status", str),
    "executionStatus": ("execution_status", (str, type(None))),
    "executionErrorType": ("execution_error_type", (str, type(None))),
    "policyToolName": ("policy_tool_name", (str, type(None))),
    "toolType": ("tool_type", (str, type(None))),
    "providerDuplicate": ("provider_duplicate", bool),
}
_JSON_TYPE_NAMES = {str: "a string", bool: "a boolean", list: "an array"}


def _type_name(expected: type | tuple[type, ...]) -> str:
    if isinstance(expected, tuple):
        return " or ".join("null" if t is type(None) else _JSON_TYPE_NAMES[t] for t in expected)
    return _JSON_TYPE_NAMES[expected]


def _check_keys(where: str, data: dict[str, Any], allowed: Iterable[str]) -> None:
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ReplayError(f"{where}unknown key {unknown[0]!r} (allowed: {', '.join(allowed)})")


def parse_batch(text: str) -> ReplayBatch:
    """Parse one JSON line into a batch; raise :class:`ReplayError` naming the problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReplayError(f"not valid JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise ReplayError("JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise ReplayError(f"expected a JSON object, got {type(data).__name__}")
    _check_keys("", data, _BATCH_KEYS)
    for name in ("prompt", "observations"):
        if name not in data:
            raise ReplayError(f"missing required key {name!r}")
    for name, expected in _BATCH_KEYS.items():
        if name in data and not isinstance(data[name], expected):
            raise ReplayError(f"{name!r} must be {_type_name(expected)}, got {data[name]!r}")
    if not data["prompt"]:
        raise ReplayError("'prompt' must be a non-empty string")
    mode: GuardMode | None = None
    if "mode" in data:
        try:
            mode = GuardMode(data["mode"])
        except ValueError:
            valid = ", ".join(m.value for m in GuardMode)
            raise ReplayError(f"'mode' must be one of {valid}, got {data['mode']!r}") from None
    observations = [
        _parse_observation(index, item) for index, item in enumerate(data["observations"])
    ]
    boundary = InputBoundary(
        has_external_input=data.get("hasExternalInput", False),
        has_queued_prompt=data.get("hasQueuedPrompt", False),
        reliable=data.get("inputReliable", True),
    )
    receipt = BatchReceipt(observations, complete=data.get("complete", True))
    return ReplayBatch(prompt=data["prompt"], mode=mode, receipt=receipt, boundary=boundary)


def _parse_observation(index: int, item: Any) -> Observation:
    where = f"observations[{index}]: "
    if not isinstance(item, dict):
        raise ReplayError(f"{where}expected a JSON object, got {type(item).__name__}")
    _check_keys(where, item, _OBSERVATION_KEYS)
    kwargs: dict[str, Any] = {}
    for wire, (field, expected) in _OBSERVATION_KEYS.items():
        if wire not in item:
            if wire in ("callId", "terminalStatus"):
                raise ReplayError(f"{where}missing required key {wire!r}")
            continue
        if not isinstance(item[wire], expected):
            raise ReplayError(f"{where}{wire!r} must be {_type_name(expected)}, got {item[wire]!r}")
        kwargs[field] = item[wire]
    try:
        return Observation(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ReplayError(f"{where}{_wire_message(str(exc))}") from None


def _wire_message(message: str) -> str:
    """Name fields the way the input spelled them."""
    for wire, (field, _) in _OBSERVATION_KEYS.items():
        message = message.replace(field, wire)
    return message


# -- the per-line fast path ---------------------------------------------------
#
# Most lines are well-formed.  fast_batch checks a line against the same schema
# as parse_batch with exact type tests and set inclusions, and answers None at
# the first doubt; the caller then hands the line to parse_batch, which finds
# the problem and names it.  So the fast path never decides what an error says,
# and a line it accepts is one parse_batch accepts too (the values are still
# built through the guard's validating constructors).

_ABSENT: Any = object()
_BATCH_KEY_SET = frozenset(_BATCH_KEYS)
_OBSERVATION_KEY_SET = frozenset(_OBSERVATION_KEYS)
_MODES: dict[str, GuardMode] = {mode.value: mode for mode in GuardMode}
#: The eight possible boundaries, interned; the quiet one is None (observe's default).
_BOUNDARIES: dict[tuple[bool, bool, bool], InputBoundary | None] = {
    (external, queued, reliable): InputBoundary(
        has_external_input=external, has_queued_prompt=queued, reliable=reliable
    )
    for external in (False, True)
    for queued in (False, True)
    for reliable in (False, True)
}
_BOUNDARIES[False, False, True] = None

FastBatch = tuple[str, GuardMode | None, BatchReceipt, InputBoundary | None]


def fast_batch(text: str) -> FastBatch | None:
    """The batch of a well-formed line; None when anything is off (parse_batch says what)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if type(data) is not dict or not data.keys() <= _BATCH_KEY_SET:
        return None
    prompt = data.get("prompt")
    items = data.get("observations")
    if type(prompt) is not str or not prompt or type(items) is not list:
        return None
    mode: GuardMode | None = None
    named = data.get("mode", _ABSENT)
    if named is not _ABSENT:
        if type(named) is not str or named not in _MODES:
            return None
        mode = _MODES[named]
    complete = data.get("complete", True)
    external = data.get("hasExternalInput", False)
    queued = data.get("hasQueuedPrompt", False)
    reliable = data.get("inputReliable", True)
    if (
        type(complete) is not bool
        or type(external) is not bool
        or type(queued) is not bool
        or type(reliable) is not bool
    ):
        return None
    # Observation's validators hold each value to exactly what parse_batch
    # demands of it (a string, a string or null, a boolean, a known status or
    # tool type); what they refuse goes to parse_batch for its message.
    observations = []
    try:
        for item in items:
            if type(item) is not dict or not item.keys() <= _OBSERVATION_KEY_SET:
                return None
            get = item.get
            observations.append(
                Observation(
                    call_id=get("callId", ""),
                    terminal_status=get("terminalStatus", ""),
                    execution_status=get("executionStatus"),
                    execution_error_type=get("executionErrorType"),
                    policy_tool_name=get("policyToolName"),
                    tool_type=get("toolType"),
                    provider_duplicate=get("providerDuplicate", False),
                )
            )
        receipt = BatchReceipt(observations, complete=complete)
    except (TypeError, ValueError):
        return None
    return prompt, mode, receipt, _BOUNDARIES[external, queued, reliable]
