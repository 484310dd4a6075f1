"""``rollout check``/``gates`` on Qwen Code fleets: the real original's own telemetry.

The end-to-end test runs the released original (Qwen Code 0.24.4, ``tests/qwen_capture.py``)
in shadow, warn and enforce for two owners each with its local telemetry outfile, and
for one owner each over OTLP/HTTP to a Collector-like receiver, then runs ``rollout
check`` and ``gates`` on both shapes through the CLI.  The fast tests read the
committed fixtures captured from such a run (``tests/fixtures/qwen_code/README.md``)
on DuckDB and on ClickHouse (chdb) and require the same results.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clickhouse_http import serve
from qwen_capture import MAX_TURNS, capture
from qwen_original import require_qwen

from tool_failure_guard.commands.cli import main
from tool_failure_guard.rollout import load, otel_logs, qwen_code, qwen_fleet, qwen_gates
from tool_failure_guard.rollout.engine import ChdbExecutor, ClickHouseEngine, Engine, InputError
from tool_failure_guard.rollout.simulate import FleetConfig, simulate

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "qwen_code"
OUTFILES = sorted(FIXTURES.glob("local-*.json"))
COLLECTOR = FIXTURES / "collector.jsonl"
PREFIX = "not computable from Qwen Code telemetry: "
NOT_COMPUTABLE = {
    "cancelled_counted",
    "ineligible_counted",
    "incomplete_batch_decision",
    "protections_changed",
}
COMPUTABLE = {
    "enforced_after_unreliable_drain",
    "forbidden_telemetry_field",
    "stop_without_prior_warn",
}
#: Per loop prompt of the script: batches of four failing reads before the model gives up.
BATCHES = MAX_TURNS
#: Model requests of the loop prompt: enforce stops after the third batch (the greeting: 1).
TURNS = {"enforce": 3, "warn": BATCHES + 1, "shadow": BATCHES + 1}


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    status = main(["rollout", *args, "--json"])
    captured = capsys.readouterr()
    return status, (json.loads(captured.out) if captured.out else None), captured.err


def gate(result: dict[str, Any], name: str, env: str = "internal") -> dict[str, Any]:
    return next(g for g in result["environments"][env]["gates"] if g["gate"] == name)


def expect_check(result: dict[str, Any], owners: int, no_drain: bool = False) -> None:
    """What the scripted episodes must show: volumes, invariants, the counter.

    ``no_drain``: plus one enforce episode on a host without the drain contract -- its
    prompts apart (unsupported), one ``unreliable_input`` reset, no stop.
    """
    env = result["environments"]["internal"]
    assert result["agent"] == "qwen-code" and result["may_advance"] is False
    assert env["modes"] == ["enforce", "shadow", "warn"]
    assert env["supported_prompts"] == 3 * owners * 2  # greeting + loop prompt per owner
    assert env["unsupported_host_prompts"] == (2 if no_drain else 0)
    assert env["unknown_boundary_prompts"] == 0
    assert env["would_warn"] == 3 * owners  # would_warn (shadow), warned (warn, enforce)
    assert env["would_stop"] == 2 * owners and env["stopped"] == owners
    # shadow and warn would have stopped at the third batch: the later batches' calls.
    assert env["estimated_calls_saved"] == 2 * owners * (BATCHES - 3) * 4
    for name in COMPUTABLE:
        assert env["invariants"][name]["violations"] == 0, name
    for name in NOT_COMPUTABLE:
        entry = env["invariants"][name]
        assert entry["violations"] is None and entry["note"].startswith(PREFIX), name
    assert any(r.startswith(PREFIX + "4 of 7 invariants") for r in env["reasons"])
    counter = env["guard_counter"]
    assert counter["consistent"] and counter["counter"] == {
        "tracked": 3 * owners,
        "would_warn": owners,
        "warned": 2 * owners,
        "would_stop": 2 * owners,
        "stopped": owners,
        # unreliable_input, once: the original records a reset only when it changes the
        # state (its first batch disables enforcement; later batches reset nothing).
        **({"reset": 1} if no_drain else {}),
    }
    if no_drain:
        apart = env["cohorts"]["unsupported"]
        assert apart["prompts"] == 2 and apart["stopped"] == 0 and apart["would_warn"] == 0


def expect_gates(result: dict[str, Any], owners: int) -> None:
    env = result["environments"]["internal"]
    assert result["may_advance"] is False
    assert env["treatment_owners"] == owners and env["control_owners"] == owners
    for name in ("completion", "disconnect_or_retry_10min", "p95_latency"):
        found = gate(result, name)
        assert found["verdict"] == "not_computable" and found["note"].startswith(PREFIX)
        assert found["estimate"] is None
    turns = gate(result, "mean_turns")
    assert turns["estimate"] == pytest.approx((1 + TURNS["enforce"]) / (1 + TURNS["warn"]))
    assert gate(result, "stopped_loop_rate")["estimate"] == pytest.approx(1.0)
    # calls per stop (3 batches) against calls up to warn's would_stop (3 batches).
    assert gate(result, "saved_calls")["estimate"] == pytest.approx(1.0)
    stops = gate(result, "enforced_stops_well_formed")
    assert stops["estimate"] == 0 and stops["verdict"] == "not_computable"
    assert gate(result, "invariants_zero")["verdict"] == "not_computable"


# -- the real original, both shapes, through the CLI ----------------------------------


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[Path]]]:
    require_qwen()
    root = tmp_path_factory.mktemp("qwen-capture")
    with capture(root, local=2, otlp=1, no_drain=True) as files:
        yield files


def test_check_and_gates_read_the_originals_local_outfile(
    captured: dict[str, list[Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    files = [str(p) for p in captured["local"]]
    assert len(files) == 7 and all(qwen_code.is_outfile(Path(p)) for p in files)
    status, result, _ = cli(capsys, "check", *files)
    assert status == 1
    expect_check(result, owners=2, no_drain=True)
    status, result, _ = cli(capsys, "gates", *files)
    assert status == 1
    expect_gates(result, owners=2)  # the host without the drain is in neither arm
    status, result, _ = cli(capsys, "gates", *files, "--phase", "warn")
    assert status == 1 and gate(result, "cancel_rate")["verdict"] == "not_computable"
    assert gate(result, "mean_turns")["estimate"] == pytest.approx(1.0)
    # The text table names what is missing, and exits 1 (a verdict), not 2.
    assert main(["rollout", "check", *files]) == 1
    text = capsys.readouterr().out
    assert "agent qwen-code" in text and PREFIX in text and "check: may NOT advance" in text


def test_check_and_gates_read_the_originals_otlp_export(
    captured: dict[str, list[Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    (collector,) = captured["otlp"]
    lines = [json.loads(x) for x in collector.read_text(encoding="utf-8").splitlines()]
    assert any("resourceLogs" in x for x in lines) and any("resourceMetrics" in x for x in lines)
    status, result, _ = cli(capsys, "check", str(collector))
    assert status == 1
    expect_check(result, owners=1)
    status, result, _ = cli(capsys, "gates", str(collector))
    assert status == 1
    env = result["environments"]["internal"]
    assert env["treatment_owners"] == 1 and env["control_owners"] == 1
    assert gate(result, "completion")["verdict"] == "not_computable"


# -- the committed fixtures, on both engines ---------------------------------------------


def _outfiles_as_otlp(tmp: Path) -> list[Path]:
    staged = []
    for path in OUTFILES:
        out = tmp / f"{path.stem}.jsonl"
        with out.open("w", encoding="utf-8") as sink:
            assert qwen_code.outfile_to_otlp(path, sink) > 0
        staged.append(out)
    return staged


@pytest.fixture(scope="module")
def chdb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChdbExecutor]:
    executor = ChdbExecutor()
    root = tmp_path_factory.mktemp("qwen-chdb")
    otel_logs.fill(executor.command, _outfiles_as_otlp(root), root, table="qwen_local")
    otel_logs.fill(executor.command, [COLLECTOR], root, table="qwen_otlp")
    otel_logs.fill(executor.command, [COLLECTOR], root, table="qwen_old", event_name=False)
    yield executor
    executor.close()


def _analyse(engine: Engine, phase: str | None) -> dict[str, Any]:
    run = qwen_fleet.Query(engine, "")
    checked = qwen_fleet.check(run, "-", qwen_fleet.preflight(run, "src"), None)
    return checked if phase is None else qwen_gates.gates(run, checked, phase=phase)


def _duck(paths: list[Path], phase: str | None) -> dict[str, Any]:
    engine = load.duckdb_engine(paths)
    try:
        return _analyse(engine, phase)
    finally:
        engine.close()


@pytest.mark.parametrize("phase", [None, "enforce", "warn"])
@pytest.mark.parametrize("shape", ["local", "otlp", "old_exporter"])
def test_the_fixtures_give_the_same_results_on_duckdb_and_clickhouse(
    chdb: ChdbExecutor, phase: str | None, shape: str
) -> None:
    paths = OUTFILES if shape == "local" else [COLLECTOR]
    table = {"local": "qwen_local", "otlp": "qwen_otlp", "old_exporter": "qwen_old"}[shape]
    duck = _duck(paths, phase)
    assert _analyse(ClickHouseEngine(chdb, table=table), phase) == duck
    if phase is None:
        env = duck["environments"]["internal"]
        assert env["supported_prompts"] == 6 and env["stopped"] == 1
        assert env["would_stop"] == 2 and env["estimated_calls_saved"] == 2 * (BATCHES - 3) * 4


def test_both_fixture_shapes_read_the_same_episodes(capsys: pytest.CaptureFixture[str]) -> None:
    status, local, _ = cli(capsys, "check", *map(str, OUTFILES))
    assert status == 1
    expect_check(local, owners=1)
    status, otlp, _ = cli(capsys, "check", str(COLLECTOR))
    assert status == 1
    expect_check(otlp, owners=1)


def test_on_clickhouse_through_the_cli(
    chdb: ChdbExecutor, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(chdb.session) as url:
        status, result, _ = cli(capsys, "check", "--clickhouse", url, "--table", "qwen_otlp")
        assert status == 1 and result["engine"] == "clickhouse"
        assert result["environments"]["internal"]["guard_counter"] is None  # logs only
        status, result, _ = cli(capsys, "gates", "--clickhouse", url, "--table", "qwen_otlp")
        assert status == 1 and gate(result, "p95_latency")["verdict"] == "not_computable"


# -- bad and mixed input ------------------------------------------------------------------


def _without_resource(path: Path, out: Path, key: str) -> None:
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        data = json.loads(text)
        for rl in data.get("resourceLogs", []):
            rl["resource"]["attributes"] = [
                a for a in rl["resource"]["attributes"] if a["key"] != key
            ]
        lines.append(json.dumps(data))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("key", ["deployment.environment", "enduser.pseudo.id"])
def test_missing_resource_dimensions_are_a_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    stripped = tmp_path / "stripped.jsonl"
    _without_resource(COLLECTOR, stripped, key)
    for command in ("check", "gates"):
        status, result, err = cli(capsys, command, str(stripped))
        assert status == 2 and result is None
        assert "refusing to conclude" in err and "OTEL_RESOURCE_ATTRIBUTES" in err


def test_a_mistyped_count_and_a_broken_outfile_are_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = COLLECTOR.read_text(encoding="utf-8")
    assert '"candidate_ordinal","value":{"intValue":"1"}' in text
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        text.replace(
            '"candidate_ordinal","value":{"intValue":"1"}',
            '"candidate_ordinal","value":{"stringValue":"one"}',
        ),
        encoding="utf-8",
    )
    status, _, err = cli(capsys, "check", str(bad))
    assert status == 2 and "candidate_ordinal that is not a decimal count" in err
    cut = tmp_path / "cut.json"
    whole = OUTFILES[0].read_text(encoding="utf-8")
    cut.write_text(whole[: len(whole) // 2], encoding="utf-8")
    status, _, err = cli(capsys, "check", str(cut))
    assert status == 2 and "cut.json: object" in err and "not valid JSON" in err
    odd = tmp_path / "odd.json"
    odd.write_text('{"resource": {}, "what": 1}\n', encoding="utf-8")
    status, _, err = cli(capsys, "gates", str(odd))
    assert status == 2 and "odd.json: object 1 is not an OpenTelemetry log record" in err
    with pytest.raises(InputError, match="larger than 10 characters"):
        list(qwen_code.objects(odd, _Chunks('{"resource": {"a": "' + "x" * 20 + '"}}', 4), 10))


class _Chunks:
    """A text stream that hands out ``size`` characters per read."""

    def __init__(self, text: str, size: int) -> None:
        self.text, self.size = text, size

    def read(self, _n: int = -1) -> str:
        piece, self.text = self.text[: self.size], self.text[self.size :]
        return piece


def test_mixed_input_is_refused_unless_one_agent_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = tmp_path / "ours.jsonl"
    simulate(FleetConfig(owners=3, days=1, prompts_per_day=2, phase="shadow", seed=2), ours)
    both = [str(ours), str(COLLECTOR)]
    status, result, err = cli(capsys, "check", *both)
    assert status == 2 and result is None
    assert "mixed input" in err and "--agent" in err
    status, result, err = cli(capsys, "check", *both, "--agent", "qwen-code")
    assert status == 1 and result["agent"] == "qwen-code"
    assert "records of the other agent left out" in err
    expect_check(result, owners=1)
    status, result, err = cli(capsys, "check", *both, "--agent", "tool-failure-guard")
    assert status in (0, 1) and "agent" not in result
    assert result["environments"]["internal"]["owners"] == 3
    status, _, err = cli(capsys, "check", str(ours), "--agent", "qwen-code")
    assert status == 2 and "no Qwen Code records" in err


def test_guard_records_missing_against_the_counter_hold_the_environment_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Drop one guard log record: the counter still counts it, and check says so."""
    lines, dropped = [], False
    for text in COLLECTOR.read_text(encoding="utf-8").splitlines():
        data = json.loads(text)
        for rl in data.get("resourceLogs", []):
            for sl in rl["scopeLogs"]:
                kept = []
                for record in sl["logRecords"]:
                    names = [a["value"].get("stringValue") for a in record["attributes"]]
                    if not dropped and "warned" in names:
                        dropped = True
                        continue
                    kept.append(record)
                sl["logRecords"] = kept
        lines.append(json.dumps(data))
    assert dropped
    lossy = tmp_path / "lossy.jsonl"
    lossy.write_text("\n".join(lines) + "\n", encoding="utf-8")
    status, result, _ = cli(capsys, "check", str(lossy))
    assert status == 1
    env = result["environments"]["internal"]
    counter = env["guard_counter"]
    assert not counter["consistent"]
    assert counter["counter"]["warned"] == 2 and counter["log_records"]["warned"] == 1
    assert any("counter and the guard log records disagree" in r for r in env["reasons"])
    assert env["invariants"]["stop_without_prior_warn"]["violations"] == 1  # found, too
