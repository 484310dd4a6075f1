"""The receipt classifier: observation -> class, settled batch -> verdict.

This is where the specification's dual-axis outcome contract lives.  The
table below is the whole of it; ``docs/outcome-contract.md`` prints the same
table, and ``tests/test_docs.py`` checks the two agree.

=================  ==================  ==============================================
terminal status    execution status    class
=================  ==================  ==============================================
cancelled          anything / missing  cancelled (status arbitrates cancellation)
success            success             success of that tool (needs a tool identity)
success            not_started         success of that tool (needs a tool identity)
success            error, cancelled    contract violation (PR #8180: illegal pairs)
error              error               eligible failure (needs identity and a
                                       classified execution error type != unknown)
error              cancelled           cancelled
error              not_started         not started (pre-execution failure)
error              success             post-execution failure
success, error     unknown / missing / unknown
                   unsupported
=================  ==================  ==============================================

``unknown`` and ``contract_violation`` also *downgrade* the prompt: it may
still be warned but is never enforced.
"""

from __future__ import annotations

import enum

import attrs

from guard._values import (
    BatchReceipt,
    FailureKey,
    InputBoundary,
    Observation,
    ResetReason,
)


class ObservationClass(enum.StrEnum):
    """What one receipt entry means to the guard."""

    ELIGIBLE_FAILURE = "eligible_failure"
    SUCCESS = "success"
    CANCELLED = "cancelled"
    NOT_STARTED = "not_started"
    POST_EXECUTION_FAILURE = "post_execution_failure"
    UNKNOWN = "unknown"
    CONTRACT_VIOLATION = "contract_violation"
    PROVIDER_DUPLICATE = "provider_duplicate"


_C = ObservationClass

#: (terminal status, execution status) -> class, before identity checks.
#: Pairs not listed (missing or unsupported execution status) are unknown.
OUTCOME_TABLE: dict[tuple[str, str], ObservationClass] = {
    ("success", "success"): _C.SUCCESS,
    ("success", "not_started"): _C.SUCCESS,
    ("success", "error"): _C.CONTRACT_VIOLATION,
    ("success", "cancelled"): _C.CONTRACT_VIOLATION,
    ("error", "error"): _C.ELIGIBLE_FAILURE,
    ("error", "cancelled"): _C.CANCELLED,
    ("error", "not_started"): _C.NOT_STARTED,
    ("error", "success"): _C.POST_EXECUTION_FAILURE,
}

#: Reset reasons a batch may carry, strongest first.
INELIGIBLE_RESET_REASON_PRECEDENCE: tuple[ResetReason, ...] = (
    ResetReason.CONTRACT_VIOLATION,
    ResetReason.CANCELLED,
    ResetReason.UNKNOWN,
    ResetReason.NOT_STARTED,
    ResetReason.POST_EXECUTION_FAILURE,
)

_UNCLASSIFIED_ERROR_TYPE = "unknown"


def classify_observation(observation: Observation) -> ObservationClass:
    """Classify one receipt entry by the outcome table and the identity rules."""
    if observation.provider_duplicate:
        return _C.PROVIDER_DUPLICATE
    terminal = observation.terminal_status
    if terminal == "cancelled":
        return _C.CANCELLED
    cls = OUTCOME_TABLE.get((terminal, observation.execution_status or ""), _C.UNKNOWN)
    if cls is _C.ELIGIBLE_FAILURE:
        error_type = observation.execution_error_type
        if (
            not observation.policy_tool_name
            or not error_type
            or error_type == _UNCLASSIFIED_ERROR_TYPE
        ):
            return _C.UNKNOWN
    elif cls is _C.SUCCESS and not observation.policy_tool_name:
        return _C.UNKNOWN
    return cls


@attrs.frozen
class BatchVerdict:
    """The classifier's summary of one settled batch, independent of any streak.

    Exactly one of three shapes:

    * a reset: ``reason`` is set (``downgrade`` says enforcement must be
      disabled for the rest of the prompt);
    * a candidate: ``key`` is the single eligible failure key left after
      successes cleared their own tool, ``failures`` counts its entries;
    * neutral: neither; ``succeeded_tools`` may still reset a tracked
      candidate whose own tool succeeded.
    """

    reason: ResetReason | None = None
    downgrade: bool = False
    key: FailureKey | None = None
    failures: int = 0
    succeeded_tools: frozenset[str] = frozenset()
    #: ``native``/``mcp`` when every entry of the candidate agrees, else None.
    tool_type: str | None = None


#: Interned reset verdicts, one per (reason, downgrade).
RESET_VERDICTS: dict[tuple[ResetReason, bool], BatchVerdict] = {
    (reason, downgrade): BatchVerdict(reason=reason, downgrade=downgrade)
    for reason in ResetReason
    for downgrade in (False, True)
}
#: The verdict of a batch with nothing to say (empty, or only provider duplicates).
EMPTY_VERDICT = BatchVerdict()

_DOWNGRADING = (_C.UNKNOWN, _C.CONTRACT_VIOLATION)
_RANK = {
    _C.CONTRACT_VIOLATION: 0,
    _C.CANCELLED: 1,
    _C.UNKNOWN: 2,
    _C.NOT_STARTED: 3,
    _C.POST_EXECUTION_FAILURE: 4,
}
_REASON_OF_RANK = INELIGIBLE_RESET_REASON_PRECEDENCE


def classify_batch(receipt: BatchReceipt, boundary: InputBoundary) -> BatchVerdict:
    """Reduce a settled batch and its input boundary to a :class:`BatchVerdict`.

    The order is the specification's: the input boundary first (an unreliable
    drain, then external input, then a queued prompt), then completeness, then
    the entries with provider duplicates filtered out.
    """
    if not boundary.reliable:
        return RESET_VERDICTS[ResetReason.UNRELIABLE_INPUT, True]
    if boundary.has_external_input:
        return RESET_VERDICTS[ResetReason.EXTERNAL_INPUT, False]
    if boundary.has_queued_prompt:
        return RESET_VERDICTS[ResetReason.QUEUED_PROMPT, False]
    if not receipt.complete:
        return RESET_VERDICTS[ResetReason.INCOMPLETE, False]

    best_rank = 5
    downgrade = False
    succeeded: set[str] = set()
    failed: list[Observation] = []
    seen = False
    for observation in receipt.observations:
        cls = classify_observation(observation)
        if cls is _C.PROVIDER_DUPLICATE:
            continue
        seen = True
        if cls is _C.ELIGIBLE_FAILURE:
            failed.append(observation)
        elif cls is _C.SUCCESS:
            succeeded.add(observation.policy_tool_name)  # type: ignore[arg-type]
        else:
            rank = _RANK[cls]
            if rank < best_rank:
                best_rank = rank
            if cls in _DOWNGRADING:
                downgrade = True
    if best_rank < 5:
        return RESET_VERDICTS[_REASON_OF_RANK[best_rank], downgrade]
    if not seen:
        return EMPTY_VERDICT

    key_tool: str | None = None
    key_type: str | None = None
    tool_type: str | None = None
    failures = 0
    for observation in failed:
        tool = observation.policy_tool_name
        if tool in succeeded:
            continue
        if key_tool is None:
            key_tool = tool
            key_type = observation.execution_error_type
            tool_type = observation.tool_type
        elif tool != key_tool or observation.execution_error_type != key_type:
            return RESET_VERDICTS[ResetReason.MIXED, False]
        elif observation.tool_type != tool_type:
            tool_type = None
        failures += 1
    frozen_succeeded = frozenset(succeeded)
    if key_tool is None:
        return BatchVerdict(succeeded_tools=frozen_succeeded)
    return BatchVerdict(
        key=FailureKey(key_tool, key_type),  # type: ignore[arg-type]
        failures=failures,
        succeeded_tools=frozen_succeeded,
        tool_type=tool_type,
    )
