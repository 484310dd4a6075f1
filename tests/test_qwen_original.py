"""The harness of the released original (``tests/qwen_original.py``) does what it says.

One Qwen Code 0.24.4 process in ``enforce`` with ``--debug`` and a telemetry outfile,
against a scripted model that keeps reading a missing file four times a batch, serves
five sessions: a host with the bare drain name, one whose drain answers with a queued
prompt every time, one where the person typed something during the second batch, and
two whose host has only the ``_`` name or no drain at all.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from acp import RequestError, text_block
from openai_server import FakeOpenAI, Reply, call, serve
from qwen_original import (
    DRAIN_BARE,
    Host,
    HostPlan,
    chunk_with,
    debug_decisions,
    guard_events,
    log_events,
    make_home,
    read_telemetry,
    require_qwen,
    spawn_original,
    telemetry_settings,
)

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER
from tool_failure_guard.telemetry import names

LOOP_ERROR = (
    "Tool-call loop protection stopped this turn. The session is still available; "
    "send a more specific instruction to continue."
)


MAX_BATCHES = 6


def stubborn(missing: Path) -> Any:
    """Four reads of one missing file per model turn, six turns, then the model gives up."""
    counter = [0]

    def respond(body: dict[str, Any]) -> Reply:
        counter[0] += 1
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turn >= MAX_BATCHES:
            return Reply(text="Gave up.")
        calls = tuple(
            call(f"r{counter[0]}_{i}", "read_file", {"file_path": str(missing)}) for i in range(4)
        )
        return Reply(text="Reading.", calls=calls)

    return respond


def test_the_harness_runs_the_original_and_reads_back_its_guard(tmp_path: Path) -> None:
    require_qwen()
    assert chunk_with("reduceRepeatedToolFailureGuard").name.startswith("acpAgent-")
    project, outfile = tmp_path / "project", tmp_path / "telemetry.json"
    project.mkdir()
    home = make_home(tmp_path / "home", telemetry=telemetry_settings(outfile=outfile))
    host = Host("bare")
    plans = {
        "plain": HostPlan(),
        "queued": HostPlan(queued_prompt_at=frozenset(range(10))),
        "typed": HostPlan(typed_input={1: ["please look elsewhere"]}),
        # The original sends only the bare name: "_" alone is the same as no drain.
        "underscore": HostPlan(drain="underscore"),
        "none": HostPlan(drain="none"),
    }
    results: dict[str, tuple[str, Any]] = {}
    with serve(FakeOpenAI(stubborn(project / "missing.txt"))) as fake:

        async def go() -> None:
            async with spawn_original(
                host, home=home, base_url=fake.base_url, mode="enforce", cwd=project, debug=True
            ) as conn:
                for name, plan in plans.items():
                    session = await conn.new_session(cwd=str(project), mcp_servers=[])
                    host.plan(session.session_id, plan)
                    try:
                        outcome: Any = await conn.prompt(
                            session_id=session.session_id, prompt=[text_block("go")]
                        )
                    except RequestError as exc:
                        outcome = exc
                    results[name] = (session.session_id, outcome)

        asyncio.run(asyncio.wait_for(go(), 120))

    plain_id, plain = results["plain"]
    # The stop of a normal prompt is a JSON-RPC error, with no agent message saying so.
    assert isinstance(plain, RequestError) and plain.code == -32603
    assert str(plain) == LOOP_ERROR
    assert plain.data == {
        "code": "LOOP_DETECTED",
        "errorKind": "loop_detected",
        "loopType": "repeated_tool_execution_failure",
    }
    assert host.agent_text(plain_id) == "Reading." * 3
    assert {r.method for r in host.drains_of(plain_id)} == {DRAIN_BARE}
    assert all(r.params.get("todoStopGuardWatchQueuedPrompt") is True for r in host.drain_requests)
    assert [d["decision"] for d in debug_decisions(home, plain_id)] == ["tracked", "warn", "stop"]
    # The reminder went out once, as a user message after the tool results.
    carrying = [
        (index, m["role"])
        for index, body in enumerate(fake.requests)
        for m in body["messages"]
        if REPEATED_TOOL_FAILURE_REMINDER in str(m.get("content"))
    ]
    assert carrying[0][1] == "user"

    # A queued prompt at every drain keeps the guard idle (silent resets): the loop runs
    # until the model gives up; a message typed during the second batch resets once.
    queued_id, queued = results["queued"]
    assert queued.stop_reason == "end_turn"
    assert debug_decisions(home, queued_id) == []
    assert len(host.tool_call_ids(queued_id)) == 4 * MAX_BATCHES
    typed_id, typed = results["typed"]
    assert isinstance(typed, RequestError)
    assert [d["decision"] for d in debug_decisions(home, typed_id)] == [
        "tracked",
        "reset",
        "tracked",
        "warn",
        "stop",
    ]

    records = read_telemetry(outfile)
    decisions = [e["decision"] for e in guard_events(records)]
    assert decisions.count("stopped") == 2 and decisions.count("warned") == 2
    assert [e["loop_type"] for e in log_events(records, "loop_detected")] == [
        "repeated_tool_execution_failure"
    ] * 2

    for name in ("underscore", "none"):
        session_id, response = results[name]
        assert response.stop_reason == "end_turn"
        assert host.drains_of(session_id) == []
        assert [r.method for r in host.refused if r.session_id == session_id] == [DRAIN_BARE]
        assert [d["decision"] for d in debug_decisions(home, session_id)] == ["reset"]


# -- the names the original's telemetry fixes (ours took them: docs/telemetry.md) ---------


def _bundle_constants(text: str) -> dict[str, str]:
    """``var NAME = "…"`` and ``var NAME = `${SERVICE_NAME}…``` constants of a chunk."""
    found = dict(re.findall(r'^var ([A-Z_]+) = "([^"]*)";$', text, re.MULTILINE))
    for name, rest in re.findall(r"^var ([A-Z_]+) = `\$\{SERVICE_NAME\}([^`]*)`;$", text, re.M):
        found[name] = found["SERVICE_NAME"] + rest
    return found


def test_our_telemetry_names_are_the_ones_the_original_bundle_fixes() -> None:
    require_qwen()
    metrics = chunk_with("recordRepeatedToolFailureGuardMetrics").read_text(encoding="utf-8")
    constants = _bundle_constants(metrics)
    assert constants["EVENT_REPEATED_TOOL_FAILURE_GUARD"] == names.GUARD_LOG_EVENT
    assert constants["REPEATED_TOOL_FAILURE_GUARD_COUNT"] == names.GUARD_COUNTER
    assert constants["TOOL_EXECUTION_COUNT"] == names.TOOL_CALL_COUNTER
    # Its logger and meter are named SERVICE_NAME; ours keep this library's scope.
    assert constants["SERVICE_NAME"] == "qwen-code" != names.INSTRUMENTATION_SCOPE
    loggers = chunk_with("logLoopDetected").read_text(encoding="utf-8")
    loop_class = re.search(r"var LoopDetectedEvent = class \{(.*?)\n\};", loggers, re.DOTALL)
    assert loop_class is not None
    assert f'this["event.name"] = "{names.LOOP_DETECTED_EVENT}";' in loop_class.group(1)
    # What its records carry that ours never do (docs/parity.md): a timestamp attribute,
    # and on the loop record the session id (getCommonAttributes).
    assert {"event.timestamp", "session.id"} == names.ORIGINAL_ONLY_ATTRIBUTES
    assert 'this["event.timestamp"] = ' in loop_class.group(1)
    assert '"session.id": config.getSessionId()' in loggers
    # The records' bodies, and where the name goes: the event.name attribute only.
    assert f"body: `{names.guard_log_body('${event.decision}')}`," in loggers
    assert f"body: `{names.loop_log_body('${event.loop_type}')}`," in loggers
    assert '"event.name": EVENT_REPEATED_TOOL_FAILURE_GUARD' in loggers
    assert names.EVENT_NAME_ATTRIBUTE == "event.name"
    # The execution counter's labels: execution status and tool type, as ours (plus one).
    recorded = re.search(r"recordToolExecutionMetrics\(config, \{(.*?)\}\);", loggers, re.DOTALL)
    assert recorded is not None
    labels = set(re.findall(r"(\w+): normalizedEvent\.\w+", recorded.group(1)))
    assert labels == {"execution_status", "tool_type"}
    assert set(names.TOOL_CALL_ATTRIBUTE_VALUES) == labels | {"terminal_status"}
