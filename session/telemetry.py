"""The telemetry sink the session reports guard transitions to.

A sink observes; it never decides.  The session calls it after acting on a
decision is settled, and every call is wrapped so that a failing sink cannot
change a decision, a transcript or a stop.

This module holds the interface and a sink that drops everything; the
OpenTelemetry implementation lives beside it (issue 3).
"""

from __future__ import annotations

from typing import Protocol

from guard import BatchReceipt, Decision, GuardMode, RepeatedToolFailureGuard


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
    ) -> None:
        """One guard transition whose decision kind is not ``none`` (mode is never off)."""

    def loop_detected(self, *, prompt_id: str, loop_type: str) -> None:
        """The first protection that stopped a prompt, by loop type."""

    def tool_call_settled(
        self, *, terminal_status: str, execution_status: str | None, tool_type: str | None
    ) -> None:
        """One settled tool call, for the execution SLI (cancellations never count as failures)."""


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
    ) -> None:
        return None

    def loop_detected(self, *, prompt_id: str, loop_type: str) -> None:
        return None

    def tool_call_settled(
        self, *, terminal_status: str, execution_status: str | None, tool_type: str | None
    ) -> None:
        return None


#: Values of ``tool-failure-guard agent --telemetry``.
TELEMETRY_KINDS = ("none", "console", "otlp")


def build_telemetry(kind: str) -> GuardTelemetry:
    """Build the sink named by ``--telemetry`` (the OpenTelemetry kinds arrive with issue 3)."""
    if kind == "none":
        return NullTelemetry()
    raise ValueError(f"--telemetry {kind!r} is not available yet; expected one of {TELEMETRY_KINDS}")
