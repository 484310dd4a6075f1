"""Install hints: a part behind an extra that is not installed names the extra to install.

The package alone is the lean install: the guard, the core, the chart,
telemetry records and sinks (the OpenTelemetry API only) and the adapters' own code.  Each
other part needs an extra of ``pyproject.toml``; importing or running it without that extra
raises :class:`MissingExtra` (an ``ImportError``) whose message is the ``pip install`` line,
instead of a bare ``No module named 'langchain'``.  The line works the way this copy was
installed (the package is not on PyPI): read from the distribution's ``direct_url.json``
(PEP 610), an editable checkout gets ``pip install -e '/its/checkout[EXTRA]'``, a checkout
or wheel file ``pip install '/its/path[EXTRA]'``, a VCS URL ``pip install
'tool-failure-guard[EXTRA] @ git+URL'``; from an index, or when nothing says, the name.

:func:`require_extra` only looks the modules up (``importlib.util.find_spec``), so a part
that calls it first pays nothing when its extra is there.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlsplit

DISTRIBUTION: Final = "tool-failure-guard"

#: extra -> what it is for (the first words of the hint)
PARTS: Final[dict[str, str]] = {
    "agent": "the ACP agent (`tool-failure-guard agent`, `demo`)",
    "telemetry": "telemetry built by name (console, file:PATH)",
    "otlp": "OTLP telemetry export",
    "rollout": "`tool-failure-guard rollout`",
    "clickhouse": "`rollout --clickhouse`",
    "pydantic-ai": "tool_failure_guard.integrations.pydantic_ai",
    "langchain": "tool_failure_guard.integrations.langchain",
    "openai-agents": "tool_failure_guard.integrations.openai_agents",
    "claude-agent-sdk": "tool_failure_guard.integrations.claude_agent_sdk",
    "eval": "the real-model evaluation",
    "plot": "`transcripts --plot`",
}


def install_hint(extra: str) -> str:
    """The ``pip install`` line that adds ``extra`` to this copy, the way it was installed."""
    try:
        direct_url = importlib.metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, never installed
        return _source_tree_hint(extra)
    return hint_for(direct_url, extra)


def hint_for(direct_url: str | None, extra: str) -> str:
    """The ``pip install`` line for ``extra``, given the text of ``direct_url.json`` (or None)."""
    by_name = f"pip install '{DISTRIBUTION}[{extra}]'"
    if not direct_url:
        return by_name  # installed from an index
    try:
        data = json.loads(direct_url)
        url = str(data["url"])
    except (ValueError, KeyError, TypeError):
        return by_name
    if "vcs_info" in data:
        vcs = str(data["vcs_info"].get("vcs", "git"))
        return f"pip install '{DISTRIBUTION}[{extra}] @ {vcs}+{url}'"
    parts = urlsplit(url)
    if parts.scheme != "file":
        return f"pip install '{DISTRIBUTION}[{extra}] @ {url}'"
    path = unquote(parts.path)
    if data.get("dir_info", {}).get("editable"):
        return f"pip install -e '{path}[{extra}]'"
    return f"pip install '{path}[{extra}]'"


def _source_tree_hint(extra: str) -> str:
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file():
        return f"pip install -e '{root}[{extra}]'"
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
