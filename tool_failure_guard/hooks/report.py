"""The hook's telemetry: the same records and names as every host, under the hook's route.

Imported only when the installed command line names a sink (``--telemetry
file:PATH``): building one loads OpenTelemetry, which a hook without telemetry
never pays for.  Each hook process builds the sink, reports what its event
settled, and shuts the sink down (flushing it) while it still holds the
session's lock, so two hooks of one session never interleave their lines.
Telemetry never changes an answer: a failing sink is logged and ignored.
"""

from __future__ import annotations

import logging
from typing import Final

from tool_failure_guard.core import Stop
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.hooks.events import Handled
from tool_failure_guard.hooks.prompt import PromptSession
from tool_failure_guard.telemetry import runs as _telemetry
from tool_failure_guard.telemetry.build import build_telemetry
from tool_failure_guard.telemetry.sink import GuardTelemetry, OpenTelemetrySink

LOGGER: Final = logging.getLogger("tool_failure_guard.hooks")
#: The prompt record's ``tool_call_cap`` of a hook host, which has none (the CLI runs its own
#: loop): 0, the record's "no cap", as for an adapter's ``tool_call_cap=None``.
NO_TOOL_CALL_CAP: Final = 0


def resource_attributes(environment: str | None) -> dict[str, str]:
    """What a rollout needs in the Resource that no variable can bring to a hook (Claude Code
    gives a hook no ``OTEL_*``): the install's ``--environment`` as ``deployment.environment``,
    and ``enduser.pseudo.id``: the effective user's random owner id, made once and kept in the
    operator's config folder (:func:`tool_failure_guard.hooks.config.owner_id`)."""
    if environment is None:
        return {}
    from tool_failure_guard.hooks.config import owner_id

    attributes = {"deployment.environment": environment}
    owner = owner_id()
    if owner is not None:
        attributes["enduser.pseudo.id"] = owner
    return attributes


def report_event(
    spec: str,
    *,
    route: str,
    session: PromptSession,
    handled: Handled,
    wall_time_s: float,
    prompt_id: str | None = None,
    environment: str | None = None,
) -> None:
    """Build the sink ``spec`` names, report one event through it, flush and shut it down."""
    telemetry = build_telemetry(spec, resource_attributes=resource_attributes(environment))
    try:
        report_handled(
            telemetry,
            route=route,
            session=session,
            handled=handled,
            wall_time_s=wall_time_s,
            prompt_id=prompt_id,
        )
    finally:
        if isinstance(telemetry, OpenTelemetrySink):
            telemetry.shutdown()


def report_handled(
    telemetry: GuardTelemetry,
    *,
    route: str,
    session: PromptSession,
    handled: Handled,
    wall_time_s: float,
    prompt_id: str | None = None,
) -> None:
    """Report one event's settled batch and, when the prompt ended, its outcome record.

    ``prompt_id``: the records' prompt id when not the session's (a subagent's loop: its
    parent's prompt id and its ``agent_id``, so its records never merge with the parent's).
    """
    settled = handled.settled
    prompt_id = prompt_id or session.prompt_id or "unknown"
    if settled is not None and settled.batch is not None:
        for outcome in settled.batch.settled():
            _telemetry.report_settled(LOGGER, telemetry, outcome)
        _telemetry.report_batch(
            LOGGER,
            telemetry,
            prompt_id=prompt_id,
            protection=settled.protection,
            batch=settled.batch,
            action=settled.action,
            route=route,
        )
    if handled.prompt_ended is not None:
        protection = session.protection
        stop = protection.stopped
        _telemetry.report_prompt_only_outcome(
            LOGGER,
            telemetry,
            prompt_id=prompt_id,
            route=route,
            mode=GuardMode(session.mode),
            stop_reason=handled.prompt_ended,
            loop_type=stop.loop_type if isinstance(stop, Stop) else None,
            model_turns=len(session.batches) + (0 if stop is not None else 1),
            tool_calls=sum(len(batch) for batch in session.batches),
            tool_call_cap=NO_TOOL_CALL_CAP,
            batches=protection.batches,
            input_tokens=None,
            output_tokens=None,
            wall_time_s=wall_time_s,
        )
