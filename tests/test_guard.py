"""The reducer, case by case: the specification's unit-test list and the issue's rules."""

from __future__ import annotations

import pytest
from conftest import batch, failure, failures, outcome, success

from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    BatchReceipt,
    DecisionKind,
    FailureKey,
    GuardMode,
    InputBoundary,
    Phase,
    RepeatedToolFailureGuard,
    ResetReason,
)

K = DecisionKind
KEY = FailureKey("read_file", "file_not_found")


def warned_guard(mode: GuardMode = GuardMode.ENFORCE) -> RepeatedToolFailureGuard:
    guard = RepeatedToolFailureGuard(mode)
    guard.observe(failures(4))
    guard.observe(failures(4))
    assert guard.phase is Phase.WARNED
    return guard


def test_eight_failures_in_one_batch_do_not_warn() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    decision = guard.observe(failures(8))
    assert decision.kind is K.TRACKED
    assert (guard.phase, guard.failure_count, guard.batch_count) == (Phase.TRACKING, 8, 1)
    assert guard.key == KEY
    assert guard.candidate_ordinal == 1


def test_eight_failures_across_two_batches_warn() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    assert guard.observe(failures(5)).kind is K.TRACKED
    decision = guard.observe(failures(3))
    assert (decision.kind, decision.phase_before, decision.phase_after) == (
        K.WARN,
        Phase.TRACKING,
        Phase.WARNED,
    )
    assert (guard.failure_count, guard.batch_count) == (8, 2)


def test_seven_failures_across_many_batches_do_not_warn() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    for _ in range(7):
        assert guard.observe(failures(1)).kind is K.TRACKED
    assert guard.phase is Phase.TRACKING
    assert guard.observe(failures(1)).kind is K.WARN


def test_stop_only_after_the_next_matching_batch_settles() -> None:
    guard = warned_guard()
    decision = guard.observe(failures(1))
    assert (decision.kind, decision.phase_after) == (K.STOP, Phase.LATCHED)
    assert (guard.failure_count, guard.batch_count) == (9, 3)


@pytest.mark.parametrize(
    ("mode", "remind", "stop"),
    [
        (GuardMode.SHADOW, K.WOULD_WARN, K.WOULD_STOP),
        (GuardMode.WARN, K.WARN, K.WOULD_STOP),
        (GuardMode.ENFORCE, K.WARN, K.STOP),
    ],
)
def test_modes_choose_between_acting_and_recording(
    mode: GuardMode, remind: DecisionKind, stop: DecisionKind
) -> None:
    guard = RepeatedToolFailureGuard(mode)
    kinds = [guard.observe(failures(4)).kind for _ in range(3)]
    assert kinds == [K.TRACKED, remind, stop]
    assert guard.phase is Phase.LATCHED


def test_off_mode_never_reduces() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.OFF)
    for _ in range(5):
        decision = guard.observe(failures(4))
        assert (decision.kind, decision.phase_before, decision.phase_after) == (
            K.NONE,
            Phase.IDLE,
            Phase.IDLE,
        )
    assert (guard.phase, guard.failure_count, guard.candidate_ordinal) == (Phase.IDLE, 0, 0)
    unreliable = guard.observe(failures(1), InputBoundary(reliable=False))
    assert unreliable.kind is K.NONE and guard.enforcement_disabled is False


def test_latched_makes_no_further_decisions() -> None:
    guard = warned_guard()
    guard.observe(failures(1))
    state = repr(guard)
    for receipt, boundary in [
        (failures(4), None),
        (batch(success()), None),
        (batch(outcome("cancelled", None)), None),
        (failures(1), InputBoundary(reliable=False)),
        (failures(1, "other"), InputBoundary(has_external_input=True)),
    ]:
        decision = guard.observe(receipt, boundary)
        assert (decision.kind, decision.reason, decision.phase_after) == (
            K.NONE,
            None,
            Phase.LATCHED,
        )
    assert repr(guard) == state


@pytest.mark.parametrize(
    ("receipt", "boundary", "reason"),
    [
        (batch(success("read_file")), None, ResetReason.SUCCESS),
        (batch(failure(), success("read_file")), None, ResetReason.SUCCESS),
        (batch(outcome("cancelled", "cancelled")), None, ResetReason.CANCELLED),
        (batch(outcome("error", "cancelled")), None, ResetReason.CANCELLED),
        (batch(failure(), outcome("error", "not_started")), None, ResetReason.NOT_STARTED),
        (batch(outcome("error", "unknown")), None, ResetReason.UNKNOWN),
        (batch(outcome("error", "error", error_type="unknown")), None, ResetReason.UNKNOWN),
        (batch(outcome("error", "success")), None, ResetReason.POST_EXECUTION_FAILURE),
        (batch(failure(), failure("shell", "exit")), None, ResetReason.MIXED),
        (batch(failure(), complete=False), None, ResetReason.INCOMPLETE),
        (failures(1), InputBoundary(reliable=False), ResetReason.UNRELIABLE_INPUT),
        (failures(1), InputBoundary(has_queued_prompt=True), ResetReason.QUEUED_PROMPT),
        (failures(1), InputBoundary(has_external_input=True), ResetReason.EXTERNAL_INPUT),
        (batch(outcome("success", "error")), None, ResetReason.CONTRACT_VIOLATION),
    ],
)
@pytest.mark.parametrize("from_warned", [False, True])
def test_resets(
    receipt: BatchReceipt, boundary: InputBoundary | None, reason: ResetReason, from_warned: bool
) -> None:
    guard = warned_guard() if from_warned else RepeatedToolFailureGuard(GuardMode.ENFORCE)
    if not from_warned:
        guard.observe(failures(3))
    before = guard.phase
    decision = guard.observe(receipt, boundary)
    assert (decision.kind, decision.reason) == (K.RESET, reason)
    assert (decision.phase_before, decision.phase_after) == (before, Phase.IDLE)
    assert (guard.phase, guard.key, guard.failure_count, guard.batch_count) == (
        Phase.IDLE,
        None,
        0,
        0,
    )


def test_other_tools_successes_between_failure_batches_are_ignored() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    guard.observe(failures(4))
    decision = guard.observe(batch(success("edit"), success("list_directory")))
    assert decision.kind is K.NONE
    assert (guard.phase, guard.failure_count, guard.batch_count) == (Phase.TRACKING, 4, 1)
    assert guard.observe(failures(4)).kind is K.WARN
    assert guard.observe(batch(success("edit"))).kind is K.NONE
    assert guard.phase is Phase.WARNED
    assert guard.observe(failures(1)).kind is K.STOP


def test_other_tools_successes_inside_a_matching_batch_are_ignored() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    guard.observe(batch(failure(), failure(), success("edit"), failure(), failure()))
    assert guard.failure_count == 4
    assert guard.observe(batch(success("edit"), *failures(4).observations)).kind is K.WARN
    assert guard.observe(batch(failure(), success("grep"))).kind is K.STOP


def test_provider_duplicates_neither_count_nor_reset() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    guard.observe(failures(4))
    only_duplicates = batch(failure(duplicate=True), failure(duplicate=True))
    assert guard.observe(only_duplicates).kind is K.NONE
    assert (guard.failure_count, guard.batch_count) == (4, 1)
    cancelled_duplicate = batch(*failures(4).observations, failure(duplicate=True))
    assert guard.observe(cancelled_duplicate).kind is K.WARN
    assert guard.failure_count == 8


def test_a_new_key_starts_a_new_streak_with_a_new_ordinal() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    guard.observe(failures(6))
    decision = guard.observe(failures(6, "run_shell_command", "shell_execute_error"))
    assert (decision.kind, decision.phase_after) == (K.TRACKED, Phase.TRACKING)
    assert guard.key == FailureKey("run_shell_command", "shell_execute_error")
    assert (guard.failure_count, guard.batch_count, guard.candidate_ordinal) == (6, 1, 2)


def test_same_key_keeps_its_ordinal_and_a_reset_then_new_streak_takes_the_next() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.SHADOW)
    assert (guard.candidate_ordinal, guard.last_candidate_ordinal) == (0, 0)
    guard.observe(failures(2))
    guard.observe(failures(2))
    assert (guard.candidate_ordinal, guard.last_candidate_ordinal) == (1, 1)
    assert guard.observe(batch(success())).kind is K.RESET
    # no candidate is active after the reset; the ended streak's number is kept apart
    assert (guard.phase, guard.candidate_ordinal, guard.last_candidate_ordinal) == (
        Phase.IDLE,
        0,
        1,
    )
    guard.observe(failures(2))
    assert (guard.candidate_ordinal, guard.last_candidate_ordinal) == (2, 2)


def test_ordinal_reads_zero_on_every_none_while_idle_after_a_reset() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    guard.observe(failures(3))
    assert guard.observe(batch(outcome("cancelled", "cancelled"))).kind is K.RESET
    for quiet in (batch(success("edit")), batch(), batch(success("read_file"))):
        assert guard.observe(quiet).kind is K.NONE
        assert (guard.phase, guard.candidate_ordinal) == (Phase.IDLE, 0)
    assert guard.observe(failures(1), InputBoundary(reliable=False)).kind is K.RESET
    assert (guard.candidate_ordinal, guard.last_candidate_ordinal) == (0, 1)
    guard.observe(failures(1, "shell", "exit"))
    assert (guard.phase, guard.candidate_ordinal) == (Phase.TRACKING, 2)


def test_ordinal_stays_with_the_latched_candidate() -> None:
    guard = warned_guard()
    assert guard.candidate_ordinal == 1
    assert guard.observe(failures(1)).kind is K.STOP
    guard.observe(batch(success("read_file")))
    assert (guard.phase, guard.candidate_ordinal) == (Phase.LATCHED, 1)


def test_one_reminder_per_streak_and_a_new_candidate_can_earn_another() -> None:
    guard = warned_guard(GuardMode.WARN)
    decision = guard.observe(failures(4, "shell", "exit"))
    assert (decision.kind, decision.phase_after) == (K.TRACKED, Phase.TRACKING)
    assert guard.candidate_ordinal == 2
    assert guard.observe(failures(4, "shell", "exit")).kind is K.WARN
    assert guard.observe(failures(1, "shell", "exit")).kind is K.WOULD_STOP


def test_the_candidates_own_success_resets_even_from_warned() -> None:
    guard = warned_guard()
    decision = guard.observe(batch(success("read_file")))
    assert (decision.kind, decision.reason, decision.phase_after) == (
        K.RESET,
        ResetReason.SUCCESS,
        Phase.IDLE,
    )
    assert guard.observe(failures(4)).kind is K.TRACKED


def test_reset_from_idle_is_silent() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    for receipt in (
        batch(outcome("cancelled", None)),
        batch(success()),
        batch(failure(), failure("x")),
    ):
        assert guard.observe(receipt).kind is K.NONE
    assert guard.observe(failures(1), InputBoundary(has_external_input=True)).kind is K.NONE


def test_first_unreliable_drain_from_idle_reports_once_and_disables_enforcement() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    first = guard.observe(failures(1), InputBoundary(reliable=False))
    assert (first.kind, first.reason, first.phase_after) == (
        K.RESET,
        ResetReason.UNRELIABLE_INPUT,
        Phase.IDLE,
    )
    assert guard.enforcement_disabled is True
    again = guard.observe(failures(1), InputBoundary(reliable=False))
    assert again.kind is K.NONE


@pytest.mark.parametrize(
    "downgrading",
    [
        (batch(outcome("error", None)), None),
        (batch(outcome("success", "cancelled")), None),
        (batch(outcome("error", "error", tool=None)), None),
        (failures(1), InputBoundary(reliable=False)),
    ],
)
def test_unsupported_outcomes_and_unreliable_drains_never_enforce(
    downgrading: tuple[BatchReceipt, InputBoundary | None],
) -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    guard.observe(*downgrading)
    assert guard.enforcement_disabled
    kinds = [guard.observe(failures(4)).kind for _ in range(3)]
    assert kinds == [K.TRACKED, K.WARN, K.WOULD_STOP]
    assert guard.enforcement_disabled


def test_a_cancellation_is_never_counted_even_racing_an_execution_error() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    guard.observe(failures(7))
    decision = guard.observe(batch(failure(), outcome("cancelled", "error")))
    assert decision.reason is ResetReason.CANCELLED
    assert guard.failure_count == 0


def test_fixed_texts_carry_no_tool_data() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    secret_tool, secret_type = "tool_SENTINEL_91", "type_SENTINEL_92"
    for _ in range(3):
        guard.observe(failures(4, secret_tool, secret_type))
    assert guard.phase is Phase.LATCHED
    for text in (REPEATED_TOOL_FAILURE_REMINDER, REPEATED_TOOL_FAILURE_STOP_MESSAGE):
        assert text.startswith("System: ")
        assert "SENTINEL" not in text


def test_guard_state_is_read_only() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.SHADOW)
    with pytest.raises(AttributeError):
        guard.phase = Phase.LATCHED  # type: ignore[misc]
    with pytest.raises(AttributeError):
        guard.extra = 1  # type: ignore[attr-defined]
