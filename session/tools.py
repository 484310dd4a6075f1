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

Confinement: every path argument is resolved against the session's working
directory and must stay inside it after symlinks are resolved.  The shell tool
runs with that directory as its working directory and a timeout; it is not a
sandbox (a command may still ``cd ..``), which is why it asks for permission.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

import attrs

from session.schema_check import InvalidToolParams as InvalidToolParams  # re-exported
from session.schema_check import check_arguments as check_arguments
from session.schema_check import schema_validator as schema_validator

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


def confine(context: ToolContext, raw: str) -> Path:
    """Resolve ``raw`` inside the working directory or raise ``path_outside_workspace``."""
    root = context.cwd.resolve()
    candidate = (root / raw).resolve()
    if candidate != root and root not in candidate.parents:
        raise ToolError("path_outside_workspace", f"{raw} is outside the session directory")
    return candidate


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
        return {"path": args["path"]}

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Read {args.get('path', '?')}"

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        path = confine(context, args["path"])
        try:
            with path.open("rb") as handle:
                return handle.read(MAX_OUTPUT_BYTES)
        except FileNotFoundError:
            raise ToolError("file_not_found", f"{args['path']}: no such file") from None
        except IsADirectoryError:
            raise ToolError("is_a_directory", f"{args['path']} is a directory") from None
        except PermissionError:
            raise ToolError("permission_denied", f"{args['path']}: permission denied") from None


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
        return {"path": args["path"], "content": args["content"]}

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Write {args.get('path', '?')}"

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        path = confine(context, args["path"])
        if not path.parent.is_dir():
            raise ToolError("directory_not_found", f"{args['path']}: parent directory missing")
        try:
            path.write_text(args["content"], encoding="utf-8")
        except IsADirectoryError:
            raise ToolError("is_a_directory", f"{args['path']} is a directory") from None
        except PermissionError:
            raise ToolError("permission_denied", f"{args['path']}: permission denied") from None
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
        return {"path": args.get("path", ".")}

    def title(self, args: Mapping[str, Any]) -> str:
        return f"List {args.get('path', '.')}"

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        path = confine(context, args["path"])
        try:
            names = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in path.iterdir())
        except FileNotFoundError:
            raise ToolError("directory_not_found", f"{args['path']}: no such directory") from None
        except NotADirectoryError:
            raise ToolError("not_a_directory", f"{args['path']} is not a directory") from None
        except PermissionError:
            raise ToolError("permission_denied", f"{args['path']}: permission denied") from None
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
        try:
            output, _ = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            await _kill(process)
            raise ToolError("shell_timeout", f"command timed out after {timeout:g}s") from None
        except asyncio.CancelledError:
            await _kill(process)
            raise
        output = output[:MAX_OUTPUT_BYTES]
        if process.returncode != 0:
            tail = output.decode("utf-8", "replace")[-2000:]
            raise ToolError(
                "shell_nonzero_exit", f"exit status {process.returncode}\n{tail}".rstrip()
            )
        return output


async def _kill(process: asyncio.subprocess.Process) -> None:
    """Kill the command's process group and reap it (so its pipes close cleanly)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, 9)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(process.communicate(), 5)


def default_tools() -> dict[str, Tool]:
    """The built-in registry: policy name -> tool."""
    tools: list[Tool] = [ReadFile(), WriteFile(), ListDirectory(), RunShellCommand()]
    return {tool.name: tool for tool in tools}
