"""``tool-failure-guard rollout``: known truth from simulated fleets run through the real session.

The fleets are run by :mod:`~tool_failure_guard.rollout.simulate` (real GuardedSession, guard,
receipts, protections and OTLP JSON telemetry) with seeded stochastic models;
the analysis reads the files exactly as it would read a collector's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import attrs
import duckdb
import numpy as np
import pytest
from rollout_records import EVENTS, INSERT, LISTS, SCOPE

from tool_failure_guard.commands.cli import main
from tool_failure_guard.rollout import assign, check, design, gates, load, sql, stats
from tool_failure_guard.rollout.engine import DuckDBEngine
from tool_failure_guard.rollout.simulate import FleetConfig, simulate

#: A fleet whose treatment truly changes nothing but the stop itself.  Outcomes other
#: than loops are rare so that ~17k prompts give intervals inside the spec's margins.
NEUTRAL = FleetConfig(
    owners=350,
    days=7,
    prompts_per_day=7,
    percent=50.0,
    error_rate=0.003,
    cancel_rate=0.003,
    loop_rate=0.10,
    recover_rate=0.85,
    disconnect_after_failure=0.05,
    retry_after_failure=0.2,
    heterogeneity=0.5,
    work_turns_max=1,
    calls_per_turn_max=1,
    seed=11,
)


@pytest.fixture(scope="module")
def neutral(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("neutral") / "fleet.jsonl"
    summary = simulate(NEUTRAL, out, workers=2)
    return out, summary


def _judge(engine: Any, phase: str = "enforce") -> tuple[dict[str, Any], dict[str, Any]]:
    checked = check.check(engine, check.preflight(engine, "test"))
    return checked, gates.gates(engine, checked, phase=phase)


def _analyse(*paths: Path, phase: str = "enforce") -> tuple[dict[str, Any], dict[str, Any]]:
    return _judge(load.duckdb_engine(list(paths)), phase)


# -- assignment ------------------------------------------------------------------


def test_assignment_is_deterministic_and_monotone_in_percent() -> None:
    owners = [f"owner-{i}" for i in range(4000)]
    small = {o for o in owners if assign.in_treatment(o, 2.0, "wave-1")}
    large = {o for o in owners if assign.in_treatment(o, 5.0, "wave-1")}
    assert small <= large
    assert small == {o for o in owners if assign.in_treatment(o, 2.0, "wave-1")}
    assert 0.03 < len(large) / len(owners) < 0.07
    other_salt = {o for o in owners if assign.in_treatment(o, 5.0, "wave-2")}
    assert other_salt != large
    with pytest.raises(ValueError):
        assign.in_treatment("x", 101.0, "s")


def test_assign_command(capsys: pytest.CaptureFixture[str]) -> None:
    owner = next(o for o in (f"o{i}" for i in range(1000)) if assign.in_treatment(o, 5, "s"))
    assert main(["rollout", "assign", owner, "--percent", "5", "--salt", "s", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["arm"] == "treatment" and result["bucket"] < 0.05
    assert main(["rollout", "assign", owner, "--percent", "0", "--salt", "s"]) == 0
    assert capsys.readouterr().out.strip() == "control"


# -- statistics -------------------------------------------------------------------


def test_delta_method_reduces_to_the_mean_variance_for_constant_denominators() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(5.0, 2.0, 50)
    y = np.full(50, 4.0)
    m, var = stats.ratio_and_variance(x, y)
    assert m == pytest.approx(x.mean() / 4.0)
    assert var == pytest.approx(x.var(ddof=1) / 16.0 / 50)


def test_a_gate_passes_only_when_the_whole_interval_is_on_the_right_side() -> None:
    at = stats.Interval
    assert stats.upper_bound_verdict(at(estimate=1.0, low=0.9, high=1.09), 1.10) == "pass"
    assert stats.upper_bound_verdict(at(estimate=1.0, low=0.9, high=1.11), 1.10) == "inconclusive"
    assert stats.upper_bound_verdict(at(estimate=1.2, low=1.11, high=1.3), 1.10) == "fail"
    assert stats.lower_bound_verdict(at(estimate=0, low=-0.011, high=0.01), -0.01) == (
        "inconclusive"
    )
    assert stats.lower_bound_verdict(at(estimate=-0.03, low=-0.04, high=-0.02), -0.01) == "fail"
    nan = at(estimate=math.nan, low=math.nan, high=math.nan)
    assert stats.upper_bound_verdict(nan, 1.1) == "inconclusive"
    assert stats.equivalence_verdict(at(estimate=1, low=0.6, high=1.4), 0.5, 2.0) == "pass"


def test_owner_level_intervals_cover_and_prompt_level_ones_under_cover() -> None:
    """400 seeded aggregate-level experiments with a known true effect of −1 pp.

    Owners differ (logit-normal completion propensity), so prompts of one owner
    correlate.  The delta-method interval over owners covers the truth ~95 %
    of the time; the naive interval that treats prompts as independent does not.
    """
    rng = np.random.default_rng(20261201)
    experiments, owners, effect = 400, 200, -0.01
    covered = naive_covered = 0
    for _ in range(experiments):
        arms = []
        for shift in (0.0, effect):
            sizes = rng.poisson(30, owners) + 1
            logit = np.log(0.85 / 0.15) + rng.normal(0.0, 0.5, owners)
            p = np.clip(1 / (1 + np.exp(-logit)) + shift, 0.0, 1.0)
            completed = rng.binomial(sizes, p).astype(np.float64)
            arms.append((completed, sizes.astype(np.float64)))
        control, treatment = arms
        interval = stats.difference_interval(treatment, control)
        covered += interval.low <= effect <= interval.high
        pt, vt = stats.naive_ratio_variance(*treatment)
        pc, vc = stats.naive_ratio_variance(*control)
        half = stats.Z95 * math.sqrt(vt + vc)
        naive_covered += (pt - pc) - half <= effect <= (pt - pc) + half
    assert 0.93 <= covered / experiments <= 0.97
    assert naive_covered / experiments < 0.90


# -- known truth through the real session ------------------------------------------


def test_a_neutral_treatment_passes_every_gate(neutral: tuple[Path, dict[str, Any]]) -> None:
    path, summary = neutral
    checked, judged = _analyse(path)
    assert summary["prompts"] > 15_000
    env = judged["environments"]["internal"]
    verdicts = {g["gate"]: g["verdict"] for g in env["gates"]}
    assert verdicts == dict.fromkeys(verdicts, "pass"), env["gates"]
    assert len(verdicts) == 9
    stops = next(g for g in env["gates"] if g["gate"] == "enforced_stops_well_formed")
    assert stops["stops_checked"] > 0 and stops["examples"] == []
    # Half the owners treated: the assignment check (≤ 5 %) holds the rollout back.
    assert env["assignment"]["problems"] == ["treatment is 51.1% of owners (at most 5 %)"]
    assert env["may_advance"] is False
    # Check: every invariant at zero; unsupported hosts reported apart, 7 days covered.
    internal = checked["environments"]["internal"]
    assert all(v["violations"] == 0 for v in internal["invariants"].values())
    assert internal["unsupported_host_prompts"] > 0
    assert internal["days_covered"] >= 7  # late prompts of day 7 may end after midnight
    assert internal["would_warn"] > internal["would_stop"] > 0
    assert internal["estimated_calls_saved"] > 0
    assert checked["may_advance"] is True


def test_check_and_gates_commands_exit_status_and_report(
    neutral: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = neutral
    assert main(["rollout", "check", str(path)]) == 0
    assert "check: may advance" in capsys.readouterr().out
    report = tmp_path / "report"
    assert main(["rollout", "gates", str(path), "--json", "--report", str(report)]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["command"] == "gates" and result["may_advance"] is False
    page = (report / "index.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 2
    assert (report / "gate_intervals.png").stat().st_size > 1000
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # no staging left behind


#: Phase 2 fleets: the same owners (same seed) in shadow for a week, then in warn for a week.
#: Loops are rarer than in NEUTRAL so warn's own benefit (loops ending at the reminder)
#: does not hide a cost it adds elsewhere.
PHASE2 = FleetConfig(
    **{
        **{k: getattr(NEUTRAL, k) for k in ("error_rate", "cancel_rate", "recover_rate")},
        "owners": 150,
        "days": 7,
        "prompts_per_day": 5,
        "loop_rate": 0.03,
        "disconnect_after_failure": 0.05,
        "retry_after_failure": 0.2,
        "heterogeneity": 0.5,
        "work_turns_max": 1,
        "calls_per_turn_max": 1,
        "phase": "shadow",
        "seed": 21,
    }
)


@pytest.fixture(scope="module")
def shadow_week(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("phase2") / "shadow.jsonl"
    simulate(PHASE2, out, workers=2)
    return out


def _warn_week(shadow: Path, tmp_path: Path, **changes: Any) -> dict[str, Any]:
    warn = tmp_path / "warn.jsonl"
    simulate(attrs.evolve(PHASE2, phase="warn", start_day=7, **changes), warn, workers=2)
    return _analyse(shadow, warn, phase="warn")[1]


def test_a_neutral_warn_week_passes_the_phase2_comparison(
    shadow_week: Path, tmp_path: Path
) -> None:
    judged = _warn_week(shadow_week, tmp_path)
    assert judged["phase"] == "warn" and "NOT randomised" in judged["comparison"]
    env = judged["environments"]["internal"]
    assert (env["treatment_mode"], env["control_mode"]) == ("warn", "shadow")
    assert env["treatment_owners"] == env["control_owners"] > 140  # the same owners, twice
    verdicts = {g["gate"]: g["verdict"] for g in env["gates"]}
    assert verdicts == {
        "cancel_rate": "pass",
        "disconnect_or_retry_10min": "pass",
        "p95_latency": "pass",
        "mean_tokens": "pass",
        "mean_turns": "pass",
        "invariants_zero": "pass",
    }, env["gates"]
    periods = env["before_after"]["periods"]
    assert periods["shadow"]["first_day"] == "2026-11-01"
    assert periods["warn"]["first_day"] == "2026-11-08"
    assert env["before_after"]["ok"] and judged["may_advance"] is True


def test_a_warn_week_with_more_turns_fails_the_turns_gate(
    shadow_week: Path, tmp_path: Path
) -> None:
    judged = _warn_week(shadow_week, tmp_path, turns_effect=0.3)  # +30 % turns, normal prompts
    env = judged["environments"]["internal"]
    turns = next(g for g in env["gates"] if g["gate"] == "mean_turns")
    assert turns["verdict"] == "fail" and turns["low"] > 1.10, turns
    assert judged["may_advance"] is False


def test_gates_phase_warn_command_labels_the_before_after_comparison(
    shadow_week: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only shadow prompts: no environment ran warn yet, so nothing may advance.
    assert main(["rollout", "gates", str(shadow_week), "--phase", "warn"]) == 1
    assert "phase warn: before/after, NOT randomised" in capsys.readouterr().out


def test_a_harmful_treatment_fails_the_completion_gate(tmp_path: Path) -> None:
    harmful = FleetConfig(
        **{
            **{k: getattr(NEUTRAL, k) for k in ("error_rate", "cancel_rate", "loop_rate")},
            "owners": 150,
            "days": 7,
            "prompts_per_day": 5,
            "percent": 50.0,
            "recover_rate": 0.85,
            "heterogeneity": 0.5,
            "work_turns_max": 1,
            "calls_per_turn_max": 1,
            "completion_effect": -0.03,
            "seed": 12,
        }
    )
    out = tmp_path / "harmful.jsonl"
    simulate(harmful, out, workers=2)
    _, judged = _analyse(out)
    completion = judged["environments"]["internal"]["gates"][0]
    assert completion["gate"] == "completion"
    assert completion["verdict"] == "fail", completion
    assert completion["high"] < -0.01
    assert judged["may_advance"] is False


def test_an_injected_invariant_violation_is_found_with_its_prompt_id(tmp_path: Path) -> None:
    faulty = FleetConfig(
        owners=6,
        days=1,
        prompts_per_day=2,
        phase="shadow",
        seed=5,
        inject_cancelled_counted="sim-5-00003",
    )
    out = tmp_path / "faulty.jsonl"
    simulate(faulty, out)
    checked, _ = _analyse(out)
    internal = checked["environments"]["internal"]
    violation = internal["invariants"]["cancelled_counted"]
    assert violation["violations"] == 1
    assert violation["examples"] == ["sim-5-00003-d0########0"]
    others = {k: v["violations"] for k, v in internal["invariants"].items()}
    assert sum(others.values()) == 1
    assert checked["may_advance"] is False


def _stop_records(
    prompt: str,
    *,
    environment: str = "internal",
    reminder: str = "warned",
    warned_error_type: str = "mcp_tool_error",
    warned_tool_type: str = "mcp",
    complete: bool = True,
    outcome: tuple[str, str | None] = ("end_turn", "repeated_tool_execution_failure"),
    loop_detected: bool = True,
) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """One enforced-stop prompt as (event, resource, attributes) rows of the ``logs`` table."""
    resource = {
        "deployment.environment": environment,
        "enduser.pseudo.id": f"owner-{prompt}",
        "service.version": "1.0.0",
    }

    def guard(decision: str, batch: int, **fields: str) -> dict[str, str]:
        return {
            "route": "acp_foreground",
            "mode": "enforce",
            "decision": decision,
            "prompt_id": prompt,
            "candidate_ordinal": "1",
            "batch_ordinal": str(batch),
            "receipt_complete": "true",
            "execution_error_type": "mcp_tool_error",
            "tool_type": "mcp",
            **fields,
        }

    stop_reason, loop_type = outcome
    prompt_record = {
        "prompt_id": prompt,
        "route": "acp_foreground",
        "mode": "enforce",
        "stop_reason": stop_reason,
        "model_turns": "3",
        "tool_calls": "12",
        "tool_call_cap": "40",
        "wall_time_ms": "9000",
        "drain_supported": "true",
    } | ({"loop_type": loop_type} if loop_type else {})
    rows = [
        ("guard", resource, guard("tracked", 1, receipt_complete=str(complete).lower())),
        (
            "guard",
            resource,
            guard(reminder, 2, execution_error_type=warned_error_type, tool_type=warned_tool_type),
        ),
        ("guard", resource, guard("stopped", 3)),
        ("prompt", resource, prompt_record),
    ]
    rows += [
        (
            "call",
            resource,
            {
                "prompt_id": prompt,
                "batch_ordinal": str(batch),
                "call_ordinal": "0",
                "terminal_status": "error",
                "execution_status": "error",
                "execution_error_type": "mcp_tool_error",
                "tool_type": "mcp",
                "provider_duplicate": "false",
            },
        )
        for batch in (1, 2, 3)
    ]
    if loop_detected:
        rows.append(("loop", resource, {"loop_type": str(loop_type), "prompt_id": prompt}))
    return rows


def test_malformed_enforced_stops_fail_their_gate_with_prompt_ids() -> None:
    """A hand-built ``logs`` table (the documented layout): one good stop, six defects.

    The defects the invariants cannot see (a ``would_warn`` instead of the real
    reminder, a different key, a stop not persisted or not reported) are found
    by the gate alone, each with its prompt id, per environment.
    """
    rows = [
        *_stop_records("a-good########1"),
        *_stop_records("b-no-reminder########1", reminder="would_warn"),
        *_stop_records("c-other-error-type########1", warned_error_type="timeout"),
        *_stop_records("d-other-tool-type########1", warned_tool_type="native"),
        *_stop_records("e-incomplete########1", complete=False),
        *_stop_records("f-not-persisted########1", outcome=("error", None), loop_detected=False),
        *_stop_records("g-unreported########1", environment="public", loop_detected=False),
        *_stop_records("h-good########1", environment="public"),
    ]
    con = duckdb.connect()
    con.execute(sql.LOGS_TABLE)
    for second, (kind, resource, attributes) in enumerate(rows):
        con.execute(
            f"{INSERT}{LISTS}, {LISTS})",
            [
                second,
                EVENTS[kind],
                SCOPE,
                list(resource),
                list(resource.values()),
                list(attributes),
                list(attributes.values()),
            ],
        )
    engine = DuckDBEngine(con)
    checked_all, judged = _judge(engine)
    found = {
        env: next(g for g in e["gates"] if g["gate"] == "enforced_stops_well_formed")
        for env, e in judged["environments"].items()
    }
    assert found["internal"]["verdict"] == "fail"
    assert found["internal"]["estimate"] == 5 and found["internal"]["stops_checked"] == 6
    assert found["internal"]["examples"] == [
        "b-no-reminder########1",
        "c-other-error-type########1",
        "d-other-tool-type########1",
        "e-incomplete########1",
        "f-not-persisted########1",
    ]
    assert found["public"]["examples"] == ["g-unreported########1"]
    assert found["public"]["verdict"] == "fail" and judged["may_advance"] is False
    # The invariants see only the incomplete receipt: the other defects are the gate's.
    checked = checked_all["environments"]
    violations = {
        (env, name): v["examples"]
        for env, found_in in checked.items()
        for name, v in found_in["invariants"].items()
        if v["violations"]
    }
    assert violations == {("internal", "incomplete_batch_decision"): ["e-incomplete########1"]}


# -- refusals and bad input ---------------------------------------------------------


def _small_fleet(tmp_path: Path) -> Path:
    out = tmp_path / "small.jsonl"
    simulate(FleetConfig(owners=4, days=2, prompts_per_day=2, phase="shadow", seed=2), out)
    return out


def test_missing_environment_or_owner_refuses_to_conclude(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _small_fleet(tmp_path)
    stripped = tmp_path / "stripped.jsonl"
    with stripped.open("w", encoding="utf-8") as sink:
        for line in source.read_text(encoding="utf-8").splitlines():
            data = json.loads(line)
            for rl in data.get("resourceLogs", []):
                rl["resource"]["attributes"] = [
                    a for a in rl["resource"]["attributes"] if a["key"] != "enduser.pseudo.id"
                ]
            sink.write(json.dumps(data) + "\n")
    # Bad input, not a verdict: exit 2 (exit 1 is "may not advance"), for check and gates.
    for command in ("check", "gates"):
        assert main(["rollout", command, str(stripped), "--json"]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and "lack enduser.pseudo.id" in captured.err


def test_a_malformed_line_is_bad_input_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _small_fleet(tmp_path)
    broken = tmp_path / "broken.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines()
    broken.write_text("\n".join([lines[0], '{"resourceLogs": [', *lines[1:]]) + "\n")
    report = tmp_path / "report"
    assert main(["rollout", "gates", str(broken), "--report", str(report)]) == 2
    err = capsys.readouterr().err
    assert f"{broken}:2: not valid JSON" in err
    assert not report.exists()
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n', encoding="utf-8")
    assert main(["rollout", "check", str(other)]) == 2
    assert f"{other}:1: not an OTLP JSON request" in capsys.readouterr().err
    assert main(["rollout", "check", str(tmp_path / "missing.jsonl")]) == 2


def test_parquet_export_reads_back_to_the_same_check(tmp_path: Path) -> None:
    source = _small_fleet(tmp_path)
    parquet = tmp_path / "logs.parquet"
    load.export_parquet(load.connect([source]), parquet)
    from_json, _ = _analyse(source)
    assert _analyse(parquet)[0] == from_json
    assert from_json["environments"]["internal"]["supported_prompts"] > 0


def test_the_treatment_cap_allows_hashing_chance_but_not_a_larger_assignment() -> None:
    assert not design.over_cap(26, 400)  # 6.5 %: within chance for a 5 % hash threshold
    assert design.over_cap(40, 400)  # 10 %
    assert design.over_cap(179, 350)
    assert not design.over_cap(5, 100)


def test_without_the_extra_the_command_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    for name in [
        n
        for n in sys.modules
        if n == "tool_failure_guard.rollout" or n.startswith("tool_failure_guard.rollout.")
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "duckdb", None)  # as if not installed
    assert main(["rollout", "check", "telemetry.jsonl"]) == 2
    err = capsys.readouterr().err
    from tool_failure_guard._extras import install_hint

    assert install_hint("rollout") in err
    assert "duckdb" in err


def test_simulate_command_writes_the_fleet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "fleet.jsonl"
    args = ["rollout", "simulate", "--out", str(out), "--owners", "3", "--days", "1"]
    assert main([*args, "--phase", "warn", "--prompts-per-day", "2"]) == 0
    assert "simulated 3 owners" in capsys.readouterr().out
    assert out.stat().st_size > 0 and [p.name for p in tmp_path.iterdir()] == ["fleet.jsonl"]
    assert main([*args, "--prompts-per-day", "0"]) == 2
    assert main([*args, "--start-day", "-1"]) == 2
    assert main([*args, "--phase", "warn", "--start-day", "7", "--turns-effect", "0.3"]) == 0
    assert "simulated 3 owners" in capsys.readouterr().out
