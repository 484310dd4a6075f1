"""Resolving the guard mode from the one environment value that may set it."""

from __future__ import annotations

from tool_failure_guard.guard._values import GUARD_MODE_ENV_VAR, GuardMode

_VALID = ", ".join(mode.value for mode in GuardMode)


def resolve_mode(value: str | None) -> GuardMode:
    """Return the mode named by ``value``; missing, blank or invalid means shadow.

    Trimmed and case-insensitive.  A non-empty invalid value is an operator
    mistake, so it is logged once per call as a warning that names the
    variable and the valid values; it never raises, because a typo in a
    deployment must not take the agent down.
    """
    if value is None:
        return GuardMode.SHADOW
    text = value.strip().lower()
    if not text:
        return GuardMode.SHADOW
    try:
        return GuardMode(text)
    except ValueError:
        import logging  # only here: importing the guard loads no logging machinery

        logging.getLogger("guard").warning(
            "%s=%r is not a valid guard mode; expected one of %s; using shadow",
            GUARD_MODE_ENV_VAR,
            value,
            _VALID,
        )
        return GuardMode.SHADOW
