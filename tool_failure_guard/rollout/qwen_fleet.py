"""``rollout check``/``gates`` on a Qwen Code fleet: what its records decide, and what not.

Everything the specification asks that Qwen Code's records (0.24.4) cannot
decide is reported as ``not computable from Qwen Code telemetry: <what is
missing>`` -- never estimated.  An invariant or gate that is not computable
holds the environment back (zero violations cannot be shown), so a Qwen Code
environment is never told it may advance; what *is* computable is reported
so the fleet's guard can still be watched (volumes, rates, three invariants,
tokens, turns, the stopped-loop rate and the saved-calls consistency).

Only aggregates leave the engine, as for our own records.
"""

from __future__ import annotations

from typing import Any, Final

from tool_failure_guard.rollout import check as checking
from tool_failure_guard.rollout import queries, qwen_code, qwen_queries, qwen_sql
from tool_failure_guard.rollout.engine import Engine, InputError

NOT_COMPUTABLE: Final = "not_computable"
PREFIX: Final = "not computable from Qwen Code telemetry: "


class Query:
    """Runs ``q_*`` queries on an engine with the filters' conditions in every scan."""

    def __init__(self, engine: Engine, filters: str) -> None:
        self.engine = engine
        self.filters = filters

    def __call__(self, query: str) -> list[tuple[Any, ...]]:
        return self.engine.rows(qwen_sql.with_relations(query, self.filters))


def preflight(run: Query, source: str) -> dict[str, int]:
    """Refuse what cannot be analysed, exactly as for our records (exit 2)."""
    records, no_env, no_owner = (
        int(v or 0)
        for v in run(
            """SELECT count(*),
                      coalesce(sum(CASE WHEN environment IS NULL THEN 1 ELSE 0 END), 0),
                      coalesce(sum(CASE WHEN owner IS NULL THEN 1 ELSE 0 END), 0)
               FROM q_records"""
        )[0]
    )
    if records == 0:
        raise InputError(f"{source}: no Qwen Code records")
    if no_env or no_owner:
        raise InputError(
            f"{source}: refusing to conclude: {no_env} of {records} Qwen Code records lack "
            f"deployment.environment and {no_owner} lack enduser.pseudo.id in their Resource "
            "(Qwen Code takes them from OTEL_RESOURCE_ATTRIBUTES or settings "
            "telemetry.resourceAttributes); without them the rollout may not advance"
        )
    bad = run(qwen_queries.malformed_numbers())
    if bad:
        event, field, count, example = sorted(bad)[0]
        raise InputError(
            f"{source}: {int(count)} {event} record(s) carry a {field} that is not a decimal "
            f"count (first prompt id {example or '-'})"
        )
    return {"records": records, "without_environment": 0, "without_owner": 0}


def _invariants(run: Query, envs: list[str]) -> dict[str, dict[str, Any]]:
    def blank() -> dict[str, Any]:
        found: dict[str, Any] = {
            name: {"description": desc, "violations": 0, "examples": []}
            for name, (desc, _) in qwen_queries.INVARIANTS.items()
        }
        for name, missing in qwen_queries.NOT_COMPUTABLE.items():
            found[name] = {"violations": None, "computable": False, "note": PREFIX + missing}
        return found

    result = {env: blank() for env in envs}
    named = {name: query for name, (_, query) in qwen_queries.INVARIANTS.items()}
    for name, env, total, example in sorted(
        run(queries.findings(named)), key=lambda r: (str(r[0]), str(r[1]), str(r[3]))
    ):
        entry = result.setdefault(str(env), blank())[str(name)]
        entry["violations"] = int(total)
        entry["examples"].append(str(example))
    return result


def _counter_check(run: Query, totals: qwen_code.Totals | None, env: str) -> dict[str, Any] | None:
    if totals is None:
        return None
    counted: dict[str, int] = {}
    for (environment, decision), n in totals.items():
        if environment == env:
            counted[decision] = counted.get(decision, 0) + n
    logged = {
        str(d): int(n)
        for d, n in run(
            f"SELECT decision, count(*) FROM q_guard WHERE environment = '{_sq(env)}' "
            "GROUP BY decision"
        )
    }
    return {"counter": counted, "log_records": logged, "consistent": counted == logged}


def _sq(text: str) -> str:
    return text.replace("'", "''")


def check(
    run: Query, engine: str, resource: dict[str, int], totals: qwen_code.Totals | None
) -> dict[str, Any]:
    """Phase 1/2 on Qwen Code's records, per environment (drain cohort decides)."""
    rows = run(
        """SELECT environment, input_boundary, count(*), count(DISTINCT owner),
                  sum(would_warn), sum(would_stop), sum(stopped),
                  sum(CASE WHEN could_stop = 1 THEN calls_after_would_stop ELSE 0 END),
                  count(DISTINCT day), min(day), max(day),
                  sum(CASE WHEN mode IS NULL THEN 1 ELSE 0 END)
           FROM q_prompts GROUP BY environment, input_boundary"""
    )
    cohorts: dict[str, dict[str, Any]] = {}
    for env, kind, n, owners, ww, ws, st, saved, days, first, last, unmoded in rows:
        n = int(n)
        cohorts.setdefault(str(env), {})[str(kind)] = {
            "prompts": n,
            "owners": int(owners),
            "would_warn": int(ww or 0),
            "would_warn_rate": int(ww or 0) / n,
            "would_stop": int(ws or 0),
            "would_stop_rate": int(ws or 0) / n,
            "stopped": int(st or 0),
            "stopped_rate": int(st or 0) / n,
            "estimated_calls_saved": int(saved or 0),
            "days_covered": int(days),
            "first_day": checking.day(first),
            "last_day": checking.day(last),
            "prompts_without_recorded_mode": int(unmoded or 0),
        }
    modes: dict[str, list[str]] = {}
    for env, mode in run("SELECT DISTINCT environment, mode FROM q_guard"):
        modes.setdefault(str(env), []).append(str(mode))
    orphans = dict(
        run(
            """SELECT g.environment, count(DISTINCT g.prompt_id) FROM q_guard g
               LEFT JOIN (SELECT DISTINCT attributes['prompt_id'] AS prompt_id FROM q_records
                          WHERE event = 'qwen-code.user_prompt') p ON p.prompt_id = g.prompt_id
               WHERE p.prompt_id IS NULL GROUP BY g.environment"""
        )
    )
    envs = sorted(set(cohorts) | set(modes))
    found = _invariants(run, envs)
    environments = {}
    for env in envs:
        kinds = cohorts.get(env, {})
        drain = kinds.get("drain") or {"prompts": 0, "days_covered": 0}
        inv = found[env]
        violations = sum(v["violations"] or 0 for v in inv.values())
        missing = sorted(k for k, v in inv.items() if v["violations"] is None)
        reasons = [PREFIX + f"{len(missing)} of 7 invariants ({', '.join(missing)})"]
        if violations:
            reasons.append(f"{violations} invariant violation(s)")
        if drain["days_covered"] < checking.MIN_DAYS:
            reasons.append(f"{drain['days_covered']} day(s) covered, {checking.MIN_DAYS} needed")
        counter = _counter_check(run, totals, env)
        if counter is not None and not counter["consistent"]:
            reasons.append("the guard counter and the guard log records disagree (records lost?)")
        environments[env] = {
            "supported_prompts": drain["prompts"],
            "unsupported_host_prompts": kinds.get("unsupported", {}).get("prompts", 0),
            "unknown_boundary_prompts": kinds.get("unknown", {}).get("prompts", 0),
            "guard_records_without_prompt_record": int(orphans.get(env, 0)),
            "modes": sorted(modes.get(env, [])),
            **{k: drain.get(k) for k in (*checking.VOLUME_FIELDS, "first_day", "last_day")},
            "cohorts": kinds,
            "invariants": inv,
            "guard_counter": counter,
            "may_advance": False,
            "reasons": reasons,
        }
    return {
        "command": "check",
        "agent": "qwen-code",
        "engine": engine,
        "resource": resource,
        "refused": False,
        "environments": environments,
        "may_advance": False,
    }
