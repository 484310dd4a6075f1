"""The per-prompt guard: the derived table run on a small slotted state.

Per settled batch :meth:`RepeatedToolFailureGuard.observe` does four things,
each cheap:

1. gate: mode ``off`` or phase ``latched`` answer ``none`` at once;
2. classify the receipt and boundary (``guard._classify.scan_batch``: the
   verdict as a plain tuple, so nothing is allocated for it);
3. summarise verdict + streak as the five facts and look the transition up
   in the table derived from the statechart (``guard._table``), each entry
   prepared once at import as a :class:`Step` with its interned decisions;
4. run the transition's action on the streak and return the step's decision.

The object is mutable (one per prompt, owned by one session task) but only
through ``observe``; everything it exposes is read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from tool_failure_guard.guard._chart_table import ACTIONS, CONDITIONS
from tool_failure_guard.guard._classify import scan_batch
from tool_failure_guard.guard._table import TRANSITIONS, Transition
from tool_failure_guard.guard._values import (
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

_IDLE = Phase.IDLE
_LATCHED = Phase.LATCHED
_OFF = GuardMode.OFF
_ENFORCE = GuardMode.ENFORCE
_NONE_DECISIONS = {phase: decision(DecisionKind.NONE, None, phase, phase) for phase in Phase}
_THRESHOLD = REPEATED_TOOL_FAILURE_THRESHOLD
_BATCH_THRESHOLD = REPEATED_TOOL_FAILURE_BATCH_THRESHOLD

# Bits of the facts index, in the chart's declared condition order.
_BIT = {name: 1 << position for position, name in enumerate(CONDITIONS)}
_HAS_RESET_REASON = _BIT["has_reset_reason"]
_ELIGIBLE = _BIT["eligible"]
_KEY_MATCH = _ELIGIBLE | _BIT["key_match"]
_THRESHOLD_REACHED = _KEY_MATCH | _BIT["threshold_reached"]
_CANDIDATE_SUCCEEDED = _BIT["candidate_succeeded"]

# The actions the guard implements, as small codes; they must be exactly the
# ones the chart may name.
_HOLD, _RESET, _START_STREAK, _COUNT, _REMIND, _LATCH = range(6)
_ACTION_CODES = {
    "hold": _HOLD,
    "reset": _RESET,
    "start_streak": _START_STREAK,
    "count": _COUNT,
    "remind": _REMIND,
    "latch": _LATCH,
}
if frozenset(ACTIONS) != frozenset(_ACTION_CODES):  # pragma: no cover - import-time guard
    raise ImportError(f"guard implements {set(_ACTION_CODES)}, the chart declares {ACTIONS}")

_REMIND_KIND = {
    GuardMode.SHADOW: DecisionKind.WOULD_WARN,
    GuardMode.WARN: DecisionKind.WARN,
    GuardMode.ENFORCE: DecisionKind.WARN,
}


class Step(NamedTuple):
    """One derived transition, prepared for the per-batch path.

    A named tuple rather than an attrs value because ``observe`` unpacks it in
    one step; like the table it comes from, it is built once at import and
    never changed.

    ``decision`` and ``decisions`` are the interned decisions the action can
    return, worked out once from the transition's source and target:

    * ``hold``: ``decision`` is ``none``;
    * ``reset``: ``decision`` is ``none`` (an idle guard that changed nothing),
      ``decisions`` maps each reset reason to its ``reset`` decision;
    * ``start_streak`` and ``count``: ``decision`` is ``tracked``;
    * ``remind``: ``decisions`` maps each mode to ``would_warn`` / ``warn``;
    * ``latch``: ``decision`` is ``would_stop``, ``decisions[True]`` is ``stop``.
    """

    target: Phase
    action: int
    decision: Decision
    decisions: Mapping[object, Decision]
    transition: Transition


def _step(transition: Transition) -> Step:
    before, after = transition.source, transition.target
    action = _ACTION_CODES[transition.action]
    chosen = _NONE_DECISIONS[before]
    decisions: dict[object, Decision] = {}
    if action == _RESET:
        decisions = {r: decision(DecisionKind.RESET, r, before, after) for r in ResetReason}
    elif action in (_START_STREAK, _COUNT):
        chosen = decision(DecisionKind.TRACKED, None, before, after)
    elif action == _REMIND:
        decisions = {m: decision(k, None, before, after) for m, k in _REMIND_KIND.items()}
    elif action == _LATCH:
        chosen = decision(DecisionKind.WOULD_STOP, None, before, after)
        decisions = {True: decision(DecisionKind.STOP, None, before, after)}
    return Step(after, action, chosen, decisions, transition)


#: The derived table (``guard._table.TRANSITIONS``) with each transition prepared:
#: ``STEPS[phase][facts_index]``.
#: Each distinct transition is prepared once (a row repeats its transitions).
_PREPARED: dict[Transition, Step] = {
    transition: _step(transition)
    for row in TRANSITIONS.values()
    for transition in dict.fromkeys(row)
}
STEPS: dict[Phase, tuple[Step, ...]] = {
    phase: tuple(_PREPARED[transition] for transition in row) for phase, row in TRANSITIONS.items()
}
#: Every transition's prepared step (the engine-backed twin looks them up here).
STEP_OF: dict[Transition, Step] = _PREPARED


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
        self._mode = mode if type(mode) is GuardMode else GuardMode(mode)
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
    def counts(self) -> tuple[int, int]:
        """(:attr:`failure_count`, :attr:`batch_count`) in one read."""
        return self._failure_count, self._batch_count

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

    #: Where :meth:`observe` looks its transition up; the engine-backed twin
    #: (``guard.engine``) substitutes a view that asks the engine instead.
    _steps: Mapping[Phase, tuple[Step, ...]] = STEPS

    def observe(self, receipt: BatchReceipt, boundary: InputBoundary | None = None) -> Decision:
        """Reduce one fully settled batch; return what the session should do."""
        phase = self._phase
        if phase is _LATCHED or self._mode is _OFF:
            return _NONE_DECISIONS[phase]
        reason, downgrade, tool, error_type, failures, succeeded, tool_type = scan_batch(
            receipt, boundary
        )
        # The five facts (statecharts.CONDITIONS) of this batch and streak, as bits.
        key = self._key
        if reason is not None:
            index = _HAS_RESET_REASON
        elif tool is None:
            index = 0
        elif (
            key is not None
            and tool == key.policy_tool_name
            and error_type == key.execution_error_type
        ):
            if (
                self._failure_count + failures >= _THRESHOLD
                and self._batch_count + 1 >= _BATCH_THRESHOLD
            ):
                index = _THRESHOLD_REACHED
            else:
                index = _KEY_MATCH
        else:
            index = _ELIGIBLE
        if succeeded and key is not None and key.policy_tool_name in succeeded:
            index |= _CANDIDATE_SUCCEEDED

        after, action, chosen, decisions, _ = self._steps[phase][index]
        self._phase = after
        if action == _HOLD:
            return chosen
        if action == _COUNT:
            self._failure_count += failures
            self._batch_count += 1
            self._candidate_tool_type = tool_type
            return chosen
        if action == _START_STREAK:
            self._key = FailureKey(tool, error_type)  # type: ignore[arg-type]
            self._failure_count = failures
            self._batch_count = 1
            self._streaks += 1
            self._candidate_tool_type = tool_type
            return chosen
        if action == _RESET:
            newly_disabled = downgrade and not self._enforcement_disabled
            if downgrade:
                self._enforcement_disabled = True
            self._key = None
            self._candidate_tool_type = None
            self._failure_count = 0
            self._batch_count = 0
            if phase is _IDLE and not newly_disabled:
                return chosen
            return decisions[reason or ResetReason.SUCCESS]
        # remind and latch add this batch to the streak too.
        self._failure_count += failures
        self._batch_count += 1
        self._candidate_tool_type = tool_type
        if action == _REMIND:
            return decisions[self._mode]
        if self._mode is _ENFORCE and not self._enforcement_disabled:
            return decisions[True]
        return chosen
