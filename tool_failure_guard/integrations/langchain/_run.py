"""One guarded run: the core's :class:`PromptProtection` and what the LangChain host adds.

A :class:`GuardedRun` lives exactly as long as one agent run (from the
middleware's ``before_agent`` to its ``after_agent``: one ``invoke``,
``ainvoke`` or ``stream``), so a second run never starts already stopped.  It
is the host side only: it admits one ``AIMessage``'s tool calls as a batch,
keeps each call's last observed outcome (tool calls run in parallel threads
or tasks, so under a lock), settles them into the batch when the next model
request is about to be made, and keeps the core's action.  Every rule is the
core's.  Telemetry is reported after an action is taken and never changes it.

A tool call the model sent without an id (``""``: LangChain keeps it so, and
every ``ToolMessage`` of such calls answers ``""``) gets one from the core at
admission; which admitted call a ``wrap_tool_call`` is, is then claimed by
:meth:`GuardedRun.claim` (the call's name and arguments, the request's own
tool-call dict held for the batch, so a retry of the same call claims the
same one).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from langchain_core.messages import ToolMessage

from tool_failure_guard.core import (
    LOOP_REPEATED_TOOL_FAILURE,
    Action,
    BatchSettlement,
    CallOutcome,
    Continue,
    FunctionCall,
    Stop,
)
from tool_failure_guard.core.outcomes import skipped_by_cap
from tool_failure_guard.framework_protection import protection_for_run
from tool_failure_guard.guard import DecisionKind, GuardMode
from tool_failure_guard.integrations._api import (
    ActionLog,
    GuardStop,
    RunReport,
    holds_back_replays,
)
from tool_failure_guard.integrations.langchain._outcomes import replayed
from tool_failure_guard.telemetry import runs as _telemetry
from tool_failure_guard.telemetry.sink import (
    GuardTelemetry,
    NullTelemetry,
)

#: The ``route`` of this adapter's telemetry (``telemetry.names.FRAMEWORK_ROUTES``).
ROUTE = "langchain"
#: The logger of the adapter (the fail-open warning, swallowed telemetry errors).
LOGGER = logging.getLogger("tool_failure_guard.integrations.langchain")


class GuardedRun:
    """The protection of one agent run and the host state around it."""

    def __init__(
        self,
        mode: GuardMode,
        *,
        telemetry: GuardTelemetry | None = None,
        tool_call_cap: int | None = None,
        invalid_params_limit: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mode = mode
        self.run_id = uuid.uuid4().hex
        self.protection = protection_for_run(
            mode, tool_call_cap=tool_call_cap, invalid_params_limit=invalid_params_limit
        )
        #: off and shadow run a provider replay as LangChain would (the run is the same)
        self._holds_back_replays = holds_back_replays(mode)
        self.telemetry: GuardTelemetry = telemetry if telemetry is not None else NullTelemetry()
        #: no sink given: no record is built at all (issue 26: the guard's cost per call)
        self._reporting = telemetry is not None
        self.tool_call_cap = tool_call_cap
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self._batch: BatchSettlement | None = None
        self._calls: dict[str, FunctionCall] = {}
        self._outcomes: dict[str, CallOutcome] = {}
        #: the open batch's calls sent without an id, not yet claimed by a tool call
        self._blank: list[FunctionCall] = []
        #: claim key -> (token, the call it claimed), for the batch (:func:`_claim_key`)
        self._claims: dict[int | str, tuple[object, FunctionCall]] = {}
        #: the open batch's calls that must not run (provider replays, past the cap)
        self._refused: frozenset[str] = frozenset()
        self._actions = ActionLog(ROUTE)
        self._fail_open_warned = False
        self.stop: GuardStop | None = None
        self.decisions: list[str] = []
        self.model_turns = 0
        self.tool_calls = 0
        self.observed = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.finished = False
        #: The last ``AIMessage`` admitted (or the guard's own stop message, or the history's
        #: last before this run), and the lock the middleware admits the next one under.
        self.last_message: Any = None
        self.catch_up_lock = threading.Lock()

    # -- the framework's events ---------------------------------------------------------

    def model_response(self, calls: Sequence[FunctionCall], usage: Any = None) -> None:
        """One ``AIMessage``'s tool calls, admitted by the middleware: the next batch."""
        self.model_turns += 1
        self._count_usage(usage)
        if self._batch is not None:  # its tools never reported back: reduce what was seen
            self.close()
        if not calls or self.protection.stopped is not None:
            return
        admission = self.protection.admit(calls)
        sent = {call.call_id for call in calls if call.call_id}
        with self._lock:
            self._batch = self.protection.open_batch(admission)
            self._calls = {call.call_id: call for call in admission.calls}
            self._outcomes = {}
            self._blank = [call for call in admission.calls if call.call_id not in sent]
            self._claims = {}
            self._refused = (
                admission.provider_duplicates | admission.over_cap
                if self._holds_back_replays
                else admission.over_cap
            )
        self.tool_calls += len(
            admission.executable if self._holds_back_replays else admission.calls
        )

    def tool_call(self, tool_call: Any) -> tuple[FunctionCall | None, CallOutcome | None]:
        """The open batch's call a ``wrap_tool_call`` is (None: not one), and, when the call
        must not run, the guard's own outcome for it (a provider replay, a call past the
        tool-call cap), already recorded."""
        call_id = tool_call.get("id")
        with self._lock:
            if call_id:
                call = self._calls.get(str(call_id))
            else:
                name = str(tool_call.get("name") or "")
                call = self._claim(tool_call, "", lambda c: c.name == name, tool_call.get("args"))
            if call is None or call.call_id not in self._refused:
                return call, None
            batch = self._batch
            assert batch is not None  # _refused is the open batch's
            if batch.is_provider_duplicate(call.call_id):
                outcome = replayed(call)
            else:
                outcome = skipped_by_cap(call)
            self._outcomes[call.call_id] = outcome
            return call, outcome

    def claim_admitted(self, token: object, sent: FunctionCall) -> FunctionCall | None:
        """The admitted call of ``sent`` (one the adapter built itself): the same but its id."""
        with self._lock:
            return self._claim(
                token, sent.call_id, lambda call: attrs.evolve(call, call_id="") == sent, sent.args
            )

    def claim_answer(self, answer: ToolMessage) -> FunctionCall | None:
        """The admitted call a human's ``answer`` stands for: the call with its id, else the
        first id-less call of its name not yet claimed (an answer carries no arguments, so
        none is preferred for its arguments)."""
        name = str(answer.name or "")
        with self._lock:
            return self._claim(
                answer,
                answer.tool_call_id,
                lambda call: call.name == name and call.arguments_error is None,
                _UNKNOWN_ARGS,
            )

    def _claim(
        self, token: object, call_id: str, same_call: Callable[[FunctionCall], bool], args: Any
    ) -> FunctionCall | None:
        """Under the lock: a call with an id is found by it.  One sent without an id claims
        the first unclaimed id-less call like it, with its arguments if one has them;
        ``token`` (the request's tool-call dict, an answer) keeps its claim for the batch,
        so a retry of the same call is that call again."""
        if call_id:
            return self._calls.get(call_id)
        key = _claim_key(token)
        held = self._claims.get(key)
        if held is not None and (isinstance(key, str) or held[0] is token):
            return held[1]
        named = [call for call in self._blank if same_call(call)]
        same = [call for call in named if call.args == args] if args is not _UNKNOWN_ARGS else []
        found = same[0] if same else named[0] if named else None
        if found is not None:
            self._blank.remove(found)
            self._claims[key] = (token, found)
        return found

    def record(self, call_id: str, outcome: CallOutcome | None) -> None:
        """The latest outcome of ``call_id`` (a retried call's last attempt wins)."""
        if outcome is None:
            return
        with self._lock:
            if call_id in self._calls:
                self._outcomes[call_id] = outcome

    def record_if_missing(
        self, call: FunctionCall, outcome_of: Callable[[FunctionCall], CallOutcome]
    ) -> None:
        """Settle ``call`` with ``outcome_of(call)`` unless an outcome was already seen."""
        with self._lock:
            if call.call_id in self._calls and call.call_id not in self._outcomes:
                self._outcomes[call.call_id] = outcome_of(call)

    def close(self) -> Action | None:
        """The open batch is over (the next model call): settle what was seen, the core's action."""
        with self._lock:
            batch, outcomes = self._batch, self._outcomes
            self._batch, self._calls, self._outcomes = None, {}, {}
            self._blank, self._claims, self._refused = [], {}, frozenset()
        if batch is None:
            return None
        for call in batch.calls:  # in the model's order; a call never seen stays missing
            outcome = outcomes.get(call.call_id)
            if outcome is not None and batch.settle(outcome) is not None:
                self.observed += 1
                if self._reporting:
                    _telemetry.report_settled(LOGGER, self.telemetry, outcome)
        if not self.observed and batch.admission.executable:
            self._warn_fail_open()
        action = self.protection.after_batch(batch)
        self._decided(action)
        if not self._reporting:
            return action
        _telemetry.report_batch(
            LOGGER,
            self.telemetry,
            prompt_id=self.run_id,
            protection=self.protection,
            batch=batch,
            action=action,
            route=ROUTE,
            replays_held_back=self._holds_back_replays,
        )
        return action

    def _decided(self, action: Action) -> None:
        step = action.guard_step if isinstance(action, Continue | Stop) else None
        batch = self.protection.batches
        if step is not None:
            kind = step.decision.kind
            self.decisions.append(kind.value)
            self._actions.decided(
                kind, self.mode, batch=batch, loop_type=LOOP_REPEATED_TOOL_FAILURE
            )
        held_back = self.protection.would_stop
        if held_back is not None:  # a stop the mode held back (logged once per run)
            self._actions.decided(
                DecisionKind.WOULD_STOP, self.mode, batch=batch, loop_type=held_back
            )
        if isinstance(action, Stop):
            self.stop = GuardStop.of(action, self.protection)
            self._actions.decided(
                DecisionKind.STOP, self.mode, batch=batch, loop_type=action.loop_type
            )

    def report(self) -> RunReport:
        return RunReport(
            mode=self.mode,
            decisions=tuple(self.decisions),
            batches=self.protection.batches,
            tool_calls=self.tool_calls,
            observed=self.observed,
            stop=self.stop,
            would_stop_loop_type=self.protection.would_stop,
        )

    # -- the end of the run ---------------------------------------------------------

    def _warn_fail_open(self) -> None:
        """Once per run, as soon as a batch closes and no call outcome was ever observed."""
        if self._fail_open_warned:
            return
        self._fail_open_warned = True
        LOGGER.warning(
            "tool_failure_guard.integrations.langchain: the run executed %d tool call(s) "
            "but RepeatedToolFailureMiddleware observed none of their outcomes; the guard "
            "is not protecting this agent (does another middleware answer the calls "
            "without invoking the tools?)",
            self.tool_calls,
        )

    def finish(self, stop_reason: str = "end_turn") -> None:
        """The run ended (``after_agent``, or a raised stop); an open batch is reduced."""
        if self.finished:
            return
        if self._batch is not None and self.protection.stopped is None:
            self.close()  # e.g. a return_direct tool ended the run: no request can follow
        self.finished = True
        if self.tool_calls and not self.observed:
            self._warn_fail_open()
        if not self._reporting:
            return
        _telemetry.report_prompt_only_outcome(
            LOGGER,
            self.telemetry,
            prompt_id=self.run_id,
            route=ROUTE,
            mode=self.mode,
            stop_reason=stop_reason,
            loop_type=self.stop.loop_type if self.stop is not None else None,
            model_turns=self.model_turns,
            tool_calls=self.tool_calls,
            tool_call_cap=self.tool_call_cap or 0,  # 0: no cap
            batches=self.protection.batches,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            wall_time_s=max(0.0, self._clock() - self._started),
        )

    def _count_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for field in ("input_tokens", "output_tokens"):
            value = usage.get(field)
            if isinstance(value, int):
                setattr(self, field, (getattr(self, field) or 0) + value)


#: The arguments of a claim that has none to match (a human's answer).
_UNKNOWN_ARGS = object()


def _claim_key(token: object) -> int | str:
    """A message's own id (a checkpointed state's copy keeps it), else the object's identity.

    An identity key is checked against the token it holds, which the claim keeps alive.
    """
    message_id = getattr(token, "id", None)
    return message_id if isinstance(message_id, str) and message_id else id(token)
