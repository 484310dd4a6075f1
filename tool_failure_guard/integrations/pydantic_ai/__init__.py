"""The guard as a pydantic-ai capability (extra ``[pydantic-ai]``)::

    from pydantic_ai import Agent
    from tool_failure_guard.integrations.pydantic_ai import (
        ProtectionStopped,
        RepeatedToolFailureCapability,
        report_of,
    )

    agent = Agent(model, tools=[...], capabilities=[RepeatedToolFailureCapability()])
    try:
        result = await agent.run("...")
    except ProtectionStopped as stop:  # a protection stopped the run (a UsageLimitExceeded)
        stop.loop_type, stop.key, stop.report, stop.all_messages()
    else:
        report_of(result)  # what the guard did, in every mode

Each run gets a fresh guard, in the mode read for that run.  ``on_stop="end"``
ends a stopped run with the stop text (:class:`ProtectionStop`) instead, where
the run's output type is plain text.  ``docs/integrations.md`` (sections "The
same API in every adapter" and "pydantic-ai") has the outcome table, reminder
placement, stop, modes and telemetry.
"""

from tool_failure_guard._extras import require_extra

require_extra("pydantic-ai", "pydantic_ai")  # else: pip install hint

from tool_failure_guard.integrations._api import GuardStop, RunReport
from tool_failure_guard.integrations.pydantic_ai._capability import RepeatedToolFailureCapability
from tool_failure_guard.integrations.pydantic_ai._outcomes import (
    OUTCOME_ROWS,
    SIGNAL_ERROR_TYPES,
    TOOL_REFUSED,
    TOOL_UNAVAILABLE,
    execution_error_type,
    outcome_table,
)
from tool_failure_guard.integrations.pydantic_ai._parts import METADATA_KEY, STOP_MODEL_NAME
from tool_failure_guard.integrations.pydantic_ai._report import ROUTE
from tool_failure_guard.integrations.pydantic_ai._results import report_of, stop_of
from tool_failure_guard.integrations.pydantic_ai._stop import ProtectionStop, ProtectionStopped

__all__ = [
    "METADATA_KEY",
    "OUTCOME_ROWS",
    "ROUTE",
    "SIGNAL_ERROR_TYPES",
    "STOP_MODEL_NAME",
    "TOOL_REFUSED",
    "TOOL_UNAVAILABLE",
    "GuardStop",
    "ProtectionStop",
    "ProtectionStopped",
    "RepeatedToolFailureCapability",
    "RunReport",
    "execution_error_type",
    "outcome_table",
    "report_of",
    "stop_of",
]
