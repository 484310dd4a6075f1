"""mini-swe-agent trajectories (PyPI ``mini-swe-agent``: ``*.traj.json``, ``mini-swe-agent-1.1``).

Version 1 trajectories (``trajectory_format`` ``mini-swe-agent-1``, 1.x: text
actions, no ``extra.actions``) are read by
:mod:`~tool_failure_guard.transcripts.importers.mini_swe_agent_text`; what
follows is the 2.x format.

One JSON object per run: ``info`` (``mini_version``, ``exit_status``,
``config.model.model_name``) and ``messages``, the conversation as the agent
kept it.  An ``assistant`` message's ``extra.actions`` are the bash commands
it ran together (its batch; ``tool_call_id`` with the tool-call models), each
answered by an observation message (``role`` ``tool`` with that id, or
``user`` in order for the text-based models) whose ``extra`` holds the
``returncode`` and, when the command could not run to its end,
``exception_info`` / ``exception_type``.  ``extra.response.usage`` holds the
model request's tokens.

Mapping (``docs/transcripts.md``): from ``returncode`` and the exception's
*type*, never from output text; the tool is ``bash``:

- :data:`OBSERVATION_TABLE` per observation;
- a ``FormatError`` message (``extra.interrupt_type``) whose recorded
  response held tool calls is a rejected message: one record refused before
  running (``error`` / ``not_started`` / ``invalid_tool_params``, however many
  calls it held; the peers' rules never see it); without tool calls it is a
  turn without calls (a model answer);
- the last batch when the run ``Submitted``: the first unanswered action is
  the submitting command (success), the ones after it never ran
  (``error`` / ``not_started``); any other unanswered action is ``error`` /
  ``unknown``;
- success: ``info.exit_status`` ``Submitted`` true, another status false,
  none (a run still going) unknown.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from tool_failure_guard.agent_outcomes.vocabulary import bounded_text
from tool_failure_guard.guard import ExecutionStatus, TerminalStatus
from tool_failure_guard.transcripts.importers import mini_swe_agent_text
from tool_failure_guard.transcripts.importers._read import as_int, fingerprint, json_document
from tool_failure_guard.transcripts.model import ImportedCall, Run, TranscriptError, Turn

KIND = "mini-swe-agent"
TOOL = "bash"

SUCCESS = (TerminalStatus.SUCCESS, ExecutionStatus.SUCCESS, None)
#: what an observation says -> (terminal, execution, error type)
OBSERVATION_TABLE: dict[str, tuple[TerminalStatus, ExecutionStatus, str | None]] = {
    "returncode 0": SUCCESS,
    "returncode not 0": (TerminalStatus.ERROR, ExecutionStatus.ERROR, "shell_execute_error"),
    "exception TimeoutExpired": (TerminalStatus.ERROR, ExecutionStatus.ERROR, "execution_timeout"),
    "another exception": (TerminalStatus.ERROR, ExecutionStatus.ERROR, "unhandled_exception"),
    "action was not executed": (TerminalStatus.ERROR, ExecutionStatus.NOT_STARTED, None),
}
REFUSED = (TerminalStatus.ERROR, ExecutionStatus.NOT_STARTED, "invalid_tool_params")
UNANSWERED = (TerminalStatus.ERROR, ExecutionStatus.UNKNOWN, None)
NOT_RUN = (TerminalStatus.ERROR, ExecutionStatus.NOT_STARTED, None)
_NOT_EXECUTED = "action was not executed"


#: A trajectory is one JSON object whose first key is ``info`` (``json.dumps`` of the dict
#: the agent builds); its ``trajectory_format`` is the last key, read from the file's tail.
_FIRST_KEY = re.compile(rb'^\s*\{\s*"info"\s*:\s*\{')
_FORMAT = re.compile(rb'"trajectory_format"\s*:\s*"mini-swe-agent-')
TAIL_BYTES = 4096


def _tail(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - TAIL_BYTES))
            return handle.read(TAIL_BYTES)
    except OSError:
        return b""


def sniff(path: Path, head: bytes) -> bool:
    """A mini-swe-agent trajectory: a JSON object opening with ``info``, and its format named at
    the end, or ``info.mini_version`` / its class names near the start (a JSON Lines file such
    as this project's own history, whose records may mention them, never is one)."""
    if _FIRST_KEY.match(head) is None:
        return False
    if b'"mini_version"' in head or b'"minisweagent.' in head:
        return True
    return _FORMAT.search(_tail(path)) is not None


def observation_row(extra: dict[str, Any]) -> str:
    """Which :data:`OBSERVATION_TABLE` row an observation's ``extra`` is."""
    exception = extra.get("exception_type")
    if isinstance(exception, str) and exception:
        return "exception TimeoutExpired" if exception == "TimeoutExpired" else "another exception"
    if extra.get("exception_info") == _NOT_EXECUTED:
        return _NOT_EXECUTED
    if extra.get("exception_info"):
        return "another exception"
    return "returncode 0" if extra.get("returncode") == 0 else "returncode not 0"


def _usage(extra: dict[str, Any]) -> tuple[int | None, int | None]:
    response = extra.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None, None
    return as_int(usage.get("prompt_tokens")), as_int(usage.get("completion_tokens"))


def _refused_calls(extra: dict[str, Any]) -> list[dict[str, Any]]:
    response = extra.get("response")
    try:
        calls = response["choices"][0]["message"].get("tool_calls")  # type: ignore[index]
    except (TypeError, KeyError, IndexError, AttributeError):
        return []
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _observation(message: dict[str, Any]) -> dict[str, Any] | None:
    extra = message.get("extra")
    if (
        message.get("role") in ("tool", "user")
        and isinstance(extra, dict)
        and "returncode" in extra
    ):
        return extra
    return None


def read(path: Path) -> Iterator[Run]:
    """The trajectory's one run."""
    document = json_document(path)
    info = document.get("info")
    messages = document.get("messages")
    if not isinstance(info, dict) or not isinstance(messages, list):
        raise TranscriptError(str(path), 1, "a mini-swe-agent trajectory needs info and messages")
    exit_status = info.get("exit_status")
    if _version_1(document, messages):
        yield _run(path, info, mini_swe_agent_text.turns(messages, exit_status))
        return
    turns: list[Turn] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        if not isinstance(message, dict):
            raise TranscriptError(str(path), None, f"message {index} is not an object")
        raw_extra = message.get("extra")
        extra: dict[str, Any] = raw_extra if isinstance(raw_extra, dict) else {}
        index += 1
        ordinal = index  # 1-based message number: a JSON document has no useful line
        if message.get("role") == "assistant":
            actions = extra.get("actions")
            if not isinstance(actions, list):
                actions = []
            answers: list[dict[str, Any]] = []
            while index < len(messages) and isinstance(messages[index], dict):
                observed = _observation(messages[index])
                if observed is None:
                    break
                answers.append(observed)
                index += 1
            following = messages[index] if index < len(messages) else None
            last = not isinstance(following, dict) or following.get("role") == "exit"
            submitted = last and exit_status == "Submitted"
            calls = _batch(actions, answers, len(turns), submitted)
            tokens_in, tokens_out = _usage(extra)
            turns.append(
                Turn(line=ordinal, calls=calls, input_tokens=tokens_in, output_tokens=tokens_out)
            )
        elif extra.get("interrupt_type") == "FormatError" and "response" in extra:
            held = _refused_calls(extra)
            content = message.get("content")
            # one record for the rejected message, however many calls it held: nothing ran
            refused = (
                [
                    attrs.evolve(
                        _imported(
                            str(held[0].get("id") or f"t{len(turns)}.0"),
                            fingerprint([_arguments(c) for c in held]),
                            REFUSED,
                        ),
                        rejected_message=True,
                        error_text=bounded_text(content) if isinstance(content, str) else None,
                    )
                ]
                if held
                else []
            )
            tokens_in, tokens_out = _usage(extra)
            turns.append(
                Turn(
                    line=ordinal,
                    calls=tuple(refused),
                    input_tokens=tokens_in,
                    output_tokens=tokens_out,
                )
            )
    yield _run(path, info, turns)


def _version_1(document: dict[str, Any], messages: list[Any]) -> bool:
    """Text actions: the format says version 1, or (older 1.x, no format) no structured ones."""
    form = document.get("trajectory_format")
    if form == "mini-swe-agent-1":
        return True
    if form is not None:
        return False
    return not any(
        isinstance(m, dict)
        and isinstance(m.get("extra"), dict)
        and isinstance(m["extra"].get("actions"), list)
        for m in messages
    )


def _run(path: Path, info: dict[str, Any], turns: list[Turn]) -> Run:
    exit_status = info.get("exit_status")
    model = None
    config = info.get("config")
    if isinstance(config, dict) and isinstance(config.get("model"), dict):
        name = config["model"].get("model_name")
        model = name if isinstance(name, str) else None
    return Run(
        agent=KIND,
        source=str(path),
        run_id=Path(path).name.removesuffix(".json").removesuffix(".traj"),
        turns=tuple(turns),
        succeeded=None
        if not isinstance(exit_status, str) or not exit_status
        else exit_status == "Submitted",
        model=model,
    )


def _arguments(call: dict[str, Any]) -> Any:
    function = call.get("function")
    return function.get("arguments") if isinstance(function, dict) else None


def _imported(
    call_id: str, args: str, axes: tuple[TerminalStatus, ExecutionStatus, str | None]
) -> ImportedCall:
    terminal, execution, error_type = axes
    return ImportedCall(
        call_id=call_id,
        tool=TOOL,
        arguments_fingerprint=args,
        status=terminal,
        execution_status=execution,
        error_type=error_type,
    )


def _batch(
    actions: list[Any], answers: list[dict[str, Any]], turn: int, submitted: bool
) -> tuple[ImportedCall, ...]:
    ordered = answers
    calls = []
    for number, action in enumerate(actions):
        if not isinstance(action, dict):
            continue
        command = action.get("command")
        call_id = action.get("tool_call_id")
        call_id = call_id if isinstance(call_id, str) and call_id else f"t{turn}.{number}"
        args = fingerprint({"command": command})
        if number < len(ordered):
            axes = OBSERVATION_TABLE[observation_row(ordered[number])]
            text = str(
                ordered[number].get("raw_output") or ordered[number].get("exception_info") or ""
            )
        elif submitted:
            axes = SUCCESS if number == len(ordered) else NOT_RUN
            text = ""
        else:
            axes, text = UNANSWERED, ""
        call = _imported(call_id, args, axes)
        if axes[0] is TerminalStatus.ERROR:
            call = ImportedCall(
                call_id=call.call_id,
                tool=call.tool,
                arguments_fingerprint=call.arguments_fingerprint,
                status=call.status,
                execution_status=call.execution_status,
                error_type=call.error_type,
                error_text=text or None,
            )
        calls.append(call)
    return tuple(calls)
