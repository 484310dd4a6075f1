"""What the owner-level p95 bootstrap needs from the engine, and no more.

Two aggregate queries per run:

1. per arm (environment, cohort, mode), counts of wall times rounded down to
   two significant digits — a coarse histogram, at most 90 rows per decade;
   from it, each arm's **band**: the coarse bins from the one holding the arm's
   75th percentile to the one holding its 99.9th;
2. per owner and arm, counts of wall times rounded down to three significant
   digits (under 1 % error) inside the band, plus one count below and one
   above it.

The bootstrap (:func:`~tool_failure_guard.rollout.stats.poisson_bootstrap_quantile_ratio`) weighs
each value by its count; a replicate whose p95 falls outside the band (below
or above sentinels) makes the interval inconclusive, never a pass.  Integer
arithmetic only, so both engines send the same rows.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

from tool_failure_guard.rollout.engine import Engine

Key = tuple[str, str, str]  # environment, cohort, mode
#: The band around the p95 that is sent at full resolution.
BAND: Final = (0.75, 0.999)
BELOW: Final = -1
ABOVE: Final = -2
_W = "wall_time_ms"


def _floor(digits: int) -> str:
    """SQL: wall time rounded down to ``digits`` significant digits."""
    smallest = 10**digits
    steps = " ".join(
        f"WHEN {_W} < {smallest * 10**k} THEN {_W} // {10**k} * {10**k}" for k in range(1, 8)
    )
    return f"(CASE WHEN {_W} < {smallest} THEN {_W} {steps} ELSE {_W} // 100000000 * 100000000 END)"


COARSE: Final = _floor(2)
FINE: Final = _floor(3)


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def bands(engine: Engine, where: str) -> dict[Key, tuple[int, int]]:
    """Arm -> (low, high) coarse bins of its band (the 75th and 99.9th percentiles' bins)."""
    rows = engine.rows(
        f"""SELECT environment, input_boundary, mode, {COARSE} AS v, count(*) FROM prompt_facts
            WHERE {where} AND {_W} IS NOT NULL GROUP BY environment, input_boundary, mode, v"""
    )
    arms: dict[Key, list[tuple[int, int]]] = {}
    for env, kind, mode, value, count in rows:
        arms.setdefault((str(env), str(kind), str(mode)), []).append((int(value), int(count)))
    result = {}
    for key, bins in arms.items():
        bins.sort()
        total = sum(c for _, c in bins)
        cumulative = np.cumsum([c for _, c in bins])
        last = len(bins) - 1
        edges = [
            bins[min(last, int(np.searchsorted(cumulative, q * total, side="left")))][0]
            for q in BAND
        ]
        result[key] = (edges[0], edges[1])
    return result


def counts(engine: Engine, where: str) -> dict[Key, list[tuple[str, int, int]]]:
    """Arm -> (owner, value or BELOW/ABOVE, count) rows: the bootstrap's input."""
    found = bands(engine, where)
    if not found:
        return {}
    cases = " ".join(
        f"WHEN environment = {_literal(env)} AND input_boundary = {_literal(kind)} "
        f"AND mode = {_literal(mode)} THEN CASE WHEN {COARSE} < {low} THEN {BELOW} "
        f"WHEN {COARSE} > {high} THEN {ABOVE} ELSE {FINE} END"
        for (env, kind, mode), (low, high) in sorted(found.items())
    )
    rows = engine.rows(
        f"""SELECT environment, input_boundary, mode, owner, v, count(*) FROM (
                SELECT environment, input_boundary, mode, owner, CASE {cases} END AS v
                FROM prompt_facts WHERE {where} AND {_W} IS NOT NULL
            ) banded GROUP BY environment, input_boundary, mode, owner, v"""
    )
    result: dict[Key, list[tuple[str, int, int]]] = {}
    for env, kind, mode, owner, value, count in rows:
        result.setdefault((str(env), str(kind), str(mode)), []).append(
            (str(owner), int(value), int(count))
        )
    return result


def arm(
    rows: list[tuple[str, int, int]], owners: list[str]
) -> tuple[Any, np.ndarray[Any, np.dtype[np.int64]], Any]:
    """(values, owner index, counts) arrays of one arm; the sentinels become ∓inf."""
    index = {o: i for i, o in enumerate(owners)}
    rows = sorted(rows)
    values = np.asarray(
        [-math.inf if v == BELOW else math.inf if v == ABOVE else float(v) for _, v, _ in rows],
        dtype=np.float64,
    )
    owner_idx = np.asarray([index[o] for o, _, _ in rows], dtype=np.int64)
    weights = np.asarray([c for _, _, c in rows], dtype=np.float64)
    return values, owner_idx, weights
