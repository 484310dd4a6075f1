"""The guard in Qwen Code headless (``qwen -p``, 0.24.4): per-call batches, per-request submit.

Where the original's own guard does not run (it is ACP-only), its hooks carry
everything the seed needs, observed in ``-p`` (``docs/hooks.md`` says which of
this Qwen Code documents and which was only observed):

- ``PostToolBatch`` fires once per *call* in ``-p`` (each call has its own
  scheduler), each entry with the specification's two axes as the original
  set them (``status``, ``tool_response.error_type`` /
  ``execution_status``): the call joins the prompt's open batch;
- ``UserPromptSubmit`` fires before *every* model request: with a new
  ``prompt_id`` it starts a fresh guard; with the same one (``prompt: ""``)
  it says the previous batch settled, so the batch is reduced and the answer
  goes into the request about to be made: the reminder as
  ``additionalContext`` (a ``<qwen:user-prompt-submit-context>`` user
  message), or the stop as ``continue: false`` (no request is made; ``-p``
  exits 0 with an empty result).

Sans-IO: a payload and the stored :class:`~.batches.PromptState` in, the new
state and the answer out.
"""

from __future__ import annotations

from typing import Any, Final

from tool_failure_guard.agent_outcomes.qwen_code import from_batch_call
from tool_failure_guard.core.actions import Stop
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER, GuardMode

from .batches import PromptState, RecordedCall, reduce, reminds

CLI: Final = "qwen-code"
#: The events the hook is installed for, in the order they matter.
EVENTS: Final = ("PostToolBatch", "UserPromptSubmit")
SUBMIT: Final = "UserPromptSubmit"
BATCH: Final = "PostToolBatch"
Answer = dict[str, Any]


def _text(payload: dict[str, Any], field: str) -> str:
    value = payload.get(field)
    if not isinstance(value, str) or not value:
        raise ValueError(f"the {payload.get('hook_event_name')} payload has no {field}")
    return value


def stop_answer(reason: str) -> Answer:
    return {"continue": False, "stopReason": reason}


def reminder_answer() -> Answer:
    context = {"hookEventName": SUBMIT, "additionalContext": REPEATED_TOOL_FAILURE_REMINDER}
    return {"hookSpecificOutput": context}


def handle(
    mode: GuardMode, payload: dict[str, Any], state: PromptState | None
) -> tuple[PromptState | None, Answer | None]:
    """One event: the state to keep (None: keep none) and the answer (None: say nothing)."""
    if mode is GuardMode.OFF:
        return state, None
    event = payload.get("hook_event_name")
    prompt_id = _text(payload, "prompt_id")
    current = state if state is not None and state.key == prompt_id else None
    if event == BATCH:
        current = current or PromptState(key=prompt_id)
        if current.stopped:
            return current, None
        calls = payload.get("tool_calls")
        if not isinstance(calls, list):
            raise ValueError("the PostToolBatch payload has no tool_calls list")
        for entry in calls:
            if not isinstance(entry, dict):
                raise ValueError("a PostToolBatch tool_calls entry is not an object")
            call_id = entry.get("tool_call_id") or entry.get("tool_use_id")
            tool = entry.get("tool_name")
            if not isinstance(call_id, str) or not isinstance(tool, str):
                raise ValueError("a PostToolBatch entry has no tool_call_id or tool_name")
            current = current.record(RecordedCall.of(call_id, tool, from_batch_call(entry)))
        return current, None
    if event != SUBMIT:
        return state, None
    if current is None:  # a new prompt: a fresh guard
        return PromptState(key=prompt_id), None
    if current.stopped:
        return current, None
    settled = current.settle()
    if settled is current:
        return current, None
    action = reduce(mode, settled.batches)
    if isinstance(action, Stop):
        stopped = PromptState(key=settled.key, batches=settled.batches, stopped=True)
        return stopped, stop_answer(action.shown_text)
    return settled, reminder_answer() if reminds(action) else None


#: The operator's scope: Qwen Code's system settings (its hooks run whatever a project says).
SYSTEM_SETTINGS: Final = "/etc/qwen-code/settings.json"
#: Set at the installed scope: a project's ``disableAllHooks: true`` cannot switch them off.
SWITCH: Final = (("disableAllHooks",), False)
