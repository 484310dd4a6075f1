"""Real pydantic-ai agents against the 127.0.0.1 OpenAI-compatible test server.

:func:`guarded_run` builds an ``Agent`` on pydantic-ai's own OpenAI chat model
(the ``openai`` SDK over a real socket to :class:`openai_server.FakeOpenAI`),
with ``RepeatedToolFailureCapability`` and whatever tools and capabilities the
test gives, runs it once and returns what a test reads.  Its guard ends a
stopped run with the stop text (``on_stop="end"``: the agents here answer
text) unless the test says otherwise; the core's action of each batch comes
from what the run left for ``report_of`` (kept, for tests, by the capability's
private ``_keep_actions``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
from openai_server import Answer, FakeOpenAI, Reply, call, serve
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tool_failure_guard.core import Action
from tool_failure_guard.guard import BatchReceipt, GuardMode
from tool_failure_guard.integrations.pydantic_ai import RepeatedToolFailureCapability
from tool_failure_guard.integrations.pydantic_ai._results import finished_of


@attrs.frozen(kw_only=True)
class Ran:
    """One run: its result, its batches' actions, the wire requests."""

    result: Any
    actions: tuple[Action, ...]
    requests: tuple[dict[str, Any], ...]

    @property
    def decisions(self) -> list[str]:
        return [a.decision.kind.value for a in self.actions if a.decision is not None]

    @property
    def receipts(self) -> list[BatchReceipt]:
        return [a.guard_step.receipt for a in self.actions if a.guard_step is not None]  # type: ignore[union-attr]

    def types(self, batch: int) -> list[tuple[str, str | None, str | None]]:
        """(terminal, execution status, execution error type) of each call of a reduced batch."""
        return [
            (o.terminal_status, o.execution_status, o.execution_error_type)
            for o in self.receipts[batch].observations
        ]


def batches(
    *responses: Sequence[tuple[str, dict[str, Any] | str]], final: str = "Done."
) -> list[Answer]:
    """One reply per batch (call ids ``b<n>c<i>``), then the final text."""
    replies: list[Answer] = [
        Reply(calls=tuple(call(f"b{n}c{i}", name, args) for i, (name, args) in enumerate(calls)))
        for n, calls in enumerate(responses, 1)
    ]
    return [*replies, Reply(text=final)]


def guarded_run(
    answers: Sequence[Answer] | Callable[[dict[str, Any]], Answer],
    tools: Sequence[Any],
    *,
    mode: GuardMode | str = GuardMode.ENFORCE,
    capabilities: Sequence[Any] = (),
    before: Sequence[Any] = (),
    guard: RepeatedToolFailureCapability | None = None,
    retries: int = 10,
    history: list[ModelMessage] | None = None,
    agent_options: dict[str, Any] | None = None,
    **guard_options: Any,
) -> Ran:
    guard_options.setdefault("on_stop", "end")
    capability = guard or RepeatedToolFailureCapability(mode=mode, **guard_options)
    capability._keep_actions = True  # the receipts of its batches, for the test to read
    fake = FakeOpenAI(answers if callable(answers) else list(answers))
    with serve(fake):
        model = OpenAIChatModel(
            "test-model", provider=OpenAIProvider(base_url=fake.base_url, api_key="sk-test")
        )
        agent = Agent(
            model,
            tools=list(tools),
            retries=retries,
            capabilities=[*before, capability, *capabilities],
            **(agent_options or {}),
        )
        result = agent.run_sync("go", message_history=history)
        with fake.lock:
            requests = tuple(fake.requests)
    finished = finished_of(result)
    actions = finished.actions if finished is not None else ()
    return Ran(result=result, actions=actions, requests=requests)


def kept_call_ids(messages: Sequence[ModelMessage]) -> list[str]:
    return [
        part.tool_call_id
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
