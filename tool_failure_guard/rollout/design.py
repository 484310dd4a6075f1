"""The design checks beside the gates: Phase 3's assignment, Phase 2's two periods.

Each returns ``{key: {..., "ok", "problems"}}`` for every environment (and, for
Phase 2, every cohort) from a few aggregate queries.
"""

from __future__ import annotations

import math
from typing import Any, Final

from tool_failure_guard.rollout import sql
from tool_failure_guard.rollout.check import MIN_DAYS, day
from tool_failure_guard.rollout.engine import Engine

#: Phase 3 treats at most this share of owners.
MAX_TREATMENT_SHARE: Final = 0.05


def over_cap(treated: int, owners: int) -> bool:
    """Whether the treated share exceeds 5 % beyond hashing chance (one-sided, α = 0.01).

    A hash assignment at exactly 5 % treats a Binomial(n, 0.05) number of
    owners, so a realised 5.4 % is no breach; the deployment's configured
    percentage (``rollout assign --percent``) must itself be ≤ 5.
    """
    if treated <= MAX_TREATMENT_SHARE * owners:
        return False
    sd = math.sqrt(owners * MAX_TREATMENT_SHARE * (1 - MAX_TREATMENT_SHARE))
    return (treated - MAX_TREATMENT_SHARE * owners) / sd > 2.326


def assignment(engine: Engine) -> dict[tuple[str, str], dict[str, Any]]:
    """(environment, "") -> every owner in one arm, treatment ≤ 5 %, one service.version."""
    owners = engine.rows(
        """SELECT environment, owner, max(CASE WHEN mode = 'enforce' THEN 1 ELSE 0 END),
                  max(CASE WHEN mode = 'warn' THEN 1 ELSE 0 END)
           FROM prompt_facts WHERE mode IN ('warn', 'enforce') GROUP BY environment, owner"""
    )
    versions: dict[str, set[str]] = {}
    for env, version in engine.rows(
        """SELECT DISTINCT environment, service_version FROM prompt_facts
           WHERE mode IN ('warn', 'enforce')"""
    ):
        versions.setdefault(str(env), set()).add(str(version))
    arms: dict[str, list[tuple[str, int, int]]] = {}
    for env, owner, t, c in owners:
        arms.setdefault(str(env), []).append((str(owner), int(t), int(c)))
    result = {}
    for env, rows in arms.items():
        both = sorted(o for o, t, c in rows if t and c)
        treated = sum(1 for _, t, _ in rows if t)
        total = len(rows)
        share = treated / total if total else 0.0
        problems = []
        if both:
            problems.append(f"{len(both)} owner(s) in both arms")
        if total and over_cap(treated, total):
            problems.append(f"treatment is {share:.1%} of owners (at most 5 %)")
        wave = sorted(versions.get(env, set()))
        if len(wave) != 1:
            problems.append(f"{len(wave)} service.version values in the wave")
        result[(env, "")] = {
            "owners_in_both_arms": len(both),
            "examples": both[:5],
            "treatment_share": share,
            "service_versions": wave,
            "ok": not problems,
            "problems": problems,
        }
    return result


def before_after(engine: Engine) -> dict[tuple[str, str], dict[str, Any]]:
    """(environment, cohort) -> Phase 2's periods, their days and versions (no randomisation)."""
    rows = engine.rows(
        f"""SELECT environment, input_boundary, mode, count(DISTINCT day), min(day), max(day)
           FROM prompt_facts
           WHERE mode IN ('shadow', 'warn') AND {sql.GUARDED_ROUTE}
           GROUP BY environment, input_boundary, mode"""
    )
    versions: dict[tuple[str, str, str], set[str]] = {}
    for env, kind, mode, version in engine.rows(
        f"""SELECT DISTINCT environment, input_boundary, mode, service_version FROM prompt_facts
           WHERE mode IN ('shadow', 'warn') AND {sql.GUARDED_ROUTE}"""
    ):
        versions.setdefault((str(env), str(kind), str(mode)), set()).add(str(version))
    periods: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for env, kind, mode, days, first, last in rows:
        key = (str(env), str(kind), str(mode))
        periods.setdefault(key[:2], {})[str(mode)] = {
            "days_covered": int(days),
            "first_day": day(first),
            "last_day": day(last),
            "service_versions": sorted(versions.get(key, set())),
        }
    result: dict[tuple[str, str], dict[str, Any]] = {}
    for place, found in periods.items():
        problems = []
        for mode, label in (("shadow", "shadow baseline"), ("warn", "warn")):
            days = found.get(mode, {}).get("days_covered", 0)
            if days < MIN_DAYS:
                problems.append(f"{label} covers {days} day(s), {MIN_DAYS} needed")
        all_versions = {v for p in found.values() for v in p["service_versions"]}
        if len(all_versions) > 1:
            problems.append(
                f"{len(all_versions)} service.version values across shadow and warn: the "
                "comparison would mix a version change with the reminder"
            )
        overlap = (
            "shadow" in found
            and "warn" in found
            and found["warn"]["first_day"] < found["shadow"]["last_day"]
        )
        result[place] = {
            "periods": dict(sorted(found.items())),
            "overlapping": overlap,
            "ok": not problems,
            "problems": problems,
        }
    return result
