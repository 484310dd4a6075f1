"""The pydantic-ai adapter's telemetry: the agent's own sinks, route ``pydantic_ai``.

Real runs over the real wire report through the real ``OpenTelemetrySink``
(in-memory pipelines, or the ``file:`` exporter that ``rollout check`` reads).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from openai_server import FakeOpenAI, serve
from pydantic_ai import Agent, ToolFailed
from pydantic_ai.exceptions import RunCancelled
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai_harness import batches, guarded_run
from telemetry_harness import Harness

from tool_failure_guard.commands.cli import main
from tool_failure_guard.core import PromptCancelled
from tool_failure_guard.integrations.pydantic_ai import ROUTE, RepeatedToolFailureCapability
from tool_failure_guard.integrations.pydantic_ai._results import finished_of
from tool_failure_guard.telemetry import sink as telemetry
from tool_failure_guard.telemetry.build import build_telemetry


class Missing(ToolFailed):
    error_type = "record_missing"


def fetch(key: str) -> str:
    """Fetch a record (always fails, typed)."""
    raise Missing(f"no record {key}")


LOOP = [("fetch", {"key": "k"})] * 4


def test_every_record_carries_the_adapters_route_and_the_frozen_types() -> None:
    harness = Harness()
    ran = guarded_run(batches(LOOP, LOOP, LOOP), [fetch], mode="enforce", telemetry=harness.sink)
    assert ROUTE == "pydantic_ai" and ROUTE in telemetry.GUARD_ROUTES
    guard_points = harness.points(telemetry.GUARD_COUNTER)
    assert {attrs["route"] for attrs, _ in guard_points} == {"pydantic_ai"}
    assert sorted(attrs["decision"] for attrs, _ in guard_points) == [
        "stopped",
        "tracked",
        "warned",
    ]
    guard_logs = harness.logs(telemetry.GUARD_LOG_EVENT)
    assert [r["execution_error_type"] for r in guard_logs] == ["record_missing"] * 3
    assert {r["prompt_id"] for r in guard_logs} == {ran.result.run_id}
    (prompt,) = harness.logs(telemetry.PROMPT_EVENT)
    assert (prompt["route"], prompt["mode"], prompt["stop_reason"]) == (
        "pydantic_ai",
        "enforce",
        "end_turn",
    )
    assert prompt["loop_type"] == "repeated_tool_execution_failure"
    assert (prompt["batches"], prompt["tool_calls"], prompt["model_turns"]) == (3, 12, 3)
    calls = harness.logs(telemetry.TOOL_CALL_EVENT)
    assert len(calls) == 12
    assert {
        (c["terminal_status"], c["execution_status"], c["execution_error_type"]) for c in calls
    } == {("error", "error", "record_missing")}
    sli = harness.points(telemetry.TOOL_CALL_COUNTER)
    assert sli == [
        ({"execution_status": "error", "terminal_status": "error", "tool_type": "native"}, 12)
    ]
    assert harness.points(telemetry.LOOP_DETECTED_COUNTER) == [
        ({"loop_type": "repeated_tool_execution_failure"}, 1)
    ]
    # the guard's own stop never reaches product analytics
    assert harness.analytics == []


def test_a_failing_sink_never_changes_the_run() -> None:
    class Broken:
        def __getattr__(self, name: str) -> Any:
            def fail(*args: Any, **kwargs: Any) -> None:
                raise RuntimeError("sink down")

            return fail

    ran = guarded_run(batches(LOOP, LOOP, LOOP), [fetch], mode="enforce", telemetry=Broken())
    assert ran.decisions == ["tracked", "warn", "stop"]


def test_rollout_check_reads_a_pydantic_ai_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(
        "OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging,enduser.pseudo.id=owner-7"
    )
    path = tmp_path / "fleet.jsonl"
    sink = build_telemetry(f"file:{path}")
    for mode in ("shadow", "warn", "enforce"):
        guarded_run(batches(LOOP, LOOP, LOOP, LOOP), [fetch], mode=mode, telemetry=sink)
    assert isinstance(sink, telemetry.OpenTelemetrySink) and sink.force_flush()
    assert main(["rollout", "check", str(path), "--json"]) == 1  # one day: may not advance yet
    result = json.loads(capsys.readouterr().out)
    assert result["refused"] is False
    staging = result["environments"]["staging"]
    assert (
        staging["supported_prompts"],
        staging["would_warn"],
        staging["would_stop"],
        staging["stopped"],
    ) == (
        3,
        3,
        2,
        1,
    )
    assert {
        name: inv["violations"] for name, inv in staging["invariants"].items()
    } == dict.fromkeys(staging["invariants"], 0)
    assert staging["reasons"] == ["1 day(s) covered, 7 needed"]


def _agent(base_url: str, tools: list[Any], sink: Any) -> Agent[None, str]:
    model = OpenAIChatModel(
        "test-model", provider=OpenAIProvider(base_url=base_url, api_key="sk-test")
    )
    guard = RepeatedToolFailureCapability(mode="enforce", telemetry=sink)
    guard._keep_actions = True  # each batch's core action, for _actions()
    return Agent(model, tools=tools, capabilities=[guard])


def _actions(run: Any) -> tuple[Any, ...]:
    """The core's action of each settled batch of the run named by ``run`` (its ``run_id``)."""
    finished = finished_of(run)
    assert finished is not None
    return finished.actions


def test_a_cancelled_run_keeps_its_settled_calls_and_never_counts_the_cancelled_one() -> None:
    harness, cancelled = Harness(), []

    async def go() -> None:
        started = asyncio.Event()

        async def wait(key: str) -> str:
            """Wait for an answer that never comes."""
            started.set()
            await asyncio.sleep(60)
            return "late"

        with serve(FakeOpenAI(batches([("wait", {"key": "a"}), ("fetch", {"key": "b"})]))) as fake:
            agent = _agent(fake.base_url, [wait, fetch], harness.sink)
            run = asyncio.create_task(agent.run("go"))
            await asyncio.wait_for(started.wait(), 30)
            run.cancel()
            with pytest.raises(asyncio.CancelledError) as raised:
                await run
            cancelled.append(RunCancelled.from_cancellation(raised.value))

    asyncio.run(go())
    (action,) = _actions(cancelled[0])
    assert isinstance(action, PromptCancelled) and action.decision is None  # guard not consulted
    calls = {
        (c["call_ordinal"], c["terminal_status"], c["execution_status"])
        for c in harness.logs(telemetry.TOOL_CALL_EVENT)
    }
    assert (0, "cancelled", "cancelled") in calls
    assert harness.logs(telemetry.GUARD_LOG_EVENT) == []
    (prompt,) = harness.logs(telemetry.PROMPT_EVENT)
    assert (prompt["route"], prompt["stop_reason"], prompt["batches"]) == (
        "pydantic_ai",
        "cancelled",
        1,
    )


def test_an_exception_that_ends_the_run_is_recorded_typed_and_the_run_fails_as_it_would() -> None:
    harness = Harness()

    def explode(key: str) -> str:
        """Raise a plain exception (pydantic-ai ends the run)."""
        raise PermissionError(key)

    runs: list[Any] = []

    async def go() -> None:
        agent = _agent(fake.base_url, [explode], harness.sink)
        async with agent.iter("go") as run:
            runs.append(run)
            async for _ in run:
                pass

    with (
        serve(FakeOpenAI(batches([("explode", {"key": "a"})]))) as fake,
        pytest.raises(PermissionError),
    ):
        asyncio.run(go())
    (action,) = _actions(runs[0])  # the AgentRun names its run: report_of(run) works too
    assert isinstance(action, PromptCancelled)
    (record,) = harness.logs(telemetry.TOOL_CALL_EVENT)
    assert (
        record["terminal_status"],
        record["execution_status"],
        record["execution_error_type"],
    ) == (
        "error",
        "error",
        "permission_denied",
    )
    (prompt,) = harness.logs(telemetry.PROMPT_EVENT)
    assert prompt["stop_reason"] == "error"
