"""The ACP agent's protection of one prompt, built in one place.

The agent (:class:`~tool_failure_guard.session.pipeline.prompt.PromptRun`) builds each
prompt's :class:`~tool_failure_guard.core.PromptProtection` here, and ``transcripts
--profile acp`` replays a log with the very same: the original's always-on backstops
(provider call-id replays, the invalid-parameter stop at the core's limit, the session's
tool-call cap) act in every mode, as in Qwen Code's ACP agent.  No ACP SDK import, so the
lean install's ``transcripts`` can build it.
"""

from __future__ import annotations

from tool_failure_guard.core import CallIdDeduplicator, PromptProtection
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.session.config.envconfig import EnvConfig
from tool_failure_guard.session.config.settings import resolve_settings


def prompt_protection(
    mode: GuardMode, *, tool_call_cap: int, dedup: CallIdDeduplicator | None = None
) -> PromptProtection:
    """One prompt's protection in the ACP agent: the core's own limits, acting in every mode."""
    return PromptProtection(mode, dedup=dedup, tool_call_cap=tool_call_cap)


def default_tool_call_cap() -> int:
    """The cap of an agent started without ``--max-tool-calls`` or a settings variable."""
    return resolve_settings(EnvConfig(values={}, origins={})).tool_call_cap
