"""The invariants computable from Qwen Code's records, and the ones that are not.

Each computable invariant is a query over the ``q_*`` relations of
:mod:`~tool_failure_guard.rollout.qwen_sql` returning ``(environment, prompt_id)``
per violation, wrapped like ours by :func:`~tool_failure_guard.rollout.queries.findings`.
:data:`NOT_COMPUTABLE` names, per invariant Qwen Code's records cannot decide,
what is missing from them.
"""

from __future__ import annotations

from typing import Final

from tool_failure_guard.rollout import queries, qwen_code
from tool_failure_guard.rollout.qwen_sql import NUMERIC, VOCABULARY

_BY_EVENT = " ".join(
    f"WHEN event = '{event}' THEN {queries._record_ok(fields)}"
    for event, fields in VOCABULARY.items()
)

#: name -> (description, SQL over the q_* relations).
INVARIANTS: Final[dict[str, tuple[str, str]]] = {
    "enforced_after_unreliable_drain": (
        "a stop was enforced after an unreliable drain in the same prompt "
        "(order: the records' timestamps)",
        """
SELECT DISTINCT g.environment AS environment, g.prompt_id AS prompt_id FROM q_guard g
JOIN (SELECT prompt_id, min(ts_us) AS first_unreliable FROM q_guard
      WHERE reset_reason = 'unreliable_input' GROUP BY prompt_id) u ON u.prompt_id = g.prompt_id
WHERE g.decision = 'stopped' AND u.first_unreliable <= g.ts_us
""",
    ),
    "forbidden_telemetry_field": (
        "a guard or loop record carried an undocumented key, or a value outside its "
        "field's vocabulary (Qwen Code's own enums and id formats)",
        f"""
SELECT DISTINCT environment, coalesce(attributes['prompt_id'], '(' || event || ')') AS prompt_id
FROM q_records
WHERE event IN ('{qwen_code.GUARD_EVENT}', '{qwen_code.LOOP_EVENT}')
  AND NOT (CASE {_BY_EVENT} ELSE false END)
""",
    ),
    "stop_without_prior_warn": (
        "a would_stop/stop had no earlier would_warn/warn of the same prompt and candidate "
        "(order: the records' timestamps)",
        """
SELECT DISTINCT g.environment AS environment, g.prompt_id AS prompt_id FROM q_guard g
LEFT JOIN (SELECT prompt_id, candidate_ordinal, min(ts_us) AS first_warn
           FROM q_guard WHERE decision IN ('would_warn', 'warned')
           GROUP BY prompt_id, candidate_ordinal) w
  ON w.prompt_id = g.prompt_id AND w.candidate_ordinal = g.candidate_ordinal
WHERE g.decision IN ('would_stop', 'stopped')
  AND (w.prompt_id IS NULL OR w.first_warn > g.ts_us)
""",
    ),
}

_NO_BATCH = (
    "no batch ordinal on qwen-code.repeated_tool_failure_guard or qwen-code.tool_call "
    "records, so a decision cannot be joined to the calls of its batch"
)
#: name -> what Qwen Code's records lack for it.
NOT_COMPUTABLE: Final[dict[str, str]] = {
    "cancelled_counted": _NO_BATCH,
    "ineligible_counted": _NO_BATCH,
    "incomplete_batch_decision": _NO_BATCH + "; no receipt_complete (the outcome contract's "
    "proof that the batch's receipts are complete)",
    "protections_changed": "no tool-call cap and no provider-duplicate flag on any record, "
    "and no prompt outcome record (stop reason)",
}

#: Phase 3's enforced-stop check, the part Qwen Code's records can show: each stop has
#: the expected key (an error type) with an earlier real reminder (``warned``) of the
#: same prompt, candidate, error type and tool type, and a ``loop_detected`` record.
ENFORCED_STOPS_MALFORMED: Final = f"""
SELECT DISTINCT s.environment AS environment, s.prompt_id AS prompt_id FROM (
    SELECT environment, prompt_id, candidate_ordinal, ts_us, execution_error_type,
           coalesce(tool_type, '') AS tool_kind
    FROM q_guard WHERE decision = 'stopped'
) s
LEFT JOIN (
    SELECT prompt_id, candidate_ordinal, execution_error_type,
           coalesce(tool_type, '') AS tool_kind, min(ts_us) AS first_warned
    FROM q_guard WHERE decision = 'warned'
    GROUP BY prompt_id, candidate_ordinal, execution_error_type, coalesce(tool_type, '')
) r ON r.prompt_id = s.prompt_id AND r.candidate_ordinal = s.candidate_ordinal
   AND r.execution_error_type = s.execution_error_type AND r.tool_kind = s.tool_kind
LEFT JOIN (SELECT DISTINCT attributes['prompt_id'] AS prompt_id FROM q_records
           WHERE event = '{qwen_code.LOOP_EVENT}'
             AND attributes['loop_type'] = 'repeated_tool_execution_failure') l
  ON l.prompt_id = s.prompt_id
WHERE s.execution_error_type IS NULL OR r.prompt_id IS NULL OR r.first_warned >= s.ts_us
   OR l.prompt_id IS NULL
"""
ENFORCED_STOPS_NOT_COMPUTABLE: Final = (
    "complete receipts (no receipt_complete) and kept history (no prompt outcome record)"
)


def malformed_numbers() -> str:
    """(event, field, count, first prompt id) of count fields that are not decimal counts."""
    branches = []
    for event, keys in NUMERIC.items():
        checks = " ".join(
            f"WHEN NOT coalesce(regexp_full_match(attributes['{k}'], '{queries.COUNT}'), true) "
            f"THEN '{k}'"
            for k in keys
        )
        branches.append(f"WHEN event = '{event}' THEN CASE {checks} END")
    return f"""
SELECT event, field, count(*) AS n, min(coalesce(prompt_id, '')) AS example FROM (
    SELECT event, attributes['prompt_id'] AS prompt_id,
           CASE {" ".join(branches)} END AS field
    FROM q_records
) bad WHERE field IS NOT NULL GROUP BY event, field
"""
