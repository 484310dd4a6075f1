"""One session's settings, resolved once from its merged environment when it is opened.

Every value here is an operator setting
(:data:`~tool_failure_guard.session.config.envconfig.OPERATOR_ONLY_VARIABLES`):
the guard mode, the declared input boundary, the per-prompt tool-call cap,
the shell timeout and the MCP call timeout.  A typo in a deployment never
breaks a session: an invalid number logs a warning naming the variable and
the default is used (the mode and the boundary warn and fall back likewise).
"""

from __future__ import annotations

import logging
import math

import attrs

from tool_failure_guard.core.protections import DEFAULT_TOOL_CALL_CAP
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.session.config.declared_boundary import BoundaryKind, resolve_boundary_kind
from tool_failure_guard.session.config.envconfig import (
    INPUT_BOUNDARY_ENV_VAR,
    MCP_TIMEOUT_ENV_VAR,
    SHELL_TIMEOUT_ENV_VAR,
    TOOL_CALL_CAP_ENV_VAR,
    EnvConfig,
)
from tool_failure_guard.session.tools.builtin import DEFAULT_SHELL_TIMEOUT

_log = logging.getLogger("session.agent")

#: Seconds an MCP tool call may run unless ``TOOL_FAILURE_GUARD_MCP_TIMEOUT`` says otherwise.
DEFAULT_MCP_TIMEOUT = 60.0


@attrs.frozen(kw_only=True)
class SessionSettings:
    mode: GuardMode
    boundary: BoundaryKind
    tool_call_cap: int
    shell_timeout: float
    mcp_timeout: float


def env_setting(env_value: str | None, default: float, name: str, *, integer: bool) -> float:
    """A positive, finite number from a settings variable; anything else warns, uses default."""
    if env_value is None:
        return default
    kind = "a whole number" if integer else "a number of seconds"
    try:
        value = int(env_value.strip()) if integer else float(env_value)
    except ValueError:
        _log.warning("%s=%r is not %s; using %g", name, env_value, kind, default)
        return default
    if not math.isfinite(value) or value <= 0:
        _log.warning("%s=%r must be positive and finite; using %g", name, env_value, default)
        return default
    return value


def resolve_settings(env: EnvConfig, *, tool_call_cap: int | None = None) -> SessionSettings:
    """The session's settings; ``tool_call_cap`` (``--max-tool-calls``) wins over the env."""
    cap = tool_call_cap or int(
        env_setting(
            env.get(TOOL_CALL_CAP_ENV_VAR),
            DEFAULT_TOOL_CALL_CAP,
            TOOL_CALL_CAP_ENV_VAR,
            integer=True,
        )
    )
    return SessionSettings(
        mode=env.guard_mode(),
        boundary=resolve_boundary_kind(env.get(INPUT_BOUNDARY_ENV_VAR)),
        tool_call_cap=cap,
        shell_timeout=env_setting(
            env.get(SHELL_TIMEOUT_ENV_VAR),
            DEFAULT_SHELL_TIMEOUT,
            SHELL_TIMEOUT_ENV_VAR,
            integer=False,
        ),
        mcp_timeout=env_setting(
            env.get(MCP_TIMEOUT_ENV_VAR), DEFAULT_MCP_TIMEOUT, MCP_TIMEOUT_ENV_VAR, integer=False
        ),
    )
