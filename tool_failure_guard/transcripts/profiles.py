"""Which guard a replay runs: the one the agent's host would have run, built by that host's code.

A log is replayed with the protection its agent would have had, not one guard for all:

- ``acp``: the ACP agent's (the original's) limits, for Qwen Code's logs and this project's
  own session history: the repeated-failure guard in its mode, and the always-on backstops
  (provider replays, the invalid-parameter stop, the tool-call cap) acting in every mode.
  Built by the agent's own :func:`~tool_failure_guard.session.pipeline.protection.
  prompt_protection` with the cap of an agent started without settings.
- ``hook``: what ``tool-failure-guard hook claude-code|qwen-code|gemini-cli|codex`` runs
  (:func:`tool_failure_guard.hooks.replay.new_protection`): no tool-call cap, no
  invalid-parameter stop (the CLI has its own), provider replays only in warn/enforce; for
  Claude Code, Codex and Gemini CLI logs.
- ``adapter``: the framework adapters' defaults (:func:`~tool_failure_guard.
  framework_protection.protection_for_run` with :data:`~tool_failure_guard.
  framework_protection.DEFAULT_TOOL_CALL_CAP` and ``DEFAULT_INVALID_PARAMS_LIMIT``, both
  off, what every adapter's constructor takes): for agents
  that run their own loop (mini-swe-agent, SWE-agent, OpenHands), where the guard would be
  installed as a library.

No number is restated here: each profile calls the constructor its host calls, so a
change to a host's limits changes its replay.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import attrs

from tool_failure_guard.core import PromptProtection
from tool_failure_guard.guard import GuardMode

ACP = "acp"
HOOK = "hook"
ADAPTER = "adapter"


@attrs.frozen
class Profile:
    name: str
    host: str  #: what runs this guard, as the report names it
    build: Callable[[GuardMode], PromptProtection] = attrs.field(eq=False, repr=False)

    def protection(self, mode: GuardMode) -> PromptProtection:
        """A fresh protection for one run in ``mode``, as the host builds it."""
        return self.build(mode)


@functools.cache
def _acp_cap() -> int:
    from tool_failure_guard.session.pipeline.protection import default_tool_call_cap

    return default_tool_call_cap()


def _acp(mode: GuardMode) -> PromptProtection:
    from tool_failure_guard.session.pipeline.protection import prompt_protection

    return prompt_protection(mode, tool_call_cap=_acp_cap())


def _hook(mode: GuardMode) -> PromptProtection:
    from tool_failure_guard.hooks.replay import new_protection

    return new_protection(str(mode))


def _adapter(mode: GuardMode) -> PromptProtection:
    from tool_failure_guard.framework_protection import (
        DEFAULT_INVALID_PARAMS_LIMIT,
        DEFAULT_TOOL_CALL_CAP,
        protection_for_run,
    )

    return protection_for_run(
        mode,
        tool_call_cap=DEFAULT_TOOL_CALL_CAP,
        invalid_params_limit=DEFAULT_INVALID_PARAMS_LIMIT,
    )


PROFILES: dict[str, Profile] = {
    ACP: Profile(ACP, "the ACP agent (the original's limits)", _acp),
    HOOK: Profile(HOOK, "the coding-CLI hook", _hook),
    ADAPTER: Profile(ADAPTER, "a framework adapter's defaults", _adapter),
}

#: importer kind -> the profile its agent's guard would run with (``--profile`` overrides).
BY_KIND: dict[str, str] = {
    "qwen-code": ACP,
    "tool-failure-guard": ACP,
    "claude-code": HOOK,
    "codex": HOOK,
    "gemini-cli": HOOK,
    "mini-swe-agent": ADAPTER,
    "swe-agent": ADAPTER,
    "openhands": ADAPTER,
}


def profile(name: str) -> Profile:
    """The profile called ``name``; a :class:`ValueError` naming the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILES)}") from None


def for_kind(kind: str) -> Profile:
    """The profile of an importer ``kind``'s logs.

    A kind not in :data:`BY_KIND` (every importer's is: a test says so) is an agent
    running its own loop, with the guard as a library: ``adapter``.
    """
    return PROFILES[BY_KIND.get(kind, ADAPTER)]
