"""One session's current prompt as a hook host keeps it, and its reduction by the one core.

A hook process lives for one event, so it cannot keep a
:class:`~tool_failure_guard.core.PromptProtection` alive from batch to batch.
It keeps the prompt's *settled batches* instead (each call's two outcome axes
and error type, never its text) and rebuilds the protection by replaying them
through the core before it reduces the new batch: the decisions are the
core's, replayed deterministically, and no rule is written again here.  A host
that lives as long as the session (the Claude Agent SDK adapter) keeps the
rebuilt protection and replays nothing.

:class:`PromptSession` is the state of one session: the prompt it is in, the
executed failures recorded per call id since the last settled batch (the
per-call hooks run before the batch's), and the settled batches.  A new
prompt starts a fresh guard.  :meth:`PromptSession.from_state` reads what
:meth:`PromptSession.to_state` wrote and raises :class:`StateDamaged` for
anything else, which the caller turns into a reset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from tool_failure_guard.core import (
    Action,
    BatchSettlement,
    CallOutcome,
    FunctionCall,
    PromptProtection,
    settle_all,
)
from tool_failure_guard.guard import GuardMode

#: The most batches one prompt's state keeps; a longer prompt starts its streak over.
MAX_BATCHES: Final = 2000
#: The most calls one batch may carry (a bigger batch is refused as bad input).
MAX_CALLS_PER_BATCH: Final = 1000
#: The most recorded, not yet settled per-call failures.
MAX_PENDING_FAILURES: Final = 1000
_FIELDS: Final = 8


class StateDamaged(ValueError):
    """A stored prompt state is not what :meth:`PromptSession.to_state` writes."""


def new_protection(mode: GuardMode) -> PromptProtection:
    """The protection of a hook host's prompt: one per prompt, limits that follow the mode.

    A hook host adds nothing to the CLI's own loop: no tool-call cap and no stop for
    invalid parameters (the CLI has its own), and the provider-replay protection acts
    only in ``warn``/``enforce`` (``limits_follow_mode``), so ``shadow`` changes nothing.
    """
    return PromptProtection(
        mode, tool_call_cap=None, invalid_params_limit=None, limits_follow_mode=True
    )


def _encode(outcome: CallOutcome) -> list[str | None]:
    return [
        outcome.call_id,
        outcome.name,
        outcome.policy_tool_name,
        outcome.tool_type,
        outcome.terminal_status,
        outcome.execution_status,
        outcome.execution_error_type,
        outcome.error_type,
    ]


def _decode(row: Any) -> CallOutcome:
    if not isinstance(row, list) or len(row) != _FIELDS:
        raise StateDamaged(f"a stored call is not a list of {_FIELDS} fields")
    if not all(value is None or isinstance(value, str) for value in row):
        raise StateDamaged("a stored call has a field that is neither text nor null")
    call_id, name, tool, tool_type, terminal, execution, execution_type, error_type = row
    if not call_id or not name or not terminal or not execution:
        raise StateDamaged("a stored call lacks its id, name or statuses")
    return CallOutcome(
        call_id=call_id,
        name=name,
        policy_tool_name=tool,
        tool_type=tool_type,
        terminal_status=terminal,
        execution_status=execution,
        execution_error_type=execution_type,
        error_type=error_type,
    )


@attrs.frozen(kw_only=True)
class Settled:
    """What reducing one batch gave: the core's action and what telemetry reports.

    ``batch`` is None when the prompt was already stopped: the stored stop is
    answered again and nothing new is reported.
    """

    action: Action
    protection: PromptProtection
    batch: BatchSettlement | None


class PromptSession:
    """One session's current prompt: id, recorded failures, settled batches."""

    def __init__(self, mode: GuardMode) -> None:
        self.mode = mode
        self.prompt_id: str | None = None
        #: call id -> the outcome of its executed failure (recorded per call)
        self.failures: dict[str, CallOutcome] = {}
        self.batches: list[list[CallOutcome]] = []
        self._protection: PromptProtection | None = None

    # -- the prompt ------------------------------------------------------------------

    def enter_prompt(self, prompt_id: str | None) -> bool:
        """Be in prompt ``prompt_id``; a different one starts a fresh guard (True)."""
        if prompt_id is not None and prompt_id == self.prompt_id:
            return False
        self.new_prompt(prompt_id)
        return True

    def new_prompt(self, prompt_id: str | None) -> None:
        """A fresh guard: the previous prompt's failures and batches are dropped."""
        self.prompt_id = prompt_id
        self.failures = {}
        self.batches = []
        self._protection = None

    def record_failure(self, outcome: CallOutcome) -> None:
        """An executed failure (or interruption) of one call, before its batch settles."""
        if len(self.failures) >= MAX_PENDING_FAILURES and outcome.call_id not in self.failures:
            raise ValueError(
                f"more than {MAX_PENDING_FAILURES} per-call failures recorded without a "
                "settled batch"
            )
        self.failures[outcome.call_id] = outcome

    def take_failure(self, call_id: str) -> CallOutcome | None:
        return self.failures.pop(call_id, None)

    # -- the reduction -----------------------------------------------------------------

    @property
    def protection(self) -> PromptProtection:
        """The prompt's protection: kept, or rebuilt by replaying the stored batches."""
        protection = self._protection
        if protection is None:
            protection = self._protection = new_protection(self.mode)
            for outcomes in self.batches:
                if protection.stopped is not None:
                    break
                _reduce(protection, outcomes)
        return protection

    def settle(self, outcomes: Sequence[CallOutcome]) -> Settled:
        """Reduce one settled batch by the core (a prompt already stopped stays stopped)."""
        if len(outcomes) > MAX_CALLS_PER_BATCH:
            raise ValueError(
                f"a batch of {len(outcomes)} calls is more than the bound {MAX_CALLS_PER_BATCH}"
            )
        protection = self.protection
        stopped = protection.stopped
        if stopped is not None:
            return Settled(action=stopped, protection=protection, batch=None)
        if len(self.batches) >= MAX_BATCHES:
            # the streak starts over rather than the state growing without bound
            self.new_prompt(self.prompt_id)
            protection = self.protection
        action, batch = _reduce(protection, outcomes)
        self.batches.append(list(outcomes))
        return Settled(action=action, protection=protection, batch=batch)

    # -- the stored form -----------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "prompt_id": self.prompt_id,
            "failures": [_encode(outcome) for outcome in self.failures.values()],
            "batches": [[_encode(outcome) for outcome in batch] for batch in self.batches],
        }

    @classmethod
    def from_state(cls, mode: GuardMode, state: Mapping[str, Any]) -> PromptSession:
        """The session :meth:`to_state` stored; {} is a new session."""
        session = cls(mode)
        if not state:
            return session
        prompt_id = state.get("prompt_id")
        failures = state.get("failures")
        batches = state.get("batches")
        if prompt_id is not None and not isinstance(prompt_id, str):
            raise StateDamaged("the stored prompt id is not text")
        if not isinstance(failures, list) or not isinstance(batches, list):
            raise StateDamaged("the stored failures or batches are not lists")
        if len(batches) > MAX_BATCHES or len(failures) > MAX_PENDING_FAILURES:
            raise StateDamaged("the stored state is past its bounds")
        session.prompt_id = prompt_id
        for row in failures:
            outcome = _decode(row)
            session.failures[outcome.call_id] = outcome
        for batch in batches:
            if not isinstance(batch, list) or len(batch) > MAX_CALLS_PER_BATCH:
                raise StateDamaged("a stored batch is not a list of calls within the bound")
            session.batches.append([_decode(row) for row in batch])
        return session


def _reduce(
    protection: PromptProtection, outcomes: Sequence[CallOutcome]
) -> tuple[Action, BatchSettlement]:
    """One batch through the core: admit its calls, settle their outcomes, the action."""
    calls = [FunctionCall(call_id=outcome.call_id, name=outcome.name) for outcome in outcomes]
    admission = protection.admit(calls)
    admitted = frozenset(call.call_id for call in admission.calls)
    batch = settle_all(admission, [o for o in outcomes if o.call_id in admitted])
    return protection.after_batch(batch), batch
