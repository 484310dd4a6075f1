"""docs/ stays true: tables in the docs are checked against the code."""

from __future__ import annotations

from pathlib import Path

from tool_failure_guard.guard import Observation, classify_observation

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _table(text: str, name: str) -> list[list[str]]:
    body = text.split(f"<!-- {name}:begin -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    rows = [line for line in body.strip().splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def test_outcome_contract_table_matches_the_classifier() -> None:
    rows = _table((DOCS / "outcome-contract.md").read_text(encoding="utf-8"), "outcome-table")
    assert len(rows) == 13
    for terminal, execution, expected in rows:
        statuses: list[str | None]
        if execution == "(any, or missing)":
            statuses = [None, "success", "error", "cancelled", "not_started", "unknown"]
        elif execution == "(missing)":
            statuses = [None]
        else:
            statuses = [execution]
        for status in statuses:
            observation = Observation(
                call_id="c1",
                terminal_status=terminal,
                execution_status=status,
                execution_error_type="file_not_found",
                policy_tool_name="read_file",
            )
            assert classify_observation(observation).value == expected, (terminal, status)
