"""The repeated tool-failure guard for the Claude Agent SDK (the ``[claude-agent-sdk]`` extra).

The same guard as the Claude Code command hook (``docs/hooks.md``), as Python
hook callbacks in the application's process, the session kept in memory::

    from claude_agent_sdk import ClaudeAgentOptions
    from tool_failure_guard.integrations.claude_agent_sdk import (
        ProtectionStopped,
        RepeatedToolFailureHooks,
    )

    guard = RepeatedToolFailureHooks(mode="enforce")
    try:
        async for message in guard.query(prompt="Fix the build", options=ClaudeAgentOptions()):
            ...
    except ProtectionStopped as stopped:  # also a claude_agent_sdk.ClaudeSDKError
        ...  # stopped.loop_type, stopped.key, stopped.report
    report = guard.report_of()  # this task's last query's (or pass its session id)

One object serves any number of concurrent queries: each query ends by its own
session's stop, and a session's live state is released when its query ends.  Each
agent loop (the main agent, each subagent of ``ClaudeAgentOptions(agents=...)``) has
its own guard: a subagent's stop ends that subagent only, the main agent is told, the
query goes on (``report.stopped_subagents`` names it).
Or register ``guard.hooks()`` in your own ``ClaudeAgentOptions(hooks=...)`` and
read ``guard.stop_of(result.session_id)`` after the run.  What each event means is
:mod:`tool_failure_guard.hooks.claude_code`'s, shared with the command hook.
Never imported by the agent or the core.
"""

from tool_failure_guard._extras import require_extra

require_extra("claude-agent-sdk", "claude_agent_sdk")  # else: pip install hint

from tool_failure_guard.integrations._api import GuardStop, RunReport
from tool_failure_guard.integrations.claude_agent_sdk._hooks import (
    EVENTS,
    LOGGER,
    ROUTE,
    ProtectionStopped,
    RepeatedToolFailureHooks,
    report_of,
    stop_of,
)

__all__ = [
    "EVENTS",
    "LOGGER",
    "ROUTE",
    "GuardStop",
    "ProtectionStopped",
    "RepeatedToolFailureHooks",
    "RunReport",
    "report_of",
    "stop_of",
]
