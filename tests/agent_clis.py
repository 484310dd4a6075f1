"""Where the real coding-agent CLIs are, and whether they can run here.

``make test`` (and ``make setup``) installs Claude Code, the Codex CLI, Gemini CLI and the
Copilot CLI at the pinned versions (``.agents/package-lock.json``) with ``npm ci --prefix
.agents``: the coding-CLI hook tests run them; :data:`AGENTS_PREFIX_ENV` names another npm
prefix holding them.  :func:`require` skips the calling test saying how to get them, or
fails it where ``TOOL_FAILURE_GUARD_REQUIRE_AGENT_CLIS`` is ``1``.  The Python agents the
re-capture tests also run (mini-swe-agent, the OpenHands SDK) come with ``make agents``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

#: ``1``: a missing agent fails its re-capture test instead of skipping it (``make agents``).
REQUIRE_ENV_VAR = "TOOL_FAILURE_GUARD_REQUIRE_AGENT_CLIS"

ROOT = Path(__file__).resolve().parent.parent
#: Where ``make setup`` installs both CLIs (``npm ci --prefix .agents``); the environment
#: variable points elsewhere (another npm prefix holding both).
AGENTS_PREFIX_ENV = "TOOL_FAILURE_GUARD_AGENTS_PREFIX"
DEFAULT_PREFIX = ROOT / ".agents"
CLAUDE_VERSION = "2.1.197"
#: The newest Claude Code on the npm registry when it was pinned (issue 37): installed beside
#: the pinned one under an npm alias, so the hook tests run both.
CLAUDE_NEWEST_VERSION = "2.1.337"
#: Every Claude Code the hook tests run, and the ``node_modules`` folder each is installed in.
CLAUDE_FOLDERS = {
    CLAUDE_VERSION: "@anthropic-ai/claude-code",
    CLAUDE_NEWEST_VERSION: f"claude-code-{CLAUDE_NEWEST_VERSION}",
}
CLAUDE_VERSIONS = tuple(CLAUDE_FOLDERS)
CODEX_VERSION = "0.169.0"
GEMINI_VERSION = "0.61.0"
COPILOT_VERSION = "1.0.102"
HOW_TO_GET_THEM = (
    "needs Node.js 20+ with npm and the pinned CLIs: install Node.js, then run `make agents` "
    "(runs `npm ci --prefix .agents`)"
)


class AgentUnavailable(RuntimeError):
    """A CLI cannot run here; the message says why and how to get it."""


def _prefix() -> Path:
    value = os.environ.get(AGENTS_PREFIX_ENV)
    return Path(value) if value else DEFAULT_PREFIX


def _package(name: str, version: str, entry: str, folder: str | None = None) -> Path:
    """``entry`` of package ``name`` at ``version``, installed in ``node_modules/<folder>``
    (the package's own name unless an npm alias installed it elsewhere)."""
    if shutil.which("node") is None:
        raise AgentUnavailable(f"{name} unavailable (node is not on PATH); {HOW_TO_GET_THEM}")
    package = _prefix() / "node_modules" / (folder or name)
    manifest = package / "package.json"
    if not manifest.is_file() or not (package / entry).is_file():
        raise AgentUnavailable(
            f"{name} unavailable (not installed in {package}); {HOW_TO_GET_THEM}"
        )
    found = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    if found != version:
        raise AgentUnavailable(
            f"{name} {found} is installed, the fixtures pin {version}; run `make setup`"
        )
    return package / entry


def claude_binary(version: str = CLAUDE_VERSION) -> Path:
    """Claude Code's native binary (the package's ``bin/claude.exe``) at ``version``, one of
    :data:`CLAUDE_VERSIONS`."""
    if version not in CLAUDE_FOLDERS:
        raise ValueError(f"Claude Code {version} is not pinned; pinned: {CLAUDE_VERSIONS}")
    return _package("@anthropic-ai/claude-code", version, "bin/claude.exe", CLAUDE_FOLDERS[version])


def codex_script() -> Path:
    """The Codex CLI's launcher (``bin/codex.js``, which runs the platform's native binary)."""
    return _package("@openai/codex", CODEX_VERSION, "bin/codex.js")


def gemini_script() -> Path:
    """Gemini CLI's bundle entry (``bundle/gemini.js``, run with node)."""
    return _package("@google/gemini-cli", GEMINI_VERSION, "bundle/gemini.js")


def copilot_script() -> Path:
    """The Copilot CLI's loader (``npm-loader.js``, which runs the platform's native binary)."""
    return _package("@github/copilot", COPILOT_VERSION, "npm-loader.js")


def require(find: Callable[[], Path]) -> Path:
    """``find()``; else skip the calling test with why (fail instead on CI)."""
    try:
        return find()
    except AgentUnavailable as exc:
        if os.environ.get(REQUIRE_ENV_VAR) == "1":
            pytest.fail(f"{exc} ({REQUIRE_ENV_VAR}=1)")
        pytest.skip(str(exc))
