"""What Qwen Code headless (``qwen -p``, 0.24.4) hook events mean to the guard.

Where the original's own guard does not run (it is ACP-only), its hooks carry
everything the seed needs, observed in ``-p`` (``docs/hooks-clis.md`` says which
of this Qwen Code documents and which was only observed):

- ``PostToolBatch`` fires once per *call* in ``-p`` (each call has its own
  scheduler), each entry with the specification's two axes as the original
  set them (``status``, ``tool_response.error_type`` / ``execution_status``):
  the call joins the prompt's open batch, recorded as it came;
- ``UserPromptSubmit`` fires before *every* model request: with a new
  ``prompt_id`` it starts a fresh guard; with the same one (``prompt: ""``)
  it says the open batch settled, so its calls are typed
  (:func:`tool_failure_guard.agent_outcomes.qwen_code.from_batch_call`) and the
  core reduces the batch; the answer goes into the request about to be made:
  the reminder as ``additionalContext`` (a ``<qwen:user-prompt-submit-context>``
  user message), or the stop as ``{"continue": false, "stopReason": ...}`` (no
  request is made; ``-p`` exits 0 with an empty result);
- ``Stop`` fires after the final answer (installed with ``--telemetry``): it
  ends the prompt's telemetry record.

A subagent (its events carry ``agent_id``) is an agent loop of its own
(:mod:`tool_failure_guard.hooks.loops`): its ``PostToolBatch`` fires once per
subagent response with all its calls, and no ``UserPromptSubmit`` comes before
its requests, so its batch settles at its ``PostToolBatch``; the reminder is
answered there as ``additionalContext`` (appended to the batch's last result).
No hook answer stops a Qwen Code subagent: its stop is answered as the stop
text in ``additionalContext`` (at that batch and every later one), and the main
loop's next ``UserPromptSubmit`` carries the notice that the guard stopped it.

This module decides what an event means; :mod:`tool_failure_guard.hooks.run`
adds the state file around it.  The per-call event loads no core.
"""

from __future__ import annotations

from collections.abc import Mapping

from tool_failure_guard.hooks.events import Handled
from tool_failure_guard.hooks.payload import PayloadError, text_field
from tool_failure_guard.hooks.prompt import MAX_CALLS_PER_BATCH, PromptSession

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

#: The CLI's name on the command line (``tool-failure-guard hook qwen-code``).
NAME: Final = "qwen-code"
#: The ``route`` of the hook's telemetry (``telemetry.names.HOOK_ROUTES``).
ROUTE: Final = "qwen_code_hook"
#: The events the hook is installed for (and the ones :func:`handle` reads).
EVENTS: Final = ("UserPromptSubmit", "PostToolBatch", "Stop")
#: The main loop's events whose ``additionalContext`` reaches its next request: where the
#: notice of a subagent the guard stopped goes (:mod:`tool_failure_guard.hooks.loops`).
NOTICE_EVENTS: Final = ("UserPromptSubmit",)
#: No hook answer ends a Qwen Code subagent: its stop is told to it (and to the main loop).
SUBAGENT_STOP_ENDS_IT: Final = False
#: Installed only with ``--telemetry`` (their one use is the prompt record).
TELEMETRY_EVENTS: Final = ("Stop",)
#: The events whose installed group has ``matcher: "*"`` (every tool).
TOOL_EVENTS: Final = ("PostToolBatch",)
#: ``hook install --scope``: ``system`` is the operator's (its hooks run whatever a project
#: says, with ``disableAllHooks: false`` there); ``user`` a project can switch off.
SCOPES: Final = {
    "system": "/etc/qwen-code/settings.json",
    "user": "~/.qwen/settings.json",
}
#: What installing sets beside the entries: hooks on at that scope (the system scope's
#: ``false`` wins over a project's ``disableAllHooks: true``).
PINNED_SETTINGS: Final = {"disableAllHooks": False}
_MAX_NAME: Final = 512
_NOTHING: Final = Handled()


def _short(value: Any) -> Any:
    """A field kept as it came when it is a short string (or null), else refused."""
    if value is None or (isinstance(value, str) and len(value) <= _MAX_NAME):
        return value
    raise PayloadError("a PostToolBatch status field is not a short string")


def _record(entry: Any, session: PromptSession) -> None:
    if not isinstance(entry, dict):
        raise PayloadError("PostToolBatch payload 'tool_calls' entries must be objects")
    # tool_call_id is the provider's id (tool_use_id is the same in PostToolBatch)
    key = "tool_call_id" if entry.get("tool_call_id") else "tool_use_id"
    call_id = text_field(entry, key, limit=_MAX_NAME)
    tool = text_field(entry, "tool_name", limit=_MAX_NAME)
    response = entry.get("tool_response")
    response = response if isinstance(response, dict) else {}
    axes = [entry.get("status"), response.get("execution_status"), response.get("error_type")]
    session.record(call_id, [tool, *(_short(value) for value in axes)])


def _settle(session: PromptSession, event: str = "UserPromptSubmit") -> Handled:
    from tool_failure_guard.agent_outcomes.qwen_code import from_batch_call
    from tool_failure_guard.core import FunctionCall, Stop
    from tool_failure_guard.hooks.claude_code import answered, outcome_of, reminder_answer

    pending, session.pending = session.pending, {}
    outcomes = []
    for call_id, record in pending.items():
        if len(record) != 4:
            raise PayloadError(f"the stored record of {call_id!r} is not [tool, 3 axes]")
        tool, status, execution, error_type = record
        entry = {
            "status": status,
            "tool_response": {"execution_status": execution, "error_type": error_type},
        }
        try:
            outcome = from_batch_call(entry)
        except ValueError as error:
            raise PayloadError(f"PostToolBatch entry {call_id!r}: {error}") from None
        outcomes.append(outcome_of(FunctionCall(call_id=call_id, name=str(tool)), outcome))
    settled = session.settle(outcomes)
    if event == "PostToolBatch" and isinstance(settled.action, Stop):
        # a subagent's batch: no answer stops a Qwen Code subagent (``continue: false`` only
        # replaces its last result); the stop text goes to it as context instead, and the
        # main loop is told (:func:`tool_failure_guard.hooks.loops.handle_event`)
        answer = reminder_answer(event, (settled.action.notice,))
        ended = "end_turn" if settled.batch is not None else None
        return Handled(answer=answer, settled=settled, prompt_ended=ended)
    return answered(settled, event)


def handle(payload: Mapping[str, Any], session: PromptSession) -> Handled:
    """The meaning of one Qwen Code ``-p`` hook event for ``session`` (updated in place)."""
    event = payload.get("hook_event_name")
    prompt_id = text_field(payload, "prompt_id", limit=_MAX_NAME)
    if event == "PostToolBatch":
        session.enter_prompt(prompt_id)
        entries = payload.get("tool_calls")
        if not isinstance(entries, list):
            raise PayloadError("PostToolBatch payload field 'tool_calls' must be a list")
        if len(entries) > MAX_CALLS_PER_BATCH:
            raise PayloadError(
                f"PostToolBatch has {len(entries)} calls, more than the bound {MAX_CALLS_PER_BATCH}"
            )
        for entry in entries:
            _record(entry, session)
        if payload.get("agent_id") and session.pending:
            # a subagent's batch: once per subagent response, holding all its calls, and no
            # UserPromptSubmit comes before its requests: it settles here
            return _settle(session, "PostToolBatch")
        return _NOTHING
    if event == "Stop":
        # after the final answer; a prompt the guard stopped has its record already
        ended = session.prompt_id == prompt_id and session.batches
        if ended and session.protection.stopped is None:
            return Handled(prompt_ended="end_turn")
        return _NOTHING
    if event != "UserPromptSubmit" or session.enter_prompt(prompt_id):
        return _NOTHING  # a new prompt's first request: a fresh guard
    if not session.pending:
        return _NOTHING
    return _settle(session)
