"""How a stopped Agents SDK run ends (``on_stop``), and the fail-open warning's timing.

Real ``agents`` 0.24 runs against the 127.0.0.1 test server, in each of the
three ways.  The default stop raises the adapter's ``ProtectionStopped`` (an
``agents.MaxTurnsExceeded`` too) before the next model request, from
``stream_events()`` when streamed; ``on_stop="end"`` ends a text run with the
stop text and raises all the same for a typed output.
"""

from __future__ import annotations

import logging
import pickle

import pydantic
import pytest
from agents import MaxTurnsExceeded, function_tool
from hosts.openai_agents import WAYS, make_agent, run
from openai_server import FakeOpenAI, Reply, call, serve
from test_openai_agents import failing, read_file, reminders, turns

from tool_failure_guard.core import LOOP_REPEATED_TOOL_FAILURE
from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_STOP_MESSAGE, FailureKey, GuardMode
from tool_failure_guard.integrations._api import ProtectionStopped as SharedStopped
from tool_failure_guard.integrations.openai_agents import (
    GuardedRunner,
    GuardStop,
    ProtectionStopped,
    report_of,
    stop_of,
)

STOP_TEXT = shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)


@function_tool
def list_dir(path: str) -> str:
    """List a directory of the project."""
    return "a.txt b.txt"


@pytest.mark.parametrize("way", WAYS)
def test_enforce_reminds_once_then_stops_in_every_way(way: str) -> None:
    fake = FakeOpenAI(failing())
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        # the default stop is the SDK's limit idiom: raised (from stream_events() when
        # streamed) before the next model request, an agents.MaxTurnsExceeded too
        with pytest.raises(MaxTurnsExceeded) as raised:
            run(GuardedRunner(mode="enforce"), agent, "go", way)  # type: ignore[arg-type]
    # 8 failures -> the reminder in request 9; the 9th failure stops: no 10th request.
    assert len(fake.requests) == 9
    assert [len(reminders(fake, i)) for i in range(9)] == [0] * 8 + [1]
    error = raised.value
    assert isinstance(error, ProtectionStopped) and isinstance(error, SharedStopped)
    assert isinstance(error.stop, GuardStop) and error.stop.mode is GuardMode.ENFORCE
    assert error.loop_type == LOOP_REPEATED_TOOL_FAILURE
    assert error.key == FailureKey("read_file", "file_not_found")
    assert error.stop.notice == STOP_TEXT and str(error) == STOP_TEXT
    assert error.report.stop == error.stop and error.report.decisions[-2:] == ("warn", "stop")
    # The SDK's run details, as for its own MaxTurnsExceeded: the nine settled results.
    assert error.run_data is not None
    outputs = [i for i in error.run_data.new_items if i.type == "tool_call_output_item"]
    assert len(outputs) == 9
    copy = pickle.loads(pickle.dumps(error))  # crosses a process boundary (without run_data)
    assert type(copy) is ProtectionStopped and copy.stop == error.stop
    assert copy.report == error.report


@pytest.mark.parametrize("way", WAYS)
def test_on_stop_end_ends_a_text_run_with_the_stop_text_in_every_way(way: str) -> None:
    fake = FakeOpenAI(failing())
    with serve(fake):
        runner = GuardedRunner(mode="enforce", on_stop="end")
        result = run(runner, make_agent(fake.base_url, [read_file]), "go", way)  # type: ignore[arg-type]
    assert len(fake.requests) == 9
    stop = stop_of(result)
    assert stop is not None and stop == GuardedRunner.stop_of(result)
    assert stop.loop_type == LOOP_REPEATED_TOOL_FAILURE
    assert result.final_output == stop.notice == STOP_TEXT
    report = report_of(result)
    assert report is not None and report.stop == stop
    # The settled results stay in the run's history: nine calls, nine outputs.
    items = result.to_input_list()
    outputs = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert len(outputs) == 9


@pytest.mark.parametrize("way", WAYS)
def test_on_stop_end_raises_all_the_same_for_a_typed_output(way: str) -> None:
    class Answer(pydantic.BaseModel):
        text: str

    fake = FakeOpenAI(failing())
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file], output_type=Answer)
        with pytest.raises(ProtectionStopped) as raised:
            run(GuardedRunner(mode="enforce", on_stop="end"), agent, "go", way)  # type: ignore[arg-type]
    assert len(fake.requests) == 9 and raised.value.loop_type == LOOP_REPEATED_TOOL_FAILURE


def test_the_fail_open_warning_comes_during_the_run() -> None:
    # A helper agent the run hands off to loops on its own tool, which the adapter does
    # not observe: the warning must come at the first batch it could not see, not at the end.
    seen_at: list[int] = []

    class Probe(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "observed none" in record.getMessage():
                seen_at.append(len(fake.requests))

    def plan(n: int) -> Reply:
        if n == 0:
            return Reply(calls=(call("h0", "transfer_to_helper", {}),))
        if n < 6:
            return Reply(calls=(call(f"t{n}", "list_dir", {"path": "."}),))
        return Reply(text="done")

    fake = FakeOpenAI(turns(plan))
    probe = Probe(logging.WARNING)
    logger = logging.getLogger("tool_failure_guard.integrations.openai_agents")
    logger.addHandler(probe)
    try:
        with serve(fake):
            helper = make_agent(fake.base_url, [list_dir], name="helper")
            agent = make_agent(fake.base_url, [read_file], handoffs=[helper])
            result = run(GuardedRunner(mode="enforce"), agent, "go")
    finally:
        logger.removeHandler(probe)
    assert result.final_output == "done" and len(fake.requests) == 7
    # the helper's first batch closes before request 3 is sent: said then, and only once
    assert seen_at == [2]
