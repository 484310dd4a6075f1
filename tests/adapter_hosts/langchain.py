"""The shared API set's LangChain v1 driver: ``create_agent`` + ``ChatOpenAI`` over the real wire.

``read_file`` fails the way the docs put first for LangChain: it raises a
``ToolException`` typed ``file_not_found`` and its ``handle_tool_error``
answers the model.  ``typed_output`` is ``response_format=ToolStrategy(Summary)``:
the model answers by calling the ``Summary`` tool, the result is the state's
``structured_response``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from adapter_api import API_KEY, FINAL_TEXT, MODEL_NAME, ApiOutcome, Summary, passed
from langchain.agents import create_agent
from langchain.agents.middleware.tool_call_limit import ToolCallLimitExceededError
from langchain.agents.structured_output import ToolStrategy
from langchain_core.tools import StructuredTool, ToolException
from langchain_openai import ChatOpenAI
from openai_server import Reply, call

from tool_failure_guard.integrations.langchain import (
    RepeatedToolFailureMiddleware,
    report_of,
    stop_of,
)

os.environ["LANGSMITH_TRACING"] = "false"
os.environ.pop("LANGCHAIN_TRACING_V2", None)


class FileMissing(ToolException):
    """The file does not exist (typed for the guard)."""

    error_type = "file_not_found"


def read_file_tool(workspace: Path) -> StructuredTool:
    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        target = workspace / path
        if not target.is_file():
            raise FileMissing(f"{path}: no such file")
        return target.read_text(encoding="utf-8")

    return StructuredTool.from_function(read_file, handle_tool_error=True)


class LangChainApiDriver:
    name = "langchain"
    framework_error: type[BaseException] = ToolCallLimitExceededError

    def guard(self, *, mode: str | None, on_stop: str | None) -> object:
        return RepeatedToolFailureMiddleware(**passed(mode=mode, on_stop=on_stop))

    def final_reply(self, typed_output: bool) -> Reply:
        if typed_output:
            return Reply(calls=(call("final", "Summary", {"text": FINAL_TEXT}),))
        return Reply(text=FINAL_TEXT)

    def run(
        self, guard: object, *, base_url: str, workspace: Path, typed_output: bool
    ) -> ApiOutcome:
        model = ChatOpenAI(model=MODEL_NAME, base_url=base_url, api_key=API_KEY, max_retries=0)  # type: ignore[arg-type]
        options: dict[str, Any] = {}
        if typed_output:
            options["response_format"] = ToolStrategy(Summary)
        agent = create_agent(model, [read_file_tool(workspace)], middleware=[guard], **options)
        try:
            state = agent.invoke(
                {"messages": [{"role": "user", "content": "go"}]}, {"recursion_limit": 100}
            )
        except Exception as error:
            return ApiOutcome(raised=error, output=None, stop=None, report=report_of(error))
        output = state.get("structured_response") if typed_output else state["messages"][-1].content
        return ApiOutcome(raised=None, output=output, stop=stop_of(state), report=report_of(state))


DRIVER = LangChainApiDriver()
