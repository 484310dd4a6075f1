"""Observing the tool itself, inside whatever error handling surrounds it.

``wrap_tool_call`` sees what the handler chain returns or raises, but the
handler chain (the tools node, inner middleware such as ``ToolErrorMiddleware``
or ``ToolRetryMiddleware``) and the tool's own ``handle_tool_error`` /
``handle_validation_error`` may turn an exception into an error message before
it gets there.  So the adapter hands the handler an *observed copy* of the
tool whose ``invoke``/``ainvoke`` record every invocation (an
:class:`~._outcomes.Attempt`) and whose own error handlers record the
exception they answer, then behave exactly as the original ones.  The
original tool is never changed; what the model is told is never changed.

The copy is made once per tool (:class:`ObservedTools`, a bounded cache kept
by the middleware; a tool whose fields changed since gets a fresh copy), not
once per call: which call an invocation belongs to is the :class:`Probe` that
``wrap_tool_call`` puts in a context variable (:data:`PROBE`) for the time
of its handler.  LangGraph's tools node runs each call's wrapper chain and the
tool in one context (a thread-pool task or an asyncio task of its own), so
parallel calls never see each other's probe; an invocation outside any
guarded call (none set) is passed through unrecorded.
"""

from __future__ import annotations

import dataclasses
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.tools.base import _handle_tool_error, _handle_validation_error
from langgraph.prebuilt.tool_node import ToolCallRequest

from tool_failure_guard.integrations.langchain._outcomes import Attempt

#: Observed copies kept per middleware (an agent has a handful of tools; a bound all the same).
MAX_OBSERVED_TOOLS = 256


class Probe:
    """The attempts of one call's tool, in order (the last one is the call's outcome)."""

    __slots__ = ("attempts",)

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []

    def forget(self) -> None:
        """Drop what was recorded once the call is settled (exceptions hold frames)."""
        for attempt in self.attempts:
            attempt.exception = attempt.returned = None
        self.attempts.clear()


#: The probe of the guarded call whose handler is running in this context (set and
#: reset by ``wrap_tool_call`` around its handler).
PROBE: ContextVar[Probe | None] = ContextVar("tool_failure_guard_langchain_probe", default=None)


def _noting(exc: BaseException) -> None:
    probe = PROBE.get()
    if probe is not None and probe.attempts:
        probe.attempts[-1].exception = exc


def _begin() -> Attempt | None:
    probe = PROBE.get()
    if probe is None:
        return None
    attempt = Attempt()
    probe.attempts.append(attempt)
    return attempt


def observed_copy(tool: BaseTool) -> BaseTool:
    """A copy of ``tool`` whose invocations and own error handling the current probe records."""
    updates: dict[str, Any] = {}
    tool_flag = tool.handle_tool_error
    if tool_flag:

        def on_tool_error(exc: Any) -> Any:
            _noting(exc)
            return _handle_tool_error(exc, flag=tool_flag)

        updates["handle_tool_error"] = on_tool_error
    validation_flag = tool.handle_validation_error
    if validation_flag:

        def on_validation_error(exc: Any) -> str:
            _noting(exc)
            return _handle_validation_error(exc, flag=validation_flag)

        updates["handle_validation_error"] = on_validation_error
    copy = tool.model_copy(update=updates)
    invoke: Callable[..., Any] = copy.invoke
    ainvoke: Callable[..., Any] = copy.ainvoke

    def observed_invoke(*args: Any, **kwargs: Any) -> Any:
        attempt = _begin()
        if attempt is None:
            return invoke(*args, **kwargs)
        try:
            returned = invoke(*args, **kwargs)
        except BaseException as exc:
            attempt.exception = exc
            raise
        attempt.returned, attempt.done = returned, True
        return returned

    async def observed_ainvoke(*args: Any, **kwargs: Any) -> Any:
        attempt = _begin()
        if attempt is None:
            return await ainvoke(*args, **kwargs)
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


class ObservedTools:
    """One observed copy per tool, made on the tool's first call (thread-safe, bounded)."""

    def __init__(self, limit: int = MAX_OBSERVED_TOOLS) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        #: id(tool) -> (the tool, its field names and values when copied, the copy); the
        #: tool is held, so its id is not reused while the entry lives
        self._copies: OrderedDict[int, _Entry] = OrderedDict()

    def observed(self, tool: BaseTool) -> BaseTool:
        key = id(tool)
        entry = self._copies.get(key)  # one lookup is atomic; the lock keeps updates whole
        # The tool's fields are the very objects they were when it was copied (checked on
        # every call, so in C: no Python frame per field).
        if entry is not None and entry[0] is tool:
            _, names, values, copy = entry
            now = tool.__dict__
            if (
                len(now) == len(names)
                and all(map(operator.is_, values, now.values()))
                and all(map(operator.is_, names, now))
            ):
                return copy
        copy = observed_copy(tool)
        fields = tool.__dict__
        with self._lock:
            self._copies[key] = (tool, tuple(fields), tuple(fields.values()), copy)
            self._copies.move_to_end(key)
            while len(self._copies) > self._limit:
                self._copies.popitem(last=False)
        return copy


_Entry = tuple[BaseTool, tuple[str, ...], tuple[Any, ...], BaseTool]


def _plain_request_type() -> bool:
    """``ToolCallRequest`` is a plain dataclass of the four fields this module knows: an
    instance is those fields in its ``__dict__``, and nothing runs when one is made."""
    return (
        dataclasses.is_dataclass(ToolCallRequest)
        and "__slots__" not in vars(ToolCallRequest)
        and not hasattr(ToolCallRequest, "__post_init__")
        and [f.name for f in dataclasses.fields(ToolCallRequest)]
        == ["tool_call", "tool", "state", "runtime"]
    )


_PLAIN_REQUEST = _plain_request_type()


def with_tool(request: ToolCallRequest, tool: BaseTool) -> ToolCallRequest:
    """``request.override(tool=tool)``, made without its price on every call.

    ``override`` is ``dataclasses.replace``: the fields read one by one, then the
    dataclass ``__init__``, whose every assignment goes through the class's own
    ``__setattr__`` (a deprecation check of two ``hasattr``).  For the plain dataclass
    this LangGraph has, the same new request is its fields' dict with ``tool`` replaced;
    anything else (a subclass, another LangGraph's class) goes through ``override``.
    """
    if not _PLAIN_REQUEST or type(request) is not ToolCallRequest:
        return request.override(tool=tool)
    copy = object.__new__(ToolCallRequest)
    fields = copy.__dict__
    fields.update(request.__dict__)
    fields["tool"] = tool
    return copy
