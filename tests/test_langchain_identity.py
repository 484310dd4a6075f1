"""Which call is which (issue 23, item 5): id-less tool calls, and a guard that observes nothing.

A model may send tool calls without an id (``""``); LangChain keeps them so and
answers each with a ``ToolMessage(tool_call_id="")``.  They are settled like
any call: tracked, reminded, stopped in ``enforce``.  And a middleware that
observes none of a run's outcomes says so at the first batch, while the run
is still going, not only after it.  Real ``create_agent`` + ``ChatOpenAI``
over the real wire to the 127.0.0.1 test server.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from hosts.langchain import ErrorsToModel, behaviour_tools, chat_model, make_agent, run
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain_core.messages import SystemMessage, ToolMessage
from langchain_harness import guarded_run, replies
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from openai_server import FakeOpenAI, Reply, call, serve
from telemetry_harness import Harness

from tool_failure_guard.core import LOOP_INVALID_TOOL_PARAMS
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER
from tool_failure_guard.integrations.langchain import (
    LOGGER,
    RepeatedToolFailureMiddleware,
    report_of,
)
from tool_failure_guard.telemetry import sink as telemetry

FAIL = ("read_file", {"path": "missing.txt"})
LIST_OK = ("list_directory", {"path": "."})


def id_less(*batches: list[tuple[str, Any]]) -> list[Reply]:
    """Like :func:`replies`, every call without an id."""
    answers = [Reply(calls=tuple(call("", name, args) for name, args in b)) for b in batches]
    return [*answers, Reply(text="Done.")]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("way", ["invoke", "ainvoke"])
def test_id_less_calls_are_settled_reminded_and_stopped_in_enforce(
    way: Any, workspace: Path
) -> None:
    loop = [FAIL] * 4
    ran = guarded_run(
        id_less(loop, loop, loop, loop), behaviour_tools(workspace), way=way,
        inner=[ErrorsToModel()],
    )  # fmt: skip
    assert ran.decisions == ("tracked", "warn", "stop")
    assert (ran.report.tool_calls, ran.report.observed) == (12, 12)
    assert ran.stop is not None and ran.stop.key is not None
    assert len(ran.requests) == 3  # no request after the stop
    assert [ran.count_in(i, REPEATED_TOOL_FAILURE_REMINDER) for i in range(3)] == [0, 0, 1]
    answers = [m for m in ran.state["messages"] if isinstance(m, ToolMessage)]
    assert len(answers) == 12 and {m.tool_call_id for m in answers} == {""}


def test_id_less_calls_of_different_tools_each_get_their_own_outcome(workspace: Path) -> None:
    """The same script with and without ids: the same decisions and per-call outcomes."""
    batches = [[FAIL, LIST_OK, FAIL], [FAIL, FAIL], [LIST_OK], [FAIL] * 3, [FAIL] * 3, [FAIL]]

    def outcomes(answers: list[Reply]) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        harness = Harness()
        guard = RepeatedToolFailureMiddleware(mode="enforce", telemetry=harness.sink, on_stop="end")
        ran = guarded_run(answers, behaviour_tools(workspace), guard=guard, inner=[ErrorsToModel()])
        calls = harness.logs(telemetry.TOOL_CALL_EVENT)
        return ran.decisions, sorted(
            (c["batch_ordinal"], c["terminal_status"], c.get("execution_error_type")) for c in calls
        )

    with_ids = outcomes(replies(*batches))
    assert with_ids[0][-1] == "stop"  # the script does reach a stop
    assert outcomes(id_less(*batches)) == with_ids


def test_an_id_less_call_retried_by_an_outer_middleware_stays_that_call(workspace: Path) -> None:
    """Each pass of the same call through the guard is that call, not the next id-less one.

    Two ``read_file`` calls a batch, one failing and one succeeding: a second pass
    of the failing one taken for the other would settle both as failures.
    """

    class RetryOnce(AgentMiddleware[Any, Any]):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            handler(request)
            return handler(request)

    batch = [FAIL, ("read_file", {"path": "notes.txt"})]

    def decisions(answers: list[Reply]) -> tuple[str, ...]:
        with serve(FakeOpenAI(answers)) as fake:
            guard = RepeatedToolFailureMiddleware(mode="enforce", on_stop="end")
            agent = make_agent(
                fake.base_url, behaviour_tools(workspace), RetryOnce(),  # type: ignore[arg-type]
                inner=[guard, ErrorsToModel()],
            )  # fmt: skip
            report = report_of(run(agent, "go"))
        assert report is not None and (report.tool_calls, report.observed) == (6, 6)
        return report.decisions

    with_ids = decisions(replies(batch, batch, batch))
    assert "stop" not in with_ids
    assert decisions(id_less(batch, batch, batch)) == with_ids


class AnswersWithoutRunning(AgentMiddleware[Any, Any]):
    """An app middleware that answers every call from a cache: the tool never runs."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return ToolMessage(
            content="cached", name=request.tool_call["name"], tool_call_id=request.tool_call["id"]
        )


def test_a_guard_that_observes_nothing_says_so_during_the_run(workspace: Path) -> None:
    warnings: list[str] = []
    seen_at_request: list[int] = []
    lock = threading.Lock()

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "observed none" in record.getMessage():
                with lock:
                    warnings.append(record.getMessage())

    script = replies([FAIL] * 2, [FAIL] * 2, [FAIL] * 2)

    def respond(body: dict[str, Any]) -> Reply:
        with lock:
            seen_at_request.append(len(warnings))
        return script[len(seen_at_request) - 1]

    handler = Collect(logging.WARNING)
    LOGGER.addHandler(handler)
    try:
        guard = RepeatedToolFailureMiddleware(mode="warn")
        with serve(FakeOpenAI(respond)) as fake:
            agent = make_agent(
                fake.base_url, behaviour_tools(workspace), guard, inner=[AnswersWithoutRunning()]
            )
            state = run(agent, "go")
    finally:
        LOGGER.removeHandler(handler)
    # the warning was logged before the second model request, once for the whole run
    assert seen_at_request == [0, 1, 1, 1]
    assert len(warnings) == 1 and "RepeatedToolFailureMiddleware" in warnings[0]
    report = report_of(state)
    assert report is not None and (report.tool_calls, report.observed) == (6, 0)
    assert not any(isinstance(m, SystemMessage) for m in state["messages"])


def invalid_params_stop() -> RepeatedToolFailureMiddleware:
    """An enforcing guard with the invalid-parameter stop set (off by default)."""
    return RepeatedToolFailureMiddleware(mode="enforce", on_stop="end", invalid_params_limit=3)


@pytest.mark.parametrize("with_ids", [True, False], ids=["ids", "id-less"])
def test_calls_whose_arguments_are_not_json_are_settled_at_admission(
    with_ids: bool, workspace: Path
) -> None:
    """The ``AIMessage``'s ``invalid_tool_calls`` never reach the tools node."""
    batch: list[tuple[str, Any]] = [("read_file", '{"path": '), LIST_OK]
    answers = replies(batch, batch, batch) if with_ids else id_less(batch, batch, batch)
    ran = guarded_run(answers, behaviour_tools(workspace), guard=invalid_params_stop())
    assert ran.stop is not None and ran.stop.loop_type == LOOP_INVALID_TOOL_PARAMS
    assert (ran.report.batches, ran.report.tool_calls, ran.report.observed) == (3, 6, 6)


@pytest.mark.parametrize("with_ids", [True, False], ids=["ids", "id-less"])
@pytest.mark.parametrize("guard_first", [True, False], ids=["guard-first", "hitl-first"])
def test_a_call_a_human_rejected_is_that_call_not_a_no_argument_one_beside_it(
    with_ids: bool, guard_first: bool, workspace: Path
) -> None:
    """The real ``HumanInTheLoopMiddleware`` rejects ``list_directory("sub")``; the same
    batch has ``list_directory()`` with no arguments, which needs no approval.

    LangChain keeps the rejected call in its ``AIMessage`` and answers it: that call
    (the first) is the cancelled one, and the batch has its two calls, with ids or
    without.  (Without ids LangChain takes the answer for every id-less call and runs
    neither, so the second one is never observed.)
    """
    (workspace / "sub").mkdir()
    batch = [("list_directory", {"path": "sub"}), ("list_directory", {})]
    answers = replies(batch) if with_ids else id_less(batch)
    harness = Harness()
    guard = RepeatedToolFailureMiddleware(mode="enforce", telemetry=harness.sink)
    hitl = HumanInTheLoopMiddleware(
        interrupt_on={
            "list_directory": {
                "allowed_decisions": ["approve", "reject"],
                "when": lambda request: bool(request.tool_call["args"]),
            }
        }
    )
    order = [guard, ErrorsToModel(), hitl] if guard_first else [hitl, guard, ErrorsToModel()]
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}, "recursion_limit": 50}
    with serve(FakeOpenAI(answers)) as fake:
        agent = create_agent(
            chat_model(fake.base_url),
            behaviour_tools(workspace),
            middleware=order,
            checkpointer=InMemorySaver(),
        )
        paused = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config)
        (pending,) = paused["__interrupt__"]
        assert [a["args"] for a in pending.value["action_requests"]] == [{"path": "sub"}]
        state = agent.invoke(Command(resume={"decisions": [{"type": "reject"}]}), config)
    report = report_of(state)
    assert report is not None
    assert (report.batches, report.tool_calls, report.observed) == (1, 2, 2 if with_ids else 1)
    records = [
        (c["call_ordinal"], c["terminal_status"], c["execution_status"])
        for c in harness.logs(telemetry.TOOL_CALL_EVENT)
    ]
    cancelled = [r for r in records if r[1] == "cancelled"]
    assert cancelled == [(0, "cancelled", "not_started")]
    expected = [(1, "success", "success")] if with_ids else []
    assert [r for r in records if r[1] != "cancelled"] == expected
