"""One hook payload in, one answer out: bounded, a JSON object or a clear error.

A CLI writes the event as one JSON object on the hook's stdin and reads the
answer from its stdout.  The payload carries the tool's input and output, so
its size is bounded by :data:`MAX_PAYLOAD_BYTES`: a bigger one is refused with
an error that names the bound, never read into memory whole; one nested past
what the decoder can follow is refused the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, Final

#: The most bytes of one payload read from stdin (4 MiB); more is a :class:`PayloadError`.
MAX_PAYLOAD_BYTES: Final = 4 * 1024 * 1024


_JSON_TYPES: Final = {dict: "object", list: "array", int: "number", float: "number", bool: "bool"}


class PayloadError(ValueError):
    """The payload is not one JSON object within :data:`MAX_PAYLOAD_BYTES`."""


def parse_payload(data: bytes, *, limit: int = MAX_PAYLOAD_BYTES) -> dict[str, Any]:
    """``data`` as a JSON object, or a :class:`PayloadError` saying what is wrong."""
    if len(data) > limit:
        raise PayloadError(f"hook payload is larger than {limit} bytes (the bound)")
    if not data.strip():
        raise PayloadError("hook payload is empty: expected one JSON object on stdin")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise PayloadError(f"hook payload is not JSON ({error})") from None
    except RecursionError:
        raise PayloadError("hook payload is nested too deeply to read") from None
    if not isinstance(value, dict):
        raise PayloadError(f"hook payload is a JSON {type(value).__name__}, not an object")
    name = value.get("hook_event_name")
    if name is not None and not isinstance(name, str):
        raise PayloadError(
            f"hook payload field 'hook_event_name' is a JSON {_JSON_TYPES.get(type(name), 'value')}"
            ", not a string"
        )
    return value


def read_payload(stream: IO[bytes], *, limit: int = MAX_PAYLOAD_BYTES) -> dict[str, Any]:
    """Read one payload from ``stream`` (at most ``limit`` + 1 bytes are read)."""
    data = stream.read(limit + 1)
    return parse_payload(data, limit=limit)


def write_answer(answer: Mapping[str, Any] | None, stream: IO[str]) -> None:
    """Write ``answer`` as one JSON line; nothing at all for None (the CLI goes on)."""
    if answer is None:
        return
    stream.write(json.dumps(answer, ensure_ascii=False, separators=(",", ":")) + "\n")
    stream.flush()


def text_field(payload: Mapping[str, Any], name: str, *, limit: int = 1024) -> str:
    """``payload[name]`` as a non-empty string of at most ``limit`` characters, or an error."""
    value = payload.get(name)
    if not isinstance(value, str) or not value:
        raise PayloadError(f"hook payload field {name!r} must be a non-empty string")
    if len(value) > limit:
        raise PayloadError(f"hook payload field {name!r} is longer than {limit} characters")
    return value
