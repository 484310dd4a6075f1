"""The shared API set's driver for pydantic-ai: a real ``Agent`` over the real wire.

The agent talks to the test server through pydantic-ai's own OpenAI chat model;
``read_file`` fails the idiomatic way (``raise ToolFailed(...) from exc``: the
cause's type, ``file_not_found``, is the execution error type).  A typed run's
``output_type`` is :class:`Summary`: pydantic-ai asks for it through its output
tool ``final_result``, so the model's final answer is a call to that tool.
"""

from __future__ import annotations

from pathlib import Path

from adapter_api import API_KEY, FINAL_TEXT, MODEL_NAME, ApiOutcome, Summary, passed
from openai_server import Reply, call
from pydantic_ai import Agent, ToolFailed
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tool_failure_guard.integrations._api import ProtectionStopped
from tool_failure_guard.integrations.pydantic_ai import (
    RepeatedToolFailureCapability,
    report_of,
    stop_of,
)

#: pydantic-ai's output tool for a structured ``output_type`` (its default name).
OUTPUT_TOOL = "final_result"


class PydanticAiApiDriver:
    name = "pydantic_ai"
    framework_error: type[BaseException] = UsageLimitExceeded

    def guard(self, *, mode: str | None, on_stop: str | None) -> object:
        return RepeatedToolFailureCapability(**passed(mode=mode, on_stop=on_stop))  # type: ignore[arg-type]

    def final_reply(self, typed_output: bool) -> Reply:
        if typed_output:
            return Reply(calls=(call("final", OUTPUT_TOOL, {"text": FINAL_TEXT}),))
        return Reply(text=FINAL_TEXT)

    def run(
        self, guard: object, *, base_url: str, workspace: Path, typed_output: bool
    ) -> ApiOutcome:
        root = workspace.resolve()

        def read_file(path: str) -> str:
            """Read a text file of the workspace."""
            try:
                return (root / path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ToolFailed(f"cannot read {path!r}: {exc.strerror}") from exc

        model = OpenAIChatModel(
            MODEL_NAME, provider=OpenAIProvider(base_url=base_url, api_key=API_KEY)
        )
        agent = Agent(
            model,
            tools=[read_file],
            output_type=Summary if typed_output else str,
            capabilities=[guard],  # type: ignore[list-item]
        )
        try:
            result = agent.run_sync("go")
        except ProtectionStopped as error:
            return ApiOutcome(raised=error, output=None, stop=None, report=error.report)
        except Exception as error:  # what the test must see, not a crash of the driver
            return ApiOutcome(raised=error, output=None, stop=None, report=None)
        return ApiOutcome(
            raised=None, output=result.output, stop=stop_of(result), report=report_of(result)
        )


DRIVER = PydanticAiApiDriver()
