"""What the session reports to a telemetry sink: the two protocols and their records.

:class:`GuardTelemetry` is every sink's interface (guard transitions, loop
stops, the execution SLI); :class:`OutcomeTelemetry` adds the records rollout
analysis reads (one per prompt, per settled call, per closed session).  The
records carry counts and enums, never text.  :class:`NullTelemetry` records
nothing.  Re-exported by :mod:`~tool_failure_guard.telemetry.sink`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import attrs

from tool_failure_guard.guard import BatchReceipt, Decision, GuardMode, RepeatedToolFailureGuard
from tool_failure_guard.telemetry.names import ROUTE


class GuardTelemetry(Protocol):
    """What the session reports.  Implementations must not raise (the session guards anyway)."""

    def guard_decision(
        self,
        *,
        prompt_id: str,
        mode: GuardMode,
        decision: Decision,
        guard: RepeatedToolFailureGuard,
        failure_count_before: int,
        batch_count_before: int,
        receipt: BatchReceipt,
        batch_ordinal: int = 0,
        route: str = ROUTE,
    ) -> None:
        """One guard transition whose decision kind is not ``none`` (mode is never off).

        ``batch_ordinal`` (1-based within the prompt; 0: not known) joins the
        transition to the prompt's per-call records; ``route`` names the host
        (:data:`GUARD_ROUTES`; anything else is labelled ``other``).
        """

    def loop_detected(self, *, prompt_id: str, loop_type: str) -> None:
        """The first protection that stopped a prompt, by loop type."""

    def tool_call_settled(
        self, *, terminal_status: str, execution_status: str | None, tool_type: str | None
    ) -> None:
        """One settled tool call, for the execution SLI (cancellations never count as failures)."""


@runtime_checkable
class OutcomeTelemetry(Protocol):
    """The records rollout analysis needs: one per prompt, per settled call, per closed session.

    A separate protocol from :class:`GuardTelemetry` so that sinks written
    before it (test doubles, other destinations) keep working: the session
    sends these records only to sinks that implement them.
    """

    def prompt_finished(self, outcome: PromptOutcome) -> None:
        """The end of one top-level prompt, whatever ended it (every mode, channel too)."""

    def call_settled(self, record: CallRecord) -> None:
        """One settled call of a batch (provider duplicates included), log only."""

    def session_closed(self, *, session_id: str, reason: str, prompts: int) -> None:
        """The session ended: ``clean`` (idle when the client left) or ``disconnect``."""


@attrs.frozen(kw_only=True)
class PromptOutcome:
    """What one top-level prompt cost and how it ended: counts and enums, never text.

    ``mode`` is the effective guard mode the prompt started with (``off`` for
    channel prompts).  ``drain_supported`` is False when the host's pull
    drain was unavailable for the session or any input boundary of this
    prompt was unreliable, and for a declared prompt-only host (never
    asked): such prompts are counted apart from the supported-host
    baseline.  ``input_boundary`` is the boundary kind actually used for
    the prompt
    (:data:`~tool_failure_guard.telemetry.names.INPUT_BOUNDARY_RECORD_VALUES`):
    ``drain`` (the host kept the drain contract), ``prompt-only`` (declared
    by the operator) or ``unsupported`` (the host lacked or failed the
    drain); each kind is its own cohort.  Token counts and model latency
    are None when the model reported no usage at all.
    """

    prompt_id: str
    route: str
    mode: str
    stop_reason: str
    loop_type: str | None
    model_turns: int
    tool_calls: int
    tool_call_cap: int
    batches: int
    input_tokens: int | None
    output_tokens: int | None
    model_latency_s: float | None
    wall_time_s: float
    drain_supported: bool
    input_boundary: str


@attrs.frozen(kw_only=True)
class CallRecord:
    """One settled call: its statuses and tool type, never its name, arguments or result."""

    prompt_id: str
    batch_ordinal: int
    call_ordinal: int
    terminal_status: str
    execution_status: str | None
    execution_error_type: str | None
    tool_type: str | None
    provider_duplicate: bool


class NullTelemetry:
    """A sink that records nothing: the default when telemetry is not configured."""

    def guard_decision(
        self,
        *,
        prompt_id: str,
        mode: GuardMode,
        decision: Decision,
        guard: RepeatedToolFailureGuard,
        failure_count_before: int,
        batch_count_before: int,
        receipt: BatchReceipt,
        batch_ordinal: int = 0,
        route: str = ROUTE,
    ) -> None:
        return None

    def loop_detected(self, *, prompt_id: str, loop_type: str) -> None:
        return None

    def tool_call_settled(
        self, *, terminal_status: str, execution_status: str | None, tool_type: str | None
    ) -> None:
        return None

    def prompt_finished(self, outcome: PromptOutcome) -> None:
        return None

    def call_settled(self, record: CallRecord) -> None:
        return None

    def session_closed(self, *, session_id: str, reason: str, prompts: int) -> None:
        return None
