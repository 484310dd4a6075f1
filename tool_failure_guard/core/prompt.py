"""One run's protection: the object a host drives, from admission to the next action.

A *run* is one interactive prompt (one ``Agent.run``, one ``session/prompt``):
create one :class:`PromptProtection` per run, drop it when the run ends, so
the guard and the other protections live exactly as long as the run::

    protection = PromptProtection(mode)
    while True:
        calls = ...                               # the model response's function calls
        admission = protection.admit(calls)       # de-duplicated; replays never execute
        batch = protection.open_batch(admission)
        for call in admission.calls:              # settle every call, on its path
            batch.settle(outcome_of(call))        # tool_failure_guard.core.outcomes
        action = protection.after_batch(batch, boundary)
        if isinstance(action, Stop): ...          # no further model request
        # Continue: function responses, then action.system_texts, then the next request

Inside :meth:`PromptProtection.after_batch`, in the specification's order:

1. a cancelled run keeps its settled results and skips the guard
   (:class:`~tool_failure_guard.core.actions.PromptCancelled`);
2. protections 1-2 (provider call-id replays, invalid parameters) may stop;
3. the guard reduces the receipt with the input boundary (what arrived from
   the user since the batch began: :data:`~tool_failure_guard.guard.InputBoundary`); ``stop``
   stops as ``repeated_tool_execution_failure``, ``warn`` adds the reminder;
4. protection 4 (the tool-call cap).

A host whose input boundary needs IO between steps 2 and 3 (the ACP session's
mid-turn drain) calls :meth:`PromptProtection.settled` and then
:meth:`PromptProtection.at_boundary` instead.  The first stop is latched: the
run's loop type is that protection's, and the object refuses further batches.

Protections 1, 2 and 4 are the original's always-on backstops of its own agent:
they act in every mode, as in the ACP agent.  A host whose framework has its own
limits (the framework adapters, the coding-CLI hooks) passes
``limits_follow_mode=True``: then ``off`` consults none of them, ``shadow``
consults them without acting (no stop, no call held back by the cap), and only
``warn``/``enforce`` act.  What a protection decided but did not carry out is
:attr:`PromptProtection.would_stop`, so a shadow report still says it.
Sans-IO: no files, sockets, clocks, randomness or global state.
"""

from __future__ import annotations

from collections.abc import Sequence

from tool_failure_guard.core.actions import (
    STOP_NOTICES,
    Action,
    Continue,
    GuardStep,
    PromptCancelled,
    Stop,
)
from tool_failure_guard.core.outcomes import FunctionCall
from tool_failure_guard.core.protections import (
    DEFAULT_TOOL_CALL_CAP,
    INVALID_TOOL_PARAMS_LIMIT,
    LOOP_REPEATED_TOOL_FAILURE,
    Admission,
    CallIdDeduplicator,
    PromptProtections,
)
from tool_failure_guard.core.settlement import BatchSettlement
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    DecisionKind,
    GuardMode,
    InputBoundary,
    RepeatedToolFailureGuard,
)

#: The boundary of a host with no mid-run user input: nothing arrived, reliably.
QUIET_BOUNDARY = InputBoundary()
_STOP = DecisionKind.STOP
_WARN = DecisionKind.WARN
_WOULD_STOP = DecisionKind.WOULD_STOP
_ACTING_MODES = frozenset({GuardMode.WARN, GuardMode.ENFORCE})
_REMINDER = (REPEATED_TOOL_FAILURE_REMINDER,)


class PromptProtection:
    """The guard and the protections beside it for one run, driven by its host."""

    def __init__(
        self,
        mode: GuardMode,
        *,
        dedup: CallIdDeduplicator | None = None,
        tool_call_cap: int | None = DEFAULT_TOOL_CALL_CAP,
        invalid_params_limit: int | None = INVALID_TOOL_PARAMS_LIMIT,
        limits_follow_mode: bool = False,
    ) -> None:
        """``dedup``: the conversation's answered calls, shared across its runs.

        Without one the run gets its own and marks each settled batch's calls
        answered itself.  A ``dedup`` you pass is yours: mark the calls answered
        (``dedup.mark_answered``) when you record their results, as the ACP
        session does when it persists them.  ``tool_call_cap`` and
        ``invalid_params_limit`` None switch those protections off;
        ``limits_follow_mode`` (module docstring) makes protections 1, 2 and 4
        act only in ``warn`` and ``enforce``.
        """
        if not isinstance(mode, GuardMode):
            raise TypeError(f"mode must be a GuardMode; got {mode!r}")
        self._mode = mode
        self._guard = RepeatedToolFailureGuard(mode)
        self._owns_dedup = dedup is None
        self._protections = PromptProtections(
            dedup if dedup is not None else CallIdDeduplicator(),
            tool_call_cap,
            invalid_params_limit,
        )
        self._limits_act = not limits_follow_mode or mode in _ACTING_MODES
        self._limits_consulted = not limits_follow_mode or mode is not GuardMode.OFF
        self._would_stop: str | None = None
        self._pending: BatchSettlement | None = None
        self._stop: Stop | None = None
        self._batches = 0
        self._guarded = 0

    @property
    def mode(self) -> GuardMode:
        return self._mode

    @property
    def guard(self) -> RepeatedToolFailureGuard:
        """The run's guard (read-only use: its phase and counts, for telemetry)."""
        return self._guard

    @property
    def protections(self) -> PromptProtections:
        return self._protections

    @property
    def loop_type(self) -> str | None:
        """The loop type of the first protection that stopped the run, if any."""
        return self._protections.latch.loop_type

    @property
    def stopped(self) -> Stop | None:
        """The stop that ended the run, if one did."""
        return self._stop

    @property
    def would_stop(self) -> str | None:
        """The loop type of the first stop decided but not carried out, if any.

        The guard's would-stop (``shadow``, ``warn``) and, with
        ``limits_follow_mode``, a shadow protection's: what a report shows of
        the stop a mode held back.  A real stop is :attr:`stopped`.
        """
        return self._would_stop

    @property
    def batches(self) -> int:
        """Settled batches so far (cancelled ones included)."""
        return self._batches

    def admit(self, calls: Sequence[FunctionCall]) -> Admission:
        """De-duplicate one model response's calls (same-batch duplicates dropped)."""
        if self._stop is not None:
            raise RuntimeError(
                f"this run was stopped ({self._stop.loop_type}): no further model request "
                "may be made, so there is no batch to admit"
            )
        if self._pending is not None:
            raise RuntimeError(
                "the previous batch still waits for its input boundary: call at_boundary()"
            )
        return self._protections.admit(calls, capped=self._limits_act)

    def open_batch(self, admission: Admission) -> BatchSettlement:
        """The settlement that collects ``admission``'s outcomes by call id."""
        return BatchSettlement(admission)

    def after_batch(
        self,
        batch: BatchSettlement,
        boundary: InputBoundary = QUIET_BOUNDARY,
        *,
        cancelled: bool = False,
    ) -> Action:
        """The action for one settled batch, when its input boundary is already known."""
        early = self.settled(batch, cancelled=cancelled)
        if early is not None:
            return early
        return self.at_boundary(boundary)

    def settled(self, batch: BatchSettlement, *, cancelled: bool = False) -> Action | None:
        """Steps 1-2 for a settled batch: a stop or cancel, or None (then :meth:`at_boundary`)."""
        if self._stop is not None:
            raise RuntimeError(f"this run was stopped ({self._stop.loop_type})")
        if self._pending is not None:
            raise RuntimeError("the previous batch still waits for its input boundary")
        batch.receipt()  # close it: a later outcome is a late duplicate
        self._batches += 1
        if self._owns_dedup:
            self._protections.dedup.mark_answered([call.call_id for call in batch.calls])
        if cancelled:
            return PromptCancelled()
        if self._limits_consulted:
            loop_type = self._protections.before_guard(batch.admission, batch.settled())
            if loop_type is not None:
                if self._limits_act:
                    return self._stopping(loop_type, None)
                self._held_back(loop_type)
        self._pending = batch
        return None

    def at_boundary(self, boundary: InputBoundary, *, cancelled: bool = False) -> Action:
        """Steps 3-4 for the batch :meth:`settled` let through, with its input boundary."""
        batch = self._pending
        if batch is None:
            raise RuntimeError("no settled batch waits for an input boundary: call settled()")
        self._pending = None
        if cancelled:
            return PromptCancelled()
        guard = self._guard
        failure_count_before, batch_count_before = guard.counts
        receipt = batch.receipt()
        decision = guard.observe(receipt, boundary)
        self._guarded += 1
        failure_count, batch_count = guard.counts
        step = GuardStep(
            mode=self._mode,
            decision=decision,
            receipt=receipt,
            boundary=boundary,
            batch_ordinal=self._batches,
            failure_count_before=failure_count_before,
            batch_count_before=batch_count_before,
            failure_count=failure_count,
            batch_count=batch_count,
        )
        kind = decision.kind
        if kind is _STOP:
            return self._stopping(LOOP_REPEATED_TOOL_FAILURE, step)
        if kind is _WOULD_STOP:
            self._held_back(LOOP_REPEATED_TOOL_FAILURE)
        if self._limits_consulted:
            loop_type = self._protections.after_guard(batch.executed)
            if loop_type is not None:
                if self._limits_act:
                    return self._stopping(loop_type, step)
                self._held_back(loop_type)
        return Continue(system_texts=_REMINDER if kind is _WARN else (), guard_step=step)

    def _held_back(self, loop_type: str) -> None:
        if self._would_stop is None:
            self._would_stop = loop_type

    def _stopping(self, loop_type: str, step: GuardStep | None) -> Stop:
        first = self._protections.latch.record(loop_type)
        self._stop = Stop(
            loop_type=loop_type, notice=STOP_NOTICES[loop_type], first=first, guard_step=step
        )
        return self._stop
