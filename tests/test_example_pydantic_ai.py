"""``examples/pydantic_ai_agent.py`` runs as documented against an OpenAI-compatible endpoint."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from example_runner import LOOP, run_workspace_example
from openai_server import FakeOpenAI

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)


def run_example(
    tmp_path: Path, *args: str, env_mode: str | None = None
) -> tuple[FakeOpenAI, subprocess.CompletedProcess[str]]:
    return run_workspace_example("pydantic_ai_agent.py", tmp_path, *args, env_mode=env_mode)


def test_enforce_stops_the_loop_with_the_typed_stop_and_no_further_request(tmp_path: Path) -> None:
    fake, done = run_example(tmp_path, "--mode", "enforce")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
    assert "stopped: repeated_tool_execution_failure" in done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("guard: ")] == [
        "guard: tracked",
        "guard: warn",
        "guard: stop",
    ]
    assert len(fake.requests) == 3
    assert [fake.count_in(i, REPEATED_TOOL_FAILURE_REMINDER) for i in range(3)] == [0, 0, 1]
    # the failures reached the model as failed tool results, typed by their cause
    assert "No such file" in str(fake.messages(1)[-1]["content"])


@pytest.mark.parametrize(
    ("args", "env_mode", "reminded"),
    [((), "warn", True), ((), None, False), (("--mode", "off"), "warn", False)],
)
def test_the_mode_comes_from_the_option_else_the_environment_else_shadow(
    tmp_path: Path, args: tuple[str, ...], env_mode: str | None, reminded: bool
) -> None:
    fake, done = run_example(tmp_path, *args, env_mode=env_mode)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == LOOP.final_text and "stopped:" not in done.stderr
    assert len(fake.requests) == 6
    assert (fake.count_in(5, REPEATED_TOOL_FAILURE_REMINDER) == 1) is reminded
    if env_mode is None and not args:  # shadow: decided and reported, nothing sent
        assert "guard: would_stop" in done.stderr
        # the guard says it is there, with no logging configured (Python's last-resort handler)
        assert "tool-failure-guard (shadow, pydantic_ai): would stop the run" in done.stderr
