"""The LangChain v1 adapter over the real wire: ``create_agent`` + ``ChatOpenAI`` + the guard.

Every run is a real LangChain agent whose ``ChatOpenAI`` model talks HTTP to
the project's OpenAI-compatible test server on 127.0.0.1; nothing of LangChain
is mocked.  The shared behaviour set runs on this host too
(``tests/hosts/langchain.py``); these are the adapter's own cases.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hosts.langchain import (
    WAYS,
    ErrorsToModel,
    Way,
    behaviour_tools,
    chat_model,
    make_agent,
    run,
)
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    ToolRetryMiddleware,
)
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool, ToolException
from langchain_harness import guarded_run, replies
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from openai_server import FakeOpenAI, Reply, call, serve
from pydantic import BaseModel
from telemetry_harness import Harness

from tool_failure_guard.core import LOOP_INVALID_TOOL_PARAMS, LOOP_REPEATED_TOOL_FAILURE
from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_STOP_MESSAGE as STOP_MESSAGE
from tool_failure_guard.integrations.langchain import (
    ROUTE,
    GuardStop,
    ProtectionStopped,
    RepeatedToolFailureMiddleware,
)
from tool_failure_guard.telemetry import sink as telemetry

FAIL = ("read_file", {"path": "missing.txt"})
LIST_OK = ("list_directory", {"path": "."})
INVALID = ("read_file", {})
LOOP = [FAIL] * 4


class QuotaExceeded(ToolException):
    error_type = "quota_exceeded"


def fetch(key: str) -> str:
    """Fetch a record (always over quota)."""
    raise QuotaExceeded(f"quota exceeded for {key}")


def fetch_tool(handle: Any) -> StructuredTool:
    return StructuredTool.from_function(fetch, handle_tool_error=handle)


FETCH = [("fetch", {"key": "k"})] * 4


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("way", WAYS)
def test_every_way_to_run_is_guarded_and_ends_with_the_typed_stop(
    way: Way, workspace: Path
) -> None:
    ran = guarded_run(
        replies(LOOP, LOOP, LOOP, LOOP),
        behaviour_tools(workspace),
        way=way,
        inner=[ErrorsToModel()],
    )
    assert ran.decisions == ("tracked", "warn", "stop")
    assert len(ran.requests) == 3  # no model request after the stop
    assert [ran.count_in(i, REPEATED_TOOL_FAILURE_REMINDER) for i in range(3)] == [0, 0, 1]
    stop = ran.stop
    assert isinstance(stop, GuardStop) and stop.loop_type == LOOP_REPEATED_TOOL_FAILURE
    last = ran.state["messages"][-1]
    assert isinstance(last, AIMessage) and last.content == shown_text(STOP_MESSAGE)
    assert stop.notice == shown_text(STOP_MESSAGE)
    # the settled results stay in the state, the stopping batch's included
    kept = [m.tool_call_id for m in ran.state["messages"] if isinstance(m, ToolMessage)]
    assert kept == [f"b{n}c{i}" for n in (1, 2, 3) for i in range(4)]
    # the reminder is a system message in state, right after batch 2's results
    kinds = [type(m).__name__ for m in ran.state["messages"]]
    at = kinds.index("SystemMessage")
    assert ran.state["messages"][at].content == REPEATED_TOOL_FAILURE_REMINDER
    assert kinds[at - 4 : at] == ["ToolMessage"] * 4 and kinds[at + 1] == "AIMessage"


@pytest.mark.parametrize("way", ["invoke", "ainvoke"])
def test_parallel_calls_of_one_response_are_one_batch(way: Way, workspace: Path) -> None:
    batch = [FAIL, FAIL, LIST_OK, FAIL]
    ran = guarded_run(
        replies(batch, batch, batch, batch),
        behaviour_tools(workspace),
        way=way,
        inner=[ErrorsToModel()],
    )
    assert ran.decisions == ("tracked", "tracked", "warn", "stop")
    assert ran.report.tool_calls == ran.report.observed == 16


def test_a_second_run_of_the_same_agent_starts_with_a_fresh_guard(workspace: Path) -> None:
    guard = RepeatedToolFailureMiddleware(mode="enforce")  # the first run's stop raises
    answers = [*replies(LOOP, LOOP, LOOP)[:3], *replies(LOOP)]
    with serve(FakeOpenAI(answers)) as fake:
        agent = make_agent(
            fake.base_url, behaviour_tools(workspace), guard, inner=[ErrorsToModel()]
        )
        with pytest.raises(ProtectionStopped) as first:
            run(agent, "go")
        second = run(agent, "go again")
        requests = list(fake.requests)
    assert RepeatedToolFailureMiddleware.stop_of(first.value) is not None
    report = RepeatedToolFailureMiddleware.report_of(second)
    assert report is not None and report.stop is None
    assert report.decisions == ("tracked",)
    assert second["messages"][-1].content == "Done."
    assert len(requests) == 5 and REPEATED_TOOL_FAILURE_REMINDER not in str(requests[3])


@pytest.mark.parametrize("handle", [True, "the fetch failed", lambda e: f"handled: {e}"])
def test_a_tool_with_its_own_error_handler_is_still_observed_and_typed(handle: Any) -> None:
    harness = Harness()
    guard = RepeatedToolFailureMiddleware(mode="enforce", telemetry=harness.sink, on_stop="end")
    ran = guarded_run(replies(FETCH, FETCH, FETCH), [fetch_tool(handle)], guard=guard)
    assert ran.decisions == ("tracked", "warn", "stop")
    assert ran.stop is not None and ran.stop.loop_type == LOOP_REPEATED_TOOL_FAILURE
    # the model still got the tool's own error text, as an error ToolMessage
    answers = [m for m in ran.state["messages"] if isinstance(m, ToolMessage)]
    assert {m.status for m in answers} == {"error"}
    expected = {True: "quota exceeded for k", "the fetch failed": "the fetch failed"}
    assert answers[0].content == expected.get(handle, "handled: quota exceeded for k")
    calls = harness.logs(telemetry.TOOL_CALL_EVENT)
    assert {
        (c["terminal_status"], c["execution_status"], c["execution_error_type"]) for c in calls
    } == {("error", "error", "quota_exceeded")}


def test_invalid_arguments_are_never_counted_with_or_without_the_tools_handler(
    workspace: Path,
) -> None:
    tools = behaviour_tools(workspace)
    tools[0] = tools[0].model_copy(update={"handle_validation_error": True})
    harness = Harness()
    guard = RepeatedToolFailureMiddleware(mode="enforce", telemetry=harness.sink, on_stop="end")
    ran = guarded_run(
        replies(LOOP, [*LOOP, INVALID], LOOP, LOOP, LOOP),
        tools,
        guard=guard,
        inner=[ErrorsToModel()],
    )
    assert ran.decisions == ("tracked", "reset", "tracked", "warn", "stop")
    invalid = [c for c in harness.logs(telemetry.TOOL_CALL_EVENT) if c["call_ordinal"] == 4]
    assert [(c["execution_status"], c["execution_error_type"]) for c in invalid] == [
        ("not_started", "invalid_tool_params")
    ]
    # ToolNode's own answer (ToolInvocationError, no handler on the tool): the same
    guard = RepeatedToolFailureMiddleware(mode="enforce", on_stop="end", invalid_params_limit=3)
    ran = guarded_run(
        replies([INVALID, INVALID], [INVALID]), behaviour_tools(workspace), guard=guard
    )
    assert ran.stop is not None and ran.stop.loop_type == LOOP_INVALID_TOOL_PARAMS
    assert ran.decisions == ("none",)


def test_an_unknown_tool_is_not_started(workspace: Path) -> None:
    harness = Harness()
    guard = RepeatedToolFailureMiddleware(mode="enforce", telemetry=harness.sink)
    ran = guarded_run(replies([("no_such_tool", {})]), behaviour_tools(workspace), guard=guard)
    assert ran.state["messages"][-1].content == "Done."
    (record,) = harness.logs(telemetry.TOOL_CALL_EVENT)
    assert (record["execution_status"], record["execution_error_type"]) == (
        "not_started",
        "tool_not_registered",
    )


def test_a_replayed_call_id_is_never_run_again(tmp_path: Path) -> None:
    ran_times: list[str] = []

    def note(text: str) -> str:
        """Write a note."""
        ran_times.append(text)
        return "noted"

    # A replay is the same call sent again (same id, name and arguments; core protections).
    answers = [*replies([("note", {"text": "a"})])[:1], *replies([("note", {"text": "a"})])]
    ran = guarded_run(answers, [StructuredTool.from_function(note)])
    assert ran_times == ["a"]  # the replayed b1c0 was answered, not executed
    replayed = [m for m in ran.state["messages"] if isinstance(m, ToolMessage)][1]
    assert replayed.status == "error" and replayed.tool_call_id == "b1c0"


def test_telemetry_goes_through_the_agents_sinks_with_route_langchain(workspace: Path) -> None:
    harness = Harness()
    guard = RepeatedToolFailureMiddleware(mode="enforce", telemetry=harness.sink, on_stop="end")
    guarded_run(replies(LOOP, LOOP, LOOP), behaviour_tools(workspace), guard=guard,
                inner=[ErrorsToModel()])  # fmt: skip
    assert ROUTE == "langchain" and ROUTE in telemetry.GUARD_ROUTES
    guard_points = harness.points(telemetry.GUARD_COUNTER)
    assert {attrs["route"] for attrs, _ in guard_points} == {"langchain"}
    assert sorted(attrs["decision"] for attrs, _ in guard_points) == [
        "stopped",
        "tracked",
        "warned",
    ]
    assert [r["execution_error_type"] for r in harness.logs(telemetry.GUARD_LOG_EVENT)] == [
        "file_not_found"
    ] * 3
    (prompt,) = harness.logs(telemetry.PROMPT_EVENT)
    assert (prompt["route"], prompt["mode"], prompt["loop_type"]) == (
        "langchain",
        "enforce",
        LOOP_REPEATED_TOOL_FAILURE,
    )
    assert (prompt["batches"], prompt["tool_calls"], prompt["model_turns"]) == (3, 12, 3)
    assert len(harness.logs(telemetry.TOOL_CALL_EVENT)) == 12
    assert harness.points(telemetry.LOOP_DETECTED_COUNTER) == [
        ({"loop_type": LOOP_REPEATED_TOOL_FAILURE}, 1)
    ]


class AnswersWithoutRunning(AgentMiddleware[Any, Any]):
    """An app middleware that answers every call from a cache: the tool never runs."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return ToolMessage(
            content="cached", name=request.tool_call["name"], tool_call_id=request.tool_call["id"]
        )


def test_a_run_whose_calls_were_never_observed_warns_once_naming_the_adapter(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="tool_failure_guard.integrations.langchain"):
        ran = guarded_run(
            replies(LOOP, LOOP), behaviour_tools(workspace), mode="warn",
            inner=[AnswersWithoutRunning()],
        )  # fmt: skip
    assert (ran.report.tool_calls, ran.report.observed) == (8, 0)
    warnings = [r for r in caplog.records if "observed none" in r.getMessage()]
    assert len(warnings) == 1 and "RepeatedToolFailureMiddleware" in warnings[0].getMessage()
    assert "langchain" in warnings[0].getMessage()
    # an incomplete receipt is never reduced as a failure: no reminder, no stop
    assert ran.stop is None
    assert not any(isinstance(m, SystemMessage) for m in ran.state["messages"])


def test_the_mode_comes_from_the_environment_unless_the_constructor_sets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD", raising=False)
    assert RepeatedToolFailureMiddleware().mode.value == "shadow"
    monkeypatch.setenv("QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD", "warn")
    assert RepeatedToolFailureMiddleware().mode.value == "warn"
    assert RepeatedToolFailureMiddleware(mode="enforce").mode.value == "enforce"
    with pytest.raises(ValueError, match="enforce"):
        RepeatedToolFailureMiddleware(mode="loud")


def _flaky() -> StructuredTool:
    """A tool whose every call fails on its first attempt and succeeds on its second."""
    attempts: dict[str, int] = {}

    def lookup(key: str) -> str:
        """Look a key up (the first attempt per key always times out)."""
        attempts[key] = attempts.get(key, 0) + 1
        if attempts[key] == 1:
            raise TimeoutError("slow backend")
        return f"{key}=1"

    return StructuredTool.from_function(lookup)


@pytest.mark.parametrize("place", ["inner", "outer"])
def test_a_retried_call_counts_its_last_attempt(place: str) -> None:
    retry = ToolRetryMiddleware(max_retries=1, initial_delay=0, backoff_factor=0, jitter=False)
    guard = RepeatedToolFailureMiddleware(mode="enforce")
    batches = [[("lookup", {"key": f"k{n}"})] for n in range(3)]
    with serve(FakeOpenAI(replies(*batches))) as fake:
        model = chat_model(fake.base_url)
        order = [guard, retry] if place == "inner" else [retry, guard]
        agent = create_agent(model, [_flaky()], middleware=order)
        state = run(agent, "go")
    report = RepeatedToolFailureMiddleware.report_of(state)
    assert report is not None and report.stop is None
    assert report.decisions == ("none", "none", "none")  # each call's last attempt succeeded
    assert [m.content for m in state["messages"] if isinstance(m, ToolMessage)] == [
        "k0=1",
        "k1=1",
        "k2=1",
    ]


class _BrokenSink:
    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("sink down")

        return fail


def test_a_failing_telemetry_sink_changes_nothing(workspace: Path) -> None:
    guard = RepeatedToolFailureMiddleware(mode="enforce", telemetry=_BrokenSink(), on_stop="end")  # type: ignore[arg-type]
    ran = guarded_run(
        replies(LOOP, LOOP, LOOP), behaviour_tools(workspace), guard=guard, inner=[ErrorsToModel()]
    )
    assert ran.decisions == ("tracked", "warn", "stop") and len(ran.requests) == 3


ROOT = Path(__file__).resolve().parents[1]


def test_nothing_but_the_adapter_imports_langchain() -> None:
    probe = (
        "import json, sys; import tool_failure_guard, tool_failure_guard.core, "
        "tool_failure_guard.commands.cli, tool_failure_guard.session.transport.agent; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = json.loads(out.stdout)
    assert "tool_failure_guard.session.transport.agent" in loaded
    assert not [
        m
        for m in loaded
        if m.split(".")[0] in ("langchain", "langchain_core", "langchain_openai", "langgraph")
        or m.startswith("tool_failure_guard.integrations")
    ]
    outside = [
        path
        for folder in ("guard", "statecharts", "session", "tool_failure_guard", "rollout")
        for path in (ROOT / folder).rglob("*.py")
        if "integrations" not in path.parts
        and re.search(
            r"^\s*(from|import) (langchain|langgraph|tool_failure_guard\.integrations)",
            path.read_text(encoding="utf-8"),
            re.M,
        )
    ]
    assert outside == []


@pytest.mark.parametrize("guard_first", [True, False], ids=["guard-first", "hitl-first"])
def test_a_rejected_approval_is_cancelled_and_never_counted(
    guard_first: bool, workspace: Path
) -> None:
    def write_file(path: str, content: str) -> str:
        """Write a file of the workspace (needs a human's approval)."""
        raise AssertionError("a rejected call must never run")

    tools = [*behaviour_tools(workspace), StructuredTool.from_function(write_file)]
    harness = Harness()
    guard = RepeatedToolFailureMiddleware(mode="enforce", telemetry=harness.sink, on_stop="end")
    hitl = HumanInTheLoopMiddleware(interrupt_on={"write_file": True})
    order = [guard, ErrorsToModel(), hitl] if guard_first else [hitl, guard, ErrorsToModel()]
    write = ("write_file", {"path": "out.txt", "content": "x"})
    answers = replies(LOOP, [*LOOP, write], LOOP, LOOP, LOOP)
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    with serve(FakeOpenAI(answers)) as fake:
        agent = create_agent(
            chat_model(fake.base_url), tools, middleware=order, checkpointer=InMemorySaver()
        )
        state = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config)
        resumed = 0
        while "__interrupt__" in state:
            (pending,) = state["__interrupt__"]
            decisions = [{"type": "reject"}] * len(pending.value["action_requests"])
            state = agent.invoke(Command(resume={"decisions": decisions}), config)
            resumed += 1
    assert resumed == 1  # one run, paused once for the approval
    report = RepeatedToolFailureMiddleware.report_of(state)
    assert report is not None
    # the batch with the rejected call is mixed: it resets, as in the shared behaviour set
    assert report.decisions == ("tracked", "reset", "tracked", "warn", "stop")
    records = [
        (c["batch_ordinal"], c["call_ordinal"], c["terminal_status"], c["execution_status"])
        for c in harness.logs(telemetry.TOOL_CALL_EVENT)
        if c["terminal_status"] == "cancelled"
    ]
    assert records == [(2, 4, "cancelled", "not_started")]


class Answer(BaseModel):
    """The final answer."""

    text: str


def test_a_structured_output_call_is_not_a_tool_execution(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    answers = [
        *replies([FAIL])[:1],
        Reply(calls=(call("s1", "Answer", {"text": "it is missing"}),)),
    ]
    with caplog.at_level(logging.WARNING, logger="tool_failure_guard.integrations.langchain"):
        ran = guarded_run(
            answers,
            behaviour_tools(workspace),
            inner=[ErrorsToModel()],
            response_format=ToolStrategy(Answer),
        )
    assert ran.state["structured_response"] == Answer(text="it is missing")
    assert (ran.report.tool_calls, ran.report.observed, ran.report.batches) == (1, 1, 1)
    assert not [r for r in caplog.records if "observed none" in r.getMessage()]


def test_a_tool_interrupted_for_a_human_counts_the_outcome_of_its_resumed_run() -> None:
    asked: list[str] = []

    def deploy(target: str) -> str:
        """Deploy (asks a human first)."""
        answer = interrupt(f"deploy {target}?")
        asked.append(str(answer))
        if answer != "yes":
            raise PermissionError("not confirmed")
        return "deployed"

    harness = Harness()
    guard = RepeatedToolFailureMiddleware(mode="enforce", telemetry=harness.sink)
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}, "recursion_limit": 50}
    with serve(FakeOpenAI(replies([("deploy", {"target": "prod"})]))) as fake:
        agent = create_agent(
            chat_model(fake.base_url),
            [StructuredTool.from_function(deploy)],
            middleware=[guard],
            checkpointer=InMemorySaver(),
        )
        paused = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config)
        assert "__interrupt__" in paused and RepeatedToolFailureMiddleware.report_of(paused) is None
        state = agent.invoke(Command(resume="yes"), config)
    assert asked == ["yes"] and state["messages"][-1].content == "Done."
    report = RepeatedToolFailureMiddleware.report_of(state)
    assert report is not None and (report.tool_calls, report.observed) == (1, 1)
    (record,) = harness.logs(telemetry.TOOL_CALL_EVENT)
    assert (record["terminal_status"], record["execution_status"]) == ("success", "success")
