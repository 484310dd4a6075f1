"""What every importer shares: bounded reading of JSON Lines and JSON files, and fingerprints.

Every error is a :class:`~tool_failure_guard.transcripts.model.TranscriptError`
naming ``file:line``; a last line cut short (no newline and not JSON) says
"truncated".  Nothing read here is ever printed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tool_failure_guard.transcripts.model import TranscriptError

#: The largest transcript file read (bytes); a bigger one is an error, not a silent cut.
MAX_FILE_BYTES = 1 << 30
#: The longest JSON Lines record read (bytes).
MAX_LINE_BYTES = 64 << 20

_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
)


def fingerprint(arguments: Any) -> str:
    """A stable digest of a call's arguments: key-sorted JSON (Qwen Code's canonical form)."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # not JSON: the text itself is the arguments
            arguments = json.loads(arguments)
    text = _CANONICAL.encode(arguments)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _check_size(path: Path) -> None:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TranscriptError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    if size > MAX_FILE_BYTES:
        raise TranscriptError(
            str(path), None, f"larger than {MAX_FILE_BYTES} bytes; split it before importing"
        )


def jsonl_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line of a JSON Lines file as ``(line number, object)``."""
    _check_size(path)
    name = str(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise TranscriptError(name, None, f"cannot read: {exc.strerror or exc}") from None
    with handle:
        number = 0
        for raw in handle:
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise TranscriptError(name, number, f"a record longer than {MAX_LINE_BYTES} bytes")
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
            except (ValueError, RecursionError):
                if not raw.endswith(b"\n"):
                    raise TranscriptError(
                        name, number, "truncated: the last record is cut short"
                    ) from None
                raise TranscriptError(name, number, "not a JSON record") from None
            if not isinstance(data, dict):
                raise TranscriptError(name, number, "a record must be a JSON object")
            yield number, data


def json_document(path: Path) -> dict[str, Any]:
    """A whole-file JSON object; a cut-short file names the line where it ends."""
    _check_size(path)
    name = str(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise TranscriptError(name, None, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TranscriptError(name, None, f"not UTF-8 text ({exc.reason})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            raise TranscriptError(
                name, exc.lineno, "truncated: the JSON document ends early"
            ) from None
        raise TranscriptError(name, exc.lineno, f"not JSON ({exc.msg})") from None
    except RecursionError:
        raise TranscriptError(name, None, "JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise TranscriptError(name, 1, "the document must be a JSON object")
    return data


def field(data: Mapping[str, Any], key: str, kind: type, path: Path, line: int) -> Any:
    """``data[key]`` of type ``kind``, else an error naming the record."""
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TranscriptError(str(path), line, f"{key!r} missing or not a {kind.__name__}")
    return value


def optional_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
