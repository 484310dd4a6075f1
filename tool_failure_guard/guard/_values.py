"""Values the guard takes in and gives out: small, frozen, slotted, validated once.

Validation happens when a value is built, so that a malformed receipt entry is
refused at the session boundary with an error naming the field, and the
per-batch path never has to re-check anything.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

import attrs

#: Eligible failures needed for the corrective reminder (a code constant, not a setting).
REPEATED_TOOL_FAILURE_THRESHOLD = 8
#: Complete model batches those failures must span.
REPEATED_TOOL_FAILURE_BATCH_THRESHOLD = 2

#: Fixed system context injected once per candidate streak (warn, enforce).
REPEATED_TOOL_FAILURE_REMINDER = (
    "System: the same tool execution has failed repeatedly for the same classified reason. "
    "Do not repeat the same approach. Inspect the returned result, change the approach or "
    "required preconditions, or explain the blocker."
)
#: Fixed system context appended to history when enforcement stops the prompt.
REPEATED_TOOL_FAILURE_STOP_MESSAGE = (
    "System: Automatic continuation stopped because the same tool execution failure "
    "continued after a corrective reminder. New user input is required to continue."
)

#: The one place the mode may come from: the exported process environment
#: (or a home-level env file), never a project-controlled source.
GUARD_MODE_ENV_VAR = "QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD"


class GuardMode(enum.StrEnum):
    """Deployment policy for the guard, chosen by operators, never by users."""

    OFF = "off"  #: no reducer, no telemetry
    SHADOW = "shadow"  #: decide and record, never inject or stop (the default)
    WARN = "warn"  #: inject the reminder, never stop
    ENFORCE = "enforce"  #: inject the reminder, then stop on the next matching batch


class Phase(enum.StrEnum):
    """The four phases of the statechart (``statecharts.RepeatedToolFailureChart``)."""

    IDLE = "idle"
    TRACKING = "tracking"
    WARNED = "warned"
    LATCHED = "latched"


class DecisionKind(enum.StrEnum):
    """What the session should do about one settled batch."""

    NONE = "none"  #: nothing, and no telemetry
    RESET = "reset"  #: the streak (or enforcement) was reset; telemetry only
    TRACKED = "tracked"  #: a candidate streak began or grew; telemetry only
    WOULD_WARN = "would_warn"  #: shadow: the reminder would have been injected
    WARN = "warn"  #: inject the corrective reminder into the next model message
    WOULD_STOP = "would_stop"  #: the prompt would have been stopped
    STOP = "stop"  #: stop automatic continuation now (enforce only)


class ResetReason(enum.StrEnum):
    """Low-cardinality reasons a streak was reset."""

    SUCCESS = "success"
    CANCELLED = "cancelled"
    NOT_STARTED = "not_started"
    POST_EXECUTION_FAILURE = "post_execution_failure"
    UNKNOWN = "unknown"
    MIXED = "mixed"
    INCOMPLETE = "incomplete"
    EXTERNAL_INPUT = "external_input"
    QUEUED_PROMPT = "queued_prompt"
    UNRELIABLE_INPUT = "unreliable_input"
    CONTRACT_VIOLATION = "contract_violation"


class TerminalStatus(enum.StrEnum):
    """The authoritative terminal status of a call (PR #8176 axis)."""

    SUCCESS = "success"
    ERROR = "error"
    CANCELLED = "cancelled"


class ExecutionStatus(enum.StrEnum):
    """The frozen execution status of a call (PR #8180 axis)."""

    SUCCESS = "success"
    ERROR = "error"
    CANCELLED = "cancelled"
    NOT_STARTED = "not_started"
    UNKNOWN = "unknown"


class ToolType(enum.StrEnum):
    """Where the resolved tool comes from."""

    NATIVE = "native"
    MCP = "mcp"


_TERMINAL_STATUSES = frozenset(TerminalStatus)
_TOOL_TYPES = frozenset(ToolType)


def _check_terminal_status(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in _TERMINAL_STATUSES:
        raise ValueError(
            f"{attribute.name} must be one of success, error, cancelled; got {value!r}"
        )


def _check_optional_str(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a string or None; got {type(value).__name__}")


def _check_call_id(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a non-empty string; got {value!r}")


def _check_tool_type(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and value not in _TOOL_TYPES:
        raise ValueError(f"{attribute.name} must be native, mcp or None; got {value!r}")


def _check_bool(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be a bool; got {value!r}")


@attrs.frozen(kw_only=True)
class Observation:
    """One entry of a batch receipt: the narrow, frozen outcome of one call.

    It deliberately has no room for arguments, results or error text: what the
    guard cannot hold it cannot leak.  ``execution_status`` strings this
    version does not know are kept as given and treated as unknown, so a newer
    producer fails open (reset, no enforcement) rather than crashing.
    """

    call_id: str
    terminal_status: str
    execution_status: str | None = None
    execution_error_type: str | None = None
    policy_tool_name: str | None = None
    tool_type: str | None = None
    provider_duplicate: bool = False

    def __attrs_post_init__(self) -> None:
        # Every field is checked in one pass -- receipts are built per settled
        # call, and a validator call per field costs as much again as building
        # the value -- and only when something is wrong are the per-field checks
        # run, in field order, for the error that names the field.
        call_id = self.call_id
        execution_status = self.execution_status
        error_type = self.execution_error_type
        tool = self.policy_tool_name
        if (
            isinstance(call_id, str)
            and call_id
            and self.terminal_status in _TERMINAL_STATUSES
            and (execution_status is None or isinstance(execution_status, str))
            and (error_type is None or isinstance(error_type, str))
            and (tool is None or isinstance(tool, str))
            and (self.tool_type is None or self.tool_type in _TOOL_TYPES)
            and isinstance(self.provider_duplicate, bool)
        ):
            return
        fields: tuple[attrs.Attribute[Any], ...] = attrs.fields(Observation)
        for attribute, check in zip(fields, _OBSERVATION_CHECKS, strict=True):
            check(self, attribute, getattr(self, attribute.name))


#: The per-field checks of Observation, in field order.
_OBSERVATION_CHECKS = (
    _check_call_id,
    _check_terminal_status,
    _check_optional_str,
    _check_optional_str,
    _check_optional_str,
    _check_tool_type,
    _check_bool,
)


def _to_observations(value: Iterable[Observation]) -> tuple[Observation, ...]:
    observations = tuple(value)
    for index, observation in enumerate(observations):
        if not isinstance(observation, Observation):
            raise TypeError(
                f"observations[{index}] must be an Observation; got {type(observation).__name__}"
            )
    return observations


@attrs.frozen
class BatchReceipt:
    """The narrow receipt of one settled model tool batch.

    ``complete`` is the session's proof that every admitted call has exactly
    one record; the guard never decides on a batch it cannot prove complete.
    """

    observations: tuple[Observation, ...] = attrs.field(converter=_to_observations)
    complete: bool = attrs.field(default=True, validator=_check_bool, kw_only=True)


@attrs.frozen(kw_only=True)
class InputBoundary:
    """What the mid-turn drain told us just before the guard reduces a batch."""

    has_external_input: bool = attrs.field(default=False, validator=_check_bool)
    has_queued_prompt: bool = attrs.field(default=False, validator=_check_bool)
    reliable: bool = attrs.field(default=True, validator=_check_bool)


#: The boundary of a session that drained nothing and had nothing to drain.
QUIET_BOUNDARY = InputBoundary()


@attrs.frozen
class FailureKey:
    """The private failure key: which tool failed, and for which classified reason.

    Arguments are excluded on purpose, so that parameter thrashing against the
    same execution boundary still counts as the same failure.  The key never
    leaves the process as a metric label.
    """

    policy_tool_name: str
    execution_error_type: str


@attrs.frozen
class Decision:
    """The guard's answer for one settled batch.

    Decisions are interned (see :func:`decision`): there are few distinct
    ones and the per-batch path should not allocate.
    """

    kind: DecisionKind
    reason: ResetReason | None
    phase_before: Phase
    phase_after: Phase


#: The interned decisions, filled as :func:`decision` is first asked for each (the
#: guard asks for every decision it can return once, at import).
_DECISIONS: dict[tuple[DecisionKind, ResetReason | None, Phase, Phase], Decision] = {}


def decision(
    kind: DecisionKind, reason: ResetReason | None, phase_before: Phase, phase_after: Phase
) -> Decision:
    """Return the interned :class:`Decision` for these four values."""
    key = (kind, reason, phase_before, phase_after)
    found = _DECISIONS.get(key)
    if found is None:
        found = _DECISIONS[key] = Decision(
            DecisionKind(kind),
            None if reason is None else ResetReason(reason),
            Phase(phase_before),
            Phase(phase_after),
        )
    return found
