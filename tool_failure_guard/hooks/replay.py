"""A prompt's settled batches through the one core: the protection rebuilt, a new batch reduced.

Imported only when a batch settles (``PostToolBatch``): it loads the core, which
the per-call events never need.  Each call is stored as its two outcome axes and
error types (:func:`encode`), never its text; replaying the rows through a fresh
:class:`~tool_failure_guard.core.PromptProtection` gives back exactly the
decisions the core took, since the core is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
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

_FIELDS: Final = 8


@attrs.frozen(kw_only=True)
class Settled:
    """What reducing one batch gave: the core's action and what telemetry reports.

    ``batch`` is None when the prompt was already stopped: the stored stop is
    answered again and nothing new is reported.
    """

    action: Action
    protection: PromptProtection
    batch: BatchSettlement | None


def new_protection(mode: str) -> PromptProtection:
    """The protection of a hook host's prompt: one per prompt, limits that follow the mode.

    A hook host adds nothing to the CLI's own loop: no tool-call cap and no stop for
    invalid parameters (the CLI has its own), and the provider-replay protection acts
    only in ``warn``/``enforce`` (``limits_follow_mode``), so ``shadow`` changes nothing.
    """
    return PromptProtection(
        GuardMode(mode), tool_call_cap=None, invalid_params_limit=None, limits_follow_mode=True
    )


def encode(outcome: CallOutcome) -> list[str | None]:
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


def decode(row: list[Any]) -> CallOutcome:
    call_id, name, tool, tool_type, terminal, execution, execution_type, error_type = row
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


def replayed(mode: str, batches: Sequence[Sequence[list[Any]]]) -> PromptProtection:
    """A fresh protection that has reduced ``batches`` (stopping where the core stopped)."""
    protection = new_protection(mode)
    for rows in batches:
        if protection.stopped is not None:
            break
        reduce(protection, [decode(row) for row in rows])
    return protection


def reduce(
    protection: PromptProtection, outcomes: Sequence[CallOutcome]
) -> tuple[Action, BatchSettlement]:
    """One batch through the core: admit its calls, settle their outcomes, the action."""
    calls = [FunctionCall(call_id=outcome.call_id, name=outcome.name) for outcome in outcomes]
    admission = protection.admit(calls)
    admitted = frozenset(call.call_id for call in admission.calls)
    batch = settle_all(admission, [o for o in outcomes if o.call_id in admitted])
    return protection.after_batch(batch), batch
