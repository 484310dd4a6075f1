"""Telemetry of one pydantic-ai run, through the agent's own sinks, with its own route.

The records are the ACP session's (``docs/telemetry.md``): the guard counter and
log record per transition, the loop-detected event, the execution-SLI counter
and the per-call record per settled call, and one per-prompt outcome record per
run, all with ``route`` :data:`ROUTE`.  Reporting observes; it never decides:
every call is guarded (:mod:`tool_failure_guard.integrations._telemetry`), so a
failing sink cannot change an action.
"""

from __future__ import annotations

import logging

from tool_failure_guard.core import Action, BatchSettlement, PromptProtection
from tool_failure_guard.telemetry import runs as _telemetry
from tool_failure_guard.telemetry.sink import (
    GuardTelemetry,
    OutcomeTelemetry,
    PromptOutcome,
)

#: The route value of every record this adapter emits.
ROUTE = "pydantic_ai"

_log = logging.getLogger("tool_failure_guard.integrations.pydantic_ai")


class RunTelemetry:
    """The telemetry of one run, sent to ``sink``."""

    def __init__(
        self, sink: GuardTelemetry, prompt_id: str, *, replays_held_back: bool = True
    ) -> None:
        self._sink = sink
        self._prompt_id = prompt_id
        #: off/shadow let a replay run: the one that ran is recorded as an executed call
        self._replays_held_back = replays_held_back

    def batch(
        self, protection: PromptProtection, settlement: BatchSettlement, action: Action
    ) -> None:
        """One settled batch: its settled calls, the guard step, the first stop's loop type."""
        for outcome in settlement.outcomes():
            if outcome is not None:
                _telemetry.report_settled(_log, self._sink, outcome)
        _telemetry.report_batch(
            _log,
            self._sink,
            prompt_id=self._prompt_id,
            protection=protection,
            batch=settlement,
            action=action,
            route=ROUTE,
            replays_held_back=self._replays_held_back,
        )

    def finished(self, outcome: PromptOutcome) -> None:
        """The run's outcome record, however it ended."""
        sink = self._sink
        if isinstance(sink, OutcomeTelemetry):
            _telemetry.report(_log, lambda: sink.prompt_finished(outcome))
