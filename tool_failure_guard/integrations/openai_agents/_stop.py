"""How a stopped run ends in the Agents SDK's idiom for a limit (``on_stop``).

The SDK ends a run that hit its turn limit by raising ``MaxTurnsExceeded``
before the next model request, with the run's items attached as
``run_data``.  A protection's stop ends the same way by default
(``on_stop="error"``): the adapter's :class:`ProtectionStopped`, which is both
the project's shared :class:`tool_failure_guard.integrations._api.ProtectionStopped`
and an ``agents.MaxTurnsExceeded`` (so an ``AgentsException`` handler catches
it too), is raised from the run's model-input filter before the next request,
where the SDK fills its ``run_data`` as it does for its own errors; a streamed
run raises it from ``stream_events()``.  At the run's last allowed turn the
SDK's turn-limit check comes before that filter: the run's ``max_turns`` error
handler raises it there instead (``_wiring.guarded_error_handlers``), so the
stop, decided first, is what every way to run raises.  The SDK's
``max_turns`` handler is its turn limit's: never consulted for a protection's
stop, whose final output is ``on_stop="end"``'s.

``on_stop="end"`` ends the run normally with the stop text as its
``final_output``, but only where a text answer is type-correct: the agent's
``output_type`` is None or ``str``.  For any other output type the run raises
the error all the same, so ``final_output`` is never a value of the wrong type.
"""

from __future__ import annotations

from typing import Any

from agents import MaxTurnsExceeded

from tool_failure_guard.integrations import _api
from tool_failure_guard.integrations.openai_agents._run import GuardedRun


class ProtectionStopped(_api.ProtectionStopped, MaxTurnsExceeded):
    """A protection stopped the run: no further model request was made.

    ``stop`` (``loop_type``, ``key``, ``notice``) and ``report`` are what
    ``stop_of`` / ``report_of`` answer for a result; ``run_data`` is the SDK's
    ``RunErrorDetails`` of the run (its settled items in ``new_items``, the
    ``last_agent``), as for ``MaxTurnsExceeded``.
    """


def stopped(run: GuardedRun) -> ProtectionStopped:
    """The error a run stopped by a protection raises (``run.stop`` is set)."""
    stop = run.stop
    if stop is None:  # pragma: no cover - only called for a stopped run
        raise RuntimeError("the run was not stopped")
    return ProtectionStopped(stop, run.report())


def text_output(agent: Any) -> bool:
    """Whether ``agent``'s final output is text (so the stop text is type-correct)."""
    output_type = getattr(agent, "output_type", None)
    return output_type is None or output_type is str


def ends_with_text(run: GuardedRun, agent: Any) -> bool:
    """Whether ``run``'s stop ends it with the stop text as ``agent``'s final output."""
    return run.on_stop == "end" and text_output(agent)
