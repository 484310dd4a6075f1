"""The Codex CLI hook without the CLI: batch membership and results read from a rollout.

The rollout lines are shaped as ``codex exec`` 0.169.0 writes them (``response_item``
``function_call`` / ``function_call_output``, ``event_msg`` ``item_completed`` with a
``CommandExecution``'s ``exit_code``); the live run is ``tests/test_hooks_codex.py``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER, GuardMode
from tool_failure_guard.hooks.codex import batch_of
from tool_failure_guard.hooks.run import HookOptions, run_hook


class Rollout:
    """A rollout file the test writes as Codex would, batch by batch."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.path.write_text("", encoding="utf-8")

    def add(self, line_type: str, payload: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as stream:
            stream.write(json.dumps({"type": line_type, "payload": payload}) + "\n")

    def response(self, ids: list[str]) -> None:
        self.add("response_item", {"type": "message", "role": "assistant", "content": []})
        for call_id in ids:
            self.add(
                "response_item",
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "call_id": call_id,
                    "arguments": "{}",
                },
            )

    def results(self, ids: list[str], exit_code: int) -> None:
        for call_id in ids:
            item = {
                "type": "CommandExecution",
                "id": call_id,
                "status": "completed",
                "exit_code": exit_code,
            }
            self.add("event_msg", {"type": "item_completed", "item": item})
            output = f"Process exited with code {exit_code}\nOutput:\n"
            self.add(
                "response_item",
                {"type": "function_call_output", "call_id": call_id, "output": output},
            )


def _hook(tmp_path: Path, payload: dict[str, Any], mode: str = "warn") -> tuple[str, str]:
    stdin = io.BytesIO(json.dumps(payload).encode())
    stdout, stderr = io.StringIO(), io.StringIO()
    options = HookOptions(cli="codex", mode=GuardMode(mode), state_dir=tmp_path / "st")
    assert run_hook(options, stdin, stdout, stderr) == 0
    return stdout.getvalue(), stderr.getvalue()


def _event(rollout: Rollout, event: str, **more: Any) -> dict[str, Any]:
    return {
        "hook_event_name": event,
        "session_id": "x",
        "turn_id": "t1",
        "transcript_path": str(rollout.path),
        "tool_name": "Bash",
        **more,
    }


def _batch(tmp_path: Path, rollout: Rollout, n: int, exit_code: int, mode: str) -> str:
    """Batch ``n``: its calls' PreToolUse, the response, PostToolUse; the first answer."""
    ids = [f"b{n}c{i}" for i in range(4)]
    rollout.response(ids)
    answers = [_hook(tmp_path, _event(rollout, "PreToolUse", tool_use_id=i), mode)[0] for i in ids]
    for call_id in ids:
        assert _hook(
            tmp_path, _event(rollout, "PostToolUse", tool_use_id=call_id, tool_response=""), mode
        ) == ("", "")
    rollout.results(ids, exit_code)
    assert answers[1:] == ["", "", ""]  # only the batch's first call settles the previous one
    return answers[0]


def test_the_batch_is_the_response_holding_the_call(tmp_path: Path) -> None:
    rollout = Rollout(tmp_path / "r.jsonl")
    rollout.response(["a", "b"])
    rollout.results(["a", "b"], 3)
    rollout.response(["c"])
    items = [
        (json.loads(x)["type"], json.loads(x)["payload"])
        for x in rollout.path.read_text().splitlines()
    ]
    assert [c for c, _ in batch_of(items, "b")] == ["a", "b"]
    assert [c for c, _ in batch_of(items, "c")] == ["c"]
    assert batch_of(items, "zzz") == []


def test_the_reminder_comes_with_the_batch_after_the_one_that_reached_the_threshold(
    tmp_path: Path,
) -> None:
    rollout = Rollout(tmp_path / "r.jsonl")
    _hook(tmp_path, _event(rollout, "UserPromptSubmit", prompt="go"))
    assert _batch(tmp_path, rollout, 1, 3, "warn") == ""
    assert _batch(tmp_path, rollout, 2, 3, "warn") == ""  # batch 1 settled: 4 failures
    reminder = json.loads(_batch(tmp_path, rollout, 3, 3, "warn"))  # batch 2 settled: 8
    assert reminder["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse",
        "additionalContext": REPEATED_TOOL_FAILURE_REMINDER,
    }


def test_enforce_never_stops_and_a_success_resets(tmp_path: Path) -> None:
    rollout = Rollout(tmp_path / "r.jsonl")
    answers = [_batch(tmp_path, rollout, n, 3, "enforce") for n in range(1, 6)]
    assert [bool(a) for a in answers] == [False, False, True, False, False]
    assert all('"continue"' not in a for a in answers)
    assert _batch(tmp_path, rollout, 6, 0, "enforce") == ""  # batch 5 settled: still warned
    assert _batch(tmp_path, rollout, 7, 3, "enforce") == ""  # batch 6 succeeded: reset
    assert _batch(tmp_path, rollout, 8, 3, "enforce") == ""  # batch 7: 4 failures only
