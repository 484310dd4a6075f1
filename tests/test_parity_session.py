"""Differential: our agent and the released original, session by session, over ACP stdio.

Both agents (ours: ``tool-failure-guard agent --model openai:...``; the original: Qwen
Code 0.24.4, ``tests/qwen_original.py``) run the same episodes against one scripted
model (``tests/parity_session.py``) in every mode, on a host with the drain under the
bare name; in ``enforce`` also on hosts with only the ``_`` name, with neither, with a
queued prompt and with input typed mid-turn.  Compared: the calls executed, the batch
whose next request carries the reminder, its text, role and place, the batch after which
the prompt stops, that no model request follows a stop, what the person sees, and the
guard decisions each recorded in its telemetry.  Every difference that stays is listed
in ``docs/parity.md`` and asserted here as what it is.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from acp import RequestError
from openai_server import FakeOpenAI, serve
from parity_mapping import TELEMETRY_DECISION, shared_guard_fields
from parity_session import EPISODES, Group, Model, SessionRun, run_all
from qwen_original import DRAIN_BARE, DRAIN_UNDERSCORE, HostPlan, require_qwen
from qwen_records import totals_by

from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)
from tool_failure_guard.session.pipeline.drain import QUEUED_INPUT_PREFIX
from tool_failure_guard.telemetry.names import (
    GUARD_COUNTER,
    GUARD_LOG_EVENT,
    LOOP_DETECTED_EVENT,
    TOOL_CALL_COUNTER,
)

MODES = ("off", "shadow", "warn", "enforce")
TYPED = "please look somewhere else"
#: Host variants, all in enforce, all on the stubborn episode: label -> the host's drain
#: names and plan.  Ours learns the drain name once per connection, so a host kind other
#: than the bare name gets a process of its own; the original keeps a failed drain per
#: session, so its enforce process serves them all (``HostPlan.drain``).
VARIANTS = {
    "stubborn.queued": ("bare", HostPlan(queued_prompt_at=frozenset({1}))),
    "stubborn.typed": ("bare", HostPlan(typed_input={1: [TYPED]})),
    "stubborn.underscore": ("underscore", HostPlan()),
    "stubborn.none": ("none", HostPlan()),
}
_EPISODE_SESSIONS = tuple((episode, episode, HostPlan()) for episode in EPISODES)
#: In off the guard does nothing: a failing loop of each tool and the control suffice.
OFF_EPISODES = ("stubborn", "shell", "control")
_BARE_VARIANTS = tuple(
    (label, "stubborn", plan) for label, (drain, plan) in VARIANTS.items() if drain == "bare"
)
GROUPS = [Group("off", "off", "bare", tuple(s for s in _EPISODE_SESSIONS if s[0] in OFF_EPISODES))]
GROUPS += [Group(mode, mode, "bare", _EPISODE_SESSIONS) for mode in ("shadow", "warn")]
GROUPS += [
    Group(
        "enforce",
        "enforce",
        "bare",
        _EPISODE_SESSIONS
        + _BARE_VARIANTS
        + tuple(
            (label, "stubborn", attrs.evolve(plan, drain=drain))  # type: ignore[arg-type]
            for label, (drain, plan) in VARIANTS.items()
            if drain != "bare"
        ),
        agents=("original",),
    ),
    Group("enforce", "enforce", "bare", _EPISODE_SESSIONS + _BARE_VARIANTS, agents=("ours",)),
]
GROUPS += [
    Group(f"enforce-{drain}", "enforce", drain, ((label, "stubborn", plan),), agents=("ours",))
    for label, (drain, plan) in VARIANTS.items()
    if drain != "bare"
]
CASES = [
    (mode, episode)
    for mode in MODES
    for episode in EPISODES
    if mode != "off" or episode in OFF_EPISODES
] + [("enforce", label) for label in VARIANTS]
#: The cases where the two must behave alike (the underscore host is a listed difference).
ALIKE = [case for case in CASES if case[1] != "stubborn.underscore"]
LOOP_DATA = {
    "code": "LOOP_DETECTED",
    "errorKind": "loop_detected",
    "loopType": "repeated_tool_execution_failure",
}
BARE_STOP_MESSAGE = REPEATED_TOOL_FAILURE_STOP_MESSAGE.removeprefix("System: ")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Any, SessionRun]]:
    require_qwen()
    model = Model(tmp_path_factory.mktemp("parity"))
    with serve(FakeOpenAI(model)) as fake:
        found, wall = asyncio.run(asyncio.wait_for(run_all(model, GROUPS, fake.base_url), 900))
    processes = sum(len(g.agents) for g in GROUPS)
    print(f"\nparity sessions: {len(found)} sessions in {processes} processes, {wall:.1f} s")
    assert model.untagged == [], "a model request carried no episode tag"
    yield found


def pair(runs: dict[Any, SessionRun], mode: str, label: str) -> tuple[SessionRun, SessionRun]:
    return runs["ours", mode, label], runs["original", mode, label]


def stopped(run: SessionRun) -> bool:
    return bool(run.loop_records)


def executed(run: SessionRun) -> list[tuple[str, str]]:
    """(call id, final status) of every call the agent reported, in start order."""
    statuses = run.host.final_statuses(run.session_id)
    return [(i, statuses.get(i, "")) for i in run.host.tool_call_ids(run.session_id)]


def texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, list):
        return [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    return [str(content or "")]


def carrying(run: SessionRun, text: str) -> list[tuple[int, int, str, str]]:
    """(request, message index, role, previous role) of each message holding ``text``."""
    found = []
    for number, body in enumerate(run.requests):
        messages = body["messages"]
        for index, message in enumerate(messages):
            if any(text in t for t in texts(message)):
                found.append((number, index, message["role"], messages[index - 1]["role"]))
    return found


def first_carrier(run: SessionRun, text: str) -> list[tuple[int, int, str, str]]:
    """:func:`carrying`, only the request each such message first appeared in."""
    seen, out = set(), []
    for entry in carrying(run, text):
        if entry[1] not in seen:
            seen.add(entry[1])
            out.append(entry)
    return out


@pytest.mark.parametrize(("mode", "label"), ALIKE)
def test_the_same_calls_run_and_the_same_requests_go_out(
    runs: dict[Any, SessionRun], mode: str, label: str
) -> None:
    ours, original = pair(runs, mode, label)
    assert executed(ours) == executed(original)
    assert len(ours.requests) == len(original.requests)
    assert stopped(ours) == stopped(original)
    if stopped(ours):
        # No model request after the stop: every request was answered with a batch.
        batches = {call_id.split("_")[0] for call_id, _ in executed(original)}
        assert len(original.requests) == len(batches)


@pytest.mark.parametrize(("mode", "label"), ALIKE)
def test_the_reminder_goes_out_after_the_same_batch_with_the_same_text(
    runs: dict[Any, SessionRun], mode: str, label: str
) -> None:
    ours, original = pair(runs, mode, label)
    mine = first_carrier(ours, REPEATED_TOOL_FAILURE_REMINDER)
    theirs = first_carrier(original, REPEATED_TOOL_FAILURE_REMINDER)
    assert [m[0] for m in mine] == [t[0] for t in theirs]
    for run in (ours, original):
        for number, index, _, _ in carrying(run, REPEATED_TOOL_FAILURE_REMINDER):
            message = run.requests[number]["messages"][index]
            assert REPEATED_TOOL_FAILURE_REMINDER in texts(message)
    # docs/parity.md: ours is a system message (the seed's "system context"), the
    # original's a user message; both come right after the batch's tool results.
    assert [m[2:] for m in mine] == [("system", "tool")] * len(mine)
    assert [t[2:] for t in theirs] == [("user", "tool")] * len(theirs)


@pytest.mark.parametrize(("mode", "label"), ALIKE)
def test_the_person_sees_the_same_turn_and_the_stop_in_each_ones_way(
    runs: dict[Any, SessionRun], mode: str, label: str
) -> None:
    ours, original = pair(runs, mode, label)
    model_text = original.host.agent_text(original.session_id)
    if not stopped(original):
        assert not isinstance(original.outcome, RequestError)
        assert ours.outcome.stop_reason == original.outcome.stop_reason == "end_turn"
        assert ours.host.agent_text(ours.session_id) == model_text
        return
    # docs/parity.md: the original ends the prompt with JSON-RPC error -32603 and says
    # nothing in the session; ours answers the prompt, says the stop text without its
    # "System: " prefix, and puts the same codes in the response's _meta.
    assert isinstance(original.outcome, RequestError)
    assert original.outcome.code == -32603 and original.outcome.data == LOOP_DATA
    assert BARE_STOP_MESSAGE not in model_text
    assert ours.outcome.stop_reason == "end_turn"
    assert {k: ours.outcome.field_meta.get(k) for k in LOOP_DATA} == LOOP_DATA
    assert ours.host.agent_text(ours.session_id) == model_text + BARE_STOP_MESSAGE


@pytest.mark.parametrize(("mode", "label"), ALIKE)
def test_the_guard_records_the_same_decisions(
    runs: dict[Any, SessionRun], mode: str, label: str
) -> None:
    ours, original = pair(runs, mode, label)
    assert [shared_guard_fields(r) for r in ours.guard_records] == [
        shared_guard_fields(r) for r in original.guard_records
    ]
    assert [r["loop_type"] for r in ours.loop_records] == [
        r["loop_type"] for r in original.loop_records
    ]
    # The original's --debug lines say the same as its telemetry.
    assert [TELEMETRY_DECISION[d["decision"]] for d in original.debug] == [
        r["decision"] for r in original.guard_records
    ]


@pytest.mark.parametrize("mode", ("shadow", "warn", "enforce"))
def test_both_write_the_guard_and_loop_records_and_counters_under_the_same_names(
    runs: dict[Any, SessionRun], mode: str
) -> None:
    # Not mapped: the names each agent wrote, compared as they are (docs/telemetry.md).
    ours, original = pair(runs, mode, "stubborn")
    shared = {GUARD_LOG_EVENT} | ({LOOP_DETECTED_EVENT} if mode == "enforce" else set())
    assert ours.signals.events & original.signals.events == shared
    assert set(ours.signals.counters) & set(original.signals.counters) == {
        GUARD_COUNTER,
        TOOL_CALL_COUNTER,
    }
    # ... with the original's log bodies (its decisions' words; the guard's loop type)
    for event in shared:
        assert ours.signals.bodies(event) == original.signals.bodies(event) != frozenset()


@pytest.mark.parametrize("mode", ("off", "shadow", "warn"))
def test_the_counters_count_the_same_transitions_and_calls_with_the_same_labels(
    runs: dict[Any, SessionRun], mode: str
) -> None:
    # These groups serve the same sessions to both agents: the counters must agree.
    ours, original = pair(runs, mode, "control")
    mine, theirs = ours.signals.counters, original.signals.counters
    assert mine.get(GUARD_COUNTER, {}) == theirs.get(GUARD_COUNTER, {})
    assert (mode == "off") == (GUARD_COUNTER not in mine)
    # The execution counter: one per settled call by frozen execution status and tool
    # type; ours adds the terminal status as a label (a listed difference).
    by = ("execution_status", "tool_type")
    assert totals_by(mine[TOOL_CALL_COUNTER], *by) == totals_by(theirs[TOOL_CALL_COUNTER], *by)
    assert ("error", "native") in totals_by(mine[TOOL_CALL_COUNTER], *by)
    keys = {k for labels in mine[TOOL_CALL_COUNTER] for k, _ in labels}
    their_keys = {k for labels in theirs[TOOL_CALL_COUNTER] for k, _ in labels}
    assert keys - their_keys == {"terminal_status"} and their_keys <= keys


@pytest.mark.parametrize("mode", MODES)
def test_both_drain_under_the_bare_name_with_the_same_request(
    runs: dict[Any, SessionRun], mode: str
) -> None:
    for label in EPISODES if mode != "off" else OFF_EPISODES:
        ours, original = pair(runs, mode, label)
        for run in (ours, original):
            assert {r.method for r in run.host.drains_of(run.session_id)} <= {DRAIN_BARE}
            assert [r for r in run.host.refused if r.session_id == run.session_id] == []
        assert [sorted(r.params) for r in ours.host.drains_of(ours.session_id)] == [
            sorted(r.params) for r in original.host.drains_of(original.session_id)
        ]
        # off keeps the legacy request shape; the other modes ask about a queued prompt.
        for request in original.host.drains_of(original.session_id):
            watched = request.params.get("todoStopGuardWatchQueuedPrompt")
            assert watched is (None if mode == "off" else True)


def test_on_a_host_without_the_drain_both_reset_once_and_never_stop(
    runs: dict[Any, SessionRun],
) -> None:
    ours, original = pair(runs, "enforce", "stubborn.none")
    assert [r.method for r in ours.host.refused] == [DRAIN_BARE, DRAIN_UNDERSCORE]
    assert [r.method for r in original.host.refused if r.session_id == original.session_id] == [
        DRAIN_BARE
    ]
    for run in (ours, original):
        assert run.host.drains_of(run.session_id) == []
        assert [(r["decision"], r["reset_reason"]) for r in run.guard_records] == [
            ("reset", "unreliable_input")
        ]


def test_on_a_host_with_only_the_underscore_name_ours_falls_back_and_the_original_does_not(
    runs: dict[Any, SessionRun],
) -> None:
    """docs/parity.md: ours learns the ``_`` name once per connection; 0.24.4 has no drain."""
    ours, original = pair(runs, "enforce", "stubborn.underscore")
    assert [r.method for r in ours.host.refused] == [DRAIN_BARE]
    assert {r.method for r in ours.host.drain_requests} == {DRAIN_UNDERSCORE}
    assert [r.method for r in original.host.refused if r.session_id == original.session_id] == [
        DRAIN_BARE
    ]
    assert original.host.drains_of(original.session_id) == []
    assert [r["decision"] for r in ours.guard_records] == ["tracked", "warned", "stopped"]
    assert [(r["decision"], r["reset_reason"]) for r in original.guard_records] == [
        ("reset", "unreliable_input")
    ]
    assert len(executed(original)) == 4 * EPISODES["stubborn"][0]


def test_typed_input_reaches_the_next_request_in_the_same_place(
    runs: dict[Any, SessionRun],
) -> None:
    ours, original = pair(runs, "enforce", "stubborn.typed")
    typed = QUEUED_INPUT_PREFIX + TYPED
    mine, theirs = first_carrier(ours, typed), first_carrier(original, typed)
    assert [(m[0], m[2], m[3]) for m in mine] == [(t[0], t[2], t[3]) for t in theirs]
    assert [m[2] for m in mine] == ["user"]


def test_the_cases_cover_every_decision(runs: dict[Any, SessionRun]) -> None:
    decisions = {r["decision"] for run in runs.values() for r in run.guard_records}
    assert decisions == set(TELEMETRY_DECISION.values())
    assert {(a, m, lbl) for a, (m, lbl) in itertools.product(("ours", "original"), CASES)} == set(
        runs
    )
