"""Real tools, confined to the session's working directory, failing with typed errors.

Every tool declares its arguments ONCE, as a JSON Schema (``parameters_schema``):
the same schema is sent to the model as the function's parameters and checked
(:func:`check_arguments`, with ``jsonschema``) before anything runs.  A
violation is :class:`InvalidToolParams`, execution ``not_started``; so are
arguments the model sent that are not a JSON object at all.  ``validate`` then
only fills defaults and normalises types.  When a tool runs, it
either returns its raw output or raises :class:`ToolError` carrying a stable,
low-cardinality ``error_type``.  The executor freezes that type at the moment
execution settles; nothing later may change it.

Confinement (:mod:`~tool_failure_guard.session.tools.fsaccess`): every path argument is
walked from a descriptor of the session's working directory and must stay inside it after
symlinks are resolved; a write follows no symlink and no file with a second
hard link; only regular files are read or written, without blocking, in a
worker thread (``not_a_regular_file`` for a pipe or device).  A path with a
NUL byte is ``invalid_tool_params``.  The shell tool
runs with that directory as its working directory and a timeout; it is not a
sandbox (a command may still ``cd ..``), which is why it asks for permission.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import attrs

from tool_failure_guard.session.tools import fsaccess
from tool_failure_guard.session.tools.schema_check import (
    InvalidToolParams as InvalidToolParams,  # re-exported
)
from tool_failure_guard.session.tools.schema_check import check_arguments as check_arguments
from tool_failure_guard.session.tools.schema_check import schema_validator as schema_validator
from tool_failure_guard.session.tools.shell_output import (
    ShellOutput,
    kill_process_group,
    process_slots,
)
from tool_failure_guard.worker_threads import WorkerThreads

_T = TypeVar("_T")

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]

#: Seconds a shell command may run before it is killed (``shell_timeout``).
DEFAULT_SHELL_TIMEOUT = 30.0
#: Bytes of file or command output kept (the rest is cut, before decoding).
MAX_OUTPUT_BYTES = 64 * 1024


class ToolError(Exception):
    """A typed execution failure: ``error_type`` is the classified reason."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


class ToolNotStarted(Exception):
    """The tool's backend refused the call before executing it (an MCP server's -32602).

    ``error_type`` is the not-started reason (``tool_not_registered`` or
    ``invalid_tool_params``); the executor settles the call as ``not_started``.
    """

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


@attrs.frozen
class ToolContext:
    """What a running tool may use: the confined working directory and its limits."""

    cwd: Path
    shell_timeout: float = DEFAULT_SHELL_TIMEOUT


class Tool(Protocol):
    """A registered tool.  ``name`` is the policy name the receipt carries."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> ToolKind: ...

    @property
    def tool_type(self) -> Literal["native", "mcp"]: ...

    @property
    def needs_permission(self) -> bool: ...

    @property
    def description(self) -> str:
        """What the model is told the tool does."""
        ...

    @property
    def parameters_schema(self) -> Mapping[str, Any]:
        """The one JSON Schema of the arguments: sent to the model, checked before running."""
        ...

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        """Arguments that passed the schema -> normalised ones (defaults, types).

        May still raise :class:`InvalidToolParams` for what a schema cannot say.
        """
        ...

    def title(self, args: Mapping[str, Any]) -> str: ...

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        """Execute; return raw output bytes or raise (ideally :class:`ToolError`)."""
        ...


def _object_schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> Mapping[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_PATH = {"type": "string", "minLength": 1}


def checked_path(args: Mapping[str, Any], key: str = "path") -> str:
    """A path argument a file system can take, else :class:`InvalidToolParams`."""
    raw = args[key]
    if "\0" in raw:
        raise InvalidToolParams(f"argument {key!r} contains a NUL byte")
    try:
        os.fsencode(raw)
    except UnicodeEncodeError:
        raise InvalidToolParams(f"argument {key!r} is not a valid file name") from None
    return str(raw)


#: The file tools' worker thread: the event loop never waits on the file system.  One
#: thread, so operations finish in the order they were started (a batch's calls settle
#: in the same order on every run, as they did on the loop).
_FILE_IO = WorkerThreads(1, "file-tools")


async def _file_access(work: Callable[..., _T], *args: Any) -> _T:
    """Run one confined file operation in the worker thread; its failure is a ToolError.

    Each operation is bounded (regular files only, never a blocking open, at most
    :data:`MAX_OUTPUT_BYTES` read); cancelling the awaiting task returns at once.
    """
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(_FILE_IO.executor, functools.partial(work, *args))
    except fsaccess.FileAccessError as exc:
        raise ToolError(exc.error_type, str(exc)) from None


@attrs.frozen
class ReadFile:
    name: str = "read_file"
    kind: ToolKind = "read"
    tool_type: Literal["native", "mcp"] = "native"
    needs_permission: bool = False
    description: str = "Read a text file in the working directory (at most 64 KiB)."
    parameters_schema: Mapping[str, Any] = attrs.field(
        factory=lambda: _object_schema(
            {"path": {**_PATH, "description": "file path, relative to the working directory"}},
            ("path",),
        ),
        eq=False,
        hash=False,
    )

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"path": checked_path(args)}

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Read {args.get('path', '?')}"

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        root = context.cwd.resolve()
        return await _file_access(
            fsaccess.read_file, root, context.cwd, args["path"], MAX_OUTPUT_BYTES
        )


@attrs.frozen
class WriteFile:
    name: str = "write_file"
    kind: ToolKind = "edit"
    tool_type: Literal["native", "mcp"] = "native"
    needs_permission: bool = True
    description: str = "Create or overwrite a UTF-8 text file in the working directory."
    parameters_schema: Mapping[str, Any] = attrs.field(
        factory=lambda: _object_schema(
            {
                "path": {**_PATH, "description": "file path, relative to the working directory"},
                "content": {"type": "string", "description": "the whole new file content"},
            },
            ("path", "content"),
        ),
        eq=False,
        hash=False,
    )

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        content = args["content"]
        try:
            content.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidToolParams("argument 'content' is not valid UTF-8 text") from None
        return {"path": checked_path(args), "content": content}

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Write {args.get('path', '?')}"

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        root = context.cwd.resolve()
        data = args["content"].encode("utf-8")
        await _file_access(fsaccess.write_file, root, context.cwd, args["path"], data)
        return f"wrote {len(args['content'])} characters to {args['path']}".encode()


@attrs.frozen
class ListDirectory:
    name: str = "list_directory"
    kind: ToolKind = "search"
    tool_type: Literal["native", "mcp"] = "native"
    needs_permission: bool = False
    description: str = "List the entries of a directory (directories end with '/')."
    parameters_schema: Mapping[str, Any] = attrs.field(
        factory=lambda: _object_schema(
            {"path": {**_PATH, "description": "directory, relative; default '.'"}}
        ),
        eq=False,
        hash=False,
    )

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"path": checked_path({"path": args.get("path", ".")})}

    def title(self, args: Mapping[str, Any]) -> str:
        return f"List {args.get('path', '.')}"

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        root = context.cwd.resolve()
        names = await _file_access(fsaccess.list_directory, root, context.cwd, args["path"])
        return "\n".join(names).encode()


@attrs.frozen
class RunShellCommand:
    name: str = "run_shell_command"
    kind: ToolKind = "execute"
    tool_type: Literal["native", "mcp"] = "native"
    needs_permission: bool = True
    description: str = (
        "Run a shell command (sh -c) in the working directory; a non-zero exit is an error."
    )
    parameters_schema: Mapping[str, Any] = attrs.field(
        factory=lambda: _object_schema(
            {
                "command": {"type": "string", "minLength": 1, "description": "the command"},
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "seconds before the command is killed (capped by the agent)",
                },
            },
            ("command",),
        ),
        eq=False,
        hash=False,
    )

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        checked: dict[str, Any] = {"command": args["command"]}
        if "timeout" in args:
            try:
                timeout = float(args["timeout"])
            except OverflowError:  # an integer past a float's range
                timeout = math.inf
            if not math.isfinite(timeout):  # NaN passes exclusiveMinimum; JSON allows it here
                raise InvalidToolParams("argument 'timeout' must be a finite number of seconds")
            checked["timeout"] = timeout
        return checked

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Run {args.get('command', '?')}"

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        async with process_slots():  # at most MAX_CONCURRENT_SHELL_PROCESSES at once
            return await self._run_process(args, context)

    async def _run_process(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        timeout = min(args.get("timeout", context.shell_timeout), context.shell_timeout)
        process = await asyncio.create_subprocess_shell(
            args["command"],
            cwd=context.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PAGER": "cat"},
            start_new_session=True,
        )
        assert process.stdout is not None
        output = ShellOutput()
        try:
            async with asyncio.timeout(timeout):
                await output.read_all(process.stdout)
                await process.wait()
        except TimeoutError:
            await kill_process_group(process)
            raise ToolError("execution_timeout", f"command timed out after {timeout:g}s") from None
        except asyncio.CancelledError:
            await kill_process_group(process)
            raise
        if process.returncode != 0:
            tail = output.text()[-2000:]
            raise ToolError(
                "shell_execute_error", f"exit status {process.returncode}\n{tail}".rstrip()
            )
        return output.bytes()


def default_tools() -> dict[str, Tool]:
    """The built-in registry: policy name -> tool."""
    tools: list[Tool] = [ReadFile(), WriteFile(), ListDirectory(), RunShellCommand()]
    return {tool.name: tool for tool in tools}
