"""pydantic-ai as a host: a real ``Agent`` with ``RepeatedToolFailureCapability``.

The agent talks to the model server through pydantic-ai's own OpenAI chat model
(the ``openai`` SDK over a real socket).  Its tools fail the idiomatic way
(``raise ToolFailed(...) from exc``: the cause's type, ``file_not_found``, is
the execution error type); ``write_file`` needs approval, and an inline
``HandleDeferredToolCalls`` handler denies every such call (``cancel_call``:
a rejected approval is ``cancelled``); ``run_shell_command`` cancels the whole
run once it runs (``AgentRun.cancel()``, ``cancel_run``: the run ends with
``RunCancelled``).  A stop ends the run the default way, ``ProtectionStopped``
(a ``UsageLimitExceeded``).  Decisions come from the run's ``report_of`` (the
exception's ``report`` for a stop); kept results from the run's message history
(the exception's ``all_messages()`` for a stop; a cancelled run's as pydantic-ai
resumes it, ``repair_messages``: unanswered calls closed as ``interrupted``).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from host_behaviour import (
    API_KEY,
    CANCELLED,
    COMPLETED,
    MODEL_NAME,
    STOPPED,
    HostOutcome,
    Scenario,
)
from pydantic_ai import Agent, Tool, ToolFailed
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.exceptions import RunCancelled
from pydantic_ai.messages import ModelRequest, ToolReturnPart, repair_messages
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.run import AgentRun
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, RunContext, ToolDenied

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.integrations.pydantic_ai import (
    ProtectionStopped,
    RepeatedToolFailureCapability,
    report_of,
)

#: The framework's per-tool retry budget: argument-validation retries must not end the run
#: before the invalid-parameter protection does.
RETRIES = 10


def workspace_tools(workspace: Path, runs: list[AgentRun[Any, Any]]) -> list[Tool[Any]]:
    """The shared set's tools, confined to ``workspace``; ``runs`` holds the run to cancel."""
    root = workspace.resolve()

    def inside(path: str) -> Path:
        target = (root / path).resolve()
        if target != root and root not in target.parents:
            raise ToolFailed(f"{path!r} is outside the workspace")
        return target

    def read_file(path: str) -> str:
        """Read a text file of the workspace."""
        try:
            return inside(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ToolFailed(f"cannot read {path!r}: {exc.strerror}") from exc

    def list_directory(path: str = ".") -> str:
        """List a directory of the workspace, one entry a line."""
        try:
            return "\n".join(sorted(os.listdir(inside(path))))
        except OSError as exc:
            raise ToolFailed(f"cannot list {path!r}: {exc.strerror}") from exc

    def write_file(path: str, content: str) -> str:
        """Write a text file of the workspace (asks for approval first)."""
        inside(path).write_text(content, encoding="utf-8")
        return "written"

    async def run_shell_command(command: str) -> str:
        """Run a shell command (the user cancels the run while it runs)."""
        runs[-1].cancel()
        await asyncio.sleep(60)  # never finishes on its own first
        return "finished"

    return [
        Tool(read_file),
        Tool(list_directory),
        Tool(write_file, requires_approval=True),
        Tool(run_shell_command),
    ]


def deny_every_approval(
    ctx: RunContext[Any], requests: DeferredToolRequests
) -> DeferredToolResults:
    """The user refuses every call that asks for approval."""
    return DeferredToolResults(
        approvals={
            c.tool_call_id: ToolDenied("the user did not allow this call")
            for c in requests.approvals
        }
    )


def kept_call_ids(messages: list[Any]) -> frozenset[str]:
    return frozenset(
        part.tool_call_id
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    )


class PydanticAiDriver:
    name = "pydantic_ai"
    capabilities = frozenset({"cancel_call", "cancel_run"})
    limits_follow_mode = True

    def run(
        self, scenario: Scenario, mode: GuardMode, *, base_url: str, workspace: Path, scratch: Path
    ) -> HostOutcome:
        runs: list[AgentRun[Any, Any]] = []
        model = OpenAIChatModel(
            MODEL_NAME, provider=OpenAIProvider(base_url=base_url, api_key=API_KEY)
        )
        agent = Agent(
            model,
            tools=workspace_tools(workspace, runs),
            retries=RETRIES,
            capabilities=[
                RepeatedToolFailureCapability(mode=mode),
                HandleDeferredToolCalls(handler=deny_every_approval),
            ],
        )

        async def drive() -> Any:
            async with agent.iter("go") as run:
                runs.append(run)
                async for _ in run:
                    pass
            return run.result

        try:
            result = asyncio.run(asyncio.wait_for(drive(), 120))
        except RunCancelled as cancelled:
            report = report_of(cancelled)
            return HostOutcome(
                ended=CANCELLED,
                loop_type=None,
                output="",
                decisions=report.decisions if report is not None else (),
                kept_call_ids=kept_call_ids(repair_messages(cancelled.all_messages())),
            )
        except ProtectionStopped as stopped:
            return HostOutcome(
                ended=STOPPED,
                loop_type=stopped.loop_type,
                output=stopped.stop.notice,
                decisions=stopped.report.decisions,
                kept_call_ids=kept_call_ids(stopped.all_messages()),
            )
        report = report_of(result)
        return HostOutcome(
            ended=COMPLETED,
            loop_type=None,
            output=str(result.output),
            decisions=report.decisions if report is not None else (),
            kept_call_ids=kept_call_ids(result.all_messages()),
        )


DRIVER = PydanticAiDriver()
