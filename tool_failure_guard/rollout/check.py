"""``rollout check`` (Phase 1/2): invariants, volumes and rates per cohort, days covered.

Every function takes an :class:`~tool_failure_guard.rollout.engine.Engine` and reads only
aggregates from it: per-environment (and per-cohort) counts and the first
example prompt ids, never a row per record.  :func:`preflight` refuses input
the analysis cannot conclude from (:class:`~tool_failure_guard.rollout.engine.InputError`).
"""

from __future__ import annotations

import datetime
from typing import Any, Final

from tool_failure_guard.rollout import queries, sql
from tool_failure_guard.rollout.engine import Engine, InputError, MalformedNumbers

#: Phase 1 needs at least this many full days per environment.
MIN_DAYS: Final = 7
#: The cohort the phases are judged on: hosts with the drain contract.
SUPPORTED: Final = "drain"
_EPOCH = datetime.date(1970, 1, 1)


#: Per-environment volume fields of the drain cohort, as ``check`` reports them.
VOLUME_FIELDS: Final = (
    "would_warn",
    "would_warn_rate",
    "would_stop",
    "would_stop_rate",
    "stopped",
    "stopped_rate",
    "estimated_calls_saved",
    "days_covered",
)


def day(number: Any) -> str | None:
    """An integer day number (days since 1970-01-01, UTC) as ``YYYY-MM-DD``."""
    if number is None:
        return None
    return str(_EPOCH + datetime.timedelta(days=int(number)))


def preflight(engine: Engine, source: str) -> dict[str, int]:
    """Refuse what cannot be analysed: no records, missing Resource dimensions, bad numbers.

    Returns the resource counts (records, without environment, without owner).
    """
    row = engine.rows(
        """SELECT count(*),
                  coalesce(sum(CASE WHEN environment IS NULL THEN 1 ELSE 0 END), 0),
                  coalesce(sum(CASE WHEN owner IS NULL THEN 1 ELSE 0 END), 0)
           FROM records"""
    )[0]
    records, no_env, no_owner = (int(v or 0) for v in row)
    if records == 0:
        raise InputError(f"{source}: no tool_failure_guard records")
    if no_env or no_owner:
        raise InputError(
            f"{source}: refusing to conclude: {no_env} of {records} records lack "
            "deployment.environment and "
            f"{no_owner} lack enduser.pseudo.id in their Resource (set them with "
            "OTEL_RESOURCE_ATTRIBUTES); without them the rollout may not advance"
        )
    bad = engine.rows(queries.malformed_numbers())
    if bad:
        raise InputError(f"{source}: {MalformedNumbers(sorted(bad))}")
    return {"records": records, "without_environment": no_env, "without_owner": no_owner}


def _blank() -> dict[str, dict[str, Any]]:
    return {
        name: {"description": desc, "violations": 0, "examples": []}
        for name, (desc, _) in queries.INVARIANTS.items()
    }


def invariants(engine: Engine, envs: list[str]) -> dict[str, dict[str, Any]]:
    """environment -> invariant -> {violations, examples} (every environment listed)."""
    result: dict[str, dict[str, Any]] = {env: _blank() for env in sorted(envs)}
    named = {name: query for name, (_, query) in queries.INVARIANTS.items()}
    for name, env, total, example in sorted(
        engine.rows(queries.findings(named)), key=lambda r: (str(r[0]), str(r[1]), str(r[3]))
    ):
        entry = result.setdefault(str(env), _blank())[str(name)]
        entry["violations"] = int(total)
        entry["examples"].append(str(example))
    return result


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def cohorts(engine: Engine) -> dict[str, dict[str, dict[str, Any]]]:
    """environment -> input boundary -> volumes of that cohort's guarded (not off) prompts."""
    rows = engine.rows(
        """SELECT environment, input_boundary, count(*), count(DISTINCT owner),
                  sum(would_warn), sum(would_stop), sum(stopped), sum(calls_saved),
                  count(DISTINCT day), min(day), max(day)
           FROM prompt_facts WHERE mode <> 'off'
           GROUP BY environment, input_boundary"""
    )
    result: dict[str, dict[str, dict[str, Any]]] = {}
    for env, kind, n, owners, ww, ws, st, saved, days, first, last in rows:
        n = int(n)
        result.setdefault(str(env), {})[str(kind)] = {
            "prompts": n,
            "owners": int(owners),
            "would_warn": int(ww or 0),
            "would_warn_rate": _rate(int(ww or 0), n),
            "would_stop": int(ws or 0),
            "would_stop_rate": _rate(int(ws or 0), n),
            "stopped": int(st or 0),
            "stopped_rate": _rate(int(st or 0), n),
            "estimated_calls_saved": int(saved or 0),
            "days_covered": int(days),
            "first_day": day(first),
            "last_day": day(last),
        }
    return result


def check(engine: Engine, resource: dict[str, int]) -> dict[str, Any]:
    """Phase 1/2: invariants, volumes and rates per cohort, days covered, per environment.

    The drain cohort (hosts with the drain contract) decides; prompt-only and
    unsupported hosts are reported as their own cohorts, never pooled with it.
    """
    by_cohort = cohorts(engine)
    totals = {
        str(r[0]): r[1:]
        for r in engine.rows(
            """SELECT environment, count(DISTINCT owner), min(day), max(day),
                      sum(CASE WHEN mode = 'off' THEN 1 ELSE 0 END)
               FROM prompt_facts GROUP BY environment"""
        )
    }
    found = invariants(engine, list(totals))
    modes: dict[str, list[str]] = {}
    for env, mode in engine.rows("SELECT DISTINCT environment, mode FROM prompt_facts"):
        modes.setdefault(str(env), []).append(str(mode))
    environments: dict[str, Any] = {}
    for env in sorted(totals):
        owners, first, last, off = totals[env]
        kinds = by_cohort.get(env, {})
        drain = kinds.get(SUPPORTED) or _empty_cohort()
        inv = found.get(env, _blank())
        total_violations = sum(v["violations"] for v in inv.values())
        reasons = []
        if total_violations:
            reasons.append(f"{total_violations} invariant violation(s)")
        if drain["days_covered"] < MIN_DAYS:
            reasons.append(f"{drain['days_covered']} day(s) covered, {MIN_DAYS} needed")
        environments[env] = {
            "supported_prompts": drain["prompts"],
            "prompt_only_prompts": kinds.get("prompt-only", {}).get("prompts", 0),
            "unsupported_host_prompts": kinds.get("unsupported", {}).get("prompts", 0),
            "off_prompts": int(off or 0),
            "owners": int(owners),
            "modes": sorted(modes.get(env, [])),
            **{k: drain[k] for k in VOLUME_FIELDS},
            "first_day": day(first),
            "last_day": day(last),
            "cohorts": {k: kinds[k] for k in sql.INPUT_BOUNDARIES if k in kinds},
            "invariants": inv,
            "may_advance": not reasons,
            "reasons": reasons,
        }
    return {
        "command": "check",
        "engine": engine.name,
        "resource": resource,
        "refused": False,
        "environments": environments,
        "may_advance": bool(environments) and all(e["may_advance"] for e in environments.values()),
    }


def _empty_cohort() -> dict[str, Any]:
    return {
        "prompts": 0,
        "would_warn": 0,
        "would_warn_rate": None,
        "would_stop": 0,
        "would_stop_rate": None,
        "stopped": 0,
        "stopped_rate": None,
        "estimated_calls_saved": 0,
        "days_covered": 0,
    }


def daily_rates(engine: Engine) -> list[tuple[str, str, float, float, float]]:
    """(environment, day, would_warn rate, would_stop rate, stop rate), drain cohort."""
    rows = engine.rows(
        f"""SELECT environment, day, count(*), sum(would_warn), sum(would_stop), sum(stopped)
            FROM prompt_facts WHERE input_boundary = '{SUPPORTED}' AND mode <> 'off'
            GROUP BY environment, day"""
    )
    return sorted(
        (str(e), str(day(d)), int(a) / int(n), int(b) / int(n), int(c) / int(n))
        for e, d, n, a, b, c in rows
    )
