"""``examples/pydantic_ai_agent.py`` runs as documented against an OpenAI-compatible endpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from host_behaviour import SCENARIOS
from openai_server import FakeOpenAI, serve

from tool_failure_guard.guard import (
    GUARD_MODE_ENV_VAR,
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)

ROOT = Path(__file__).resolve().parents[1]
LOOP = next(s for s in SCENARIOS if s.name == "failing_loop")


def run_example(
    tmp_path: Path, *args: str, env_mode: str | None = None
) -> tuple[FakeOpenAI, subprocess.CompletedProcess[str]]:
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    with serve(FakeOpenAI(LOOP.replies())) as fake:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "PYTHONPATH": str(ROOT),
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-test-key",
        }
        if env_mode is not None:
            env[GUARD_MODE_ENV_VAR] = env_mode
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "pydantic_ai_agent.py"),
                "--model",
                "test-model",
                "--workspace",
                str(tmp_path),
                *args,
                "Read missing.txt",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    return fake, done


def test_enforce_stops_the_loop_with_the_typed_stop_and_no_further_request(tmp_path: Path) -> None:
    fake, done = run_example(tmp_path, "--mode", "enforce")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == REPEATED_TOOL_FAILURE_STOP_MESSAGE
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
