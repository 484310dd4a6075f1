"""Observing the tool itself, inside whatever error handling surrounds it.

``wrap_tool_call`` sees what the handler chain returns or raises, but the
handler chain (the tools node, inner middleware such as ``ToolErrorMiddleware``
or ``ToolRetryMiddleware``) and the tool's own ``handle_tool_error`` /
``handle_validation_error`` may turn an exception into an error message before
it gets there.  So for each call the adapter hands the handler a *copy* of the
tool whose ``invoke``/``ainvoke`` record every invocation (an
:class:`~._outcomes.Attempt`) and whose own error handlers record the
exception they answer, then behave exactly as the original ones.  The
original tool is never changed; what the model is told is never changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.tools.base import _handle_tool_error, _handle_validation_error

from tool_failure_guard.integrations.langchain._outcomes import Attempt


class Probe:
    """The attempts of one call's tool, in order (the last one is the call's outcome)."""

    __slots__ = ("attempts",)

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []

    @property
    def last(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def _noting(self, exc: BaseException) -> None:
        if self.attempts:
            self.attempts[-1].exception = exc

    def observed(self, tool: BaseTool) -> BaseTool:
        """A copy of ``tool`` whose invocations and own error handling this probe records."""
        updates: dict[str, Any] = {}
        tool_flag = tool.handle_tool_error
        if tool_flag:

            def on_tool_error(exc: Any) -> Any:
                self._noting(exc)
                return _handle_tool_error(exc, flag=tool_flag)

            updates["handle_tool_error"] = on_tool_error
        validation_flag = tool.handle_validation_error
        if validation_flag:

            def on_validation_error(exc: Any) -> str:
                self._noting(exc)
                return _handle_validation_error(exc, flag=validation_flag)

            updates["handle_validation_error"] = on_validation_error
        copy = tool.model_copy(update=updates)
        invoke: Callable[..., Any] = copy.invoke
        ainvoke: Callable[..., Any] = copy.ainvoke

        def observed_invoke(*args: Any, **kwargs: Any) -> Any:
            attempt = Attempt()
            self.attempts.append(attempt)
            try:
                returned = invoke(*args, **kwargs)
            except BaseException as exc:
                attempt.exception = exc
                raise
            attempt.returned, attempt.done = returned, True
            return returned

        async def observed_ainvoke(*args: Any, **kwargs: Any) -> Any:
            attempt = Attempt()
            self.attempts.append(attempt)
            try:
                returned = await ainvoke(*args, **kwargs)
            except BaseException as exc:
                attempt.exception = exc
                raise
            attempt.returned, attempt.done = returned, True
            return returned

        # Instance attributes shadow the class's methods on this copy only.
        object.__setattr__(copy, "invoke", observed_invoke)
        object.__setattr__(copy, "ainvoke", observed_ainvoke)
        return copy
