"""The analysis as SQL over the documented table layout (``docs/rollout.md``).

Everything here is plain SQL over one table, ``logs``, shaped like the
Collector's ClickHouse ``otel_logs`` (``Timestamp``, ``EventName``,
``ResourceAttributes`` and ``LogAttributes`` as string maps).  The views
name the records of ``docs/telemetry.md``:

``records``       every log record with its resource columns (environment, owner, version)
``prompts``       one row per prompt outcome record (+ ``completed``, ``started_at``, ``day``)
``calls``         one row per settled call
``guard_events``  one row per guard transition (with the candidate's public key fields)
``sessions``      one row per session-closed record
``prompt_facts``  prompts + guard flags, calls saved, disconnect-or-retry (a table)

The loader materialises ``prompts``, ``calls``, ``guard_events`` and
``sessions`` as tables (each is read by several queries); where the logs live
in ClickHouse, create them as views.  Map access ``m['key']`` and the window
functions used are the same in DuckDB
and ClickHouse; the few spelling differences are listed in the docs.
"""

from __future__ import annotations

from typing import Final

# The record names are the agent's own (one declaration, in session.telemetry).
from session.telemetry import GUARD_LOG_EVENT as GUARD_EVENT
from session.telemetry import (
    GUARD_ROUTES,
    PROMPT_EVENT,
    REPEATED_TOOL_EXECUTION_FAILURE,
    SESSION_CLOSED_EVENT,
    TOOL_CALL_EVENT,
)
from session.telemetry import LOOP_DETECTED_EVENT as LOOP_EVENT

#: The prompts the gates compare: every guard host's (the ACP session's and each framework
#: adapter's), never a channel bridge's.
GUARDED_ROUTE: Final = "route IN ({})".format(", ".join(f"'{r}'" for r in sorted(GUARD_ROUTES)))
#: Decisions that counted a candidate (the batch had exactly one eligible key).
CANDIDATE_DECISIONS: Final = ("tracked", "would_warn", "warned", "would_stop", "stopped")
#: Minutes within which a disconnect or a new prompt counts against the prompt before it.
RETRY_WINDOW_MINUTES: Final = 10

LOGS_TABLE: Final = """
CREATE TABLE logs (
    Timestamp TIMESTAMP,
    EventName VARCHAR,
    ResourceAttributes MAP(VARCHAR, VARCHAR),
    LogAttributes MAP(VARCHAR, VARCHAR)
)
"""

_CANDIDATES = ", ".join(f"'{d}'" for d in CANDIDATE_DECISIONS)

VIEWS: Final = (
    """
CREATE VIEW records AS
SELECT Timestamp AS ts, EventName AS event,
       coalesce(ResourceAttributes['deployment.environment'],
                ResourceAttributes['deployment.environment.name']) AS environment,
       ResourceAttributes['enduser.pseudo.id'] AS owner,
       ResourceAttributes['service.version'] AS service_version,
       LogAttributes AS attributes
FROM logs
""",
    f"""
CREATE VIEW prompts AS
SELECT environment, owner, service_version, ts AS ended_at,
       ts - to_milliseconds(CAST(attributes['wall_time_ms'] AS BIGINT)) AS started_at,
       CAST(ts AS DATE) AS day,
       attributes['prompt_id'] AS prompt_id,
       split_part(attributes['prompt_id'], '########', 1) AS session_id,
       attributes['route'] AS route,
       attributes['mode'] AS mode,
       attributes['stop_reason'] AS stop_reason,
       attributes['loop_type'] AS loop_type,
       CAST(attributes['model_turns'] AS BIGINT) AS model_turns,
       CAST(attributes['tool_calls'] AS BIGINT) AS tool_calls,
       CAST(attributes['tool_call_cap'] AS BIGINT) AS tool_call_cap,
       CAST(attributes['batches'] AS BIGINT) AS batches,
       CAST(attributes['input_tokens'] AS BIGINT) AS input_tokens,
       CAST(attributes['output_tokens'] AS BIGINT) AS output_tokens,
       CAST(attributes['model_latency_ms'] AS BIGINT) AS model_latency_ms,
       CAST(attributes['wall_time_ms'] AS BIGINT) AS wall_time_ms,
       attributes['drain_supported'] = 'true' AS drain_supported,
       (attributes['stop_reason'] = 'end_turn' AND attributes['loop_type'] IS NULL)
           AS completed
FROM records WHERE event = '{PROMPT_EVENT}'
""",
    f"""
CREATE VIEW calls AS
SELECT environment, owner, ts,
       attributes['prompt_id'] AS prompt_id,
       CAST(attributes['batch_ordinal'] AS BIGINT) AS batch_ordinal,
       CAST(attributes['call_ordinal'] AS BIGINT) AS call_ordinal,
       attributes['terminal_status'] AS terminal_status,
       attributes['execution_status'] AS execution_status,
       attributes['execution_error_type'] AS execution_error_type,
       attributes['tool_type'] AS tool_type,
       attributes['provider_duplicate'] = 'true' AS provider_duplicate
FROM records WHERE event = '{TOOL_CALL_EVENT}'
""",
    f"""
CREATE VIEW guard_events AS
SELECT environment, owner, ts,
       attributes['prompt_id'] AS prompt_id,
       attributes['mode'] AS mode,
       attributes['decision'] AS decision,
       attributes['reset_reason'] AS reset_reason,
       attributes['phase_before'] AS phase_before,
       attributes['phase_after'] AS phase_after,
       CAST(attributes['candidate_ordinal'] AS BIGINT) AS candidate_ordinal,
       CAST(attributes['batch_ordinal'] AS BIGINT) AS batch_ordinal,
       coalesce(attributes['receipt_complete'], 'true') = 'true' AS receipt_complete,
       attributes['execution_error_type'] AS execution_error_type,
       attributes['tool_type'] AS tool_type,
       decision IN ({_CANDIDATES}) AS counted_candidate
FROM records WHERE event = '{GUARD_EVENT}'
""",
    f"""
CREATE VIEW sessions AS
SELECT environment, owner, ts AS closed_at,
       attributes['session_id'] AS session_id,
       attributes['close_reason'] AS close_reason,
       CAST(attributes['prompts'] AS BIGINT) AS prompts
FROM records WHERE event = '{SESSION_CLOSED_EVENT}'
""",
)

#: Built once per analysis (a table: check and gates both read it).
PROMPT_FACTS: Final = f"""
CREATE TABLE prompt_facts AS
WITH flags AS (
    SELECT prompt_id,
           bool_or(decision IN ('would_warn', 'warned')) AS would_warn,
           bool_or(decision = 'would_stop') AS would_stop,
           bool_or(decision = 'stopped') AS stopped,
           min(batch_ordinal) FILTER (WHERE decision IN ('would_stop', 'stopped')) AS stop_batch
    FROM guard_events GROUP BY prompt_id
),
saved AS (
    SELECT c.prompt_id, count(*) AS calls_after_would_stop
    FROM calls c JOIN flags f ON c.prompt_id = f.prompt_id
    WHERE f.would_stop AND c.batch_ordinal > f.stop_batch AND NOT c.provider_duplicate
    GROUP BY c.prompt_id
),
ordered AS (
    SELECT p.*,
           lead(p.started_at) OVER (
               PARTITION BY p.environment, p.owner ORDER BY p.started_at, p.prompt_id
           ) AS next_started_at
    FROM prompts p
),
disconnects AS (
    SELECT session_id, min(closed_at) AS closed_at
    FROM sessions WHERE close_reason = 'disconnect' GROUP BY session_id
)
SELECT o.* EXCLUDE (next_started_at),
       coalesce(f.would_warn, false) AS would_warn,
       coalesce(f.would_stop, false) AS would_stop,
       coalesce(f.stopped, false) AS stopped,
       coalesce(s.calls_after_would_stop, 0) AS calls_after_would_stop,
       (NOT o.completed AND o.next_started_at IS NOT NULL
            AND o.next_started_at >= o.ended_at
            AND o.next_started_at <= o.ended_at + INTERVAL {RETRY_WINDOW_MINUTES} MINUTE)
       OR (d.closed_at IS NOT NULL AND d.closed_at >= o.ended_at
            AND d.closed_at <= o.ended_at + INTERVAL {RETRY_WINDOW_MINUTES} MINUTE)
           AS disconnect_or_retry
FROM ordered o
LEFT JOIN flags f ON f.prompt_id = o.prompt_id
LEFT JOIN saved s ON s.prompt_id = o.prompt_id
LEFT JOIN disconnects d ON d.session_id = o.session_id
"""

#: Attribute keys each of our events may carry (anything else is a forbidden field).
ALLOWED_KEYS: Final = {
    PROMPT_EVENT: (
        "prompt_id route mode stop_reason loop_type model_turns tool_calls tool_call_cap "
        "batches input_tokens output_tokens model_latency_ms wall_time_ms drain_supported"
    ),
    TOOL_CALL_EVENT: (
        "prompt_id batch_ordinal call_ordinal terminal_status execution_status "
        "execution_error_type tool_type provider_duplicate"
    ),
    GUARD_EVENT: (
        "route mode phase_before phase_after decision failure_count_bucket batch_count_bucket "
        "reset_reason terminal_status execution_status tool_type prompt_id candidate_ordinal "
        "execution_error_type batch_ordinal receipt_complete"
    ),
    SESSION_CLOSED_EVENT: "session_id close_reason prompts",
    LOOP_EVENT: "loop_type prompt_id",
}

_ALLOWED_ROWS = ", ".join(
    f"('{event}', '{key}')" for event, keys in ALLOWED_KEYS.items() for key in keys.split()
)

#: Values that look like raw data: a path, whitespace (free text), or something long.
_RAW_VALUE = r"(^/|^~/|^[A-Za-z]:\\|\s)"

#: name -> (description, SQL returning (environment, prompt_id) per violation).
INVARIANTS: Final[dict[str, tuple[str, str]]] = {
    "cancelled_counted": (
        "a cancelled call was counted as an eligible failure",
        """
SELECT DISTINCT g.environment, g.prompt_id FROM guard_events g
JOIN calls c ON c.prompt_id = g.prompt_id AND c.batch_ordinal = g.batch_ordinal
WHERE g.counted_candidate
  AND (c.terminal_status = 'cancelled' OR c.execution_status = 'cancelled')
""",
    ),
    "ineligible_counted": (
        "a not_started, unknown or post-execution failure was counted",
        """
SELECT DISTINCT g.environment, g.prompt_id FROM guard_events g
JOIN calls c ON c.prompt_id = g.prompt_id AND c.batch_ordinal = g.batch_ordinal
WHERE g.counted_candidate AND NOT c.provider_duplicate
  AND (c.execution_status IN ('not_started', 'unknown') OR c.terminal_status = 'unknown'
       OR (c.terminal_status = 'error' AND c.execution_status = 'success'))
""",
    ),
    "incomplete_batch_decision": (
        "a decision was taken on a batch not proven complete",
        """
SELECT DISTINCT g.environment, g.prompt_id FROM guard_events g
WHERE g.counted_candidate AND (NOT g.receipt_complete OR NOT EXISTS (
    SELECT 1 FROM calls c WHERE c.prompt_id = g.prompt_id AND c.batch_ordinal = g.batch_ordinal))
""",
    ),
    "enforced_after_unreliable_drain": (
        "a stop was enforced after an unreliable drain in the same prompt",
        """
SELECT DISTINCT g.environment, g.prompt_id FROM guard_events g
WHERE g.decision = 'stopped' AND EXISTS (
    SELECT 1 FROM guard_events u WHERE u.prompt_id = g.prompt_id
      AND u.reset_reason = 'unreliable_input' AND u.batch_ordinal <= g.batch_ordinal)
""",
    ),
    "forbidden_telemetry_field": (
        "a record carried an undocumented key or a raw-looking value (path, text)",
        f"""
WITH allowed(event, key) AS (VALUES {_ALLOWED_ROWS}),
kv AS (
    SELECT environment, event, attributes['prompt_id'] AS prompt_id,
           unnest(map_keys(attributes)) AS key, unnest(map_values(attributes)) AS value
    FROM records WHERE event LIKE 'tool_failure_guard.%'
)
SELECT DISTINCT kv.environment, coalesce(kv.prompt_id, '(' || kv.event || ')') FROM kv
LEFT JOIN allowed a ON a.event = kv.event AND a.key = kv.key
WHERE a.key IS NULL OR (kv.key NOT IN ('prompt_id', 'session_id')
                        AND (regexp_matches(kv.value, '{_RAW_VALUE}') OR length(kv.value) > 64))
""",
    ),
    "stop_without_prior_warn": (
        "a would_stop/stop had no earlier would_warn/warn of the same prompt and candidate",
        """
SELECT DISTINCT g.environment, g.prompt_id FROM guard_events g
WHERE g.decision IN ('would_stop', 'stopped') AND NOT EXISTS (
    SELECT 1 FROM guard_events w WHERE w.prompt_id = g.prompt_id
      AND w.candidate_ordinal = g.candidate_ordinal
      AND w.decision IN ('would_warn', 'warned') AND w.batch_ordinal < g.batch_ordinal)
""",
    ),
    "protections_changed": (
        "the tool-call cap or the duplicate-id protection behaved differently",
        """
SELECT DISTINCT environment, prompt_id FROM prompts
WHERE (tool_calls >= tool_call_cap AND loop_type IS NULL
       AND stop_reason NOT IN ('cancelled', 'error'))
   OR (loop_type = 'tool_call_cap' AND tool_calls < tool_call_cap)
UNION
SELECT DISTINCT environment, prompt_id FROM calls
WHERE provider_duplicate AND execution_status <> 'not_started'
""",
    ),
}

#: Phase 3 gate ``enforced_stops_well_formed``: SQL returning (environment, prompt_id) per
#: enforced stop that lacks one of what the specification requires of it (the expected
#: key, the reminder, complete batch receipts, kept history).  ``stopped`` happens only
#: in enforce, so these are the treatment's stops.  A stop is well formed when:
#:
#: * the key is known (``execution_error_type``) and an earlier **real** reminder
#:   (``warned``, not ``would_warn``) of the same prompt and candidate ordinal carries the
#:   same ``execution_error_type`` and ``tool_type`` (the candidate's public key fields);
#: * every guard event of that candidate in that prompt had a complete receipt;
#: * the prompt's outcome record ends with ``end_turn`` and loop type
#:   ``repeated_tool_execution_failure`` (the stop was persisted first: a stop whose
#:   history write failed ends the prompt in an internal error instead);
#: * a ``loop_detected`` record exists for the prompt.
ENFORCED_STOPS_MALFORMED: Final = f"""
WITH stops AS (
    SELECT environment, prompt_id, candidate_ordinal, batch_ordinal,
           execution_error_type, tool_type
    FROM guard_events WHERE decision = 'stopped'
),
reminded AS (
    SELECT DISTINCT s.prompt_id, s.candidate_ordinal FROM stops s
    JOIN guard_events w ON w.prompt_id = s.prompt_id
     AND w.candidate_ordinal = s.candidate_ordinal AND w.decision = 'warned'
     AND w.batch_ordinal < s.batch_ordinal
     AND w.execution_error_type = s.execution_error_type
     AND w.tool_type IS NOT DISTINCT FROM s.tool_type
),
incomplete AS (
    SELECT DISTINCT s.prompt_id, s.candidate_ordinal FROM stops s
    JOIN guard_events e ON e.prompt_id = s.prompt_id
     AND e.candidate_ordinal = s.candidate_ordinal AND NOT e.receipt_complete
),
loops AS (
    SELECT DISTINCT attributes['prompt_id'] AS prompt_id FROM records
    WHERE event = '{LOOP_EVENT}'
)
SELECT DISTINCT s.environment, s.prompt_id FROM stops s
LEFT JOIN reminded r ON r.prompt_id = s.prompt_id AND r.candidate_ordinal = s.candidate_ordinal
LEFT JOIN incomplete i ON i.prompt_id = s.prompt_id AND i.candidate_ordinal = s.candidate_ordinal
LEFT JOIN prompts p ON p.prompt_id = s.prompt_id
LEFT JOIN loops l ON l.prompt_id = s.prompt_id
WHERE s.execution_error_type IS NULL OR r.prompt_id IS NULL OR i.prompt_id IS NOT NULL
   OR p.prompt_id IS NULL OR p.stop_reason IS DISTINCT FROM 'end_turn'
   OR p.loop_type IS DISTINCT FROM '{REPEATED_TOOL_EXECUTION_FAILURE}'
   OR l.prompt_id IS NULL
"""
