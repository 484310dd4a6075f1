"""``examples/own_loop.py`` runs as documented against an OpenAI-compatible endpoint."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from example_runner import LOOP, run_workspace_example
from openai_server import FakeOpenAI

from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)


def run_example(
    tmp_path: Path, *args: str, env_mode: str | None = None
) -> tuple[FakeOpenAI, subprocess.CompletedProcess[str]]:
    return run_workspace_example("own_loop.py", tmp_path, *args, env_mode=env_mode)


def test_enforce_stops_the_loop_with_the_stop_text_and_no_further_request(tmp_path: Path) -> None:
    fake, done = run_example(tmp_path, "--mode", "enforce")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == REPEATED_TOOL_FAILURE_STOP_MESSAGE
    assert "stopped: repeated_tool_execution_failure" in done.stderr
    assert done.stderr.count("guard: ") == 3
    assert len(fake.requests) == 3
    assert [fake.count_in(i, REPEATED_TOOL_FAILURE_REMINDER) for i in range(3)] == [0, 0, 1]


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
    if env_mode is None and not args:
        assert "guard: would_warn" in done.stderr  # shadow decides, never acts
