"""The Qwen Code ``-p`` and Gemini CLI hooks without the CLIs: outcomes, events, install.

Payloads are shaped as the real CLIs sent them (``docs/hooks.md``; the live
runs are ``tests/test_hooks_qwen_code.py`` and ``tests/test_hooks_gemini_cli.py``).
Each event goes through the real runner (:func:`tool_failure_guard.hooks.run.run_hook`)
with a state folder of its own, so what is kept between events is the state file.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tool_failure_guard.agent_outcomes.gemini_cli import from_after_tool
from tool_failure_guard.agent_outcomes.qwen_code import from_batch_call
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    ExecutionStatus,
    GuardMode,
    TerminalStatus,
)
from tool_failure_guard.hooks.run import HookOptions, run_hook

STOP_SHOWN = REPEATED_TOOL_FAILURE_STOP_MESSAGE.removeprefix("System: ")


def _hook(tmp_path: Path, cli: str, payload: Any, mode: str = "enforce") -> tuple[str, str]:
    stdin = io.BytesIO(payload if isinstance(payload, bytes) else json.dumps(payload).encode())
    stdout, stderr = io.StringIO(), io.StringIO()
    options = HookOptions(cli=cli, mode=GuardMode(mode), state_dir=tmp_path / "st")
    assert run_hook(options, stdin, stdout, stderr) == 0
    return stdout.getvalue(), stderr.getvalue()


# -- Qwen Code: the outcome rule -------------------------------------------------------------


def _entry(call_id: str, status: str = "error", **response: Any) -> dict[str, Any]:
    if status == "error" and not response:
        response = {"error_type": "file_not_found", "execution_status": "error"}
    return {
        "tool_name": "read_file",
        "tool_input": {"file_path": "missing.txt"},
        "tool_use_id": call_id,
        "tool_call_id": call_id,
        "status": status,
        "tool_response": {"error": "File not found", **response},
    }


def test_a_qwen_batch_entry_keeps_the_originals_two_axes() -> None:
    failed = from_batch_call(_entry("c1"))
    assert (failed.status, failed.execution_status, failed.error_type) == (
        TerminalStatus.ERROR,
        ExecutionStatus.ERROR,
        "file_not_found",
    )
    refused = from_batch_call(
        _entry("c2", error_type="invalid_tool_params", execution_status="not_started")
    )
    assert refused.execution_status is ExecutionStatus.NOT_STARTED
    assert refused.error_type == "invalid_tool_params"
    assert from_batch_call(_entry("c3", "success")).status is TerminalStatus.SUCCESS
    assert not failed.heuristic


@pytest.mark.parametrize(
    ("entry", "names"),
    [
        (_entry("c", "exploded"), "status must be one of success, error, cancelled"),
        (_entry("c", execution_status="half"), "tool_response.execution_status must be one of"),
        (_entry("c", error_type="Not A Type", execution_status="error"), "snake_case"),
    ],
)
def test_a_qwen_entry_outside_the_contract_is_refused_by_name(
    entry: dict[str, Any], names: str
) -> None:
    with pytest.raises(ValueError, match=names):
        from_batch_call(entry)


# -- Qwen Code: the events -------------------------------------------------------------------


def _submit(prompt_id: str = "s########0", prompt: str = "") -> dict[str, Any]:
    return {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "s",
        "prompt_id": prompt_id,
        "prompt": prompt,
    }


def _qwen_batch(call_id: str, prompt_id: str = "s########0", **kw: Any) -> dict[str, Any]:
    return {
        "hook_event_name": "PostToolBatch",
        "session_id": "s",
        "prompt_id": prompt_id,
        "tool_calls": [_entry(call_id, **kw)],
    }


def _qwen_failing_batch(tmp_path: Path, n: int, mode: str = "enforce") -> str:
    for i in range(4):  # -p: one PostToolBatch per call
        assert _hook(tmp_path, "qwen-code", _qwen_batch(f"b{n}c{i}"), mode) == ("", "")
    return _hook(tmp_path, "qwen-code", _submit(), mode)[0]


def test_qwen_reminds_in_the_request_after_the_second_batch_then_stops(tmp_path: Path) -> None:
    assert _hook(tmp_path, "qwen-code", _submit(prompt="Read it")) == ("", "")
    assert _qwen_failing_batch(tmp_path, 1) == ""
    assert json.loads(_qwen_failing_batch(tmp_path, 2)) == {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": REPEATED_TOOL_FAILURE_REMINDER,
        }
    }
    assert json.loads(_qwen_failing_batch(tmp_path, 3)) == {
        "continue": False,
        "stopReason": STOP_SHOWN,
    }


def test_qwen_a_new_prompt_id_starts_a_fresh_guard(tmp_path: Path) -> None:
    _qwen_failing_batch(tmp_path, 1)
    assert _qwen_failing_batch(tmp_path, 2) != ""  # the reminder
    assert _hook(tmp_path, "qwen-code", _submit("s########1", "Try again")) == ("", "")
    for i in range(4):
        _hook(tmp_path, "qwen-code", _qwen_batch(f"n{i}", "s########1"))
    assert _hook(tmp_path, "qwen-code", _submit("s########1"))[0] == ""  # one batch: no reminder


@pytest.mark.parametrize("mode", ["shadow", "off"])
def test_qwen_shadow_and_off_answer_nothing(tmp_path: Path, mode: str) -> None:
    answers = [_qwen_failing_batch(tmp_path, n, mode) for n in range(1, 5)]
    assert answers == ["", "", "", ""]
    [kept] = list((tmp_path / "st").glob("*.json"))
    state = json.loads(kept.read_text())["state"]
    # off registers its install (a managed off wins over others) and applies nothing
    assert ("loops" in state) is (mode == "shadow")


def test_qwen_a_success_resets_the_streak(tmp_path: Path) -> None:
    _qwen_failing_batch(tmp_path, 1)
    _hook(tmp_path, "qwen-code", _qwen_batch("ok", status="success"))
    assert _hook(tmp_path, "qwen-code", _submit())[0] == ""
    assert _qwen_failing_batch(tmp_path, 3) == ""  # 4 failures in 1 batch since the success


def test_qwen_a_malformed_entry_fails_open_naming_the_field(tmp_path: Path) -> None:
    # recorded as it came (the per-call event loads no core); typed when the batch settles
    assert _hook(tmp_path, "qwen-code", _qwen_batch("c", status="weird")) == ("", "")
    out, err = _hook(tmp_path, "qwen-code", _submit())
    assert out == ""
    assert "failing open" in err and "status must be one of" in err


# -- Gemini CLI: the outcome rule ------------------------------------------------------------


def test_gemini_typed_errors_win_and_shell_exit_codes_are_read_from_text() -> None:
    missing = from_after_tool(
        "read_file",
        {"llmContent": "File not found.", "error": {"type": "file_not_found", "message": "x"}},
    )
    assert (missing.execution_status, missing.error_type, missing.heuristic) == (
        ExecutionStatus.ERROR,
        "file_not_found",
        False,
    )
    shell = from_after_tool(
        "run_shell_command", {"llmContent": "Output: (empty)\nExit Code: 3\nProcess Group PGID: 1"}
    )
    assert (shell.status, shell.error_type, shell.heuristic) == (
        TerminalStatus.ERROR,
        "shell_execute_error",
        True,
    )
    assert from_after_tool("run_shell_command", {"llmContent": "Exit Code: 0"}).status == "success"
    assert from_after_tool("read_file", {"llmContent": "Exit Code: 3"}).status == "success"
    odd = from_after_tool("read_file", {"error": {"type": "Not A Type"}})
    assert odd.error_type == "execution_failed"
    refused = from_after_tool("read_file", {"error": {"type": "invalid_tool_params"}})
    assert refused.execution_status is ExecutionStatus.NOT_STARTED


# -- Gemini CLI: the events ------------------------------------------------------------------


def _gemini(event: str, **more: Any) -> dict[str, Any]:
    return {
        "hook_event_name": event,
        "session_id": "g",
        "timestamp": "2026-12-06T05:00:00Z",
        **more,
    }


def _gemini_failing_batch(tmp_path: Path, mode: str = "enforce") -> str:
    failure = {"llmContent": "File not found.", "error": {"type": "file_not_found"}}
    for _ in range(4):
        after = _gemini("AfterTool", tool_name="read_file", tool_response=failure)
        assert _hook(tmp_path, "gemini-cli", after, mode) == ("", "")
    return _hook(tmp_path, "gemini-cli", _gemini("BeforeModel", llm_request={}), mode)[0]


def test_gemini_enforce_denies_the_request_after_the_third_matching_batch(tmp_path: Path) -> None:
    assert _hook(tmp_path, "gemini-cli", _gemini("BeforeAgent", prompt="Read")) == ("", "")
    assert _hook(tmp_path, "gemini-cli", _gemini("BeforeModel", llm_request={})) == ("", "")
    assert _gemini_failing_batch(tmp_path) == ""
    assert _gemini_failing_batch(tmp_path) == ""  # the reminder: Gemini CLI cannot carry it
    assert json.loads(_gemini_failing_batch(tmp_path)) == {"decision": "deny", "reason": STOP_SHOWN}


@pytest.mark.parametrize("mode", ["warn", "shadow"])
def test_gemini_warn_and_shadow_answer_nothing(tmp_path: Path, mode: str) -> None:
    assert [_gemini_failing_batch(tmp_path, mode) for _ in range(4)] == ["", "", "", ""]


def test_gemini_before_agent_starts_a_fresh_guard(tmp_path: Path) -> None:
    _gemini_failing_batch(tmp_path)
    _gemini_failing_batch(tmp_path)
    _hook(tmp_path, "gemini-cli", _gemini("BeforeAgent", timestamp="2026-12-06T06:00:00Z"))
    assert _gemini_failing_batch(tmp_path) == ""  # not the stop: a new prompt


# -- install ---------------------------------------------------------------------------------


def _install(*words: str) -> None:
    argv = [sys.executable, "-m", "tool_failure_guard", "hook", *words]
    subprocess.run(argv, check=True, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("cli", "pin", "events", "timeout"),
    [
        (
            "qwen-code",
            {"disableAllHooks": False},
            {"UserPromptSubmit", "PostToolBatch"},  # Stop: with --telemetry
            30,
        ),
        (
            "gemini-cli",
            {"hooksConfig": {"enabled": True, "notifications": True}},
            {"BeforeAgent", "AfterTool", "BeforeModel"},  # AfterAgent: with --telemetry
            30_000,
        ),
    ],
)
def test_install_turns_hooks_on_where_unset_idempotently_and_uninstall_takes_only_ours(
    tmp_path: Path, cli: str, pin: dict[str, Any], events: set[str], timeout: int
) -> None:
    settings = tmp_path / "settings.json"
    other = {"matcher": "*", "hooks": [{"type": "command", "command": "audit-log"}]}
    start = {
        "hooksConfig": {"notifications": True},
        "hooks": {"AfterTool": [other]},
        "model": {"name": "m"},
    }
    settings.write_text(json.dumps(start), encoding="utf-8")
    where = ["--settings", str(settings), "--state-dir", str(tmp_path / "st")]
    _install("install", cli, "--mode", "warn", *where)
    once = settings.read_text(encoding="utf-8")
    _install("install", cli, "--mode", "warn", *where)
    assert settings.read_text(encoding="utf-8") == once  # idempotent
    document = json.loads(once)
    assert {key: document[key] for key in pin} == pin  # on at this scope; the rest kept
    assert document["model"] == {"name": "m"}
    ours = [
        h
        for event, groups in document["hooks"].items()
        for g in groups
        for h in g["hooks"]
        if f"hook {cli} --scope settings --mode warn" in h["command"]
    ]
    assert len(ours) == len(events) and {h["timeout"] for h in ours} == {timeout}
    assert set(document["hooks"]) >= events
    _install("uninstall", cli, "--settings", str(settings))
    assert json.loads(settings.read_text(encoding="utf-8")) == start  # only ours removed
    # a user's own "off" is never changed: the hooks there stay off (install warns)
    start = {"disableAllHooks": True, "hooksConfig": {"enabled": False}}
    settings.write_text(json.dumps(start), encoding="utf-8")
    _install("install", cli, "--mode", "warn", *where)
    document = json.loads(settings.read_text(encoding="utf-8"))
    assert {key: document[key] for key in start} == start
    _install("uninstall", cli, "--settings", str(settings))
    assert settings.read_text(encoding="utf-8") == json.dumps(start)
