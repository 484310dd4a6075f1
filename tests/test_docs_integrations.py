"""docs/integrations.md stays true: its tables are checked against the core."""

from __future__ import annotations

import re
from pathlib import Path

from tool_failure_guard.core import EXCEPTION_ERROR_TYPES, CallOutcome, FunctionCall, outcomes
from tool_failure_guard.guard import Observation, classify_observation

DOC = Path(__file__).resolve().parent.parent / "docs" / "integrations.md"
CALL = FunctionCall(call_id="c1", name="read_file", args={"path": "x"})


def table(name: str) -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"<!-- {name}:begin -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    rows = [line for line in body.strip().splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def example(constructor: str) -> CallOutcome:
    """One outcome built by ``constructor`` for a call of read_file."""
    build = {
        "succeeded": lambda: outcomes.succeeded(CALL, "text"),
        "raised": lambda: outcomes.raised(CALL, FileNotFoundError()),
        "failed": lambda: outcomes.failed(CALL, "quota_exceeded", "over quota"),
        "invalid_arguments": lambda: outcomes.invalid_arguments(CALL, "bad"),
        "unknown_tool": lambda: outcomes.unknown_tool(CALL),
        "not_started": lambda: outcomes.not_started(CALL, "permission_request_failed", "x"),
        "skipped_by_cap": lambda: outcomes.skipped_by_cap(CALL, tool="read_file"),
        "cancelled_before": lambda: outcomes.cancelled_before(CALL),
        "rejected": lambda: outcomes.rejected(CALL),
        "cancelled_during": lambda: outcomes.cancelled_during(CALL),
        "post_processing_failed": lambda: outcomes.post_processing_failed(
            outcomes.succeeded(CALL), "hook failed"
        ),
        "provider_duplicate": lambda: outcomes.provider_duplicate(CALL, tool="read_file"),
    }
    return build[constructor]()


def test_the_outcome_table_matches_the_constructors_and_the_classifier() -> None:
    rows = table("core-outcome-table")
    documented = {row[1].strip("`") for row in rows}
    assert documented == {
        name
        for name in outcomes.__all__
        if callable(getattr(outcomes, name)) and name[0].islower() and name != "error_type_of"
    }
    given = {
        "`error_type_of(exc)`": "file_not_found",
        "the given type": "quota_exceeded",
        "the given reason": "permission_request_failed",
        "(none)": None,
    }
    for _, constructor, terminal, execution, error_type, cls in rows:
        outcome = example(constructor.strip("`"))
        assert (outcome.terminal_status, outcome.execution_status) == (terminal, execution)
        assert outcome.execution_error_type == given.get(error_type, error_type), constructor
        observation = Observation(
            call_id=outcome.call_id,
            terminal_status=outcome.terminal_status,
            execution_status=outcome.execution_status,
            execution_error_type=outcome.execution_error_type,
            policy_tool_name=outcome.policy_tool_name,
            tool_type=outcome.tool_type,
            provider_duplicate=constructor == "`provider_duplicate`",
        )
        assert classify_observation(observation).value == cls, constructor


def test_the_exception_table_is_the_cores() -> None:
    rows = table("exception-table")
    assert {name: error_type for name, error_type in rows} == {
        cls.__name__: error_type for cls, error_type in EXCEPTION_ERROR_TYPES.items()
    }
    assert [name for name, _ in rows] == [cls.__name__ for cls in EXCEPTION_ERROR_TYPES]


def github_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the page's headings (lower case, punctuation dropped, -N)."""
    anchors: set[str] = set()
    in_block = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_block = not in_block
        if in_block or not line.startswith("#"):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def test_the_contents_and_every_in_page_link_name_a_heading() -> None:
    text = DOC.read_text(encoding="utf-8")
    contents = text.split("Contents:", 1)[1].split("\n## ", 1)[0]
    linked = re.findall(r"\]\(#([^)]+)\)", text)
    assert len(re.findall(r"\]\(#", contents)) >= 15  # the table of contents is there
    missing = sorted(set(linked) - github_anchors(text))
    assert missing == [], f"docs/integrations.md links to no heading: {missing}"
    top_level = {line[3:] for line in text.splitlines() if line.startswith("## ")}
    assert all(f"[{title}](#" in contents for title in top_level - {"Contents"}), top_level
