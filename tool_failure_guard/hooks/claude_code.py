"""What Claude Code's hook events mean to the guard (the command hook and the SDK adapter).

Each event is read against its own agent loop's guard (the main agent's, or a
subagent's by ``agent_id``: :mod:`tool_failure_guard.hooks.loops`).

- ``UserPromptSubmit`` with a new ``prompt_id`` (or none), or an event of another
  ``prompt_id``: a fresh guard.  The same ``prompt_id`` again (a background
  agent's ``<task-notification>``, 2.1.337) is the same prompt.
- ``PostToolUseFailure``: the call ran and failed (or was interrupted): its
  outcome is recorded by ``tool_use_id``, classified by
  :func:`tool_failure_guard.agent_outcomes.claude_code.classify_hook_failure`;
  nothing is answered (Claude Code ignores a stop from this event).
- ``PostToolBatch``: the settled batch, once per model response, after every
  call and its per-call hooks: each ``tool_calls[]`` entry with a recorded
  failure is that failure, any other is refused-before-running or a success
  (:func:`~tool_failure_guard.agent_outcomes.claude_code.classify_batch_entry`);
  the core reduces the batch.  The reminder is answered as the batch's
  ``additionalContext`` (Claude Code puts it in the very next request); the
  enforce stop as ``{"continue": false, "stopReason": ...}`` (no further model
  request; stream-json says ``terminal_reason: "hook_stopped"``).

This module decides what an event means; :mod:`tool_failure_guard.hooks.run`
adds the state file around it, the SDK adapter keeps the session in memory.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from tool_failure_guard.hooks.events import Handled
from tool_failure_guard.hooks.payload import PayloadError, text_field
from tool_failure_guard.hooks.prompt import MAX_CALLS_PER_BATCH, PromptSession

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

    from tool_failure_guard.agent_outcomes.claude_code import Outcome
    from tool_failure_guard.core import CallOutcome, FunctionCall, Stop
    from tool_failure_guard.hooks.replay import Settled

#: The CLI's name on the command line (``tool-failure-guard hook claude-code``).
NAME: Final = "claude-code"
#: The ``route`` of the hook's telemetry (``telemetry.names.HOOK_ROUTES``).
ROUTE: Final = "claude_code_hook"
#: The events the hook is installed for (and the ones :func:`handle` reads); ``Stop`` ends a
#: prompt that was not stopped (its telemetry record).
EVENTS: Final = ("UserPromptSubmit", "PostToolUseFailure", "PostToolBatch", "Stop")
#: The events installed only with ``--telemetry`` (what they give is a telemetry record).
TELEMETRY_EVENTS: Final = ("Stop",)
#: The events whose installed group has ``matcher: "*"`` (every tool).
TOOL_EVENTS: Final = ("PostToolUseFailure", "PostToolBatch")
#: The main loop's events whose ``additionalContext`` reaches its next request: where the
#: notice of a subagent the guard stopped goes (:mod:`tool_failure_guard.hooks.loops`).
NOTICE_EVENTS: Final = ("PostToolBatch", "UserPromptSubmit")
#: The managed (administrator's) settings file, per platform (Claude Code's own paths).
MANAGED_SETTINGS: Final = {
    "darwin": "/Library/Application Support/ClaudeCode/managed-settings.json",
    "linux": "/etc/claude-code/managed-settings.json",
}
#: ``hook install --scope``: the operator's settings files (``managed`` wins over a project's
#: ``disableAllHooks``; ``user`` does not).  ``~`` is the installing user's home.
SCOPES: Final = {
    "managed": MANAGED_SETTINGS["darwin" if sys.platform == "darwin" else "linux"],
    "user": "~/.claude/settings.json",
}
#: The most characters of a tool name or id read from a payload.
_MAX_NAME: Final = 512
#: The most characters of a failure's error text kept until its batch settles.
_MAX_ERROR: Final = 4096
_NOTHING: Final = Handled()


def outcome_of(call: FunctionCall, outcome: Outcome) -> CallOutcome:
    """The core's call outcome for one classified Claude Code result (text dropped)."""
    from tool_failure_guard.core import (
        TOOL_NOT_REGISTERED,
        cancelled_during,
        failed,
        not_started,
        rejected,
        succeeded,
        unknown_tool,
    )

    status, execution, error_type = outcome.status, outcome.execution_status, outcome.error_type
    if status == "cancelled":
        return cancelled_during(call, "") if execution == "cancelled" else rejected(call, "")
    if status == "success":
        return succeeded(call)
    if execution == "not_started":
        if error_type == TOOL_NOT_REGISTERED:
            return unknown_tool(call, "")
        return not_started(call, error_type or "not_started", "")
    return failed(call, error_type or "unknown", "")


def reminder_answer(event: str, texts: tuple[str, ...]) -> dict[str, Any]:
    """The answer that puts ``texts`` into the next request (``additionalContext``)."""
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": "\n\n".join(texts)}}


def stop_answer(stop: Stop) -> dict[str, Any]:
    """The answer that ends the run: no further model request."""
    return {"continue": False, "stopReason": stop.shown_text}


def answered(settled: Settled, event: str) -> Handled:
    """What the event that closed a batch answers: the stop, the reminder, or nothing.

    Claude Code's ``PostToolBatch`` and Qwen Code's ``UserPromptSubmit`` read the same
    answer shapes (``continue: false``; ``additionalContext``)."""
    from tool_failure_guard.core import Continue, Stop

    action = settled.action
    if isinstance(action, Stop):
        return Handled(answer=stop_answer(action), settled=settled, prompt_ended="end_turn")
    if isinstance(action, Continue) and action.system_texts:
        return Handled(answer=reminder_answer(event, action.system_texts), settled=settled)
    return Handled(settled=settled)


def _ids(payload: Mapping[str, Any]) -> tuple[str, str]:
    return (
        text_field(payload, "tool_use_id", limit=_MAX_NAME),
        text_field(payload, "tool_name", limit=_MAX_NAME),
    )


def handle(payload: Mapping[str, Any], session: PromptSession) -> Handled:
    """The meaning of one Claude Code hook event for ``session`` (updated in place)."""
    event = payload.get("hook_event_name")
    prompt_id = payload.get("prompt_id")
    prompt = prompt_id if isinstance(prompt_id, str) and prompt_id else None
    if event == "UserPromptSubmit":
        # the prompt id decides: the same one is the same prompt (2.1.337 hands a background
        # agent's ``<task-notification>`` to the main loop this way, mid-turn); none is new
        if prompt is None or prompt != session.prompt_id:
            session.new_prompt(prompt)
        return _NOTHING
    if event == "PostToolUseFailure":
        # recorded as it came (classified when the batch settles: this event loads no core)
        session.enter_prompt(prompt)
        call_id, tool = _ids(payload)
        error = payload.get("error")
        text = error[:_MAX_ERROR] if isinstance(error, str) else ""
        session.record(call_id, [tool, text, payload.get("is_interrupt") is True])
        return _NOTHING
    if event == "PostToolBatch":
        session.enter_prompt(prompt)
        return _batch(payload, session)
    if event == "Stop" and payload.get("stop_hook_active") is not True:
        # the prompt ended without a stop (Claude Code runs no Stop hook after a hook stop)
        session.enter_prompt(prompt)
        return Handled(prompt_ended="end_turn")
    return _NOTHING


def _batch(payload: Mapping[str, Any], session: PromptSession) -> Handled:
    entries = payload.get("tool_calls")
    if not isinstance(entries, list):
        raise PayloadError("PostToolBatch payload field 'tool_calls' must be a list")
    if len(entries) > MAX_CALLS_PER_BATCH:
        raise PayloadError(
            f"PostToolBatch has {len(entries)} calls, more than the bound {MAX_CALLS_PER_BATCH}"
        )
    if not entries:
        return _NOTHING
    from tool_failure_guard.agent_outcomes.claude_code import (
        classify_batch_entry,
        classify_hook_failure,
        result_text,
    )
    from tool_failure_guard.core import FunctionCall

    outcomes: list[CallOutcome] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise PayloadError("PostToolBatch payload 'tool_calls' entries must be objects")
        call_id, tool = _ids(entry)
        call = FunctionCall(call_id=call_id, name=tool)
        recorded = session.take(call_id)
        if _is_failure(recorded):
            text, interrupted = str(recorded[1]), recorded[2] is True  # type: ignore[index]
            outcome = classify_hook_failure(tool, text, is_interrupt=interrupted)
        else:
            outcome = classify_batch_entry(tool, result_text(entry.get("tool_response")))
        outcomes.append(outcome_of(call, outcome))
    # a record left belongs to a batch that never settled: its error text goes now
    session.drop_pending()
    return answered(session.settle(outcomes), "PostToolBatch")


def _is_failure(record: list[Any] | None) -> bool:
    """A record :func:`handle` wrote for a ``PostToolUseFailure``: [tool, error, interrupted]."""
    return record is not None and len(record) == 3 and isinstance(record[1], str)
