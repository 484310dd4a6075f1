"""One Claude Code session's hook events through ``run_hook``, as one or more installs
send them (shared by the tests of loops and of installs)."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER
from tool_failure_guard.hooks.run import HookOptions, join_command, run_hook
from tool_failure_guard.hooks.state import StateStore

EXE = "/opt/guard/bin/tool-failure-guard"


class Session:
    """One Claude Code session's events through ``run_hook`` (one or more installs)."""

    def __init__(self, root: Path, *, prompt: str = "p") -> None:
        self.root = root
        self.prompt = prompt
        self.count = 0
        self.clock = 1_000_000.0

    def options(self, mode: str, scope: str | None = None, exe: str = EXE) -> HookOptions:
        argv = [exe, "hook", "claude-code", "--mode", mode]
        argv += ["--scope", scope] if scope else []
        return HookOptions(
            cli="claude-code",
            mode=mode,
            state_dir=self.root,
            scope=scope,
            command=join_command(argv),
        )

    def send(
        self, payload: dict[str, Any], options: HookOptions, request: str | None = None
    ) -> dict[str, Any] | None:
        stdout, stderr = io.StringIO(), io.StringIO()
        data = io.BytesIO(json.dumps({"session_id": "s", **payload}).encode())
        run_hook(options, data, stdout, stderr, clock=lambda: self.clock, request=request)
        assert stderr.getvalue() == "", stderr.getvalue()
        out = stdout.getvalue()
        return json.loads(out) if out else None

    def batch(
        self,
        installs_: Sequence[HookOptions],
        *,
        fail: bool = True,
        agent: str | None = None,
        calls: int = 4,
    ) -> list[dict[str, Any] | None]:
        """One model response of ``calls`` Reads (failing or not) as every install sees it;
        each install's answer to the batch event."""
        self.count += 1
        ids = [f"toolu_{agent or 'main'}_{self.count}_{i}" for i in range(calls)]
        more: dict[str, Any] = {"prompt_id": self.prompt}
        if agent is not None:
            more.update(agent_id=agent, agent_type="general-purpose")
        if fail:
            for call_id in ids:
                failure = {
                    "hook_event_name": "PostToolUseFailure",
                    "tool_use_id": call_id,
                    "tool_name": "Read",
                    "error": "File does not exist. Note: your current working directory is /w.",
                    **more,
                }
                for options in installs_:
                    assert self.send(failure, options) is None
        entries = [
            {"tool_use_id": i, "tool_name": "Read", "tool_input": {}, "tool_response": "ok"}
            for i in ids
        ]
        event = {"hook_event_name": "PostToolBatch", "tool_calls": entries, **more}
        return [self.send(event, options) for options in installs_]

    def submit(self, options: HookOptions, prompt_id: str | None) -> dict[str, Any] | None:
        payload: dict[str, Any] = {"hook_event_name": "UserPromptSubmit", "prompt": "x"}
        if prompt_id is not None:
            payload["prompt_id"] = prompt_id
        return self.send(payload, options)

    def state(self) -> dict[str, Any]:
        path = StateStore(self.root).path_of("s")
        return json.loads(path.read_text())["state"]  # type: ignore[no-any-return]


def kind(answer: dict[str, Any] | None) -> str:
    if answer is None:
        return ""
    if answer.get("continue") is False:
        return "stop"
    context = answer["hookSpecificOutput"]["additionalContext"]
    kinds = []
    if REPEATED_TOOL_FAILURE_REMINDER in context:
        kinds.append("remind")
    if "stopped the subagent" in context:
        kinds.append("notice")
    return "+".join(kinds)
