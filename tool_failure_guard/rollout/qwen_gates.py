"""``rollout gates`` on a Qwen Code fleet: the computable gates, and the others named.

Arms are the modes Qwen Code recorded (:mod:`~tool_failure_guard.rollout.qwen_sql`): only
prompts of sessions with a guard record have one, so both arms hold the sessions in
which a guard transition happened (a failing call), judged with the same owner-level
intervals and margins as our own records (:mod:`~tool_failure_guard.rollout.metrics`).
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from tool_failure_guard.rollout import queries, qwen_queries, stats
from tool_failure_guard.rollout.metrics import ARMS, CONSISTENCY_BOUNDS, gate_row
from tool_failure_guard.rollout.qwen_fleet import NOT_COMPUTABLE, PREFIX, Query

_NO_OUTCOME = "no prompt outcome record (Qwen Code records no stop reason or prompt end)"
#: Gates Qwen Code's records cannot decide, per phase: gate -> what is missing.
GATES_NOT_COMPUTABLE: Final = {
    "enforce": {
        "completion": _NO_OUTCOME,
        "disconnect_or_retry_10min": _NO_OUTCOME + " and no session close reason",
        "p95_latency": "no prompt wall time (" + _NO_OUTCOME + ")",
    },
    "warn": {
        "cancel_rate": _NO_OUTCOME,
        "disconnect_or_retry_10min": _NO_OUTCOME + " and no session close reason",
        "p95_latency": "no prompt wall time (" + _NO_OUTCOME + ")",
    },
}
_SUMS: Final = {
    "n": "1",
    "tokens": "input_tokens + output_tokens",
    "tokens_n": "CASE WHEN input_tokens + output_tokens IS NULL THEN 0 ELSE 1 END",
    "turns": "model_turns",
    "stops": "loop_stop",
    "would_stops": "would_stop",
    "calls_in_stops": "CASE WHEN loop_stop = 1 THEN tool_calls ELSE 0 END",
    "calls_to_would_stop": "CASE WHEN would_stop = 1 THEN tool_calls - calls_after_would_stop "
    "ELSE 0 END",
}
_NAMES = tuple(_SUMS)


def pair(t: np.ndarray, c: np.ndarray, num: str, den: str) -> Any:
    """((T numerator, T denominator), (C numerator, C denominator)) per-owner columns."""
    i, j = _NAMES.index(num), _NAMES.index(den)
    return (t[:, i], t[:, j]), (c[:, i], c[:, j])


def _owner_sums(run: Query, modes: tuple[str, str]) -> dict[tuple[str, str], np.ndarray]:
    sums = ", ".join(f"coalesce(sum({expr}), 0)" for expr in _SUMS.values())
    found: dict[tuple[str, str], list[list[float]]] = {}
    for env, mode, _owner, *values in sorted(
        run(
            f"""SELECT environment, mode, owner, {sums} FROM q_prompts
                WHERE input_boundary = 'drain' AND mode IN ('{modes[0]}', '{modes[1]}')
                GROUP BY environment, mode, owner"""
        ),
        key=lambda r: (str(r[0]), str(r[1]), str(r[2])),
    ):
        found.setdefault((str(env), str(mode)), []).append([float(v) for v in values])
    return {k: np.asarray(v, dtype=np.float64) for k, v in found.items()}


def _missing(name: str, why: str) -> dict[str, Any]:
    return {
        "gate": name,
        "kind": "-",
        "estimate": None,
        "low": None,
        "high": None,
        "margin": None,
        "verdict": NOT_COMPUTABLE,
        "note": PREFIX + why,
    }


def gates(run: Query, checked: dict[str, Any], *, phase: str = "enforce") -> dict[str, Any]:
    """Phase 3 (or 2) on Qwen Code's records: the computable gates, the rest named."""
    if phase not in ARMS:
        raise ValueError(f"unknown phase {phase!r} (expected one of {', '.join(ARMS)})")
    t_mode, c_mode = ARMS[phase]
    sums = _owner_sums(run, (t_mode, c_mode))
    empty = np.zeros((0, len(_NAMES)))
    stops = {
        str(env): int(n)
        for env, n in run(
            "SELECT environment, count(DISTINCT prompt_id) FROM q_guard "
            "WHERE decision = 'stopped' GROUP BY environment"
        )
    }
    malformed: dict[str, list[str]] = {}
    found = run(queries.findings({"malformed": qwen_queries.ENFORCED_STOPS_MALFORMED}))
    for _, env, total, example in sorted(found, key=lambda r: (str(r[1]), str(r[3]))):
        malformed.setdefault(str(env), [str(total)]).append(str(example))
    environments: dict[str, Any] = {}
    for env in sorted({e for e, m in sums if m == t_mode}):
        t, c = sums.get((env, t_mode), empty), sums.get((env, c_mode), empty)

        results = [_missing(n, why) for n, why in GATES_NOT_COMPUTABLE[phase].items()]
        tokens = stats.ratio_interval(*pair(t, c, "tokens", "tokens_n"))
        results.append(
            gate_row("mean_tokens", "T / C", tokens, 1.10, stats.upper_bound_verdict(tokens, 1.10))
        )
        turns = stats.ratio_interval(*pair(t, c, "turns", "n"))
        results.append(
            gate_row("mean_turns", "T / C", turns, 1.10, stats.upper_bound_verdict(turns, 1.10))
        )
        if phase == "enforce":
            rate = stats.ratio_interval(
                (t[:, _NAMES.index("stops")], t[:, 0]),
                (c[:, _NAMES.index("would_stops")], c[:, 0]),
            )
            results.append(
                gate_row(
                    "stopped_loop_rate",
                    "T stops / C would_stops",
                    rate,
                    list(CONSISTENCY_BOUNDS),
                    stats.equivalence_verdict(rate, *CONSISTENCY_BOUNDS),
                )
            )
            where = stats.ratio_interval(
                pair(t, c, "calls_in_stops", "stops")[0],
                pair(t, c, "calls_to_would_stop", "would_stops")[1],
            )
            results.append(
                gate_row(
                    "saved_calls",
                    "T calls/stop ÷ C calls/would_stop",
                    where,
                    list(CONSISTENCY_BOUNDS),
                    stats.equivalence_verdict(where, *CONSISTENCY_BOUNDS),
                )
            )
            bad = malformed.get(env, ["0"])
            defects = int(bad[0])
            results.append(
                {
                    "gate": "enforced_stops_well_formed",
                    "kind": "count",
                    "estimate": defects,
                    "low": None,
                    "high": None,
                    "margin": 0,
                    "verdict": "fail" if defects else NOT_COMPUTABLE,
                    "note": f"{stops.get(env, 0)} enforced stop(s) checked for key, reminder and "
                    f"loop record; {PREFIX}{qwen_queries.ENFORCED_STOPS_NOT_COMPUTABLE}",
                    "examples": bad[1:],
                }
            )
        inv = checked["environments"].get(env, {}).get("invariants", {})
        violations = sum(v["violations"] or 0 for v in inv.values())
        missing = sorted(k for k, v in inv.items() if v["violations"] is None)
        results.append(
            {
                "gate": "invariants_zero",
                "kind": "count",
                "estimate": violations,
                "low": None,
                "high": None,
                "margin": 0,
                "verdict": "fail" if violations else NOT_COMPUTABLE,
                "note": PREFIX + ", ".join(missing),
            }
        )
        environments[env] = {
            "treatment_mode": t_mode,
            "control_mode": c_mode,
            "treatment_owners": len(t),
            "control_owners": len(c),
            "treatment_prompts": int(t[:, 0].sum()) if len(t) else 0,
            "control_prompts": int(c[:, 0].sum()) if len(c) else 0,
            "gates": results,
            "may_advance": False,
        }
    return {
        "command": "gates",
        "agent": "qwen-code",
        "engine": checked["engine"],
        "phase": phase,
        "comparison": "arms by the mode Qwen Code recorded; only prompts of sessions with a "
        "guard record have one",
        "refused": False,
        "resource": checked["resource"],
        "environments": environments,
        "may_advance": False,
    }
