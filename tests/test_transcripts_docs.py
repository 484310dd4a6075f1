"""docs/transcripts.md's mapping tables name only the importers' error vocabulary, and all of it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tool_failure_guard.agent_outcomes import vocabulary as _vocabulary
from tool_failure_guard.transcripts.importers import gemini_cli, openhands, swe_agent

DOC = Path(__file__).resolve().parent.parent / "docs" / "transcripts.md"
VOCABULARY = {
    value
    for name, value in vars(_vocabulary).items()
    if name.isupper() and isinstance(value, str) and re.fullmatch(r"[a-z_]+", value)
}


def table(marker: str) -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"<!-- {marker}:begin -->")[1].split(f"<!-- {marker}:end -->")[0]
    rows = [line for line in body.strip().splitlines() if line.startswith("|")][2:]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def error_types(rows: list[list[str]]) -> set[str]:
    found: set[str] = set()
    for row in rows:
        found |= set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", row[3]))
    return found


def test_the_tables_name_the_vocabulary() -> None:
    claude = error_types(table("claude-code-mapping"))
    codex = error_types(table("codex-mapping"))
    assert claude <= VOCABULARY and codex <= VOCABULARY
    assert claude | codex == VOCABULARY


def test_each_row_says_whether_it_is_heuristic_and_where_it_was_seen() -> None:
    for marker in ("claude-code-mapping", "codex-mapping"):
        for row in table(marker):
            assert len(row) == 6, row
            assert row[4] in ("yes", "no", "(as with no item)"), row
            assert "captured" in row[5] or "published format" in row[5], row


@pytest.mark.parametrize(
    ("marker", "module"),
    [
        ("openhands-mapping", openhands),
        ("swe-agent-mapping", swe_agent),
        ("gemini-cli-mapping", gemini_cli),
    ],
)
def test_the_new_kinds_tables_are_their_rules_in_order(marker: str, module: Any) -> None:
    """Each row is the module's RULES row at the same place: statuses, type, heuristic."""
    rows = table(marker)
    assert error_types(rows) <= VOCABULARY
    assert len(rows) == len(module.RULES)
    for row, (terminal, execution, error_type, heuristic) in zip(
        rows, module.RULES.values(), strict=True
    ):
        assert len(row) == 6, row
        assert (row[1], row[2]) == (terminal.value, execution.value), row
        assert row[3] == (error_type or "(none)"), row
        assert row[4] == ("yes" if heuristic else "no"), row
        assert any(s in row[5] for s in ("captured", "published format", "hand-written")), row
