"""The analysis's failure model (docs/rollout.md): bad input is exit 2, never a crash or a verdict.

Malformed ``--clickhouse`` URLs, time bounds only one engine could compare,
control characters in telemetry strings, DuckDB's spill directory and the
exporter's JSON schema; each on the engines it concerns (DuckDB, chdb
in-process, and the ``clickhouse-connect`` path against the 127.0.0.1 server of
``tests/clickhouse_http.py``).
"""

from __future__ import annotations

import datetime
import gc
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clickhouse_http import serve

from tool_failure_guard.commands.cli import main
from tool_failure_guard.rollout import load, otel_logs, spill
from tool_failure_guard.rollout.engine import (
    ChdbExecutor,
    ClickHouseEngine,
    EngineError,
    Filters,
    InputError,
)
from tool_failure_guard.rollout.simulate import FleetConfig, simulate

#: A fleet member's environment name carrying terminal escapes and a forged line.
HOSTILE = "prod\x1b]0;owned\x07\x1b[2J\ncheck: may advance\u202e"


@pytest.fixture(scope="module")
def chdb() -> Iterator[ChdbExecutor]:
    executor = ChdbExecutor()
    yield executor
    executor.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, chdb: ChdbExecutor) -> Path:
    """A small shadow fleet, in a file and in the chdb table ``fleet``."""
    root = tmp_path_factory.mktemp("fleet")
    path = root / "fleet.jsonl"
    simulate(FleetConfig(owners=6, days=2, prompts_per_day=2, phase="shadow", seed=5), path)
    otel_logs.fill(chdb.command, [path], root, table="fleet")
    return path


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    status = main([*argv, "--json"])
    captured = capsys.readouterr()
    assert status in (0, 1), captured.err
    result = json.loads(captured.out)
    result.pop("engine")
    return status, result


# -- 6. a malformed --clickhouse URL -----------------------------------------------------


@pytest.mark.parametrize(
    ("url", "fault"),
    [
        ("http://alice:SECRET@127.0.0.1:99999/db", "its port is not a number"),
        ("http://alice:SECRET@[::1/db", "IPv6"),
        ("http://alice:SE/CRET@127.0.0.1:8123/db", "its port is not a number"),
        ("not a url", "expected http[s]://"),
    ],
)
def test_a_malformed_clickhouse_url_is_bad_input(
    url: str, fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report"
    assert main(["rollout", "gates", "--clickhouse", url, "--report", str(report)]) == 2
    captured = capsys.readouterr()
    assert "bad input" in captured.err and fault in captured.err, captured.err
    assert "Traceback" not in captured.err and "SECRET" not in captured.err
    assert captured.out == "" and not report.exists()


def test_an_error_of_the_analysis_itself_is_not_a_verdict(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tool_failure_guard.rollout import check

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom near http://alice:SECRET@host/ \x1b[2J")

    monkeypatch.setattr(check, "check", broken)
    report = tmp_path / "report"
    assert main(["rollout", "gates", str(fleet), "--report", str(report)]) == 3
    captured = capsys.readouterr()
    assert "internal error, no verdict: RuntimeError: boom near http://***@host/" in captured.err
    assert "SECRET" not in captured.err and "\x1b" not in captured.err
    assert captured.out == "" and not report.exists()


# -- 7. time bounds: accepted alike by both engines, or refused alike ----------------------


def test_the_widest_accepted_bounds_give_the_same_result_on_every_engine(
    chdb: ChdbExecutor, fleet: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bounds = ["--since", "1900-01-01", "--until", "2262-04-11"]
    expected = _json(capsys, ["rollout", "check", str(fleet)])
    assert _json(capsys, ["rollout", "check", str(fleet), *bounds]) == expected
    with serve(chdb.session) as url:
        over_http = _json(capsys, ["rollout", "check", "--clickhouse", url, "--table", "fleet"])
        bounded = [*bounds, "--clickhouse", url, "--table", "fleet"]
        assert _json(capsys, ["rollout", "check", *bounded]) == over_http == expected
    wide = Filters(
        since=datetime.datetime(1900, 1, 1, tzinfo=datetime.UTC),
        until=datetime.datetime(2262, 4, 11, tzinfo=datetime.UTC),
    )
    rows = ClickHouseEngine(chdb, table="fleet", filters=wide).rows("SELECT count(*) FROM records")
    duck = load.duckdb_engine([fleet], wide)
    try:
        assert rows == duck.rows("SELECT count(*) FROM records") and rows[0][0] > 0
    finally:
        duck.close()


@pytest.mark.parametrize(
    "bound",
    [
        ["--since", "0001-01-01"],
        ["--until", "9999-12-31"],
        ["--since", "1899-12-31T23:59:59"],
        ["--until", "2262-04-11T00:00:00-01:00"],
    ],
)
def test_bounds_one_engine_cannot_compare_are_refused_alike(
    bound: list[str], chdb: ChdbExecutor, fleet: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = []
    with serve(chdb.session) as url:
        for source in ([str(fleet)], ["--clickhouse", url, "--table", "fleet"]):
            with pytest.raises(SystemExit) as exited:
                main(["rollout", "check", *source, *bound])
            assert exited.value.code == 2
            captured = capsys.readouterr()
            assert captured.out == ""
            messages.append(captured.err.splitlines()[-1])
    assert messages[0] == messages[1]
    assert "outside the time stamps telemetry can hold (1900-01-01 .. 2262-04-11" in messages[0]


def test_odd_environment_filters_select_the_same_records_on_every_engine(
    chdb: ChdbExecutor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A backslash, a quote that would end the literal, a newline: the same on both."""
    odd = ["a\\", "x' OR 1=1 --", "n\nl"]
    paths = []
    for seed, environment in enumerate(odd):
        path = tmp_path / f"fleet{seed}.jsonl"
        config = FleetConfig(owners=3, days=2, prompts_per_day=2, phase="shadow", seed=seed)
        simulate(FleetConfig(**{**_fields(config), "environment": environment}), path)
        paths.append(path)
    otel_logs.fill(chdb.command, paths, tmp_path, table="odd")
    query = "SELECT environment, count(*) FROM records GROUP BY environment"
    for environment in [*odd, "nope"]:
        only = Filters(environments=(environment,))
        duck = load.duckdb_engine(paths, only)
        try:
            expected = duck.rows(query)
        finally:
            duck.close()
        assert ClickHouseEngine(chdb, table="odd", filters=only).rows(query) == expected
        assert [r[0] for r in expected] == ([] if environment == "nope" else [environment])
    with serve(chdb.session) as url:
        env = ["--environment", odd[1]]
        from_files = _json(capsys, ["rollout", "check", *map(str, paths), *env])
        over_http = _json(capsys, ["rollout", "check", "--clickhouse", url, "--table", "odd", *env])
    assert over_http == from_files and list(from_files[1]["environments"]) == [odd[1]]


def test_filters_refuse_the_same_bounds_in_the_library(chdb: ChdbExecutor, fleet: Path) -> None:
    with pytest.raises(InputError, match="outside the time stamps telemetry can hold"):
        Filters(since=datetime.datetime(1, 1, 1, tzinfo=datetime.UTC))
    with pytest.raises(InputError, match="outside the time stamps telemetry can hold"):
        Filters(until=datetime.datetime(9999, 12, 31))
    naive = Filters(since=datetime.datetime(2026, 11, 2))  # a bound without a zone is UTC
    assert naive.since == datetime.datetime(2026, 11, 2, tzinfo=datetime.UTC)


# -- 8. control characters in telemetry strings -----------------------------------------


def test_control_characters_from_telemetry_are_escaped_in_text_but_exact_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hostile.jsonl"
    config = FleetConfig(owners=8, days=1, prompts_per_day=2, percent=50.0, seed=6)
    simulate(FleetConfig(**{**_fields(config), "environment": HOSTILE}), path)
    for command in ("check", "gates"):
        report = tmp_path / f"report-{command}"
        assert main(["rollout", command, str(path), "--report", str(report)]) in (0, 1)
        out = capsys.readouterr().out
        assert not any(c in out for c in "\x1b\x07\u202e"), out
        assert "prod\\x1b]0;owned\\x07\\x1b[2J\\ncheck: may advance\\u202e" in out
        # The forged verdict stays inside its environment's line: one verdict line, the last.
        assert out.splitlines()[-1].startswith(f"{command}: ")
        assert sum(line.startswith(("check: ", "gates: ")) for line in out.splitlines()) == 1
        page = (report / "index.html").read_text(encoding="utf-8")
        assert "\x1b" not in page and "\\x1b[2J" in page
        exact = json.loads((report / "result.json").read_text(encoding="utf-8"))
        assert list(exact["environments"]) == [HOSTILE]
    main(["rollout", "check", str(path), "--json"])
    assert list(json.loads(capsys.readouterr().out)["environments"]) == [HOSTILE]


def test_control_characters_in_a_bad_input_message_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "fleet\x1b[2J.jsonl"
    assert main(["rollout", "check", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "fleet\\x1b[2J.jsonl: no such file" in err


def _fields(config: FleetConfig) -> dict[str, Any]:
    import attrs

    return attrs.asdict(config)


# -- 9. where DuckDB spills ---------------------------------------------------------------


def _spill_somewhere(engine: Any) -> Path:
    """Make DuckDB spill (a sort far past a small memory limit); the directory it used."""
    con = engine.con
    con.execute("SET memory_limit = '40MB'")
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET threads = 1")
    con.execute(
        "CREATE TEMP TABLE big AS SELECT md5(CAST(range AS VARCHAR)) AS s FROM range(2000000)"
    )
    con.execute("CREATE TEMP TABLE sorted AS SELECT s FROM big ORDER BY s")
    return spill.directory(con)


def test_duckdb_spills_into_the_directory_named_and_removes_it(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work, chosen = tmp_path / "cwd", tmp_path / "chosen"
    work.mkdir()
    chosen.mkdir()
    monkeypatch.chdir(work)
    engine = load.duckdb_engine([fleet], temp_dir=chosen)
    used = _spill_somewhere(engine)
    assert used.parent == chosen and used.name.startswith(spill.PREFIX)
    assert any(used.iterdir()), "DuckDB wrote no temporary file: the test proves nothing"
    assert oct(used.stat().st_mode & 0o777) == "0o700"
    engine.close()
    assert list(chosen.iterdir()) == [] and list(work.iterdir()) == []


def test_by_default_duckdb_spills_under_the_system_temporary_directory(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work, system = tmp_path / "cwd", tmp_path / "tmp"
    work.mkdir()
    system.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("TMPDIR", str(system))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    engine = load.duckdb_engine([fleet])
    used = _spill_somewhere(engine)
    assert used.parent == system and any(used.iterdir())
    engine.close()
    assert list(system.iterdir()) == [] and list(work.iterdir()) == []
    # A connection nobody closes leaves nothing either, once it is gone.
    forgotten = load.connect([fleet])
    assert spill.directory(forgotten).parent == system
    del forgotten
    gc.collect()
    assert list(system.iterdir()) == []
    # The command: --temp-dir names the place; nothing is left there or in the cwd.
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    assert main(["rollout", "gates", str(fleet), "--temp-dir", str(chosen), "--json"]) in (0, 1)
    capsys.readouterr()
    assert list(chosen.iterdir()) == [] and list(work.iterdir()) == []
    missing = tmp_path / "nowhere"
    assert main(["rollout", "check", str(fleet), "--temp-dir", str(missing)]) == 2
    assert f"cannot create DuckDB's spill directory in {missing}" in capsys.readouterr().err
    assert not os.path.exists(missing)


# -- 10. the exporter's JSON schema -------------------------------------------------------


def test_the_exporters_json_schema_is_refused_by_name(
    chdb: ChdbExecutor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chdb.command(
        "CREATE TABLE json_logs (Timestamp DateTime64(9), TimestampTime DateTime, "
        "EventName String, ServiceName LowCardinality(String), ResourceAttributes JSON, "
        "ScopeAttributes JSON, LogAttributes JSON) ENGINE = MergeTree ORDER BY Timestamp"
    )
    chdb.command(
        "INSERT INTO json_logs (Timestamp, EventName, ResourceAttributes, LogAttributes) VALUES "
        "('2026-11-01 10:00:00', 'tool_failure_guard.prompt', "
        '\'{"deployment.environment": "internal", "enduser.pseudo.id": "o1"}\', '
        '\'{"prompt_id": "p1", "mode": "shadow"}\')'
    )
    with pytest.raises(EngineError) as refused:
        ClickHouseEngine(chdb, table="json_logs")
    message = str(refused.value)
    assert "JSON schema" in message and "json: true" in message
    assert "Map(LowCardinality(String), String)" in message
    with serve(chdb.session) as url:
        report = tmp_path / "report"
        args = ["--clickhouse", url, "--table", "json_logs", "--report", str(report)]
        assert main(["rollout", "check", *args]) == 2
        captured = capsys.readouterr()
        assert "json_logs has the ClickHouse exporter's JSON schema" in captured.err
        assert "mapContains" not in captured.err and captured.out == ""
        assert not report.exists()
