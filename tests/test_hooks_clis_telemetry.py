"""The Qwen Code, Gemini CLI and Codex hooks' telemetry and per-call cost, without the CLIs.

Each hook reports on its own route (``qwen_code_hook``, ``gemini_cli_hook``) the
records every host writes, which ``rollout check`` reads; a per-call event
loads no core (``docs/hooks.md``, Cost).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_hooks_qwen_gemini import _gemini, _qwen_batch, _submit

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.hooks.run import HookOptions, run_hook

# -- telemetry -------------------------------------------------------------------------------


def _routes(sink: Path) -> set[str]:
    lines = [json.loads(line) for line in sink.read_text(encoding="utf-8").splitlines()]
    return {
        attribute["value"]["stringValue"]
        for line in lines
        for resource in line.get("resourceMetrics", []) + line.get("resourceLogs", [])
        for scope in resource.get("scopeMetrics", []) + resource.get("scopeLogs", [])
        for item in scope.get("metrics", []) + scope.get("logRecords", [])
        for point in (item.get("sum") or item.get("histogram") or {}).get("dataPoints", [item])
        for attribute in point.get("attributes", [])
        if attribute["key"] == "route"
    }


def _told(tmp_path: Path, cli: str, payload: Any, mode: str, sink: Path) -> str:
    stdin = io.BytesIO(json.dumps(payload).encode())
    stdout, stderr = io.StringIO(), io.StringIO()
    options = HookOptions(
        cli=cli, mode=GuardMode(mode), state_dir=tmp_path / mode, telemetry=f"file:{sink}"
    )
    assert run_hook(options, stdin, stdout, stderr) == 0
    assert "failing open" not in stderr.getvalue(), stderr.getvalue()
    return stdout.getvalue()


def _events(cli: str, mode: str) -> tuple[dict[str, Any], list[dict[str, Any]], Any, Any]:
    """(prompt start, one failing batch's per-call events, batch boundary, prompt end)."""
    if cli == "qwen-code":
        prompt = f"s########{len(mode)}"  # shadow 6, warn 4, enforce 7
        calls = [_qwen_batch(f"c{i}", prompt) for i in range(4)]  # ids made unique below
        end = dict(_submit(prompt), hook_event_name="Stop")
        return _submit(prompt, "Read it"), calls, _submit(prompt), end
    failure = {"error": {"type": "file_not_found"}}
    calls = [_gemini("AfterTool", tool_name="read_file", tool_response=failure)] * 4
    end = _gemini("AfterAgent", prompt="Read", prompt_response="gave up")
    start = _gemini("BeforeAgent", prompt="Read", timestamp=mode)
    return start, calls, _gemini("BeforeModel", llm_request={}), end


@pytest.mark.parametrize("cli", ["qwen-code", "gemini-cli"])
def test_the_hooks_report_on_their_routes_and_rollout_reads_them(
    tmp_path: Path, cli: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tool_failure_guard.commands.cli import main

    resource = "deployment.environment=staging,enduser.pseudo.id=owner-3"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", resource)
    sink = tmp_path / "hooks.jsonl"
    for mode in ("shadow", "warn", "enforce"):
        start, calls, boundary, end = _events(cli, mode)
        _told(tmp_path, cli, start, mode, sink)
        stopped = False
        for n in range(3):
            for call in calls:
                if "tool_calls" in call:  # Qwen Code: a call id per batch
                    entry = dict(call["tool_calls"][0])
                    entry["tool_call_id"] = entry["tool_use_id"] = f"b{n}{entry['tool_use_id']}"
                    call = dict(call, tool_calls=[entry])
                _told(tmp_path, cli, call, mode, sink)
            stopped = '"continue":false' in _told(tmp_path, cli, boundary, mode, sink) or (stopped)
        if not stopped:
            _told(tmp_path, cli, end, mode, sink)
    assert _routes(sink) == {cli.replace("-", "_") + "_hook"}
    assert main(["rollout", "check", str(sink), "--json"]) == 1  # one day: may not advance
    staging = json.loads(capsys.readouterr().out)["environments"]["staging"]
    assert staging["prompt_only_prompts"] == 3
    cohort = staging["cohorts"]["prompt-only"]
    counts = (cohort["prompts"], cohort["would_warn"], cohort["would_stop"], cohort["stopped"])
    assert counts == (3, 3, 2, 1)
    violations = {name: inv["violations"] for name, inv in staging["invariants"].items()}
    assert violations == dict.fromkeys(staging["invariants"], 0)


# -- cost: the per-call events load no core --------------------------------------------------

_PER_CALL = """
import io, json, sys
from tool_failure_guard.commands.cli import main
cli, payload = sys.argv[2], json.loads(sys.argv[3])
sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode()))
assert main(["hook", cli, "--mode", "enforce", "--state-dir", sys.argv[1]]) == 0
heavy = ("attr", "attrs", "typing", "argparse", "tool_failure_guard.core",
         "tool_failure_guard.guard", "tool_failure_guard.agent_outcomes")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy
                        or any(m.startswith(h + ".") for h in heavy))))
"""


@pytest.mark.parametrize("cli", ["qwen-code", "gemini-cli", "codex"])
def test_the_per_call_event_loads_no_core_attrs_typing_or_argparse(
    tmp_path: Path, cli: str
) -> None:
    # docs/hooks.md (Cost): the per-call hook's start-up is kept near a no-op Python hook's
    rollout = tmp_path / "rollout.jsonl"
    call = {"type": "function_call", "call_id": "a", "name": "exec_command", "arguments": "{}"}
    rollout.write_text(json.dumps({"type": "response_item", "payload": call}) + "\n")
    payload = {
        "qwen-code": _qwen_batch("a"),
        "gemini-cli": _gemini("AfterTool", tool_name="read_file", tool_response={}),
        "codex": {
            "hook_event_name": "PostToolUse",
            "session_id": "x",
            "turn_id": "t",
            "transcript_path": str(rollout),
            "tool_name": "Bash",
            "tool_use_id": "a",
            "tool_response": "",
        },
    }[cli]
    argv = [sys.executable, "-c", _PER_CALL, str(tmp_path / "st"), cli, json.dumps(payload)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert "failing open" not in done.stderr, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []
    assert list((tmp_path / "st").glob("*.json"))  # the call was recorded
