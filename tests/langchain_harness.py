"""Shared helpers of the LangChain adapter tests: scripted model replies, one guarded run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from hosts.langchain import Way, make_agent, run
from openai_server import FakeOpenAI, Reply, call, serve

from tool_failure_guard.integrations.langchain import (
    GuardStop,
    RepeatedToolFailureMiddleware,
    RunReport,
)

#: One scripted model response: (tool name, arguments) per call.
Batch = Sequence[tuple[str, dict[str, Any] | str]]


def replies(*batches: Batch, final: str = "Done.") -> list[Reply]:
    """Response ``n`` carries batch ``n``'s calls (ids ``b<n>c<i>``), then ``final``."""
    answers = [
        Reply(calls=tuple(call(f"b{n}c{i}", name, args) for i, (name, args) in enumerate(batch)))
        for n, batch in enumerate(batches, 1)
    ]
    return [*answers, Reply(text=final)]


@attrs.frozen(kw_only=True)
class Ran:
    state: dict[str, Any]
    requests: tuple[dict[str, Any], ...]
    report: RunReport
    stop: GuardStop | None

    @property
    def decisions(self) -> tuple[str, ...]:
        return self.report.decisions

    def count_in(self, index: int, text: str) -> int:
        return sum(1 for m in self.requests[index]["messages"] if text in str(m.get("content")))


def guarded_run(
    answers: list[Reply],
    tools: Sequence[Any],
    *,
    mode: str = "enforce",
    on_stop: str = "end",
    way: Way = "invoke",
    guard: RepeatedToolFailureMiddleware | None = None,
    inner: Sequence[Any] = (),
    **options: Any,
) -> Ran:
    """One run of a guarded ``create_agent`` agent against the scripted 127.0.0.1 server.

    The stop ends the run with its text (``on_stop="end"``) unless told otherwise,
    so the final state can be read; ``tests/test_langchain_stop.py`` has the default.
    """
    if guard is None:
        guard = RepeatedToolFailureMiddleware(mode=mode, on_stop=on_stop)  # type: ignore[arg-type]
    with serve(FakeOpenAI(answers)) as fake:
        agent = make_agent(fake.base_url, tools, guard, inner=inner, **options)
        state = run(agent, "go", way)
        with fake.lock:
            requests = tuple(fake.requests)
    report = RepeatedToolFailureMiddleware.report_of(state)
    assert report is not None
    return Ran(
        state=state,
        requests=requests,
        report=report,
        stop=RepeatedToolFailureMiddleware.stop_of(state),
    )
