"""The invariants, the telemetry vocabulary and the enforced-stop checks, as portable SQL.

Each query reads the relations of :mod:`~tool_failure_guard.rollout.sql` and returns
``(environment, prompt_id)`` per finding; :func:`findings` wraps them into one
query that returns only counts and the first examples per environment, so
what leaves the engine does not grow with the records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.telemetry.sink import (
    EARLIER_VALUES,
    GUARD_METRIC_ATTRIBUTE_VALUES,
    LOOP_TYPES,
    PROMPT_EVENT,
    PROMPT_ROUTES,
    PROMPT_STOP_REASONS,
    REPEATED_TOOL_EXECUTION_FAILURE,
    SESSION_CLOSE_REASONS,
    SESSION_CLOSED_EVENT,
    TOOL_CALL_ATTRIBUTE_VALUES,
    TOOL_CALL_EVENT,
)
from tool_failure_guard.telemetry.sink import GUARD_LOG_EVENT as GUARD_EVENT
from tool_failure_guard.telemetry.sink import LOOP_DETECTED_EVENT as LOOP_EVENT

EXAMPLES: Final = 5

# -- the closed vocabulary of every field ------------------------------------------
#: Formats (RE2, matched whole): ids, counts, booleans, error types.
ID: Final = r"[A-Za-z0-9._:-]{1,128}"
#: The ACP session's ``<session id>########<n>``, or a framework adapter's run id (an ID).
PROMPT_ID: Final = ID + r"(########[0-9]{1,9})?"
COUNT: Final = r"[0-9]{1,12}"
BOOLEAN: Final = r"true|false"
ERROR_TYPE: Final = r"[a-z][a-z0-9_]{0,63}"

_MODES = frozenset(mode.value for mode in GuardMode)
#: The loop types a record may carry: those written now and those earlier builds wrote.
_LOOPS = LOOP_TYPES | {"other"} | frozenset(EARLIER_VALUES["loop_type"])
#: The sink's fallback for a value outside its set is ``unknown``.
_BOUNDARIES = frozenset({"drain", "prompt-only", "unsupported", "unknown"})

#: event -> field -> allowed values (a frozenset: an enum) or a format (a str: RE2).
VOCABULARY: Final[Mapping[str, Mapping[str, frozenset[str] | str]]] = {
    PROMPT_EVENT: {
        "prompt_id": PROMPT_ID,
        "route": PROMPT_ROUTES,
        "mode": _MODES,
        "stop_reason": PROMPT_STOP_REASONS,
        "loop_type": _LOOPS,
        "model_turns": COUNT,
        "tool_calls": COUNT,
        "tool_call_cap": COUNT,
        "batches": COUNT,
        "input_tokens": COUNT,
        "output_tokens": COUNT,
        "model_latency_ms": COUNT,
        "wall_time_ms": COUNT,
        "drain_supported": BOOLEAN,
        "input_boundary": _BOUNDARIES,
    },
    TOOL_CALL_EVENT: {
        "prompt_id": PROMPT_ID,
        "batch_ordinal": COUNT,
        "call_ordinal": COUNT,
        "terminal_status": TOOL_CALL_ATTRIBUTE_VALUES["terminal_status"],
        "execution_status": TOOL_CALL_ATTRIBUTE_VALUES["execution_status"],
        "execution_error_type": ERROR_TYPE,
        "tool_type": TOOL_CALL_ATTRIBUTE_VALUES["tool_type"],
        "provider_duplicate": BOOLEAN,
    },
    GUARD_EVENT: {
        **GUARD_METRIC_ATTRIBUTE_VALUES,
        "prompt_id": PROMPT_ID,
        "candidate_ordinal": COUNT,
        "execution_error_type": ERROR_TYPE,
        "batch_ordinal": COUNT,
        "receipt_complete": BOOLEAN,
    },
    SESSION_CLOSED_EVENT: {
        "session_id": ID,
        "close_reason": SESSION_CLOSE_REASONS,
        "prompts": COUNT,
    },
    LOOP_EVENT: {"loop_type": _LOOPS, "prompt_id": PROMPT_ID},
}
#: Keys an exporter may add itself (older ClickHouse exporters keep the event name here).
EXPORTER_KEYS: Final = ("event.name",)
#: Fields the analysis casts to numbers: a value outside the format is bad input, not a finding.
NUMERIC: Final = {
    event: tuple(k for k, v in fields.items() if v == COUNT) for event, fields in VOCABULARY.items()
}


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _value_ok(key: str, allowed: frozenset[str] | str) -> str:
    value = f"attributes[{_quote(key)}]"
    if isinstance(allowed, str):
        return f"coalesce(regexp_full_match({value}, {_quote(allowed)}), true)"
    members = ", ".join(_quote(v) for v in sorted(allowed))
    return f"coalesce({value} IN ({members}), true)"


def _record_ok(fields: Mapping[str, frozenset[str] | str]) -> str:
    # Every key known (the known keys present are all the keys), every value in its vocabulary.
    keys = ", ".join(_quote(k) for k in (*fields, *EXPORTER_KEYS))
    values = " AND ".join(_value_ok(k, v) for k, v in fields.items())
    return (
        f"len(list_intersect(map_keys(attributes), [{keys}])) = cardinality(attributes) "
        f"AND {values}"
    )


_BY_EVENT = " ".join(
    f"WHEN event = {_quote(e)} THEN {_record_ok(f)}" for e, f in VOCABULARY.items()
)
_FORBIDDEN = f"""
SELECT DISTINCT environment, coalesce(attributes['prompt_id'], '(' || event || ')') AS prompt_id
FROM records
WHERE NOT (CASE {_BY_EVENT} ELSE false END)
"""

_CANDIDATE_CALLS = """
SELECT DISTINCT g.environment AS environment, g.prompt_id AS prompt_id FROM guard_events g
JOIN calls c ON c.prompt_id = g.prompt_id AND c.batch_ordinal = g.batch_ordinal
WHERE g.counted_candidate = 1 AND {condition}
"""

#: name -> (description, SQL returning (environment, prompt_id) per violation).
INVARIANTS: Final[dict[str, tuple[str, str]]] = {
    "cancelled_counted": (
        "a cancelled call was counted as an eligible failure",
        _CANDIDATE_CALLS.format(
            condition="(c.terminal_status = 'cancelled' OR c.execution_status = 'cancelled')"
        ),
    ),
    "ineligible_counted": (
        "a not_started, unknown or post-execution failure was counted",
        _CANDIDATE_CALLS.format(
            condition="c.provider_duplicate = 0 AND (c.execution_status IN "
            "('not_started', 'unknown') OR c.terminal_status = 'unknown' "
            "OR (c.terminal_status = 'error' AND c.execution_status = 'success'))"
        ),
    ),
    "incomplete_batch_decision": (
        "a decision was taken on a batch not proven complete",
        """
SELECT DISTINCT g.environment AS environment, g.prompt_id AS prompt_id FROM guard_events g
LEFT JOIN (SELECT DISTINCT prompt_id, batch_ordinal FROM calls) c
  ON c.prompt_id = g.prompt_id AND c.batch_ordinal = g.batch_ordinal
WHERE g.counted_candidate = 1 AND (g.receipt_complete = 0 OR c.prompt_id IS NULL)
""",
    ),
    "enforced_after_unreliable_drain": (
        "a stop was enforced after an unreliable drain in the same prompt",
        """
SELECT DISTINCT g.environment AS environment, g.prompt_id AS prompt_id FROM guard_events g
JOIN (SELECT prompt_id, min(batch_ordinal) AS first_unreliable FROM guard_events
      WHERE reset_reason = 'unreliable_input' GROUP BY prompt_id) u ON u.prompt_id = g.prompt_id
WHERE g.decision = 'stopped' AND u.first_unreliable <= g.batch_ordinal
""",
    ),
    "forbidden_telemetry_field": (
        "a record carried an undocumented key, or a value outside its field's documented "
        "vocabulary (enum member or id format)",
        _FORBIDDEN,
    ),
    "stop_without_prior_warn": (
        "a would_stop/stop had no earlier would_warn/warn of the same prompt and candidate",
        """
SELECT DISTINCT g.environment AS environment, g.prompt_id AS prompt_id FROM guard_events g
LEFT JOIN (SELECT prompt_id, candidate_ordinal, min(batch_ordinal) AS first_warn
           FROM guard_events WHERE decision IN ('would_warn', 'warned')
           GROUP BY prompt_id, candidate_ordinal) w
  ON w.prompt_id = g.prompt_id AND w.candidate_ordinal = g.candidate_ordinal
WHERE g.decision IN ('would_stop', 'stopped')
  AND (w.first_warn IS NULL OR w.first_warn >= g.batch_ordinal)
""",
    ),
    "protections_changed": (
        "the tool-call cap or the duplicate-id protection behaved differently",
        """
SELECT DISTINCT environment, prompt_id FROM (
    SELECT environment, prompt_id FROM prompts
    WHERE (tool_call_cap > 0 AND tool_calls >= tool_call_cap AND loop_type IS NULL
           AND stop_reason NOT IN ('cancelled', 'error'))
       OR (loop_type = 'turn_tool_call_cap' AND tool_calls < tool_call_cap)
    UNION ALL
    SELECT environment, prompt_id FROM calls
    WHERE provider_duplicate = 1 AND execution_status <> 'not_started'
) x
""",
    ),
}

#: Phase 3 gate ``enforced_stops_well_formed``: (environment, prompt_id) per enforced stop
#: lacking what the specification requires of it (``docs/rollout.md`` section 5): the
#: expected key with an earlier real reminder (``warned``) of the same prompt, candidate,
#: error type and tool type; complete receipts for the whole candidate; the prompt ending
#: ``end_turn`` with this guard's loop type (the stop was persisted); a ``loop_detected``.
ENFORCED_STOPS_MALFORMED: Final = f"""
SELECT DISTINCT s.environment AS environment, s.prompt_id AS prompt_id FROM (
    SELECT environment, prompt_id, candidate_ordinal, batch_ordinal, execution_error_type,
           coalesce(tool_type, '') AS tool_kind
    FROM guard_events WHERE decision = 'stopped'
) s
LEFT JOIN (
    SELECT prompt_id, candidate_ordinal, execution_error_type,
           coalesce(tool_type, '') AS tool_kind, min(batch_ordinal) AS first_warned
    FROM guard_events WHERE decision = 'warned'
    GROUP BY prompt_id, candidate_ordinal, execution_error_type, coalesce(tool_type, '')
) r ON r.prompt_id = s.prompt_id AND r.candidate_ordinal = s.candidate_ordinal
   AND r.execution_error_type = s.execution_error_type AND r.tool_kind = s.tool_kind
LEFT JOIN (
    SELECT prompt_id, candidate_ordinal, max(1 - receipt_complete) AS incomplete
    FROM guard_events GROUP BY prompt_id, candidate_ordinal
) i ON i.prompt_id = s.prompt_id AND i.candidate_ordinal = s.candidate_ordinal
LEFT JOIN (SELECT prompt_id, min(stop_reason) AS stop_reason, min(loop_type) AS loop_type
           FROM prompts GROUP BY prompt_id) p ON p.prompt_id = s.prompt_id
LEFT JOIN (SELECT DISTINCT attributes['prompt_id'] AS prompt_id FROM records
           WHERE event = '{LOOP_EVENT}') l ON l.prompt_id = s.prompt_id
WHERE s.execution_error_type IS NULL OR r.first_warned IS NULL
   OR r.first_warned >= s.batch_ordinal OR coalesce(i.incomplete, 0) = 1
   OR p.prompt_id IS NULL OR coalesce(p.stop_reason, '') <> 'end_turn'
   OR coalesce(p.loop_type, '') <> '{REPEATED_TOOL_EXECUTION_FAILURE}'
   OR l.prompt_id IS NULL
"""


def findings(named: Mapping[str, str]) -> str:
    """One query over named finding queries: (name, environment, count, example) rows.

    Only the first :data:`EXAMPLES` prompt ids (in byte order) per name and
    environment leave the engine, each with the total count.
    """
    union = " UNION ALL ".join(
        f"SELECT {_quote(name)} AS name, environment, prompt_id FROM ({query}) q{i}"
        for i, (name, query) in enumerate(named.items())
    )
    return f"""
SELECT name, environment, total, prompt_id FROM (
    SELECT name, environment, prompt_id,
           row_number() OVER (PARTITION BY name, environment ORDER BY prompt_id) AS rn,
           count(*) OVER (PARTITION BY name, environment) AS total
    FROM ({union}) v
) ranked WHERE rn <= {EXAMPLES}
"""


def malformed_numbers() -> str:
    """(event, field, count, first prompt id) of numeric fields that are not decimal counts.

    One scan: each record names its first mistyped count field, if any.
    """
    branches = []
    for event, keys in NUMERIC.items():
        checks = " ".join(
            f"WHEN NOT coalesce(regexp_full_match(attributes[{_quote(k)}], {_quote(COUNT)}), "
            f"true) THEN {_quote(k)}"
            for k in keys
        )
        if checks:
            branches.append(f"WHEN event = {_quote(event)} THEN CASE {checks} END")
    return f"""
SELECT event, field, count(*) AS n, min(coalesce(prompt_id, '')) AS example FROM (
    SELECT event, attributes['prompt_id'] AS prompt_id,
           CASE {" ".join(branches)} END AS field
    FROM records
) bad WHERE field IS NOT NULL GROUP BY event, field
"""
