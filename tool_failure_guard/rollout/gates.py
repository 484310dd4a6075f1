"""``rollout gates`` (Phase 3; ``--phase warn``: Phase 2): owner-level gates per cohort.

Only per-owner, per-arm sums leave the engine (and, for the p95 bootstrap,
per-owner counts of wall times around the p95: :mod:`~tool_failure_guard.rollout.latency`), so
the transfer grows with the number of owners, not with the records.  The drain
cohort decides as before; a prompt-only cohort (``input_boundary``) is judged
on its own, never pooled with it.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

from tool_failure_guard.rollout import check as checking
from tool_failure_guard.rollout import latency, sql, stats
from tool_failure_guard.rollout.design import assignment, before_after
from tool_failure_guard.rollout.engine import Engine
from tool_failure_guard.rollout.metrics import ARMS, COLUMNS, col, metric_gates
from tool_failure_guard.rollout.stats import Array, Verdict

#: Cohorts judged with gates (unsupported hosts are counted apart: their guard is inert).
JUDGED: Final = ("drain", "prompt-only")
#: How each phase's arms came about (printed with the result: it is not the same evidence).
COMPARISONS: Final = {
    "enforce": "randomised per owner: enforce owners (treatment) against warn owners (control)",
    "warn": "before/after, NOT randomised: the environment's warn prompts (treatment) against "
    "its earlier shadow prompts (control); time, traffic and model changes between the "
    "periods are not controlled",
}
_SUMS = ", ".join(f"coalesce(sum({expr}), 0)" for expr in COLUMNS.values())
_ARM_FILTER = f"{sql.GUARDED_ROUTE} AND input_boundary IN ('drain', 'prompt-only')"

Key = tuple[str, str, str]  # environment, cohort, mode


def _owner_sums(engine: Engine, modes: tuple[str, str]) -> dict[Key, tuple[list[str], Array]]:
    rows = engine.rows(
        f"""SELECT environment, input_boundary, mode, owner, {_SUMS} FROM prompt_facts
            WHERE {_ARM_FILTER} AND mode IN ('{modes[0]}', '{modes[1]}')
            GROUP BY environment, input_boundary, mode, owner"""
    )
    grouped: dict[Key, list[tuple[str, list[float]]]] = {}
    for env, kind, mode, owner, *sums in rows:
        grouped.setdefault((str(env), str(kind), str(mode)), []).append(
            (str(owner), [float(v) for v in sums])
        )
    result = {}
    for key, owners in grouped.items():
        owners.sort(key=lambda o: o[0])
        matrix = np.asarray([s for _, s in owners], dtype=np.float64).reshape(
            len(owners), len(COLUMNS)
        )
        result[key] = ([o for o, _ in owners], matrix)
    return result


def _count_gate(name: str, count: int, note: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "gate": name,
        "kind": "count",
        "estimate": count,
        "low": None,
        "high": None,
        "margin": 0,
        "verdict": (Verdict.PASS if count == 0 else Verdict.FAIL).value,
        "note": note,
        **extra,
    }


def enforced_stops(engine: Engine) -> dict[str, dict[str, Any]]:
    """environment -> {stops, defects, examples}: enforced stops that are not well formed."""
    from tool_failure_guard.rollout import queries

    stops = engine.rows(
        """SELECT environment, count(DISTINCT prompt_id) FROM guard_events
           WHERE decision = 'stopped' GROUP BY environment"""
    )
    result: dict[str, dict[str, Any]] = {
        str(env): {"stops": int(n), "defects": 0, "examples": []} for env, n in sorted(stops)
    }
    found = engine.rows(queries.findings({"malformed": queries.ENFORCED_STOPS_MALFORMED}))
    for _, env, total, example in sorted(found, key=lambda r: (str(r[1]), str(r[3]))):
        entry = result.setdefault(str(env), {"stops": 0, "defects": 0, "examples": []})
        entry["defects"] = int(total)
        entry["examples"].append(str(example))
    return result


def gates(
    engine: Engine,
    checked: dict[str, Any],
    *,
    phase: str = "enforce",
    seed: int = 0,
    replicates: int = 200,
) -> dict[str, Any]:
    """Compare treatment against control per environment and cohort, owner-level intervals.

    ``phase="enforce"`` (Phase 3): enforce owners against warn owners of the same
    wave, randomised per owner.  ``phase="warn"`` (Phase 2): the environment's warn
    prompts against its shadow prompts -- a before/after comparison of the same
    owners, not randomised, judged with the same machinery and margins.
    ``checked`` is :func:`~tool_failure_guard.rollout.check.check`'s result on the same engine.
    """
    if phase not in ARMS:
        raise ValueError(f"unknown phase {phase!r} (expected one of {', '.join(ARMS)})")
    modes = ARMS[phase]
    sums = _owner_sums(engine, modes)
    latencies = latency.counts(engine, f"{_ARM_FILTER} AND mode IN ('{modes[0]}', '{modes[1]}')")
    judged_modes = (modes[0],) if phase == "warn" else modes
    present = sorted({env for env, _, mode in sums if mode in judged_modes})
    stops = enforced_stops(engine) if phase == "enforce" else {}
    designs = assignment(engine) if phase == "enforce" else before_after(engine)
    environments: dict[str, Any] = {}
    for env in present:
        violations = sum(
            v["violations"]
            for v in checked["environments"].get(env, {}).get("invariants", {}).values()
        )
        shared = [_count_gate("invariants_zero", violations)]
        if phase == "enforce":
            malformed = stops.get(env, {"stops": 0, "defects": 0, "examples": []})
            shared.append(
                _count_gate(
                    "enforced_stops_well_formed",
                    malformed["defects"],
                    f"{malformed['stops']} enforced stop(s) checked: expected key, "
                    "reminder, complete receipts, kept history",
                    examples=malformed["examples"],
                    stops_checked=malformed["stops"],
                )
            )
        judged = {}
        for cohort in JUDGED:
            if cohort != checking.SUPPORTED and not any((env, cohort, m) in sums for m in modes):
                continue
            judged[cohort] = _cohort(
                env, cohort, phase, sums, latencies, designs, shared, seed, replicates
            )
        drain = judged.pop(checking.SUPPORTED)
        env_check = checked["environments"].get(env, {})
        environments[env] = {
            **drain,
            "unsupported_host_prompts": env_check.get("unsupported_host_prompts", 0),
            "cohorts": judged,
            "may_advance": drain["may_advance"] and all(c["may_advance"] for c in judged.values()),
        }
    return {
        "command": "gates",
        "engine": engine.name,
        "phase": phase,
        "comparison": COMPARISONS[phase],
        "refused": False,
        "resource": checked["resource"],
        "environments": environments,
        "may_advance": bool(environments) and all(e["may_advance"] for e in environments.values()),
    }


def _cohort(
    env: str,
    cohort: str,
    phase: str,
    sums: dict[Key, tuple[list[str], Array]],
    latencies: dict[Key, list[tuple[str, int, int]]],
    designs: dict[tuple[str, str], dict[str, Any]],
    shared: list[dict[str, Any]],
    seed: int,
    replicates: int,
) -> dict[str, Any]:
    treatment_mode, control_mode = ARMS[phase]
    empty: tuple[list[str], Array] = ([], np.zeros((0, len(COLUMNS))))
    t_owners, t = sums.get((env, cohort, treatment_mode), empty)
    c_owners, c = sums.get((env, cohort, control_mode), empty)
    lat = (
        stats.poisson_bootstrap_quantile_ratio(
            latency.arm(latencies.get((env, cohort, treatment_mode), []), t_owners),
            latency.arm(latencies.get((env, cohort, control_mode), []), c_owners),
            replicates=replicates,
            seed=seed,
        )
        if t_owners and c_owners
        else stats.Interval(estimate=math.nan, low=math.nan, high=math.nan)
    )
    results = [*metric_gates(phase, t, c, lat), *shared]
    design_key = "assignment" if phase == "enforce" else "before_after"
    design = designs.get((env, cohort) if phase == "warn" else (env, ""), _no_design(phase))
    passed = all(g["verdict"] == Verdict.PASS.value for g in results)
    return {
        "treatment_mode": treatment_mode,
        "control_mode": control_mode,
        "treatment_owners": len(t_owners),
        "control_owners": len(c_owners),
        "treatment_prompts": int(col(t, "n").sum()) if t_owners else 0,
        "control_prompts": int(col(c, "n").sum()) if c_owners else 0,
        "gates": results,
        design_key: design,
        "may_advance": passed and design["ok"],
    }


def _no_design(phase: str) -> dict[str, Any]:
    if phase == "enforce":
        return {
            "owners_in_both_arms": 0,
            "examples": [],
            "treatment_share": 0.0,
            "service_versions": [],
            "ok": False,
            "problems": ["no prompts in the wave"],
        }
    return {"periods": {}, "overlapping": False, "ok": False, "problems": ["no periods"]}
