"""PromptProtection: admission, settlement by call id, and the action per settled batch."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tool_failure_guard.core import (
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_PROVIDER_DUPLICATE,
    LOOP_REPEATED_TOOL_FAILURE,
    LOOP_TOOL_CALL_CAP,
    STOP_NOTICES,
    Action,
    BatchSettlement,
    CallIdDeduplicator,
    CallOutcome,
    Continue,
    FunctionCall,
    PromptCancelled,
    PromptProtection,
    Stop,
    outcomes,
    settle_all,
)
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    DecisionKind,
    GuardMode,
    InputBoundary,
    ResetReason,
)

_ids = iter(range(10_000))


def calls(n: int, name: str = "read_file") -> list[FunctionCall]:
    return [
        FunctionCall(call_id=f"c{next(_ids)}", name=name, args={"path": "missing.txt"})
        for _ in range(n)
    ]


def failing(call: FunctionCall) -> CallOutcome:
    return outcomes.raised(call, FileNotFoundError(2, "no such file"))


def run_batch(
    protection: PromptProtection,
    batch_calls: Sequence[FunctionCall],
    settle=failing,  # type: ignore[no-untyped-def]
    boundary: InputBoundary | None = None,
) -> Action:
    admission = protection.admit(batch_calls)
    batch = protection.open_batch(admission)
    for call in admission.calls:
        batch.settle(settle(call))
    if boundary is None:
        return protection.after_batch(batch)
    return protection.after_batch(batch, boundary)


def test_warn_adds_the_reminder_once_per_streak_and_never_stops() -> None:
    protection = PromptProtection(GuardMode.WARN)
    actions = [run_batch(protection, calls(4)) for _ in range(5)]
    assert all(isinstance(a, Continue) for a in actions)
    texts = [a.system_texts for a in actions if isinstance(a, Continue)]
    assert texts == [(), (REPEATED_TOOL_FAILURE_REMINDER,), (), (), ()]
    assert [a.decision.kind if a.decision else None for a in actions][:2] == [
        DecisionKind.TRACKED,
        DecisionKind.WARN,
    ]


def test_enforce_stops_on_the_batch_after_the_reminder_and_refuses_more_batches() -> None:
    protection = PromptProtection(GuardMode.ENFORCE)
    first, second, third = (run_batch(protection, calls(4)) for _ in range(3))
    assert isinstance(first, Continue) and first.system_texts == ()
    assert isinstance(second, Continue) and second.reminded
    assert isinstance(third, Stop)
    assert (third.loop_type, third.notice, third.first) == (
        LOOP_REPEATED_TOOL_FAILURE,
        REPEATED_TOOL_FAILURE_STOP_MESSAGE,
        True,
    )
    assert third.decision is not None and third.decision.kind is DecisionKind.STOP
    assert protection.loop_type == LOOP_REPEATED_TOOL_FAILURE and protection.stopped is third
    with pytest.raises(RuntimeError, match="no further model request"):
        protection.admit(calls(1))


@pytest.mark.parametrize("mode", [GuardMode.OFF, GuardMode.SHADOW])
def test_off_and_shadow_never_add_anything_or_stop(mode: GuardMode) -> None:
    protection = PromptProtection(mode)
    actions = [run_batch(protection, calls(4)) for _ in range(6)]
    assert all(isinstance(a, Continue) and a.system_texts == () for a in actions)
    kinds = {a.decision.kind for a in actions if a.decision is not None}
    if mode is GuardMode.SHADOW:
        assert DecisionKind.WOULD_WARN in kinds and DecisionKind.WOULD_STOP in kinds
    else:
        assert kinds == {DecisionKind.NONE}


def test_a_call_the_host_never_saw_makes_the_receipt_incomplete() -> None:
    protection = PromptProtection(GuardMode.ENFORCE)
    run_batch(protection, calls(4))
    admission = protection.admit(calls(4))
    batch = protection.open_batch(admission)
    for call in admission.calls[:3]:  # the fourth outcome was never seen
        batch.settle(failing(call))
    assert [c.call_id for c in batch.missing()] == [admission.calls[3].call_id]
    action = protection.after_batch(batch)
    assert not batch.receipt().complete
    assert isinstance(action, Continue) and action.decision is not None
    assert action.decision.reason is ResetReason.INCOMPLETE
    assert batch.outcomes()[3] is None


def test_a_late_or_foreign_outcome_is_refused() -> None:
    protection = PromptProtection(GuardMode.WARN)
    admission = protection.admit(calls(1))
    batch = BatchSettlement(admission)
    (call,) = admission.calls
    assert batch.settle(failing(call)) is not None
    assert batch.settle(outcomes.succeeded(call)) is None  # a second outcome: dropped
    assert batch.dropped_frames == 1 and batch.outcomes()[0] is not None
    assert batch.outcomes()[0].terminal_status == "error"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="not one of this batch's calls"):
        batch.settle(outcomes.succeeded(FunctionCall(call_id="other", name="read_file")))


def test_a_cancelled_batch_skips_the_guard() -> None:
    protection = PromptProtection(GuardMode.ENFORCE)
    admission = protection.admit(calls(4))
    batch = protection.open_batch(admission)
    for call in admission.calls:
        batch.settle(outcomes.cancelled_during(call))
    action = protection.after_batch(batch, cancelled=True)
    assert isinstance(action, PromptCancelled) and action.decision is None
    assert protection.guard.batch_count == 0


def test_invalid_arguments_stop_as_their_own_protection_never_as_the_guard() -> None:
    protection = PromptProtection(GuardMode.ENFORCE)
    actions = [
        run_batch(protection, calls(1), lambda c: outcomes.invalid_arguments(c, "bad"))
        for _ in range(3)
    ]
    assert isinstance(actions[-1], Stop) and actions[-1].loop_type == LOOP_INVALID_TOOL_PARAMS
    assert actions[-1].notice == STOP_NOTICES[LOOP_INVALID_TOOL_PARAMS]
    assert actions[-1].decision is None  # the guard was not consulted for that batch
    assert protection.guard.failure_count == 0


def test_replayed_answered_ids_are_provider_duplicates_and_stop_on_the_third_replay() -> None:
    protection = PromptProtection(GuardMode.ENFORCE)  # its own dedup: it marks answers itself
    answered = calls(1)
    run_batch(protection, answered, outcomes.succeeded)
    assert protection.protections.dedup.is_answered(answered[0].call_id)
    actions = []
    for _ in range(3):
        admission = protection.admit(answered)
        assert admission.executable == ()
        batch = protection.open_batch(admission)
        batch.settle(outcomes.provider_duplicate(admission.calls[0], tool="read_file"))
        assert batch.receipt().observations[0].provider_duplicate
        actions.append(protection.after_batch(batch))
    assert isinstance(actions[-1], Stop) and actions[-1].loop_type == LOOP_PROVIDER_DUPLICATE


def test_a_shared_dedup_is_marked_by_its_owner_and_spans_runs() -> None:
    dedup = CallIdDeduplicator()
    first = PromptProtection(GuardMode.WARN, dedup=dedup)
    answered = calls(1)
    run_batch(first, answered, outcomes.succeeded)
    assert not dedup.is_answered(answered[0].call_id)  # the host marks when it records
    dedup.mark_answered([answered[0].call_id])
    second = PromptProtection(GuardMode.WARN, dedup=dedup)  # the conversation's next run
    assert second.admit(answered).provider_duplicates == {answered[0].call_id}


def test_the_tool_call_cap_stops_after_the_guard() -> None:
    protection = PromptProtection(GuardMode.ENFORCE, tool_call_cap=3)
    first = run_batch(protection, calls(2), outcomes.succeeded)
    second = run_batch(protection, calls(2), outcomes.succeeded)
    assert isinstance(first, Continue)
    assert isinstance(second, Stop) and second.loop_type == LOOP_TOOL_CALL_CAP
    assert second.decision is not None  # the guard reduced the batch first


def test_external_input_at_the_boundary_resets_the_streak() -> None:
    protection = PromptProtection(GuardMode.ENFORCE)
    run_batch(protection, calls(4))
    action = run_batch(protection, calls(4), boundary=InputBoundary(has_external_input=True))
    assert isinstance(action, Continue) and action.decision is not None
    assert action.decision.reason is ResetReason.EXTERNAL_INPUT and action.system_texts == ()


def test_the_two_step_drive_needs_its_boundary_before_the_next_batch() -> None:
    protection = PromptProtection(GuardMode.WARN)
    admission = protection.admit(calls(1))
    batch = protection.open_batch(admission)
    batch.settle(failing(admission.calls[0]))
    assert protection.settled(batch) is None
    with pytest.raises(RuntimeError, match="input boundary"):
        protection.admit(calls(1))
    action = protection.at_boundary(InputBoundary())
    assert isinstance(action, Continue) and action.guard_step is not None
    step = action.guard_step
    assert (step.batch_ordinal, step.failure_count_before, step.failure_count) == (1, 0, 1)
    with pytest.raises(RuntimeError, match="call settled"):
        protection.at_boundary(InputBoundary())


def test_the_mode_must_be_a_guard_mode() -> None:
    with pytest.raises(TypeError, match="mode must be a GuardMode"):
        PromptProtection("warn")  # type: ignore[arg-type]


def test_settle_all_settles_in_any_order_and_keeps_the_models_order() -> None:
    admission = PromptProtection(GuardMode.WARN).admit(calls(3))
    first, second, third = admission.calls
    batch = settle_all(admission, [failing(third), outcomes.succeeded(first)])
    assert [o.call_id if o else None for o in batch.outcomes()] == [
        first.call_id,
        None,
        third.call_id,
    ]
    assert batch.missing() == (second,) and not batch.is_complete()
    receipt = batch.receipt()
    assert [o.call_id for o in receipt.observations] == [first.call_id, third.call_id]
    assert not receipt.complete
