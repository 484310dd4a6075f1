"""The input boundary an operator declares for a session's host: ``drain`` or ``prompt-only``.

``TOOL_FAILURE_GUARD_INPUT_BOUNDARY`` is operator-only (refused from project
sources like the guard mode,
:data:`~tool_failure_guard.session.config.envconfig.OPERATOR_ONLY_VARIABLES`).
``drain`` -- the default and the specification's boundary -- asks the host
for its queued mid-turn input between batches (:mod:`~tool_failure_guard.session.pipeline.drain`).
``prompt-only`` declares a plain ACP host that delivers user input only as
``session/prompt``: the agent never sends the drain request, and each
boundary is reliable with no queued prompt; input pushed with
``_session/steering`` still counts as external input and resets the guard.

What the declaration asserts, what it risks and why a stop stays safe:
``docs/modes.md`` and ``docs/session.md``.
"""

from __future__ import annotations

import enum
import logging

from tool_failure_guard.session.config.envconfig import INPUT_BOUNDARY_ENV_VAR
from tool_failure_guard.telemetry.names import INPUT_BOUNDARY_RECORD_VALUES

_log = logging.getLogger("session.declared_boundary")

__all__ = [
    "INPUT_BOUNDARY_ENV_VAR",
    "INPUT_BOUNDARY_RECORD_VALUES",
    "UNSUPPORTED",
    "BoundaryKind",
    "resolve_boundary_kind",
]


class BoundaryKind(enum.Enum):
    """The input boundary an operator may declare for a session's host."""

    #: Ask the host with the drain (the specification's boundary; the default).
    DRAIN = "drain"
    #: The host delivers input only as ``session/prompt``: no drain request is sent.
    PROMPT_ONLY = "prompt-only"


#: The record value of a prompt whose host lacked or failed the drain.  The record's values
#: (``INPUT_BOUNDARY_RECORD_VALUES``) are the telemetry vocabulary's: each kind's value, then this.
UNSUPPORTED = "unsupported"


def resolve_boundary_kind(value: str | None) -> BoundaryKind:
    """The declared boundary: unset is ``drain``; anything unknown warns once, is ``drain``."""
    if value is None or value.strip() == "":
        return BoundaryKind.DRAIN
    try:
        return BoundaryKind(value.strip().lower())
    except ValueError:
        valid = ", ".join(kind.value for kind in BoundaryKind)
        _log.warning(
            "%s=%r is not one of %s; using %s",
            INPUT_BOUNDARY_ENV_VAR,
            value[:80],
            valid,
            BoundaryKind.DRAIN.value,
        )
        return BoundaryKind.DRAIN
