"""The receipt classifier: the dual-axis outcome table and batch verdicts."""

from __future__ import annotations

import pytest
from conftest import batch, failure, outcome, success

from tool_failure_guard.guard import (
    INELIGIBLE_RESET_REASON_PRECEDENCE,
    FailureKey,
    InputBoundary,
    Observation,
    ObservationClass,
    ResetReason,
    classify_batch,
    classify_observation,
)

C = ObservationClass
QUIET = InputBoundary()


@pytest.mark.parametrize(
    ("terminal", "execution", "expected"),
    [
        ("cancelled", None, C.CANCELLED),
        ("cancelled", "error", C.CANCELLED),
        ("cancelled", "success", C.CANCELLED),
        ("cancelled", "cancelled", C.CANCELLED),
        ("cancelled", "not_started", C.CANCELLED),
        ("cancelled", "unknown", C.CANCELLED),
        ("success", "success", C.SUCCESS),
        ("success", "not_started", C.SUCCESS),
        ("success", "error", C.CONTRACT_VIOLATION),
        ("success", "cancelled", C.CONTRACT_VIOLATION),
        ("success", "unknown", C.UNKNOWN),
        ("success", None, C.UNKNOWN),
        ("error", "error", C.ELIGIBLE_FAILURE),
        ("error", "cancelled", C.CANCELLED),
        ("error", "not_started", C.NOT_STARTED),
        ("error", "success", C.POST_EXECUTION_FAILURE),
        ("error", "unknown", C.UNKNOWN),
        ("error", None, C.UNKNOWN),
        ("error", "paused", C.UNKNOWN),
        ("success", "paused", C.UNKNOWN),
    ],
)
def test_outcome_table(terminal: str, execution: str | None, expected: ObservationClass) -> None:
    assert classify_observation(outcome(terminal, execution)) is expected


@pytest.mark.parametrize(
    ("tool", "error_type"),
    [
        (None, "file_not_found"),
        ("", "file_not_found"),
        ("read_file", None),
        ("read_file", ""),
        ("read_file", "unknown"),
    ],
)
def test_execution_error_needs_identity_and_a_classified_type(
    tool: str | None, error_type: str | None
) -> None:
    observation = outcome("error", "error", tool=tool, error_type=error_type)
    assert classify_observation(observation) is C.UNKNOWN


def test_success_without_identity_is_unknown() -> None:
    assert classify_observation(outcome("success", "success", tool=None)) is C.UNKNOWN


def test_provider_duplicate_is_its_own_class_whatever_its_outcome() -> None:
    assert classify_observation(failure(duplicate=True)) is C.PROVIDER_DUPLICATE


def test_precedence_is_the_specifications() -> None:
    assert [r.value for r in INELIGIBLE_RESET_REASON_PRECEDENCE] == [
        "contract_violation",
        "cancelled",
        "unknown",
        "not_started",
        "post_execution_failure",
    ]


@pytest.mark.parametrize(
    ("observations", "reason", "downgrade"),
    [
        (
            [outcome("error", "success"), outcome("error", "not_started")],
            ResetReason.NOT_STARTED,
            False,
        ),
        ([outcome("error", "not_started"), outcome("error", None)], ResetReason.UNKNOWN, True),
        ([outcome("error", None), outcome("cancelled", None)], ResetReason.CANCELLED, True),
        (
            [outcome("cancelled", None), outcome("success", "error")],
            ResetReason.CONTRACT_VIOLATION,
            True,
        ),
        ([failure(), outcome("error", "success")], ResetReason.POST_EXECUTION_FAILURE, False),
        (
            [failure(), success("edit"), outcome("cancelled", "cancelled")],
            ResetReason.CANCELLED,
            False,
        ),
    ],
)
def test_reset_reason_by_precedence_and_downgrade_from_any_unsupported_outcome(
    observations: list[Observation], reason: ResetReason, downgrade: bool
) -> None:
    verdict = classify_batch(batch(*observations), QUIET)
    assert (verdict.reason, verdict.downgrade, verdict.key) == (reason, downgrade, None)


def test_boundary_checks_come_first_in_order() -> None:
    receipt = batch(failure(), complete=False)
    everything = InputBoundary(has_external_input=True, has_queued_prompt=True, reliable=False)
    assert classify_batch(receipt, everything).reason is ResetReason.UNRELIABLE_INPUT
    assert classify_batch(receipt, everything).downgrade is True
    external = InputBoundary(has_external_input=True, has_queued_prompt=True)
    assert classify_batch(receipt, external).reason is ResetReason.EXTERNAL_INPUT
    queued = InputBoundary(has_queued_prompt=True)
    assert classify_batch(receipt, queued).reason is ResetReason.QUEUED_PROMPT
    assert classify_batch(receipt, QUIET).reason is ResetReason.INCOMPLETE


def test_incomplete_wins_over_a_contract_violation_inside() -> None:
    receipt = batch(outcome("success", "error"), complete=False)
    verdict = classify_batch(receipt, QUIET)
    assert (verdict.reason, verdict.downgrade) == (ResetReason.INCOMPLETE, False)


def test_candidate_key_excludes_arguments_and_counts_entries() -> None:
    verdict = classify_batch(batch(failure(), failure(), failure()), QUIET)
    assert verdict.reason is None
    assert verdict.key == FailureKey("read_file", "file_not_found")
    assert verdict.failures == 3
    assert verdict.tool_type == "native"


def test_tool_type_only_when_all_candidate_entries_agree() -> None:
    mixed_types = batch(
        failure("t", "e", tool_type="native"),
        failure("t", "e", tool_type="mcp"),
        failure("t", "e", tool_type="native"),
    )
    assert classify_batch(mixed_types, QUIET).tool_type is None
    mcp = batch(failure("mcp__git__status", "mcp_tool_error", tool_type="mcp"))
    assert classify_batch(mcp, QUIET).tool_type == "mcp"


def test_two_distinct_keys_are_mixed() -> None:
    verdict = classify_batch(batch(failure("read_file"), failure("run_shell_command")), QUIET)
    assert verdict.reason is ResetReason.MIXED
    same_tool_two_types = batch(failure("read_file", "a"), failure("read_file", "b"))
    assert classify_batch(same_tool_two_types, QUIET).reason is ResetReason.MIXED


def test_a_success_clears_all_failures_of_its_own_tool_before_the_key_is_chosen() -> None:
    receipt = batch(
        failure("read_file", "a"),
        failure("read_file", "b"),
        success("read_file"),
        failure("shell", "exit"),
    )
    verdict = classify_batch(receipt, QUIET)
    assert verdict.key == FailureKey("shell", "exit")
    assert verdict.failures == 1
    assert verdict.succeeded_tools == frozenset({"read_file"})


def test_successes_only_give_a_neutral_verdict_with_the_succeeded_tools() -> None:
    verdict = classify_batch(
        batch(failure("read_file"), success("read_file"), success("edit")), QUIET
    )
    assert (verdict.reason, verdict.key, verdict.failures) == (None, None, 0)
    assert verdict.succeeded_tools == frozenset({"read_file", "edit"})


def test_provider_duplicates_are_filtered_before_anything_else() -> None:
    only_duplicates = batch(failure(duplicate=True), failure(duplicate=True))
    verdict = classify_batch(only_duplicates, QUIET)
    assert (verdict.reason, verdict.key, verdict.succeeded_tools) == (None, None, frozenset())
    cancelled_duplicate = Observation(
        call_id="d", terminal_status="cancelled", provider_duplicate=True
    )
    with_failure = classify_batch(batch(failure(), cancelled_duplicate), QUIET)
    assert with_failure.reason is None and with_failure.failures == 1
