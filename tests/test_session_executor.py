"""The executor's outcome contract: both axes set where each path settles."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest

from tool_failure_guard.session.tools.builtin import (
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
    default_tools,
)
from tool_failure_guard.session.tools.executor import (
    CallOutcome,
    Executor,
    FunctionCall,
    PermissionAnswer,
)


@attrs.frozen
class FakeTool:
    name: str = "fake"
    kind: ToolKind = "other"
    tool_type: Literal["native", "mcp"] = "native"
    needs_permission: bool = False
    behaviour: str = "ok"
    description: str = "a fake tool"
    parameters_schema: Mapping[str, Any] = attrs.field(
        factory=lambda: {"type": "object"}, eq=False, hash=False
    )
    #: set when ``run`` has begun, so a test can cancel a call that is really running
    running: asyncio.Event = attrs.field(factory=asyncio.Event, eq=False, hash=False)

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        return args

    def title(self, args: Mapping[str, Any]) -> str:
        return self.name

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        self.running.set()
        if self.behaviour == "typed":
            raise ToolError("quota_exceeded", "over quota")
        if self.behaviour == "raise":
            raise RuntimeError("boom")
        if self.behaviour == "binary":
            return b"\xff\xfe"
        if self.behaviour == "slow":
            await asyncio.sleep(30)
        return b"fine"


def execute(
    tool: Tool | None,
    call: FunctionCall,
    tmp_path: Path,
    *,
    permission: PermissionAnswer = PermissionAnswer.ALLOWED,
    cancel_once_running: bool = False,
    post: tuple[Any, ...] = (),
) -> CallOutcome:
    registry = dict(default_tools())
    if tool is not None:
        registry[tool.name] = tool

    async def ask(*_: Any) -> PermissionAnswer:
        return permission

    async def go() -> CallOutcome:
        executor = Executor(registry, ToolContext(cwd=tmp_path), ask, post_processors=post)
        cancelled = asyncio.Event()
        if cancel_once_running:
            assert isinstance(tool, FakeTool)
            running = tool.running

            async def cancel_when_running() -> None:
                await running.wait()
                cancelled.set()

            canceller = asyncio.create_task(cancel_when_running())
        outcome = await executor.execute(call, cancelled)
        if cancel_once_running:
            canceller.cancel()  # done already unless the tool never ran
        return outcome

    return asyncio.run(go())


def axes(outcome: CallOutcome) -> tuple[str, str, str | None]:
    return outcome.terminal_status, outcome.execution_status, outcome.execution_error_type


def test_unregistered_tool_is_not_started(tmp_path: Path) -> None:
    outcome = execute(None, FunctionCall(call_id="a", name="nope"), tmp_path)
    assert axes(outcome) == ("error", "not_started", "tool_not_registered")
    assert outcome.policy_tool_name is None


def test_invalid_arguments_are_not_started(tmp_path: Path) -> None:
    call = FunctionCall(call_id="a", name="read_file", args={"path": 3})
    outcome = execute(None, call, tmp_path)
    assert axes(outcome) == ("error", "not_started", "invalid_tool_params")
    assert "must be a string" in outcome.output


@pytest.mark.parametrize("answer", [PermissionAnswer.REJECTED, PermissionAnswer.CANCELLED])
def test_refused_permission_is_cancelled_never_error(
    tmp_path: Path, answer: PermissionAnswer
) -> None:
    call = FunctionCall(call_id="a", name="write_file", args={"path": "x", "content": "y"})
    outcome = execute(None, call, tmp_path, permission=answer)
    assert axes(outcome) == ("cancelled", "not_started", None)
    assert not (tmp_path / "x").exists()


def test_typed_error_is_frozen(tmp_path: Path) -> None:
    outcome = execute(
        None, FunctionCall(call_id="a", name="read_file", args={"path": "m"}), tmp_path
    )
    assert axes(outcome) == ("error", "error", "file_not_found")
    outcome = execute(FakeTool(behaviour="typed"), FunctionCall(call_id="b", name="fake"), tmp_path)
    assert axes(outcome) == ("error", "error", "quota_exceeded")


def test_raise_without_a_type_is_unhandled_exception(tmp_path: Path) -> None:
    outcome = execute(FakeTool(behaviour="raise"), FunctionCall(call_id="a", name="fake"), tmp_path)
    assert axes(outcome) == ("error", "error", "unhandled_exception")


def test_mcp_failures_are_mcp_tool_error(tmp_path: Path) -> None:
    tool = FakeTool(name="mcp__docs__search", tool_type="mcp", behaviour="typed")
    outcome = execute(tool, FunctionCall(call_id="a", name="mcp__docs__search"), tmp_path)
    assert axes(outcome) == ("error", "error", "mcp_tool_error")
    assert (outcome.policy_tool_name, outcome.tool_type) == ("mcp__docs__search", "mcp")


def test_post_processing_failure_after_success(tmp_path: Path) -> None:
    outcome = execute(
        FakeTool(behaviour="binary"), FunctionCall(call_id="a", name="fake"), tmp_path
    )
    assert axes(outcome) == ("error", "success", None)
    assert outcome.error_type == "output_not_text"


def test_later_steps_change_the_terminal_type_never_the_frozen_one(tmp_path: Path) -> None:
    def rewrite(outcome: CallOutcome) -> CallOutcome:
        return attrs.evolve(
            outcome,
            error_type="hook_rewrote",
            execution_error_type="forged",
            execution_status="success",
        )

    call = FunctionCall(call_id="a", name="read_file", args={"path": "missing"})
    outcome = execute(None, call, tmp_path, post=(rewrite,))
    assert outcome.error_type == "hook_rewrote"
    assert axes(outcome) == ("error", "error", "file_not_found")


def test_a_failing_post_processor_is_a_post_execution_failure(tmp_path: Path) -> None:
    def explode(outcome: CallOutcome) -> CallOutcome:
        raise ValueError("hook failed")

    outcome = execute(FakeTool(), FunctionCall(call_id="a", name="fake"), tmp_path, post=(explode,))
    assert axes(outcome) == ("error", "success", None)
    assert outcome.error_type == "post_processing_failed"


def test_cancel_during_execution_is_cancelled(tmp_path: Path) -> None:
    outcome = execute(
        FakeTool(behaviour="slow"),
        FunctionCall(call_id="a", name="fake"),
        tmp_path,
        cancel_once_running=True,
    )
    assert axes(outcome) == ("cancelled", "cancelled", None)


def test_paths_are_confined_to_the_session_directory(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    call = FunctionCall(call_id="a", name="read_file", args={"path": "../secret"})
    outcome = execute(None, call, project)
    assert axes(outcome) == ("error", "error", "path_not_in_workspace")


def test_shell_timeout_and_exit_status_are_typed(tmp_path: Path) -> None:
    call = FunctionCall(call_id="a", name="run_shell_command", args={"command": "exit 4"})
    assert axes(execute(None, call, tmp_path)) == ("error", "error", "shell_execute_error")
    call = FunctionCall(
        call_id="b", name="run_shell_command", args={"command": "sleep 5", "timeout": 0.05}
    )
    assert axes(execute(None, call, tmp_path)) == ("error", "error", "execution_timeout")
