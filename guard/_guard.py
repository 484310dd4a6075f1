"""The per-prompt guard: the derived table run on a small slotted state.

Per settled batch :meth:`RepeatedToolFailureGuard.observe` does four things,
each cheap:

1. gate: mode ``off`` or phase ``latched`` answer ``none`` at once;
2. classify the receipt and boundary into a verdict (``guard._classify``);
3. summarise verdict + streak as the five facts and look the transition up
   in the table derived from the statechart (``guard._table``);
4. run the transition's action on the streak and pick the interned decision.

The object is mutable (one per prompt, owned by one session task) but only
through ``observe``; everything it exposes is read-only.
"""

from __future__ import annotations

from guard._classify import BatchVerdict, classify_batch
from guard._table import TRANSITIONS, Transition
from guard._values import (
    QUIET_BOUNDARY,
    REPEATED_TOOL_FAILURE_BATCH_THRESHOLD,
    REPEATED_TOOL_FAILURE_THRESHOLD,
    BatchReceipt,
    Decision,
    DecisionKind,
    FailureKey,
    GuardMode,
    InputBoundary,
    Phase,
    ResetReason,
    decision,
)
from statecharts import ACTIONS, CONDITIONS

_IDLE = Phase.IDLE
_LATCHED = Phase.LATCHED
_OFF = GuardMode.OFF
_NONE_DECISIONS = {phase: decision(DecisionKind.NONE, None, phase, phase) for phase in Phase}
_ROWS: dict[Phase, tuple[Transition, ...]] = TRANSITIONS

# Bits of the facts index, in the chart's declared condition order.
_BIT = {name: 1 << position for position, name in enumerate(CONDITIONS)}
_HAS_RESET_REASON = _BIT["has_reset_reason"]
_ELIGIBLE = _BIT["eligible"]
_KEY_MATCH = _ELIGIBLE | _BIT["key_match"]
_THRESHOLD_REACHED = _KEY_MATCH | _BIT["threshold_reached"]
_CANDIDATE_SUCCEEDED = _BIT["candidate_succeeded"]

# The actions _apply implements must be exactly the ones the chart may name.
_IMPLEMENTED_ACTIONS = frozenset({"hold", "reset", "start_streak", "count", "remind", "latch"})
if frozenset(ACTIONS) != _IMPLEMENTED_ACTIONS:  # pragma: no cover - import-time guard
    raise ImportError(f"guard implements {_IMPLEMENTED_ACTIONS}, the chart declares {ACTIONS}")

_REMIND = {
    GuardMode.SHADOW: DecisionKind.WOULD_WARN,
    GuardMode.WARN: DecisionKind.WARN,
    GuardMode.ENFORCE: DecisionKind.WARN,
}


class RepeatedToolFailureGuard:
    """One interactive foreground ACP prompt's repeated tool-failure guard.

    Create one when the prompt starts, call :meth:`observe` once per fully
    settled tool batch, drop it when the prompt ends.  It holds no arguments,
    results or error text, and it never does IO.
    """

    __slots__ = (
        "_batch_count",
        "_candidate_tool_type",
        "_enforcement_disabled",
        "_failure_count",
        "_key",
        "_mode",
        "_phase",
        "_streaks",
    )

    def __init__(self, mode: GuardMode | str = GuardMode.SHADOW) -> None:
        self._mode = GuardMode(mode)
        self._phase = _IDLE
        self._key: FailureKey | None = None
        self._failure_count = 0
        self._batch_count = 0
        self._streaks = 0
        self._enforcement_disabled = False
        self._candidate_tool_type: str | None = None

    # -- read-only state ---------------------------------------------------

    @property
    def mode(self) -> GuardMode:
        return self._mode

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def key(self) -> FailureKey | None:
        """The private failure key of the current candidate, if any."""
        return self._key

    @property
    def failure_count(self) -> int:
        """Eligible failures of the current candidate since its streak began."""
        return self._failure_count

    @property
    def batch_count(self) -> int:
        """Complete batches the current candidate's failures came in."""
        return self._batch_count

    @property
    def candidate_ordinal(self) -> int:
        """The ordinal of the *active* candidate streak; 0 whenever the phase is idle.

        The prompt's first candidate streak is 1, the next 2, and so on: a reset
        or a different key ends the streak, and the next candidate gets the next
        number.  While no candidate is active (``idle``) it reads 0.
        """
        return 0 if self._phase is _IDLE else self._streaks

    @property
    def last_candidate_ordinal(self) -> int:
        """The ordinal of the prompt's most recent candidate streak, active or ended; 0 before any.

        After a reset this is the ordinal of the streak that reset ended, which
        is what the reset's diagnostic log record names.
        """
        return self._streaks

    @property
    def candidate_tool_type(self) -> str | None:
        """``native``/``mcp`` of the candidate's entries in the batch last counted.

        None when those entries disagreed, or when there is no candidate.  It is
        what telemetry labels ``tool_type``; the classifier already worked it out.
        """
        return self._candidate_tool_type

    @property
    def enforcement_disabled(self) -> bool:
        """True once an unreliable drain or an unsupported outcome downgraded the prompt."""
        return self._enforcement_disabled

    def __repr__(self) -> str:
        return (
            f"RepeatedToolFailureGuard(mode={self._mode.value}, phase={self._phase.value}, "
            f"key={self._key!r}, failure_count={self._failure_count}, "
            f"batch_count={self._batch_count}, candidate_ordinal={self.candidate_ordinal}, "
            f"enforcement_disabled={self._enforcement_disabled})"
        )

    # -- the reducer -------------------------------------------------------

    def observe(self, receipt: BatchReceipt, boundary: InputBoundary | None = None) -> Decision:
        """Reduce one fully settled batch; return what the session should do."""
        phase = self._phase
        if self._mode is _OFF or phase is _LATCHED:
            return _NONE_DECISIONS[phase]
        verdict = classify_batch(receipt, boundary or QUIET_BOUNDARY)
        transition = self._select(self._facts_index(verdict), verdict)
        return self._apply(transition, verdict)

    def _facts_index(self, verdict: BatchVerdict) -> int:
        """Encode the five facts (``statecharts.CONDITIONS``) of this verdict as bits."""
        key = self._key
        candidate = verdict.key
        index = 0
        if verdict.reason is not None:
            index = _HAS_RESET_REASON
        elif candidate is not None:
            index = _ELIGIBLE
            if key is not None and candidate == key:
                index = _KEY_MATCH
                if (
                    self._failure_count + verdict.failures >= REPEATED_TOOL_FAILURE_THRESHOLD
                    and self._batch_count + 1 >= REPEATED_TOOL_FAILURE_BATCH_THRESHOLD
                ):
                    index = _THRESHOLD_REACHED
        if key is not None and key.policy_tool_name in verdict.succeeded_tools:
            index |= _CANDIDATE_SUCCEEDED
        return index

    def _select(self, index: int, verdict: BatchVerdict) -> Transition:
        """Pick the transition for these facts (the engine-backed twin overrides this)."""
        return _ROWS[self._phase][index]

    def _apply(self, transition: Transition, verdict: BatchVerdict) -> Decision:
        before = self._phase
        after = transition.target
        action = transition.action
        self._phase = after
        if action == "hold":
            return _NONE_DECISIONS[before]
        if action == "reset":
            newly_disabled = verdict.downgrade and not self._enforcement_disabled
            if verdict.downgrade:
                self._enforcement_disabled = True
            self._key = None
            self._candidate_tool_type = None
            self._failure_count = 0
            self._batch_count = 0
            if before is _IDLE and not newly_disabled:
                return _NONE_DECISIONS[before]
            return decision(
                DecisionKind.RESET, verdict.reason or ResetReason.SUCCESS, before, after
            )
        self._candidate_tool_type = verdict.tool_type
        if action == "start_streak":
            self._key = verdict.key
            self._failure_count = verdict.failures
            self._batch_count = 1
            self._streaks += 1
            return decision(DecisionKind.TRACKED, None, before, after)
        # count, remind and latch all add this batch to the streak.
        self._failure_count += verdict.failures
        self._batch_count += 1
        if action == "count":
            kind = DecisionKind.TRACKED
        elif action == "remind":
            kind = _REMIND[self._mode]
        else:  # latch
            if self._mode is GuardMode.ENFORCE and not self._enforcement_disabled:
                kind = DecisionKind.STOP
            else:
                kind = DecisionKind.WOULD_STOP
        return decision(kind, None, before, after)
