"""The guard in Claude Code's interactive terminal UI: the real CLI under a pseudo-terminal.

Claude Code runs as a user runs it (no ``-p``), in a pseudo-terminal of 50 x 160 (stdlib
``pty``), with the guard installed in ``enforce`` the documented way, against the local
fake Messages API playing four failing Reads per response.  The prompt is typed, Enter
pressed; what the terminal shows is replayed onto a screen (:mod:`tui_screen`), and it
shows the stop as docs/hooks.md says: ``PostToolBatch hook stopped continuation: <the
stop text>`` (2.1.337: ``PostToolBatch hook stopped Claude``, the text on the next line),
after the third request (the reminder went into it), and no fourth.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import termios
import time
from pathlib import Path

import pytest
from agent_clis import CLAUDE_VERSIONS, claude_binary, require
from agent_fakes.anthropic_messages import FakeAnthropic, serve_anthropic
from agent_fakes.script import Turn
from claude_hook_harness import ROOT, install, read
from transcript_capture import claude_env
from tui_screen import Screen

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)

ROWS, COLUMNS = 50, 160
#: How each version shows a PostToolBatch stop (2.1.337: its reason on the next line).
STOP_LINES = {
    "2.1.197": "PostToolBatch hook stopped continuation: ",
    "2.1.337": "PostToolBatch hook stopped Claude ",
}
API_KEY = "sk-ant-fake-key"


def _first_run_done(home: Path, ws: Path) -> None:
    """The answers a first interactive start asks for: onboarding, the key, the folder."""
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "hasCompletedOnboarding": True,
                "theme": "dark",
                "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
                "projects": {str(ws): {"hasTrustDialogAccepted": True, "allowedTools": []}},
            }
        )
    )


class Terminal:
    """A child process on a pseudo-terminal; what it printed, replayed on a screen."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.screen = Screen(ROWS, COLUMNS)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: exec at once
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))

    def read_for(self, seconds: float, until: str | None = None) -> bool:
        """Read output for up to ``seconds``; True as soon as ``until`` is on the screen."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:  # the child ended
                    return until is not None and until in self.screen.text()
                self.screen.feed(data.decode("utf-8", "replace"))
                if until is not None and until in self.screen.text():
                    return True
        return False

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        os.close(self.fd)


@pytest.mark.parametrize("version", CLAUDE_VERSIONS)
def test_the_terminal_shows_the_stop_line(version: str, tmp_path: Path) -> None:
    binary = require(lambda: claude_binary(version=version))
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    install("enforce", settings=home / ".claude" / "settings.json", state_dir=tmp_path / "st")
    _first_run_done(home, ws)
    missing = str(ws / "missing.txt")
    fake = FakeAnthropic([Turn(text="Reading.", calls=(read(missing),) * 4)] * 6)
    with serve_anthropic(fake):
        env = claude_env(home, fake.base_url)
        env.update(PYTHONPATH=os.environ.get("PYTHONPATH", str(ROOT)), TERM="xterm-256color")
        argv = [str(binary), "--model", "claude-sonnet-4-5", "--allowedTools", "Read"]
        terminal = Terminal(argv, env, ws)
        try:
            terminal.read_for(8, until="? for shortcuts")
            terminal.type("Read missing.txt")
            terminal.read_for(1)
            terminal.type("\r")
            shown = terminal.read_for(120, until="PostToolBatch hook stopped")
            terminal.read_for(2)
        finally:
            terminal.close()
    text = terminal.screen.text()
    assert shown, text[-4000:]
    # the line as shown, wrapped at the terminal's width: read with its wraps joined
    shown_line = STOP_LINES[version] + shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
    assert shown_line in " ".join(text.split())
    requests = fake.main_requests()
    assert len(requests) == 3  # the reminder went into the third; the stop after it
    assert REPEATED_TOOL_FAILURE_REMINDER in json.dumps(requests[2]["messages"][-1])
