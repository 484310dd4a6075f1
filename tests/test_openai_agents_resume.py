"""A guarded run resumed from its ``RunState`` after a tool approval is guarded too.

Real ``agents`` 0.24 runs against the 127.0.0.1 test server.  One tool, ``read_file``,
fails the same way on every call; the call ``c5`` needs an approval, so the first run
stops to ask after five failing batches.  Resumed live (``result.to_state()``, same
process) the prompt's guard continues: the streak carries over the approval, so the
reminder and the stop come exactly where an uninterrupted run has them.  Resumed from a
serialized state (``to_string``/``from_string``, ``to_json``/``from_json``) the run has
a fresh guard (the guard is per prompt and in memory), and it is guarded.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from agents import (
    Agent,
    FunctionTool,
    MaxTurnsExceeded,
    Runner,
    RunState,
    UserError,
    function_tool,
)
from hosts.openai_agents import WAYS, make_agent, run, run_config
from openai_server import FakeOpenAI, Reply, call, serve
from telemetry_harness import Harness

from tool_failure_guard.core import LOOP_REPEATED_TOOL_FAILURE
from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER as REMINDER
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_STOP_MESSAGE
from tool_failure_guard.integrations._api import LOGGER_NAME
from tool_failure_guard.integrations.openai_agents import (
    GuardedRunner,
    ProtectionStopped,
    RunReport,
)
from tool_failure_guard.telemetry.sink import PROMPT_EVENT

#: The call that waits for an approval (the model's sixth response).
ASKED = "c5"


def reader(asked: str) -> FunctionTool:
    """``read_file``, failing every call; the call ``asked`` waits for an approval."""

    async def asks_for(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
        return call_id == asked

    @function_tool(needs_approval=asks_for)
    def read_file(path: str) -> str:
        """Read a file of the project (one call asks first)."""
        raise FileNotFoundError(f"no such file: {path}")

    return read_file


read_file = reader(ASKED)


def failing(body: dict[str, Any]) -> Reply:
    n = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return Reply(calls=(call(f"c{n}", "read_file", {"path": "missing.txt"}),))


def reminders(fake: FakeOpenAI) -> list[int]:
    """How many reminders each model request carried."""
    return [
        sum(1 for m in fake.messages(i) if m["role"] == "system" and REMINDER in str(m["content"]))
        for i in range(len(fake.requests))
    ]


def _interrupted(runner: Any, agent: Agent[Any], asked: str = ASKED) -> Any:
    result = run(runner, agent, "go")
    assert [item.raw_item.call_id for item in result.interruptions] == [asked]
    return result


def _resume(runner: Any, agent: Agent[Any], state: RunState[Any], way: str) -> Any:
    return run(runner, agent, state, way)  # type: ignore[arg-type]


def _resume_stopped(runner: Any, agent: Agent[Any], state: RunState[Any], way: str) -> Any:
    """Resume; the guard stops the resumed run (the default: it raises); its report."""
    with pytest.raises(ProtectionStopped) as raised:
        _resume(runner, agent, state, way)
    return _assert_stopped(raised.value)


def _assert_stopped(error: BaseException) -> RunReport:
    assert isinstance(error, ProtectionStopped) and isinstance(error, MaxTurnsExceeded)
    assert error.loop_type == LOOP_REPEATED_TOOL_FAILURE
    assert error.stop.notice == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
    assert error.run_data is not None  # the SDK's details of the resumed run
    return error.report


@pytest.mark.parametrize("way", WAYS)
def test_a_live_resume_continues_the_prompts_guard(way: str) -> None:
    fake = FakeOpenAI(failing)
    harness = Harness()
    runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        waiting = _interrupted(runner, agent)
        assert len(fake.requests) == 6  # five failing batches, then c5 asks
        state = waiting.to_state()
        state.approve(state.get_interruptions()[0])
        report = _resume_stopped(runner, agent, state, way)
    # c5 is the 6th failure; requests 7 and 8 bring the 7th and 8th; the reminder goes in
    # request 9 and its failure, the 9th, stops: as in a run that never waited.
    assert reminders(fake) == [0] * 8 + [1]
    assert report.decisions[-1] == "stop" and len(report.decisions) == 4  # c5, c6, c7, c8
    assert report.batches == 9 and report.observed == 4
    # one prompt: each of its two runs reports its record under the same prompt id
    prompts = harness.logs(PROMPT_EVENT)
    assert len(prompts) == 2 and prompts[0]["prompt_id"] == prompts[1]["prompt_id"]
    # the approved call ran (the SDK's failure text, not its rejection text, answered c5)
    (answer,) = [m["content"] for m in fake.messages(6) if m.get("tool_call_id") == ASKED]
    assert "error occurred while running the tool" in answer and "approv" not in answer


@pytest.mark.parametrize(
    ("form", "way"), [("string", "run"), ("json", "run_streamed"), ("string", "run_sync")]
)
def test_a_resume_from_a_serialized_state_is_guarded_with_a_fresh_guard(
    form: str, way: str
) -> None:
    fake = FakeOpenAI(failing)
    runner = GuardedRunner(mode="enforce")
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        waiting = _interrupted(runner, agent)

        async def rebuilt() -> RunState[Any]:
            if form == "string":
                return await RunState.from_string(agent, waiting.to_state().to_string())
            return await RunState.from_json(agent, waiting.to_state().to_json())

        state = asyncio.run(rebuilt())
        state.approve(state.get_interruptions()[0])
        report = _resume_stopped(runner, agent, state, way)
    # a fresh guard: c5 is its 1st failure, requests 7..13 bring the 2nd..8th, the reminder
    # goes in request 14 and the 9th failure stops
    assert reminders(fake) == [0] * 13 + [1]
    assert report.batches == 9 and report.observed == 9
    assert report.decisions[-1] == "stop"
    assert "none" not in report.decisions
    assert agent.tools == [read_file]  # the application's agent is still not changed


def test_a_resume_of_a_plain_runners_state_is_guarded() -> None:
    fake = FakeOpenAI(failing)
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])

        async def unguarded() -> Any:
            return await Runner.run(agent, "go", run_config=run_config(), max_turns=40)

        state = asyncio.run(asyncio.wait_for(unguarded(), 60)).to_state()
        state.approve(state.get_interruptions()[0])
        _resume_stopped(GuardedRunner(mode="enforce"), agent, state, "run")
    assert reminders(fake) == [0] * 13 + [1]


@pytest.mark.parametrize("way", WAYS)
def test_input_added_to_an_interrupted_state_reaches_the_model_and_is_guarded(way: str) -> None:
    fake = FakeOpenAI(failing)
    runner = GuardedRunner(mode="enforce")
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        waiting = _interrupted(runner, agent)
        state = waiting.to_state()
        state.approve(state.get_interruptions()[0])
        state.add_input("Also look at b.txt.")  # as with agents.Runner: no UserError
        _resume_stopped(runner, agent, state, way)
    users = [m["content"] for m in fake.messages(6) if m["role"] == "user"]
    assert users == ["go", "Also look at b.txt."]
    assert reminders(fake) == [0] * 8 + [1]


def test_a_reminder_given_before_the_wait_stays_in_the_resumed_runs_requests() -> None:
    async def asks_for(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
        return True

    @function_tool(needs_approval=asks_for)
    def list_dir(path: str) -> str:
        """List a directory (asks first)."""
        return "a.txt"

    def plan(body: dict[str, Any]) -> Reply:
        n = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if n < 8:
            return Reply(calls=(call(f"c{n}", "read_file", {"path": "missing.txt"}),))
        if n == 8:
            return Reply(calls=(call("c8", "list_dir", {"path": "."}),))
        return Reply(text="done")

    fake = FakeOpenAI(plan)
    runner = GuardedRunner(mode="enforce")
    with serve(fake):
        agent = make_agent(fake.base_url, [reader("none"), list_dir])
        state = _interrupted(runner, agent, "c8").to_state()  # 8 failures, the reminder, c8
        state.approve(state.get_interruptions()[0])
        resumed = _resume(runner, agent, state, "run")
    assert resumed.final_output == "done" and GuardedRunner.stop_of(resumed) is None
    # the resumed run's request keeps the reminder right after c7's output
    assert reminders(fake) == [0] * 8 + [1, 1]
    roles = [(m["role"], m.get("tool_call_id")) for m in fake.messages(9)]
    assert roles.index(("system", None), 1) == roles.index(("tool", "c7")) + 1


def test_two_states_of_one_run_resumed_at_once_are_both_guarded() -> None:
    fake = FakeOpenAI(failing)
    runner = GuardedRunner(mode="enforce")
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        waiting = _interrupted(runner, agent)
        states = [waiting.to_state(), waiting.to_state()]
        for state in states:
            state.approve(state.get_interruptions()[0])

        async def both() -> list[Any]:
            resumes = [runner.run(agent, state, run_config=run_config()) for state in states]
            return list(await asyncio.gather(*resumes, return_exceptions=True))

        results = asyncio.run(asyncio.wait_for(both(), 120))
    reports = [_assert_stopped(error) for error in results]
    # the first continues the prompt's guard (stops at the 9th failure overall); the clone
    # is taken, so the second has a fresh guard of its own (stops at its own 9th)
    assert [len(r.decisions) for r in reports] == [4, 9]


def test_input_added_before_the_stopping_batch_is_kept_not_sent() -> None:
    fake = FakeOpenAI(failing)
    runner = GuardedRunner(mode="enforce", on_stop="end")
    with serve(fake):
        agent = make_agent(fake.base_url, [reader("c8")])
        state = _interrupted(runner, agent, "c8").to_state()  # 8 failures, the reminder, c8
        state.approve(state.get_interruptions()[0])
        state.add_input("Also look at b.txt.")
        resumed = _resume(runner, agent, state, "run")
    assert len(fake.requests) == 9  # c8, the 9th failure, stops: no further request
    stop = GuardedRunner.stop_of(resumed)
    assert stop is not None and stop.loop_type == LOOP_REPEATED_TOOL_FAILURE
    assert resumed.final_output == stop.notice
    kept = resumed.to_state().pending_input
    assert [item.get("content") for item in kept] == ["Also look at b.txt."]


def test_add_input_is_refused_where_agents_runner_refuses_it() -> None:
    def own_behaviour(ctx: Any, results: list[Any]) -> Any:  # a callable may end the run
        from agents import ToolsToFinalOutputResult

        return ToolsToFinalOutputResult(is_final_output=False)

    fake = FakeOpenAI(failing)
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file], tool_use_behavior=own_behaviour)
        guarded = _interrupted(GuardedRunner(mode="enforce"), agent).to_state()

        async def unguarded() -> Any:
            return await Runner.run(agent, "go", run_config=run_config(), max_turns=40)

        plain = asyncio.run(asyncio.wait_for(unguarded(), 60)).to_state()
    for state in (plain, guarded):
        with pytest.raises(UserError, match="may end the run"):
            state.add_input("more")


def test_a_finished_runs_agent_carries_its_own_behaviour() -> None:
    fake = FakeOpenAI(failing)
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        waiting = _interrupted(GuardedRunner(mode="enforce"), agent)
    clone = waiting.last_agent
    assert clone is not agent and clone.tool_use_behavior == agent.tool_use_behavior
    assert isinstance(clone.tools[0], FunctionTool) and clone.tools[0] is not read_file


def test_shadow_logs_once_per_prompt_across_a_live_resume(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def plan(body: dict[str, Any]) -> Reply:
        n = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if n < 12:
            return Reply(calls=(call(f"c{n}", "read_file", {"path": "missing.txt"}),))
        return Reply(text="done")

    fake = FakeOpenAI(plan)
    runner = GuardedRunner(mode="shadow")
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    with serve(fake):
        agent = make_agent(fake.base_url, [reader("c8")])
        waiting = _interrupted(runner, agent, "c8")  # 8 failures: would remind; c8 asks
        first = [r for r in caplog.records if r.name == LOGGER_NAME]
        state = waiting.to_state()
        state.approve(state.get_interruptions()[0])
        resumed = _resume(runner, agent, state, "run")
    assert resumed.final_output == "done"  # shadow changes nothing the model sees
    records = [r for r in caplog.records if r.name == LOGGER_NAME]
    decided = [getattr(r, "tool_failure_guard_decision", None) for r in records]
    assert [getattr(r, "tool_failure_guard_decision", None) for r in first] == ["would_warn"]
    assert decided == ["would_warn", "would_stop"]  # c8, the 9th failure: would stop, once
    report = GuardedRunner.report_of(resumed)
    assert report is not None and "would_stop" in report.decisions and report.stop is None


@pytest.mark.parametrize("way", WAYS)
def test_a_resumed_run_stopped_at_its_last_allowed_turn_raises_the_stop(way: str) -> None:
    # The state keeps the first run's max_turns (9): the resumed run's 9th failing batch
    # stops it and meets the SDK's limit check first; the caller's handler is the limit's.
    asked: list[BaseException] = []
    fake = FakeOpenAI(failing)
    runner = GuardedRunner(mode="enforce")
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        waiting = run(runner, agent, "go", max_turns=9)
        state = waiting.to_state()
        state.approve(state.get_interruptions()[0])
        with pytest.raises(ProtectionStopped) as raised:
            run(
                runner,
                agent,
                state,  # type: ignore[arg-type]
                way,  # type: ignore[arg-type]
                error_handlers={"max_turns": lambda data: asked.append(data.error) or "fallback"},
            )
    assert len(fake.requests) == 9 and asked == []
    report = _assert_stopped(raised.value)
    assert report.decisions[-1] == "stop" and raised.value.__cause__ is None
