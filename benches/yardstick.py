"""The bench's yardstick (a plain hand-written reducer) and its paired timing.

:class:`YardstickReducer` exists only to be compared with: it is the reducer one
would write by hand, never the runtime.  :func:`compare` times two contenders
over the same chunks of work in alternating passes.
"""

import gc
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

import attrs

from benches.corpus import Prompt
from tool_failure_guard.guard import (
    INELIGIBLE_RESET_REASON_PRECEDENCE,
    REPEATED_TOOL_FAILURE_BATCH_THRESHOLD,
    REPEATED_TOOL_FAILURE_THRESHOLD,
    BatchReceipt,
    Decision,
    DecisionKind,
    GuardMode,
    InputBoundary,
    Phase,
    RepeatedToolFailureGuard,
    ResetReason,
)
from tool_failure_guard.guard._values import decision as interned

_T = TypeVar("_T")

# -- the yardstick: a plain hand-written reducer, for comparison only ----------
#
# NOT the runtime.  Sessions never use it; the runtime's transitions are derived
# from the statechart (guard._table).  It is the reducer one would write by hand
# in plain CPython, the way the original TypeScript reducer is written: classify
# each entry with if/else, then a branch per phase.  The bench checks that it
# reaches the same decisions as the guard on the whole corpus, then times both
# side by side over the same prepared receipts.

_YS_PRECEDENCE = {reason: rank for rank, reason in enumerate(INELIGIBLE_RESET_REASON_PRECEDENCE)}


class YardstickReducer:
    """Yardstick only: a plain hand-written reducer with the guard's decisions."""

    __slots__ = ("batches", "disabled", "failures", "key", "mode", "ordinal", "phase", "streaks")

    def __init__(self, mode: GuardMode) -> None:
        self.mode = mode
        self.phase = Phase.IDLE
        self.key: tuple[str, str] | None = None
        self.failures = 0
        self.batches = 0
        self.disabled = False
        self.ordinal = 0  # the active candidate's; 0 in idle
        self.streaks = 0

    def observe(self, receipt: BatchReceipt, boundary: InputBoundary | None = None) -> Decision:
        phase = self.phase
        if self.mode is GuardMode.OFF or phase is Phase.LATCHED:
            return interned(DecisionKind.NONE, None, phase, phase)
        reason: ResetReason | None = None
        downgrade = False
        if boundary is not None and not boundary.reliable:
            reason, downgrade = ResetReason.UNRELIABLE_INPUT, True
        elif boundary is not None and boundary.has_external_input:
            reason = ResetReason.EXTERNAL_INPUT
        elif boundary is not None and boundary.has_queued_prompt:
            reason = ResetReason.QUEUED_PROMPT
        elif not receipt.complete:
            reason = ResetReason.INCOMPLETE
        succeeded: set[str] = set()
        candidate: tuple[str, str] | None = None
        count = 0
        if reason is None:
            failed: list[tuple[str, str]] = []
            for o in receipt.observations:
                if o.provider_duplicate:
                    continue
                terminal, execution = o.terminal_status, o.execution_status
                if terminal == "cancelled":
                    found = ResetReason.CANCELLED
                elif terminal == "success":
                    if execution == "success" or execution == "not_started":
                        if o.policy_tool_name:
                            succeeded.add(o.policy_tool_name)
                            continue
                        found = ResetReason.UNKNOWN
                    elif execution == "error" or execution == "cancelled":
                        found = ResetReason.CONTRACT_VIOLATION
                    else:
                        found = ResetReason.UNKNOWN
                elif execution == "error":
                    error_type = o.execution_error_type
                    if o.policy_tool_name and error_type and error_type != "unknown":
                        failed.append((o.policy_tool_name, error_type))
                        continue
                    found = ResetReason.UNKNOWN
                elif execution == "cancelled":
                    found = ResetReason.CANCELLED
                elif execution == "not_started":
                    found = ResetReason.NOT_STARTED
                elif execution == "success":
                    found = ResetReason.POST_EXECUTION_FAILURE
                else:
                    found = ResetReason.UNKNOWN
                if found is ResetReason.UNKNOWN or found is ResetReason.CONTRACT_VIOLATION:
                    downgrade = True
                if reason is None or _YS_PRECEDENCE[found] < _YS_PRECEDENCE[reason]:
                    reason = found
            if reason is None:
                for failure in failed:
                    if failure[0] in succeeded:
                        continue
                    if candidate is None:
                        candidate = failure
                    elif failure != candidate:
                        reason = ResetReason.MIXED
                        break
                    count += 1
        if reason is not None:
            newly_disabled = downgrade and not self.disabled
            if downgrade:
                self.disabled = True
            if phase is Phase.IDLE and not newly_disabled:
                return interned(DecisionKind.NONE, None, phase, phase)
            return self._reset(reason, phase)
        if candidate is None:
            if self.key is not None and self.key[0] in succeeded:
                return self._reset(ResetReason.SUCCESS, phase)
            return interned(DecisionKind.NONE, None, phase, phase)
        if candidate != self.key:
            self.key, self.failures, self.batches = candidate, count, 1
            self.streaks += 1
            self.ordinal = self.streaks
            self.phase = Phase.TRACKING
            return interned(DecisionKind.TRACKED, None, phase, Phase.TRACKING)
        self.failures += count
        self.batches += 1
        if phase is Phase.WARNED:
            self.phase = Phase.LATCHED
            if self.mode is GuardMode.ENFORCE and not self.disabled:
                return interned(DecisionKind.STOP, None, phase, Phase.LATCHED)
            return interned(DecisionKind.WOULD_STOP, None, phase, Phase.LATCHED)
        if (
            self.failures >= REPEATED_TOOL_FAILURE_THRESHOLD
            and self.batches >= REPEATED_TOOL_FAILURE_BATCH_THRESHOLD
        ):
            self.phase = Phase.WARNED
            kind = DecisionKind.WOULD_WARN if self.mode is GuardMode.SHADOW else DecisionKind.WARN
            return interned(kind, None, phase, Phase.WARNED)
        return interned(DecisionKind.TRACKED, None, phase, phase)

    def _reset(self, reason: ResetReason, phase: Phase) -> Decision:
        self.key, self.failures, self.batches, self.ordinal = None, 0, 0, 0
        self.phase = Phase.IDLE
        return interned(DecisionKind.RESET, reason, phase, Phase.IDLE)


class _Reducer(Protocol):
    def observe(self, receipt: BatchReceipt, boundary: InputBoundary | None = None) -> Decision: ...


def _observe_seconds(corpus: list[Prompt], make: Callable[[GuardMode], _Reducer]) -> float:
    """Seconds of ``observe`` over ``corpus``; fresh reducers are made before timing."""
    pairs = [(make(mode).observe, batches) for mode, batches in corpus]
    clock = time.perf_counter
    start = clock()
    for observe, batches in pairs:
        for receipt, boundary in batches:
            observe(receipt, boundary)
    return clock() - start


@attrs.frozen
class Comparison:
    """Paired timings of two contenders over the same chunks of work.

    ``first[p][c]`` / ``second[p][c]`` are the seconds of pass ``p`` on chunk ``c``.
    """

    first: list[list[float]]
    second: list[list[float]]

    @property
    def best_ratio(self) -> float:
        """Sum over chunks of each side's fastest pass, first over second.

        On a shared machine a pre-emption lands on one side of one chunk; the
        per-chunk minimum drops it, as ``timeit``'s best-of-repeats does.
        """
        return self.best_total(True) / self.best_total(False)

    @property
    def pass_ratios(self) -> list[float]:
        """Each whole pass's ratio, sorted: the spread, pre-emptions included."""
        return sorted(sum(f) / sum(s) for f, s in zip(self.first, self.second, strict=True))

    def best_total(self, first: bool) -> float:
        """Sum over chunks of one side's fastest pass (the first side's when ``first``)."""
        passes = self.first if first else self.second
        return sum(min(row[chunk] for row in passes) for chunk in range(len(passes[0])))


def compare(
    chunks: list[_T], first: Callable[[_T], float], second: Callable[[_T], float], passes: int
) -> Comparison:
    """Time ``first`` and ``second`` on every chunk, their order alternating chunk by chunk."""
    first_times: list[list[float]] = []
    second_times: list[list[float]] = []
    for _ in range(passes):
        first_row: list[float] = []
        second_row: list[float] = []
        for number, chunk in enumerate(chunks):
            if number % 2:
                second_row.append(second(chunk))
                first_row.append(first(chunk))
            else:
                first_row.append(first(chunk))
                second_row.append(second(chunk))
        first_times.append(first_row)
        second_times.append(second_row)
    return Comparison(first_times, second_times)


def observe_against_yardstick(corpus: list[Prompt], passes: int = 9, chunk: int = 50) -> Comparison:
    """The guard (first) and the yardstick (second) over the same receipts, gc off."""
    chunks = [corpus[i : i + chunk] for i in range(0, len(corpus), chunk)]
    enabled = gc.isenabled()
    gc.disable()
    try:
        return compare(
            chunks,
            lambda part: _observe_seconds(part, RepeatedToolFailureGuard),
            lambda part: _observe_seconds(part, YardstickReducer),
            passes,
        )
    finally:
        if enabled:
            gc.enable()


def yardstick_agrees(
    corpus: list[Prompt], make: Callable[[GuardMode], YardstickReducer] = YardstickReducer
) -> bool:
    """The yardstick reaches the guard's decision and state on every batch of the corpus."""
    for mode, batches in corpus:
        guard = RepeatedToolFailureGuard(mode)
        yardstick = make(mode)
        for receipt, boundary in batches:
            if guard.observe(receipt, boundary) is not yardstick.observe(receipt, boundary):
                return False
            key = guard.key
            state = (
                guard.phase,
                None if key is None else (key.policy_tool_name, key.execution_error_type),
                guard.failure_count,
                guard.batch_count,
                guard.candidate_ordinal,
                guard.enforcement_disabled,
            )
            expected = (
                yardstick.phase,
                yardstick.key,
                yardstick.failures,
                yardstick.batches,
                yardstick.ordinal,
                yardstick.disabled,
            )
            if state != expected:
                return False
    return True
