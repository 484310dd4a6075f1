"""The protection of one framework run: what every framework adapter builds, host-neutral.

The framework adapters (``tool_failure_guard.integrations.*``) and ``transcripts
--profile adapter`` (which replays an own-loop agent's logs with the guard it
would run) both build a run's :class:`~tool_failure_guard.core.PromptProtection`
here, so the replay runs the adapters' very constructor and defaults; it lives
below the hosts so that nothing outside ``integrations`` imports an adapter
module (the import graph's rule).
"""

from __future__ import annotations

from tool_failure_guard.core import CallIdDeduplicator, PromptProtection
from tool_failure_guard.guard import GuardMode

#: Every adapter's defaults for ``tool_call_cap`` and ``invalid_params_limit``: off, since
#: each framework counts turns and retries itself.  The adapters' constructors take these
#: as their defaults, and ``transcripts --profile adapter`` replays logs with them.
DEFAULT_TOOL_CALL_CAP: int | None = None
DEFAULT_INVALID_PARAMS_LIMIT: int | None = None


def protection_for_run(
    mode: GuardMode,
    *,
    tool_call_cap: int | None,
    invalid_params_limit: int | None,
    dedup: CallIdDeduplicator | None = None,
) -> PromptProtection:
    """The core of one framework run: every protection follows the mode."""
    return PromptProtection(
        mode,
        dedup=dedup,
        tool_call_cap=tool_call_cap,
        invalid_params_limit=invalid_params_limit,
        limits_follow_mode=True,
    )
