"""Install hints: a part behind an extra that is not installed names the extra to install.

``pip install tool-failure-guard`` is the lean install: the guard, the core, the chart,
telemetry records and sinks (the OpenTelemetry API only) and the adapters' own code.  Each
other part needs an extra of ``pyproject.toml``; importing or running it without that extra
raises :class:`MissingExtra` (an ``ImportError``) whose message is the ``pip install`` line,
instead of a bare ``No module named 'langchain'``.

:func:`require_extra` only looks the modules up (``importlib.util.find_spec``), so a part
that calls it first pays nothing when its extra is there.
"""

from __future__ import annotations

import importlib.util
from typing import Final

DISTRIBUTION: Final = "tool-failure-guard"

#: extra -> what it is for (the first words of the hint)
PARTS: Final[dict[str, str]] = {
    "agent": "the ACP agent (`tool-failure-guard agent`, `demo`, `bench`)",
    "telemetry": "telemetry built by name (console, file:PATH)",
    "otlp": "OTLP telemetry export",
    "rollout": "`tool-failure-guard rollout`",
    "clickhouse": "`rollout --clickhouse`",
    "pydantic-ai": "tool_failure_guard.integrations.pydantic_ai",
    "langchain": "tool_failure_guard.integrations.langchain",
    "openai-agents": "tool_failure_guard.integrations.openai_agents",
    "claude-agent-sdk": "tool_failure_guard.integrations.claude_agent_sdk",
    "eval": "the real-model evaluation",
}


def install_hint(extra: str) -> str:
    """``pip install 'tool-failure-guard[EXTRA]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class MissingExtra(ImportError):
    """A part's optional dependency is missing; the message names the extra that brings it."""

    def __init__(self, extra: str, missing: str) -> None:
        self.extra = extra
        part = PARTS.get(extra, f"the {extra!r} extra")
        super().__init__(
            f"{part} needs {missing!r}, which is not installed: {install_hint(extra)}",
            name=missing,
        )


def _absent(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a parent is missing or is no package
        return True


def require_extra(extra: str, *modules: str) -> None:
    """Raise :class:`MissingExtra` for the first of ``modules`` that cannot be imported."""
    for module in modules:
        if _absent(module):
            raise MissingExtra(extra, module)


#: The agent's own imports (acp, mcp, the model provider, argument checking, its telemetry).
AGENT_MODULES: Final = ("acp", "mcp", "openai", "jsonschema", "regex", "opentelemetry.sdk")
