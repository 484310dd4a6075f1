"""Hand-built guard records for the rollout tests: (kind, owner, attributes) rows.

:func:`engine` loads them into DuckDB's ``logs`` table; :func:`otel_rows`
turns them into rows of the exporter's ``otel_logs`` table for ClickHouse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import duckdb

from tool_failure_guard.rollout import sql
from tool_failure_guard.rollout.engine import DuckDBEngine
from tool_failure_guard.telemetry import names

EVENTS = {
    "prompt": names.PROMPT_EVENT,
    "guard": names.GUARD_LOG_EVENT,
    "call": names.TOOL_CALL_EVENT,
    "loop": names.LOOP_DETECTED_EVENT,
}
#: The names an earlier build wrote (``names.EARLIER_EVENT_NAMES``), for the alias tests;
#: its records carried the scope too, but exports made without it exist (``scope=""``).
EARLIER_EVENTS = {
    kind: next((old for old, new in names.EARLIER_EVENT_NAMES.items() if new == name), name)
    for kind, name in EVENTS.items()
}
#: A row's instrumentation scope: the sink's.
SCOPE = names.INSTRUMENTATION_SCOPE
#: ``INSERT`` of one row into DuckDB's ``logs`` (time, name, scope, resource, attributes).
INSERT = (
    "INSERT INTO logs (Timestamp, EventName, ScopeName, ResourceAttributes, LogAttributes) "
    "VALUES (TIMESTAMP '2026-11-01 10:00:00' + to_seconds(?), ?, ?, "
)
#: One attribute map of DuckDB's ``logs`` table (its keys, their values) as parameters.
LISTS = "struct_pack(keys := ?::VARCHAR[], vals := ?::VARCHAR[])"
#: 2026-11-01T10:00:00Z, the first row's time (one second apart).
START_S = 1_793_527_200


def otel_rows(
    rows: list[tuple[str, str, dict[str, str]]],
    *,
    events: Mapping[str, str] = EVENTS,
    scope: str = SCOPE,
) -> list[dict[str, Any]]:
    """The same rows as ``otel_logs`` rows (JSONEachRow dicts)."""
    return [
        {
            "Timestamp": f"{START_S + second}.000000000",
            "EventName": events[kind],
            "ScopeName": scope,
            "ServiceName": "tool-failure-guard",
            "ResourceAttributes": {
                "deployment.environment": "internal",
                "enduser.pseudo.id": owner,
            },
            "LogAttributes": attributes,
        }
        for second, (kind, owner, attributes) in enumerate(rows)
    ]


def engine(
    rows: list[tuple[str, str, dict[str, str]]],
    *,
    events: Mapping[str, str] = EVENTS,
    scope: str = SCOPE,
) -> DuckDBEngine:
    """A ``logs`` table of (kind, owner, attributes) rows, one second apart."""
    con = duckdb.connect()
    con.execute(sql.LOGS_TABLE)
    for second, (kind, owner, attributes) in enumerate(rows):
        resource = {"deployment.environment": "internal", "enduser.pseudo.id": owner}
        con.execute(
            f"{INSERT}{LISTS}, {LISTS})",
            [
                second,
                events[kind],
                scope,
                list(resource),
                list(resource.values()),
                list(attributes),
                list(attributes.values()),
            ],
        )
    return DuckDBEngine(con)


def prompt(prompt_id: str, mode: str, calls: int, **extra: str) -> dict[str, str]:
    return {
        "prompt_id": prompt_id,
        "route": "acp_foreground",
        "mode": mode,
        "stop_reason": "end_turn",
        "model_turns": "5",
        "tool_calls": str(calls),
        "tool_call_cap": "40",
        "batches": str(calls),
        "wall_time_ms": "9000",
        "drain_supported": "true",
        **extra,
    }


def guard(prompt: str, mode: str, decision: str, batch: int, **extra: str) -> dict[str, str]:
    return {
        "route": "acp_foreground",
        "mode": mode,
        "decision": decision,
        "prompt_id": prompt,
        "candidate_ordinal": "1",
        "batch_ordinal": str(batch),
        "receipt_complete": "true",
        "execution_error_type": "mcp_tool_error",
        "tool_type": "mcp",
        **extra,
    }


def call(prompt: str, batch: int, **extra: str) -> dict[str, str]:
    return {
        "prompt_id": prompt,
        "batch_ordinal": str(batch),
        "call_ordinal": "0",
        "terminal_status": "error",
        "execution_status": "error",
        "execution_error_type": "mcp_tool_error",
        "tool_type": "mcp",
        "provider_duplicate": "false",
        **extra,
    }


def loop(prompt_id: str, mode: str, owner: str, downgrade_at: int | None = None) -> list[Any]:
    """A loop: would_warn at batch 2, would_stop at 3, four calls, one per batch."""
    rows: list[Any] = [("call", owner, call(prompt_id, b)) for b in (1, 2, 3, 4)]
    if downgrade_at is not None:
        reset = guard(prompt_id, mode, "reset", downgrade_at, reset_reason="unreliable_input")
        rows.append(("guard", owner, reset))
    rows += [
        ("guard", owner, guard(prompt_id, mode, "tracked", 1)),
        ("guard", owner, guard(prompt_id, mode, "would_warn", 2)),
        ("guard", owner, guard(prompt_id, mode, "would_stop", 3)),
        ("prompt", owner, prompt(prompt_id, mode, 4)),
    ]
    return rows
