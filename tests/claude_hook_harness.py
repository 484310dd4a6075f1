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
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from agent_clis import CLAUDE_VERSION, claude_binary, require
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


def agent(marker: str, *, background: bool | None = None) -> Call:
    """A call of Claude Code's ``Agent`` tool whose prompt holds ``marker`` (which the fake
    reads to play that subagent's script); ``background`` sets ``run_in_background``."""
    arguments: dict[str, Any] = {
        "description": "check the files",
        "prompt": f"{marker}: read the files and report.",
        "subagent_type": "general-purpose",
    }
    if background is not None:
        arguments["run_in_background"] = background
    return Call(name="Agent", arguments=arguments)


@attrs.frozen
class Run:
    """One headless run: the fake's main-loop requests, the stream-json lines, the exit."""

    requests: list[dict[str, Any]]
    events: list[dict[str, Any]]
    returncode: int
    stderr: str
    root: Path
    #: each subagent's requests (by the marker of its script), in the order they came
    agents: dict[str, list[dict[str, Any]]] = attrs.field(factory=dict)

    @property
    def result(self) -> dict[str, Any]:
        found = [e for e in self.events if e.get("type") == "result"]
        assert found, f"no result line: {self.stderr[-2000:]}"
        return found[-1]

    def reminded_in(self, marker: str | None = None) -> list[int]:
        """The indexes of the main loop's requests (or the subagent ``marker``'s) whose newest
        user message carries the reminder."""
        requests = self.requests if marker is None else self.agents[marker]
        return [
            index
            for index, body in enumerate(requests)
            if REPEATED_TOOL_FAILURE_REMINDER in json.dumps(body["messages"][-1])
        ]

    def carrying(self, text: str) -> list[int]:
        """The indexes of the main loop's requests whose newest user message holds ``text``."""
        needle = json.dumps(text)[1:-1]
        return [i for i, b in enumerate(self.requests) if needle in json.dumps(b["messages"][-1])]

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
    claim: str | None = None,
) -> None:
    """``hook install claude-code``; ``claim``: the ``--scope`` the hook's command line says
    (added to the installed command where the installer did not write one)."""
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
    if claim is not None:
        claim_scope(settings if settings is not None else MANAGED, claim)


def claim_scope(settings: Path, scope: str) -> None:
    """The guard's commands in ``settings`` saying ``--scope SCOPE`` (the one the installer
    wrote replaced, or added where there is none)."""
    value = json.loads(settings.read_text(encoding="utf-8"))
    for groups in value.get("hooks", {}).values():
        for group in groups:
            for entry in group.get("hooks", []):
                command = entry.get("command", "")
                if " hook claude-code" not in command:
                    continue
                words = shlex.split(command)
                if "--scope" in words:
                    words[words.index("--scope") + 1] = scope
                else:
                    words += ["--scope", scope]
                entry["command"] = shlex.join(words)
    settings.write_text(json.dumps(value, indent=2), encoding="utf-8")


def as_passwd_home(home: Path, command: list[str]) -> list[str]:
    """``command`` in a private mount namespace where the effective user's passwd home is
    ``home``: the hook verifies a claimed user scope there (never in ``$HOME``)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to give the run a passwd home of its own")
    passwd_home = Path(pwd.getpwuid(os.geteuid()).pw_dir)
    saved = home.parent / "passwd-home"
    saved.mkdir()
    # what the hook's interpreter lives in stays reachable under the passwd home
    keep = set()
    for needed in (sys.base_prefix, sys.prefix, os.path.realpath(sys.executable), str(ROOT)):
        path = Path(os.path.realpath(needed))
        if path.is_relative_to(passwd_home) and path != passwd_home:
            keep.add(path.relative_to(passwd_home).parts[0])
    script = (
        'saved=$1 home=$2 passwd=$3; shift 3; mount --bind "$passwd" "$saved" '
        '&& mount --bind "$home" "$passwd" || exit 97; '
        'for d in $KEEP; do mkdir -p "$passwd/$d" && mount --bind "$saved/$d" "$passwd/$d" '
        '|| exit 97; done; exec "$@"'
    )
    return [
        "unshare", "--mount", "--propagation", "private", "--",
        "env", f"KEEP={' '.join(sorted(keep))}",
        "sh", "-c", script, "sh", str(saved), str(home), str(passwd_home), *command,
    ]  # fmt: skip


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
    agents: Callable[[Path], dict[str, Sequence[Turn]]] | None = None,
    version: str | None = None,
    also: Callable[[Path], None] | None = None,
    claim: str | None = None,
    passwd_home: bool = False,
) -> Run:
    """One ``claude -p`` run with the hook in ``mode`` (None: no hook installed at all).

    ``agents``: the subagents' scripts by marker (:func:`agent` calls one); ``version``:
    which pinned Claude Code runs; ``claim``: the ``--scope`` of the user-level install;
    ``also(root)``: more installs before the run (``root/home``, ``root/ws``,
    ``root/state``); ``passwd_home``: the run's home is the user's passwd home too."""
    binary = require(lambda: claude_binary(version or CLAUDE_VERSION))
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
            claim=claim,
        )
    if also is not None:
        also(root)
    fake = FakeAnthropic(list(turns_of(ws)), agents=agents(ws) if agents else None)
    with serve_anthropic(fake):
        env = claude_env(home, fake.base_url)
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", str(ROOT))
        command = claude_command(binary, allowed)
        if passwd_home:
            command = as_passwd_home(home, command)
        with managed_hook(mode, state, claim) if managed else contextlib.nullcontext():
            done, events = headless(command, ws, env)
    scripts = {marker: fake.agent_requests(marker) for marker in fake.agents}
    return Run(fake.main_requests(), events, done.returncode, done.stderr, root, scripts)


def headless(
    command: list[str], ws: Path, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """Run ``claude -p`` (stream-json) in ``ws``: the finished process and its JSON lines."""
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
    return done, events


@contextlib.contextmanager
def managed_hook(mode: str | None, state: Path, claim: str | None = None) -> Iterator[None]:
    """The hook installed at the managed scope for the block; any file there is restored."""
    with MANAGED_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = MANAGED.read_bytes() if MANAGED.exists() else None
        created_dir = not MANAGED.parent.exists()
        try:
            if mode is not None:
                install(mode, scope="managed", state_dir=state, claim=claim)
            yield
        finally:
            if saved is not None:
                MANAGED.write_bytes(saved)
            else:
                MANAGED.unlink(missing_ok=True)
                if created_dir:
                    shutil.rmtree(MANAGED.parent, ignore_errors=True)
