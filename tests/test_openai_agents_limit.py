"""A protection's stop at the SDK's own edges: its ``max_turns`` limit and its error handlers.

Real ``agents`` 0.24 runs against the 127.0.0.1 test server, in each of the
three ways.  The SDK checks ``max_turns`` at the start of a turn, before the
model-input filter the adapter raises its stop from: a stop decided on the
last allowed turn's batch meets that check first.  The protection decided
first, so every way to run raises ``ProtectionStopped`` there.  The run option
``error_handlers={"max_turns": ...}`` is the SDK's turn limit's own handler:
never consulted for a protection's stop, and still the caller's at the limit.
The prompt record's ``stop_reason`` says which ended the run, the same in
every way: ``end_turn`` with the ``loop_type`` for the stop,
``max_turn_requests`` for the SDK's limit (handled or raised).
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import MaxTurnsExceeded, RunErrorHandlerInput, RunErrorHandlerResult
from hosts.openai_agents import WAYS, make_agent, run
from openai_server import FakeOpenAI, serve
from telemetry_harness import Harness
from test_openai_agents import failing, list_dir, read_file

from tool_failure_guard.core import LOOP_REPEATED_TOOL_FAILURE
from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_STOP_MESSAGE, FailureKey
from tool_failure_guard.integrations.openai_agents import (
    GuardedRunner,
    ProtectionStopped,
    report_of,
    stop_of,
)
from tool_failure_guard.telemetry.sink import PROMPT_EVENT

STOP_TEXT = shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
#: The enforce stop of ``failing()``: the 9th failed batch, so model request 9 is the last.
STOP_TURN = 9


class Handler:
    """A ``max_turns`` error handler that records what the SDK handed it."""

    def __init__(self, answer: str = "the turn limit's fallback", *, awaited: bool = False):
        self.answer = answer
        self.awaited = awaited
        self.errors: list[BaseException] = []

    def __call__(self, data: RunErrorHandlerInput[Any]) -> Any:
        self.errors.append(data.error)
        result = RunErrorHandlerResult(final_output=self.answer, include_in_history=False)
        if not self.awaited:
            return result

        async def later() -> RunErrorHandlerResult:
            return result

        return later()


def _outputs(error: ProtectionStopped) -> int:
    assert error.run_data is not None
    return sum(1 for item in error.run_data.new_items if item.type == "tool_call_output_item")


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("handled", [False, True], ids=["no_handler", "max_turns_handler"])
def test_a_stop_at_the_last_allowed_turn_is_the_protections_in_every_way(
    way: str, handled: bool
) -> None:
    handler, harness = Handler(), Harness()
    options: dict[str, Any] = {"error_handlers": {"max_turns": handler}} if handled else {}
    fake = FakeOpenAI(failing())
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        # the 9th turn stops; the SDK's max_turns check of the 10th comes before the filter
        with pytest.raises(ProtectionStopped) as raised:
            run(runner, agent, "go", way, max_turns=STOP_TURN, **options)  # type: ignore[arg-type]
    assert len(fake.requests) == STOP_TURN
    error = raised.value
    assert error.loop_type == LOOP_REPEATED_TOOL_FAILURE
    assert error.key == FailureKey("read_file", "file_not_found")
    assert error.report.stop == error.stop and error.report.decisions[-1] == "stop"
    # raised at the SDK's limit check, inside its run loop: no SDK MaxTurnsExceeded behind it,
    # and the SDK's run details hold the nine settled results as for a stop mid-run
    assert error.__cause__ is None
    assert _outputs(error) == STOP_TURN
    # the turn limit's handler is not the protection's: never consulted
    assert handler.errors == []
    (prompt,) = harness.logs(PROMPT_EVENT)
    assert (prompt["stop_reason"], prompt["loop_type"]) == ("end_turn", LOOP_REPEATED_TOOL_FAILURE)


@pytest.mark.parametrize("way", WAYS)
def test_a_max_turns_handler_is_not_consulted_for_a_stop_mid_run(way: str) -> None:
    handler = Handler()
    fake = FakeOpenAI(failing())
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        with pytest.raises(ProtectionStopped) as raised:
            run(
                GuardedRunner(mode="enforce"),
                agent,
                "go",
                way,  # type: ignore[arg-type]
                max_turns=40,
                error_handlers={"max_turns": handler},
            )
    assert len(fake.requests) == STOP_TURN and _outputs(raised.value) == STOP_TURN
    assert handler.errors == []


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("max_turns", [STOP_TURN, 40])
def test_on_stop_end_is_the_final_output_of_a_stop_whatever_the_handler(
    way: str, max_turns: int
) -> None:
    handler = Handler()
    fake = FakeOpenAI(failing())
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        result = run(
            GuardedRunner(mode="enforce", on_stop="end"),
            agent,
            "go",
            way,  # type: ignore[arg-type]
            max_turns=max_turns,
            error_handlers={"max_turns": handler},
        )
    assert len(fake.requests) == STOP_TURN
    stop = stop_of(result)
    assert stop is not None and result.final_output == stop.notice == STOP_TEXT
    assert handler.errors == []


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("awaited", [False, True], ids=["sync_handler", "async_handler"])
def test_the_callers_max_turns_handler_still_ends_a_run_at_the_sdks_limit(
    way: str, awaited: bool
) -> None:
    handler, harness = Handler("out of turns", awaited=awaited), Harness()
    fake = FakeOpenAI(failing("list_dir", {"path": "."}))  # succeeds every turn: never stopped
    with serve(fake):
        agent = make_agent(fake.base_url, [list_dir])
        result = run(
            GuardedRunner(mode="enforce", telemetry=harness.sink),
            agent,
            "go",
            way,  # type: ignore[arg-type]
            max_turns=3,
            error_handlers={"max_turns": handler},
        )
    assert len(fake.requests) == 3 and result.final_output == "out of turns"
    # the SDK's own error, exactly once, and the guard has nothing to say about it
    assert len(handler.errors) == 1
    assert type(handler.errors[0]) is MaxTurnsExceeded
    report = report_of(result)
    assert report is not None and report.stop is None and stop_of(result) is None
    # the handler chose the output; the run still ended at the SDK's limit
    (prompt,) = harness.logs(PROMPT_EVENT)
    assert (prompt["stop_reason"], prompt.get("loop_type")) == ("max_turn_requests", None)


@pytest.mark.parametrize("way", WAYS)
def test_a_shadow_would_stop_at_the_limit_leaves_the_limit_to_the_handler(way: str) -> None:
    # shadow decides would_stop on the same batch and stops nothing: the limit is the SDK's
    handler = Handler()
    fake = FakeOpenAI(failing())
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        result = run(
            GuardedRunner(mode="shadow"),
            agent,
            "go",
            way,  # type: ignore[arg-type]
            max_turns=STOP_TURN,
            error_handlers={"max_turns": handler},
        )
    assert result.final_output == "the turn limit's fallback" and len(handler.errors) == 1
    report = report_of(result)
    assert report is not None and report.stop is None and report.decisions[-1] == "would_stop"


@pytest.mark.parametrize("way", WAYS)
def test_the_sdks_own_limit_without_a_handler_stays_the_sdks(way: str) -> None:
    harness = Harness()
    fake = FakeOpenAI(failing("list_dir", {"path": "."}))
    with serve(fake):
        agent = make_agent(fake.base_url, [list_dir])
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        with pytest.raises(MaxTurnsExceeded) as raised:
            run(runner, agent, "go", way, max_turns=3)  # type: ignore[arg-type]
    assert type(raised.value) is MaxTurnsExceeded and len(fake.requests) == 3
    # streamed too, where the SDK raises it from stream_events() and its run task ends cleanly
    (prompt,) = harness.logs(PROMPT_EVENT)
    assert prompt["stop_reason"] == "max_turn_requests"


@pytest.mark.parametrize("way", WAYS)
def test_error_handlers_that_are_not_a_dict_are_refused_by_name(way: str) -> None:
    harness = Harness()
    fake = FakeOpenAI(failing("list_dir", {"path": "."}))
    with serve(fake):
        agent = make_agent(fake.base_url, [list_dir])
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        with pytest.raises(TypeError, match=r"error_handlers must be a dict.*got list"):
            run(runner, agent, "go", way, error_handlers=[Handler()])  # type: ignore[arg-type]
    # refused before the run started: no request, no prompt record
    assert fake.requests == [] and harness.logs(PROMPT_EVENT) == []
