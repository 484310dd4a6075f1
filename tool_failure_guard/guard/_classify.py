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
from collections.abc import Set

import attrs

from tool_failure_guard.guard._values import (
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

#: What :func:`scan_batch` returns: the fields of a :class:`BatchVerdict` as a
#: plain tuple (reason, downgrade, key tool, key error type, failures,
#: succeeded tools, tool type), so that the per-batch path allocates no object.
#: The succeeded tools may be a mutable set owned by the caller from then on.
Scan = tuple[ResetReason | None, bool, str | None, str | None, int, Set[str], str | None]

_NO_TOOLS: frozenset[str] = frozenset()
#: Interned reset scans, one per (reason, downgrade).
_RESET_SCANS: dict[tuple[ResetReason, bool], Scan] = {
    (reason, downgrade): (reason, downgrade, None, None, 0, _NO_TOOLS, None)
    for reason in ResetReason
    for downgrade in (False, True)
}
_UNRELIABLE_SCAN = _RESET_SCANS[ResetReason.UNRELIABLE_INPUT, True]
_EXTERNAL_SCAN = _RESET_SCANS[ResetReason.EXTERNAL_INPUT, False]
_QUEUED_SCAN = _RESET_SCANS[ResetReason.QUEUED_PROMPT, False]
_INCOMPLETE_SCAN = _RESET_SCANS[ResetReason.INCOMPLETE, False]
_MIXED_SCAN = _RESET_SCANS[ResetReason.MIXED, False]

_ELIGIBLE = _C.ELIGIBLE_FAILURE
_SUCCESS = _C.SUCCESS
_UNKNOWN = _C.UNKNOWN
_CANCELLED = _C.CANCELLED
#: (terminal status, execution status) -> class, with a missing execution status
#: spelled None; pairs absent here are unknown, or cancelled when the terminal
#: status is (see the fall-back in :func:`scan_batch`).
_CLASS_OF: dict[tuple[str, str | None], ObservationClass] = {
    pair: cls for pair, cls in OUTCOME_TABLE.items()
}
#: Each ineligible class -> its rank in INELIGIBLE_RESET_REASON_PRECEDENCE.
_RANK = {
    _C.CONTRACT_VIOLATION: 0,
    _C.CANCELLED: 1,
    _C.UNKNOWN: 2,
    _C.NOT_STARTED: 3,
    _C.POST_EXECUTION_FAILURE: 4,
}
_NO_RANK = len(_RANK)
#: Ranks whose class downgrades the prompt (unknown, contract violation).
_DOWNGRADING_RANKS = frozenset({_RANK[_C.UNKNOWN], _RANK[_C.CONTRACT_VIOLATION]})
#: (best rank, downgrade) -> the interned reset scan.
_SCAN_OF_RANK: dict[tuple[int, bool], Scan] = {
    (rank, downgrade): _RESET_SCANS[INELIGIBLE_RESET_REASON_PRECEDENCE[rank], downgrade]
    for rank in range(_NO_RANK)
    for downgrade in (False, True)
}


def scan_batch(receipt: BatchReceipt, boundary: InputBoundary | None) -> Scan:
    """The classifier's per-batch path: :func:`classify_batch` as a plain tuple.

    The order is the specification's: the input boundary first (an unreliable
    drain, then external input, then a queued prompt; ``None`` means a quiet
    boundary), then completeness, then the entries with provider duplicates
    filtered out, each classified exactly as :func:`classify_observation` does.
    """
    if boundary is not None:
        if not boundary.reliable:
            return _UNRELIABLE_SCAN
        if boundary.has_external_input:
            return _EXTERNAL_SCAN
        if boundary.has_queued_prompt:
            return _QUEUED_SCAN
    if not receipt.complete:
        return _INCOMPLETE_SCAN

    best_rank = _NO_RANK
    downgrade = False
    succeeded: set[str] = set()
    failed: list[Observation] = []
    for observation in receipt.observations:
        if observation.provider_duplicate:
            continue
        cls = _CLASS_OF.get((observation.terminal_status, observation.execution_status))
        if cls is _ELIGIBLE:
            error_type = observation.execution_error_type
            if (
                observation.policy_tool_name
                and error_type
                and error_type != _UNCLASSIFIED_ERROR_TYPE
            ):
                failed.append(observation)
                continue
            cls = _UNKNOWN
        elif cls is _SUCCESS:
            tool = observation.policy_tool_name
            if tool:
                succeeded.add(tool)
                continue
            cls = _UNKNOWN
        elif cls is None:
            cls = _CANCELLED if observation.terminal_status == "cancelled" else _UNKNOWN
        rank = _RANK[cls]
        if rank < best_rank:
            best_rank = rank
        if rank in _DOWNGRADING_RANKS:
            downgrade = True
    if best_rank != _NO_RANK:
        return _SCAN_OF_RANK[best_rank, downgrade]

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
            return _MIXED_SCAN
        elif observation.tool_type != tool_type:
            tool_type = None
        failures += 1
    return None, False, key_tool, key_type, failures, succeeded, tool_type


def classify_batch(receipt: BatchReceipt, boundary: InputBoundary) -> BatchVerdict:
    """Reduce a settled batch and its input boundary to a :class:`BatchVerdict`.

    The same reduction as :func:`scan_batch` (which the guard runs per batch),
    returned as the frozen value.
    """
    reason, downgrade, key_tool, key_type, failures, succeeded, tool_type = scan_batch(
        receipt, boundary
    )
    if reason is not None:
        return RESET_VERDICTS[reason, downgrade]
    if key_tool is None:
        return BatchVerdict(succeeded_tools=frozenset(succeeded)) if succeeded else EMPTY_VERDICT
    return BatchVerdict(
        key=FailureKey(key_tool, key_type),  # type: ignore[arg-type]
        failures=failures,
        succeeded_tools=frozenset(succeeded),
        tool_type=tool_type,
    )
