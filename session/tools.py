"""Real tools, confined to the session's working directory, failing with typed errors.

Every tool validates its arguments before anything runs (a validation failure
is :class:`InvalidToolParams`, execution ``not_started``) and, when it runs,
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
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

import attrs

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


class InvalidToolParams(Exception):
    """The model's arguments do not fit the tool's schema; nothing was executed."""


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

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        """Return the checked arguments or raise :class:`InvalidToolParams`."""
        ...

    def title(self, args: Mapping[str, Any]) -> str: ...

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        """Execute; return raw output bytes or raise (ideally :class:`ToolError`)."""
        ...


def _require_str(args: Mapping[str, Any], key: str, *, allow_empty: bool = False) -> str:
    if key not in args:
        raise InvalidToolParams(f"missing required argument {key!r}")
    value = args[key]
    if not isinstance(value, str):
        raise InvalidToolParams(f"argument {key!r} must be a string, got {type(value).__name__}")
    if not allow_empty and not value:
        raise InvalidToolParams(f"argument {key!r} must not be empty")
    return value


def _no_extra(args: Mapping[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(args) - allowed)
    if extra:
        raise InvalidToolParams(f"unexpected argument(s) {', '.join(map(repr, extra))}")


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

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        _no_extra(args, {"path"})
        return {"path": _require_str(args, "path")}

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

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        _no_extra(args, {"path", "content"})
        return {
            "path": _require_str(args, "path"),
            "content": _require_str(args, "content", allow_empty=True),
        }

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

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        _no_extra(args, {"path"})
        return {"path": _require_str(args, "path") if "path" in args else "."}

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

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        _no_extra(args, {"command", "timeout"})
        checked: dict[str, Any] = {"command": _require_str(args, "command")}
        if "timeout" in args:
            timeout = args["timeout"]
            if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
                raise InvalidToolParams("argument 'timeout' must be a positive number of seconds")
            checked["timeout"] = float(timeout)
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
