"""The guard mode for an embedding application: an explicit choice, else the environment.

The agent resolves its mode from the operator's environment (``session.envconfig``);
an application that embeds the guard is its own operator, so it may pass the mode
explicitly.  Otherwise the same variable as the agent's,
:data:`~tool_failure_guard.guard.GUARD_MODE_ENV_VAR`, decides, with the same default (``shadow``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tool_failure_guard.guard import GUARD_MODE_ENV_VAR, GuardMode, resolve_mode


def mode_for_run(
    explicit: GuardMode | str | None = None, environ: Mapping[str, str] | None = None
) -> GuardMode:
    """``explicit`` when given (a :class:`GuardMode` or its name), else the environment's.

    An explicit name that is not a mode is a :class:`ValueError` naming the valid
    ones (it is the application's code, not a deployment typo); an invalid
    environment value is logged and means ``shadow``, like the agent's.
    """
    if isinstance(explicit, GuardMode):
        return explicit
    if explicit is not None:
        text = explicit.strip().lower()
        try:
            return GuardMode(text)
        except ValueError:
            valid = ", ".join(mode.value for mode in GuardMode)
            raise ValueError(f"mode must be one of {valid}; got {explicit!r}") from None
    source = os.environ if environ is None else environ
    return resolve_mode(source.get(GUARD_MODE_ENV_VAR))
