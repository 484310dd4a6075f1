"""How a stopped run ends, in LangChain's idiom for a limit (``ToolCallLimitMiddleware``'s).

``on_stop="error"`` (the default) raises :class:`ProtectionStopped`, which is
both the project's :class:`tool_failure_guard.integrations._api.ProtectionStopped`
and LangChain's own ``ToolCallLimitExceededError`` (what
``ToolCallLimitMiddleware(exit_behavior="error")`` raises), so a handler
already written for that limit catches it.  ``on_stop="end"`` ends the run as
``exit_behavior="end"`` does: a final ``AIMessage`` with the stop text and no
tool calls, in the model's place (no model request is made), where a text
answer is type-correct, i.e. the agent has no ``response_format``.  An agent
with structured output raises all the same: its result would otherwise lack
the ``structured_response`` its caller reads.
"""

from __future__ import annotations

import uuid

from langchain.agents.middleware.tool_call_limit import ToolCallLimitExceededError
from langchain_core.messages import AIMessage

from tool_failure_guard.integrations import _api
from tool_failure_guard.integrations._api import (
    GuardStop,
    RunReport,
    StopBehaviour,
    plain_exception_warning,
)


class ProtectionStopped(_api.ProtectionStopped, ToolCallLimitExceededError):
    """A protection stopped the LangChain run: no further model request was made.

    ``stop`` and ``report`` are what :func:`~._report.stop_of` and
    :func:`~._report.report_of` would have answered (both accept this
    exception too); ``loop_type`` and ``key`` are the stop's.  As a
    ``ToolCallLimitExceededError`` it carries that error's fields: ``run_count``
    (and ``thread_count``) are this run's tool calls, ``tool_name`` the
    failing tool when the repeated-failure guard stopped the run, and no
    ``run_limit``/``thread_limit`` (the guard's limit is not a count).
    The settled ``ToolMessage``s stay in the thread's history (a checkpointer
    keeps the state of the last completed step, as for any exception).
    """

    def __init__(self, stop: GuardStop, report: RunReport) -> None:
        # LangChain's error takes its counts; its message is replaced by the stop text, and
        # the project's base keeps ``stop`` and ``report`` (the two lines of its __init__).
        ToolCallLimitExceededError.__init__(
            self,
            thread_count=report.tool_calls,
            run_count=report.tool_calls,
            thread_limit=None,
            run_limit=None,
            tool_name=stop.key.policy_tool_name if stop.key is not None else None,
        )
        self.args = (stop.notice,)
        self.stop = stop
        self.report = report


def ends_with_text(on_stop: StopBehaviour, response_format: object) -> bool:
    """True when the stop ends the run with its text rather than raising."""
    return on_stop == "end" and response_format is None


def stop_message(stop: GuardStop) -> AIMessage:
    """The run's final answer for ``on_stop="end"``: the stop text, no tool calls."""
    return AIMessage(content=stop.notice, id=str(uuid.uuid4()))


#: The once-per-middleware warning of a tool exception nothing answered to the model.
PLAIN_EXCEPTION_WARNING = plain_exception_warning(
    "LangChain",
    "give the tool handle_tool_error=True and raise ToolException (from the exception, "
    "to keep its type), or add ToolErrorMiddleware(on_error=...) after "
    "RepeatedToolFailureMiddleware in middleware=[...]",
)
