"""The repeated tool-failure guard for LangChain v1 agents (the ``[langchain]`` extra).

One middleware, :class:`RepeatedToolFailureMiddleware`, with a fresh guard for
every run (``invoke``, ``ainvoke``, ``stream``, ``astream``)::

    from langchain.agents import create_agent
    from tool_failure_guard.integrations.langchain import RepeatedToolFailureMiddleware

    agent = create_agent(model, tools, middleware=[RepeatedToolFailureMiddleware()])
    result = agent.invoke({"messages": [{"role": "user", "content": "Fix the build"}]})
    if (stop := RepeatedToolFailureMiddleware.stop_of(result)) is not None:
        ...  # a protection stopped the run: stop.loop_type, stop.notice

``docs/integrations.md`` ("LangChain") documents how every LangChain outcome
maps onto the outcome contract, where the reminder goes and how a stop ends
the run.  Never imported by the agent or the core.
"""

from tool_failure_guard._extras import require_extra

require_extra("langchain", "langchain", "langchain_core", "langgraph")  # else: pip install hint

from tool_failure_guard.integrations.langchain._middleware import (
    REPORT_KEY,
    GuardState,
    RepeatedToolFailureMiddleware,
    report_of,
    stop_of,
)
from tool_failure_guard.integrations.langchain._outcomes import (
    OUTCOME_ROWS,
    TOOL_ERROR_STATUS,
    OutcomeRow,
)
from tool_failure_guard.integrations.langchain._run import LOGGER, ROUTE, GuardStop, RunReport

__all__ = [
    "LOGGER",
    "OUTCOME_ROWS",
    "REPORT_KEY",
    "ROUTE",
    "TOOL_ERROR_STATUS",
    "GuardState",
    "GuardStop",
    "OutcomeRow",
    "RepeatedToolFailureMiddleware",
    "RunReport",
    "report_of",
    "stop_of",
]
