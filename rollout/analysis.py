"""``rollout check`` (Phase 1/2) and ``rollout gates`` (Phase 3; ``--phase warn``: Phase 2).

Both return plain JSON-ready dicts (the ``--json`` output) with a top-level
``may_advance``; :mod:`rollout.output` renders them for people.
"""

from __future__ import annotations

import math
from typing import Any, Final

import duckdb
import numpy as np
import numpy.typing as npt

from rollout import sql, stats
from rollout.stats import Array, Interval, Verdict

#: Phase 1 needs at least this many full days per environment.
MIN_DAYS: Final = 7
#: Phase 3 treats at most this share of owners.
MAX_TREATMENT_SHARE: Final = 0.05
#: Consistency bounds (treatment / control) for the stopped-loop rate and saved calls.
CONSISTENCY_BOUNDS: Final = (0.5, 2.0)
EXAMPLES: Final = 5


def prepare(con: duckdb.DuckDBPyConnection) -> None:
    """Build ``prompt_facts`` once (both commands read it)."""
    con.execute(sql.PROMPT_FACTS)


def _missing_resource(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    row = con.execute(
        """SELECT count(*) FILTER (WHERE environment IS NULL),
                  count(*) FILTER (WHERE owner IS NULL), count(*)
           FROM records WHERE event LIKE 'tool_failure_guard.%'"""
    ).fetchone()
    assert row is not None
    return {
        "records": int(row[2]),
        "without_environment": int(row[0]),
        "without_owner": int(row[1]),
    }


def invariants(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """environment -> invariant -> {violations, examples} (every environment listed)."""
    envs = [
        r[0] for r in con.execute("SELECT DISTINCT environment FROM prompts ORDER BY 1").fetchall()
    ]
    result: dict[str, dict[str, Any]] = {
        str(env): {
            name: {"description": desc, "violations": 0, "examples": []}
            for name, (desc, _) in sql.INVARIANTS.items()
        }
        for env in envs
    }
    for name, (desc, query) in sql.INVARIANTS.items():
        rows = con.execute(
            f"""WITH v(environment, prompt_id) AS ({query})
                SELECT environment, count(*), list(prompt_id ORDER BY prompt_id)[1:{EXAMPLES}]
                FROM v GROUP BY environment"""
        ).fetchall()
        for env, count, examples in rows:
            entry = result.setdefault(
                str(env),
                {
                    n: {"description": d, "violations": 0, "examples": []}
                    for n, (d, _) in sql.INVARIANTS.items()
                },
            )
            entry[name] = {"description": desc, "violations": int(count), "examples": examples}
    return result


def enforced_stops(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """environment -> {stops, defects, examples}: enforced stops that are not well formed."""
    rows = con.execute(
        f"""WITH d(environment, prompt_id) AS ({sql.ENFORCED_STOPS_MALFORMED}),
                 s AS (SELECT environment, count(DISTINCT prompt_id) AS stops
                       FROM guard_events WHERE decision = 'stopped' GROUP BY environment),
                 v AS (SELECT environment, count(*) AS defects,
                              list(prompt_id ORDER BY prompt_id)[1:{EXAMPLES}] AS examples
                       FROM d GROUP BY environment)
            SELECT s.environment, s.stops, coalesce(v.defects, 0), coalesce(v.examples, [])
            FROM s LEFT JOIN v ON v.environment IS NOT DISTINCT FROM s.environment"""
    ).fetchall()
    return {
        str(env): {"stops": int(stops), "defects": int(defects), "examples": list(examples)}
        for env, stops, defects, examples in rows
    }


def check(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Phase 1/2: invariants, volumes and rates, days covered, per environment."""
    missing = _missing_resource(con)
    refused = missing["without_environment"] > 0 or missing["without_owner"] > 0
    found = invariants(con)
    rows = con.execute(
        """
        SELECT environment,
               count(*) FILTER (WHERE drain_supported AND mode <> 'off') AS guarded,
               count(*) FILTER (WHERE NOT drain_supported) AS unsupported,
               count(*) FILTER (WHERE mode = 'off') AS off,
               count(*) FILTER (WHERE drain_supported AND would_warn AND mode <> 'off') AS ww,
               count(*) FILTER (WHERE drain_supported AND would_stop AND mode <> 'off') AS ws,
               count(*) FILTER (WHERE drain_supported AND stopped) AS st,
               coalesce(sum(calls_after_would_stop) FILTER (WHERE drain_supported), 0) AS saved,
               count(DISTINCT day) FILTER (WHERE drain_supported AND mode <> 'off') AS days,
               min(day), max(day),
               count(DISTINCT owner) AS owners,
               list(DISTINCT mode ORDER BY mode) AS modes
        FROM prompt_facts GROUP BY environment ORDER BY environment NULLS LAST
        """
    ).fetchall()
    environments: dict[str, Any] = {}
    for env, guarded, unsupported, off, ww, ws, st, saved, days, first, last, owners, modes in rows:
        key = str(env)
        inv = found.get(key, {})
        total_violations = sum(v["violations"] for v in inv.values())
        reasons = []
        if env is None:
            reasons.append("records without deployment.environment")
        if total_violations:
            reasons.append(f"{total_violations} invariant violation(s)")
        if int(days) < MIN_DAYS:
            reasons.append(f"{days} day(s) covered, {MIN_DAYS} needed")
        environments[key] = {
            "supported_prompts": int(guarded),
            "unsupported_host_prompts": int(unsupported),
            "off_prompts": int(off),
            "owners": int(owners),
            "modes": list(modes),
            "would_warn": int(ww),
            "would_warn_rate": ww / guarded if guarded else None,
            "would_stop": int(ws),
            "would_stop_rate": ws / guarded if guarded else None,
            "stopped": int(st),
            "stopped_rate": st / guarded if guarded else None,
            "estimated_calls_saved": int(saved),
            "days_covered": int(days),
            "first_day": str(first) if first is not None else None,
            "last_day": str(last) if last is not None else None,
            "invariants": inv,
            "may_advance": not reasons and not refused,
            "reasons": reasons,
        }
    result: dict[str, Any] = {
        "command": "check",
        "resource": missing,
        "refused": refused,
        "environments": environments,
    }
    if refused:
        result["refusal"] = (
            "some records lack deployment.environment or enduser.pseudo.id in their Resource: "
            "no per-environment conclusion, the rollout may not advance"
        )
    result["may_advance"] = (
        bool(environments) and not refused and all(e["may_advance"] for e in environments.values())
    )
    return result


def daily_rates(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, float, float, float]]:
    """(environment, day, would_warn rate, would_stop rate, stop rate) over supported prompts."""
    rows = con.execute(
        """SELECT environment, day, avg(would_warn::INT), avg(would_stop::INT), avg(stopped::INT)
           FROM prompt_facts WHERE drain_supported AND mode <> 'off'
           GROUP BY ALL ORDER BY 1, 2"""
    ).fetchall()
    return [(str(e), str(d), float(a), float(b), float(c)) for e, d, a, b, c in rows]


# -- gates ----------------------------------------------------------------------

_OWNER_SUMS = f"""
SELECT owner,
       count(*)::DOUBLE AS n,
       sum(completed::INT)::DOUBLE AS completed,
       sum((stop_reason = 'cancelled')::INT)::DOUBLE AS cancelled,
       sum(disconnect_or_retry::INT)::DOUBLE AS dor,
       coalesce(sum(input_tokens + output_tokens), 0)::DOUBLE AS tokens,
       count(input_tokens + output_tokens)::DOUBLE AS tokens_n,
       sum(model_turns)::DOUBLE AS turns,
       sum((loop_type IS NOT DISTINCT FROM 'repeated_tool_execution_failure')::INT)::DOUBLE
           AS stops,
       sum(would_stop::INT)::DOUBLE AS would_stops,
       sum(tool_calls)::DOUBLE AS calls,
       sum(calls_after_would_stop)::DOUBLE AS after_would_stop,
       coalesce(sum(tool_calls) FILTER (
           WHERE loop_type IS NOT DISTINCT FROM 'repeated_tool_execution_failure'), 0)::DOUBLE
           AS calls_in_stops,
       coalesce(sum(tool_calls - calls_after_would_stop) FILTER (WHERE would_stop), 0)::DOUBLE
           AS calls_to_would_stop
FROM prompt_facts
WHERE environment = ? AND mode = ? AND drain_supported AND {sql.GUARDED_ROUTE}
GROUP BY owner ORDER BY owner
"""
_COLUMNS = (
    "n",
    "completed",
    "cancelled",
    "dor",
    "tokens",
    "tokens_n",
    "turns",
    "stops",
    "would_stops",
    "calls",
    "after_would_stop",
    "calls_in_stops",
    "calls_to_would_stop",
)


def _arm(con: duckdb.DuckDBPyConnection, env: str, mode: str) -> tuple[list[str], Array]:
    rows = con.execute(_OWNER_SUMS, [env, mode]).fetchall()
    owners = [str(r[0]) for r in rows]
    matrix = np.asarray([r[1:] for r in rows], dtype=np.float64).reshape(len(rows), len(_COLUMNS))
    return owners, matrix


def _col(matrix: Array, name: str) -> Array:
    return matrix[:, _COLUMNS.index(name)]


def _latencies(
    con: duckdb.DuckDBPyConnection, env: str, mode: str, owners: list[str]
) -> tuple[Array, npt.NDArray[np.int64]]:
    index = {o: i for i, o in enumerate(owners)}
    arrow = con.execute(
        "SELECT owner, wall_time_ms FROM prompt_facts WHERE environment = ? AND mode = ? "
        f"AND drain_supported AND {sql.GUARDED_ROUTE}",
        [env, mode],
    ).fetchnumpy()
    values = np.asarray(arrow["wall_time_ms"], dtype=np.float64)
    owner_idx = np.asarray([index[str(o)] for o in arrow["owner"]], dtype=np.int64)
    return values, owner_idx


def _gate(
    name: str, kind: str, interval: Interval, margin: Any, verdict: Verdict, note: str = ""
) -> dict[str, Any]:
    def num(v: float) -> float | None:
        return v if math.isfinite(v) else None

    return {
        "gate": name,
        "kind": kind,
        "estimate": num(interval.estimate),
        "low": num(interval.low),
        "high": num(interval.high),
        "margin": margin,
        "verdict": verdict.value,
        "note": note,
    }


#: ``rollout gates --phase``: (treatment mode, control mode).
ARMS: Final = {"enforce": ("enforce", "warn"), "warn": ("warn", "shadow")}
#: How each phase's arms came about (printed with the result: it is not the same evidence).
COMPARISONS: Final = {
    "enforce": "randomised per owner: enforce owners (treatment) against warn owners (control)",
    "warn": "before/after, NOT randomised: the environment's warn prompts (treatment) against "
    "its earlier shadow prompts (control); time, traffic and model changes between the "
    "periods are not controlled",
}
#: Phase 2 cancel-rate margin (T − C): the specification gives none; the same as the
#: disconnect-or-retry margin, the other measure of a user abandoning a prompt.
CANCEL_MARGIN: Final = 0.005


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


def gates(
    con: duckdb.DuckDBPyConnection,
    *,
    phase: str = "enforce",
    seed: int = 0,
    replicates: int = 200,
) -> dict[str, Any]:
    """Compare treatment against control per environment with owner-level intervals.

    ``phase="enforce"`` (Phase 3): enforce owners against warn owners of the same
    wave, randomised per owner.  ``phase="warn"`` (Phase 2): the environment's warn
    prompts against its shadow prompts -- a before/after comparison of the same
    owners, not randomised, judged with the same machinery and margins.
    """
    if phase not in ARMS:
        raise ValueError(f"unknown phase {phase!r} (expected one of {', '.join(ARMS)})")
    treatment_mode, control_mode = ARMS[phase]
    checked = check(con)
    envs = [
        str(r[0])
        for r in con.execute(
            """SELECT DISTINCT environment FROM prompt_facts
               WHERE mode IN (?, ?) AND environment IS NOT NULL ORDER BY 1""",
            # Phase 2: only environments that ran warn (the others are still in shadow).
            [treatment_mode, treatment_mode if phase == "warn" else control_mode],
        ).fetchall()
    ]
    stops = enforced_stops(con) if phase == "enforce" else {}
    environments: dict[str, Any] = {}
    for env in envs:
        t_owners, t = _arm(con, env, treatment_mode)
        c_owners, c = _arm(con, env, control_mode)
        results = _metric_gates(
            con, env, phase, (t_owners, t), (c_owners, c), seed=seed, replicates=replicates
        )
        env_check = checked["environments"].get(env, {})
        violations = sum(v["violations"] for v in env_check.get("invariants", {}).values())
        results.append(_count_gate("invariants_zero", violations))
        if phase == "enforce":
            malformed = stops.get(env, {"stops": 0, "defects": 0, "examples": []})
            results.append(
                _count_gate(
                    "enforced_stops_well_formed",
                    malformed["defects"],
                    f"{malformed['stops']} enforced stop(s) checked: expected key, "
                    "reminder, complete receipts, kept history",
                    examples=malformed["examples"],
                    stops_checked=malformed["stops"],
                )
            )
            design = _assignment(con, env)
        else:
            design = _before_after(con, env)
        passed = all(g["verdict"] == Verdict.PASS.value for g in results)
        environments[env] = {
            "treatment_mode": treatment_mode,
            "control_mode": control_mode,
            "treatment_owners": len(t_owners),
            "control_owners": len(c_owners),
            "treatment_prompts": int(_col(t, "n").sum()) if len(t_owners) else 0,
            "control_prompts": int(_col(c, "n").sum()) if len(c_owners) else 0,
            "gates": results,
            ("assignment" if phase == "enforce" else "before_after"): design,
            "may_advance": passed and design["ok"] and not checked["refused"],
        }
    return {
        "command": "gates",
        "phase": phase,
        "comparison": COMPARISONS[phase],
        "refused": checked["refused"],
        "resource": checked["resource"],
        "environments": environments,
        "may_advance": bool(environments)
        and not checked["refused"]
        and all(e["may_advance"] for e in environments.values()),
    }


def _metric_gates(
    con: duckdb.DuckDBPyConnection,
    env: str,
    phase: str,
    treatment: tuple[list[str], Array],
    control: tuple[list[str], Array],
    *,
    seed: int,
    replicates: int,
) -> list[dict[str, Any]]:
    """The interval gates: Phase 3's list, or Phase 2's (cancels, reconnects, cost)."""
    (t_owners, t), (c_owners, c) = treatment, control
    treatment_mode, control_mode = ARMS[phase]
    results: list[dict[str, Any]] = []

    def pair(num: str, den: str) -> tuple[tuple[Array, Array], tuple[Array, Array]]:
        return (_col(t, num), _col(t, den)), (_col(c, num), _col(c, den))

    if phase == "enforce":
        completion = stats.difference_interval(*pair("completed", "n"))
        results.append(
            _gate(
                "completion",
                "T − C (rate)",
                completion,
                -0.01,
                stats.lower_bound_verdict(completion, -0.01),
            )
        )
    else:
        cancels = stats.difference_interval(*pair("cancelled", "n"))
        results.append(
            _gate(
                "cancel_rate",
                "T − C (rate)",
                cancels,
                CANCEL_MARGIN,
                stats.upper_bound_verdict(cancels, CANCEL_MARGIN),
                "margin chosen as for disconnect-or-retry (the specification gives none)",
            )
        )
    dor = stats.difference_interval(*pair("dor", "n"))
    results.append(
        _gate(
            "disconnect_or_retry_10min",
            "T − C (rate)",
            dor,
            0.005,
            stats.upper_bound_verdict(dor, 0.005),
        )
    )
    if len(t_owners) and len(c_owners):
        lat = stats.poisson_bootstrap_quantile_ratio(
            _latencies(con, env, treatment_mode, t_owners),
            _latencies(con, env, control_mode, c_owners),
            replicates=replicates,
            seed=seed,
        )
    else:
        lat = Interval(estimate=math.nan, low=math.nan, high=math.nan)
    results.append(
        _gate(
            "p95_latency",
            "T / C",
            lat,
            1.10,
            stats.upper_bound_verdict(lat, 1.10),
            "owner-level Poisson bootstrap",
        )
    )
    tokens = stats.ratio_interval(*pair("tokens", "tokens_n"))
    results.append(
        _gate(
            "mean_tokens",
            "T / C",
            tokens,
            1.10,
            stats.upper_bound_verdict(tokens, 1.10),
            "" if tokens.finite else "the model reported no tokens",
        )
    )
    turns = stats.ratio_interval(*pair("turns", "n"))
    results.append(
        _gate("mean_turns", "T / C", turns, 1.10, stats.upper_bound_verdict(turns, 1.10))
    )
    if phase != "enforce":
        return results
    stop_rate = stats.ratio_interval(
        (_col(t, "stops"), _col(t, "n")), (_col(c, "would_stops"), _col(c, "n"))
    )
    results.append(
        _gate(
            "stopped_loop_rate",
            "T stops / C would_stops",
            stop_rate,
            list(CONSISTENCY_BOUNDS),
            stats.equivalence_verdict(stop_rate, *CONSISTENCY_BOUNDS),
        )
    )
    where = stats.ratio_interval(
        (_col(t, "calls_in_stops"), _col(t, "stops")),
        (_col(c, "calls_to_would_stop"), _col(c, "would_stops")),
    )
    saved = _saved_calls_estimate(t, c)
    results.append(
        _gate(
            "saved_calls",
            "T calls/stop ÷ C calls/would_stop",
            where,
            list(CONSISTENCY_BOUNDS),
            stats.equivalence_verdict(where, *CONSISTENCY_BOUNDS),
            f"stops land where warn's would_stop did; estimated calls saved {saved:.0f}"
            if math.isfinite(saved)
            else "no stops or no would_stops to compare",
        )
    )
    return results


def _before_after(con: duckdb.DuckDBPyConnection, env: str) -> dict[str, Any]:
    """Phase 2's design facts: the two periods, their days and versions (no randomisation)."""
    rows = con.execute(
        """SELECT mode, count(DISTINCT day), min(day), max(day),
                  list(DISTINCT service_version ORDER BY service_version)
           FROM prompt_facts
           WHERE environment = ? AND mode IN ('shadow', 'warn') AND drain_supported
             AND """
        + sql.GUARDED_ROUTE
        + """
           GROUP BY mode""",
        [env],
    ).fetchall()
    periods: dict[str, dict[str, Any]] = {
        str(mode): {
            "days_covered": int(days),
            "first_day": str(first),
            "last_day": str(last),
            "service_versions": [str(v) for v in versions],
        }
        for mode, days, first, last, versions in rows
    }
    problems = []
    for mode, label in (("shadow", "shadow baseline"), ("warn", "warn")):
        days = periods.get(mode, {}).get("days_covered", 0)
        if days < MIN_DAYS:
            problems.append(f"{label} covers {days} day(s), {MIN_DAYS} needed")
    versions = {v for p in periods.values() for v in p["service_versions"]}
    if len(versions) > 1:
        problems.append(
            f"{len(versions)} service.version values across shadow and warn: the comparison "
            "would mix a version change with the reminder"
        )
    overlap = (
        "shadow" in periods
        and "warn" in periods
        and periods["warn"]["first_day"] < periods["shadow"]["last_day"]
    )
    return {
        "periods": periods,
        "overlapping": overlap,
        "ok": not problems,
        "problems": problems,
    }


def _saved_calls_estimate(t: Array, c: Array) -> float:
    """Treatment stops × control's calls after would_stop per would_stop prompt."""
    if not len(t) or not len(c):
        return math.nan
    would_stops = float(_col(c, "would_stops").sum())
    if would_stops <= 0:
        return math.nan
    per_stop = float(_col(c, "after_would_stop").sum()) / would_stops
    return float(_col(t, "stops").sum()) * per_stop


def _over_cap(treated: int, owners: int) -> bool:
    """Whether the treated share exceeds 5 % beyond hashing chance (one-sided, α = 0.01).

    A hash assignment at exactly 5 % treats a Binomial(n, 0.05) number of
    owners, so a realised 5.4 % is no breach; the deployment's configured
    percentage (``rollout assign --percent``) must itself be ≤ 5.
    """
    if treated <= MAX_TREATMENT_SHARE * owners:
        return False
    sd = math.sqrt(owners * MAX_TREATMENT_SHARE * (1 - MAX_TREATMENT_SHARE))
    return (treated - MAX_TREATMENT_SHARE * owners) / sd > 2.326


def _assignment(con: duckdb.DuckDBPyConnection, env: str) -> dict[str, Any]:
    row = con.execute(
        """WITH o AS (
               SELECT owner, bool_or(mode = 'enforce') AS t, bool_or(mode = 'warn') AS c
               FROM prompt_facts WHERE environment = ? AND mode IN ('warn', 'enforce')
               GROUP BY owner)
           SELECT count(*) FILTER (WHERE t AND c), list(owner ORDER BY owner)
                      FILTER (WHERE t AND c)[1:5],
                  count(*) FILTER (WHERE t), count(*)
           FROM o""",
        [env],
    ).fetchone()
    assert row is not None
    both, both_examples, treated, total = row
    versions = [
        str(r[0])
        for r in con.execute(
            """SELECT DISTINCT service_version FROM prompt_facts
               WHERE environment = ? AND mode IN ('warn', 'enforce') ORDER BY 1""",
            [env],
        ).fetchall()
    ]
    share = treated / total if total else 0.0
    problems = []
    if both:
        problems.append(f"{both} owner(s) in both arms")
    if total and _over_cap(int(treated), int(total)):
        problems.append(f"treatment is {share:.1%} of owners (at most 5 %)")
    if len(versions) != 1:
        problems.append(f"{len(versions)} service.version values in the wave")
    return {
        "owners_in_both_arms": int(both),
        "examples": list(both_examples or []),
        "treatment_share": share,
        "service_versions": versions,
        "ok": not problems,
        "problems": problems,
    }
