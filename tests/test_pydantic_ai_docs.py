"""docs/integrations.md, section "pydantic-ai", stays true: its tables match the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tool_failure_guard.integrations.pydantic_ai import (
    OUTCOME_ROWS,
    RepeatedToolFailureCapability,
    outcome_table,
)
from tool_failure_guard.integrations.pydantic_ai._outcomes import Row, sample_outcome

DOC = Path(__file__).resolve().parent.parent / "docs" / "integrations.md"


def block(name: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    return text.split(f"<!-- {name}:begin -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0].strip()


def test_the_outcome_table_is_the_codes() -> None:
    assert block("pydantic-ai-outcome-table") == outcome_table()


@pytest.mark.parametrize("row", OUTCOME_ROWS, ids=lambda r: r.what[:40])
def test_each_rows_sample_settles_as_the_row_says(row: Row) -> None:
    outcome = sample_outcome(row)
    if row.terminal.startswith("(missing"):
        assert outcome is None
        return
    assert outcome is not None
    assert (outcome.terminal_status, outcome.execution_status) == (row.terminal, row.execution)
    named = re.fullmatch(r"`([a-z_]+)`", row.error_type)
    if named is not None:
        assert outcome.execution_error_type == named.group(1)
    elif row.error_type.startswith("(none"):
        assert outcome.execution_error_type is None
        if "post_processing_failed" in row.error_type:
            assert outcome.error_type == "post_processing_failed"
    else:  # a rule (the exception's type): the sample's execution type went through
        assert outcome.execution_error_type == row.sample_execution.error_type  # type: ignore[union-attr]


def test_the_hook_table_names_exactly_the_hooks_the_capability_implements() -> None:
    rows = [line for line in block("pydantic-ai-hooks").splitlines() if line.startswith("| `")]
    documented = {re.match(r"\| `([a-z_]+)`", row).group(1) for row in rows}  # type: ignore[union-attr]
    own = {
        name
        for name, value in vars(RepeatedToolFailureCapability).items()
        if callable(value) and not name.startswith("_")
    }
    assert documented == own
