"""The guard in Gemini CLI (0.61.0): observe per call, stop before the next request.

What its hooks allow, observed headless (``docs/hooks.md``):

- ``BeforeAgent`` fires once per prompt: a fresh guard;
- ``AfterTool`` fires for each call that ran, concurrently for parallel
  calls, with no call id: the call joins the prompt's open batch, typed by
  :mod:`tool_failure_guard.agent_outcomes.gemini_cli` (calls refused before
  running get no tool hook, so the guard never sees them);
- ``BeforeModel`` fires before every model request, after every ``AfterTool``
  of the batch: the open batch has settled and is reduced.  The enforce stop
  answers ``decision: "deny"`` with the stop text: no request is made, and the
  headless run reports "Agent execution blocked: <text>" as a warning.

No reminder: ``AfterTool``'s ``additionalContext`` reaches the model only on a
result without error (dropped on exactly the failures the reminder is about),
and ``BeforeModel`` can only replace the request with a lossy text-only form.
So ``warn`` and ``shadow`` observe (and record) and change nothing the model
sees; ``enforce`` stops where the seed stops, one batch after its (unsent)
reminder.  Sans-IO: a payload and the stored state in, the new state and the
answer out.
"""

from __future__ import annotations

from typing import Any, Final

from tool_failure_guard.agent_outcomes.gemini_cli import from_after_tool
from tool_failure_guard.core.actions import Stop
from tool_failure_guard.guard import GuardMode

from .batches import PromptState, RecordedCall, reduce

CLI: Final = "gemini-cli"
EVENTS: Final = ("BeforeAgent", "AfterTool", "BeforeModel")
Answer = dict[str, Any]


def stop_answer(reason: str) -> Answer:
    return {"decision": "deny", "reason": reason}


def handle(
    mode: GuardMode, payload: dict[str, Any], state: PromptState | None
) -> tuple[PromptState | None, Answer | None]:
    """One event: the state to keep (None: keep none) and the answer (None: say nothing)."""
    if mode is GuardMode.OFF:
        return state, None
    event = payload.get("hook_event_name")
    if event == "BeforeAgent":
        stamp = payload.get("timestamp")
        return PromptState(key=stamp[:64] if isinstance(stamp, str) else "prompt"), None
    if event == "AfterTool":
        current = state or PromptState(key="prompt")
        if current.stopped:
            return current, None
        tool = payload.get("tool_name")
        if not isinstance(tool, str) or not tool:
            raise ValueError("the AfterTool payload has no tool_name")
        # no call id in the payload: the call's place in the prompt names it
        call_id = f"call-{len(current.batches)}-{len(current.open)}"
        outcome = from_after_tool(tool, payload.get("tool_response"))
        return current.record(RecordedCall.of(call_id, tool, outcome)), None
    if event != "BeforeModel" or state is None or state.stopped:
        return state, None
    settled = state.settle()
    if settled is state:
        return state, None
    action = reduce(mode, settled.batches)
    if isinstance(action, Stop):
        stopped = PromptState(key=settled.key, batches=settled.batches, stopped=True)
        return stopped, stop_answer(action.shown_text)
    return settled, None


#: The operator's scope: Gemini CLI's system settings (read only when root owns the file and
#: no folder above it is writable by group or others).
SYSTEM_SETTINGS: Final = "/etc/gemini-cli/settings.json"
#: Set at the installed scope: a trusted project's ``hooksConfig.enabled: false`` loses to it.
SWITCH: Final = (("hooksConfig", "enabled"), True)
