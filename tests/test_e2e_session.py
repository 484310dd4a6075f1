"""End-to-end: the guarded agent over stdio, driven by the ACP SDK's client.

Each test spawns ``python -m tool_failure_guard agent`` with a private HOME,
project and state directory, and asserts on what a client can see (session
updates, the prompt response and its ``_meta``) and on what the model was sent
(the session's history file).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from acp import text_block
from acp.exceptions import RequestError
from acp.schema import PromptResponse
from e2e_helpers import Box, decisions, run, wait_until

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)
from tool_failure_guard.session.persistence.messages import Message
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent
from tool_failure_guard.telemetry.sink import GUARD_LOG_EVENT, LOOP_DETECTED_EVENT

T = TypeVar("T")
SHOWN_STOP = shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
READ_MISSING = {"tool": "read_file", "args": {"path": "missing.txt"}}


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


async def prompt_once(
    box: Box,
    *,
    mode: str | None,
    scenario: str,
    client: RecordingClient | None = None,
    texts: Sequence[str] = ("go",),
    meta: dict[str, Any] | None = None,
    extra_args: Sequence[str] = (),
    prompts: int = 1,
) -> tuple[RecordingClient, list[Any], str]:
    """Open a session and send ``prompts`` prompts; return client, responses, session id."""
    client = client or RecordingClient()
    responses = []
    async with spawn_guarded_agent(
        client,
        mode=mode,
        state_dir=box.state,
        home=box.home,
        scenario=scenario,
        extra_args=extra_args,
    ) as conn:
        session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
        for _ in range(prompts):
            blocks = [text_block(t) for t in texts]
            if meta is None:
                responses.append(await conn.prompt(session_id=session.session_id, prompt=blocks))
            else:
                # raw JSON-RPC, so that _meta may hold keys the SDK client would refuse
                raw = await conn._conn.send_request(
                    "session/prompt",
                    {
                        "sessionId": session.session_id,
                        "prompt": [b.model_dump(by_alias=True) for b in blocks],
                        "_meta": meta,
                    },
                )
                responses.append(PromptResponse.model_validate(raw))
    return client, responses, session.session_id


def batches(response: Any) -> list[dict[str, Any]]:
    return list(response.field_meta["toolFailureGuard"]["batches"])


def system_texts(messages: list[Message]) -> list[str]:
    return [text for m in messages for text in m.texts("system")]


def loop_scenario(per_turn: int = 4, turns: int = 5, **extra: Any) -> dict[str, Any]:
    return {
        "turns": [{"text": "Reading.", "calls": [READ_MISSING] * per_turn, "repeat": turns}],
        "final_text": "Gave up.",
        **extra,
    }


# -- the specification's fixtures ----------------------------------------------------


def test_typed_failing_tool_fails_with_its_frozen_type(box: Box) -> None:
    scenario = box.scenario({"turns": [{"calls": [READ_MISSING]}], "final_text": "No file."})
    client, [response], sid = run(prompt_once(box, mode="shadow", scenario=scenario))

    assert client.final_statuses() == {"call-p0-t0-0": "failed"}
    assert response.stop_reason == "end_turn"
    assert batches(response) == [
        {
            "batch": 1,
            "mode": "shadow",
            "decision": "tracked",
            "reason": None,
            "phaseBefore": "idle",
            "phaseAfter": "tracking",
            "failureCount": 1,
            "batchCount": 1,
            "reliableInput": True,
        }
    ]
    [result] = [p for m in box.history(sid) for p in m.parts if p.kind == "function_response"]
    assert (result.status, result.error_type) == ("error", "file_not_found")
    assert client.agent_texts() == ["No file."]


@pytest.mark.parametrize("answer", ["reject", "cancel"])
def test_permission_refusal_is_a_cancellation_that_resets(box: Box, answer: str) -> None:
    scenario = box.scenario(
        {
            "turns": [
                {"calls": [READ_MISSING] * 4},
                {"calls": [{"tool": "write_file", "args": {"path": "a.txt", "content": "x"}}]},
            ]
        }
    )
    client = RecordingClient(permission=lambda _call: answer)  # type: ignore[arg-type,return-value]
    client, [response], sid = run(
        prompt_once(box, mode="enforce", scenario=scenario, client=client)
    )

    assert [r.title for r in client.permission_requests] == ["Write a.txt"]
    assert client.final_statuses()["call-p0-t1-0"] == "failed"  # ACP has no cancelled status
    assert not (box.project / "a.txt").exists()
    rows = batches(response)
    assert [(r["decision"], r["reason"]) for r in rows] == [
        ("tracked", None),
        ("reset", "cancelled"),
    ]
    results = [p for m in box.history(sid) for p in m.parts if p.kind == "function_response"]
    assert results[-1].status == "cancelled"
    assert results[-1].error_type is None


def test_recovery_after_the_reminder(box: Box) -> None:
    client, [response], sid = run(prompt_once(box, mode="warn", scenario="recovery"))

    assert response.stop_reason == "end_turn"
    assert response.field_meta.get("loopType") is None
    assert [(r["decision"], r["reason"]) for r in batches(response)] == [
        ("tracked", None),
        ("warn", None),
        ("none", None),  # the write succeeded: another tool, neither advance nor reset
        ("reset", "success"),  # the candidate's own tool succeeded
    ]
    history = box.history(sid)
    assert system_texts(history) == [REPEATED_TOOL_FAILURE_REMINDER]
    warned = next(m for m in history if REPEATED_TOOL_FAILURE_REMINDER in m.texts("system"))
    kinds = [p.kind for p in warned.parts]
    assert kinds == ["function_response"] * 4 + ["system"]
    assert (box.project / "config.toml").read_text() == "debug = false\n"
    assert client.agent_texts()[-1] == "Created config.toml and read it back."


def test_repeated_failure_stop(box: Box) -> None:
    client, [response], sid = run(prompt_once(box, mode="enforce", scenario="read-loop"))

    assert response.stop_reason == "end_turn"
    assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
    assert response.field_meta["code"] == "LOOP_DETECTED"
    assert decisions(response) == ["tracked", "warn", "stop"]
    assert client.agent_texts().count(SHOWN_STOP) == 1
    assert client.agent_texts()[-1] == SHOWN_STOP  # the sentence; the history has System:
    statuses = client.final_statuses()
    assert len(statuses) == 12 and set(statuses.values()) == {"failed"}
    history = box.history(sid)
    last = history[-1]
    assert last.kind == "tool_results"
    assert [p.kind for p in last.parts] == ["function_response"] * 4 + ["notice"]
    assert last.parts[-1].text == REPEATED_TOOL_FAILURE_STOP_MESSAGE
    # no model stream after the stop: exactly three model turns
    assert sum(1 for m in history if m.role == "model") == 3
    assert system_texts(history) == [REPEATED_TOOL_FAILURE_REMINDER]


def test_concurrent_siblings_settle_before_the_batch_is_reduced(box: Box) -> None:
    client, [response], sid = run(prompt_once(box, mode="enforce", scenario="siblings"))

    assert decisions(response) == ["tracked", "warn", "stop"]
    assert [r["failureCount"] for r in batches(response)] == [4, 8, 12]
    events = client.events
    stop_at = next(i for i, e in enumerate(events) if e.text == SHOWN_STOP)
    shell_done = next(
        i for i, e in enumerate(events) if e.call_id == "call-p0-t2-0" and e.status == "completed"
    )
    reads_done = [
        i
        for i, e in enumerate(events)
        if e.call_id.startswith("call-p0-t2-") and e.status == "failed"
    ]
    # the slow sibling settled last, yet before the stop: never stop mid-batch
    assert max(reads_done) < shell_done < stop_at
    # results go back to the model in the model's call order
    stopped = box.history(sid)[-1]
    assert [p.call_id for p in stopped.parts if p.kind == "function_response"] == [
        f"call-p0-t2-{i}" for i in range(5)
    ]
    assert stopped.parts[0].text.strip() == "build ok"


def test_host_without_drain_method_never_accumulates_a_candidate(box: Box) -> None:
    client = RecordingClient(drain="missing")
    client, [response], sid = run(
        prompt_once(box, mode="enforce", scenario="read-loop", client=client)
    )

    assert response.stop_reason == "end_turn"
    assert "loopType" not in response.field_meta
    rows = batches(response)
    # every boundary is unreliable; only the first reset is reported (one diagnostic)
    assert [(r["decision"], r["reason"], r["reliableInput"]) for r in rows] == [
        ("reset", "unreliable_input", False),
    ] + [("none", None, False)] * 4
    assert response.field_meta["toolFailureGuard"]["drainSupported"] is False
    assert SHOWN_STOP not in client.agent_texts()
    assert system_texts(box.history(sid)) == []  # no reminder: no candidate ever
    assert client.drain_requests == []


def test_drain_timeouts_are_unreliable_then_disable_pulling(box: Box) -> None:
    client = RecordingClient(drain="slow")
    client, [response], _ = run(
        prompt_once(
            box,
            mode="enforce",
            scenario="read-loop",
            client=client,
            extra_args=["--drain-timeout", "0.05"],
        )
    )

    # one request stays outstanding (never cancelled: a late answer is kept); the
    # third timeout disables pulling; from then on every boundary is unreliable
    assert len(client.drain_requests) == 1
    assert [r["reliableInput"] for r in batches(response)] == [False] * 5
    assert response.field_meta["toolFailureGuard"]["drainSupported"] is False
    assert "loopType" not in response.field_meta


def test_channel_prompt_runs_with_the_guard_off_even_under_enforce(box: Box) -> None:
    meta = {"qwen.channel.prompt": True, "session_id": "not-this-session"}
    client, [response], sid = run(prompt_once(box, mode="enforce", scenario="read-loop", meta=meta))

    assert response.stop_reason == "end_turn"
    assert "loopType" not in response.field_meta
    report = response.field_meta["toolFailureGuard"]
    assert report["mode"] == "off"
    assert set(decisions(response)) == {"none"}
    assert system_texts(box.history(sid)) == []
    # off keeps the legacy drain request shape
    assert client.drain_requests and all(
        "todoStopGuardWatchQueuedPrompt" not in r for r in client.drain_requests
    )
    assert set(client.sessions) == {sid}


def test_channel_flag_must_be_true_not_truthy(box: Box) -> None:
    meta = {"qwen.channel.prompt": "true"}
    client, [response], _ = run(prompt_once(box, mode="enforce", scenario="read-loop", meta=meta))

    assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
    assert all(r["todoStopGuardWatchQueuedPrompt"] is True for r in client.drain_requests)


def sibling_order_free(client: RecordingClient) -> tuple[list[str], dict[str, list[str]]]:
    """The transcript up to how concurrent siblings' updates interleave.

    Every line in order, except that a tool call's lines are kept per call (in
    their own order) and the calls in the order they first appear: siblings of
    one batch run concurrently (argument checks and tools in worker threads), so
    which sibling reports first is the scheduler's, not the guard's.
    """
    order: list[str] = []
    per_call: dict[str, list[str]] = {}
    for event in client.events:
        if event.kind in ("tool_call", "tool_update"):
            if event.call_id not in per_call:
                order.append(f"call {event.call_id}")
                per_call[event.call_id] = []
            per_call[event.call_id].append(event.line())
        else:
            order.append(event.line())
    return order, per_call


def test_shadow_transcript_is_identical_to_off(box: Box) -> None:
    off_client, [off], off_sid = run(prompt_once(box, mode="off", scenario="read-loop"))
    shadow_client, [shadow], shadow_sid = run(prompt_once(box, mode="shadow", scenario="read-loop"))

    assert sibling_order_free(shadow_client) == sibling_order_free(off_client)
    assert shadow.stop_reason == off.stop_reason == "end_turn"
    assert set(decisions(off)) == {"none"}
    assert decisions(shadow)[:3] == ["tracked", "would_warn", "would_stop"]

    def model_view(sid: str) -> list[tuple[str, list[tuple[str, str]]]]:
        return [(m.kind, [(p.kind, p.text) for p in m.parts]) for m in box.history(sid)]

    assert model_view(shadow_sid) == model_view(off_sid)


def test_new_prompt_after_a_stop_gets_a_fresh_guard(box: Box) -> None:
    scenario = box.scenario(
        {
            "prompts": [
                loop_scenario(),
                {"turns": [{"calls": [READ_MISSING] * 4, "repeat": 2}], "final_text": "Hm."},
            ]
        }
    )
    client, [first, second], _ = run(prompt_once(box, mode="enforce", scenario=scenario, prompts=2))

    assert first.field_meta["loopType"] == "repeated_tool_execution_failure"
    assert second.stop_reason == "end_turn"
    assert "loopType" not in second.field_meta
    rows = batches(second)
    assert [(r["decision"], r["phaseBefore"], r["failureCount"]) for r in rows] == [
        ("tracked", "idle", 4),
        ("warn", "tracking", 8),
    ]
    assert client.agent_texts()[-1] == "Hm."
    assert second.field_meta["toolFailureGuard"]["promptId"].endswith("########1")


def test_mid_turn_input_resets_and_joins_the_next_model_message(box: Box) -> None:
    client = RecordingClient(drain_messages={1: ["use the other file"]}, queued_prompt_at=[2])
    client, [response], sid = run(
        prompt_once(box, mode="enforce", scenario="read-loop", client=client)
    )

    assert [(r["decision"], r["reason"]) for r in batches(response)] == [
        ("tracked", None),
        ("reset", "external_input"),
        ("none", None),  # a queued prompt resets; from idle nothing is reported
        ("tracked", None),
        ("warn", None),
    ]
    history = box.history(sid)
    with_input = next(m for m in history if m.texts("queued_input"))
    assert [p.kind for p in with_input.parts] == ["function_response"] * 4 + ["queued_input"]
    assert with_input.parts[-1].text.endswith("use the other file")
    assert "loopType" not in response.field_meta


def test_model_failure_after_the_reminder_ends_the_prompt_with_that_error(box: Box) -> None:
    scenario = box.scenario(loop_scenario(on_reminder=[{"model_error": "upstream rate limit"}]))
    with pytest.raises(RequestError) as caught:
        run(prompt_once(box, mode="enforce", scenario=scenario))

    assert caught.value.code == -32603
    assert "upstream rate limit" in json.dumps(caught.value.data)


def test_cancel_during_execution_is_cancelled_not_error(box: Box) -> None:
    scenario = box.scenario(
        {"turns": [{"calls": [{"tool": "run_shell_command", "args": {"command": "sleep 20"}}]}]}
    )

    async def go() -> tuple[RecordingClient, Any, str]:
        client = RecordingClient()
        async with spawn_guarded_agent(
            client, mode="enforce", state_dir=box.state, home=box.home, scenario=scenario
        ) as conn:
            session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            task = asyncio.create_task(
                conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            )
            await wait_until(lambda: any(e.status == "in_progress" for e in client.events))
            await conn.cancel(session_id=session.session_id)
            response = await asyncio.wait_for(task, 10)
        return client, response, session.session_id

    client, response, sid = run(go())
    assert response.stop_reason == "cancelled"
    [result] = [p for m in box.history(sid) for p in m.parts if p.kind == "function_response"]
    assert result.status == "cancelled"
    assert client.final_statuses() == {"call-p0-t0-0": "failed"}


def test_invalid_params_guard_stops_first_and_latches_its_loop_type(box: Box) -> None:
    bad = {"tool": "read_file", "args": {"file": "x"}}
    scenario = box.scenario({"turns": [{"calls": [bad]}, {"calls": [bad]}, {"calls": [bad]}]})
    client, [response], _ = run(prompt_once(box, mode="enforce", scenario=scenario))

    assert response.field_meta["loopType"] == "invalid_tool_params_stagnation"
    # the guard saw the first two batches only (not_started resets from idle: none)
    assert decisions(response) == ["none", "none"]
    assert len(client.agent_texts()) == 1 and "invalid parameters" in client.agent_texts()[0]


def test_project_env_cannot_raise_the_mode(box: Box) -> None:
    (box.project / ".env").write_text(
        "QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD=enforce\n", encoding="utf-8"
    )
    _, [response], _ = run(prompt_once(box, mode=None, scenario="read-loop"))

    assert response.field_meta["toolFailureGuard"]["mode"] == "shadow"
    assert "loopType" not in response.field_meta


def test_home_env_file_sets_the_mode(box: Box) -> None:
    (box.home / ".env").write_text(
        "export QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD='enforce'\n", encoding="utf-8"
    )
    _, [response], _ = run(prompt_once(box, mode=None, scenario="read-loop"))

    assert response.field_meta["toolFailureGuard"]["mode"] == "enforce"
    assert response.field_meta["loopType"] == "repeated_tool_execution_failure"


def test_bad_scenario_file_is_refused_with_the_key_named(box: Box) -> None:
    import subprocess
    import sys

    scenario = box.scenario({"turns": [{"calls": [{"tool": ""}]}]})
    done = subprocess.run(
        [sys.executable, "-m", "tool_failure_guard", "agent", "--scenario", scenario],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "turns[0].calls[0].tool" in done.stderr


def test_pushed_steering_input_is_delivered_without_a_pull_drain(box: Box) -> None:
    async def go() -> tuple[RecordingClient, Any, Any, list[dict[str, Any]], str]:
        client = RecordingClient(drain="missing")
        async with spawn_guarded_agent(
            client, mode="enforce", state_dir=box.state, home=box.home, scenario="siblings"
        ) as conn:
            init = await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            params = {"sessionId": session.session_id, "prompt": [{"type": "text", "text": "hi"}]}
            outcomes = [await conn.ext_method("session/steering", params)]
            task = asyncio.create_task(
                conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            )
            # push while the third batch runs (its slow shell sibling is in progress)
            await wait_until(lambda: any(e.call_id == "call-p0-t2-0" for e in client.events))
            outcomes.append(await conn.ext_method("session/steering", params))
            response = await task
        return client, init, response, outcomes, session.session_id

    client, init, response, outcomes, sid = run(go())
    assert init.field_meta == {"steering": {"supported": True}}
    assert [o["outcome"] for o in outcomes] == ["promptRequired", "injected"]
    rows = batches(response)
    # no pull drain on this host: every boundary is unreliable, one diagnostic
    assert [(r["decision"], r["reason"], r["reliableInput"]) for r in rows] == [
        ("reset", "unreliable_input", False),
    ] + [("none", None, False)] * 3
    steered = [m for m in box.history(sid) if m.texts("queued_input")]
    assert len(steered) == 1
    assert steered[0].texts("queued_input") == ["[User message received during tool execution]: hi"]
    assert "[User message received during tool execution]: hi" in [
        e.text for e in client.events if e.kind == "user"
    ]


def test_console_telemetry_reports_on_stderr_and_leaves_the_protocol_alone(box: Box) -> None:
    log = box.root / "agent.stderr"

    async def go() -> Any:
        with log.open("w") as stderr:
            async with spawn_guarded_agent(
                RecordingClient(),
                mode="enforce",
                state_dir=box.state,
                home=box.home,
                extra_args=["--telemetry", "console"],
                stderr=stderr,
            ) as conn:
                session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
                return await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])

    response = run(go())
    assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
    text = log.read_text()
    assert text.count(f'"event_name": "{GUARD_LOG_EVENT}"') == 3  # tracked, warned, stopped
    assert text.count(f'"event_name": "{LOOP_DETECTED_EVENT}"') == 1


def test_tool_call_cap_is_consulted_after_the_guard(box: Box) -> None:
    client, [shadow], sid = run(
        # 8: batch 2 (calls 5-8) fits the cap whole; a batch past it would skip its last
        # calls (not started), which resets the guard (tests/test_tool_call_cap_batch.py)
        prompt_once(box, mode="shadow", scenario="read-loop", extra_args=["--max-tool-calls", "8"])
    )
    assert shadow.stop_reason == "max_turn_requests"
    assert shadow.field_meta["loopType"] == "turn_tool_call_cap"
    assert decisions(shadow) == ["tracked", "would_warn"]  # the guard ran before the cap
    assert "tool-call limit" in client.agent_texts()[-1]
    assert box.history(sid)[-1].parts[-1].kind == "notice"

    _, [enforce], _ = run(
        prompt_once(
            box, mode="enforce", scenario="read-loop", extra_args=["--max-tool-calls", "12"]
        )
    )
    # both would stop batch 3: the guard comes first and latches its loop type
    assert enforce.field_meta["loopType"] == "repeated_tool_execution_failure"
    assert enforce.stop_reason == "end_turn"


def test_project_env_cannot_set_the_tool_call_cap(box: Box) -> None:
    (box.project / ".env").write_text("TOOL_FAILURE_GUARD_MAX_TOOL_CALLS=4\n", encoding="utf-8")
    _, [response], _ = run(prompt_once(box, mode="shadow", scenario="read-loop"))
    assert "loopType" not in response.field_meta  # the cap stayed at 100
    assert len(decisions(response)) == 5


def test_home_env_sets_the_tool_call_cap(box: Box) -> None:
    (box.home / ".env").write_text("TOOL_FAILURE_GUARD_MAX_TOOL_CALLS=4\n", encoding="utf-8")
    _, [response], _ = run(prompt_once(box, mode="shadow", scenario="read-loop"))
    assert response.field_meta["loopType"] == "turn_tool_call_cap"
    assert decisions(response) == ["tracked"]


@pytest.mark.parametrize("bad", ["nan", "inf", "0.5", "0", "-3", "lots"])
def test_a_bad_operator_setting_falls_back_to_the_default_and_never_breaks_a_session(
    box: Box, bad: str
) -> None:
    (box.home / ".env").write_text(
        f"TOOL_FAILURE_GUARD_MAX_TOOL_CALLS={bad}\nTOOL_FAILURE_GUARD_SHELL_TIMEOUT={bad}\n",
        encoding="utf-8",
    )
    _, [response], _ = run(prompt_once(box, mode="enforce", scenario="read-loop"))
    # the default cap (100) leaves room for the guard's own stop
    assert response.field_meta["loopType"] == "repeated_tool_execution_failure"


def test_shell_loop_is_stopped_although_reads_succeed_beside_it(box: Box) -> None:
    client, [response], sid = run(prompt_once(box, mode="enforce", scenario="shell-loop"))

    rows = batches(response)
    assert [(r["decision"], r["failureCount"]) for r in rows] == [
        ("none", 0),  # the write succeeded: no candidate
        ("tracked", 2),
        ("tracked", 4),
        ("tracked", 6),
        ("warn", 8),
        ("stop", 10),
    ]
    assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
    assert (box.project / "notes.txt").read_text() == "run the tests\n"
    last = box.history(sid)[-1]
    assert [(p.name, p.status) for p in last.parts if p.kind == "function_response"] == [
        ("run_shell_command", "error"),
        ("run_shell_command", "error"),
        ("read_file", "success"),
    ]
    assert [r.title for r in client.permission_requests][:2] == ["Write notes.txt", "Run exit 3"]


def test_cancel_during_the_drain_wins_over_the_stop(box: Box) -> None:
    class CancelWhileDraining(RecordingClient):
        """A host whose user presses cancel while it answers the third drain."""

        conn: Any = None
        session_id = ""

        async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
            if len(self.drain_requests) == 2:
                await self.conn.cancel(session_id=self.session_id)
                await asyncio.sleep(0.2)
            return await super().ext_method(method, params)

    async def go() -> tuple[CancelWhileDraining, Any, str]:
        client = CancelWhileDraining()
        async with spawn_guarded_agent(
            client, mode="enforce", state_dir=box.state, home=box.home, scenario="read-loop"
        ) as conn:
            client.conn = conn
            session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            client.session_id = session.session_id
            response = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
        return client, response, session.session_id

    client, response, sid = run(go())
    assert response.stop_reason == "cancelled"
    # the third batch would have stopped; the guard never saw it
    assert decisions(response) == ["tracked", "warn"]
    assert "loopType" not in response.field_meta
    assert SHOWN_STOP not in client.agent_texts()
    history = box.history(sid)
    assert history[-1].kind == "tool_results"
    assert [p.kind for p in history[-1].parts] == ["function_response"] * 4


def test_shadow_continues_exactly_like_off_when_a_full_prompt_is_queued(box: Box) -> None:
    class QueuedPromptHost(RecordingClient):
        """A host holding a queued full prompt; it says so only when asked to watch."""

        async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
            self.drain_requests.append(dict(params))
            answer: dict[str, Any] = {"messages": []}
            if params.get("todoStopGuardWatchQueuedPrompt"):
                answer["hasQueuedPrompt"] = True
            return answer

    scenario = box.scenario(
        {
            "turns": [
                {
                    "text": "plan",
                    "todos": [{"content": "fix it", "status": "pending"}],
                    "calls": [READ_MISSING],
                },
                {"text": "paused"},
            ],
            "final_text": "continued",
        }
    )
    transcripts = {}
    for mode in ("off", "shadow"):
        client = QueuedPromptHost()
        run(prompt_once(box, mode=mode, scenario=scenario, client=client))
        transcripts[mode] = client.agent_texts()
        watched = [bool(r.get("todoStopGuardWatchQueuedPrompt")) for r in client.drain_requests]
        assert watched == [mode == "shadow"]
    assert transcripts["shadow"] == transcripts["off"]
    assert transcripts["off"][:2] == ["plan", "paused"]
    assert "continued" in transcripts["off"]
