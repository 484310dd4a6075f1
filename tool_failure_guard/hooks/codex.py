"""What Codex CLI (0.169.0) hook events mean to the guard: a reminder one request late, no stop.

The Codex CLI has no failure event and no batch event, and what its hooks
carry is not enough on its own (observed with ``codex exec``, ``docs/hooks-clis.md``):

- ``PostToolUse`` fires per call with the output text only (``exit 3`` with no
  output reads ``""``).  By then the rollout (``transcript_path``) holds every
  ``function_call`` of the model response, but no result of the batch yet: the
  hook reads the response's call ids there (the batch's membership) and keeps
  them open;
- the next ``PreToolUse`` of a call outside that membership (a later
  response), or ``Stop``, means the batch has settled and its results are in
  the rollout (the completed item's ``exit_code``/``status``, else the output
  text): :mod:`tool_failure_guard.agent_outcomes.codex` types them, and the
  core reduces the batch;
- the reminder is answered as that ``PreToolUse``'s ``additionalContext``:
  Codex sends it as a ``developer`` message in the request after that call's
  batch, **one request later** than the seed; nothing a hook answers ends a
  turn, so ``enforce`` is run as ``warn`` (its telemetry says ``warn``).

``UserPromptSubmit`` (one per prompt turn, ``turn_id``) starts a fresh guard.
The rollout is read from its end, at most :data:`MAX_ROLLOUT_TAIL` bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from tool_failure_guard.hooks.events import Handled
from tool_failure_guard.hooks.payload import PayloadError, text_field
from tool_failure_guard.hooks.prompt import MAX_CALLS_PER_BATCH, PromptSession

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

    from tool_failure_guard.agent_outcomes.claude_code import Outcome

NAME: Final = "codex"
ROUTE: Final = "codex_hook"
EVENTS: Final = ("UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
#: ``Stop`` also settles the turn's last batch, but only telemetry reads that: installed
#: with ``--telemetry`` only.
TELEMETRY_EVENTS: Final = ("Stop",)
TOOL_EVENTS: Final = ("PreToolUse", "PostToolUse")
#: ``user`` is ``$CODEX_HOME/hooks.json`` (default ``~/.codex``); a hook there needs trust.
SCOPES: Final = {"user": "~/.codex/hooks.json"}
#: The most bytes read from the end of the rollout (16 MiB).
MAX_ROLLOUT_TAIL: Final = 16 * 1024 * 1024
_MAX_NAME: Final = 512
_NOTHING: Final = Handled()


def _rollout_items(payload: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The rollout's recent lines (``transcript_path``) as (line type, payload)."""
    path = Path(text_field(payload, "transcript_path", limit=4096))
    if not path.is_absolute():
        raise PayloadError("transcript_path must be an absolute path")
    with path.open("rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        stream.seek(max(0, size - MAX_ROLLOUT_TAIL))
        data = stream.read(MAX_ROLLOUT_TAIL)
    lines = data.split(b"\n")
    if size > MAX_ROLLOUT_TAIL:
        lines = lines[1:]  # a torn first line
    items = []
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("payload"), dict):
            items.append((str(value.get("type")), value["payload"]))
    return items


_AUTHORED: Final = frozenset({"function_call", "custom_tool_call", "local_shell_call", "reasoning"})


def batch_of(items: list[tuple[str, dict[str, Any]]], call_id: str) -> list[tuple[str, str]]:
    """(call id, tool) of every ``function_call`` of the model response holding ``call_id``.

    A response is a run of model-authored items (its text, reasoning and calls);
    the calls' outputs or the next user message end it.
    """
    found: list[tuple[str, str]] = []
    run: list[tuple[str, str]] = []
    in_response = False
    for line_type, item in items:
        if line_type != "response_item":
            continue
        kind = item.get("type")
        authored = kind in _AUTHORED or (kind == "message" and item.get("role") == "assistant")
        if authored and not in_response:
            run = []
        in_response = authored
        if kind == "function_call":
            run.append((str(item.get("call_id")), str(item.get("name"))))
            if run[-1][0] == call_id:
                found = run
    return found


def _outcome(items: list[tuple[str, dict[str, Any]]], call_id: str) -> Outcome:
    """The call's result as the rollout records it (the completed item wins over the text)."""
    from tool_failure_guard.agent_outcomes import codex as rules
    from tool_failure_guard.agent_outcomes.claude_code import Outcome

    completed: Any = None
    output: Any = None
    for _, item in items:
        inner = item.get("item")
        if item.get("type") == "item_completed" and isinstance(inner, dict):
            if inner.get("id") == call_id:
                completed = inner
        elif item.get("type") == "function_call_output" and item.get("call_id") == call_id:
            output = item.get("output")
    found = rules.from_item(completed) if isinstance(completed, dict) else None
    if found is None:
        found = rules.from_output(output) if output is not None else rules.NO_RESULT
    status, execution, error_type, heuristic = found
    return Outcome(
        status=status, execution_status=execution, error_type=error_type, heuristic=heuristic
    )


def _settle(payload: Mapping[str, Any], session: PromptSession, event: str) -> Handled:
    from tool_failure_guard.core import Continue, FunctionCall
    from tool_failure_guard.hooks.claude_code import outcome_of, reminder_answer

    items = _rollout_items(payload)
    pending, session.pending = session.pending, {}
    outcomes = [
        outcome_of(FunctionCall(call_id=call_id, name=str(record[0])), _outcome(items, call_id))
        for call_id, record in pending.items()
    ]
    settled = session.settle(outcomes)
    action = settled.action
    if isinstance(action, Continue) and action.system_texts and event == "PreToolUse":
        return Handled(answer=reminder_answer(event, action.system_texts), settled=settled)
    return Handled(settled=settled)


def handle(payload: Mapping[str, Any], session: PromptSession) -> Handled:
    """The meaning of one Codex CLI hook event for ``session`` (updated in place)."""
    if session.mode == "enforce":
        session.mode = "warn"  # no hook answer ends a Codex turn: never a stop to latch
    event = payload.get("hook_event_name")
    turn = text_field(payload, "turn_id", limit=_MAX_NAME)
    if event == "UserPromptSubmit":
        session.new_prompt(turn)
        return _NOTHING
    session.enter_prompt(turn)
    if event == "PostToolUse":
        call_id = text_field(payload, "tool_use_id", limit=_MAX_NAME)
        if call_id in session.pending:
            return _NOTHING
        members = batch_of(_rollout_items(payload), call_id) or [
            (call_id, text_field(payload, "tool_name", limit=_MAX_NAME))
        ]
        if len(members) > MAX_CALLS_PER_BATCH:
            raise PayloadError(f"a batch of more than {MAX_CALLS_PER_BATCH} calls")
        for member, tool in members:  # the batch stays open until a later call or Stop
            session.record(member[:_MAX_NAME], [tool[:_MAX_NAME]])
        return _NOTHING
    if not session.pending:
        return _NOTHING
    if event == "PreToolUse":
        call_id = text_field(payload, "tool_use_id", limit=_MAX_NAME)
        if call_id in session.pending:
            return _NOTHING  # a call of the open batch
        return _settle(payload, session, event)
    if event == "Stop":
        return Handled(settled=_settle(payload, session, event).settled, prompt_ended="end_turn")
    return _NOTHING
