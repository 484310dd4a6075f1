"""The OpenAI Agents SDK adapter: the real SDK over the real wire, to the 127.0.0.1 test server.

Every run here is ``agents`` 0.24 with its ``OpenAIChatCompletionsModel`` and an
``openai.AsyncOpenAI`` client talking HTTP to :mod:`openai_server`; nothing of
the framework is mocked.  What is asserted is what the server received (each
model request) and what the run returned.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from agents import FunctionTool, UserError, function_tool
from hosts.openai_agents import make_agent, run, run_config
from openai_server import FakeOpenAI, Reply, call, serve
from telemetry_harness import Harness

from tool_failure_guard.core import (
    LOOP_INVALID_TOOL_PARAMS,
    Continue,
    raised,
)
from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    GuardMode,
)
from tool_failure_guard.integrations.openai_agents import (
    GuardedRunner,
    ProtectionStopped,
)
from tool_failure_guard.integrations.openai_agents._run import GuardedRun, function_call
from tool_failure_guard.telemetry.sink import (
    GUARD_COUNTER,
    GUARD_LOG_EVENT,
    PROMPT_EVENT,
    TOOL_CALL_EVENT,
)

REMINDER = REPEATED_TOOL_FAILURE_REMINDER
STOP_TEXT = shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)


@function_tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    raise FileNotFoundError(f"no such file: {path}")


@function_tool
def list_dir(path: str) -> str:
    """List a directory of the project."""
    return "a.txt b.txt"


def _custom_error(ctx: Any, error: Exception) -> str:
    return f"custom handler: {type(error).__name__}"


@function_tool(failure_error_function=_custom_error)
def fetch_url(url: str) -> str:
    """Fetch a URL."""
    raise ConnectionRefusedError(f"refused: {url}")


def turns(plan: Callable[[int], Reply]) -> Callable[[dict[str, Any]], Reply]:
    """A responder answering by the number of assistant turns already in the request."""

    def respond(body: dict[str, Any]) -> Reply:
        return plan(sum(1 for m in body["messages"] if m["role"] == "assistant"))

    return respond


def failing(tool: str = "read_file", args: dict[str, Any] | str | None = None, *, upto: int = 30):
    """Call ``tool`` every turn (until ``upto`` turns, then a final text)."""
    arguments = {"path": "missing.txt"} if args is None else args
    return turns(
        lambda n: (
            Reply(calls=(call(f"c{n}", tool, arguments),)) if n < upto else Reply(text="I give up.")
        )
    )


def reminders(fake: FakeOpenAI, index: int) -> list[int]:
    """Positions of the system reminder messages in request ``index``."""
    return [
        i
        for i, m in enumerate(fake.messages(index))
        if m["role"] == "system" and REMINDER in str(m.get("content"))
    ]


def tool_outputs(fake: FakeOpenAI, index: int) -> list[str]:
    return [str(m["content"]) for m in fake.messages(index) if m["role"] == "tool"]


# -- the failing-tool loop, in each of the three ways -------------------------------


def test_a_second_run_starts_with_a_fresh_guard() -> None:
    runner = GuardedRunner(mode="enforce", on_stop="end")
    for _ in range(2):
        fake = FakeOpenAI(failing())
        with serve(fake):
            result = run(runner, make_agent(fake.base_url, [read_file]), "go")
        assert len(fake.requests) == 9  # not stopped before its first request
        assert GuardedRunner.stop_of(result) is not None


def test_a_run_the_guard_did_not_stop_has_no_stop_signal() -> None:
    fake = FakeOpenAI(failing(upto=3))
    with serve(fake):
        result = run(GuardedRunner(mode="enforce"), make_agent(fake.base_url, [read_file]), "go")
    assert GuardedRunner.stop_of(result) is None
    assert result.final_output == "I give up."


def test_the_agent_passed_in_is_not_changed() -> None:
    fake = FakeOpenAI(failing(upto=2))
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        before = (list(agent.tools), agent.tool_use_behavior, read_file.on_invoke_tool)
        run(GuardedRunner(mode="enforce"), agent, "go")
    assert (list(agent.tools), agent.tool_use_behavior, read_file.on_invoke_tool) == before


# -- modes ---------------------------------------------------------------------------


def _transcript(mode: str) -> list[list[dict[str, Any]]]:
    fake = FakeOpenAI(failing(upto=12))
    with serve(fake):
        run(GuardedRunner(mode=mode), make_agent(fake.base_url, [read_file]), "go")
    return [fake.messages(i) for i in range(len(fake.requests))]


def test_shadow_and_warn_are_off_apart_from_the_reminder() -> None:
    off, shadow, warn = _transcript("off"), _transcript("shadow"), _transcript("warn")
    assert shadow == off
    assert len(warn) == len(off) == 13
    without = [[m for m in request if REMINDER not in str(m.get("content"))] for request in warn]
    assert without == off
    # warn: exactly one reminder, placed after the 8th tool output, in every later request.
    for index, request in enumerate(warn):
        placed = [i for i, m in enumerate(request) if REMINDER in str(m.get("content"))]
        assert len(placed) == (1 if index >= 8 else 0)
        if placed:
            assert request[placed[0] - 1]["role"] == "tool"
            assert request[placed[0] - 1]["tool_call_id"] == "c7"
            assert request[placed[0]]["role"] == "system"


def test_the_mode_comes_from_the_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD", "enforce")
    assert GuardedRunner().mode.value == "enforce"
    monkeypatch.delenv("QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD")
    assert GuardedRunner().mode.value == "shadow"
    assert GuardedRunner(mode="warn").mode.value == "warn"
    with pytest.raises(ValueError, match="mode must be one of"):
        GuardedRunner(mode="loud")


# -- what the adapter must still see -------------------------------------------------


def test_a_tool_with_its_own_failure_error_function_is_observed() -> None:
    fake = FakeOpenAI(failing("fetch_url", {"url": "http://x"}))
    with serve(fake):
        agent = make_agent(fake.base_url, [fetch_url])
        result = run(GuardedRunner(mode="enforce", on_stop="end"), agent, "go")
    assert GuardedRunner.stop_of(result) is not None
    assert len(fake.requests) == 9
    # The tool's own handler still answered the model.
    assert tool_outputs(fake, 8)[0] == "custom handler: ConnectionRefusedError"


def test_invalid_arguments_are_never_counted_by_the_guard() -> None:
    harness = Harness()
    fake = FakeOpenAI(failing(args="{not json"))
    with serve(fake):
        runner = GuardedRunner(
            mode="enforce", telemetry=harness.sink, on_stop="end", invalid_params_limit=3
        )
        result = run(runner, make_agent(fake.base_url, [read_file]), "go")
    stop = GuardedRunner.stop_of(result)
    # The invalid-parameter protection stops it (three not_started calls), never this guard.
    assert stop is not None and stop.loop_type == LOOP_INVALID_TOOL_PARAMS
    assert stop.key is None  # the key is the repeated-failure guard's
    assert len(fake.requests) == 3
    assert all(not reminders(fake, i) for i in range(3))
    calls = harness.logs(TOOL_CALL_EVENT)
    assert [c["execution_status"] for c in calls] == ["not_started"] * 3
    assert {c["execution_error_type"] for c in calls} == {"invalid_tool_params"}
    assert not [d for d in harness.logs(GUARD_LOG_EVENT) if d["decision"] != "reset"]


def test_an_unknown_tool_is_not_started_when_the_sdk_answers_the_model() -> None:
    harness = Harness()
    fake = FakeOpenAI(failing("no_such_tool", {"x": 1}))
    config = run_config(tool_not_found_behavior="return_error_to_model")
    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink, invalid_params_limit=3)
        # No function-tool result: the SDK skips tool_use_behavior, so the stop is raised
        # before the next request (typed), with the settled items attached.
        with pytest.raises(ProtectionStopped) as raised:
            run(runner, make_agent(fake.base_url, [read_file]), "go", run_config=config)
    assert raised.value.stop.loop_type == LOOP_INVALID_TOOL_PARAMS
    assert len(fake.requests) == 3
    assert raised.value.run_data is not None
    outputs = [i for i in raised.value.run_data.new_items if i.type == "tool_call_output_item"]
    assert len(outputs) == 3
    assert harness.logs(PROMPT_EVENT)[0]["loop_type"] == LOOP_INVALID_TOOL_PARAMS
    calls = harness.logs(TOOL_CALL_EVENT)
    assert {c["execution_error_type"] for c in calls} == {"tool_not_registered"}


def test_parallel_calls_in_one_response_are_one_batch() -> None:
    harness = Harness()
    # Two failing calls per response: 8 failures after 4 batches -> reminder in request 5.
    plan = turns(
        lambda n: Reply(
            calls=(
                call(f"a{n}", "read_file", {"path": "one"}),
                call(f"b{n}", "read_file", {"path": "two"}),
            )
        )
    )
    fake = FakeOpenAI(plan)
    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink, on_stop="end")
        result = run(runner, make_agent(fake.base_url, [read_file]), "go")
    assert [len(reminders(fake, i)) for i in range(len(fake.requests))] == [0, 0, 0, 0, 1]
    assert GuardedRunner.stop_of(result) is not None
    # The reminder follows both outputs of the 4th response.
    request = fake.messages(4)
    place = reminders(fake, 4)[0]
    assert [m.get("tool_call_id") for m in request[place - 2 : place]] == ["a3", "b3"]
    records = harness.logs(TOOL_CALL_EVENT)
    assert len(records) == 10
    assert {r["batch_ordinal"] for r in records} == {1, 2, 3, 4, 5}
    assert all(d["receipt_complete"] for d in harness.logs(GUARD_LOG_EVENT))


def test_an_earlier_streaks_reminder_is_kept_when_a_later_one_is_added() -> None:
    # Streak 1: 8 x read_file fails; then read_file succeeds once (the candidate's own
    # success resets); streak 2: 8 x fetch_url fails (a new candidate) -> a second reminder.
    state = {"read_ok": False}

    @function_tool(name_override="read_file")
    def flaky_read(path: str) -> str:
        """Read a file."""
        if state["read_ok"]:
            return "contents"
        raise FileNotFoundError(path)

    def plan(n: int) -> Reply:
        if n < 8:
            return Reply(calls=(call(f"r{n}", "read_file", {"path": "p"}),))
        if n == 8:
            state["read_ok"] = True
            return Reply(calls=(call("ok", "read_file", {"path": "p"}),))
        if n < 17:
            return Reply(calls=(call(f"f{n}", "fetch_url", {"url": "u"}),))
        return Reply(text="done")

    fake = FakeOpenAI(turns(plan))
    with serve(fake):
        run(GuardedRunner(mode="warn"), make_agent(fake.base_url, [flaky_read, fetch_url]), "go")
    last = len(fake.requests) - 1
    assert last == 17
    placed = reminders(fake, last)
    assert len(placed) == 2
    request = fake.messages(last)
    assert [request[p - 1]["tool_call_id"] for p in placed] == ["r7", "f16"]
    # Each reminder is in every request after its streak, at the same place.
    for index in range(9, last + 1):
        assert fake.messages(index)[placed[0] - 1]["tool_call_id"] == "r7"
        assert len(reminders(fake, index)) == (2 if index >= 17 else 1)


def test_a_cancelled_call_is_never_counted() -> None:
    @function_tool(name_override="read_file")
    def cancelling_read(path: str) -> str:
        """Read a file."""
        if path == "cancel":
            raise asyncio.CancelledError()
        raise FileNotFoundError(path)

    def plan(n: int) -> Reply:
        if n == 7:
            return Reply(calls=(call("cut", "read_file", {"path": "cancel"}),))
        if n < 15:
            return Reply(calls=(call(f"c{n}", "read_file", {"path": "p"}),))
        return Reply(text="done")

    harness = Harness()
    fake = FakeOpenAI(turns(plan))
    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        result = run(runner, make_agent(fake.base_url, [cancelling_read]), "go")
    # 7 failures, a cancellation (resets), 7 failures: never 8 in a row -> no reminder.
    assert GuardedRunner.stop_of(result) is None
    assert all(not reminders(fake, i) for i in range(len(fake.requests)))
    statuses = [
        (r["terminal_status"], r["execution_status"]) for r in harness.logs(TOOL_CALL_EVENT)
    ]
    assert statuses[7] == ("cancelled", "cancelled")


def test_a_hand_built_function_tool_is_observed() -> None:
    async def invoke(ctx: Any, arguments: str) -> str:
        raise PermissionError(json.loads(arguments)["path"])

    tool = FunctionTool(
        name="read_file",
        description="Read a file.",
        params_json_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
        on_invoke_tool=invoke,
    )
    harness = Harness()
    fake = FakeOpenAI(failing())
    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        # A hand-built invoker that raises fails the run (the SDK's rule), observed first.
        with pytest.raises(UserError, match="Error running tool read_file"):
            run(runner, make_agent(fake.base_url, [tool]), "go")
    records = harness.logs(TOOL_CALL_EVENT)
    assert [r["execution_error_type"] for r in records] == ["permission_denied"]
    assert harness.logs(PROMPT_EVENT)[0]["stop_reason"] == "error"


# -- telemetry and the fail-open warning ------------------------------------------------


def test_telemetry_goes_to_the_agents_sinks_with_this_route() -> None:
    harness = Harness()
    fake = FakeOpenAI(failing())
    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        with pytest.raises(ProtectionStopped):
            run(runner, make_agent(fake.base_url, [read_file]), "go")
    routes = {attrs["route"] for attrs, _ in harness.points(GUARD_COUNTER)}
    assert routes == {"openai_agents"}
    decisions = [d["decision"] for d in harness.logs(GUARD_LOG_EVENT)]
    assert decisions[-2:] == ["warned", "stopped"]
    (prompt,) = harness.logs(PROMPT_EVENT)
    assert prompt["route"] == "openai_agents"
    assert prompt["loop_type"] == "repeated_tool_execution_failure"
    assert prompt["stop_reason"] == "end_turn"  # stopped by a protection, not an error
    assert (prompt["model_turns"], prompt["tool_calls"], prompt["batches"]) == (9, 9, 9)
    assert len(harness.logs(TOOL_CALL_EVENT)) == 9


def test_a_run_whose_tool_calls_were_never_observed_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The model hands off to a second agent: its tool calls are not the guarded agent's
    # FunctionTools, so the adapter never sees their outcomes.
    def plan(n: int) -> Reply:
        if n == 0:
            return Reply(calls=(call("h0", "transfer_to_helper", {}),))
        if n == 1:
            return Reply(calls=(call("t1", "list_dir", {"path": "."}),))
        return Reply(text="done")

    fake = FakeOpenAI(turns(plan))
    with serve(fake):
        helper = make_agent(fake.base_url, [list_dir], name="helper")
        agent = make_agent(fake.base_url, [read_file], handoffs=[helper])
        harness = Harness()
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        with caplog.at_level(logging.WARNING, "tool_failure_guard.integrations.openai_agents"):
            result = run(runner, agent, "go")
    assert result.final_output == "done"
    warnings = [r for r in caplog.records if "observed none" in r.getMessage()]
    assert len(warnings) == 1
    assert "tool_failure_guard.integrations.openai_agents" in warnings[0].getMessage()
    assert harness.logs(TOOL_CALL_EVENT) == []  # nothing was seen, nothing is made up
    assert harness.logs(PROMPT_EVENT)[0]["tool_calls"] == 1


def test_a_call_whose_outcome_was_not_seen_makes_the_receipt_incomplete() -> None:
    run = GuardedRun(GuardMode.ENFORCE)
    run.model_response([function_call("a", "read_file", "{}"), function_call("b", "x", "{}")])
    run.settle("a", lambda c: raised(c, FileNotFoundError("a")))
    assert [c.call_id for c in run.pending()] == ["b"]
    action = run.close()
    assert isinstance(action, Continue) and action.guard_step is not None
    assert action.guard_step.receipt.complete is False


def test_an_approval_wait_and_a_rejected_approval_are_cancelled_not_started() -> None:
    @function_tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file (asks first)."""
        return "deleted"

    def plan(n: int) -> Reply:
        if n == 0:
            return Reply(calls=(call("d0", "delete_file", {"path": "a"}),))
        return Reply(text="left it alone")

    harness = Harness()
    fake = FakeOpenAI(turns(plan))
    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        agent = make_agent(fake.base_url, [delete_file])
        waiting = run(runner, agent, "go")
        assert len(waiting.interruptions) == 1
        state = waiting.to_state()
        state.reject(waiting.interruptions[0])

        async def resume() -> Any:
            return await runner.run(agent, state, run_config=run_config())

        resumed = asyncio.run(asyncio.wait_for(resume(), 60))
    assert resumed.final_output == "left it alone"
    records = harness.logs(TOOL_CALL_EVENT)
    statuses = [(r["terminal_status"], r["execution_status"]) for r in records]
    # the run that stopped to ask, then the resumed run whose user said no
    assert statuses == [("cancelled", "not_started"), ("cancelled", "not_started")]
    report = GuardedRunner.report_of(resumed)
    assert report is not None and report.observed == 1 and report.batches == 1


def test_a_tool_past_its_timeout_is_an_execution_failure_typed_timeout() -> None:
    @function_tool(name_override="read_file", timeout=0.05)
    async def slow_read(path: str) -> str:
        """Read a file (slowly)."""
        await asyncio.sleep(30)
        return "late"

    harness = Harness()
    fake = FakeOpenAI(failing(upto=1))
    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        run(runner, make_agent(fake.base_url, [slow_read]), "go")
    (record,) = harness.logs(TOOL_CALL_EVENT)
    assert (record["terminal_status"], record["execution_status"]) == ("error", "error")
    assert record["execution_error_type"] == "timeout"
    assert "timed out" in tool_outputs(fake, 1)[0]  # the SDK's own timeout text


def test_a_replayed_call_id_is_answered_without_running_the_tool() -> None:
    ran: list[str] = []

    @function_tool(name_override="list_dir")
    def counting_list(path: str) -> str:
        """List a directory."""
        ran.append(path)
        return "a.txt"

    def plan(n: int) -> Reply:
        if n == 0:
            return Reply(calls=(call("same", "list_dir", {"path": "."}),))
        if n == 1:  # the provider replays the answered id next to a new call
            return Reply(
                calls=(
                    call("same", "list_dir", {"path": "."}),
                    call("new", "list_dir", {"path": "b"}),
                )
            )
        return Reply(text="done")

    harness = Harness()
    fake = FakeOpenAI(turns(plan))
    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=harness.sink)
        run(runner, make_agent(fake.base_url, [counting_list]), "go")
    assert ran == [".", "b"]  # the replay never ran
    records = harness.logs(TOOL_CALL_EVENT)
    assert [(r["batch_ordinal"], r["provider_duplicate"]) for r in records] == [
        (1, False),
        (2, True),
        (2, False),
    ]


class _BrokenSink:
    """A telemetry sink whose every method raises."""

    def __getattr__(self, name: str) -> Any:
        def broken(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError(f"sink down ({name})")

        return broken


def test_a_failing_telemetry_sink_changes_nothing() -> None:
    fake = FakeOpenAI(failing())
    with serve(fake):
        runner = GuardedRunner(mode="enforce", telemetry=_BrokenSink())  # type: ignore[arg-type]
        with pytest.raises(ProtectionStopped) as raised:
            run(runner, make_agent(fake.base_url, [read_file]), "go")
    assert len(fake.requests) == 9
    assert raised.value.report.stop is not None


def test_the_agent_and_the_core_never_import_the_adapter() -> None:
    import subprocess
    import sys

    probe = (
        "import sys, tool_failure_guard, tool_failure_guard.core,"
        " tool_failure_guard.commands.agent;"
        "import tool_failure_guard.session.transport.agent;"
        "bad = [m for m in sys.modules if m == 'agents' or m.startswith('agents.')"
        " or m.startswith('tool_failure_guard.integrations')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_cancelled_streamed_run_keeps_the_guard_out_of_the_cut_batch() -> None:
    holder: dict[str, Any] = {}

    @function_tool
    async def run_shell_command(command: str) -> str:
        """Run a shell command (the user cancels the run while it runs)."""
        holder["result"].cancel()
        await asyncio.sleep(30)
        return "finished"

    first = tuple(call(f"a{i}", "read_file", {"path": "m"}) for i in range(4))
    second = (*(call(f"b{i}", "read_file", {"path": "m"}) for i in range(4)),)
    answers = [
        Reply(calls=first),
        Reply(calls=(*second, call("slow", "run_shell_command", {"command": "sleep 60"}))),
        Reply(text="never asked for"),
    ]
    harness = Harness()
    fake = FakeOpenAI(answers)
    runner = GuardedRunner(mode="enforce", telemetry=harness.sink)

    async def go() -> Any:
        agent = make_agent(fake.base_url, [read_file, run_shell_command])
        result = runner.run_streamed(agent, "go", run_config=run_config())
        holder["result"] = result
        async for _event in result.stream_events():
            pass
        await asyncio.sleep(0.05)  # let the run task's done callback report
        return result

    with serve(fake):
        result = asyncio.run(asyncio.wait_for(go(), 60))
    assert len(fake.requests) == 2  # no request after the cancel
    report = GuardedRunner.report_of(result)
    assert report is not None
    # Batch 2 (8 failures: it would have warned) is never reduced.
    assert report.decisions == ("tracked",) and report.stop is None
    assert not any(reminders(fake, i) for i in range(2))
    (prompt,) = harness.logs(PROMPT_EVENT)
    assert prompt["batches"] == 1
    assert prompt["stop_reason"] == "cancelled"


def test_the_callers_filter_hooks_formatter_and_behaviour_still_run() -> None:
    from agents import RunHooks
    from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs

    seen: dict[str, int] = {"filter": 0, "llm_end": 0, "formatter": 0}

    def keep_last_six(data: CallModelData[Any]) -> ModelInputData:
        seen["filter"] += 1  # the caller trims the history: the reminder must survive it
        items = data.model_data.input
        return ModelInputData(input=items[:1] + items[-6:], instructions=None)

    def formatter(args: ToolErrorFormatterArgs[Any]) -> str | None:
        seen["formatter"] += 1
        return f"formatted {args.kind}"

    class Counting(RunHooks[Any]):
        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            seen["llm_end"] += 1

    # Scripted by request count: the trimmed history no longer tells the turn.
    script = [Reply(calls=(call(f"c{n}", "read_file", {"path": "m"}),)) for n in range(11)]
    fake = FakeOpenAI([*script, Reply(text="I give up.")])
    config = run_config(call_model_input_filter=keep_last_six, tool_error_formatter=formatter)
    with serve(fake):
        agent = make_agent(fake.base_url, [read_file])
        run(GuardedRunner(mode="warn"), agent, "go", run_config=config, hooks=Counting())
    assert seen["filter"] == seen["llm_end"] == len(fake.requests) == 12
    assert seen["formatter"] == 11  # the SDK's default failure handler asked it each time
    assert tool_outputs(fake, 1) == ["formatted tool_exception"]
    # The trimmed-away reminder is never dropped: it is in every request from the 9th.
    assert [len(reminders(fake, i)) for i in range(12)] == [0] * 8 + [1] * 4
    assert fake.messages(11)[-1]["role"] == "system"  # its batch was trimmed: at the end


def test_the_agents_own_tool_use_behaviour_still_decides() -> None:
    fake = FakeOpenAI(turns(lambda n: Reply(calls=(call(f"l{n}", "list_dir", {"path": "."}),))))
    with serve(fake):
        agent = make_agent(fake.base_url, [list_dir], tool_use_behavior="stop_on_first_tool")
        result = run(GuardedRunner(mode="enforce"), agent, "go")
    assert result.final_output == "a.txt b.txt"
    assert len(fake.requests) == 1
    assert GuardedRunner.stop_of(result) is None
