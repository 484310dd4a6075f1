"""The neutral form every transcript importer produces, and the error every one raises.

A transcript is a sequence of runs; a run is the model turns of one task, in
order; a turn is one assistant message and the tool calls it made together
(its *batch*, empty when the model answered without a call).  Each call is
already on the outcome contract (``docs/outcome-contract.md``): terminal
status, execution status and a classified execution error type.  How an
importer derived them is its own documented mapping; where it derives an
error type from text, ``heuristic`` says so (offline only: nothing here ever
reaches the live guard).

Arguments and outputs are kept only as a fingerprint and, for the peers'
"same error text" rule, the error text itself; the command never prints
either unless asked (``--show-content``).
"""

from __future__ import annotations

import attrs

from tool_failure_guard.guard import ExecutionStatus, TerminalStatus


class TranscriptError(Exception):
    """A file that is not a transcript of a known kind, or is damaged: names ``file:line``."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.message = message


@attrs.frozen(kw_only=True)
class ImportedCall:
    """One tool call and how it settled, on the outcome contract."""

    call_id: str
    tool: str  #: the policy tool name, as the agent names the tool
    arguments_fingerprint: str  #: a stable digest of the arguments (identical-call rules)
    status: TerminalStatus
    execution_status: ExecutionStatus
    error_type: str | None  #: the classified execution error type (None when it succeeded)
    error_text: str | None = None  #: the error text as recorded (never printed by default)
    heuristic: bool = False  #: ``error_type`` was derived from text by the importer
    mcp: bool = False  #: an MCP tool (else a native one)
    #: a record standing for a whole model message the agent refused before running
    #: anything (mini-swe-agent's format error): one record however many actions it held,
    #: and no tool call a peer's host would see, so the peers' rules never count it
    rejected_message: bool = False


@attrs.frozen(kw_only=True)
class Turn:
    """One assistant message: the calls it made together, and what the model request cost."""

    line: int  #: where the message starts in its file (1-based), for error messages
    calls: tuple[ImportedCall, ...]
    input_tokens: int | None = None  #: None where the log does not record usage
    output_tokens: int | None = None


@attrs.frozen(kw_only=True)
class Run:
    """One task an agent ran: its turns in order, and whether it succeeded where recorded."""

    agent: str  #: the importer's kind, e.g. ``claude-code``
    source: str  #: the file it came from
    run_id: str  #: the agent's own session/run id, else derived from the file
    turns: tuple[Turn, ...]
    succeeded: bool | None = None  #: None where the log does not say
    model: str | None = None  #: the model name where recorded
    #: what decided ``succeeded``: ``agent`` (the agent's own record; the importer's docs say
    #: which), a SWE-bench verdict (:mod:`~tool_failure_guard.transcripts.verdicts`), None
    outcome_from: str | None = None
