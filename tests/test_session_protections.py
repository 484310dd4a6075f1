"""The protections beside the guard: each one's rule, their order, the loop-type latch."""

from __future__ import annotations

import pytest

from tool_failure_guard.core.protections import (
    DEFAULT_TOOL_CALL_CAP,
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_PROVIDER_DUPLICATE,
    LOOP_REPEATED_TOOL_FAILURE,
    LOOP_TOOL_CALL_CAP,
    LOOP_TYPES_IN_ORDER,
    CallIdDeduplicator,
    InvalidParamGuard,
    LoopLatch,
    PromptProtections,
    ToolCallCap,
)
from tool_failure_guard.session.tools.executor import CallOutcome, FunctionCall


def call(call_id: str, name: str = "read_file") -> FunctionCall:
    return FunctionCall(call_id=call_id, name=name, args={"path": "x"})


def not_started(name: str = "read_file", error_type: str = "invalid_tool_params") -> CallOutcome:
    return CallOutcome(
        call_id="c",
        name=name,
        policy_tool_name=name,
        tool_type="native",
        terminal_status="error",
        execution_status="not_started",
        execution_error_type=error_type,
        error_type=error_type,
    )


def test_order_is_most_specific_first() -> None:
    assert LOOP_TYPES_IN_ORDER == (
        "global_tool_call_duplicate",
        "invalid_tool_params_stagnation",
        "repeated_tool_execution_failure",
        "turn_tool_call_cap",
    )


def test_same_batch_duplicates_are_dropped_keeping_the_first() -> None:
    dedup = CallIdDeduplicator()
    admission = dedup.admit([call("a"), call("b"), call("a", "list_directory")])
    assert [c.call_id for c in admission.calls] == ["a", "b"]
    assert admission.calls[0].name == "read_file"
    assert admission.dropped == 1
    assert admission.provider_duplicates == frozenset()


def test_answered_ids_become_provider_duplicates_never_executed() -> None:
    dedup = CallIdDeduplicator(["a"])
    admission = dedup.admit([call("a"), call("b")])
    assert [c.call_id for c in admission.calls] == ["a", "b"]
    assert admission.provider_duplicates == {"a"}
    assert [c.call_id for c in admission.executable] == ["b"]


def test_calls_without_an_id_get_a_generated_one() -> None:
    admission = CallIdDeduplicator().admit([call(""), call("")])
    ids = [c.call_id for c in admission.calls]
    assert len(set(ids)) == 2 and all(i.startswith("generated-") for i in ids)


def test_a_provider_that_keeps_replaying_stops_on_the_third_batch() -> None:
    protections = PromptProtections(CallIdDeduplicator(["a"]), DEFAULT_TOOL_CALL_CAP)
    results = []
    for _ in range(3):
        admission = protections.admit([call("a")])
        results.append(protections.before_guard(admission, []))
    assert results == [None, None, LOOP_PROVIDER_DUPLICATE]


def test_invalid_param_guard_counts_per_tool_name() -> None:
    guard = InvalidParamGuard()
    assert not guard.observe([not_started("read_file"), not_started("write_file")])
    assert not guard.observe([not_started("read_file", "tool_not_registered")])
    assert guard.observe([not_started("read_file")])


def test_invalid_param_guard_ignores_other_not_started_failures() -> None:
    guard = InvalidParamGuard()
    assert not guard.observe([not_started(error_type="permission_request_failed")] * 5)


def test_tool_call_cap_stops_at_the_cap() -> None:
    cap = ToolCallCap(5)
    assert not cap.observe(4)
    assert cap.observe(1)
    with pytest.raises(ValueError, match="at least 1"):
        ToolCallCap(0)


def test_replay_wins_over_invalid_params_in_the_same_batch() -> None:
    protections = PromptProtections(CallIdDeduplicator(["a"]), DEFAULT_TOOL_CALL_CAP)
    for _ in range(2):
        protections.before_guard(protections.admit([call("a")]), [not_started()])
    admission = protections.admit([call("a")])
    assert protections.before_guard(admission, [not_started()]) == LOOP_PROVIDER_DUPLICATE


def test_the_cap_is_consulted_after_the_guard() -> None:
    protections = PromptProtections(CallIdDeduplicator(), 2)
    assert protections.after_guard(1) is None
    assert protections.after_guard(1) == LOOP_TOOL_CALL_CAP


def test_loop_latch_records_only_the_first_protection() -> None:
    latch = LoopLatch()
    assert latch.record(LOOP_INVALID_TOOL_PARAMS)
    assert not latch.record(LOOP_REPEATED_TOOL_FAILURE)
    assert not latch.record(LOOP_TOOL_CALL_CAP)
    assert latch.loop_type == LOOP_INVALID_TOOL_PARAMS
    with pytest.raises(ValueError, match="unknown loop type"):
        LoopLatch().record("made_up")
