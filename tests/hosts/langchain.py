"""The LangChain v1 host: ``create_agent`` with the real ``ChatOpenAI`` over the real wire.

An agent built by ``langchain.agents.create_agent`` whose model is
``langchain_openai.ChatOpenAI`` pointed at :mod:`openai_server` on 127.0.0.1,
guarded by :class:`~tool_failure_guard.integrations.langchain.RepeatedToolFailureMiddleware`
and run in one of the ways a user runs it (``invoke``, ``ainvoke``, ``stream``,
``astream``).  LangSmith tracing is off: nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from host_behaviour import API_KEY, COMPLETED, MODEL_NAME, STOPPED, HostOutcome, Scenario
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.integrations.langchain import (
    ProtectionStopped,
    RepeatedToolFailureMiddleware,
)

os.environ["LANGSMITH_TRACING"] = "false"
os.environ.pop("LANGCHAIN_TRACING_V2", None)

Way = Literal["invoke", "ainvoke", "stream", "astream"]
WAYS: tuple[Way, ...] = ("invoke", "ainvoke", "stream", "astream")
#: The route this host's telemetry carries.
ROUTE = "langchain"
SYSTEM_PROMPT = "You are a careful coding agent."


def chat_model(base_url: str) -> ChatOpenAI:
    """LangChain's OpenAI chat model over a real socket to ``base_url``."""
    return ChatOpenAI(model=MODEL_NAME, base_url=base_url, api_key=API_KEY, max_retries=0)  # type: ignore[arg-type]


def behaviour_tools(workspace: Path) -> list[BaseTool]:
    """The tools every host gives the model, working in ``workspace``."""

    @tool
    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        return (workspace / path).read_text(encoding="utf-8")

    @tool
    def list_directory(path: str = ".") -> str:
        """List a directory of the workspace, one entry a line."""
        return "\n".join(sorted(entry.name for entry in (workspace / path).iterdir()))

    return [read_file, list_directory]


class ErrorsToModel(AgentMiddleware[Any, Any]):
    """The app's error policy: every tool exception goes back to the model as an error message.

    Without it ``create_agent`` fails the run on the first exception a tool raises
    (its tools node only answers argument errors).  Placed after the guard, so it
    is inner: the guard sees the error message, and the exception at the tool.
    """

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except Exception as exc:
            return _error_message(request, exc)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        try:
            return await handler(request)
        except Exception as exc:
            return _error_message(request, exc)


def _error_message(request: Any, exc: Exception) -> ToolMessage:
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return ToolMessage(
        content=f"{type(exc).__name__}: {detail}",
        name=request.tool_call["name"],
        tool_call_id=request.tool_call["id"],
        status="error",
    )


def make_agent(
    base_url: str,
    tools: Sequence[Any],
    guard: RepeatedToolFailureMiddleware,
    *,
    inner: Sequence[AgentMiddleware[Any, Any]] = (),
    **options: Any,
) -> Any:
    options.setdefault("system_prompt", SYSTEM_PROMPT)
    return create_agent(chat_model(base_url), list(tools), middleware=[guard, *inner], **options)


def run(agent: Any, prompt: str, way: Way = "invoke", *, timeout: float = 60) -> dict[str, Any]:
    """One run to its end, in ``way``; the final state.  Bounded so it cannot hang the suite."""
    state_in = {"messages": [{"role": "user", "content": prompt}]}
    config = {"recursion_limit": 100}
    if way == "invoke":
        return dict(agent.invoke(state_in, config))
    if way == "stream":
        states = list(agent.stream(state_in, config, stream_mode="values"))
        return dict(states[-1])

    async def go() -> dict[str, Any]:
        if way == "ainvoke":
            return dict(await agent.ainvoke(state_in, config))
        states = [s async for s in agent.astream(state_in, config, stream_mode="values")]
        return dict(states[-1])

    return asyncio.run(asyncio.wait_for(go(), timeout))


def kept_call_ids(state: dict[str, Any]) -> frozenset[str]:
    return frozenset(
        m.tool_call_id for m in state.get("messages", []) if isinstance(m, ToolMessage)
    )


def final_text(state: dict[str, Any]) -> str:
    messages = state.get("messages") or []
    return str(messages[-1].content) if messages else ""


class LangChainDriver:
    """Runs one scenario as one ``invoke`` of a guarded ``create_agent`` agent.

    The stop is the default one (``on_stop="error"``): the run raises
    ``ProtectionStopped``; the history it kept is the checkpointer's state.
    """

    name = "langchain"
    capabilities: frozenset[str] = frozenset()
    limits_follow_mode = True

    def run(
        self, scenario: Scenario, mode: GuardMode, *, base_url: str, workspace: Path, scratch: Path
    ) -> HostOutcome:
        guard = RepeatedToolFailureMiddleware(mode=mode)
        agent = make_agent(
            base_url,
            behaviour_tools(workspace),
            guard,
            inner=[ErrorsToModel()],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "behaviour"}, "recursion_limit": 100}
        try:
            state = dict(agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config))
        except ProtectionStopped as stopped:
            kept = dict(agent.get_state(config).values)
            return HostOutcome(
                ended=STOPPED,
                loop_type=stopped.loop_type,
                output=stopped.stop.notice,
                decisions=stopped.report.decisions,
                kept_call_ids=kept_call_ids(kept),
            )
        report = RepeatedToolFailureMiddleware.report_of(state)
        assert report is not None and report.stop is None
        return HostOutcome(
            ended=COMPLETED,
            loop_type=None,
            output=final_text(state),
            decisions=report.decisions,
            kept_call_ids=kept_call_ids(state),
        )


DRIVER = LangChainDriver()
