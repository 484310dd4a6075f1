"""One guarded pydantic-ai run: the host side of :class:`~tool_failure_guard.core.PromptProtection`.

The capability's hooks feed this object framework events; it turns them into
core calls and hands the core's actions back:

- :meth:`GuardedRun.admit`: a model response's function calls, before they run
  (provider replays of answered call ids are never executed);
- :meth:`GuardedRun.executed` / :meth:`GuardedRun.invalid`: what the execution
  boundary and argument validation saw of each call;
- :meth:`GuardedRun.settle`: the batch is over (every call answered, or the run
  was interrupted): each call is settled from what was seen
  (:func:`~tool_failure_guard.integrations.pydantic_ai._outcomes.settle`),
  the core decides, the telemetry is reported and the action returned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence

import attrs
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
)

from tool_failure_guard.core import (
    LOOP_REPEATED_TOOL_FAILURE,
    Action,
    BatchSettlement,
    CallIdDeduplicator,
    CallOutcome,
    FunctionCall,
    Stop,
    provider_duplicate,
)
from tool_failure_guard.core.protections import AnsweredCall
from tool_failure_guard.framework_protection import protection_for_run
from tool_failure_guard.guard import DecisionKind, GuardMode, InputBoundary
from tool_failure_guard.integrations._api import (
    ActionLog,
    GuardStop,
    RunReport,
    WarnOnce,
    holds_back_replays,
    plain_exception_warning,
)
from tool_failure_guard.integrations.pydantic_ai._history import args_of, returned_of
from tool_failure_guard.integrations.pydantic_ai._outcomes import (
    RETURNED,
    Execution,
    Returned,
    settle,
)
from tool_failure_guard.integrations.pydantic_ai._report import ROUTE, RunTelemetry
from tool_failure_guard.telemetry.sink import (
    GuardTelemetry,
    NullTelemetry,
    PromptOutcome,
)

_log = logging.getLogger("tool_failure_guard.integrations.pydantic_ai")


@attrs.frozen(kw_only=True)
class _Admitted:
    response: ModelResponse | None  #: the model response the batch is the calls of
    settlement: BatchSettlement
    tools: dict[
        str, tuple[str | None, str]
    ]  #: call id -> (registered tool name or None, tool type)


#: The once-per-capability warning of a tool whose plain exception ends the run.
PLAIN_EXCEPTION_WARNING = plain_exception_warning(
    "pydantic-ai",
    "raise ToolFailed(...) from the exception (from pydantic_ai import ToolFailed): the "
    "model gets the failure and the guard counts it, typed by its cause",
)
_PLAIN_LOG = logging.getLogger("tool_failure_guard.integrations.pydantic_ai")


class GuardedRun:
    """The protection state of one run and what it has seen."""

    def __init__(
        self,
        *,
        mode: GuardMode,
        telemetry: GuardTelemetry,
        tool_call_cap: int | None,
        prompt_id: str,
        invalid_params_limit: int | None = None,
        answered: Iterable[str | AnsweredCall] = (),
        keep_actions: bool = False,
        plain_exception_warning: WarnOnce | None = None,
    ) -> None:
        self.mode = mode
        #: the capability's (shared by its runs): one warning per adapter instance
        self._plain_exception_warning = (
            plain_exception_warning if plain_exception_warning is not None else WarnOnce()
        )
        self.tool_call_cap = tool_call_cap
        self.tool_calls = 0
        self.prompt_id = prompt_id
        #: the conversation's answered calls: its history's, then each settled batch's
        self._dedup = CallIdDeduplicator(answered)
        self.protection = protection_for_run(
            mode,
            dedup=self._dedup,
            tool_call_cap=tool_call_cap,
            invalid_params_limit=invalid_params_limit,
        )
        #: off and shadow run a provider replay as pydantic-ai would (the run is the same)
        self.holds_back_replays = holds_back_replays(mode)
        #: None without a sink: nothing to report, nothing to pay per call
        self.telemetry = (
            None
            if isinstance(telemetry, NullTelemetry)
            else RunTelemetry(telemetry, prompt_id, replays_held_back=self.holds_back_replays)
        )
        self._log = ActionLog(ROUTE)
        self.started = time.monotonic()
        self.stop: Stop | None = None
        self.guard_stop: GuardStop | None = None
        #: the guard decision kind of each batch it reduced, in order
        self.decisions: list[str] = []
        #: the core's action of each settled batch (kept only when asked: tests read receipts)
        self.actions: list[Action] | None = [] if keep_actions else None
        self.model_turns = 0
        self.executions_seen = 0
        self.calls_settled = 0
        self.unobserved_reported = False
        self._batch: _Admitted | None = None
        self._executions: dict[str, Execution] = {}
        self._invalid: set[str] = set()

    # -- what the hooks report --------------------------------------------------------

    @property
    def open_batch(self) -> bool:
        return self._batch is not None

    @property
    def open_response(self) -> ModelResponse | None:
        """The model response whose batch is open (None: no batch is)."""
        return self._batch.response if self._batch is not None else None

    def admit(
        self,
        calls: Sequence[ToolCallPart],
        tools: dict[str, tuple[str | None, str]],
        response: ModelResponse | None = None,
    ) -> None:
        """Open the batch of one model response's function calls (before any runs).

        ``tools`` maps each call's name to its registered identity and tool type
        (``None`` identity: no tool has that name).
        """
        if self.stop is not None:
            return
        if self._batch is not None:
            if self._batch.response is not response:
                self.unobserved(
                    "a model response's calls arrived while the previous batch was "
                    "never settled (after_node_run was not reached)"
                )
            return
        function_calls = [
            FunctionCall(call_id=part.tool_call_id, name=part.tool_name, args=args_of(part))
            for part in calls
        ]
        admission = self.protection.admit(function_calls)
        self._batch = _Admitted(
            response=response,
            settlement=self.protection.open_batch(admission),
            tools={
                call.call_id: tools.get(call.name, (None, "native")) for call in admission.calls
            },
        )

    def plain_exception(self, tool: str, exception: str) -> None:
        """A tool raised ``exception``, which pydantic-ai answers by ending the run."""
        self._plain_exception_warning.warn(_PLAIN_LOG, PLAIN_EXCEPTION_WARNING, tool, exception)

    def is_provider_duplicate(self, call_id: str | None) -> bool:
        """``call_id`` is a replay the run answers without running it (warn, enforce)."""
        batch = self._batch
        return (
            self.holds_back_replays
            and batch is not None
            and call_id is not None
            and batch.settlement.is_provider_duplicate(call_id)
        )

    def executed(self, call_id: str | None, execution: Execution) -> None:
        """The execution boundary saw the tool function start (``running``) or settle.

        The first settled report wins; a report after the batch settled is dropped.
        """
        if call_id is None:
            return
        known = self._executions.get(call_id)
        if execution.status == "running":
            if known is None:
                self.executions_seen += 1
                self._executions[call_id] = execution
                if self._batch is None and self.stop is None:
                    self.unobserved(
                        "a tool call ran outside any batch the adapter admitted "
                        "(before_node_run was not reached)"
                    )
        elif known is None or known.status == "running":
            self._executions[call_id] = execution

    def invalid(self, call_id: str | None) -> None:
        """Argument validation failed for this call (``on_tool_validate_error``)."""
        if call_id is not None:
            self._invalid.add(call_id)

    def unobserved(self, why: str) -> None:
        """Fail-open made visible, when it happens: the guard observes nothing of this run."""
        if self.unobserved_reported:
            return
        self.unobserved_reported = True
        _log.warning(
            "pydantic_ai adapter (RepeatedToolFailureCapability): %s; the guard observes "
            "nothing for this run (fail-open)",
            why,
        )

    # -- the batch is over --------------------------------------------------------------

    def settle(
        self,
        answers: Iterable[ModelMessage],
        *,
        interrupted: bool = False,
        user_input: bool = False,
    ) -> Action | None:
        """Settle the open batch from ``answers`` (the requests carrying its tool returns).

        ``interrupted``: the run was cancelled or aborted inside the batch (the
        guard is then not consulted); ``user_input``: user content arrived with
        the answers (the guard's external-input boundary).  None when no batch
        was open.
        """
        batch = self._batch
        if batch is None:
            return None
        self._batch = None
        settlement = batch.settlement
        returns: dict[str, Returned] = {}
        executions = self._executions
        for message in answers:
            if not isinstance(message, ModelRequest):
                continue
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and part.tool_call_id not in returns:
                    ran = executions.get(part.tool_call_id)
                    if part.outcome == "success" and ran is not None and ran.status == "success":
                        # Ran and returned, answered as such: no text of it is ever read.
                        returns[part.tool_call_id] = RETURNED
                    else:
                        returns[part.tool_call_id] = returned_of(part)
        for call in settlement.calls:
            outcome = self._outcome(call, batch, returns.get(call.call_id), interrupted)
            if outcome is not None:
                settlement.settle(outcome)
        missing = settlement.missing()
        if missing and not interrupted:
            _log.warning(
                "pydantic_ai adapter: %d of %d calls of a batch had no outcome it could see; "
                "the receipt is incomplete",
                len(missing),
                len(settlement.calls),
            )
        boundary = InputBoundary(has_external_input=user_input)
        action = self.protection.after_batch(settlement, boundary, cancelled=interrupted)
        # The framework records every call's answer in the history: a later replay is a duplicate.
        self._dedup.mark_answered(call.call_id for call in settlement.calls)
        admitted = settlement.admission
        self.tool_calls += len(admitted.executable if self.holds_back_replays else admitted.calls)
        self.calls_settled += sum(1 for outcome in settlement.outcomes() if outcome is not None)
        decided = action.decision
        if decided is not None:
            self.decisions.append(decided.kind.value)
        if self.actions is not None:
            self.actions.append(action)
        if self.telemetry is not None:
            self.telemetry.batch(self.protection, settlement, action)
        self._logged(action)
        if isinstance(action, Stop):
            self.stop = action
            self.guard_stop = GuardStop.of(action, self.protection)
        self._executions.clear()
        self._invalid.clear()
        return action

    def _logged(self, action: Action) -> None:
        """The run's first reminder and first stop, would-be or real: one log record each."""
        decision = action.decision
        batch = self.protection.batches
        if decision is not None:
            self._log.decided(
                decision.kind, self.mode, batch=batch, loop_type=LOOP_REPEATED_TOOL_FAILURE
            )
        if isinstance(action, Stop) and (
            decision is None or decision.kind is not DecisionKind.STOP
        ):
            self._log.decided(DecisionKind.STOP, self.mode, batch=batch, loop_type=action.loop_type)
        held_back = self.protection.would_stop
        if held_back is not None:  # a stop the mode held back (logged once per run)
            self._log.decided(DecisionKind.WOULD_STOP, self.mode, batch=batch, loop_type=held_back)

    def _outcome(
        self, call: FunctionCall, batch: _Admitted, returned: Returned | None, interrupted: bool
    ) -> CallOutcome | None:
        tool, tool_type = batch.tools.get(call.call_id, (None, "native"))
        if self.holds_back_replays and batch.settlement.is_provider_duplicate(call.call_id):
            return provider_duplicate(call, tool=tool, tool_type=tool_type)
        return settle(
            call,
            tool=tool,
            tool_type=tool_type,
            execution=self._executions.get(call.call_id),
            invalid_args=call.call_id in self._invalid,
            returned=returned,
            interrupted=interrupted,
        )

    # -- what the run did ----------------------------------------------------------------

    def report(self) -> RunReport:
        """The run's :class:`RunReport` so far (every mode)."""
        return RunReport(
            mode=self.mode,
            decisions=tuple(self.decisions),
            batches=self.protection.batches,
            tool_calls=self.tool_calls,
            observed=self.calls_settled,
            stop=self.guard_stop,
            would_stop_loop_type=self.protection.would_stop,
        )

    def finished(
        self, *, stop_reason: str, input_tokens: int | None, output_tokens: int | None
    ) -> None:
        """Report the run's outcome record; warn once when tools ran but nothing was observed."""
        protection = self.protection
        if self.executions_seen and not self.calls_settled:
            self.unobserved(
                f"the run executed {self.executions_seen} tool call(s) but no batch was observed"
            )
        if self.telemetry is None:
            return
        self.telemetry.finished(
            PromptOutcome(
                prompt_id=self.prompt_id,
                route=ROUTE,
                mode=self.mode.value,
                stop_reason=stop_reason,
                loop_type=protection.loop_type,
                model_turns=self.model_turns,
                tool_calls=self.tool_calls,
                tool_call_cap=self.tool_call_cap or 0,  # 0: no cap
                batches=protection.batches,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                model_latency_s=None,
                wall_time_s=max(0.0, time.monotonic() - self.started),
                # Input queued while a batch ran arrives with its answers and is seen at
                # every boundary (external_input): the framework's history is this host's
                # drain, so its prompts belong to the drain cohort.
                drain_supported=True,
                input_boundary="drain",
            )
        )
