"""The executor: the dual-axis outcome contract, produced per call, never inferred later.

For one admitted function call :meth:`Executor.execute` returns a
:class:`CallOutcome` whose two axes are set at the moment each path settles:

======================================  ==========  ==========  =======================
path                                    terminal    execution   execution error type
======================================  ==========  ==========  =======================
unregistered tool                       error       not_started tool_not_registered
argument validation failure             error       not_started invalid_tool_params
argument checking raises (any error)    error       not_started invalid_tool_params
permission refused / cancelled          cancelled   not_started (none)
permission request failed               error       not_started permission_request_failed
``session/cancel`` before execution     cancelled   not_started (none)
execution returns output                success     success     (none)
execution raises a typed ToolError      error       error       the tool's type
execution raises anything else          error       error       core ``error_type_of``
the backend refuses before executing    error       not_started its reason (MCP -32602)
an MCP tool's classified failure        error       error       mcp_* (see mcp_tools.py)
any other execution failure of MCP      error       error       mcp_tool_error
``session/cancel`` during execution     cancelled   cancelled   (none)
post-processing fails after success     error       success     (none)
======================================  ==========  ==========  =======================

The execution axis is frozen when execution settles (it is set to ``error``
just before the tool starts, so even a synchronous raise counts as an
execution failure).  Post-processing may change the *terminal* error type;
:meth:`Executor.execute` re-applies the frozen execution fields afterwards, so
no later step can change them.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from tool_failure_guard.core import outcomes
from tool_failure_guard.core.outcomes import (
    INVALID_TOOL_PARAMS,
    UNHANDLED_EXCEPTION,
    CallOutcome,
    FunctionCall,
    error_type_of,
)
from tool_failure_guard.session.tools.builtin import (
    InvalidToolParams,
    Tool,
    ToolContext,
    ToolError,
    ToolNotStarted,
    check_arguments,
    schema_validator,
)
from tool_failure_guard.worker_threads import WorkerThreads

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = [  # FunctionCall and CallOutcome live in the core; re-exported for existing imports
    "MAX_RESPONSE_CHARS",
    "CallOutcome",
    "Cancelled",
    "Executor",
    "FunctionCall",
    "PermissionAnswer",
    "PermissionAsker",
    "PostProcessor",
    "race_cancel",
]

_log = logging.getLogger("session.executor")

#: Execution error types an MCP tool settles with itself (session.mcp_tools keeps the list).
MCP_EXECUTION_ERROR_TYPES = frozenset(
    {"mcp_tool_error", "execution_timeout", "mcp_server_unavailable", "mcp_protocol_error"}
)
_T = TypeVar("_T")
#: Argument checks run here, never on the event loop (each bounded by its deadline).
_CHECKS = WorkerThreads(4, "argument-check")
#: Argument-check threads one session may hold at once: its further checks wait for its own,
#: so one session's slow checks hold at most this many of the threads above, each session has
#: at most one check in the threads' queue, and another session's check waits at most one
#: check budget per four sessions ahead of it.
CHECKS_PER_SESSION = 1

#: Characters of tool output -- a result or an error message -- sent back to the model,
#: shown to the client and stored.
MAX_RESPONSE_CHARS = 20_000


def cap_text(text: str) -> str:
    """``text`` cut to :data:`MAX_RESPONSE_CHARS`, saying how much was cut."""
    if len(text) <= MAX_RESPONSE_CHARS:
        return text
    cut = len(text) - MAX_RESPONSE_CHARS
    return f"{text[:MAX_RESPONSE_CHARS]}\n[output truncated: {cut} more characters cut]"


class PermissionAnswer(enum.StrEnum):
    ALLOWED = "allowed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    FAILED = "failed"


#: Asks the client (``session/request_permission``) whether a call may run.
PermissionAsker = Callable[[FunctionCall, Tool, Mapping[str, Any]], Awaitable[PermissionAnswer]]


#: A post-processing step run on a successful execution's decoded output.
PostProcessor = Callable[[CallOutcome], CallOutcome]


class Cancelled(Exception):
    """``session/cancel`` arrived before the awaited work finished."""


class Executor:
    """Runs admitted calls against a tool registry under the outcome contract."""

    def __init__(
        self,
        registry: Mapping[str, Tool],
        context: ToolContext,
        ask_permission: PermissionAsker,
        *,
        post_processors: tuple[PostProcessor, ...] = (),
    ) -> None:
        self._registry = registry
        self._context = context
        self._ask_permission = ask_permission
        self._post_processors = post_processors
        #: tool name -> (the schema it was built from, its compiled validator)
        self._validators: dict[str, tuple[Mapping[str, Any], Validator]] = {}
        #: Held from a check's start until its thread is free again (not until its caller
        #: stops waiting: a cancelled check still runs to its deadline).
        self._check_slots = asyncio.Semaphore(CHECKS_PER_SESSION)

    def resolve(self, name: str) -> Tool | None:
        return self._registry.get(name)

    def tools(self) -> list[Tool]:
        """Every registered tool, in registration order: what the model may call."""
        return list(self._registry.values())

    def check(self, tool: Tool, call: FunctionCall) -> Mapping[str, Any]:
        """The tool's one schema, then its normalisation; raises :class:`InvalidToolParams`."""
        if call.arguments_error is not None:
            raise InvalidToolParams(f"the arguments are not valid JSON: {call.arguments_error}")
        schema = tool.parameters_schema
        cached = self._validators.get(tool.name)
        if cached is None or cached[0] is not schema:  # a re-registered tool: its new schema
            cached = self._validators[tool.name] = (schema, schema_validator(schema))
        return tool.validate(check_arguments(cached[1], call.args))

    async def _check_in_thread(self, tool: Tool, call: FunctionCall) -> Mapping[str, Any]:
        """:meth:`check` in an argument-check thread, one of this session's slots held."""
        await self._check_slots.acquire()
        loop = asyncio.get_running_loop()
        try:
            work = _CHECKS.executor.submit(self.check, tool, call)
        except BaseException:
            self._check_slots.release()
            raise

        def free(_: object) -> None:  # in the check's thread, or here when never started
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._check_slots.release)

        work.add_done_callback(free)
        return await asyncio.wrap_future(work)

    async def execute(
        self,
        call: FunctionCall,
        cancelled: asyncio.Event,
        *,
        on_start: Callable[[], Awaitable[None]] | None = None,
    ) -> CallOutcome:
        """Settle one call; ``on_start`` is awaited once it is allowed, just before it runs.

        So a client sees ``in_progress`` only after the permission was granted:
        while it is being asked the call stays ``pending`` (ACP's pending covers
        awaiting approval), and a call that never starts never reports it.
        """
        tool = self._registry.get(call.name)
        if tool is None:
            return outcomes.unknown_tool(call, cap_text(f"tool {call.name!r} is not registered"))
        try:
            # Off the event loop (a schema's check is bounded, yet may take up to its
            # budget): session/cancel and the other sessions are served meanwhile.
            args = await race_cancel(self._check_in_thread(tool, call), cancelled)
        except Cancelled:
            return outcomes.cancelled_before(call, tool=tool.name, tool_type=tool.tool_type)
        except InvalidToolParams as exc:
            return _not_started(call, tool, INVALID_TOOL_PARAMS, str(exc))
        except Exception as exc:  # any failure while checking is a verdict, never a crash
            _log.warning("checking the arguments of %s failed: %s", tool.name, type(exc).__name__)
            return _not_started(
                call,
                tool,
                INVALID_TOOL_PARAMS,
                f"the arguments could not be checked ({type(exc).__name__})",
            )

        if cancelled.is_set():
            return outcomes.cancelled_before(call, tool=tool.name, tool_type=tool.tool_type)
        if tool.needs_permission:
            try:
                answer = await race_cancel(self._ask_permission(call, tool, args), cancelled)
            except Cancelled:
                return outcomes.cancelled_before(call, tool=tool.name, tool_type=tool.tool_type)
            if answer in (PermissionAnswer.REJECTED, PermissionAnswer.CANCELLED):
                return outcomes.rejected(call, tool=tool.name, tool_type=tool.tool_type)
            if answer is not PermissionAnswer.ALLOWED:
                return _not_started(
                    call, tool, "permission_request_failed", "the permission request failed"
                )
            if cancelled.is_set():
                return outcomes.cancelled_before(call, tool=tool.name, tool_type=tool.tool_type)
        if on_start is not None:
            await on_start()
            if cancelled.is_set():
                return outcomes.cancelled_before(call, tool=tool.name, tool_type=tool.tool_type)

        # Frozen axis: error until the tool settles, so a synchronous raise counts.
        execution_status = "error"
        execution_error_type: str | None = "unhandled_exception"
        raw = b""
        message = ""
        try:
            raw = await race_cancel(tool.run(args, self._context), cancelled)
            execution_status, execution_error_type = "success", None
        except Cancelled:
            return outcomes.cancelled_during(call, tool=tool.name, tool_type=tool.tool_type)
        except ToolNotStarted as exc:
            return _not_started(call, tool, exc.error_type, str(exc))
        except ToolError as exc:
            execution_error_type = exc.error_type
            message = str(exc)
        except Exception as exc:  # typed by the core's rule (error_type, class table, else
            execution_error_type = error_type_of(exc)  # unhandled_exception), like every host
            message = f"{type(exc).__name__}: {exc}"
            _log.warning("tool %s raised %s", tool.name, type(exc).__name__)
        if (
            execution_status == "error"
            and tool.tool_type == "mcp"
            and execution_error_type not in MCP_EXECUTION_ERROR_TYPES
        ):
            execution_error_type = "mcp_tool_error"

        if execution_status == "error":
            outcome = outcomes.failed(
                call,
                execution_error_type or UNHANDLED_EXCEPTION,
                cap_text(message),
                tool=tool.name,
                tool_type=tool.tool_type,
            )
        else:
            outcome = _post_process(call, tool, raw)
        for step in self._post_processors:
            try:
                outcome = step(outcome)
            except Exception as exc:
                outcome = attrs.evolve(
                    outcome,
                    terminal_status="error",
                    error_type="post_processing_failed",
                    output=f"post-processing failed: {type(exc).__name__}",
                )
        # Later steps may change the terminal error type, never the frozen axis.
        return attrs.evolve(
            outcome,
            call_id=call.call_id,
            policy_tool_name=tool.name,
            tool_type=tool.tool_type,
            execution_status=execution_status,
            execution_error_type=execution_error_type,
        )


def _post_process(call: FunctionCall, tool: Tool, raw: bytes) -> CallOutcome:
    """Turn successful raw output into model text; a failure here is post-execution."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        ran = outcomes.succeeded(call, tool=tool.name, tool_type=tool.tool_type)
        return outcomes.post_processing_failed(
            ran, "the output is not UTF-8 text", error_type="output_not_text"
        )
    return outcomes.succeeded(call, cap_text(text), tool=tool.name, tool_type=tool.tool_type)


def _not_started(call: FunctionCall, tool: Tool, error_type: str, message: str) -> CallOutcome:
    return outcomes.not_started(
        call, error_type, cap_text(message), tool=tool.name, tool_type=tool.tool_type
    )


async def race_cancel(work: Awaitable[_T], cancelled: asyncio.Event) -> _T:
    """Await ``work`` unless ``cancelled`` is set first: then cancel it and raise Cancelled."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(cancelled.wait())
    try:
        done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        waiter.cancel()
        raise
    if task in done:
        waiter.cancel()
        return task.result()
    task.cancel()
    with contextlib.suppress(BaseException):  # the cancelled work's own outcome is irrelevant
        await task
    raise Cancelled
