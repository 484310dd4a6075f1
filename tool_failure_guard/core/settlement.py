"""One model response's tool calls, settled by call id: the receipt a host can prove.

A host that knows a response's call ids up front (every framework does: they
are in the model message) opens one :class:`BatchSettlement` per admitted
response, hands it each :class:`~tool_failure_guard.core.outcomes.CallOutcome`
as it settles, and asks for the receipt once the batch is over.  A call whose
outcome the host never saw leaves the receipt **incomplete**: the guard then
resets with ``incomplete`` rather than reduce a batch it cannot prove.  A
second outcome for the same call is a late duplicate: dropped, never counted.
"""

from __future__ import annotations

from collections.abc import Sequence

from tool_failure_guard.core.outcomes import TOOL_CALL_CAP_SKIPPED, CallOutcome, FunctionCall
from tool_failure_guard.core.protections import Admission
from tool_failure_guard.core.receipts import CallRecord, ReceiptBuilder
from tool_failure_guard.guard import BatchReceipt


class BatchSettlement:
    """Collects one admitted batch's outcomes by call id; owned by one run."""

    __slots__ = ("_admission", "_builder", "_ordinals", "_outcomes", "_receipt")

    def __init__(self, admission: Admission) -> None:
        self._admission = admission
        self._builder = ReceiptBuilder(len(admission.calls))
        self._ordinals = {call.call_id: index for index, call in enumerate(admission.calls)}
        self._outcomes: list[CallOutcome | None] = [None] * len(admission.calls)
        self._receipt: BatchReceipt | None = None

    @property
    def admission(self) -> Admission:
        return self._admission

    @property
    def calls(self) -> tuple[FunctionCall, ...]:
        return self._admission.calls

    def is_provider_duplicate(self, call_id: str) -> bool:
        return call_id in self._admission.provider_duplicates

    def settle(self, outcome: CallOutcome) -> CallRecord | None:
        """Record ``outcome`` for its call; None when it is a late duplicate (dropped).

        Raises :class:`ValueError` for a call id that is not in the batch.
        """
        ordinal = self._ordinals.get(outcome.call_id)
        if ordinal is None:
            raise ValueError(
                f"call id {outcome.call_id!r} is not one of this batch's calls "
                f"({', '.join(repr(c) for c in self._ordinals) or 'none'})"
            )
        record = self._builder.settle(
            ordinal=ordinal,
            call_id=outcome.call_id,
            policy_tool_name=outcome.policy_tool_name,
            tool_type=outcome.tool_type,
            terminal_status=outcome.terminal_status,
            execution_status=outcome.execution_status,
            execution_error_type=outcome.execution_error_type,
            provider_duplicate=self.is_provider_duplicate(outcome.call_id),
        )
        if record is not None:
            self._outcomes[ordinal] = outcome
        return record

    def outcomes(self) -> list[CallOutcome | None]:
        """Every call's outcome in the model's order; None where none was seen."""
        return list(self._outcomes)

    def settled(self) -> list[CallOutcome]:
        return [outcome for outcome in self._outcomes if outcome is not None]

    def missing(self) -> tuple[FunctionCall, ...]:
        """The calls whose outcome was never seen."""
        return tuple(
            call
            for call, outcome in zip(self._admission.calls, self._outcomes, strict=True)
            if outcome is None
        )

    @property
    def executed(self) -> int:
        """Calls that were neither provider duplicates nor skipped past the cap (what the
        tool-call cap counts)."""
        skipped = sum(
            1
            for outcome in self._outcomes
            if outcome is not None
            and outcome.execution_status == "not_started"
            and outcome.execution_error_type == TOOL_CALL_CAP_SKIPPED
        )
        return len(self._admission.executable) - skipped

    @property
    def dropped_frames(self) -> int:
        return self._builder.dropped_frames

    def is_complete(self) -> bool:
        return self._builder.is_complete()

    def receipt(self) -> BatchReceipt:
        """Close the batch (later outcomes are dropped) and return its narrow receipt."""
        if self._receipt is None:
            self._receipt = self._builder.build()
        return self._receipt


def settle_all(admission: Admission, outcomes: Sequence[CallOutcome]) -> BatchSettlement:
    """A settlement of ``admission`` with ``outcomes`` (any order; missing ones stay missing)."""
    settlement = BatchSettlement(admission)
    for outcome in outcomes:
        settlement.settle(outcome)
    return settlement
