"""The one reader every importer uses: bounded JSON Lines and JSON files, and fingerprints.

:func:`records` reads a JSON Lines file one bounded line at a time (at most
:data:`MAX_LINE_BYTES` bytes a line, at most :data:`MAX_FILE_BYTES` a file)
and yields each JSON object with its 1-based line number; :func:`json_document`
reads a whole-file JSON object (mini-swe-agent's trajectory), :func:`json_value` any
whole-file JSON value (an OpenHands V0 trajectory is a list); each opens only a regular
file (:func:`open_regular`: a FIFO or a device is refused, unread, never waited on) and
reads at most :data:`MAX_FILE_BYTES`.  Anything else
is a :class:`~tool_failure_guard.transcripts.model.TranscriptError` naming
``file:line``: a line that is not JSON (``truncated`` when it is the last line
and has no newline: a file cut off mid-write), not UTF-8 or nested too deeply,
a value that is not an object, a line too long, a file too large, an empty
file.  Nothing read here is ever printed.

:func:`fingerprint` is the stable digest of a call's arguments: SHA-256 of
their canonical JSON (sorted keys, no insignificant whitespace, UTF-8), or of
the raw text when the agent recorded arguments that are not JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from typing import IO, Any, Final

from tool_failure_guard.line_input import file_kind
from tool_failure_guard.transcripts.model import TranscriptError

#: The largest transcript file read (bytes); a bigger one is an error, not a silent cut.
MAX_FILE_BYTES: Final = 1024 * 1024 * 1024
#: The longest JSON Lines record read (bytes, its newline included).
MAX_LINE_BYTES: Final = 64 * 1024 * 1024
#: How many records a sniffer parses from the head at most.
SNIFF_RECORDS: Final = 8

_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
)


def fingerprint(arguments: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``arguments`` (a str that is not JSON: itself)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            text = arguments
        else:
            text = _CANONICAL.encode(arguments)
    else:
        text = _CANONICAL.encode(arguments)
    # a lone surrogate (a JSON "\ud800" escape) is kept, not an encoding error
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def open_regular(path: str) -> IO[bytes]:
    """``path`` opened for reading only when it is a regular file, else a
    :class:`TranscriptError` naming what it is, unread.

    Every read of a transcript goes through here, whether the path was named, walked or
    listed by an importer (an OpenHands event file): a FIFO is opened without blocking
    (``O_NONBLOCK``: no writer is waited for) and refused, a device (a link to
    ``/dev/zero``) is refused before a byte is read, and what is checked is the file
    opened (``fstat``), not a name that could be swapped after a check.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise TranscriptError(path, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise TranscriptError(path, None, f"{file_kind(mode)}, not a regular file: not read")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _checked_size(path: str) -> int:
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise TranscriptError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if size > MAX_FILE_BYTES:
        raise TranscriptError(
            path, None, f"larger than {MAX_FILE_BYTES} bytes; split it before importing"
        )
    return size


def records(source: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line of a JSON Lines file as ``(line number, JSON object)``."""
    path = os.fspath(source)
    limit = MAX_LINE_BYTES
    with open_regular(path) as handle:
        if _checked_size(path) == 0:
            raise TranscriptError(path, None, "empty file")
        number = 0
        while raw := handle.readline(limit + 1):
            number += 1
            if len(raw) > limit:
                raise TranscriptError(path, number, f"a record longer than {limit} bytes")
            try:  # a byte-order mark may open the file
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError:
                raise TranscriptError(path, number, "not UTF-8 text") from None
            if not text.strip():
                continue
            yield number, _record(text, path, number)


def _record(text: str, path: str, number: int) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if not text.endswith("\n"):  # only the last line can lack its newline
            raise TranscriptError(
                path, number, "truncated: the last line is an incomplete JSON record"
            ) from None
        raise TranscriptError(path, number, f"not a JSON record ({exc.msg})") from None
    except RecursionError:
        raise TranscriptError(path, number, "JSON nested too deeply") from None
    if not isinstance(value, dict):
        raise TranscriptError(path, number, f"not a JSON object (a {type(value).__name__})")
    return value


def json_document(source: str | os.PathLike[str]) -> dict[str, Any]:
    """A whole-file JSON object; a cut-short file names the line where it ends."""
    path = os.fspath(source)
    data = json_value(path)
    if not isinstance(data, dict):
        raise TranscriptError(path, 1, "the document must be a JSON object")
    return data


def json_value(source: str | os.PathLike[str]) -> Any:
    """A whole-file JSON value (an object or a list), read bounded; errors as
    :func:`json_document`'s."""
    path = os.fspath(source)
    try:
        with open_regular(path) as handle:
            _checked_size(path)
            raw = handle.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:  # grown since its size was taken
            raise TranscriptError(
                path, None, f"larger than {MAX_FILE_BYTES} bytes; split it before importing"
            )
        text = raw.decode("utf-8")
    except OSError as exc:
        raise TranscriptError(path, None, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TranscriptError(path, None, f"not UTF-8 text ({exc.reason})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            raise TranscriptError(
                path, exc.lineno, "truncated: the JSON document ends early"
            ) from None
        raise TranscriptError(path, exc.lineno, f"not JSON ({exc.msg})") from None
    except RecursionError:
        raise TranscriptError(path, None, "JSON nested too deeply") from None


def head_records(head: bytes, limit: int = SNIFF_RECORDS) -> list[dict[str, Any]]:
    """The JSON objects among the first complete lines of ``head`` (for sniffing; never raises).

    At most ``limit`` of them, from at most ``4 * limit`` lines; it stops at the
    first line that is not a JSON object.
    """
    out: list[dict[str, Any]] = []
    lines = head.split(b"\n")
    if len(lines) > 1:
        lines = lines[:-1]  # the last piece may be cut off by the head's size
    for raw in lines[: limit * 4]:
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested too deeply
            return out
        if not isinstance(value, dict):
            return out
        out.append(value)
        if len(out) >= limit:
            break
    return out


def as_int(value: Any) -> int | None:
    """A recorded token count, or None (bools, negatives and non-integers are not counts)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
