"""Whose records the input holds: tool-failure-guard's own, Qwen Code's, or both.

The two agents' records differ in what they can show (Qwen Code's lack the
outcome contract's batch ordinals and receipts and any prompt outcome), so
they are **never pooled**: an input holding both is bad input unless
``--agent`` names the one to analyse, and then the other's records are left
out (and counted on stderr).
"""

from __future__ import annotations

from typing import Final

from tool_failure_guard.rollout import qwen_code, sql
from tool_failure_guard.rollout.engine import Engine, InputError

OURS: Final = "tool-failure-guard"
QWEN_CODE: Final = "qwen-code"
CHOICES: Final = (OURS, QWEN_CODE)
_EVENT = "coalesce(nullif(EventName, ''), LogAttributes['event.name'])"


def counts(engine: Engine, filters: str) -> dict[str, int]:
    """How many records of each agent the source holds (inside the filters)."""
    qwen = ", ".join(f"'{e}'" for e in qwen_code.EVENTS)
    row = engine.rows(
        f"""SELECT coalesce(sum(CASE WHEN ev LIKE '{sql.RECORD_PREFIX}%' THEN 1 ELSE 0 END), 0),
                   coalesce(sum(CASE WHEN ev IN ({qwen}) THEN 1 ELSE 0 END), 0)
            FROM (SELECT {_EVENT} AS ev FROM logs WHERE true{filters}) x"""
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
