"""mini-swe-agent 1.x trajectories (``"trajectory_format": "mini-swe-agent-1"``): text actions.

The format of the public SWE-bench bash-only runs.  Version 1 keeps no
structured actions: each ``assistant`` message is one model response whose
action is the one ```` ```bash ```` block in its text (the agent's own rule,
:data:`ACTION`, the regular expression of its ``parse_action``), and the next
``user`` message says what became of it, rendered by the agent's templates:

- ``<returncode>N</returncode>`` first (``action_observation_template`` of
  every shipped config; the bare ``AgentConfig`` default renders the output
  dict, ``'returncode': N``): the command ran and exited with N;
- "timed out and has been killed" (``timeout_template``): it ran out of time;
- not exactly one block: the agent raised ``FormatError`` and ran nothing
  (its template says "EXACTLY ONE action"); two or more blocks are one
  rejected message, one record refused before running (never one call per
  block: nothing ran, and no peer may see the blocks as repeated calls), none
  is a model answer without a call;
- the run's last response when ``info.exit_status`` is ``Submitted``: its
  command printed the submission marker (the agent ends the run there, so
  no observation follows): it ran and succeeded;
- anything else (a step or cost limit, an exception, the end of the file):
  nothing is known.

Mapping (``docs/transcripts.md``): :data:`ROWS`; the tool is ``bash``; a
turn's line is the message's 1-based position in ``messages``; tokens are the
response's ``usage`` where the model recorded it (``extra.response``).
"""

from __future__ import annotations

import re
from typing import Any, Final

from tool_failure_guard.agent_outcomes.vocabulary import bounded_text
from tool_failure_guard.guard import ExecutionStatus, TerminalStatus
from tool_failure_guard.transcripts.importers._read import as_int, fingerprint
from tool_failure_guard.transcripts.model import ImportedCall, Turn

TOOL: Final = "bash"
#: The agent's own action rule (``DefaultAgent.parse_action`` in 1.x).  Its lazy body
#: after a greedy ``\s*`` backtracks quadratically on hostile text (15 s on 176 KB), so
#: :func:`actions` finds exactly what ``ACTION.findall`` finds, in one pass.
ACTION: Final = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_OPEN: Final = "```bash"
_CLOSE: Final = "\n```"
_SPACE: Final = re.compile(r"\s*")  # alone, with nothing after it: never backtracks
_RETURNCODE: Final = re.compile(r"^\s*<returncode>\s*(-?\d+)\s*</returncode>")
_RETURNCODE_DICT: Final = re.compile(r"'returncode':\s*(-?\d+)")
_TIMEOUT: Final = "timed out and has been killed"

_Axes = tuple[TerminalStatus, ExecutionStatus, str | None, bool]  # + heuristic
#: what the next message says -> (terminal, execution, error type, heuristic)
ROWS: Final[dict[str, _Axes]] = {
    "returncode 0": (TerminalStatus.SUCCESS, ExecutionStatus.SUCCESS, None, False),
    "returncode not 0": (TerminalStatus.ERROR, ExecutionStatus.ERROR, "shell_execute_error", False),
    "timeout notice": (TerminalStatus.ERROR, ExecutionStatus.ERROR, "execution_timeout", True),
    "format error, two or more blocks (one record)": (
        TerminalStatus.ERROR,
        ExecutionStatus.NOT_STARTED,
        "invalid_tool_params",
        False,
    ),
    "last response of a Submitted run": (
        TerminalStatus.SUCCESS,
        ExecutionStatus.SUCCESS,
        None,
        False,
    ),
    "anything else": (TerminalStatus.ERROR, ExecutionStatus.UNKNOWN, None, False),
}


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # a provider's content blocks
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b
        )
    return ""


def _usage(message: dict[str, Any]) -> tuple[int | None, int | None]:
    extra = message.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None, None
    return as_int(usage.get("prompt_tokens")), as_int(usage.get("completion_tokens"))


def actions(text: str) -> list[str]:
    """``ACTION.findall(text)``, in time linear in ``len(text)``.

    At an opening ```` ```bash ```` the pattern's ``\\s*\\n`` ends at the last newline
    of the whitespace after it (the greedy ``\\s*`` gives back as little as it can), and
    the body runs to the first newline and fence after that.  Only when there is none may
    it end at the newline that closes the whitespace itself (the fence right after it),
    the body then starting after the newline before that one.  An opening with no closing
    fence after it means no later opening has one either: the search ends there.
    Every scan moves forward, so each character is looked at a bounded number of times.
    """
    found: list[str] = []
    position = 0
    while True:
        start = text.find(_OPEN, position)
        if start < 0:
            return found
        after = start + len(_OPEN)
        space = _SPACE.match(text, after)
        end_of_space = space.end() if space is not None else after
        newline = text.rfind("\n", after, end_of_space)
        if newline < 0:  # no newline before the body: no action starts here
            position = after
            continue
        body = newline + 1
        close = text.find(_CLOSE, body)
        if close < 0:
            earlier = text.rfind("\n", after, newline)
            fenced = newline == end_of_space - 1 and text.startswith("```", end_of_space)
            if not (fenced and earlier >= 0):
                return found
            body, close = earlier + 1, newline
        found.append(text[body:close])
        position = close + len(_CLOSE)


def row(blocks: int, answer: str | None, last_submitted: bool) -> str:
    """Which :data:`ROWS` row a response with ``blocks`` actions and the ``answer`` after it is."""
    if blocks != 1:
        return "format error, two or more blocks (one record)"
    if answer is not None:
        found = _RETURNCODE.match(answer) or _RETURNCODE_DICT.search(answer[:200])
        if found is not None:
            return "returncode 0" if int(found.group(1)) == 0 else "returncode not 0"
        if _TIMEOUT in answer:
            return "timeout notice"
    if last_submitted:
        return "last response of a Submitted run"
    return "anything else"


def turns(messages: list[Any], exit_status: Any) -> list[Turn]:
    """The turns of a version 1 trajectory's messages."""
    positions = [
        n for n, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"
    ]
    out: list[Turn] = []
    for index in positions:
        message = messages[index]
        blocks = actions(_text(message))
        after = messages[index + 1] if index + 1 < len(messages) else None
        answer = _text(after) if isinstance(after, dict) and after.get("role") == "user" else None
        last = index == positions[-1] and exit_status == "Submitted"
        kind = row(len(blocks), answer, last)
        terminal, execution, error_type, heuristic = ROWS[kind]
        rejected = len(blocks) > 1
        # a rejected message is one record (its blocks' commands in one fingerprint)
        arguments = (
            [{"commands": [b.strip() for b in blocks]}]
            if rejected
            else [{"command": b.strip()} for b in blocks]
        )
        calls = tuple(
            ImportedCall(
                call_id=f"t{len(out)}.{number}",
                tool=TOOL,
                arguments_fingerprint=fingerprint(argument),
                status=terminal,
                execution_status=execution,
                error_type=error_type,
                error_text=bounded_text(answer)
                if terminal is TerminalStatus.ERROR and answer
                else None,
                heuristic=heuristic,
                rejected_message=rejected,
            )
            for number, argument in enumerate(arguments)
        )
        tokens_in, tokens_out = _usage(message)
        out.append(
            Turn(line=index + 1, calls=calls, input_tokens=tokens_in, output_tokens=tokens_out)
        )
    return out
