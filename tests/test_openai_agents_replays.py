"""Provider replays in the OpenAI Agents adapter's telemetry: what happened (issue 41.3).

In ``warn``/``enforce`` a replayed call id (already answered, same name and arguments) is
answered without running the tool: a ``provider_duplicate`` record, never executed.  In
``off``/``shadow`` the adapter lets a replay run as the bare SDK would; a replay that
really ran is an executed call in telemetry (the held-back decision is the shadow record:
``would_stop_loop_type``), and one the SDK skipped itself stays a replay record.  So
``rollout check``'s ``protections_changed`` (an executed call flagged as a provider
duplicate) counts a protection that failed to act, never a shadow run doing as designed.

The SDK 0.24 skips most replays itself; the ones it invokes reach the adapter's observed
tool, called here as the SDK calls it (its own ``FunctionTool`` invoker and
``ToolContext``) on a :class:`GuardedRun`, with the telemetry written by the ``file:``
exporter that ``rollout check`` reads.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import FunctionTool, function_tool
from agents.tool_context import ToolContext
from hosts.openai_agents import make_agent, run
from openai_server import FakeOpenAI, Reply, call, serve
from telemetry_harness import Harness
from test_openai_agents import turns

from tool_failure_guard.commands.cli import main
from tool_failure_guard.core import LOOP_PROVIDER_DUPLICATE
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.integrations.openai_agents import GuardedRunner
from tool_failure_guard.integrations.openai_agents._run import GuardedRun, function_call
from tool_failure_guard.integrations.openai_agents._tools import (
    REPLAY_TEXT,
    Binding,
    observed_tool,
)
from tool_failure_guard.telemetry.build import build_telemetry
from tool_failure_guard.telemetry.sink import PROMPT_EVENT, TOOL_CALL_EVENT, OpenTelemetrySink

ARGUMENTS = '{"path": "."}'


def _counting_tool(ran: list[str]) -> FunctionTool:
    @function_tool(name_override="list_dir")
    def counting_list(path: str) -> str:
        """List a directory."""
        ran.append(path)
        return "a.txt"

    return counting_list


def _replayed_run(run_: GuardedRun, ran: list[str], batches: int = 4) -> list[Any]:
    """``batches`` model responses of the one call ``same``; the SDK invokes each one."""
    tool = observed_tool(_counting_tool(ran), Binding(run_, agent=_Agent()))
    answers = []
    for _ in range(batches):
        run_.model_response([function_call("same", "list_dir", ARGUMENTS)])
        context = ToolContext(
            context=None, tool_name="list_dir", tool_call_id="same", tool_arguments=ARGUMENTS
        )
        answers.append(asyncio.run(tool.on_invoke_tool(context, ARGUMENTS)))
        run_.close()
    run_.finish("end_turn")
    return answers


class _Agent:
    tool_use_behavior = "run_llm_again"


def _calls(harness: Harness) -> list[tuple[int, bool, str]]:
    return [
        (r["batch_ordinal"], r["provider_duplicate"], r["execution_status"])
        for r in harness.logs(TOOL_CALL_EVENT)
    ]


@pytest.mark.parametrize("mode", [GuardMode.OFF, GuardMode.SHADOW])
def test_a_replay_that_ran_is_an_executed_call_and_the_held_back_stop_the_shadow_record(
    mode: GuardMode,
) -> None:
    harness = Harness()
    ran: list[str] = []
    guarded = GuardedRun(mode, telemetry=harness.sink)
    answers = _replayed_run(guarded, ran)
    assert ran == ["."] * 4 and answers == ["a.txt"] * 4  # as the bare SDK runs them
    assert _calls(harness) == [(n, False, "success") for n in range(1, 5)]
    (prompt,) = harness.logs(PROMPT_EVENT)
    assert prompt["tool_calls"] == 4  # each replay that ran is a tool call
    report = guarded.report()
    assert report.tool_calls == 4 and report.observed == 4 and report.stop is None
    if mode is GuardMode.SHADOW:  # three replaying batches: the stop shadow held back
        assert report.would_stop_loop_type == LOOP_PROVIDER_DUPLICATE


def test_in_enforce_a_replay_is_answered_unrun_and_recorded_as_a_replay() -> None:
    harness = Harness()
    ran: list[str] = []
    answers = _replayed_run(GuardedRun(GuardMode.ENFORCE, telemetry=harness.sink), ran, 3)
    assert ran == ["."] and answers == ["a.txt", REPLAY_TEXT, REPLAY_TEXT]
    replays = [(n, True, "not_started") for n in (2, 3)]
    assert _calls(harness) == [(1, False, "success"), *replays]


@pytest.mark.parametrize("mode", ["off", "shadow", "enforce"])
def test_a_replay_the_sdk_skips_itself_stays_a_replay_record_in_every_mode(mode: str) -> None:
    ran: list[str] = []

    def plan(n: int) -> Reply:
        if n == 0:
            return Reply(calls=(call("same", "list_dir", {"path": "."}),))
        if n == 1:  # the provider replays the answered id next to a new call
            return Reply(
                calls=(
                    call("same", "list_dir", {"path": "."}),
                    call("new", "list_dir", {"path": "b"}),
                )
            )
        return Reply(text="done")

    harness = Harness()
    fake = FakeOpenAI(turns(plan))
    with serve(fake):
        runner = GuardedRunner(mode=mode, telemetry=harness.sink)
        result = run(runner, make_agent(fake.base_url, [_counting_tool(ran)]), "go")
    assert ran == [".", "b"]  # the SDK 0.24 never ran the replay
    assert _calls(harness) == [
        (1, False, "success"),
        (2, True, "not_started"),
        (2, False, "success"),
    ]
    report = GuardedRunner.report_of(result)
    assert report is not None and report.tool_calls == 2 and report.observed == 3


def test_rollout_check_counts_no_shadow_replay_as_a_changed_protection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(
        "OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging,enduser.pseudo.id=owner-7"
    )
    path = tmp_path / "fleet.jsonl"
    sink = build_telemetry(f"file:{path}")
    for mode in (GuardMode.OFF, GuardMode.SHADOW, GuardMode.ENFORCE):
        _replayed_run(GuardedRun(mode, telemetry=sink), [])
    assert isinstance(sink, OpenTelemetrySink) and sink.force_flush()
    assert main(["rollout", "check", str(path), "--json"]) == 1  # one day: may not advance yet
    staging = json.loads(capsys.readouterr().out)["environments"]["staging"]
    assert staging["invariants"]["protections_changed"]["violations"] == 0
