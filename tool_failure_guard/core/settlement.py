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
from tool_failure_guard.guard import BatchReceipt, Observation


class BatchSettlement:
    """Collects one admitted batch's outcomes by call id; owned by one run.

    It keeps the outcomes themselves, one slot per call in the model's order, and
    builds the receipt's observations from them once, when the batch closes: the
    per-call path allocates nothing of its own (the record-level
    :class:`~tool_failure_guard.core.receipts.ReceiptBuilder` is for hosts that
    settle by ordinal instead).
    """

    __slots__ = (
        "_admission",
        "_closed",
        "_dropped",
        "_ordinals",
        "_outcomes",
        "_receipt",
        "_settled",
        "_skipped",
    )

    def __init__(self, admission: Admission) -> None:
        calls = admission.calls
        self._admission = admission
        self._ordinals = {call.call_id: index for index, call in enumerate(calls)}
        self._outcomes: list[CallOutcome | None] = [None] * len(calls)
        self._settled = 0
        self._skipped = 0  #: outcomes skipped past the tool-call cap
        self._dropped = 0
        self._closed = False
        self._receipt: BatchReceipt | None = None

    @property
    def admission(self) -> Admission:
        return self._admission

    @property
    def calls(self) -> tuple[FunctionCall, ...]:
        return self._admission.calls

    def is_provider_duplicate(self, call_id: str) -> bool:
        return call_id in self._admission.provider_duplicates

    def settle(self, outcome: CallOutcome) -> CallOutcome | None:
        """Record ``outcome`` for its call and return it; None when it is a late duplicate
        (a second outcome for the call, or one after the batch closed: dropped, never
        counted).

        Raises :class:`ValueError` for a call id that is not in the batch.
        """
        ordinal = self._ordinals.get(outcome.call_id)
        if ordinal is None:
            raise ValueError(
                f"call id {outcome.call_id!r} is not one of this batch's calls "
                f"({', '.join(repr(c) for c in self._ordinals) or 'none'})"
            )
        outcomes = self._outcomes
        if self._closed or outcomes[ordinal] is not None:
            self._dropped += 1
            return None
        outcomes[ordinal] = outcome
        self._settled += 1
        if (
            outcome.execution_error_type == TOOL_CALL_CAP_SKIPPED
            and outcome.execution_status == "not_started"
        ):
            self._skipped += 1
        return outcome

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
        admission = self._admission
        # The provider duplicates are ids among the (de-duplicated) calls.
        return len(admission.calls) - len(admission.provider_duplicates) - self._skipped

    @property
    def dropped_frames(self) -> int:
        """Late duplicate outcomes that were refused."""
        return self._dropped

    def is_complete(self) -> bool:
        """Every admitted call has exactly one outcome."""
        return self._settled == len(self._outcomes)

    def receipt(self) -> BatchReceipt:
        """Close the batch (later outcomes are dropped) and return its narrow receipt.

        Its observations are the settled outcomes in the model's order; it is complete
        only when every call settled.
        """
        receipt = self._receipt
        if receipt is None:
            self._closed = True
            duplicates = self._admission.provider_duplicates
            receipt = self._receipt = BatchReceipt(
                [
                    Observation(
                        call_id=outcome.call_id,
                        terminal_status=outcome.terminal_status,
                        execution_status=outcome.execution_status,
                        execution_error_type=outcome.execution_error_type,
                        policy_tool_name=outcome.policy_tool_name,
                        tool_type=outcome.tool_type,
                        provider_duplicate=outcome.call_id in duplicates,
                    )
                    for outcome in self._outcomes
                    if outcome is not None
                ],
                complete=self._settled == len(self._outcomes),
            )
        return receipt


def settle_all(admission: Admission, outcomes: Sequence[CallOutcome]) -> BatchSettlement:
    """A settlement of ``admission`` with ``outcomes`` (any order; missing ones stay missing)."""
    settlement = BatchSettlement(admission)
    for outcome in outcomes:
        settlement.settle(outcome)
    return settlement
