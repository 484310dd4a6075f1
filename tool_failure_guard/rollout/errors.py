"""The analysis's errors: bad input (exit 2), never a verdict.

:class:`InputError` and its kinds say what the analysis cannot conclude from;
the command line turns every one into exit status 2 with its message.
"""

from __future__ import annotations

from typing import Any

Row = tuple[Any, ...]


class InputError(ValueError):
    """The telemetry cannot be analysed; the message names the source (file and line, table)."""


class MalformedNumbers(InputError):
    """Some count fields are not decimal counts: (event, field, count, example) rows."""

    def __init__(self, rows: list[Row]) -> None:
        event, field, count, example = rows[0]
        super().__init__(
            f"{int(count)} {event} record(s) carry a {field} that is not a decimal count "
            f"(first prompt id {example or '-'})"
        )
        self.rows = rows


class EngineError(InputError):
    """The engine cannot be reached, or rejected a query; the message says which."""


#: The most of an engine's or a client's error text a message quotes.
MAX_QUOTED = 1000


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s text (at most :data:`MAX_QUOTED` characters)."""
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    return line if len(line) <= MAX_QUOTED else line[:MAX_QUOTED] + " [cut]"
