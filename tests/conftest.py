"""Shared builders: receipts in the specification's vocabulary, kept short."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hook_workers import stop_workers
from mcp_servers import require_real_servers, unavailable_message

from tool_failure_guard.guard import BatchReceipt, Observation

_ids = itertools.count(1)


def _call_id() -> str:
    return f"call-{next(_ids)}"


def failure(
    tool: str = "read_file",
    error_type: str | None = "file_not_found",
    *,
    tool_type: str = "native",
    duplicate: bool = False,
) -> Observation:
    """An eligible failure (terminal error, execution error, classified type)."""
    return Observation(
        call_id=_call_id(),
        terminal_status="error",
        execution_status="error",
        execution_error_type=error_type,
        policy_tool_name=tool,
        tool_type=tool_type,
        provider_duplicate=duplicate,
    )


def success(tool: str = "read_file") -> Observation:
    return Observation(
        call_id=_call_id(),
        terminal_status="success",
        execution_status="success",
        policy_tool_name=tool,
        tool_type="native",
    )


def outcome(
    terminal: str,
    execution: str | None,
    *,
    tool: str | None = "read_file",
    error_type: str | None = "file_not_found",
) -> Observation:
    return Observation(
        call_id=_call_id(),
        terminal_status=terminal,
        execution_status=execution,
        execution_error_type=error_type,
        policy_tool_name=tool,
        tool_type="native",
    )


def batch(*observations: Observation, complete: bool = True) -> BatchReceipt:
    return BatchReceipt(observations, complete=complete)


def failures(n: int, tool: str = "read_file", error_type: str = "file_not_found") -> BatchReceipt:
    return batch(*(failure(tool, error_type) for _ in range(n)))


@pytest.fixture
def real_mcp_servers() -> Iterator[None]:
    """For tests that run the real npm MCP servers (see ``tests/mcp_servers.py``)."""
    require_real_servers()
    yield


@pytest.fixture(autouse=True)
def _no_hook_worker_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test whose hooks started a warm worker in its ``tmp_path`` has it stopped after."""
    uses = "tmp_path" in request.fixturenames
    root: Path | None = request.getfixturevalue("tmp_path") if uses else None
    yield
    if root is not None:
        stop_workers(root)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Never skip the real-server tests silently: say so, and how to get them."""
    message = unavailable_message()
    if message is not None:
        terminalreporter.write_line(f"NOTE: tests against {message}", yellow=True, bold=True)
