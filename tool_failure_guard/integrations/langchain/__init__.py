"""The repeated tool-failure guard for LangChain v1 agents (the ``[langchain]`` extra).

One middleware, :class:`RepeatedToolFailureMiddleware`, with a fresh guard for
every run (``invoke``, ``ainvoke``, ``stream``, ``astream``)::

    from langchain.agents import create_agent
    from tool_failure_guard.integrations.langchain import (
        ProtectionStopped,
        RepeatedToolFailureMiddleware,
        report_of,
    )

    agent = create_agent(model, tools, middleware=[RepeatedToolFailureMiddleware()])
    try:
        result = agent.invoke({"messages": [{"role": "user", "content": "Fix the build"}]})
    except ProtectionStopped as stopped:  # also a LangChain ToolCallLimitExceededError
        ...  # stopped.loop_type, stopped.key, stopped.report
    else:
        report = report_of(result)  # what the guard did (or would have done, in shadow)

``docs/integrations.md`` ("LangChain") documents how every LangChain outcome
maps onto the outcome contract, where the reminder goes and how a stop ends
the run (``on_stop="error"``, the default, or ``"end"``).  Never imported by
the agent or the core.
"""

from tool_failure_guard._extras import require_extra

require_extra("langchain", "langchain", "langchain_core", "langgraph")  # else: pip install hint

from tool_failure_guard.integrations._api import GuardStop, RunReport
from tool_failure_guard.integrations.langchain._middleware import (
    GuardState,
    RepeatedToolFailureMiddleware,
)
from tool_failure_guard.integrations.langchain._outcomes import (
    OUTCOME_ROWS,
    TOOL_ERROR_STATUS,
    OutcomeRow,
)
from tool_failure_guard.integrations.langchain._report import REPORT_KEY, report_of, stop_of
from tool_failure_guard.integrations.langchain._run import LOGGER, ROUTE
from tool_failure_guard.integrations.langchain._stop import ProtectionStopped

__all__ = [
    "LOGGER",
    "OUTCOME_ROWS",
    "REPORT_KEY",
    "ROUTE",
    "TOOL_ERROR_STATUS",
    "GuardState",
    "GuardStop",
    "OutcomeRow",
    "ProtectionStopped",
    "RepeatedToolFailureMiddleware",
    "RunReport",
    "report_of",
    "stop_of",
]
