"""``GuardedRunner.run(agent, ...)`` in the class-method form every ``agents.Runner`` user writes.

On the class the three ways run with the guard in its default configuration (the mode
from ``QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD`` per run, no telemetry); an instance
keeps its own configuration.  Real SDK runs against the 127.0.0.1 test server.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from agents import Runner, function_tool
from hosts.openai_agents import WAYS, make_agent, run
from openai_server import FakeOpenAI, Reply, call, serve

from tool_failure_guard.integrations.openai_agents import (
    GuardedRunner,
    GuardStop,
    ProtectionStopped,
)

MODE_ENV = "QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD"


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    raise FileNotFoundError(f"no such file: {path}")


def failing(body: dict[str, Any]) -> Reply:
    n = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return Reply(calls=(call(f"c{n}", "read_file", {"path": "missing.txt"}),))


@pytest.mark.parametrize("way", WAYS)
def test_the_class_form_guards_the_run_in_every_way(
    way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODE_ENV, "enforce")
    for _ in range(2):  # each call is a fresh guard: the second run is not already stopped
        fake = FakeOpenAI(failing)
        with serve(fake), pytest.raises(ProtectionStopped) as raised:
            run(GuardedRunner, make_agent(fake.base_url, [read_file]), "go", way)  # type: ignore[arg-type]
        assert len(fake.requests) == 9  # 8 failures, the reminder, the 9th stops
        stop = raised.value.stop
        assert isinstance(stop, GuardStop) and stop.mode.value == "enforce"


@pytest.mark.parametrize("way", WAYS)
def test_the_class_form_reads_the_environment_for_every_run(
    way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for mode in ("shadow", "enforce", "off"):
        monkeypatch.setenv(MODE_ENV, mode)
        fake = FakeOpenAI(
            [Reply(calls=(call("c0", "read_file", {"path": "m"}),)), Reply(text="ok")]
        )
        with serve(fake):
            result = run(GuardedRunner, make_agent(fake.base_url, [read_file]), "go", way)  # type: ignore[arg-type]
        report = GuardedRunner.report_of(result)
        assert report is not None and report.mode.value == mode


def test_an_instance_keeps_its_own_mode_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(MODE_ENV, "off")
    fake = FakeOpenAI(failing)
    with serve(fake):
        runner = GuardedRunner(mode="enforce", on_stop="end")
        result = run(runner, make_agent(fake.base_url, [read_file]), "go")
    assert len(fake.requests) == 9 and GuardedRunner.stop_of(result) is not None


def test_the_three_ways_have_the_sdks_shape() -> None:
    assert inspect.iscoroutinefunction(GuardedRunner.run)
    assert inspect.iscoroutinefunction(GuardedRunner(mode="off").run)
    assert not inspect.iscoroutinefunction(GuardedRunner.run_sync)
    for name in ("run", "run_sync", "run_streamed"):
        ours = list(inspect.signature(getattr(GuardedRunner, name)).parameters)
        sdk = list(inspect.signature(getattr(Runner, name)).parameters)
        assert ours[:2] == sdk[:2] == ["starting_agent", "input"]
        assert getattr(GuardedRunner, name).__doc__.startswith(f"``Runner.{name}``")
