"""How a LangChain run the guard stops ends: ``on_stop="error"`` (the default) and ``"end"``.

Real ``create_agent`` agents with ``ChatOpenAI`` over the real wire to the
127.0.0.1 test server.  The shared API set (``tests/test_adapter_api.py``)
holds what every adapter does alike; these are LangChain's own facts: the
error is LangChain's ``ToolCallLimitExceededError`` too, in every way to run;
the thread's checkpoint keeps the settled results; the run is finished (its
prompt record written) though no ``after_agent`` follows an exception.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from hosts.langchain import WAYS, ErrorsToModel, Way, behaviour_tools, make_agent, run
from langchain.agents.middleware.tool_call_limit import ToolCallLimitExceededError
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langchain_harness import replies
from langgraph.checkpoint.memory import InMemorySaver
from openai_server import FakeOpenAI, serve
from telemetry_harness import Harness

from tool_failure_guard.core import LOOP_REPEATED_TOOL_FAILURE, LOOP_TOOL_CALL_CAP
from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_STOP_MESSAGE, FailureKey
from tool_failure_guard.integrations import _api
from tool_failure_guard.integrations.langchain import (
    ProtectionStopped,
    RepeatedToolFailureMiddleware,
    report_of,
    stop_of,
)
from tool_failure_guard.telemetry import sink as telemetry

FAIL = ("read_file", {"path": "missing.txt"})
LOOP = [FAIL] * 4
KEY = FailureKey("read_file", "file_not_found")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path


@pytest.mark.parametrize("way", WAYS)
def test_the_default_stop_raises_langchains_own_limit_error_in_every_way(
    way: Way, workspace: Path
) -> None:
    guard = RepeatedToolFailureMiddleware(mode="enforce")
    with serve(FakeOpenAI(replies(LOOP, LOOP, LOOP, LOOP))) as fake:
        agent = make_agent(
            fake.base_url, behaviour_tools(workspace), guard, inner=[ErrorsToModel()]
        )
        with pytest.raises(ToolCallLimitExceededError) as raised:  # a handler for that limit
            run(agent, "go", way)
        requests = len(fake.requests)
    error = raised.value
    assert isinstance(error, ProtectionStopped) and isinstance(error, _api.ProtectionStopped)
    assert (error.loop_type, error.key) == (LOOP_REPEATED_TOOL_FAILURE, KEY)
    assert str(error) == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
    # LangChain's fields: this run's tool calls, the failing tool, no count limit
    assert (error.run_count, error.tool_name, error.run_limit, error.thread_limit) == (
        12,
        "read_file",
        None,
        None,
    )
    assert stop_of(error) == error.stop and report_of(error) == error.report
    assert error.report.decisions == ("tracked", "warn", "stop")
    assert requests == 3  # no request after the stopping batch


def test_the_checkpoint_keeps_the_settled_results_of_a_raised_stop(workspace: Path) -> None:
    guard = RepeatedToolFailureMiddleware(mode="enforce")
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    with serve(FakeOpenAI(replies(LOOP, LOOP, LOOP, LOOP))) as fake:
        agent = make_agent(
            fake.base_url,
            behaviour_tools(workspace),
            guard,
            inner=[ErrorsToModel()],
            checkpointer=InMemorySaver(),
        )
        with pytest.raises(ProtectionStopped):
            agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config)
    messages = agent.get_state(config).values["messages"]
    kept = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert kept == [f"b{n}c{i}" for n in (1, 2, 3) for i in range(4)]
    assert isinstance(messages[-1], ToolMessage)  # no answer was made up in the model's place


def test_a_raised_stop_still_finishes_the_runs_telemetry(workspace: Path) -> None:
    harness = Harness()
    guard = RepeatedToolFailureMiddleware(mode="enforce", telemetry=harness.sink)
    with serve(FakeOpenAI(replies(LOOP, LOOP, LOOP, LOOP))) as fake:
        agent = make_agent(
            fake.base_url, behaviour_tools(workspace), guard, inner=[ErrorsToModel()]
        )
        with pytest.raises(ProtectionStopped):
            run(agent, "go")
    (prompt,) = harness.logs(telemetry.PROMPT_EVENT)
    assert (prompt["route"], prompt["loop_type"], prompt["batches"]) == (
        "langchain",
        LOOP_REPEATED_TOOL_FAILURE,
        3,
    )


def test_end_answers_with_the_stop_text_in_the_models_place(workspace: Path) -> None:
    guard = RepeatedToolFailureMiddleware(mode="enforce", on_stop="end")
    with serve(FakeOpenAI(replies(LOOP, LOOP, LOOP, LOOP))) as fake:
        agent = make_agent(
            fake.base_url, behaviour_tools(workspace), guard, inner=[ErrorsToModel()]
        )
        state = run(agent, "go")
    last = state["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls
    assert last.content == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
    stop = stop_of(state)
    assert stop is not None and stop.key == KEY and stop.notice == last.content
    assert guard.on_stop == "end"


def test_the_error_pickles_with_its_stop_and_report(workspace: Path) -> None:
    guard = RepeatedToolFailureMiddleware(mode="enforce")
    with serve(FakeOpenAI(replies(LOOP, LOOP, LOOP, LOOP))) as fake:
        agent = make_agent(
            fake.base_url, behaviour_tools(workspace), guard, inner=[ErrorsToModel()]
        )
        with pytest.raises(ProtectionStopped) as raised:
            run(agent, "go")
    copy = pickle.loads(pickle.dumps(raised.value))
    assert type(copy) is ProtectionStopped
    assert (copy.stop, copy.report, copy.run_count) == (
        raised.value.stop,
        raised.value.report,
        12,
    )


def test_calls_past_the_tool_call_cap_never_run_and_the_cap_stops_the_run() -> None:
    ran: list[str] = []

    def note(text: str) -> str:
        """Write a note."""
        ran.append(text)
        return "noted"

    batch = [("note", {"text": f"n{i}"}) for i in range(4)]
    guard = RepeatedToolFailureMiddleware(mode="enforce", tool_call_cap=5)
    with serve(FakeOpenAI(replies(batch, batch, batch))) as fake:
        agent = make_agent(fake.base_url, [StructuredTool.from_function(note)], guard)
        with pytest.raises(ProtectionStopped) as raised:  # the cap, when set, stops in enforce
            run(agent, "go")
        requests = len(fake.requests)
    assert raised.value.loop_type == LOOP_TOOL_CALL_CAP and raised.value.key is None
    assert len(ran) == 5 and requests == 2  # four, then one of the second batch's four
    assert raised.value.report.tool_calls == 8 and raised.value.report.observed == 8
