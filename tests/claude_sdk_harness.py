"""The Claude Agent SDK (0.2.190) with its bundled Claude Code against the local fake Anthropic
Messages API: one private workspace per query, the options that point the CLI at the fake."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import attrs
from agent_fakes.anthropic_messages import FakeAnthropic
from claude_agent_sdk import ClaudeAgentOptions


@attrs.frozen
class Workspace:
    """A query's private HOME and working folder (``present.txt`` exists, ``missing.txt`` not)."""

    root: Path
    home: Path
    ws: Path

    @classmethod
    def make(cls, base: Path) -> Workspace:
        root = Path(tempfile.mkdtemp(prefix="sdk-", dir=base))
        home, ws = root / "home", root / "ws"
        home.mkdir()
        ws.mkdir()
        (ws / "present.txt").write_text("hello\n")
        return cls(root, home, ws)

    @property
    def missing(self) -> str:
        return str(self.ws / "missing.txt")

    @property
    def present(self) -> str:
        return str(self.ws / "present.txt")


def sdk_options(fake: FakeAnthropic, place: Workspace, **more: Any) -> ClaudeAgentOptions:
    """Options running the bundled CLI in ``place`` against ``fake`` (served already)."""
    return ClaudeAgentOptions(
        cwd=str(place.ws),
        model="claude-sonnet-4-5",
        allowed_tools=more.pop("allowed_tools", ["Read"]),
        setting_sources=[],
        env={
            "HOME": str(place.home),
            "ANTHROPIC_BASE_URL": fake.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
        },
        **more,
    )
