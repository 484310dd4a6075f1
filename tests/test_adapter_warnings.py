"""The guard says when it cannot act (issue 34, item 3, the framework half).

A tool raising a plain exception ends a pydantic-ai or LangChain run at the first call,
so the guard never sees a failure: each adapter instance logs one warning naming the
reason and the fix, however many runs it guards.  (The ACP half, a client without the
drain: ``tests/test_session_drain.py``.)
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hosts.langchain import make_agent, run
from langchain_core.tools import StructuredTool, ToolException
from langchain_harness import replies
from openai_server import FakeOpenAI, serve
from pydantic_ai import ToolFailed
from pydantic_ai_harness import batches
from pydantic_ai_harness import guarded_run as pydantic_ai_run

from tool_failure_guard.integrations.langchain import RepeatedToolFailureMiddleware
from tool_failure_guard.integrations.pydantic_ai import RepeatedToolFailureCapability

ONE_CALL = [[("read", {"path": "gone"})]]


def warnings_of(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == logger and "ends the" in r.getMessage()
    ]


def test_pydantic_ai_a_plain_exception_is_said_once_per_capability(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def read(path: str) -> str:
        """Read a file."""
        raise FileNotFoundError(path)

    capability = RepeatedToolFailureCapability(mode="enforce")
    with caplog.at_level(logging.WARNING):
        for _ in range(2):  # two runs of one capability: one warning
            with pytest.raises(FileNotFoundError):
                pydantic_ai_run(batches(*ONE_CALL), [read], guard=capability)
    (warning,) = warnings_of(caplog, "tool_failure_guard.integrations.pydantic_ai")
    assert "'read' raised FileNotFoundError" in warning
    assert "ends the pydantic-ai run at the first call" in warning
    assert "raise ToolFailed" in warning


def test_pydantic_ai_tool_failed_gets_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    def read(path: str) -> str:
        """Read a file."""
        raise ToolFailed("gone") from FileNotFoundError(path)

    with caplog.at_level(logging.WARNING):
        ran = pydantic_ai_run(batches(*ONE_CALL, final="Gave up."), [read], mode="enforce")
    assert ran.result.output == "Gave up."
    assert warnings_of(caplog, "tool_failure_guard.integrations.pydantic_ai") == []


def _langchain(tool: Any, guard: RepeatedToolFailureMiddleware) -> dict[str, Any]:
    with serve(FakeOpenAI(replies(*ONE_CALL, final="Gave up."))) as fake:
        return run(make_agent(fake.base_url, [tool], guard), "go")


def test_langchain_a_plain_exception_is_said_once_per_middleware(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def read(path: str) -> str:
        """Read a file."""
        raise FileNotFoundError(path)

    guard = RepeatedToolFailureMiddleware(mode="enforce")
    tool = StructuredTool.from_function(read)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            with pytest.raises(FileNotFoundError):
                _langchain(tool, guard)
    (warning,) = warnings_of(caplog, "tool_failure_guard.integrations.langchain")
    assert "'read' raised FileNotFoundError" in warning
    assert "ends the LangChain run at the first call" in warning
    assert "handle_tool_error=True" in warning and "ToolErrorMiddleware" in warning


def test_langchain_an_answered_tool_exception_gets_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def read(path: str) -> str:
        """Read a file."""
        raise ToolException("gone") from FileNotFoundError(path)

    tool = StructuredTool.from_function(read, handle_tool_error=True)
    with caplog.at_level(logging.WARNING):
        state = _langchain(tool, RepeatedToolFailureMiddleware(mode="enforce"))
    assert state["messages"][-1].content == "Gave up."
    assert warnings_of(caplog, "tool_failure_guard.integrations.langchain") == []
