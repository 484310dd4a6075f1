"""What a host does after a settled batch: continue, stop, or (cancelled) nothing more.

:class:`~tool_failure_guard.core.prompt.PromptProtection` answers every settled
batch with one of these frozen values:

- :class:`Continue`: send the next model request with the batch's function
  responses, then :attr:`Continue.system_texts` as system context at this
  place in the history (the reminder, exactly once per candidate streak, in
  ``warn``/``enforce``), kept in every later request;
- :class:`Stop`: no further model request; keep the settled function
  responses in the history, append :attr:`Stop.notice` once, end the run
  (a person is shown :attr:`Stop.shown_text`, the notice without its
  ``System: `` prefix);
- :class:`PromptCancelled`: the run was cancelled; keep the settled results,
  the guard was not consulted.

Each carries the :class:`GuardStep` (the guard's :class:`~tool_failure_guard.guard.Decision` and
what it saw) when the guard was consulted, so a host can report telemetry;
telemetry never changes the action.
"""

from __future__ import annotations

import attrs

from tool_failure_guard.core.protections import (
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_PROVIDER_DUPLICATE,
    LOOP_REPEATED_TOOL_FAILURE,
    LOOP_TOOL_CALL_CAP,
)
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    BatchReceipt,
    Decision,
    DecisionKind,
    GuardMode,
    InputBoundary,
)

#: The prefix of fixed system context in the model-facing history (each stop notice has it).
SYSTEM_PREFIX = "System: "

#: The fixed text each protection's stop ends the run with, by loop type (model-facing).
STOP_NOTICES = {
    LOOP_REPEATED_TOOL_FAILURE: REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    LOOP_PROVIDER_DUPLICATE: (
        "System: Automatic continuation stopped because the model kept replaying tool calls "
        "that were already answered. New user input is required to continue."
    ),
    LOOP_INVALID_TOOL_PARAMS: (
        "System: Automatic continuation stopped because the model kept calling a tool with "
        "invalid parameters. New user input is required to continue."
    ),
    LOOP_TOOL_CALL_CAP: (
        "System: Automatic continuation stopped because this prompt reached its tool-call "
        "limit. New user input is required to continue."
    ),
}


def shown_text(notice: str) -> str:
    """What a person is shown for a stop notice: the sentence without ``System: ``.

    The released original (Qwen Code 0.24.4) keeps its stop message without the
    prefix, writes ``System: <message>`` into the model-facing history and shows
    the bare sentence to people; the notices here carry the prefix (the
    specification's text), so the shown form strips it.
    """
    return notice.removeprefix(SYSTEM_PREFIX)


@attrs.frozen(kw_only=True)
class GuardStep:
    """One guard reduction: its decision and what it saw (for telemetry; no tool names)."""

    mode: GuardMode
    decision: Decision
    receipt: BatchReceipt
    boundary: InputBoundary
    batch_ordinal: int  #: 1-based among the run's batches the guard reduced
    failure_count_before: int
    batch_count_before: int
    failure_count: int
    batch_count: int


@attrs.frozen(kw_only=True)
class Continue:
    """Send the next model request; add ``system_texts`` after the function responses."""

    system_texts: tuple[str, ...] = ()
    guard_step: GuardStep | None = None

    @property
    def decision(self) -> Decision | None:
        return self.guard_step.decision if self.guard_step is not None else None

    @property
    def reminded(self) -> bool:
        """True when this batch's answer carries the corrective reminder."""
        step = self.guard_step
        return step is not None and step.decision.kind is DecisionKind.WARN


@attrs.frozen(kw_only=True)
class Stop:
    """Stop the run: no further model request; settled results kept; ``notice`` once."""

    loop_type: str
    notice: str
    #: True when this is the first protection to stop the run (report ``loop_detected`` once).
    first: bool
    guard_step: GuardStep | None = None

    @property
    def decision(self) -> Decision | None:
        return self.guard_step.decision if self.guard_step is not None else None

    @property
    def shown_text(self) -> str:
        """The notice as a person reads it (the agent message): no ``System: `` prefix."""
        return shown_text(self.notice)


@attrs.frozen(kw_only=True)
class PromptCancelled:
    """The run was cancelled: keep the settled results; the guard was skipped."""

    @property
    def decision(self) -> Decision | None:
        return None


#: What a host does after one settled batch.
Action = Continue | Stop | PromptCancelled
