"""Claude Code with the guard's plugin installed from this checkout, headless, in a private HOME.

What a user does: ``claude plugin marketplace add <clone>``, ``claude plugin install
tool-failure-guard@tool-failure-guard`` (both headless), then ``tool-failure-guard hook
configure claude-code`` (records the executable the plugin runs, and the operator's
mode).  Claude Code copies the plugin into its cache; the plugin's launcher
(``plugins/tool-failure-guard/scripts/tool-failure-guard-hook``) finds the executable
``hook configure`` recorded.  The model is the local fake Messages API.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent_clis import CLAUDE_VERSIONS, claude_binary, require
from agent_fakes.anthropic_messages import FakeAnthropic, serve_anthropic
from agent_fakes.script import Turn
from claude_hook_harness import Run, headless
from transcript_capture import claude_command, claude_env

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "tool-failure-guard@tool-failure-guard"
#: The pinned Claude Code versions.
VERSIONS = CLAUDE_VERSIONS


def claude_at(version: str) -> Path:
    """The pinned Claude Code ``version``'s binary (AgentUnavailable: not installed here)."""
    return claude_binary(version=version)


def plugin_home(binary: Path, root: Path) -> tuple[Path, dict[str, str]]:
    """A private HOME with the plugin installed from this checkout; (home, environment)."""
    home = root / "home"
    home.mkdir(parents=True)
    env = claude_env(home, "http://127.0.0.1:9")
    for words in (["marketplace", "add", str(ROOT)], ["install", PLUGIN]):
        done = subprocess.run(
            [str(binary), "plugin", *words],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    return home, env


def run_plugin_claude(
    version: str,
    turns_of: Callable[[Path], Sequence[Turn]],
    *,
    base: Path,
    project_settings: dict[str, Any] | None = None,
) -> Run:
    """One ``claude -p`` with the plugin installed (the operator's config as it is now)."""
    binary = require(lambda: claude_at(version))
    root = Path(tempfile.mkdtemp(prefix="claude-plugin-", dir=base))
    home, _ = plugin_home(binary, root)
    ws = root / "ws"
    ws.mkdir()
    (ws / "present.txt").write_text("hello\n", encoding="utf-8")
    if project_settings is not None:
        (ws / ".claude").mkdir()
        (ws / ".claude" / "settings.json").write_text(json.dumps(project_settings))
    fake = FakeAnthropic(list(turns_of(ws)))
    with serve_anthropic(fake):
        env = claude_env(home, fake.base_url)
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", str(ROOT))
        env["XDG_STATE_HOME"] = str(root / "state")
        done, events = headless(claude_command(binary, ("Read", "Bash")), ws, env)
    return Run(fake.main_requests(), events, done.returncode, done.stderr, root)
