"""Whose records the input holds: tool-failure-guard's own, Qwen Code's, or both.

The two agents' records differ in what they can show (Qwen Code's lack the
outcome contract's batch ordinals and receipts and any prompt outcome), so
they are **never pooled**: an input holding both is bad input unless
``--agent`` names the one to analyse, and then the other's records are left
out (and counted on stderr).  Both write the guard and loop records under the same
names (ours took the original's); the instrumentation scope tells them apart
(:data:`~tool_failure_guard.rollout.sql.OURS`).
"""

from __future__ import annotations

from typing import Final

from tool_failure_guard.rollout import qwen_sql, sql
from tool_failure_guard.rollout.engine import Engine, InputError

OURS: Final = "tool-failure-guard"
QWEN_CODE: Final = "qwen-code"
CHOICES: Final = (OURS, QWEN_CODE)


def counts(engine: Engine, filters: str) -> dict[str, int]:
    """How many records of each agent the source holds (inside the filters).

    Ours are :data:`~tool_failure_guard.rollout.sql.OURS`, Qwen Code's
    :data:`~tool_failure_guard.rollout.qwen_sql.QWEN_RECORD` (never both).
    """
    row = engine.rows(
        f"""SELECT coalesce(sum(CASE WHEN {sql.OURS} THEN 1 ELSE 0 END), 0),
                   coalesce(sum(CASE WHEN {qwen_sql.QWEN_RECORD} THEN 1 ELSE 0 END), 0)
            FROM logs WHERE true{filters}"""
    )[0]
    return {OURS: int(row[0] or 0), QWEN_CODE: int(row[1] or 0)}


def choose(found: dict[str, int], chosen: str | None) -> tuple[str, int]:
    """(the agent to analyse, how many of the other agent's records are left out)."""
    if chosen is not None:
        other = QWEN_CODE if chosen == OURS else OURS
        return chosen, found[other]
    if found[OURS] and found[QWEN_CODE]:
        raise InputError(
            f"mixed input: {found[OURS]} tool-failure-guard records and {found[QWEN_CODE]} "
            "Qwen Code records; their records show different things and are never pooled: "
            "analyse one with --agent tool-failure-guard or --agent qwen-code"
        )
    return (QWEN_CODE if found[QWEN_CODE] else OURS), 0
