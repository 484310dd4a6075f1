"""The shadow report survives the framework's own limit (issue 34, item 4).

When the framework's budget ends a looping run (pydantic-ai's ``UsageLimitExceeded``, the
Agents SDK's ``MaxTurnsExceeded``), ``report_of(exc)`` answers the guard's ``RunReport``:
what it did, or in shadow would have done, up to then.
"""

from __future__ import annotations

import pytest
from agents import MaxTurnsExceeded, function_tool
from hosts.openai_agents import make_agent, run
from openai_server import FakeOpenAI, Reply, call, serve
from pydantic_ai import Agent, ToolFailed
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import UsageLimits

from tool_failure_guard.integrations.openai_agents import GuardedRunner
from tool_failure_guard.integrations.openai_agents import report_of as agents_report_of
from tool_failure_guard.integrations.pydantic_ai import (
    ProtectionStopped,
    RepeatedToolFailureCapability,
)
from tool_failure_guard.integrations.pydantic_ai import report_of as pydantic_ai_report_of

#: four failing reads a response, for ever: the loop a budget ends
LOOP = [
    Reply(calls=tuple(call(f"b{n}c{i}", "read", {"path": "gone"}) for i in range(4)))
    for n in range(1, 30)
]


def test_pydantic_ai_usage_limit_exceeded_carries_the_shadow_report() -> None:
    def read(path: str) -> str:
        """Read a file."""
        raise ToolFailed("no such file") from FileNotFoundError(path)

    capability = RepeatedToolFailureCapability(mode="shadow")
    with serve(FakeOpenAI(list(LOOP))) as fake:
        model = OpenAIChatModel(
            "test-model", provider=OpenAIProvider(base_url=fake.base_url, api_key="sk-test")
        )
        agent = Agent(model, tools=[read], capabilities=[capability])
        with pytest.raises(UsageLimitExceeded) as raised:
            agent.run_sync("go", usage_limits=UsageLimits(request_limit=5))
    assert not isinstance(raised.value, ProtectionStopped)  # the framework's own limit
    report = pydantic_ai_report_of(raised.value)
    assert report is not None and report.mode.value == "shadow" and report.stop is None
    assert report.batches >= 3 and report.would_remind


def test_openai_agents_max_turns_exceeded_carries_the_shadow_report() -> None:
    @function_tool(name_override="read")
    def read(path: str) -> str:
        """Read a file."""
        raise FileNotFoundError(path)

    with serve(FakeOpenAI(list(LOOP))) as fake, pytest.raises(MaxTurnsExceeded) as raised:
        run(GuardedRunner(mode="shadow"), make_agent(fake.base_url, [read]), "go", max_turns=4)
    report = agents_report_of(raised.value)
    assert report is not None and report.mode.value == "shadow" and report.stop is None
    assert report.batches >= 3 and report.would_remind


def test_an_unguarded_error_has_no_report() -> None:
    assert pydantic_ai_report_of(ValueError("x")) is None
    assert agents_report_of(ValueError("x")) is None
