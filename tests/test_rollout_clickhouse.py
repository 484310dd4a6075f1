"""The rollout analysis on ClickHouse equals DuckDB's on the same records.

The same simulated fleets (real guarded sessions) are read by DuckDB from the
OTLP JSON files and loaded into a chdb (ClickHouse in-process) table with the
Collector ClickHouse exporter's ``otel_logs`` schema; ``check``, ``gates`` and
``gates --phase warn`` must give identical results (verdicts, estimates,
intervals, example prompt ids).  The ``clickhouse-connect`` path runs against a
127.0.0.1 HTTP server speaking ClickHouse's HTTP interface, backed by the
same chdb session (``tests/clickhouse_http.py``).
"""

from __future__ import annotations

import datetime
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rollout_records as records
from clickhouse_http import serve

from tool_failure_guard.commands.cli import main
from tool_failure_guard.rollout import agents, check, gates, load, otel_logs
from tool_failure_guard.rollout.engine import (
    ChdbExecutor,
    ClickHouseEngine,
    Engine,
    Filters,
    InputError,
)
from tool_failure_guard.rollout.simulate import FleetConfig, simulate
from tool_failure_guard.telemetry.names import (
    EARLIER_EVENT_NAMES,
    GUARD_LOG_EVENT,
    LOOP_DETECTED_EVENT,
)

#: Small fleets (CI budget): both arms, all three boundary kinds, loops that stop.
ENFORCE = FleetConfig(
    owners=24,
    days=7,
    prompts_per_day=2,
    percent=50.0,
    loop_rate=0.15,
    unsupported_share=0.1,
    prompt_only_share=0.25,
    seed=31,
)
SHADOW = FleetConfig(owners=14, days=7, prompts_per_day=2, phase="shadow", loop_rate=0.1, seed=32)


@pytest.fixture(scope="module")
def chdb() -> Iterator[ChdbExecutor]:
    executor = ChdbExecutor()
    yield executor
    executor.close()


@pytest.fixture(scope="module")
def fleets(tmp_path_factory: pytest.TempPathFactory, chdb: ChdbExecutor) -> dict[str, list[Path]]:
    """name -> files; each also loaded into the chdb table of that name."""
    root = tmp_path_factory.mktemp("fleets")
    enforce, shadow, warn = root / "enforce.jsonl", root / "shadow.jsonl", root / "warn.jsonl"
    simulate(ENFORCE, enforce, workers=1)
    simulate(SHADOW, shadow, workers=1)
    simulate(FleetConfig(**{**_fields(SHADOW), "phase": "warn", "start_day": 7}), warn, workers=1)
    named = {"enforce": [enforce], "phase2": [shadow, warn]}
    for name, paths in named.items():
        otel_logs.fill(chdb.command, paths, root, table=name)
    # An older exporter's table: no EventName column, the name in LogAttributes.
    otel_logs.fill(chdb.command, [enforce], root, table="old_enforce", event_name=False)
    return named


def _fields(config: FleetConfig) -> dict[str, Any]:
    import attrs

    return attrs.asdict(config)


def _run(engine: Engine, source: str, phase: str | None) -> dict[str, Any]:
    resource = check.preflight(engine, source)
    checked = check.check(engine, resource)
    result = checked if phase is None else gates.gates(engine, checked, phase=phase, seed=3)
    return {k: v for k, v in result.items() if k != "engine"}


def _duckdb(paths: list[Path], phase: str | None, filters: Filters) -> dict[str, Any]:
    duck = load.duckdb_engine(paths, filters)
    try:
        return _run(duck, "files", phase)
    finally:
        duck.close()


@pytest.fixture(scope="module")
def enforce_results(
    chdb: ChdbExecutor, fleets: dict[str, list[Path]]
) -> tuple[dict[str, Any], dict[str, Any], ClickHouseEngine]:
    """The enforce fleet's gates (with check inside) on DuckDB and on ClickHouse, once."""
    clickhouse = ClickHouseEngine(chdb, table="enforce")
    found = _run(clickhouse, "enforce", "enforce")
    return _duckdb(fleets["enforce"], "enforce", Filters()), found, clickhouse


def test_check_and_gates_on_clickhouse_equal_duckdb(
    enforce_results: tuple[dict[str, Any], dict[str, Any], ClickHouseEngine],
) -> None:
    expected, found, _ = enforce_results
    assert found == expected
    env = expected["environments"]["internal"]
    assert "prompt-only" in env["cohorts"]
    stops = next(g for g in env["gates"] if g["gate"] == "enforced_stops_well_formed")
    assert stops["stops_checked"] > 0
    assert all(g["estimate"] is not None for g in env["gates"][2:5])


def test_relations_as_chdb_session_tables_give_the_same_gates_and_are_dropped(
    chdb: ChdbExecutor,
    enforce_results: tuple[dict[str, Any], dict[str, Any], ClickHouseEngine],
) -> None:
    """chdb only: the relations materialised once in the session, read by every query."""
    expected, _, _ = enforce_results
    engine = ClickHouseEngine(chdb, table="enforce", session_tables=True)
    try:
        temporary = {r[0] for r in chdb("SELECT name FROM system.tables WHERE is_temporary")}
        assert {"prompts", "calls", "prompt_facts"} <= temporary and "records" not in temporary
        assert " AS (" not in engine.render("SELECT count(*) FROM prompt_facts")
        assert _run(engine, "enforce", "enforce") == expected
    finally:
        engine.close()
    assert not chdb("SELECT name FROM system.tables WHERE is_temporary")
    # Rendering without session tables is unchanged: every relation a query needs inline.
    inline = ClickHouseEngine(chdb, table="enforce").render("SELECT count(*) FROM prompt_facts")
    assert all(f"{name} AS (" in inline for name in ("records", "prompts", "prompt_facts"))


def test_an_older_exporter_table_without_event_name_gives_the_same_check(
    chdb: ChdbExecutor, fleets: dict[str, list[Path]]
) -> None:
    old = ClickHouseEngine(chdb, table="old_enforce")
    assert not old.has_event_name
    expected = _duckdb(fleets["enforce"], None, Filters())
    assert _run(old, "old_enforce", None) == expected
    env = expected["environments"]["internal"]
    # The three boundary kinds are three cohorts; the drain cohort alone is "supported".
    assert set(env["cohorts"]) == {"drain", "prompt-only", "unsupported"}
    assert env["supported_prompts"] == env["cohorts"]["drain"]["prompts"] > 0
    assert env["prompt_only_prompts"] == env["cohorts"]["prompt-only"]["prompts"] > 0
    assert env["would_stop"] > 0


def test_phase_warn_on_clickhouse_equals_duckdb(
    chdb: ChdbExecutor, fleets: dict[str, list[Path]]
) -> None:
    expected = _duckdb(fleets["phase2"], "warn", Filters())
    assert _run(ClickHouseEngine(chdb, table="phase2"), "phase2", "warn") == expected
    env = expected["environments"]["internal"]
    assert env["treatment_owners"] > 10 and env["control_owners"] > 10
    assert env["before_after"]["periods"]["warn"]["first_day"] == "2026-11-08"


def test_filters_are_pushed_into_the_scan_on_both_engines(
    chdb: ChdbExecutor, fleets: dict[str, list[Path]]
) -> None:
    since = Filters(since=datetime.datetime(2026, 11, 8, tzinfo=datetime.UTC))
    expected = _duckdb(fleets["phase2"], None, since)
    clickhouse = ClickHouseEngine(chdb, table="phase2", filters=since)
    assert _run(clickhouse, "phase2", None) == expected
    env = expected["environments"]["internal"]
    assert env["first_day"] == "2026-11-08" and env["modes"] == ["warn"]
    assert "TimestampTime >= fromUnixTimestamp64Micro" in clickhouse.render(
        "SELECT count(*) FROM records"
    )
    public = Filters(environments=("public",))
    for engine in (ClickHouseEngine(chdb, table="phase2", filters=public),):
        with pytest.raises(InputError, match="no tool_failure_guard records"):
            check.preflight(engine, "phase2")
    with pytest.raises(InputError, match="no tool_failure_guard records"):
        _duckdb(fleets["phase2"], None, public)


def test_only_aggregates_leave_clickhouse(
    enforce_results: tuple[dict[str, Any], dict[str, Any], ClickHouseEngine],
) -> None:
    _, _, engine = enforce_results
    queries, sent = engine.queries, engine.result_bytes
    records = engine.rows("SELECT count(*) FROM records")[0][0]
    owners = engine.rows("SELECT count(DISTINCT owner) FROM prompts")[0][0]
    # Per-owner sums and latency counts: a bound per owner, far below a row per record.
    assert sent < 1500 * owners and sent < 20 * records, (sent, owners, records)
    assert queries == 13  # docs/rollout.md section 2: a fixed number, whatever the size


def test_the_clickhouse_connect_path_gives_the_same_verdicts(
    chdb: ChdbExecutor,
    fleets: dict[str, list[Path]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = [str(p) for p in fleets["enforce"]]
    assert main(["rollout", "gates", *files, "--json", "--seed", "3"]) == 1
    expected = json.loads(capsys.readouterr().out)
    with serve(chdb.session) as url:
        report = tmp_path / "report"
        args = ["rollout", "gates", "--clickhouse", url, "--table", "enforce", "--seed", "3"]
        assert main([*args, "--json", "--report", str(report)]) == 1
        found = json.loads(capsys.readouterr().out)
        assert (report / "index.html").exists()
        assert main(["rollout", "check", "--clickhouse", url, "--table", "enforce"]) == 0
        assert "check: may advance" in capsys.readouterr().out
    assert found.pop("engine") == "clickhouse" and expected.pop("engine") == "duckdb"
    assert found == expected


def test_refusals_are_the_same_on_both_engines(
    chdb: ChdbExecutor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "fleet.jsonl"
    simulate(FleetConfig(owners=3, days=1, prompts_per_day=2, phase="shadow", seed=2), source)
    stripped = tmp_path / "stripped.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines()
    data = json.loads(lines[0])
    for rl in data["resourceLogs"]:
        rl["resource"]["attributes"] = [
            a for a in rl["resource"]["attributes"] if a["key"] != "enduser.pseudo.id"
        ]
    stripped.write_text("\n".join([json.dumps(data), *lines[1:]]) + "\n", encoding="utf-8")
    otel_logs.fill(chdb.command, [stripped], tmp_path, table="stripped")
    chdb.command("CREATE TABLE not_logs (x Int64) ENGINE = Memory")
    with serve(chdb.session) as url:
        cases = [
            ([str(stripped)], "lack enduser.pseudo.id"),
            (["--clickhouse", url, "--table", "stripped"], "lack enduser.pseudo.id"),
            (["--clickhouse", url, "--table", "nope"], "no table nope"),
            (["--clickhouse", url, "--table", "not_logs"], "not the exporter's otel_logs"),
        ]
        for command in ("check", "gates"):
            for args, message in cases:
                report = tmp_path / "report"
                assert main(["rollout", command, *args, "--report", str(report)]) == 2, args
                captured = capsys.readouterr()
                assert message in captured.err and captured.out == ""
                assert not report.exists()
    # Unreachable: a port this test holds bound and never listens on (the server's port,
    # once closed, is free for any process on a busy machine to take).
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{held.getsockname()[1]}"
        assert main(["rollout", "check", "--clickhouse", closed, "--report", str(report)]) == 2
    assert "cannot reach ClickHouse" in capsys.readouterr().err
    assert not report.exists()


def test_hand_built_findings_are_the_same_on_both_engines(
    chdb: ChdbExecutor, tmp_path: Path
) -> None:
    """Violations, calls saved, cohorts and a mistyped count: found alike on both engines."""
    rows: list[Any] = [
        *records.loop("a-shadow########0", "shadow", "o1"),
        *records.loop("b-enforce-downgraded########0", "enforce", "o2"),
        *records.loop("c-downgraded########0", "shadow", "o3", downgrade_at=1),
        ("call", "o1", records.call("d-path########0", 1, execution_error_type="src/app/.env")),
        ("prompt", "o1", records.prompt("d-path########0", "shadow", 1)),
        ("prompt", "o2", records.prompt("e-enum########0", "warn", 1, stop_reason="done")),
        (
            "prompt",
            "o4",
            records.prompt("f-po########0", "shadow", 1, input_boundary="prompt-only"),
        ),
        ("prompt", "o5", records.prompt("g-old########0", "shadow", 1, drain_supported="false")),
    ]
    staged = tmp_path / "rows.jsonl"
    staged.write_text("".join(json.dumps(r) + "\n" for r in records.otel_rows(rows)))
    chdb.command(otel_logs.otel_logs_ddl("hand_built"))
    chdb.command(f"INSERT INTO hand_built FROM INFILE '{staged}' FORMAT JSONEachRow")
    duck = records.engine(rows)
    expected = _run(duck, "hand-built", "enforce")
    assert _run(ClickHouseEngine(chdb, table="hand_built"), "hand_built", "enforce") == expected
    checked = check.check(duck, check.preflight(duck, "hand-built"))["environments"]["internal"]
    assert checked["estimated_calls_saved"] == 1
    assert checked["invariants"]["forbidden_telemetry_field"]["examples"] == [
        "d-path########0",
        "e-enum########0",
    ]
    assert {k: c["prompts"] for k, c in checked["cohorts"].items()} == {
        "drain": 5,
        "prompt-only": 1,
        "unsupported": 1,
    }
    # A count that is not one: bad input on ClickHouse too, naming the field.
    bad = [("prompt", "o1", records.prompt("h-bad########0", "shadow", 1, tool_calls="many"))]
    staged.write_text("".join(json.dumps(r) + "\n" for r in records.otel_rows(bad)))
    chdb.command(otel_logs.otel_logs_ddl("mistyped"))
    chdb.command(f"INSERT INTO mistyped FROM INFILE '{staged}' FORMAT JSONEachRow")
    with pytest.raises(InputError, match="tool_calls that is not a decimal count"):
        check.preflight(ClickHouseEngine(chdb, table="mistyped"), "mistyped")


def test_a_cap_stop_below_the_cap_is_a_violation_under_either_loop_type_name(
    chdb: ChdbExecutor, tmp_path: Path
) -> None:
    """A prompt stopped by the tool-call cap under it is ``protections_changed``; at it, not.

    The cap's loop type is ``turn_tool_call_cap`` (the original's name) or the older
    ``tool_call_cap``; both engines read either name alike.
    """
    rows: list[Any] = [
        (
            "prompt",
            "o1",
            records.prompt(
                f"{name}-{where}########0",
                "shadow",
                calls,
                stop_reason="max_turn_requests",
                loop_type=name,
                tool_call_cap="40",
            ),
        )
        for name in ("turn_tool_call_cap", "tool_call_cap")
        for where, calls in (("below", 12), ("at", 40))
    ]
    staged = tmp_path / "cap.jsonl"
    staged.write_text("".join(json.dumps(r) + "\n" for r in records.otel_rows(rows)))
    chdb.command(otel_logs.otel_logs_ddl("cap_stops"))
    chdb.command(f"INSERT INTO cap_stops FROM INFILE '{staged}' FORMAT JSONEachRow")
    for engine in (records.engine(rows), ClickHouseEngine(chdb, table="cap_stops")):
        found = check.check(engine, check.preflight(engine, "cap"))["environments"]["internal"]
        violation = found["invariants"]["protections_changed"]
        assert violation["violations"] == 2, engine.name
        assert violation["examples"] == [
            "tool_call_cap-below########0",
            "turn_tool_call_cap-below########0",
        ], engine.name


def test_an_earlier_loop_type_value_is_read_as_the_value_now_on_both_engines(
    chdb: ChdbExecutor, tmp_path: Path
) -> None:
    """Issue 33 §9: records from builds before the cap's loop type took the original's name
    (``tool_call_cap``, ``EARLIER_VALUES``) are no ``forbidden_telemetry_field``; a week that
    spans the upgrade gives the same findings as one written wholly after it."""

    def week(loop_type: str) -> list[Any]:
        rows: list[Any] = []
        for n in range(3):
            prompt_id = f"cap-{n}########0"
            rows.append(
                (
                    "prompt",
                    "o1",
                    records.prompt(
                        prompt_id,
                        "shadow",
                        40,
                        stop_reason="max_turn_requests",
                        loop_type=loop_type if n else "turn_tool_call_cap",
                        tool_call_cap="40",
                    ),
                )
            )
            rows.append(("loop", "o1", {"loop_type": loop_type, "prompt_id": prompt_id}))
        return rows

    results = []
    for loop_type in ("tool_call_cap", "turn_tool_call_cap"):
        rows = week(loop_type)
        table = f"values_{loop_type}"
        staged = tmp_path / f"{table}.jsonl"
        staged.write_text("".join(json.dumps(r) + "\n" for r in records.otel_rows(rows)))
        chdb.command(otel_logs.otel_logs_ddl(table))
        chdb.command(f"INSERT INTO {table} FROM INFILE '{staged}' FORMAT JSONEachRow")
        for engine in (records.engine(rows), ClickHouseEngine(chdb, table=table)):
            found = check.check(engine, check.preflight(engine, "v"))["environments"]["internal"]
            invariants = found["invariants"]
            assert invariants["forbidden_telemetry_field"]["violations"] == 0, engine.name
            assert invariants["protections_changed"]["violations"] == 0, engine.name
            results.append({k: v["violations"] for k, v in invariants.items()})
    assert all(result == results[-1] for result in results)


def _as_an_earlier_build_wrote(path: Path, out: Path) -> dict[str, int]:
    """``path``'s records as an earlier build wrote them: the guard's and the loop's under
    their earlier names (``EARLIER_EVENT_NAMES``), no ``event.name`` attribute, and -- as
    an export that dropped it -- no instrumentation scope.  Returns the renamed counts."""
    earlier = {new: old for old, new in EARLIER_EVENT_NAMES.items()}
    renamed: dict[str, int] = {}
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        data = json.loads(line)
        for resource_logs in data.get("resourceLogs", ()):
            for scope_logs in resource_logs.get("scopeLogs", ()):
                scope_logs.pop("scope", None)
                for record in scope_logs.get("logRecords", ()):
                    name = record["eventName"]
                    if name in earlier:
                        renamed[name] = renamed.get(name, 0) + 1
                        record["eventName"] = earlier[name]
                    record["attributes"] = [
                        a for a in record["attributes"] if a["key"] != "event.name"
                    ]
        lines.append(json.dumps(data))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return renamed


def test_records_under_their_earlier_names_give_the_same_gates_on_both_engines(
    chdb: ChdbExecutor,
    fleets: dict[str, list[Path]],
    enforce_results: tuple[dict[str, Any], dict[str, Any], ClickHouseEngine],
    tmp_path: Path,
) -> None:
    """An earlier build's export (its own names, no scope) loses nothing: same gates.

    On DuckDB from the JSON lines and from a Parquet file of the earlier layout (no
    ``ScopeName`` column), and on ClickHouse from the exporter's table.
    """
    expected, _, _ = enforce_results
    earlier = tmp_path / "earlier.jsonl"
    renamed = _as_an_earlier_build_wrote(fleets["enforce"][0], earlier)
    assert renamed.get(GUARD_LOG_EVENT, 0) > 0 and renamed.get(LOOP_DETECTED_EVENT, 0) > 0
    assert GUARD_LOG_EVENT not in earlier.read_text(encoding="utf-8")
    assert _duckdb([earlier], "enforce", Filters()) == expected
    otel_logs.fill(chdb.command, [earlier], tmp_path, table="earlier_enforce")
    clickhouse = ClickHouseEngine(chdb, table="earlier_enforce")
    assert _run(clickhouse, "earlier_enforce", "enforce") == expected
    # A Parquet export of the earlier layout: the logs columns without ScopeName.
    parquet = tmp_path / "earlier.parquet"
    con = load.connect([earlier])
    maps = ", ".join(
        f"map({c}.keys, {c}.vals) AS {c}" for c in ("ResourceAttributes", "LogAttributes")
    )
    con.execute(
        f"COPY (SELECT Timestamp, EventName, {maps} FROM logs) TO '{parquet}' (FORMAT parquet)"
    )
    con.close()
    assert _duckdb([parquet], "enforce", Filters()) == expected


def test_a_table_without_scope_name_reads_our_earlier_names_not_our_new_ones_as_ours(
    chdb: ChdbExecutor, tmp_path: Path
) -> None:
    """ClickHouse without ``ScopeName`` (an exporter before it): no row has our scope.

    An earlier build's names are ours by their namespace, so its records are read as on
    DuckDB; the guard records under the original's names can then only be Qwen Code's.
    """
    rows: list[Any] = records.loop("a-earlier########0", "shadow", "o1")
    ddl = otel_logs.otel_logs_ddl("{table}").replace("    ScopeName String,\n", "")
    assert "ScopeName" not in ddl
    for table, events in (("no_scope", records.EARLIER_EVENTS), ("no_scope_new", records.EVENTS)):
        staged = tmp_path / f"{table}.jsonl"
        shaped = records.otel_rows(rows, events=events, scope="")
        staged.write_text(
            "".join(
                json.dumps({k: v for k, v in r.items() if k != "ScopeName"}) + "\n" for r in shaped
            )
        )
        chdb.command(ddl.format(table=table))
        chdb.command(f"INSERT INTO {table} FROM INFILE '{staged}' FORMAT JSONEachRow")
    engine = ClickHouseEngine(chdb, table="no_scope")
    assert not engine.has_scope_name
    expected = _run(records.engine(rows), "hand-built", None)
    assert expected["environments"]["internal"]["would_stop"] == 1
    assert _run(engine, "no_scope", None) == expected
    assert (
        _run(records.engine(rows, events=records.EARLIER_EVENTS, scope=""), "x", None) == expected
    )
    guard_rows = sum(1 for kind, _, _ in rows if kind == "guard")
    found = agents.counts(ClickHouseEngine(chdb, table="no_scope_new"), "")
    assert found == {agents.OURS: len(rows) - guard_rows, agents.QWEN_CODE: guard_rows}
