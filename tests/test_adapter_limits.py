"""Inside a framework, every protection follows the mode (issue 34, item 1).

``off`` changes nothing and ``shadow`` changes nothing a run does: a legitimate run of
120 successful tool calls runs to its end, and three calls with a wrong argument name do
not stop it; shadow's :class:`RunReport` says what a protection would have done.  The
tool-call cap and the invalid-parameter stop are options (``tool_call_cap``,
``invalid_params_limit``; None by default) that stop a run only in ``warn``/``enforce``.
Real LangChain and pydantic-ai agents against the scripted 127.0.0.1 model server.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool
from langchain_harness import guarded_run as langchain_run
from langchain_harness import replies
from openai_server import FakeOpenAI, serve
from pydantic_ai_harness import batches
from pydantic_ai_harness import guarded_run as pydantic_ai_run

from tool_failure_guard.core import LOOP_INVALID_TOOL_PARAMS, LOOP_TOOL_CALL_CAP
from tool_failure_guard.integrations._api import limit_option
from tool_failure_guard.integrations.langchain import RepeatedToolFailureMiddleware
from tool_failure_guard.integrations.openai_agents import GuardedRunner
from tool_failure_guard.integrations.pydantic_ai import (
    ProtectionStop,
    RepeatedToolFailureCapability,
)
from tool_failure_guard.integrations.pydantic_ai import report_of as pydantic_ai_report_of

#: 12 responses of 10 successful calls: 120 calls, past the original's cap of 100.
MANY = [[("lookup", {"key": f"k{n}-{i}"}) for i in range(10)] for n in range(12)]
#: one call naming its argument wrongly (``name`` for ``key``), three responses in a row
WRONG_NAME = [[("lookup", {"name": "k"})]] * 3


def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def langchain_tools() -> list[Any]:
    # a wrong argument name is answered to the model (ToolNode's validation error)
    return [StructuredTool.from_function(lookup, handle_validation_error=True)]


@contextlib.contextmanager
def serve_answers(answers: list[Any]) -> Iterator[str]:
    with serve(FakeOpenAI(answers)) as fake:
        yield fake.base_url


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


# -- LangChain ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["off", "shadow"])
def test_langchain_120_successful_calls_run_to_the_end(mode: str) -> None:
    ran = langchain_run(replies(*MANY, final="All looked up."), langchain_tools(), mode=mode)
    assert ran.stop is None
    assert len(tool_messages(ran.state)) == 120
    assert ran.state["messages"][-1].content == "All looked up."
    assert ran.report.tool_calls == 120 and ran.report.would_stop_loop_type is None


def test_langchain_shadow_with_a_cap_runs_on_and_reports_the_cap() -> None:
    guard = RepeatedToolFailureMiddleware(mode="shadow", tool_call_cap=100)
    ran = langchain_run(replies(*MANY, final="All looked up."), langchain_tools(), guard=guard)
    assert ran.stop is None and len(tool_messages(ran.state)) == 120
    assert ran.report.would_stop_loop_type == LOOP_TOOL_CALL_CAP and ran.report.would_stop


@pytest.mark.parametrize("mode", ["warn", "enforce"])
def test_langchain_the_cap_stops_when_set_in_warn_and_enforce(mode: str) -> None:
    guard = RepeatedToolFailureMiddleware(mode=mode, tool_call_cap=100, on_stop="end")
    ran = langchain_run(replies(*MANY), langchain_tools(), guard=guard)
    assert ran.stop is not None and ran.stop.loop_type == LOOP_TOOL_CALL_CAP
    assert len(tool_messages(ran.state)) == 100  # calls past the cap never run


@pytest.mark.parametrize("mode", ["off", "shadow", "warn", "enforce"])
def test_langchain_three_wrong_argument_names_do_not_stop_by_default(mode: str) -> None:
    ran = langchain_run(replies(*WRONG_NAME, final="Gave up."), langchain_tools(), mode=mode)
    assert ran.stop is None
    assert ran.state["messages"][-1].content == "Gave up."
    assert len(tool_messages(ran.state)) == 3


def test_langchain_shadow_reports_the_invalid_parameter_stop_it_held_back() -> None:
    guard = RepeatedToolFailureMiddleware(mode="shadow", invalid_params_limit=3)
    ran = langchain_run(replies(*WRONG_NAME, final="Gave up."), langchain_tools(), guard=guard)
    assert ran.stop is None and ran.state["messages"][-1].content == "Gave up."
    assert ran.report.would_stop_loop_type == LOOP_INVALID_TOOL_PARAMS


@pytest.mark.parametrize("mode", ["warn", "enforce"])
def test_langchain_the_invalid_parameter_limit_stops_when_set(mode: str) -> None:
    guard = RepeatedToolFailureMiddleware(mode=mode, invalid_params_limit=3, on_stop="end")
    ran = langchain_run(replies(*WRONG_NAME, final="Gave up."), langchain_tools(), guard=guard)
    assert ran.stop is not None and ran.stop.loop_type == LOOP_INVALID_TOOL_PARAMS


# -- pydantic-ai --------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["off", "shadow"])
def test_pydantic_ai_120_successful_calls_run_to_the_end(mode: str) -> None:
    ran = pydantic_ai_run(batches(*MANY, final="All looked up."), [lookup], mode=mode)
    assert ran.result.output == "All looked up."
    report = pydantic_ai_report_of(ran.result)
    assert report is not None and report.stop is None and report.tool_calls == 120
    assert report.would_stop_loop_type is None


def test_pydantic_ai_shadow_with_a_cap_runs_on_and_reports_the_cap() -> None:
    ran = pydantic_ai_run(
        batches(*MANY, final="All looked up."), [lookup], mode="shadow", tool_call_cap=100
    )
    assert ran.result.output == "All looked up."
    report = pydantic_ai_report_of(ran.result)
    assert report is not None and report.would_stop_loop_type == LOOP_TOOL_CALL_CAP


@pytest.mark.parametrize("mode", ["warn", "enforce"])
def test_pydantic_ai_the_cap_stops_when_set(mode: str) -> None:
    ran = pydantic_ai_run(batches(*MANY), [lookup], mode=mode, tool_call_cap=100)
    assert isinstance(ran.result.output, ProtectionStop)
    assert ran.result.output.loop_type == LOOP_TOOL_CALL_CAP


@pytest.mark.parametrize("mode", ["off", "shadow", "warn", "enforce"])
def test_pydantic_ai_three_wrong_argument_names_do_not_stop_by_default(mode: str) -> None:
    ran = pydantic_ai_run(batches(*WRONG_NAME, final="Gave up."), [lookup], mode=mode)
    assert ran.result.output == "Gave up."


def test_pydantic_ai_shadow_reports_the_invalid_parameter_stop_it_held_back() -> None:
    ran = pydantic_ai_run(
        batches(*WRONG_NAME, final="Gave up."), [lookup], mode="shadow", invalid_params_limit=3
    )
    assert ran.result.output == "Gave up."
    report = pydantic_ai_report_of(ran.result)
    assert report is not None and report.would_stop_loop_type == LOOP_INVALID_TOOL_PARAMS


@pytest.mark.parametrize("mode", ["warn", "enforce"])
def test_pydantic_ai_the_invalid_parameter_limit_stops_when_set(mode: str) -> None:
    ran = pydantic_ai_run(
        batches(*WRONG_NAME, final="Gave up."), [lookup], mode=mode, invalid_params_limit=3
    )
    assert isinstance(ran.result.output, ProtectionStop)
    assert ran.result.output.loop_type == LOOP_INVALID_TOOL_PARAMS


# -- the shared options -------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, True, 2.5, "3"])
@pytest.mark.parametrize("name", ["tool_call_cap", "invalid_params_limit"])
def test_every_adapter_refuses_a_bad_limit_naming_it_and_the_bound(name: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"{name} must be None \\(off\\) or an int of at least 1"):
        limit_option(name, value)
    for build in (RepeatedToolFailureMiddleware, RepeatedToolFailureCapability, GuardedRunner):
        with pytest.raises(ValueError, match=name):
            build(**{name: value})


def test_the_limits_are_off_by_default_in_every_adapter() -> None:
    assert RepeatedToolFailureCapability().tool_call_cap is None
    assert RepeatedToolFailureCapability().invalid_params_limit is None
    for build in (RepeatedToolFailureMiddleware, GuardedRunner):
        adapter: Any = build()
        assert adapter._tool_call_cap is None and adapter._invalid_params_limit is None


# -- provider replays: held back only where protections act ------------------------


def _replaying_answers() -> list[Any]:
    """Batch 1 calls ``note(a)`` as b1c0; batch 2 sends the very same call again (a replay)."""
    first = replies([("note", {"text": "a"})])[:1]
    return [*first, *replies([("note", {"text": "a"})], final="Noted.")]


@pytest.mark.parametrize(("mode", "runs"), [("off", 2), ("shadow", 2), ("enforce", 1)])
def test_langchain_a_replay_runs_as_langchain_runs_it_unless_protections_act(
    mode: str, runs: int
) -> None:
    ran_with: list[str] = []

    def note(text: str) -> str:
        """Write a note."""
        ran_with.append(text)
        return "noted"

    ran = langchain_run(_replaying_answers(), [StructuredTool.from_function(note)], mode=mode)
    assert ran_with == ["a"] * runs  # LangChain itself runs a replayed call again
    assert ran.state["messages"][-1].content == "Noted."


@pytest.mark.parametrize(("mode", "runs"), [("off", 2), ("shadow", 2), ("enforce", 1)])
def test_pydantic_ai_a_replay_runs_as_pydantic_ai_runs_it_unless_protections_act(
    mode: str, runs: int
) -> None:
    ran_with: list[str] = []

    def note(text: str) -> str:
        """Write a note."""
        ran_with.append(text)
        return "noted"

    ran = pydantic_ai_run(_replaying_answers(), [note], mode=mode)
    assert ran_with == ["a"] * runs  # pydantic-ai itself runs a replayed call again
    assert ran.result.output == "Noted."


@pytest.mark.parametrize("mode", ["off", "shadow"])
def test_openai_agents_off_and_shadow_run_a_replay_as_the_bare_sdk_does(mode: str) -> None:
    import asyncio

    from agents import Runner, function_tool
    from hosts.openai_agents import make_agent, run, run_config

    def sequence() -> tuple[list[str], Any]:
        ran_with: list[str] = []

        @function_tool(name_override="note")
        def note(text: str) -> str:
            """Write a note."""
            ran_with.append(text)
            return "noted"

        return ran_with, note

    bare, bare_tool = sequence()
    with serve_answers(_replaying_answers()) as base_url:
        agent = make_agent(base_url, [bare_tool])
        bare_result = asyncio.run(Runner.run(agent, "go", run_config=run_config()))
    guarded, guarded_tool = sequence()
    with serve_answers(_replaying_answers()) as base_url:
        result = run(GuardedRunner(mode=mode), make_agent(base_url, [guarded_tool]), "go")
    assert guarded == bare  # whatever the SDK does with a replay, the guard changes nothing
    assert result.final_output == bare_result.final_output
