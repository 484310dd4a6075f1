"""Claude Code headless with the guard's command hook, against the local fake Messages API.

The hook is installed the way an operator installs it (``tool-failure-guard hook
install claude-code``, into a settings file or the managed scope); Claude Code
(the pinned 2.1.197) runs ``claude -p --output-format stream-json`` with
``ANTHROPIC_BASE_URL`` at :class:`agent_fakes.anthropic_messages.FakeAnthropic`,
which plays the scripted turns and records every request.  The hook processes
inherit this process's ``PYTHONPATH``, so the code under test is what runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
from agent_clis import claude_binary, require
from agent_fakes.anthropic_messages import FakeAnthropic, serve_anthropic
from agent_fakes.script import Call, Turn
from transcript_capture import claude_command, claude_env

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER

ROOT = Path(__file__).resolve().parent.parent
EXECUTABLE = Path(sys.executable).parent / "tool-failure-guard"
MANAGED = Path("/etc/claude-code/managed-settings.json")
#: Serialises the tests (of every worktree) that write the managed settings file.
MANAGED_LOCK = Path("/tmp/tool-failure-guard-claude-managed.lock")


def read(path: str) -> Call:
    return Call(name="Read", arguments={"file_path": path})


def bash(command: str) -> Call:
    return Call(name="Bash", arguments={"command": command, "description": "run it"})


@attrs.frozen
class Run:
    """One headless run: the fake's main-loop requests, the stream-json lines, the exit."""

    requests: list[dict[str, Any]]
    events: list[dict[str, Any]]
    returncode: int
    stderr: str
    root: Path

    @property
    def result(self) -> dict[str, Any]:
        found = [e for e in self.events if e.get("type") == "result"]
        assert found, f"no result line: {self.stderr[-2000:]}"
        return found[-1]

    def reminded_in(self) -> list[int]:
        """The indexes of the requests whose newest user message carries the reminder."""
        return [
            index
            for index, body in enumerate(self.requests)
            if REPEATED_TOOL_FAILURE_REMINDER in json.dumps(body["messages"][-1])
        ]

    def reminders_in_last(self) -> int:
        return json.dumps(self.requests[-1]["messages"]).count(
            json.dumps(REPEATED_TOOL_FAILURE_REMINDER)[1:-1]
        )

    def messages(self) -> str:
        """Every request's messages, to compare runs: this run's temporary root replaced, and
        each message's blocks in call-id order with the ``<system-reminder>`` texts Claude
        Code appends to a block listed apart (parallel calls finish in any order, and the
        reminders ride on whichever result came last)."""
        canonical = [[_canonical(m) for m in body["messages"]] for body in self.requests]
        return json.dumps(canonical, sort_keys=True).replace(str(self.root), "<root>")


_REMINDER_TAG = "\n\n<system-reminder>"


def _canonical(message: dict[str, Any]) -> Any:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    blocks, reminders = [], []
    for block in content:
        block = {k: v for k, v in block.items() if k != "cache_control"}
        text = block.get("content")
        if isinstance(text, str) and _REMINDER_TAG in text:
            head, *tails = text.split(_REMINDER_TAG)
            block["content"] = head
            reminders += tails
        blocks.append(block)
    blocks.sort(key=lambda b: (str(b.get("tool_use_id", "")), json.dumps(b, sort_keys=True)))
    return {"role": message.get("role"), "blocks": blocks, "reminders": sorted(reminders)}


def install(
    mode: str,
    *,
    settings: Path | None = None,
    scope: str | None = None,
    state_dir: Path,
    telemetry: str | None = None,
    environment: str | None = None,
) -> None:
    target = ["--settings", str(settings)] if settings is not None else ["--scope", str(scope)]
    extra = ["--telemetry", telemetry] if telemetry else []
    extra += ["--environment", environment] if environment else []
    subprocess.run(
        [
            str(EXECUTABLE),
            "hook",
            "install",
            "claude-code",
            "--mode",
            mode,
            *target,
            "--state-dir",
            str(state_dir),
            *extra,
        ],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )


def run_claude(
    turns_of: Callable[[Path], Sequence[Turn]],
    *,
    mode: str | None,
    base: Path,
    managed: bool = False,
    project_settings: dict[str, Any] | None = None,
    telemetry: str | None = None,
    environment: str | None = None,
    allowed: Sequence[str] = ("Read", "Bash"),
) -> Run:
    """One ``claude -p`` run with the hook in ``mode`` (None: no hook installed at all)."""
    binary = require(claude_binary)
    root = Path(tempfile.mkdtemp(prefix="claude-hook-", dir=base))
    home = root / "home"
    (home / ".claude").mkdir(parents=True)
    ws = root / "ws"
    ws.mkdir()
    (ws / "present.txt").write_text("hello\n", encoding="utf-8")
    state = root / "state"
    if project_settings is not None:
        (ws / ".claude").mkdir()
        (ws / ".claude" / "settings.json").write_text(json.dumps(project_settings))
    if mode is not None and not managed:
        install(
            mode,
            settings=home / ".claude" / "settings.json",
            state_dir=state,
            telemetry=telemetry,
            environment=environment,
        )
    fake = FakeAnthropic(list(turns_of(ws)))
    with serve_anthropic(fake):
        env = claude_env(home, fake.base_url)
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", str(ROOT))
        command = claude_command(binary, allowed)
        with managed_hook(mode, state) if managed else contextlib.nullcontext():
            done = subprocess.run(
                command,
                cwd=ws,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
    events = []
    for line in done.stdout.splitlines():
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    return Run(fake.main_requests(), events, done.returncode, done.stderr, root)


@contextlib.contextmanager
def managed_hook(mode: str | None, state: Path) -> Iterator[None]:
    """The hook installed at the managed scope for the block; any file there is restored."""
    with MANAGED_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = MANAGED.read_bytes() if MANAGED.exists() else None
        created_dir = not MANAGED.parent.exists()
        try:
            if mode is not None:
                install(mode, scope="managed", state_dir=state)
            yield
        finally:
            if saved is not None:
                MANAGED.write_bytes(saved)
            else:
                MANAGED.unlink(missing_ok=True)
                if created_dir:
                    shutil.rmtree(MANAGED.parent, ignore_errors=True)
