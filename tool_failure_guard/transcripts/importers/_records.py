"""What the JSON-lines importers share: bounded reading, the error vocabulary, fingerprints.

:func:`records` reads a file one bounded line at a time (at most
:data:`MAX_LINE_CHARS` characters a line, at most :data:`MAX_FILE_BYTES` a
file) and yields each JSON object with its 1-based line number; anything
else is a :class:`TranscriptError` naming ``file:line``: a line that is not
JSON (``truncated`` when it is the last line and has no newline: a file cut
off mid-write), a value that is not an object, a line too long, a file too
large, an empty file.

:func:`fingerprint` is the stable digest of a call's arguments: SHA-256 of
their canonical JSON (sorted keys, no insignificant whitespace, UTF-8), or of
the raw text when the agent recorded arguments that are not JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any, Final

from tool_failure_guard.line_input import MAX_LINE_CHARS
from tool_failure_guard.transcripts.model import TranscriptError

#: The largest transcript file read (bytes); an agent's session log is far smaller.
MAX_FILE_BYTES: Final = 1024 * 1024 * 1024
#: The most of a call's error text kept (characters); the rest is cut, marked by an ellipsis.
MAX_ERROR_TEXT: Final = 4096
#: How many records a sniffer parses from the head at most.
SNIFF_RECORDS: Final = 8

# The execution error types the importers emit (the project's vocabulary, docs/outcome-contract.md).
FILE_NOT_FOUND: Final = "file_not_found"
SHELL_EXECUTE_ERROR: Final = "shell_execute_error"
EXECUTION_TIMEOUT: Final = "execution_timeout"
INVALID_TOOL_PARAMS: Final = "invalid_tool_params"
TOOL_NOT_REGISTERED: Final = "tool_not_registered"
PERMISSION_DENIED: Final = "permission_denied"
MCP_TOOL_ERROR: Final = "mcp_tool_error"
#: A failure the log records as an error but says nothing more about (the original's generic type).
EXECUTION_FAILED: Final = "execution_failed"


def fingerprint(arguments: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``arguments`` (a str that is not JSON: itself)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return "sha256:" + hashlib.sha256(arguments.encode("utf-8")).hexdigest()
    canonical = json.dumps(
        arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def records(path: str, *, limit: int = MAX_LINE_CHARS) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line of ``path`` as ``(line number, JSON object)``; damage is an error."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise TranscriptError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if size > MAX_FILE_BYTES:
        raise TranscriptError(path, None, f"larger than {MAX_FILE_BYTES} bytes")
    if size == 0:
        raise TranscriptError(path, None, "empty file")
    number = 0
    try:
        with open(path, encoding="utf-8") as handle:
            while True:
                text = handle.readline(limit + 1)
                if not text:
                    return
                number += 1
                if len(text) > limit:
                    raise TranscriptError(path, number, f"line longer than {limit} characters")
                if not text.strip():
                    continue
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    if not text.endswith("\n"):  # only the last line can lack its newline
                        raise TranscriptError(
                            path, number, "truncated: the last line is an incomplete JSON record"
                        ) from None
                    raise TranscriptError(path, number, f"not JSON ({exc.msg})") from None
                if not isinstance(value, dict):
                    raise TranscriptError(
                        path, number, f"not a JSON object (a {type(value).__name__})"
                    )
                yield number, value
    except UnicodeDecodeError:
        raise TranscriptError(path, number + 1, "not UTF-8 text") from None


def head_records(head: bytes) -> list[dict[str, Any]]:
    """The JSON objects among the first complete lines of ``head`` (for sniffing; never raises)."""
    out: list[dict[str, Any]] = []
    lines = head.split(b"\n")
    if len(lines) > 1:
        lines = lines[:-1]  # the last piece may be cut off by the head's size
    for raw in lines[: SNIFF_RECORDS * 4]:
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            return out
        if not isinstance(value, dict):
            return out
        out.append(value)
        if len(out) >= SNIFF_RECORDS:
            break
    return out


def bounded_text(text: str) -> str:
    """``text``, cut to :data:`MAX_ERROR_TEXT` characters (the last one then ``…``)."""
    if len(text) <= MAX_ERROR_TEXT:
        return text
    return text[: MAX_ERROR_TEXT - 1] + "…"


def as_int(value: Any) -> int | None:
    """A recorded token count, or None (bools and non-integers are not counts)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
