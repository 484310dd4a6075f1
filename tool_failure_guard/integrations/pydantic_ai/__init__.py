"""The guard as a pydantic-ai capability (extra ``[pydantic-ai]``)::

    from pydantic_ai import Agent
    from tool_failure_guard.integrations.pydantic_ai import (
        ProtectionStop,
        RepeatedToolFailureCapability,
    )

    agent = Agent(model, tools=[...], capabilities=[RepeatedToolFailureCapability()])
    result = await agent.run("...")
    if isinstance(result.output, ProtectionStop):  # a protection stopped the run
        ...

Each run gets a fresh guard.  ``docs/integrations.md`` (section "pydantic-ai")
has the outcome table, reminder placement, stop signal, modes and telemetry.
"""

from tool_failure_guard._extras import require_extra

require_extra("pydantic-ai", "pydantic_ai")  # else: pip install hint

from tool_failure_guard.integrations.pydantic_ai._capability import (
    METADATA_KEY,
    STOP_MODEL_NAME,
    RepeatedToolFailureCapability,
)
from tool_failure_guard.integrations.pydantic_ai._outcomes import (
    OUTCOME_ROWS,
    SIGNAL_ERROR_TYPES,
    TOOL_REFUSED,
    TOOL_UNAVAILABLE,
    execution_error_type,
    outcome_table,
)
from tool_failure_guard.integrations.pydantic_ai._report import ROUTE
from tool_failure_guard.integrations.pydantic_ai._stop import ProtectionStop, stop_of

__all__ = [
    "METADATA_KEY",
    "OUTCOME_ROWS",
    "ROUTE",
    "SIGNAL_ERROR_TYPES",
    "STOP_MODEL_NAME",
    "TOOL_REFUSED",
    "TOOL_UNAVAILABLE",
    "ProtectionStop",
    "RepeatedToolFailureCapability",
    "execution_error_type",
    "outcome_table",
    "stop_of",
]
