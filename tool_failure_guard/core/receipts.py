"""Batch receipts: one record per de-duplicated call, and a proof of completeness.

Every terminal path of a call (normal settle, early error, permission refusal,
cancellation, provider duplicate) queues exactly one :class:`CallRecord`
stamped with its ``ordinal`` (index among the batch's de-duplicated calls) and
a ``sequence`` (arrival counter).  When every admitted call has settled the
host asks :meth:`ReceiptBuilder.build` for the narrow
:class:`~tool_failure_guard.guard.BatchReceipt`: records sorted by ordinal then sequence, and
``complete`` only when the record count and the ordinal set both equal the
call count.  A terminal frame that arrives for an ordinal already recorded, or
after the receipt was built, is a late duplicate: it is dropped, never counted
(:attr:`ReceiptBuilder.dropped_frames` counts them).

Hosts that know a model response's call ids up front use
:class:`tool_failure_guard.core.settlement.BatchSettlement`, which keys this
builder by call id.
"""

from __future__ import annotations

import attrs

from tool_failure_guard.guard import BatchReceipt, Observation


@attrs.frozen(kw_only=True)
class CallRecord:
    """The narrow, frozen outcome of one call, with its place in the batch.

    It has no room for arguments, results or error text.
    """

    ordinal: int
    sequence: int
    call_id: str
    policy_tool_name: str | None
    tool_type: str | None
    terminal_status: str
    execution_status: str | None
    execution_error_type: str | None
    provider_duplicate: bool = False

    def observation(self) -> Observation:
        return Observation(
            call_id=self.call_id,
            terminal_status=self.terminal_status,
            execution_status=self.execution_status,
            execution_error_type=self.execution_error_type,
            policy_tool_name=self.policy_tool_name,
            tool_type=self.tool_type,
            provider_duplicate=self.provider_duplicate,
        )


class ReceiptBuilder:
    """Collects one batch's records; owned by one prompt task."""

    __slots__ = ("_call_count", "_closed", "_dropped", "_ordinals", "_records", "_sequence")

    def __init__(self, call_count: int) -> None:
        if call_count < 0:
            raise ValueError(f"call_count must be >= 0; got {call_count}")
        self._call_count = call_count
        self._records: list[CallRecord] = []
        self._ordinals: set[int] = set()
        self._sequence = 0
        self._closed = False
        self._dropped = 0

    @property
    def call_count(self) -> int:
        return self._call_count

    @property
    def dropped_frames(self) -> int:
        """Late duplicate terminal frames that were refused."""
        return self._dropped

    def settle(
        self,
        *,
        ordinal: int,
        call_id: str,
        policy_tool_name: str | None,
        tool_type: str | None,
        terminal_status: str,
        execution_status: str | None,
        execution_error_type: str | None,
        provider_duplicate: bool = False,
    ) -> CallRecord | None:
        """Queue the terminal record of the call at ``ordinal``; None if it is a late duplicate."""
        if self._closed or ordinal in self._ordinals:
            self._dropped += 1
            return None
        if not 0 <= ordinal < self._call_count:
            raise ValueError(f"ordinal {ordinal} is outside the batch of {self._call_count} calls")
        record = CallRecord(
            ordinal=ordinal,
            sequence=self._sequence,
            call_id=call_id,
            policy_tool_name=policy_tool_name,
            tool_type=tool_type,
            terminal_status=terminal_status,
            execution_status=execution_status,
            execution_error_type=execution_error_type,
            provider_duplicate=provider_duplicate,
        )
        self._sequence += 1
        self._ordinals.add(ordinal)
        self._records.append(record)
        return record

    def records(self) -> tuple[CallRecord, ...]:
        """The records so far, in ordinal then sequence order."""
        return tuple(sorted(self._records, key=lambda r: (r.ordinal, r.sequence)))

    def is_complete(self) -> bool:
        """Record count and ordinal set both equal the de-duplicated call count."""
        ordinals = {record.ordinal for record in self._records}
        return len(self._records) == self._call_count and len(ordinals) == self._call_count

    def build(self) -> BatchReceipt:
        """Close the batch and return its narrow receipt; later frames are dropped."""
        self._closed = True
        return BatchReceipt(
            [record.observation() for record in self.records()], complete=self.is_complete()
        )
