"""The coding CLIs that can host the guard: CLI name -> the module that says what its events mean.

One table, read by ``tool-failure-guard hook`` (its subcommands) and by the
runner; importing it loads no hook module.  Each module has ``NAME``,
``ROUTE`` (its telemetry route), ``EVENTS`` and ``TOOL_EVENTS`` (what the
installer registers, ``matcher: "*"`` for the tool events, or a
``settings_entries(command, timeout)`` of its own), ``SCOPES`` (``hook install
--scope`` name -> settings file) and ``handle(payload, session) -> Handled``.
"""

from __future__ import annotations

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final


HOOK_CLIS: Final[dict[str, str]] = {
    "claude-code": "tool_failure_guard.hooks.claude_code",
    "qwen-code": "tool_failure_guard.hooks.qwen_code",
    "gemini-cli": "tool_failure_guard.hooks.gemini_cli",
    "codex": "tool_failure_guard.hooks.codex",
}

#: The options of ``tool-failure-guard hook <cli>``, each taking one value: what the
#: installer writes and what it recognises as its own command line (nothing else).
HOOK_OPTIONS: Final = ("--mode", "--state-dir", "--telemetry", "--scope", "--environment")

#: CLI name -> the events that may reduce a batch (they load the core in process): the
#: hook's client hands them to the warm worker (:mod:`tool_failure_guard.hooks.client`);
#: every other event is cheap and handled in the hook's own process.
WORKER_EVENTS: Final[dict[str, frozenset[str]]] = {
    "claude-code": frozenset({"PostToolBatch"}),
    # PostToolBatch: a subagent's settles its batch (a main agent's only records its call)
    "qwen-code": frozenset({"UserPromptSubmit", "PostToolBatch", "Stop"}),
    "gemini-cli": frozenset({"BeforeModel", "AfterAgent"}),
    "codex": frozenset({"PreToolUse", "Stop"}),
}
