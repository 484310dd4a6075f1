"""OpenHands V0 events, in order, into runs: the calls, how each settled, the batches.

The mapping of :mod:`.openhands_v0` (``docs/transcripts.md``), on serialised
events (``events/serialization/event.py``): a call is an action with
``tool_call_metadata`` (the model called a tool) or, without one, an action
OpenHands runs (:data:`RUNNABLE`); the observation whose ``cause`` is the
action's ``id`` settles it (:func:`settle`, :data:`RULES` in the order tried);
a refusal (the agent's ``FunctionCallValidationError``, an ``error``
observation with no cause: no action was made) is one call that never started.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from tool_failure_guard.agent_outcomes import vocabulary as v
from tool_failure_guard.guard import ExecutionStatus, TerminalStatus
from tool_failure_guard.transcripts.importers._ids import distinct_across_turns
from tool_failure_guard.transcripts.importers._read import as_int, fingerprint
from tool_failure_guard.transcripts.model import ImportedCall, Run, TranscriptError, Turn

KIND = "openhands"
#: The action types OpenHands' runtime executes (``runnable = True`` in ``events/action``).
RUNNABLE: Final = frozenset(
    {"run", "run_ipython", "browse", "browse_interactive", "read", "write", "edit", "call_tool_mcp"}
)
#: Actions of the agent that are a model response without a call (when no tool call made them).
ANSWERS: Final = frozenset({"message", "finish", "reject", "think", "delegate"})


_Axes = tuple[TerminalStatus, ExecutionStatus, "str | None", bool]
#: rule -> (terminal, execution, error type, heuristic); the docs table shows the same rows
RULES: dict[str, _Axes] = {
    "rejected": (TerminalStatus.CANCELLED, ExecutionStatus.NOT_STARTED, None, False),
    "refused, tool not registered": (
        TerminalStatus.ERROR,
        ExecutionStatus.NOT_STARTED,
        v.TOOL_NOT_REGISTERED,
        True,
    ),
    "refused": (TerminalStatus.ERROR, ExecutionStatus.NOT_STARTED, v.INVALID_TOOL_PARAMS, True),
    "error, file not found": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.FILE_NOT_FOUND, True),
    "error": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.EXECUTION_FAILED, False),
    "command still running": (
        TerminalStatus.ERROR,
        ExecutionStatus.ERROR,
        v.EXECUTION_TIMEOUT,
        False,
    ),
    "command exit not 0": (
        TerminalStatus.ERROR,
        ExecutionStatus.ERROR,
        v.SHELL_EXECUTE_ERROR,
        False,
    ),
    "browser error": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.EXECUTION_FAILED, False),
    "mcp error": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.MCP_TOOL_ERROR, False),
    "editor error, missing path": (
        TerminalStatus.ERROR,
        ExecutionStatus.ERROR,
        v.FILE_NOT_FOUND,
        True,
    ),
    "editor error, invalid parameter": (
        TerminalStatus.ERROR,
        ExecutionStatus.NOT_STARTED,
        v.INVALID_TOOL_PARAMS,
        True,
    ),
    "editor error": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.EXECUTION_FAILED, True),
    "success": (TerminalStatus.SUCCESS, ExecutionStatus.SUCCESS, None, False),
    "handled by the controller": (TerminalStatus.SUCCESS, ExecutionStatus.SUCCESS, None, False),
    "no result": (TerminalStatus.ERROR, ExecutionStatus.UNKNOWN, None, False),
}
#: the texts of the refusals the agent raises before a call becomes an action
#: (``FunctionCallValidationError`` / ``FunctionCallNotExistsError``, codeact and the
#: non-native function-calling converter)
_REFUSED = re.compile(
    r"(Missing required (argument|parameters)|Failed to parse tool call arguments|"
    r"Unexpected argument|Invalid float passed|Invalid format for|Unexpected task format|"
    r"Parameter '[^']*' is (not allowed|expected to be))"
)
_NOT_REGISTERED = re.compile(
    r"Tool (?P<a>\S+) is not registered|Function '(?P<b>[^']*)' not found in available tools"
)
_TOOL_NAMED = re.compile(r"in tool call (?P<a>[\w.-]+)|for function '(?P<b>[^']*)'")
_EDITOR_PARAMETER = re.compile(
    r"ERROR:\s*(Parameter `[^`]*` is required|Invalid `[^`]*` parameter)"
)
_SUCCEEDED = {"finished": True, "error": False, "rejected": False}


def _named(match: re.Match[str] | None) -> str | None:
    return (match["a"] or match["b"]) if match else None


class _Call:
    def __init__(self, event: dict[str, Any], call_id: str, tool: str, arguments: Any) -> None:
        self.call_id, self.tool = call_id, tool
        self.arguments = fingerprint(arguments)
        action = event.get("action")
        self.runnable = action in RUNNABLE
        self.mcp = action == "call_tool_mcp"
        self.rule, self.text = ("no result" if self.runnable else "handled by the controller"), ""
        self.answered = False

    def imported(self) -> ImportedCall:
        terminal, execution, error_type, heuristic = RULES[self.rule]
        failed = terminal is not TerminalStatus.SUCCESS
        return ImportedCall(
            call_id=self.call_id,
            tool=self.tool,
            arguments_fingerprint=self.arguments,
            status=terminal,
            execution_status=execution,
            error_type=error_type,
            error_text=v.bounded_text(self.text) if failed and self.text else None,
            heuristic=heuristic,
            mcp=self.mcp,
        )


def settle(observation: dict[str, Any]) -> str:
    """Which :data:`RULES` row an observation that answers a call is."""
    kind = observation.get("observation")
    content = observation.get("content")
    text = content if isinstance(content, str) else ""
    extras = observation.get("extras")
    extras = extras if isinstance(extras, dict) else {}
    if kind == "user_rejected":
        return "rejected"
    if kind == "error":
        missing = text.startswith("File not found") or "No such file or directory" in text
        return "error, file not found" if missing else "error"
    if kind == "run":
        metadata = extras.get("metadata")
        code = metadata.get("exit_code") if isinstance(metadata, dict) else extras.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool):
            if code == -1:  # OpenHands' "not finished" (its no-change or hard timeout)
                return "command still running"
            return "success" if code == 0 else "command exit not 0"
        return "command exit not 0" if observation.get("success") is False else "success"
    if kind == "browse" and extras.get("error") is True:
        return "browser error"
    if kind in ("read", "write", "edit") and text.startswith("ERROR:"):
        if "does not exist" in text:
            return "editor error, missing path"
        if _EDITOR_PARAMETER.match(text):  # its parameter checks, before it acts
            return "editor error, invalid parameter"
        return "editor error"
    if kind == "mcp":
        try:
            result = json.loads(text)
        except (ValueError, RecursionError):
            result = None
        if isinstance(result, dict) and result.get("isError") is True:
            return "mcp error"
    return "success"


class RunState:
    def __init__(self) -> None:
        self.turns: list[tuple[int, list[_Call], int | None, int | None]] = []
        self.state: str | None = None  #: the last ``agent_state_changed`` state
        self.finished = self.rejected = False


class Reader:
    """The events of one trajectory or instance, in order, into runs."""

    def __init__(self, where: str, line: int | None, split_on_user: bool) -> None:
        self.where, self.line, self.split = where, line, split_on_user
        self.runs: list[RunState] = []
        self.by_id: dict[int, _Call] = {}
        self.waiting: dict[str, list[_Call]] = {}
        self.open: object = None  #: the model response id of the open batch
        self.model: str | None = None

    def _run(self) -> RunState:
        if not self.runs:
            self.runs.append(RunState())
        return self.runs[-1]

    def action(self, event: dict[str, Any], position: int) -> _Call | None:
        kind, source = event.get("action"), event.get("source")
        if not isinstance(kind, str):
            raise TranscriptError(self.where, self.line, f"event {position}: action is not a name")
        metadata = event.get("tool_call_metadata")
        metadata = metadata if isinstance(metadata, dict) else None
        if kind == "message" and source == "user":
            self.open = None
            if not self.runs or (self.split and self.runs[-1].turns):
                self.runs.append(RunState())
            return None
        run = self._run()
        run.finished |= kind == "finish"
        run.rejected |= kind == "reject"
        if metadata is None and kind not in RUNNABLE:
            if source == "agent" and kind in ANSWERS:  # a model response without a call
                self.open = None
                run.turns.append((position, [], None, None))
            return None
        call = self._call(event, metadata, position)
        response = _response(metadata)
        if response is None or response.get("id") is None or response.get("id") != self.open:
            usage = response.get("usage") if response else None
            usage = usage if isinstance(usage, dict) else {}
            tokens = as_int(usage.get("prompt_tokens")), as_int(usage.get("completion_tokens"))
            run.turns.append((position, [], *tokens))
        self.open = response.get("id") if response else None
        run.turns[-1][1].append(call)
        event_id = event.get("id")
        if isinstance(event_id, int):
            self.by_id[event_id] = call
        self.waiting.setdefault(call.call_id, []).append(call)
        return call

    def _call(self, event: dict[str, Any], metadata: dict[str, Any] | None, at: int) -> _Call:
        kind = str(event.get("action"))
        args = event.get("args")
        arguments: Any = (
            {k: x for k, x in args.items() if k != "thought"} if isinstance(args, dict) else {}
        )
        if metadata is None:
            return _Call(event, f"event-{event.get('id', at)}", kind, arguments)
        call_id, tool = metadata.get("tool_call_id"), metadata.get("function_name")
        if not isinstance(call_id, str) or not isinstance(tool, str) or not tool:
            raise TranscriptError(
                self.where, self.line, f"event {at}: tool_call_metadata without its id or name"
            )
        response = _response(metadata)
        if self.model is None and response and isinstance(response.get("model"), str):
            self.model = response["model"]
        recorded = _arguments(response, call_id)
        return _Call(event, call_id, tool, recorded if recorded is not None else arguments)

    def observation(self, event: dict[str, Any], position: int, call: _Call | None) -> None:
        kind = event.get("observation")
        if not isinstance(kind, str):
            raise TranscriptError(
                self.where, self.line, f"event {position}: observation is not a name"
            )
        if kind == "agent_state_changed":
            extras = event.get("extras")
            state = extras.get("agent_state") if isinstance(extras, dict) else None
            if isinstance(state, str):
                self._run().state = state
            return
        if call is None:
            cause = event.get("cause")
            call = self.by_id.get(cause) if isinstance(cause, int) else None
        if call is None and "cause" not in event:
            metadata = event.get("tool_call_metadata")
            if isinstance(metadata, dict):
                queue = self.waiting.get(str(metadata.get("tool_call_id")), [])
                call = next((c for c in queue if not c.answered), None)
        if call is not None:
            if kind != "null":
                call.answered = True
                call.rule = settle(event)
                content = event.get("content")
                call.text = content if isinstance(content, str) else ""
            return
        if kind == "error" and event.get("source") == "agent":
            self._refusal(event, position)

    def _refusal(self, event: dict[str, Any], position: int) -> None:
        text = event.get("content")
        text = text if isinstance(text, str) else ""
        unknown = _named(_NOT_REGISTERED.match(text))
        if unknown is None and not _REFUSED.match(text):
            return  # an error of the agent, not a refused call (no action, no call)
        tool = unknown or _named(_TOOL_NAMED.search(text)) or "(refused)"
        call = _Call({}, f"refused-{event.get('id', position)}", tool, {"refused": text})
        call.rule = "refused, tool not registered" if unknown else "refused"
        call.text = text
        self.open = None
        self._run().turns.append((position, [call], None, None))

    def result(self, source: str, run_id: str, model: str | None) -> list[Run]:
        out = []
        for index, run in enumerate(self.runs):
            out.append(
                Run(
                    agent=KIND,
                    source=source,
                    run_id=run_id if len(self.runs) == 1 else f"{run_id}/{index + 1}",
                    turns=distinct_across_turns(
                        [
                            Turn(
                                line=line,
                                calls=tuple(c.imported() for c in calls),
                                input_tokens=tokens_in,
                                output_tokens=tokens_out,
                            )
                            for line, calls, tokens_in, tokens_out in run.turns
                        ]
                    ),
                    succeeded=_succeeded(run),
                    model=model or self.model,
                )
            )
        return out


def _succeeded(run: RunState) -> bool | None:
    if run.state in _SUCCEEDED:
        return _SUCCEEDED[run.state]
    if run.rejected:
        return False
    return True if run.finished else None


def _response(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    response = metadata.get("model_response") if metadata else None
    return response if isinstance(response, dict) else None


def _arguments(response: dict[str, Any] | None, call_id: str) -> Any:
    """The arguments the model sent for ``call_id``, as recorded in its response."""
    choices = response.get("choices") if response else None
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, dict) or call.get("id") != call_id:
                continue
            function = call.get("function")
            if isinstance(function, dict):
                return function.get("arguments")
    return None
