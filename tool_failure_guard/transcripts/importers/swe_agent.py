"""SWE-agent trajectories (``<instance id>.traj``, SWE-agent 1.1.0; read from its source).

No SWE-agent release usable here is on PyPI, so this importer was written
from SWE-agent's public source at 1.1.0 (``sweagent/agent/agents.py``:
``get_trajectory_data``, ``add_step_to_trajectory``, ``handle_action``,
``forward_with_handling``; ``sweagent/types.py``) and its docs
(``docs/usage/trajectories.md``), and is tested on a fixture written by hand
in that shape.  One JSON object per run: ``trajectory`` (one step per model
response: ``action``, ``observation``, ``execution_time``, ...), ``history``
(the messages; a function-calling model's ``action`` messages hold
``tool_calls``) and ``info`` (``exit_status``, ``submission``,
``model_stats``).

Mapping (``docs/transcripts.md``; :data:`RULES` in the order tried).  SWE-agent
runs one action per step and records no exit code, so:

- a turn is one step; its batch the step's one action (a step without an
  action, a response it could not parse or an autosubmission, is a turn
  without calls);
- *exact*: a step the agent never executed (``execution_time`` 0 and no
  observation: it was re-queried after a format, blocklist or bash-syntax
  error) is ``error`` / ``not_started``; the type ``invalid_tool_params`` is
  guessed;
- *guessed*, from the observation's text (``heuristic``): SWE-agent's
  timeout template, a missing path, ``command not found``; every other
  observation reads as success (a failing command with other output is
  missed: the exit code is not recorded);
- the tool: the history's ``tool_calls`` name for the step's action where
  recorded, else the action's first word (guessed);
- success: ``info.exit_status`` ``submitted`` true; another status (also
  ``submitted (exit_…)``, an autosubmission after an error exit) false; none
  unknown.  Tokens are totals only (``model_stats``), so None per turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tool_failure_guard.agent_outcomes import vocabulary as v
from tool_failure_guard.guard import ExecutionStatus, TerminalStatus
from tool_failure_guard.transcripts.importers._ids import distinct_across_turns
from tool_failure_guard.transcripts.importers._read import fingerprint, json_document
from tool_failure_guard.transcripts.model import ImportedCall, Run, TranscriptError, Turn

KIND = "swe-agent"

_Axes = tuple[TerminalStatus, ExecutionStatus, "str | None", bool]
#: rule -> (terminal, execution, error type, heuristic); the docs table shows the same rows
RULES: dict[str, _Axes] = {
    "not executed": (
        TerminalStatus.ERROR,
        ExecutionStatus.NOT_STARTED,
        v.INVALID_TOOL_PARAMS,
        True,
    ),
    "timeout template": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.EXECUTION_TIMEOUT, True),
    "missing path": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.FILE_NOT_FOUND, True),
    "command not found": (TerminalStatus.ERROR, ExecutionStatus.ERROR, v.SHELL_EXECUTE_ERROR, True),
    "any other observation": (TerminalStatus.SUCCESS, ExecutionStatus.SUCCESS, None, False),
}
_TIMEOUT = re.compile(r"^The command '.*' was cancelled because it took more than \d+", re.S)
_MISSING = ("No such file or directory", "does not exist. Please provide a valid path")


def sniff(path: Path, head: bytes) -> bool:
    """A SWE-agent trajectory: a JSON object with ``trajectory`` steps (``action``,
    ``observation``; ``execution_time`` unless the first observation fills the head)."""
    start = head.lstrip()[:1]
    steps = b'"execution_time"' in head or (b'"action"' in head and b'"observation"' in head)
    return start == b"{" and b'"trajectory"' in head and steps and b'"mini_version"' not in head


def rule(step: dict[str, Any]) -> str:
    """Which :data:`RULES` row a step with an action is."""
    observation = step.get("observation")
    observation = observation if isinstance(observation, str) else ""
    if not observation and step.get("execution_time") in (0, 0.0, None):
        return "not executed"
    if _TIMEOUT.match(observation):
        return "timeout template"
    if any(marker in observation for marker in _MISSING):
        return "missing path"
    if "command not found" in observation:
        return "command not found"
    return "any other observation"


def _history_calls(history: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """(action text, first tool call) of each ``action`` message that records its tool call."""
    out = []
    for message in history:
        if not isinstance(message, dict) or message.get("message_type") != "action":
            continue
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls and isinstance(calls[0], dict):
            out.append((str(message.get("action") or ""), calls[0]))
    return out


def read(path: Path) -> Iterator[Run]:
    """The trajectory's one run."""
    document = json_document(path)
    steps, history, info = document.get("trajectory"), document.get("history"), document.get("info")
    if not isinstance(steps, list) or not isinstance(info, dict):
        raise TranscriptError(str(path), 1, "a SWE-agent trajectory needs trajectory and info")
    recorded = _history_calls(history if isinstance(history, list) else [])
    turns = []
    for number, step in enumerate(steps, start=1):
        if not isinstance(step, dict):
            raise TranscriptError(str(path), None, f"trajectory step {number} is not an object")
        action = step.get("action")
        action = action.strip() if isinstance(action, str) else ""
        if not action:
            turns.append(Turn(line=number, calls=()))
            continue
        tool_call: dict[str, Any] = {}
        if recorded and recorded[0][0].strip() == action:
            tool_call = recorded.pop(0)[1]
        turns.append(Turn(line=number, calls=(_call(number, action, step, tool_call),)))
    status = info.get("exit_status")
    yield Run(
        agent=KIND,
        source=str(path),
        run_id=path.name.removesuffix(".json").removesuffix(".traj"),
        turns=distinct_across_turns(turns),
        succeeded=None if not isinstance(status, str) or not status else status == "submitted",
        model=_model(document.get("replay_config")),
    )


def _call(
    number: int, action: str, step: dict[str, Any], tool_call: dict[str, Any]
) -> ImportedCall:
    function = tool_call.get("function")
    function = function if isinstance(function, dict) else {}
    name = function.get("name")
    tool = name if isinstance(name, str) and name else action.split()[0]
    call_id = tool_call.get("id")
    arguments = function.get("arguments", {"command": action})
    terminal, execution, error_type, heuristic = RULES[row := rule(step)]
    observation = step.get("observation")
    text = observation if isinstance(observation, str) and observation else None
    return ImportedCall(
        call_id=call_id if isinstance(call_id, str) and call_id else f"step{number}",
        tool=tool,
        arguments_fingerprint=fingerprint(arguments),
        status=terminal,
        execution_status=execution,
        error_type=error_type,
        error_text=v.bounded_text(text) if text and terminal is TerminalStatus.ERROR else None,
        heuristic=heuristic and row != "any other observation",
    )


def _model(replay_config: Any) -> str | None:
    """``agent.model.name`` of the replay config (a JSON string; an object in older files)."""
    if isinstance(replay_config, str) and len(replay_config) <= 1 << 20:
        try:
            replay_config = json.loads(replay_config)
        except (ValueError, RecursionError):
            return None
    try:
        name = replay_config["agent"]["model"]["name"]
    except (TypeError, KeyError):
        return None
    return name if isinstance(name, str) else None
