"""A run resumed from a ``RunState``: which guard it runs under, and the calls that waited.

``Runner.run(agent, state)`` runs the state's own agent (``state._current_agent``),
not the ``agent`` passed in, so guarding a resumed run means guarding that agent:

- **live** (same process): the state's agent is the clone the interrupted guarded
  run left (``result.to_state()``).  The resumed run is the same prompt: it
  continues that run's guard (:meth:`GuardedRun.continuing`) and takes the clone
  over (its tools and behaviour report to the new run).
- **rebuilt** (``RunState.from_string`` / ``from_json`` against the application's
  agent, or a state of a plain ``agents.Runner`` run): the state's agent is the
  application's own.  The guard is per prompt and in memory, so a resume from a
  serialized state starts a **fresh** guard (the streak is not serialized, as a
  process restart loses it by design), on a guarded clone put in the state in
  place of that agent.  The clone is tagged as the agent's execution-only
  stand-in (the SDK's ``set_public_agent``), so the approvals the application
  recorded for its agent still apply, and the waiting approval items name it.

Two states of one interrupted run resumed at the same time: the first continues
the guard, the other (the clone is taken) gets a fresh guard on a clone of its own.
A state whose agent is neither (one the run handed off to) is run unchanged, as
such an agent is in an unresumed run: its tools are not observed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from agents import Agent, RunState
from agents._public_agent import get_public_agent, set_public_agent
from agents.run_internal.run_steps import NextStepInterruption

from tool_failure_guard.core import FunctionCall
from tool_failure_guard.integrations._api import StopBehaviour
from tool_failure_guard.integrations.openai_agents._run import GuardedRun, function_call
from tool_failure_guard.integrations.openai_agents._wiring import arm, binding_of, guarded_agent
from tool_failure_guard.telemetry.sink import GuardTelemetry


def resumed_run(
    state: RunState[Any],
    starting_agent: Agent[Any],
    fresh: Callable[[], GuardedRun],
    telemetry: GuardTelemetry | None,
    on_stop: StopBehaviour,
) -> tuple[GuardedRun, Agent[Any] | None]:
    """The guard of a run resumed from ``state``, and the adapter's clone it runs (if any).

    ``state`` is updated in place (as the SDK's run updates it): its agent is the
    clone bound to the returned run.  The calls that waited are the run's first batch.
    """
    current = state._current_agent
    binding = binding_of(current)
    clone: Agent[Any] | None = None
    if binding is not None and isinstance(current, Agent) and binding.run.finished:
        run = GuardedRun.continuing(binding.run, telemetry=telemetry, on_stop=on_stop)
        arm(current, run)
        clone = current
    elif binding is not None and isinstance(current, Agent):
        # another state of the same interrupted run is being resumed right now: this
        # resume cannot share that run's guard, so it gets a fresh one on its own clone
        run = fresh()
        clone = guarded_agent(binding.agent, run)
        _stand_in(state, current, clone)
    else:
        run = fresh()
        if current is None or current is starting_agent:
            clone = guarded_agent(starting_agent, run)
            _stand_in(state, starting_agent, clone)
    run.open(pending_calls(state))
    return run, clone


def _stand_in(state: RunState[Any], agent: Agent[Any], clone: Agent[Any]) -> None:
    """Run ``clone`` for ``agent`` in ``state``: approvals recorded for ``agent`` still apply."""
    set_public_agent(clone, get_public_agent(agent))  # approvals are keyed by the public one
    state._current_agent = clone
    step = state._current_step
    if isinstance(step, NextStepInterruption):
        # copies: the items are shared with the result and its other states
        waiting = [
            dataclasses.replace(item, agent=clone) if item.agent is agent else item
            for item in step.interruptions
        ]
        state._current_step = dataclasses.replace(step, interruptions=waiting)


def pending_calls(state: RunState[Any]) -> list[FunctionCall]:
    """The function calls a resumed run's approvals decide, in order."""
    calls = []
    for item in state.get_interruptions():
        raw = getattr(item, "raw_item", None)
        if field(raw, "type") == "function_call":
            calls.append(
                function_call(
                    str(field(raw, "call_id") or ""),
                    str(field(raw, "name") or ""),
                    str(field(raw, "arguments") or ""),
                )
            )
    return calls


def field(raw: Any, name: str) -> Any:
    """``name`` of an SDK item, a dict or an object."""
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)
