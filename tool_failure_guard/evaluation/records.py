"""An episode's record, read from the agent's own telemetry file and session history.

The telemetry (OTLP JSON lines of ``--telemetry file:PATH``) gives the prompt
outcome (model turns, tool calls, tokens, wall time, stop reason, loop type),
the guard's decisions per batch and each settled call's statuses; the history
gives what telemetry never carries: tool names, arguments and result text.
The two are joined per batch (the n-th model turn with calls is batch n) and
per call (its position in the turn).  Records are plain JSON values, one line
each in ``episodes.jsonl``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tool_failure_guard.evaluation.tasks import Task
from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.persistence.messages import Message
from tool_failure_guard.telemetry.names import (
    EARLIER_EVENT_NAMES,
    EARLIER_VALUES,
    GUARD_LOG_EVENT,
    PROMPT_EVENT,
    TOOL_CALL_EVENT,
)

#: Characters of arguments and of error text kept per call (Goose compares 100).
ARGS_CHARS = 200
ERROR_CHARS = 120
FINAL_TEXT_CHARS = 400
#: Decisions that put the reminder into the next request (warn and enforce).
REMINDED = frozenset({"warned"})
#: Decisions that count as a reminder or stop whether or not it was acted on.  After a
#: ``would_warn`` (shadow: no reminder sent) the next batch is the baseline of what the
#: model does anyway.
WOULD_REMIND = frozenset({"warned", "would_warn"})
WOULD_STOP = frozenset({"stopped", "would_stop"})


class RecordError(ValueError):
    """An episode's files cannot be read into a record; the message names the file."""


def _value(any_value: Mapping[str, Any]) -> Any:
    if "stringValue" in any_value:
        return any_value["stringValue"]
    if "intValue" in any_value:
        return int(any_value["intValue"])
    if "boolValue" in any_value:
        return bool(any_value["boolValue"])
    if "doubleValue" in any_value:
        return float(any_value["doubleValue"])
    return None


def _current(key: str, value: Any) -> Any:
    """An earlier build's value of attribute ``key`` as the value written now."""
    earlier = EARLIER_VALUES.get(key)
    if earlier is None or not isinstance(value, str):
        return value
    return earlier.get(value, value)


def telemetry_events(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(event name, attributes) of every log record in an OTLP JSON lines file, in order.

    An earlier build's name is read as the name written now (``EARLIER_EVENT_NAMES``), and
    its values likewise (``EARLIER_VALUES``).
    """
    events: list[tuple[str, dict[str, Any]]] = []
    if not path.exists():
        return events
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            document = json.loads(line)
        except json.JSONDecodeError as error:
            raise RecordError(f"{path}:{number}: not JSON ({error.msg})") from None
        for resource in document.get("resourceLogs", []):
            for scope in resource.get("scopeLogs", []):
                for record in scope.get("logRecords", []):
                    attributes = {
                        item["key"]: _current(item["key"], _value(item.get("value", {})))
                        for item in record.get("attributes", [])
                    }
                    name = str(record.get("eventName", ""))
                    events.append((EARLIER_EVENT_NAMES.get(name, name), attributes))
    return events


def _batches(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Per model turn with calls: its calls (name, args) and their responses."""
    batches: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if message.kind != "model":
            continue
        calls = [p for p in message.parts if p.kind == "function_call"]
        if not calls:
            continue
        responses: dict[str, Any] = {}
        system: list[str] = []
        if index + 1 < len(messages) and messages[index + 1].kind == "tool_results":
            following = messages[index + 1]
            responses = {p.call_id: p for p in following.parts if p.kind == "function_response"}
            system = [p.kind for p in following.parts if p.kind in ("system", "notice")]
        entries = []
        for call in calls:
            response = responses.get(call.call_id)
            status = response.status if response is not None else "missing"
            error = (response.text if response is not None else "")[:ERROR_CHARS]
            entries.append(
                {
                    "name": call.name,
                    "args": json.dumps(dict(call.args), sort_keys=True)[:ARGS_CHARS],
                    "duplicate": call.duplicate,
                    "terminal_status": status,
                    "error_text": error if status == "error" else "",
                }
            )
        batches.append({"calls": entries, "context_added": system})
    return batches


def _join_calls(batches: list[dict[str, Any]], calls: Iterable[Mapping[str, Any]]) -> None:
    """Add each settled call's execution statuses (telemetry) to its history entry."""
    for settled in calls:
        batch = int(settled.get("batch_ordinal", 0)) - 1
        ordinal = int(settled.get("call_ordinal", -1))
        if 0 <= batch < len(batches) and 0 <= ordinal < len(batches[batch]["calls"]):
            entry = batches[batch]["calls"][ordinal]
            entry["execution_status"] = settled.get("execution_status")
            entry["execution_error_type"] = settled.get("execution_error_type")
            entry["tool_type"] = settled.get("tool_type")


def _final_text(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if message.kind == "model":
            text = " ".join(t for t in message.texts("text") if t.strip())
            if text.strip():
                return text.strip()[:FINAL_TEXT_CHARS]
    return ""


def follow_up(batches: Sequence[Mapping[str, Any]], reminded: int) -> str:
    """After the reminder that followed batch ``reminded`` (0-based): what the model did.

    ``no_tool_calls`` (it made none), ``another_tool`` (some call used another tool),
    ``another_key`` (same tool, but not all failing the same way), or ``repeated``.
    """
    failing = batches[reminded]["calls"]
    key = {(c["name"], c.get("execution_error_type")) for c in failing if not c["duplicate"]}
    tools = {name for name, _ in key}
    if reminded + 1 >= len(batches):
        return "no_tool_calls"
    following = [c for c in batches[reminded + 1]["calls"] if not c["duplicate"]]
    if any(c["name"] not in tools for c in following):
        return "another_tool"
    outcome = {(c["name"], c.get("execution_error_type")) for c in following}
    if outcome - key or any(c["terminal_status"] != "error" for c in following):
        return "another_key"
    return "repeated"


def episode_record(
    *,
    task: Task,
    arm: str,
    seed: int,
    episode: str,
    workspace: Path,
    telemetry: Path,
    state: Path,
    session_id: str,
    acp_stop: str,
    wall_s: float,
    meta: Mapping[str, Any],
    prompt_cache: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    # this session's records only: the prompt id is "<session id>########<n>"
    events = [
        (name, attributes)
        for name, attributes in telemetry_events(telemetry)
        if str(attributes.get("prompt_id", "")).split("#", 1)[0] == session_id
    ]
    prompts = [a for name, a in events if name == PROMPT_EVENT]
    guard = [a for name, a in events if name == GUARD_LOG_EVENT]
    settled = [a for name, a in events if name == TOOL_CALL_EVENT]
    try:
        _cwd, messages = HistoryStore(state).load(session_id)
    except Exception as error:  # no history: the record says so rather than guessing
        raise RecordError(f"{state}: session {session_id} history unreadable: {error}") from error
    batches = _batches(messages)
    _join_calls(batches, settled)
    for batch in batches:
        batch["decision"] = "none"
    for decision in guard:
        ordinal = int(decision.get("batch_ordinal", 0)) - 1
        if 0 <= ordinal < len(batches):
            batches[ordinal]["decision"] = decision["decision"]
    prompt = prompts[-1] if prompts else {}
    decisions = [b["decision"] for b in batches]
    follow_ups = [follow_up(batches, i) for i, d in enumerate(decisions) if d in WOULD_REMIND]
    final_text = _final_text(messages)
    return {
        "episode": episode,
        "task": task.name,
        "kind": task.kind,
        "provokes": task.provokes,
        "arm": arm,
        "seed": seed,
        "acp_stop": acp_stop,
        "stop_reason": prompt.get("stop_reason", "missing"),
        "loop_type": prompt.get("loop_type"),
        "model_turns": prompt.get("model_turns"),
        "tool_calls": prompt.get("tool_calls"),
        "batches_settled": prompt.get("batches"),
        "input_tokens": prompt.get("input_tokens"),
        "output_tokens": prompt.get("output_tokens"),
        "agent_wall_s": round(int(prompt.get("wall_time_ms", 0)) / 1000, 3),
        "harness_wall_s": round(wall_s, 3),
        "decisions": decisions,
        "reminders": sum(d in REMINDED for d in decisions),
        "would_remind": sum(d in WOULD_REMIND for d in decisions),
        "would_stop": sum(d in WOULD_STOP for d in decisions),
        "follow_ups": follow_ups,
        "success": task.check(workspace, final_text),
        "final_text": final_text,
        "meta_batches": len(meta.get("batches", [])) if meta else None,
        "batches": batches,
        "prompt_cache": dict(prompt_cache or {"reset": "none"}),
    }


def errored(record: Mapping[str, Any]) -> bool:
    """Whether the episode's prompt failed (the endpoint, the agent or the cache reset).

    Such an episode says nothing about the model or the guard: the report counts
    it apart and a run with one exits non-zero.
    """
    return str(record.get("acp_stop", "")).startswith("error") or (
        record.get("stop_reason") == "error"
    )


def write_records(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, sort_keys=True) + "\n")


def read_records(path: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise RecordError(f"{path}:{number}: not JSON ({error.msg})") from None
        if not isinstance(record, dict) or "episode" not in record:
            raise RecordError(f"{path}:{number}: not an episode record")
        records.append(record)
    return records
