"""How a captured log becomes a fixture: the temporary directory out, vendor texts trimmed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCRUBBED_ROOT = "/tmp/capture"
TRIMMED = "[trimmed by tests/transcript_capture.py]"


def _trim(value: Any, keys: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {
            k: (TRIMMED if k in keys and isinstance(v, (str, list)) else _trim(v, keys))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_trim(v, keys) for v in value]
    return value


def scrub_lines(text: str, root: Path, *, kind: str) -> str:
    """The log with the temporary root replaced, and vendor instruction texts trimmed."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if kind == "claude-code":
            if "attachment" in record:
                record["attachment"] = _trim(
                    record["attachment"], frozenset({"content", "addedLines"})
                )
        else:
            payload = record.get("payload") or {}
            if record.get("type") == "session_meta":
                payload["base_instructions"] = TRIMMED
            if record.get("type") == "world_state":
                record["payload"] = _trim(payload, frozenset({"instructions", "text"}))
            if payload.get("type") == "message" and payload.get("role") in ("developer", "system"):
                payload["content"] = [{"type": "input_text", "text": TRIMMED}]
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        line = line.replace(str(root), SCRUBBED_ROOT)
        # Claude Code names a project's folder by its path, every other character a dash
        folder = re.sub(r"[^A-Za-z0-9]", "-", str(root))
        line = line.replace(folder, re.sub(r"[^A-Za-z0-9]", "-", SCRUBBED_ROOT))
        out.append(line)
    return "\n".join(out) + "\n"
