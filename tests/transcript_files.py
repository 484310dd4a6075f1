"""Helpers the transcript importer tests share: the fixtures, and edited copies of them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tool_failure_guard.transcripts.model import Run

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "transcripts"
CLAUDE = FIXTURES / "claude-code"
CODEX = FIXTURES / "codex"

Record = dict[str, Any]


def lines_of(path: Path) -> list[Record]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write(path: Path, records: list[Record]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def edited(source: Path, target: Path, edit: Callable[[list[Record]], list[Record]]) -> str:
    """A copy of ``source`` at ``target`` with its records passed through ``edit``."""
    return str(write(target, edit(lines_of(source))))


def canonical_sha256(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def outcome_rows(run: Run) -> list[list[tuple[str, str, str, str | None, bool, bool]]]:
    """Each turn's calls as (tool, status, execution status, error type, heuristic, mcp)."""
    return [
        [
            (
                c.tool,
                c.status.value,
                c.execution_status.value,
                c.error_type,
                c.heuristic,
                c.mcp,
            )
            for c in turn.calls
        ]
        for turn in run.turns
    ]
