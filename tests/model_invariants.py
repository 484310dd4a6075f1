"""Invariants every prompt must keep, checked one settled batch at a time.

Shared by the hypothesis state machine and the bounded exhaustive exploration
in ``test_model_check.py``.  The ledger is an immutable summary of what the
prompt has seen so far, so the exhaustive search can branch it freely.
"""

from __future__ import annotations

import attrs

from tool_failure_guard.guard import (
    BatchReceipt,
    Decision,
    DecisionKind,
    FailureKey,
    GuardMode,
    InputBoundary,
    ObservationClass,
    Phase,
    RepeatedToolFailureGuard,
    classify_observation,
)

K = DecisionKind
NEVER_COUNTED = {
    ObservationClass.CANCELLED,
    ObservationClass.NOT_STARTED,
    ObservationClass.UNKNOWN,
    ObservationClass.POST_EXECUTION_FAILURE,
    ObservationClass.CONTRACT_VIOLATION,
}


@attrs.frozen
class Snapshot:
    phase: Phase
    key: FailureKey | None
    failure_count: int
    batch_count: int
    candidate_ordinal: int
    last_candidate_ordinal: int
    enforcement_disabled: bool

    @classmethod
    def of(cls, guard: RepeatedToolFailureGuard) -> Snapshot:
        return cls(
            guard.phase,
            guard.key,
            guard.failure_count,
            guard.batch_count,
            guard.candidate_ordinal,
            guard.last_candidate_ordinal,
            guard.enforcement_disabled,
        )


@attrs.frozen
class Ledger:
    """What the invariants remember about one prompt."""

    mode: GuardMode
    #: the current candidate's key and eligible failures, tracked here from the
    #: receipts alone (never read back from the guard)
    key: tuple[str, str] | None = None
    counted: int = 0
    #: candidate streaks started in this prompt, counted here from the decisions
    streaks: int = 0
    #: candidate ordinals that received would_warn / warn in this prompt
    warned_ordinals: frozenset[int] = frozenset()
    enforcement_disabled: bool = False
    latched: bool = False


def batch_candidate(receipt: BatchReceipt) -> tuple[tuple[str, str] | None, int, int]:
    """From the observations alone: the single remaining failure key, its count, and
    how many distinct keys remained (successes clear their own tool's failures)."""
    classes = [(o, classify_observation(o)) for o in receipt.observations]
    succeeded = {o.policy_tool_name for o, c in classes if c is ObservationClass.SUCCESS}
    remaining = [
        (str(o.policy_tool_name), str(o.execution_error_type))
        for o, c in classes
        if c is ObservationClass.ELIGIBLE_FAILURE and o.policy_tool_name not in succeeded
    ]
    keys = set(remaining)
    if len(keys) != 1:
        return None, 0, len(keys)
    return remaining[0], len(remaining), 1


def check_step(
    ledger: Ledger,
    before: Snapshot,
    decision: Decision,
    guard: RepeatedToolFailureGuard,
    receipt: BatchReceipt,
    boundary: InputBoundary,
) -> Ledger:
    """Assert every invariant for one batch; return the ledger after it."""
    after = Snapshot.of(guard)
    assert decision.phase_before is before.phase
    assert decision.phase_after is after.phase

    if ledger.mode is GuardMode.OFF:
        assert decision.kind is K.NONE and after == before
        return ledger
    if ledger.latched:  # no decision after latched
        assert before.phase is Phase.LATCHED
        assert decision.kind is K.NONE and after == before
        return ledger

    # enforcement is never re-enabled within a prompt
    assert after.enforcement_disabled >= before.enforcement_disabled
    if not boundary.reliable:
        assert after.enforcement_disabled

    # cancelled / not_started / unknown / post-execution outcomes are never counted
    classes = {classify_observation(o) for o in receipt.observations}
    if classes & NEVER_COUNTED and receipt.complete:
        assert decision.kind in (K.RESET, K.NONE)
        assert after.failure_count == 0

    candidate, failures, distinct_keys = batch_candidate(receipt)
    disqualified = (
        not boundary.reliable
        or boundary.has_external_input
        or boundary.has_queued_prompt
        or not receipt.complete
        or bool(classes & NEVER_COUNTED)
    )
    key, counted, streaks = ledger.key, ledger.counted, ledger.streaks
    if decision.kind is K.RESET:
        key, counted = None, 0
    elif decision.kind in (K.TRACKED, K.WOULD_WARN, K.WARN, K.WOULD_STOP, K.STOP):
        assert not disqualified and candidate is not None
        new_streak = candidate != ledger.key
        assert (after.last_candidate_ordinal == before.last_candidate_ordinal + 1) == new_streak
        if new_streak:
            assert after.batch_count == 1
            streaks += 1
        key, counted = candidate, (0 if new_streak else ledger.counted) + failures
    else:  # none: a clean batch with exactly one key is never dropped
        assert disqualified or candidate is None
        if not disqualified and distinct_keys > 1:
            assert before.phase is Phase.IDLE  # mixed resets, silently only from idle
    # the guard's candidate and failure count equal what the receipts say
    guard_key = (
        None if after.key is None else (after.key.policy_tool_name, after.key.execution_error_type)
    )
    assert guard_key == key
    assert after.failure_count == counted

    # the ordinal is the active candidate's: 0 exactly in idle, and numbering
    # continues across resets (the next candidate gets the next number)
    assert after.last_candidate_ordinal == streaks
    assert after.candidate_ordinal == (0 if after.phase is Phase.IDLE else streaks)
    assert (after.candidate_ordinal == 0) == (after.phase is Phase.IDLE)
    if decision.kind is K.RESET:
        assert after.candidate_ordinal == 0
        assert after.last_candidate_ordinal == before.last_candidate_ordinal

    warned = ledger.warned_ordinals
    if decision.kind in (K.WOULD_WARN, K.WARN):
        assert after.failure_count >= 8 and after.batch_count >= 2
        assert after.candidate_ordinal not in warned  # one reminder per streak
        assert (decision.kind is K.WARN) == (ledger.mode is not GuardMode.SHADOW)
        warned = warned | {after.candidate_ordinal}
    if decision.kind in (K.WOULD_STOP, K.STOP):
        # every stop is preceded by a reminder of the same candidate streak
        assert after.candidate_ordinal in warned
        assert before.phase is Phase.WARNED and after.phase is Phase.LATCHED
    if decision.kind is K.STOP:
        assert ledger.mode is GuardMode.ENFORCE and not after.enforcement_disabled
    if decision.kind is K.WOULD_STOP:
        assert ledger.mode is not GuardMode.ENFORCE or after.enforcement_disabled
    if before.phase is Phase.IDLE and after.phase is Phase.IDLE and decision.kind is not K.NONE:
        # idle to idle emits only the first downgrade of the prompt
        assert decision.kind is K.RESET
        assert not before.enforcement_disabled and after.enforcement_disabled

    return attrs.evolve(
        ledger,
        key=key,
        counted=counted,
        streaks=streaks,
        warned_ordinals=warned,
        enforcement_disabled=after.enforcement_disabled,
        latched=after.phase is Phase.LATCHED,
    )
