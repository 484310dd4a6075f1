"""A function tool past its ``timeout_seconds`` is a timeout, told by the SDK's own handling.

The SDK starts the tool's timer (``asyncio.wait_for``) before the tool's task first runs.
On a loaded machine the loop can stall between the two, so by the loop's own clock the
tool ran for less than its timeout when the SDK cancelled it: a clock comparison (the
adapter's old rule) filed that real timeout as a cancellation. The loop here stalls
deterministically, by a virtual clock jump right after the SDK sets the tool's timer:
no test waits on the wall clock, and none asserts a time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import ToolTimeoutError, function_tool
from agents.tool_context import ToolContext
from hosts.openai_agents import make_agent, run_config
from openai_server import FakeOpenAI, Reply, call, serve
from telemetry_harness import Harness

from tool_failure_guard.integrations.openai_agents import GuardedRunner
from tool_failure_guard.telemetry.sink import TOOL_CALL_EVENT

#: The tool's timeout; far from every other timer of a run, and never waited for.
TIMEOUT_S = 30.0


class StallingLoop(asyncio.SelectorEventLoop):
    """An event loop that stalls once, right after a timer of ``TIMEOUT_S`` is set.

    The stall is a jump of its clock (``time()``) past that timer: what a loop busy
    elsewhere for longer than the timeout looks like to the code it runs next.
    """

    def __init__(self) -> None:
        super().__init__()
        self.skew = 0.0
        self.stalled = False

    def time(self) -> float:
        return float(super().time()) + self.skew

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> Any:
        handle = super().call_at(when, callback, *args, context=context)
        if not self.stalled and abs(when - self.time() - TIMEOUT_S) < 1.0:
            self.stalled = True
            self.skew += TIMEOUT_S + 1.0
        return handle


def one_call_then_text(body: dict[str, Any]) -> Reply:
    if any(m["role"] == "tool" for m in body["messages"]):
        return Reply(text="It timed out.")
    return Reply(calls=(call("c0", "read_file", {"path": "big.log"}),))


def slow_read(seen: dict[str, float], **options: Any) -> Any:
    @function_tool(name_override="read_file", timeout=TIMEOUT_S, **options)
    async def read(path: str) -> str:
        """Read a file (slowly)."""
        loop = asyncio.get_running_loop()
        seen["started"] = loop.time()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen["cancelled"] = loop.time()
            raise
        return "never"

    return read


def run_stalling(runner: GuardedRunner, agent: Any) -> tuple[Any, StallingLoop]:
    loop = StallingLoop()
    try:
        coro = runner.run(agent, "go", run_config=run_config(), max_turns=5)
        result = loop.run_until_complete(asyncio.wait_for(coro, 60))
    finally:
        loop.close()
    return result, loop


def settled(harness: Harness) -> list[tuple[str, str, str | None]]:
    return [
        (r["terminal_status"], r["execution_status"], r.get("execution_error_type"))
        for r in harness.logs(TOOL_CALL_EVENT)
    ]


def test_a_timeout_after_a_stalled_loop_is_a_timeout_not_a_cancellation() -> None:
    seen: dict[str, float] = {}
    harness = Harness()
    fake = FakeOpenAI(one_call_then_text)
    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        result, loop = run_stalling(runner, make_agent(fake.base_url, [slow_read(seen)]))
    assert loop.stalled
    # by the loop's clock the body ran for less than its timeout: a clock rule says cancelled
    assert seen["cancelled"] - seen["started"] < TIMEOUT_S
    assert settled(harness) == [("error", "error", "timeout")]
    tool_texts = [str(m["content"]) for m in fake.messages(1) if m["role"] == "tool"]
    assert tool_texts == [f"Tool 'read_file' timed out after {TIMEOUT_S:g} seconds."]
    assert result.final_output == "It timed out."


def test_a_raised_timeout_after_a_stalled_loop_is_a_timeout() -> None:
    seen: dict[str, float] = {}
    harness = Harness()
    fake = FakeOpenAI(one_call_then_text)
    tool = slow_read(seen, timeout_behavior="raise_exception")
    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        with pytest.raises(ToolTimeoutError):
            run_stalling(runner, make_agent(fake.base_url, [tool]))
    assert seen["cancelled"] - seen["started"] < TIMEOUT_S
    assert settled(harness) == [("error", "error", "timeout")]


def test_the_tools_own_timeout_text_still_answers_the_model() -> None:
    def explain(ctx: ToolContext[Any], error: Exception) -> str:
        assert isinstance(error, ToolTimeoutError)
        return f"custom: {ctx.tool_call_id} gave up after {error.timeout_seconds:g}s"

    harness = Harness()
    fake = FakeOpenAI(one_call_then_text)
    tool = slow_read({}, timeout_error_function=explain)
    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        run_stalling(runner, make_agent(fake.base_url, [tool]))
    assert settled(harness) == [("error", "error", "timeout")]
    tool_texts = [str(m["content"]) for m in fake.messages(1) if m["role"] == "tool"]
    assert tool_texts == ["custom: c0 gave up after 30s"]


def test_a_run_cancelled_while_a_timed_tool_runs_is_a_cancellation() -> None:
    started = asyncio.Event()

    @function_tool(name_override="read_file", timeout=TIMEOUT_S)
    async def waiting_read(path: str) -> str:
        """Read a file (waits until cancelled)."""
        started.set()
        await asyncio.sleep(3600)
        return "never"

    harness = Harness()
    fake = FakeOpenAI(one_call_then_text)

    async def cut() -> None:
        task = asyncio.ensure_future(
            runner.run(make_agent(fake.base_url, [waiting_read]), "go", run_config=run_config())
        )
        await asyncio.wait_for(started.wait(), 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        asyncio.run(cut())
    assert settled(harness) == [("cancelled", "cancelled", None)]
