"""What Gemini CLI (0.61.0) hook events mean to the guard: observe per call, stop before a request.

What its hooks allow, observed headless (``docs/hooks-clis.md``):

- ``BeforeAgent`` fires once per prompt: a fresh guard;
- ``AfterTool`` fires for each call that ran (concurrently for parallel
  calls), with no call id: the call joins the prompt's open batch, named by
  its place, recorded as it came (its error type, or the shell's exit-code
  line).  A call refused before running (arguments that fail validation, an
  unknown tool, a path outside the workspace) gets no tool hook: the guard
  never sees it;
- ``BeforeModel`` fires before every model request, after every ``AfterTool``
  of the batch: the open batch has settled, its calls are typed
  (:func:`tool_failure_guard.agent_outcomes.gemini_cli.from_after_tool`) and the
  core reduces it.  The enforce stop answers ``{"decision": "deny", "reason":
  ...}``: no request is made, and the headless run reports "Agent execution
  blocked: <reason>";
- ``AfterAgent`` fires after the final answer (installed with ``--telemetry``):
  it ends the prompt's telemetry record.

No reminder: ``AfterTool``'s ``additionalContext`` reaches the model only on a
result without error (it is dropped on exactly the failures the reminder is
about), and ``BeforeModel`` can only replace the request with a lossy
text-only form.  So ``warn`` and ``shadow`` observe and change nothing the
model sees, and ``enforce`` stops where the seed stops: at the matching batch
after the one that reached the threshold (whose reminder the model never got).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tool_failure_guard.hooks.events import Handled
from tool_failure_guard.hooks.payload import text_field
from tool_failure_guard.hooks.prompt import PromptSession

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

    from tool_failure_guard.core import Stop

NAME: Final = "gemini-cli"
ROUTE: Final = "gemini_cli_hook"
EVENTS: Final = ("BeforeAgent", "AfterTool", "BeforeModel", "AfterAgent")
TELEMETRY_EVENTS: Final = ("AfterAgent",)
TOOL_EVENTS: Final = ("AfterTool",)
#: ``system`` is the operator's (read only when root owns the file and no folder above it is
#: writable by group or others); ``user`` a trusted project can switch off.
SCOPES: Final = {
    "system": "/etc/gemini-cli/settings.json",
    "user": "~/.gemini/settings.json",
}
#: Hooks on at the installed scope (the system scope's ``true`` wins over a trusted project's).
PINNED_SETTINGS: Final = {"hooksConfig": {"enabled": True}}
_MAX_NAME: Final = 512
_NOTHING: Final = Handled()
_NOT_ID: Final = re.compile(r"[^A-Za-z0-9._:-]")
#: The shell's exit-code line in what the model is shown (kept for the outcome rule).
_EXIT_LINE: Final = re.compile(r"^Exit Code: -?\d+\s*$", re.MULTILINE)


def settings_entries(command: str, timeout: int) -> dict[str, list[dict[str, Any]]]:
    """One group per event; Gemini CLI reads a hook's ``timeout`` in milliseconds."""
    hook = {"type": "command", "command": command, "timeout": timeout * 1000}
    return {
        event: [{**({"matcher": "*"} if event in TOOL_EVENTS else {}), "hooks": [dict(hook)]}]
        for event in EVENTS
    }


def stop_answer(stop: Stop) -> dict[str, Any]:
    """``BeforeModel``'s refusal: no request is made; the reason is shown as a warning."""
    return {"decision": "deny", "reason": stop.shown_text}


def _kept(response: Any) -> dict[str, Any]:
    """What the outcome rule reads of ``tool_response``: the error's type, the exit line."""
    if not isinstance(response, dict):
        return {}
    error = response.get("error")
    if isinstance(error, dict) and error:
        kind = error.get("type")
        return {"error": {"type": kind[:_MAX_NAME] if isinstance(kind, str) else None}}
    content = response.get("llmContent")
    found = _EXIT_LINE.search(content) if isinstance(content, str) else None
    return {"llmContent": found.group(0)} if found is not None else {}


def _settle(session: PromptSession) -> Handled:
    from tool_failure_guard.agent_outcomes.gemini_cli import from_after_tool
    from tool_failure_guard.core import FunctionCall, Stop
    from tool_failure_guard.hooks.claude_code import outcome_of

    pending, session.pending = session.pending, {}
    outcomes = []
    for call_id, record in pending.items():
        tool, response = [*record, None, None][:2]
        outcome = from_after_tool(str(tool), response)
        outcomes.append(outcome_of(FunctionCall(call_id=call_id, name=str(tool)), outcome))
    settled = session.settle(outcomes)
    if isinstance(settled.action, Stop):
        return Handled(answer=stop_answer(settled.action), settled=settled, prompt_ended="end_turn")
    return Handled(settled=settled)


def handle(payload: Mapping[str, Any], session: PromptSession) -> Handled:
    """The meaning of one Gemini CLI hook event for ``session`` (updated in place)."""
    event = payload.get("hook_event_name")
    if event == "BeforeAgent":
        # no prompt id in Gemini CLI's payloads: the prompt's start time names it, in the
        # telemetry's id alphabet (letters, digits, ``._:-``)
        stamp = _NOT_ID.sub("_", text_field(payload, "timestamp", limit=_MAX_NAME))
        session.new_prompt(f"gemini-{stamp}"[:128])
        return _NOTHING
    if event == "AfterTool":
        tool = text_field(payload, "tool_name", limit=_MAX_NAME)
        call_id = f"call-{len(session.batches)}-{len(session.pending)}"
        session.record(call_id, [tool, _kept(payload.get("tool_response"))])
        return _NOTHING
    if event == "AfterAgent":
        if session.batches and session.protection.stopped is None:
            return Handled(prompt_ended="end_turn")
        return _NOTHING
    if event != "BeforeModel" or not session.pending:
        return _NOTHING
    return _settle(session)
