"""The command hook's telemetry: the same records as every host, route ``claude_code_hook``,
written by the hook processes to the ``--telemetry file:`` sink the installer wrote, and
read by ``tool-failure-guard rollout check``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_fakes.script import Turn
from claude_hook_harness import read, run_claude
from hook_homes import operator_config

from tool_failure_guard.commands.cli import main

EXE = Path(sys.executable).parent / "tool-failure-guard"


def _hook(payload: dict[str, Any], mode: str, state: Path, sink: Path) -> str:
    env = dict(
        os.environ,
        OTEL_RESOURCE_ATTRIBUTES="deployment.environment=staging,enduser.pseudo.id=owner-3",
    )
    done = subprocess.run(
        [
            str(EXE),
            "hook",
            "claude-code",
            "--mode",
            mode,
            "--state-dir",
            str(state),
            "--telemetry",
            f"file:{sink}",
        ],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "failing open" not in done.stderr, done.stderr
    return done.stdout


def _failing_batch(base: dict[str, str], tag: str, mode: str, state: Path, sink: Path) -> str:
    """Four failing Reads (``PostToolUseFailure`` each) and their ``PostToolBatch``: its answer."""
    ids = [f"toolu_{tag}_{i}" for i in range(4)]
    for call_id in ids:
        failure = dict(
            base,
            hook_event_name="PostToolUseFailure",
            tool_use_id=call_id,
            tool_name="Read",
            error="File does not exist.",
            is_interrupt=False,
        )
        _hook(failure, mode, state, sink)
    calls = [{"tool_use_id": i, "tool_name": "Read", "tool_response": "x"} for i in ids]
    return _hook(dict(base, hook_event_name="PostToolBatch", tool_calls=calls), mode, state, sink)


def _prompt(mode: str, state: Path, sink: Path, batches: int) -> list[str]:
    session = f"session-{mode}"
    base = {"session_id": session, "prompt_id": f"prompt-{mode}"}
    _hook(dict(base, hook_event_name="UserPromptSubmit", prompt=""), mode, state, sink)
    answers = []
    for number in range(batches):
        answers.append(_failing_batch(base, f"{number}", mode, state, sink))
        if answers[-1].startswith('{"continue":false'):
            return answers
    _hook(dict(base, hook_event_name="Stop", stop_hook_active=False), mode, state, sink)
    return answers


def test_rollout_check_reads_what_the_hook_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sink = tmp_path / "hooks.jsonl"
    for mode in ("shadow", "warn", "enforce"):
        _prompt(mode, tmp_path / "state", sink, batches=3)
    lines = [json.loads(line) for line in sink.read_text().splitlines()]
    routes = {
        attribute["value"]["stringValue"]
        for line in lines
        for resource in line.get("resourceMetrics", []) + line.get("resourceLogs", [])
        for scope in resource.get("scopeMetrics", []) + resource.get("scopeLogs", [])
        for item in scope.get("metrics", []) + scope.get("logRecords", [])
        for point in (item.get("sum") or item.get("histogram") or {}).get("dataPoints", [item])
        for attribute in point.get("attributes", [])
        if attribute["key"] == "route"
    }
    assert routes == {"claude_code_hook"}
    assert main(["rollout", "check", str(sink), "--json"]) == 1  # one day: may not advance
    result = json.loads(capsys.readouterr().out)
    assert result["refused"] is False
    staging = result["environments"]["staging"]
    # no user input reaches a headless run while it goes on: the prompt-only cohort
    assert staging["prompt_only_prompts"] == 3
    cohort = staging["cohorts"]["prompt-only"]
    counts = (cohort["prompts"], cohort["would_warn"], cohort["would_stop"], cohort["stopped"])
    assert counts == (3, 3, 2, 1)
    violations = {name: inv["violations"] for name, inv in staging["invariants"].items()}
    assert violations == dict.fromkeys(staging["invariants"], 0)


def _four_failing_reads(ws: Path) -> list[Turn]:
    missing = str(ws / "missing.txt")
    return [Turn(text="Reading.", calls=(read(missing),) * 4)] * 6


def _resource_values(sink: Path, key: str) -> set[str]:
    return {
        attribute["value"]["stringValue"]
        for line in sink.read_text().splitlines()
        for resource in json.loads(line).get("resourceMetrics", [])
        + json.loads(line).get("resourceLogs", [])
        for attribute in resource["resource"]["attributes"]
        if attribute["key"] == key
    }


def test_the_documented_install_gives_rollout_check_what_it_needs_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with operator_config() as folder:  # the owner id is made there, once
        _end_to_end(tmp_path, capsys, folder)


def _end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    # Claude Code gives a hook no OTEL_* variable: the install line carries the environment
    sink = tmp_path / "hooks.jsonl"
    for mode in ("shadow", "enforce"):
        run = run_claude(
            _four_failing_reads,
            mode=mode,
            base=tmp_path,
            telemetry=f"file:{sink}",
            environment="staging",
        )
        assert run.returncode == 0, run.stderr[-2000:]
        assert "failing open" not in run.stderr
    # the owner: one random id for this user, kept in the operator's config folder
    owner = (folder / "owner-id").read_text().strip()
    assert owner.startswith("hook-") and len(owner) == len("hook-") + 16
    assert _resource_values(sink, "enduser.pseudo.id") == {owner}
    assert _resource_values(sink, "deployment.environment") == {"staging"}
    assert main(["rollout", "check", str(sink), "--json"]) in (0, 1)  # a verdict, not refused
    result = json.loads(capsys.readouterr().out)
    assert result["refused"] is False
    staging = result["environments"]["staging"]
    cohort = staging["cohorts"]["prompt-only"]
    counts = (cohort["prompts"], cohort["would_warn"], cohort["would_stop"], cohort["stopped"])
    assert counts == (2, 2, 1, 1)  # read as the hook-only records above are read
    # the same install without --environment: rollout check refuses, naming what is missing
    bare = tmp_path / "bare.jsonl"
    run_claude(_four_failing_reads, mode="shadow", base=tmp_path, telemetry=f"file:{bare}")
    assert main(["rollout", "check", str(bare), "--json"]) == 2
    assert "deployment.environment" in capsys.readouterr().err


def test_a_subagents_loop_reports_as_a_prompt_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sink, state = tmp_path / "hooks.jsonl", tmp_path / "state"
    base = {"session_id": "session-sub", "prompt_id": "prompt-main"}
    sub = {"agent_id": "a1", "agent_type": "general-purpose"}
    _hook(dict(base, hook_event_name="UserPromptSubmit", prompt=""), "enforce", state, sink)
    answers = []
    for number in range(3):  # the subagent: 4 failures a batch, stopped at its 3rd
        answers.append(_failing_batch({**base, **sub}, f"s{number}", "enforce", state, sink))
    assert answers[-1].startswith('{"continue":false')
    agent_call = [{"tool_use_id": "toolu_agent", "tool_name": "Agent", "tool_response": "x"}]
    told = _hook(
        dict(base, hook_event_name="PostToolBatch", tool_calls=agent_call), "enforce", state, sink
    )
    assert "stopped the subagent a1" in told
    _hook(dict(base, hook_event_name="Stop", stop_hook_active=False), "enforce", state, sink)
    assert main(["rollout", "check", str(sink), "--json"]) == 1
    staging = json.loads(capsys.readouterr().out)["environments"]["staging"]
    cohort = staging["cohorts"]["prompt-only"]
    # two prompts: the subagent's loop (stopped) and the main agent's (ended normally)
    assert (cohort["prompts"], cohort["stopped"]) == (2, 1)
    violations = {name: inv["violations"] for name, inv in staging["invariants"].items()}
    assert violations == dict.fromkeys(staging["invariants"], 0)
