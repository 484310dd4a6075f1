"""docs/transcripts.md's mapping tables name only the importers' error vocabulary, and all of it."""

from __future__ import annotations

import re
from pathlib import Path

from tool_failure_guard.agent_outcomes import vocabulary as _vocabulary

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
