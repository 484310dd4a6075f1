"""The pydantic-ai adapter, driven by the real framework over the real OpenAI-compatible wire.

The scenarios every host shares run in ``tests/test_host_behaviour.py``
(driver ``tests/hosts/pydantic_ai.py``); these are the adapter's own: the
framework's idiomatic failure signals and retry budget, error handlers of other
capabilities, what is never counted, the typed stop, a fresh guard per run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pydantic
import pytest
from openai_server import FakeOpenAI, Reply, call, serve
from pydantic_ai import Agent, ModelRetry, RunContext, Tool, ToolFailed
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai_harness import Ran, batches, guarded_run, kept_call_ids

from tool_failure_guard.core import (
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_REPEATED_TOOL_FAILURE,
    STOP_NOTICES,
)
from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    GUARD_MODE_ENV_VAR,
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    GuardMode,
)
from tool_failure_guard.integrations.pydantic_ai import (
    STOP_MODEL_NAME,
    ProtectionStop,
    ProtectionStopped,
    RepeatedToolFailureCapability,
    report_of,
    stop_of,
)

FOUR_FAILURES = [("fetch", {"key": "k"})] * 4


class Summary(pydantic.BaseModel):
    text: str


class Missing(ToolFailed):
    error_type = "record_missing"


def fetch_failing(key: str) -> str:
    """Fetch a record (always fails the idiomatic way, typed)."""
    raise Missing(f"no record {key}")


def fetch_retrying(key: str) -> str:
    """Fetch a record (always asks the model to retry)."""
    raise ModelRetry(f"no record {key}; try another key")


def fetch_raising(key: str) -> str:
    """Fetch a record (raises a plain exception)."""
    raise FileNotFoundError(key)


def tools(fetch: Any) -> list[Any]:
    fetch.__name__ = "fetch"

    def ping() -> str:
        """Always works."""
        return "pong"

    return [fetch, ping]


class ErrorsAsText(AbstractCapability[Any]):
    """Another capability's error handler: every execution error becomes a result."""

    async def on_tool_execute_error(
        self, ctx: RunContext[Any], *, call: Any, tool_def: Any, args: Any, error: Exception
    ) -> Any:
        return f"error: {type(error).__name__}"


# -- every framework outcome is observed ---------------------------------------------


def test_tool_failed_is_observed_and_typed_by_its_error_type() -> None:
    ran = guarded_run(batches(FOUR_FAILURES, FOUR_FAILURES, FOUR_FAILURES), tools(fetch_failing))
    assert ran.types(0) == [("error", "error", "record_missing")] * 4
    assert ran.decisions == ["tracked", "warn", "stop"]
    assert isinstance(ran.result.output, ProtectionStop)


def test_model_retry_keeps_its_type_when_the_retries_budget_runs_out() -> None:
    # retries=1: the second ModelRetry of a tool becomes UnexpectedModelBehavior, which a
    # handler turns into a result. The frozen type must stay tool_retry, or the streak restarts.
    ran = guarded_run(
        batches(FOUR_FAILURES, FOUR_FAILURES, FOUR_FAILURES),
        tools(fetch_retrying),
        capabilities=[ErrorsAsText()],
        retries=1,
    )
    assert [set(ran.types(n)) for n in range(3)] == [{("error", "error", "tool_retry")}] * 3
    assert ran.decisions == ["tracked", "warn", "stop"]
    second = ran.requests[2]["messages"]
    assert any("UnexpectedModelBehavior" in str(m.get("content")) for m in second)


@pytest.mark.parametrize("place", ["before", "after"])
def test_an_error_another_capability_turns_into_a_result_is_still_a_failure(place: str) -> None:
    handler = [ErrorsAsText()]
    ran = guarded_run(
        batches(FOUR_FAILURES, FOUR_FAILURES, FOUR_FAILURES),
        tools(fetch_raising),
        before=handler if place == "before" else (),
        capabilities=handler if place == "after" else (),
    )
    # The model was shown a normal-looking result; the execution failed all the same.
    assert "error: FileNotFoundError" in str(ran.requests[1]["messages"][-1]["content"])
    assert ran.types(0) == [("error", "error", "file_not_found")] * 4
    assert ran.decisions == ["tracked", "warn", "stop"]


class RejectsResults(AbstractCapability[Any]):
    """Another capability that rejects every result of ``ping`` after it ran."""

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: Any, tool_def: Any, args: Any, result: Any
    ) -> Any:
        if call.tool_name == "ping":
            raise ModelRetry("that result is not acceptable")
        return result


def test_a_result_rejected_after_the_tool_returned_is_a_post_execution_failure() -> None:
    pings = [("ping", {})] * 2
    ran = guarded_run(
        batches(FOUR_FAILURES, pings, FOUR_FAILURES),
        tools(fetch_failing),
        capabilities=[RejectsResults()],
        mode="warn",
    )
    assert ran.types(1) == [("error", "success", None)] * 2
    # never an eligible failure: it resets the streak (the loop starts again after it)
    assert ran.decisions == ["tracked", "reset", "tracked"]


def test_invalid_arguments_and_unknown_tools_are_not_started_and_never_counted() -> None:
    bad = [("fetch", {"key": 3}), ("fetch", "{not json"), ("nope", {}), ("fetch", {"key": "k"})]
    ran = guarded_run(batches(bad, FOUR_FAILURES, FOUR_FAILURES), tools(fetch_failing), mode="warn")
    assert ran.types(0) == [
        ("error", "not_started", "invalid_tool_params"),
        ("error", "not_started", "invalid_tool_params"),
        ("error", "not_started", "tool_not_registered"),
        ("error", "error", "record_missing"),
    ]
    # The batch with not-started calls says nothing about the streak; the loop starts after it.
    assert ran.decisions == ["none", "tracked", "warn"]


def test_repeated_invalid_arguments_stop_as_their_own_protection() -> None:
    invalid = [("fetch", {"key": 3})] * 2
    ran = guarded_run(
        batches(invalid, invalid), tools(fetch_failing), mode="enforce", invalid_params_limit=3
    )
    output = ran.result.output
    assert isinstance(output, ProtectionStop)
    assert output.loop_type == LOOP_INVALID_TOOL_PARAMS
    assert output == shown_text(STOP_NOTICES[LOOP_INVALID_TOOL_PARAMS])
    assert output.stop.key is None  # not the repeated-failure guard's stop: no failure key
    assert len(ran.requests) == 2


def test_a_deferred_call_leaves_the_receipt_incomplete_never_silently_complete(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def approve(key: str) -> str:
        """Needs the user's approval (nobody answers within the run)."""
        return "approved"

    calls = [("fetch", {"key": "k"}), ("approve", {"key": "k"})]
    with caplog.at_level(logging.WARNING, logger="tool_failure_guard.integrations.pydantic_ai"):
        ran = guarded_run(
            batches(FOUR_FAILURES, calls),
            [*tools(fetch_failing), Tool(approve, requires_approval=True)],
            agent_options={"output_type": [str, DeferredToolRequests]},
        )
    assert isinstance(ran.result.output, DeferredToolRequests)  # the run paused for approval
    receipt = ran.receipts[1]
    assert receipt.complete is False and [o.call_id for o in receipt.observations] == ["b2c0"]
    assert ran.decisions == ["tracked", "reset"]
    assert ran.actions[1].decision.reason.value == "incomplete"  # type: ignore[union-attr]
    assert any("the receipt is incomplete" in r.getMessage() for r in caplog.records)


def test_parallel_calls_settle_by_call_id_in_the_models_order() -> None:
    mixed = [
        ("fetch", {"key": "a"}),
        ("ping", {}),
        ("fetch", {"key": "b"}),
        ("fetch", {"key": "c"}),
    ]
    ran = guarded_run(batches(mixed, mixed, mixed), tools(fetch_failing), mode=GuardMode.WARN)
    receipt = ran.receipts[0]
    assert receipt.complete
    assert [o.call_id for o in receipt.observations] == ["b1c0", "b1c1", "b1c2", "b1c3"]
    assert [o.terminal_status for o in receipt.observations] == [
        "error",
        "success",
        "error",
        "error",
    ]
    # Another tool's success holds the streak: 3 failures a batch reach the threshold in 3.
    assert ran.decisions == ["tracked", "tracked", "warn"]


def test_user_input_queued_during_a_batch_resets_the_streak() -> None:
    def fetch(ctx: RunContext[Any], key: str) -> str:
        """Fetch a record; the "note" key also passes on a message from the user."""
        if key == "note":
            ctx.enqueue("the user adds: try the archive")
        raise Missing(key)

    with_note = [("fetch", {"key": "note"}), *FOUR_FAILURES[1:]]
    ran = guarded_run(batches(FOUR_FAILURES, with_note, FOUR_FAILURES), [fetch], mode="warn")
    assert [a.guard_step.boundary.has_external_input for a in ran.actions] == [False, True, False]  # type: ignore[union-attr]
    assert ran.decisions == ["tracked", "reset", "tracked"]
    assert any(
        m.get("content") == "the user adds: try the archive" for m in ran.requests[2]["messages"]
    )


# -- warn and stop --------------------------------------------------------------------


def test_the_reminder_is_system_context_once_right_after_the_warned_batch() -> None:
    ran = guarded_run(
        batches(FOUR_FAILURES, FOUR_FAILURES, [("ping", {})]),
        tools(fetch_failing),
        mode=GuardMode.WARN,
    )
    assert ran.decisions == ["tracked", "warn", "none"]  # another tool succeeding holds it
    for index in (2, 3):
        messages = ran.requests[index]["messages"]
        reminders = [
            i for i, m in enumerate(messages) if m.get("content") == REPEATED_TOOL_FAILURE_REMINDER
        ]
        assert len(reminders) == 1
        (at,) = reminders
        assert messages[at]["role"] == "system"
        assert messages[at - 1].get("tool_call_id") == "b2c3"
    assert ran.result.output == "Done."


def test_the_stop_is_typed_keeps_the_results_and_makes_no_further_request() -> None:
    loop = batches(*[FOUR_FAILURES] * 5)
    ran = guarded_run(loop, tools(fetch_failing))
    output = ran.result.output
    assert isinstance(output, ProtectionStop) and stop_of(output) is output.stop
    assert stop_of(ran.result) == output.stop
    assert output.loop_type == LOOP_REPEATED_TOOL_FAILURE
    # the output is the text a person reads; the history keeps the model-facing notice
    assert output == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE) == output.notice
    assert len(ran.requests) == 3  # batch 3 stopped: its answer was never sent
    messages = ran.result.all_messages()
    assert kept_call_ids(messages)[-4:] == [f"b3c{i}" for i in range(4)]
    last = messages[-1]
    assert isinstance(last, ModelResponse) and last.model_name == STOP_MODEL_NAME
    assert [p.content for p in last.parts if isinstance(p, TextPart)] == [
        REPEATED_TOOL_FAILURE_STOP_MESSAGE
    ]
    assert stop_of(str(output)) is None and stop_of("Done.") is None


def test_a_message_queued_for_later_cannot_restart_a_stopped_run() -> None:
    def fetch(ctx: RunContext[Any], key: str) -> str:
        """Fetch a record; queues a note for when the run is idle."""
        ctx.enqueue("a note for later", priority="when_idle")
        raise Missing(key)

    ran = guarded_run(batches(*[FOUR_FAILURES] * 4), [fetch])
    assert isinstance(ran.result.output, ProtectionStop)
    assert len(ran.requests) == 3  # the queued note did not reach the model
    # The framework did redirect the ended run into one more request, for the note:
    # the stop answered it instead of the model.
    notes = [
        i
        for i, m in enumerate(ran.result.all_messages())
        for p in m.parts
        if isinstance(p, UserPromptPart) and p.content == "a note for later"
    ]
    assert notes and isinstance(ran.result.all_messages()[notes[-1] + 1], ModelResponse)


def test_each_run_gets_a_fresh_guard() -> None:
    guard = RepeatedToolFailureCapability(mode="enforce", on_stop="end")
    first = guarded_run(batches(*[FOUR_FAILURES] * 3), tools(fetch_failing), guard=guard)
    assert isinstance(first.result.output, ProtectionStop)
    fresh_ids = [Reply(calls=tuple(call(f"r2c{i}", "fetch", {"key": "k"}) for i in range(4)))]
    second = guarded_run(
        [*fresh_ids, Reply(text="Second.")],
        tools(fetch_failing),
        guard=guard,
        history=first.result.all_messages(),
    )
    assert second.result.output == "Second."  # not born stopped
    assert second.decisions == ["tracked"]  # a new streak
    assert report_of(second.result).decisions == ("tracked",)  # type: ignore[union-attr]


def test_shadow_sends_what_off_sends() -> None:
    def run(mode: GuardMode) -> Ran:
        return guarded_run(batches(*[FOUR_FAILURES] * 4), tools(fetch_failing), mode=mode)

    off, shadow = run(GuardMode.OFF), run(GuardMode.SHADOW)
    assert [r["messages"] for r in shadow.requests] == [r["messages"] for r in off.requests]
    assert shadow.decisions == ["tracked", "would_warn", "would_stop", "none"]
    assert off.result.output == shadow.result.output == "Done."


# -- modes ----------------------------------------------------------------------------


def test_the_mode_comes_from_the_environment_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GUARD_MODE_ENV_VAR, raising=False)
    assert RepeatedToolFailureCapability().resolved_mode is GuardMode.SHADOW
    monkeypatch.setenv(GUARD_MODE_ENV_VAR, " Enforce ")
    assert RepeatedToolFailureCapability().resolved_mode is GuardMode.ENFORCE
    assert RepeatedToolFailureCapability(mode="off").resolved_mode is GuardMode.OFF
    monkeypatch.setenv(GUARD_MODE_ENV_VAR, "loud")
    assert RepeatedToolFailureCapability().resolved_mode is GuardMode.SHADOW


def test_bad_configuration_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        RepeatedToolFailureCapability(mode="loud")
    with pytest.raises(ValueError, match="tool_call_cap"):
        RepeatedToolFailureCapability(tool_call_cap=0)
    with pytest.raises(ValueError, match="cannot be deferred"):
        RepeatedToolFailureCapability(defer_loading=True, id="guard")


# -- an optional extra, never imported by the agent or the core -----------------------

ROOT = Path(__file__).resolve().parents[1]


def test_nothing_but_the_adapter_imports_pydantic_ai() -> None:
    probe = (
        "import json, sys; import tool_failure_guard, tool_failure_guard.commands.cli, "
        "tool_failure_guard.session.transport.agent; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = json.loads(out.stdout)
    assert "tool_failure_guard.session.transport.agent" in loaded
    assert not [
        m for m in loaded if m.startswith(("pydantic_ai", "tool_failure_guard.integrations"))
    ]
    outside = [
        path
        for folder in ("guard", "statecharts", "session", "tool_failure_guard", "rollout")
        for path in (ROOT / folder).rglob("*.py")
        if "integrations" not in path.parts
        and re.search(
            r"^\s*(from|import) (pydantic_ai|tool_failure_guard\.integrations)",
            path.read_text(),
            re.M,
        )
    ]
    assert outside == []


def test_run_stream_stops_the_same_way() -> None:
    async def go(on_stop: Any) -> tuple[Any, Any, int]:
        with serve(FakeOpenAI(batches(*[FOUR_FAILURES] * 4))) as fake:
            model = OpenAIChatModel(
                "test-model", provider=OpenAIProvider(base_url=fake.base_url, api_key="k")
            )
            guard = RepeatedToolFailureCapability(mode="enforce", on_stop=on_stop)
            agent = Agent(model, tools=tools(fetch_failing), capabilities=[guard])
            try:
                async with agent.run_stream("go") as streamed:
                    output = await streamed.get_output()
            except ProtectionStopped as error:
                return error, error.report, len(fake.requests)
            return output, report_of(streamed), len(fake.requests)

    output, report, requests = asyncio.run(go("end"))
    assert isinstance(output, ProtectionStop) and output.loop_type == LOOP_REPEATED_TOOL_FAILURE
    assert requests == 3
    assert report is not None and report.decisions == ("tracked", "warn", "stop")
    error, report, requests = asyncio.run(go("error"))
    assert isinstance(error, ProtectionStopped) and requests == 3
    assert report.decisions == ("tracked", "warn", "stop") and report.stop == error.stop
