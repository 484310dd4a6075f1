"""OpenHands conversations as the SDK persists them (PyPI ``openhands-sdk``, 1.58.2), and
the V0 app's trajectories and evaluation outputs (:mod:`.openhands_v0`), one kind.

A ``Conversation`` with a ``persistence_dir`` keeps one folder per
conversation, ``<persistence_dir>/<conversation id hex>/``: ``base_state.json``
(the agent's config, ``execution_status``) and ``events/event-NNNNN-<event
id>.json``, one JSON object per event, numbered from 0 without gaps.  The
folder is the transcript: any file in it names it (:func:`owner`), so a walked
directory reads each conversation once and lists none of its files as skipped.

Mapping (``docs/transcripts.md``; :data:`RULES` in the order tried):

- a run is one user message (``MessageEvent`` with ``source`` ``user``);
- a turn is one model response: the ``ActionEvent`` records with the same
  ``llm_response_id`` that follow each other (the SDK records every action of
  a response before it runs the first; a call it refuses has its
  ``AgentErrorEvent`` right after its action, which does not end the turn);
- each call settles by the first ``ObservationEvent`` / ``AgentErrorEvent`` /
  ``UserRejectObservation`` with its ``tool_call_id`` still unanswered (ids a
  provider reuses in later responses stay apart);
- success: the last run's ``execution_status`` (``finished`` true; ``error``,
  ``stuck`` false; anything else unknown); an earlier run succeeded when it
  called the ``finish`` tool, failed on a ``ConversationErrorEvent``, else
  unknown.  Tokens are not recorded per response (None).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from tool_failure_guard.agent_outcomes import vocabulary as v
from tool_failure_guard.guard import ExecutionStatus, TerminalStatus
from tool_failure_guard.transcripts.importers import openhands_v0
from tool_failure_guard.transcripts.importers._ids import distinct_across_turns
from tool_failure_guard.transcripts.importers._read import fingerprint, json_document, open_regular
from tool_failure_guard.transcripts.model import ImportedCall, Run, TranscriptError, Turn

KIND = "openhands"
STATE = "base_state.json"
EVENTS = "events"
EVENT_NAME: Final = re.compile(r"^event-(?P<index>\d{5,})-[0-9a-fA-F-]{8,}\.json$")
#: Events past this count in one conversation are an error (bounded input).
MAX_EVENTS: Final = 1_000_000

_Axes = tuple[TerminalStatus, ExecutionStatus, "str | None", bool]
#: rule -> (terminal, execution, error type, heuristic); the docs table shows the same rows
RULES: dict[str, _Axes] = {
    "rejected": (TerminalStatus.CANCELLED, ExecutionStatus.NOT_STARTED, None, False),
    "refused, tool not found": (
        TerminalStatus.ERROR,
        ExecutionStatus.NOT_STARTED,
        v.TOOL_NOT_REGISTERED,
        True,
    ),
    "refused": (TerminalStatus.ERROR, ExecutionStatus.NOT_STARTED, v.INVALID_TOOL_PARAMS, True),
    "executor raised": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.EXECUTION_FAILED, False),
    "mcp error": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.MCP_TOOL_ERROR, False),
    "editor, missing path": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.FILE_NOT_FOUND, True),
    "is_error": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.EXECUTION_FAILED, False),
    "terminal timeout": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.EXECUTION_TIMEOUT, False),
    "terminal exit not 0": (
        TerminalStatus.ERROR,
        ExecutionStatus.ERROR,
        v.SHELL_EXECUTE_ERROR,
        False,
    ),
    "success": (TerminalStatus.SUCCESS, ExecutionStatus.SUCCESS, None, False),
    "no result": (TerminalStatus.ERROR, ExecutionStatus.UNKNOWN, None, False),
}
_SUCCEEDED = {"finished": True, "error": False, "stuck": False}


def owner(path: Path) -> Path | None:
    """The conversation folder ``path`` (a file in it, or the folder) belongs to, or None:
    the SDK's, else a V0 session folder of the app's file store."""
    for folder in (path, *list(path.parents)[:3]):
        if (folder / STATE).is_file() and (folder / EVENTS).is_dir():
            return folder
    return openhands_v0.session_owner(path)


def sniff(path: Path, head: bytes) -> bool:
    """A file of an OpenHands conversation folder (``base_state.json`` beside ``events/``),
    a V0 trajectory or a V0 evaluation ``output.jsonl``."""
    if owner(path) is not None:
        return True
    return openhands_v0.sniff_trajectory(head) or openhands_v0.sniff_output(head)


def _event_files(folder: Path) -> list[Path]:
    numbered: dict[int, Path] = {}
    try:
        names = sorted(os.listdir(folder / EVENTS))
    except OSError as exc:
        raise TranscriptError(str(folder / EVENTS), None, f"cannot read: {exc.strerror}") from None
    for name in names:
        if name.startswith("."):  # the SDK's lock and length-marker files
            continue
        found = EVENT_NAME.match(name)
        if found is None:
            raise TranscriptError(
                str(folder / EVENTS / name), None, "not an OpenHands event file name"
            )
        numbered[int(found["index"])] = folder / EVENTS / name
        if len(numbered) > MAX_EVENTS:
            raise TranscriptError(str(folder / EVENTS), None, f"more than {MAX_EVENTS} events")
    missing = next((i for i in range(len(numbered)) if i not in numbered), None)
    if missing is not None:
        raise TranscriptError(str(folder / EVENTS), None, f"event {missing} is missing")
    return [numbered[i] for i in range(len(numbered))]


def _text(observation: dict[str, Any]) -> str:
    content = observation.get("content")
    if not isinstance(content, list):
        return ""
    return "".join(
        str(c.get("text", "")) for c in content if isinstance(c, dict) and c.get("type") == "text"
    )


def settle(event: dict[str, Any], action_ran: bool) -> tuple[str, str]:
    """Which :data:`RULES` row a result event is, and its error text."""
    kind = event.get("kind")
    if kind == "UserRejectObservation":
        return "rejected", str(event.get("rejection_reason") or "")
    if kind == "AgentErrorEvent":
        error = str(event.get("error") or "")
        if action_ran:
            return "executor raised", error
        if re.match(r"Tool '[^']*' not found", error):
            return "refused, tool not found", error
        return "refused", error
    observation = event.get("observation")
    observation = observation if isinstance(observation, dict) else {}
    text = _text(observation)
    if observation.get("is_error") is True:
        if observation.get("kind") == "MCPToolObservation":
            return "mcp error", text
        if observation.get("kind") == "FileEditorObservation" and "does not exist" in text:
            return "editor, missing path", text
        return "is_error", text
    if observation.get("kind") == "TerminalObservation":
        exit_code = observation.get("exit_code")
        if observation.get("timeout") is True or exit_code == -1:
            return "terminal timeout", text
        if isinstance(exit_code, int) and exit_code != 0:
            return "terminal exit not 0", text
    return "success", ""


class _Call:
    def __init__(self, event: dict[str, Any], path: Path) -> None:
        call_id = event.get("tool_call_id")
        tool = event.get("tool_name")
        if not isinstance(call_id, str) or not isinstance(tool, str) or not tool:
            raise TranscriptError(str(path), None, "an ActionEvent without tool_call_id/tool_name")
        tool_call = event.get("tool_call")
        arguments = tool_call.get("arguments") if isinstance(tool_call, dict) else None
        action = event.get("action")
        self.call_id, self.tool = call_id, tool
        self.arguments = fingerprint(arguments if arguments is not None else {})
        # no action: the SDK refused the call before it became one
        self.ran = isinstance(action, dict)
        self.mcp = isinstance(action, dict) and action.get("kind") == "MCPToolAction"
        self.rule, self.text = "no result", ""

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


class _Run:
    def __init__(self) -> None:
        self.turns: list[tuple[int, list[_Call]]] = []
        self.finished = False
        self.error = False


def read(path: Path) -> Iterator[Run]:
    """One :class:`Run` per user message of the conversation ``path`` belongs to; of a V0
    trajectory, per user message; of a V0 ``output.jsonl``, per instance."""
    folder = owner(Path(path))
    if folder is None:
        with open_regular(str(path)) as handle:
            head = handle.read(64 << 10)
        if openhands_v0.sniff_trajectory(head):
            return openhands_v0.read_trajectory(Path(path))
        return openhands_v0.read_output(Path(path))
    if not (folder / STATE).is_file():
        return openhands_v0.read_session(folder)
    return _read_folder(folder)


def _read_folder(folder: Path) -> Iterator[Run]:
    state = json_document(folder / STATE)
    runs: list[_Run] = []
    pending: dict[str, list[_Call]] = {}
    open_turn: object = None  # the llm_response_id of the turn still open, else None
    for number, file in enumerate(_event_files(folder)):
        event = json_document(file)
        kind = event.get("kind")
        if kind != "ActionEvent" and not _refusal_of_open_turn(event, runs, open_turn):
            open_turn = None
        if kind == "MessageEvent" and event.get("source") == "user":
            runs.append(_Run())
        elif kind == "ActionEvent":
            if not runs:  # a conversation whose first message was condensed away
                runs.append(_Run())
            call = _Call(event, file)
            response = event.get("llm_response_id")
            if open_turn is None or response != open_turn:
                runs[-1].turns.append((number, []))
            open_turn = response
            runs[-1].turns[-1][1].append(call)
            pending.setdefault(call.call_id, []).append(call)
            if call.tool == "finish":
                runs[-1].finished = True
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            waiting = pending.get(str(event.get("tool_call_id")))
            if waiting:
                answered = waiting.pop(0)
                answered.rule, answered.text = settle(event, answered.ran)
        elif kind == "ConversationErrorEvent" and runs:
            runs[-1].error = True
    status = state.get("execution_status")
    for index, run in enumerate(runs):
        succeeded: bool | None = None
        if index == len(runs) - 1 and isinstance(status, str):
            succeeded = _SUCCEEDED.get(status)
        elif run.error:
            succeeded = False
        elif run.finished:
            succeeded = True
        yield Run(
            agent=KIND,
            source=str(folder),
            run_id=_run_id(state, folder, index, len(runs)),
            turns=distinct_across_turns(
                [
                    Turn(line=line, calls=tuple(c.imported() for c in calls))
                    for line, calls in run.turns
                ]
            ),
            succeeded=succeeded,
            model=_model(state),
        )


def _refusal_of_open_turn(event: dict[str, Any], runs: list[_Run], open_turn: object) -> bool:
    """An ``AgentErrorEvent`` refusing a call of the open turn: the SDK writes it right after
    that call's ``ActionEvent``, amid the response's other actions, so the turn goes on."""
    if open_turn is None or event.get("kind") != "AgentErrorEvent" or not runs:
        return False
    calls = runs[-1].turns[-1][1] if runs[-1].turns else []
    return any(c.call_id == event.get("tool_call_id") and not c.ran for c in calls)


def _run_id(state: dict[str, Any], folder: Path, index: int, count: int) -> str:
    conversation = state.get("id") if isinstance(state.get("id"), str) else folder.name
    return str(conversation) if count == 1 else f"{conversation}/{index + 1}"


def _model(state: dict[str, Any]) -> str | None:
    agent = state.get("agent")
    llm = agent.get("llm") if isinstance(agent, dict) else None
    model = llm.get("model") if isinstance(llm, dict) else None
    return model if isinstance(model, str) else None
