"""What an MCP server sends beyond what the agent keeps: bounded reasons, ignored stdout noise.

A server's stdout is its JSON-RPC channel.  A server that also logs there
(``console.log`` in a Node server, ``print`` in a Python one) makes the SDK log
a full traceback for every such line and hand the session the parse error; the
connection itself keeps working.  :class:`StdoutNoise` is the session's
``message_handler`` for one server: it counts those lines and warns once, then
at most once per :data:`NOISE_WARNING_INTERVAL` seconds with the count, and a
last count when the server is closed; :func:`silence_parse_tracebacks` drops
the SDK's per-line traceback (1,000 such lines were 0.9 MB of stderr).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

_log = logging.getLogger("session.mcp")

#: Seconds between two warnings about one server's non-JSON-RPC stdout lines.
NOISE_WARNING_INTERVAL = 60.0
#: Characters of a server's own words (an error message) kept in a reason or a log line.
MAX_REASON_CHARS = 500
#: What the SDK logs, with a traceback, for every stdout line that is not JSON-RPC.
_SDK_PARSE_FAILURE = "Failed to parse JSONRPC message from server"


def _not_a_parse_failure(record: logging.LogRecord) -> bool:
    return record.msg != _SDK_PARSE_FAILURE


def silence_parse_tracebacks() -> None:
    """Drop the SDK's traceback per bad stdout line; :class:`StdoutNoise` reports them."""
    logger = logging.getLogger("mcp.client.stdio")
    if _not_a_parse_failure not in logger.filters:
        logger.addFilter(_not_a_parse_failure)


class StdoutNoise:
    """One server's stdout lines that were not JSON-RPC: counted, warned about sparingly."""

    def __init__(self, server: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.server = server
        self.lines = 0
        self._clock = clock
        self._reported = 0
        self._next_warning = 0.0

    async def __call__(self, message: Any) -> None:
        """The session's ``message_handler``: transport faults arrive here as exceptions."""
        if isinstance(message, Exception):
            self.seen()

    def seen(self) -> None:
        self.lines += 1
        now = self._clock()
        if self._reported == 0:
            _log.warning(
                "MCP server %r wrote a line to stdout that is not JSON-RPC (stdout is the "
                "protocol channel; logs belong on stderr): ignored, and so will be any more",
                self.server,
            )
        elif now < self._next_warning:
            return
        else:
            self._warn_count()
        self._reported = self.lines
        self._next_warning = now + NOISE_WARNING_INTERVAL

    def _warn_count(self) -> None:
        _log.warning(
            "MCP server %r: %d stdout lines that are not JSON-RPC ignored so far",
            self.server,
            self.lines,
        )

    def close(self) -> None:
        """A last count, if lines came after the last warning."""
        if self.lines > self._reported:
            self._warn_count()
            self._reported = self.lines


def short_reason(text: str) -> str:
    """A server-provided reason bounded to :data:`MAX_REASON_CHARS` characters."""
    if len(text) <= MAX_REASON_CHARS:
        return text
    return f"{text[:MAX_REASON_CHARS]}... [{len(text) - MAX_REASON_CHARS} more characters cut]"
