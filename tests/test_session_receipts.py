"""Receipts: one record per de-duplicated call, ordering, completeness, frozen values."""

from __future__ import annotations

import attrs
import pytest

from tool_failure_guard.core.receipts import CallRecord, ReceiptBuilder
from tool_failure_guard.guard import BatchReceipt, RepeatedToolFailureGuard


def settle(builder: ReceiptBuilder, ordinal: int, **overrides: object) -> CallRecord | None:
    values: dict[str, object] = {
        "call_id": f"c{ordinal}",
        "policy_tool_name": "read_file",
        "tool_type": "native",
        "terminal_status": "error",
        "execution_status": "error",
        "execution_error_type": "file_not_found",
    }
    values.update(overrides)
    return builder.settle(ordinal=ordinal, **values)  # type: ignore[arg-type]


def test_records_are_ordered_by_ordinal_not_arrival() -> None:
    builder = ReceiptBuilder(3)
    for ordinal in (2, 0, 1):
        settle(builder, ordinal)
    receipt = builder.build()
    assert [o.call_id for o in receipt.observations] == ["c0", "c1", "c2"]
    assert [r.sequence for r in builder.records()] == [1, 2, 0]
    assert receipt.complete


def test_a_missing_record_makes_the_receipt_incomplete_and_the_guard_resets() -> None:
    builder = ReceiptBuilder(3)
    settle(builder, 0)
    settle(builder, 2)
    receipt = builder.build()
    assert not receipt.complete
    guard = RepeatedToolFailureGuard("enforce")
    guard.observe(receipt_of_failures(4))
    decision = guard.observe(receipt)
    assert decision.kind.value == "reset" and decision.reason is not None
    assert decision.reason.value == "incomplete"


def receipt_of_failures(failures: int) -> BatchReceipt:
    builder = ReceiptBuilder(failures)
    for ordinal in range(failures):
        settle(builder, ordinal)
    return builder.build()


def test_a_late_duplicate_terminal_frame_is_dropped_not_counted() -> None:
    builder = ReceiptBuilder(2)
    assert settle(builder, 0) is not None
    assert settle(builder, 0, terminal_status="success", execution_status="success") is None
    settle(builder, 1)
    receipt = builder.build()
    assert receipt.complete
    assert len(receipt.observations) == 2
    assert receipt.observations[0].terminal_status == "error"
    # after the batch closed, frames are late by definition
    assert settle(builder, 1) is None
    assert builder.dropped_frames == 2


def test_empty_batch_is_complete() -> None:
    assert ReceiptBuilder(0).build().complete


def test_ordinal_outside_the_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="outside the batch of 1"):
        settle(ReceiptBuilder(1), 1)


def test_records_are_frozen_and_carry_no_arguments_or_text() -> None:
    builder = ReceiptBuilder(1)
    record = settle(builder, 0)
    assert record is not None
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        record.execution_error_type = "other"  # type: ignore[misc]
    names = {field.name for field in attrs.fields(CallRecord)}
    assert names == {
        "ordinal",
        "sequence",
        "call_id",
        "policy_tool_name",
        "tool_type",
        "terminal_status",
        "execution_status",
        "execution_error_type",
        "provider_duplicate",
    }


def test_provider_duplicates_are_recorded_and_ignored_by_the_guard() -> None:
    builder = ReceiptBuilder(2)
    settle(builder, 0)
    settle(
        builder,
        1,
        terminal_status="error",
        execution_status="not_started",
        execution_error_type=None,
        provider_duplicate=True,
    )
    receipt = builder.build()
    assert receipt.complete
    assert [o.provider_duplicate for o in receipt.observations] == [False, True]
    guard = RepeatedToolFailureGuard("shadow")
    assert guard.observe(receipt).kind.value == "tracked"
    assert guard.failure_count == 1
