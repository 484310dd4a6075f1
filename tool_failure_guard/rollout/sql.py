"""The analysis as SQL: one source, written once, rendered per engine
(:mod:`~tool_failure_guard.rollout.dialect`).

Every statement here is DuckDB SQL restricted to a portable subset that
:func:`~tool_failure_guard.rollout.dialect.to_clickhouse` turns into ClickHouse SQL (map access,
integer division, ``epoch_us``, ``split_part``, ``lead``, ``regexp_full_match`` are
the only spellings it rewrites).  Times are integer microseconds since the
epoch (``*_us``) and days integer day numbers, so both engines compute the
same numbers; no correlated subquery and no join on an inequality.

The relations (``RELATIONS``, each a ``SELECT`` over the one before) name the
records of ``docs/telemetry.md``:

``records``       every record of this agent with its resource columns (environment, owner,
                  version), under the name written now (``CANONICAL_EVENT``)
``prompts``       one row per prompt outcome record (+ ``completed``, ``input_boundary``, ``day``)
``calls``         one row per settled call
``guard_events``  one row per guard transition (with the candidate's public key fields)
``sessions``      one row per session-closed record
``prompt_facts``  prompts + guard flags, calls saved, disconnect-or-retry

DuckDB materialises them as tables; on ClickHouse they are common table
expressions of each query (nothing is created on the server).  The source
table is ``logs``, shaped like the Collector's ClickHouse exporter table
``otel_logs`` (DuckDB's keeps each attribute map as a key list and a value list,
:data:`ATTRIBUTES`); the queries of :mod:`~tool_failure_guard.rollout.queries` read the
relations.
"""

from __future__ import annotations

from typing import Final

from tool_failure_guard.telemetry.sink import (
    EARLIER_EVENT_NAMES,
    EARLIER_VALUES,
    GUARD_ROUTES,
    INSTRUMENTATION_SCOPE,
    OWN_PREFIX,
    PROMPT_EVENT,
    SESSION_CLOSED_EVENT,
    TOOL_CALL_EVENT,
)
from tool_failure_guard.telemetry.sink import GUARD_LOG_EVENT as GUARD_EVENT

#: The prompts the gates compare: every guard host's (the ACP session's and each framework
#: adapter's), never a channel bridge's.
GUARDED_ROUTE: Final = "route IN ({})".format(", ".join(f"'{r}'" for r in sorted(GUARD_ROUTES)))
#: Decisions that counted a candidate (the batch had exactly one eligible key).
CANDIDATE_DECISIONS: Final = ("tracked", "would_warn", "warned", "would_stop", "stopped")
#: Reset reasons that downgrade a prompt (its guard can no longer stop it).
DOWNGRADING_RESETS: Final = ("unreliable_input", "unknown", "contract_violation")
#: Minutes within which a disconnect or a new prompt counts against the prompt before it.
RETRY_WINDOW_MINUTES: Final = 10
#: The per-prompt input boundary kinds, each reported as its own cohort.
INPUT_BOUNDARIES: Final = ("drain", "prompt-only", "unsupported")
RECORD_PREFIX: Final = OWN_PREFIX

#: A source row's event name: OTLP's ``eventName``, else the ``event.name`` attribute (the
#: original writes only that; an older exporter keeps it there).
EVENT_NAME: Final = "coalesce(nullif(EventName, ''), LogAttributes['event.name'])"
#: Whether a source row is this agent's: written under its instrumentation scope, or named
#: in its own namespace (files from before the scope was kept, hand-made exports).  The
#: guard and loop records share their names with Qwen Code's (the original's names,
#: docs/telemetry.md); the scope tells them apart.
OURS: Final = (
    f"(coalesce(ScopeName, '') = '{INSTRUMENTATION_SCOPE}' OR {EVENT_NAME} LIKE '{OWN_PREFIX}%')"
)
#: The name a row is analysed under: an earlier build's name (``EARLIER_EVENT_NAMES``, the
#: one alias table) read as the name written now, so earlier exports lose nothing.
CANONICAL_EVENT: Final = (
    "CASE "
    + " ".join(
        f"WHEN {EVENT_NAME} = '{old}' THEN '{new}'" for old, new in EARLIER_EVENT_NAMES.items()
    )
    + f" ELSE {EVENT_NAME} END"
)


def canonical_value(key: str) -> str:
    """The attribute ``key`` of a record, an earlier build's value (``EARLIER_VALUES``, the
    one table) read as the value written now."""
    value = f"attributes['{key}']"
    earlier = EARLIER_VALUES.get(key, {})
    if not earlier:
        return value
    cases = " ".join(f"WHEN {value} = '{old}' THEN '{new}'" for old, new in earlier.items())
    return f"CASE {cases} ELSE {value} END"


#: DuckDB's type of an attribute column: the keys and their values, in the record's order
#: (the queries read it as a map: :func:`~tool_failure_guard.rollout.dialect.to_duckdb`).
ATTRIBUTES: Final = "STRUCT(keys VARCHAR[], vals VARCHAR[])"
LOGS_TABLE: Final = f"""
CREATE TABLE logs (
    Timestamp TIMESTAMP,
    EventName VARCHAR,
    ScopeName VARCHAR,
    ResourceAttributes {ATTRIBUTES},
    LogAttributes {ATTRIBUTES}
)
"""

_CANDIDATES = ", ".join(f"'{d}'" for d in CANDIDATE_DECISIONS)
_DOWNGRADING = ", ".join(f"'{d}'" for d in DOWNGRADING_RESETS)
_WINDOW_US = RETRY_WINDOW_MINUTES * 60 * 1_000_000
DAY_US: Final = 86_400_000_000

#: ``{filters}``: `` AND …`` conditions on the source table (time window, environments,
#: service versions), pushed into the scan; empty for no filter.
RECORDS: Final = f"""
SELECT epoch_us(Timestamp) AS ts_us,
       {CANONICAL_EVENT} AS event,
       coalesce(ResourceAttributes['deployment.environment'],
                ResourceAttributes['deployment.environment.name']) AS environment,
       ResourceAttributes['enduser.pseudo.id'] AS owner,
       ResourceAttributes['service.version'] AS service_version,
       LogAttributes AS attributes
FROM logs
WHERE {OURS}{{filters}}
"""

ENVIRONMENT: Final = (
    "coalesce(ResourceAttributes['deployment.environment'], "
    "ResourceAttributes['deployment.environment.name'])"
)
SERVICE_VERSION: Final = "ResourceAttributes['service.version']"

#: (name, SELECT) in dependency order.
RELATIONS: Final[tuple[tuple[str, str], ...]] = (
    ("records", RECORDS),
    (
        "prompts",
        f"""
SELECT environment, owner, service_version, ts_us AS ended_us,
       ts_us - CAST(attributes['wall_time_ms'] AS BIGINT) * 1000 AS started_us,
       ts_us // {DAY_US} AS day,
       attributes['prompt_id'] AS prompt_id,
       split_part(attributes['prompt_id'], '########', 1) AS session_id,
       attributes['route'] AS route,
       attributes['mode'] AS mode,
       attributes['stop_reason'] AS stop_reason,
       {canonical_value("loop_type")} AS loop_type,
       CAST(attributes['model_turns'] AS BIGINT) AS model_turns,
       CAST(attributes['tool_calls'] AS BIGINT) AS tool_calls,
       CAST(attributes['tool_call_cap'] AS BIGINT) AS tool_call_cap,
       CAST(attributes['input_tokens'] AS BIGINT) AS input_tokens,
       CAST(attributes['output_tokens'] AS BIGINT) AS output_tokens,
       CAST(attributes['wall_time_ms'] AS BIGINT) AS wall_time_ms,
       CASE WHEN attributes['input_boundary'] = 'prompt-only' THEN 'prompt-only'
            WHEN attributes['drain_supported'] = 'true'
                 AND coalesce(attributes['input_boundary'], 'drain') = 'drain' THEN 'drain'
            ELSE 'unsupported' END AS input_boundary,
       CASE WHEN attributes['stop_reason'] = 'end_turn' AND attributes['loop_type'] IS NULL
            THEN 1 ELSE 0 END AS completed
FROM records WHERE event = '{PROMPT_EVENT}'
""",
    ),
    (
        "calls",
        f"""
SELECT environment, owner,
       attributes['prompt_id'] AS prompt_id,
       CAST(attributes['batch_ordinal'] AS BIGINT) AS batch_ordinal,
       attributes['terminal_status'] AS terminal_status,
       attributes['execution_status'] AS execution_status,
       CASE WHEN attributes['provider_duplicate'] = 'true' THEN 1 ELSE 0 END
           AS provider_duplicate
FROM records WHERE event = '{TOOL_CALL_EVENT}'
""",
    ),
    (
        "guard_events",
        f"""
SELECT environment, owner,
       attributes['prompt_id'] AS prompt_id,
       attributes['decision'] AS decision,
       attributes['reset_reason'] AS reset_reason,
       CAST(attributes['candidate_ordinal'] AS BIGINT) AS candidate_ordinal,
       CAST(attributes['batch_ordinal'] AS BIGINT) AS batch_ordinal,
       CASE WHEN coalesce(attributes['receipt_complete'], 'true') = 'true' THEN 1 ELSE 0 END
           AS receipt_complete,
       attributes['execution_error_type'] AS execution_error_type,
       attributes['tool_type'] AS tool_type,
       CASE WHEN attributes['decision'] IN ({_CANDIDATES}) THEN 1 ELSE 0 END
           AS counted_candidate
FROM records WHERE event = '{GUARD_EVENT}'
""",
    ),
    (
        "sessions",
        f"""
SELECT environment, owner, ts_us AS closed_us,
       attributes['session_id'] AS session_id,
       attributes['close_reason'] AS close_reason
FROM records WHERE event = '{SESSION_CLOSED_EVENT}'
""",
    ),
    (
        "prompt_facts",
        f"""
SELECT o.environment AS environment, o.owner AS owner,
       o.service_version AS service_version, o.prompt_id AS prompt_id, o.day AS day,
       o.route AS route, o.mode AS mode, o.stop_reason AS stop_reason,
       o.loop_type AS loop_type, o.model_turns AS model_turns, o.tool_calls AS tool_calls,
       o.input_tokens AS input_tokens, o.output_tokens AS output_tokens,
       o.wall_time_ms AS wall_time_ms, o.input_boundary AS input_boundary,
       o.completed AS completed,
       coalesce(f.would_warn, 0) AS would_warn,
       coalesce(f.would_stop, 0) AS would_stop,
       coalesce(f.stopped, 0) AS stopped,
       coalesce(s.calls_after_would_stop, 0) AS calls_after_would_stop,
       -- A prompt whose guard could have stopped it: a would_stop in shadow or warn before
       -- any downgrade (an enforce would_stop is a downgraded prompt: it saves nothing).
       CASE WHEN f.would_stop = 1 AND o.mode IN ('shadow', 'warn')
                 AND (f.downgrade_batch IS NULL OR f.downgrade_batch > f.stop_batch)
                 AND (u.unknown_batch IS NULL OR u.unknown_batch > f.stop_batch)
            THEN 1 ELSE 0 END AS could_stop,
       CASE WHEN f.would_stop = 1 AND o.mode IN ('shadow', 'warn')
                 AND (f.downgrade_batch IS NULL OR f.downgrade_batch > f.stop_batch)
                 AND (u.unknown_batch IS NULL OR u.unknown_batch > f.stop_batch)
            THEN coalesce(s.calls_after_would_stop, 0) ELSE 0 END AS calls_saved,
       CASE WHEN (o.completed = 0 AND o.next_started_us IS NOT NULL
                  AND o.next_started_us >= o.ended_us
                  AND o.next_started_us <= o.ended_us + {_WINDOW_US})
              OR (d.closed_us IS NOT NULL AND d.closed_us >= o.ended_us
                  AND d.closed_us <= o.ended_us + {_WINDOW_US})
            THEN 1 ELSE 0 END AS disconnect_or_retry
FROM (
    SELECT p.*, lead(p.started_us) OVER (
               PARTITION BY p.environment, p.owner ORDER BY p.started_us, p.prompt_id
           ) AS next_started_us
    FROM prompts p
) o
LEFT JOIN (
    SELECT prompt_id,
           max(CASE WHEN decision IN ('would_warn', 'warned') THEN 1 ELSE 0 END) AS would_warn,
           max(CASE WHEN decision = 'would_stop' THEN 1 ELSE 0 END) AS would_stop,
           max(CASE WHEN decision = 'stopped' THEN 1 ELSE 0 END) AS stopped,
           min(CASE WHEN decision IN ('would_stop', 'stopped') THEN batch_ordinal END)
               AS stop_batch,
           min(CASE WHEN reset_reason IN ({_DOWNGRADING}) THEN batch_ordinal END)
               AS downgrade_batch
    FROM guard_events GROUP BY prompt_id
) f ON f.prompt_id = o.prompt_id
LEFT JOIN (
    SELECT c.prompt_id AS prompt_id, count(*) AS calls_after_would_stop
    FROM calls c JOIN (
        SELECT prompt_id, min(batch_ordinal) AS stop_batch FROM guard_events
        WHERE decision = 'would_stop' GROUP BY prompt_id
    ) w ON c.prompt_id = w.prompt_id
    WHERE c.batch_ordinal > w.stop_batch AND c.provider_duplicate = 0
    GROUP BY c.prompt_id
) s ON s.prompt_id = o.prompt_id
LEFT JOIN (
    SELECT prompt_id, min(batch_ordinal) AS unknown_batch FROM calls
    WHERE execution_status = 'unknown' OR terminal_status = 'unknown' GROUP BY prompt_id
) u ON u.prompt_id = o.prompt_id
LEFT JOIN (
    SELECT session_id, min(closed_us) AS closed_us
    FROM sessions WHERE close_reason = 'disconnect' GROUP BY session_id
) d ON d.session_id = o.session_id
""",
    ),
)
