"""The analysis of Qwen Code's own records, as portable SQL over the same ``logs`` table.

Qwen Code (0.24.4) records, per prompt: ``qwen-code.user_prompt`` (its
``prompt_id``), one ``qwen-code.api_response`` per model request (tokens),
one ``qwen-code.tool_call`` per call (statuses, no batch), one
``qwen-code.repeated_tool_failure_guard`` per guard transition (decision,
mode, candidate ordinal, reset reason, error type, tool type -- no batch
ordinal, no receipt completeness) and ``loop_detected`` when a loop stops the
prompt.  It records no prompt outcome (no stop reason, no end, no wall time),
no session close reason, no tool-call cap and no provider duplicate.

The relations are common table expressions (``WITH``, :func:`with_relations`)
prefixed to each query, named ``q_*`` so they never meet the relations of
:mod:`~tool_failure_guard.rollout.sql`; the same text runs on DuckDB and, rendered
by :mod:`~tool_failure_guard.rollout.dialect`, on ClickHouse.  Order inside a
prompt is the records' timestamps (Qwen Code logs a batch's calls, then the
guard's transition for it, then the next model request).

``q_prompts`` has one row per ``user_prompt`` record.  A prompt's **mode** is
its guard records' mode, else its session's (one process reads the mode once);
a prompt of a session without any guard record has no recorded mode
(``NULL``): ``off`` records nothing and a session without a failing call
records nothing either.  Its **input boundary** is ``unsupported`` when its
session had an ``unreliable_input`` reset (no drain contract), ``drain`` when
the session has guard records and none of them, else ``unknown``.
"""

from __future__ import annotations

from typing import Final

from tool_failure_guard.rollout import qwen_code, sql
from tool_failure_guard.rollout.queries import COUNT, ERROR_TYPE, PROMPT_ID

_EVENT = sql.EVENT_NAME
_EVENTS = ", ".join(f"'{e}'" for e in qwen_code.EVENTS)
#: Whether a source row is one of Qwen Code's records the analysis reads: named as Qwen
#: Code names them and not ours (ours share the guard's and the loop's names, not the scope).
QWEN_RECORD: Final = f"({_EVENT} IN ({_EVENTS}) AND NOT {sql.OURS})"
_DOWNGRADING = ", ".join(f"'{d}'" for d in sql.DOWNGRADING_RESETS)
STOP_LOOP: Final = "repeated_tool_execution_failure"

#: (name, SELECT) in dependency order; ``{filters}`` as in :data:`sql.RECORDS`.
RELATIONS: Final[tuple[tuple[str, str], ...]] = (
    (
        "q_records",
        f"""SELECT epoch_us(Timestamp) AS ts_us, {_EVENT} AS event,
       {sql.ENVIRONMENT} AS environment,
       ResourceAttributes['enduser.pseudo.id'] AS owner,
       ResourceAttributes['service.version'] AS service_version,
       LogAttributes AS attributes
FROM logs WHERE {QWEN_RECORD}{{filters}}""",
    ),
    (
        "q_guard",
        f"""SELECT environment, owner, ts_us, attributes['prompt_id'] AS prompt_id,
       split_part(attributes['prompt_id'], '########', 1) AS session_id,
       attributes['mode'] AS mode, attributes['decision'] AS decision,
       attributes['reset_reason'] AS reset_reason,
       CAST(attributes['candidate_ordinal'] AS BIGINT) AS candidate_ordinal,
       attributes['execution_error_type'] AS execution_error_type,
       attributes['tool_type'] AS tool_type
FROM q_records WHERE event = '{qwen_code.GUARD_EVENT}'""",
    ),
    (
        "q_prompt_guard",
        f"""SELECT prompt_id, min(mode) AS prompt_mode,
       max(CASE WHEN decision IN ('would_warn', 'warned') THEN 1 ELSE 0 END) AS would_warn,
       max(CASE WHEN decision = 'would_stop' THEN 1 ELSE 0 END) AS would_stop,
       max(CASE WHEN decision = 'stopped' THEN 1 ELSE 0 END) AS stopped,
       min(CASE WHEN decision = 'would_stop' THEN ts_us END) AS would_stop_us,
       min(CASE WHEN reset_reason IN ({_DOWNGRADING}) THEN ts_us END) AS downgrade_us
FROM q_guard GROUP BY prompt_id""",
    ),
    (
        "q_sessions",
        """SELECT session_id, min(mode) AS session_mode, count(DISTINCT mode) AS modes,
       max(CASE WHEN reset_reason = 'unreliable_input' THEN 1 ELSE 0 END) AS unreliable
FROM q_guard GROUP BY session_id""",
    ),
    (
        "q_turns",
        f"""SELECT attributes['prompt_id'] AS prompt_id, count(*) AS turns,
       sum(CAST(attributes['input_token_count'] AS BIGINT)) AS input_tokens,
       sum(CAST(attributes['output_token_count'] AS BIGINT)) AS output_tokens
FROM q_records WHERE event = '{qwen_code.API_RESPONSE_EVENT}' GROUP BY attributes['prompt_id']""",
    ),
    (
        "q_calls",
        f"""SELECT c.prompt_id AS prompt_id, count(*) AS calls,
       sum(CASE WHEN w.would_stop_us IS NOT NULL AND c.ts_us > w.would_stop_us
                THEN 1 ELSE 0 END) AS calls_after_would_stop
FROM (SELECT attributes['prompt_id'] AS prompt_id, ts_us FROM q_records
      WHERE event = '{qwen_code.TOOL_CALL_EVENT}') c
LEFT JOIN q_prompt_guard w ON w.prompt_id = c.prompt_id
GROUP BY c.prompt_id""",
    ),
    (
        "q_loops",
        f"""SELECT attributes['prompt_id'] AS prompt_id,
       max(CASE WHEN attributes['loop_type'] = '{STOP_LOOP}' THEN 1 ELSE 0 END) AS loop_stop
FROM q_records WHERE event = '{qwen_code.LOOP_EVENT}' GROUP BY attributes['prompt_id']""",
    ),
    (
        "q_prompts",
        f"""SELECT p.environment AS environment, p.owner AS owner,
       p.service_version AS service_version, p.prompt_id AS prompt_id, p.day AS day,
       coalesce(g.prompt_mode, CASE WHEN s.modes = 1 THEN s.session_mode END) AS mode,
       CASE WHEN s.unreliable = 1 THEN 'unsupported'
            WHEN s.session_id IS NULL THEN 'unknown' ELSE 'drain' END AS input_boundary,
       coalesce(t.turns, 0) AS model_turns,
       t.input_tokens AS input_tokens, t.output_tokens AS output_tokens,
       coalesce(c.calls, 0) AS tool_calls,
       coalesce(g.would_warn, 0) AS would_warn, coalesce(g.would_stop, 0) AS would_stop,
       coalesce(g.stopped, 0) AS stopped, coalesce(l.loop_stop, 0) AS loop_stop,
       coalesce(c.calls_after_would_stop, 0) AS calls_after_would_stop,
       CASE WHEN g.would_stop = 1 AND g.prompt_mode IN ('shadow', 'warn')
                 AND (g.downgrade_us IS NULL OR g.downgrade_us > g.would_stop_us)
            THEN 1 ELSE 0 END AS could_stop
FROM (SELECT environment, owner, service_version, attributes['prompt_id'] AS prompt_id,
             split_part(attributes['prompt_id'], '########', 1) AS session_id,
             ts_us // {sql.DAY_US} AS day
      FROM q_records WHERE event = '{qwen_code.PROMPT_EVENT}') p
LEFT JOIN q_prompt_guard g ON g.prompt_id = p.prompt_id
LEFT JOIN q_sessions s ON s.session_id = p.session_id
LEFT JOIN q_turns t ON t.prompt_id = p.prompt_id
LEFT JOIN q_calls c ON c.prompt_id = p.prompt_id
LEFT JOIN q_loops l ON l.prompt_id = p.prompt_id""",
    ),
)


def with_relations(query: str, filters: str = "") -> str:
    """``query`` (over the ``q_*`` relations) with them as its common table expressions."""
    ctes = ",\n".join(
        f"{name} AS ({body.replace('{filters}', filters)})" for name, body in RELATIONS
    )
    return f"WITH {ctes}\n{query}"


# -- the closed vocabulary of Qwen Code's guard and loop records -------------------------

_ISO_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z"
_SESSION_ID = r"[A-Za-z0-9._:-]{1,128}"
#: Qwen Code's loop types (``LOOP_TYPE_LABELS`` of its bundle).
LOOP_TYPES: Final = frozenset(
    {
        "consecutive_identical_tool_calls",
        "chanting_identical_sentences",
        "repetitive_thoughts",
        "read_file_loop",
        "action_stagnation",
        "shell_command_stagnation",
        "global_tool_call_duplicate",
        "alternating_tool_call_pattern",
        "turn_tool_call_cap",
        "invalid_tool_params_stagnation",
        STOP_LOOP,
    }
)
#: event -> field -> enum (frozenset) or format (str, RE2 matched whole).
VOCABULARY: Final[dict[str, dict[str, frozenset[str] | str]]] = {
    qwen_code.GUARD_EVENT: {
        "event.timestamp": _ISO_TIME,
        "prompt_id": PROMPT_ID,
        "route": frozenset({"acp_foreground"}),
        "mode": frozenset({"shadow", "warn", "enforce"}),
        "phase_before": frozenset({"idle", "tracking", "warned", "latched"}),
        "phase_after": frozenset({"idle", "tracking", "warned", "latched"}),
        "decision": frozenset(
            {"reset", "tracked", "would_warn", "warned", "would_stop", "stopped"}
        ),
        "failure_count_bucket": frozenset({"0", "1-2", "3-4", "5-7", "8+"}),
        "batch_count_bucket": frozenset({"0", "1", "2", "3+"}),
        "candidate_ordinal": COUNT,
        "reset_reason": frozenset(
            {
                "success",
                "cancelled",
                "not_started",
                "post_execution_failure",
                "unknown",
                "mixed",
                "incomplete",
                "external_input",
                "queued_prompt",
                "unreliable_input",
                "contract_violation",
            }
        ),
        "terminal_status": frozenset({"error"}),
        "execution_status": frozenset({"error"}),
        "execution_error_type": ERROR_TYPE,
        "tool_type": frozenset({"native", "mcp"}),
    },
    qwen_code.LOOP_EVENT: {
        "event.timestamp": _ISO_TIME,
        "session.id": _SESSION_ID,
        "loop_type": LOOP_TYPES,
        "prompt_id": PROMPT_ID,
    },
}
#: Count fields the analysis casts: a value that is not one is bad input.
NUMERIC: Final = {
    qwen_code.GUARD_EVENT: ("candidate_ordinal",),
    qwen_code.API_RESPONSE_EVENT: ("input_token_count", "output_token_count"),
}
