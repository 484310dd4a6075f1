"""Rollout bad input is exit 2, never a verdict; calls saved; the closed vocabulary; cohorts.

Exit 1 means "may not advance" and automation acts on it, so input the
analysis cannot conclude from must exit 2 with ``file:line: what`` and write
nothing (issue 15, section 7).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rollout_records import EVENTS, call, engine, loop, prompt

from tool_failure_guard.commands.cli import main
from tool_failure_guard.rollout import check, load, spill
from tool_failure_guard.rollout.simulate import FleetConfig, simulate

DOCS = Path(__file__).resolve().parent.parent / "docs" / "rollout.md"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("input") / "fleet.jsonl"
    simulate(FleetConfig(owners=4, days=1, prompts_per_day=3, phase="shadow", seed=2), out)
    return out


def _rewrite(source: Path, target: Path, number: int, change: Any) -> Path:
    """``source`` with line ``number`` (1-based) decoded, changed in place and re-encoded."""
    lines = source.read_text(encoding="utf-8").splitlines()
    data = json.loads(lines[number - 1])
    change(data)
    lines[number - 1] = json.dumps(data)
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def _records(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for rl in data["resourceLogs"] for s in rl["scopeLogs"] for r in s["logRecords"]]


def _prompt_field(name: str, value: dict[str, Any]) -> Any:
    def change(data: dict[str, Any]) -> None:
        record = next(r for r in _records(data) if r["eventName"] == EVENTS["prompt"])
        for item in record["attributes"]:
            if item["key"] == name:
                item["value"] = value

    return change


def _first_stamp(data: dict[str, Any]) -> None:
    _records(data)[0]["timeUnixNano"] = "soon"


def _records_as_string(data: dict[str, Any]) -> None:
    data["resourceLogs"][0]["scopeLogs"][0]["logRecords"] = "none"


def _keyless_attribute(data: dict[str, Any]) -> None:
    _records(data)[0]["attributes"].append({"value": {"stringValue": "x"}})


@pytest.mark.parametrize(
    ("change", "what"),
    [
        (_prompt_field("model_turns", {"stringValue": "three"}), "model_turns is 'three'"),
        (_first_stamp, "timeUnixNano 'soon' is not a non-negative integer"),
        (_records_as_string, "logRecords is not a list"),
        (_keyless_attribute, "attributes: an entry without a string key"),
    ],
)
def test_well_formed_json_with_wrong_types_is_bad_input_at_its_line(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, what: str
) -> None:
    broken = _rewrite(fleet, tmp_path / "broken.jsonl", 2, change)
    for command in ("check", "gates"):
        report = tmp_path / "report"
        assert main(["rollout", command, str(broken), "--report", str(report)]) == 2
        captured = capsys.readouterr()
        assert f"{broken}:2: " in captured.err and what in captured.err, captured.err
        assert "Traceback" not in captured.err and captured.out == ""
        assert not report.exists()


def test_a_stamp_within_bigint_and_one_past_it_load_to_their_microseconds(
    fleet: Path, tmp_path: Path
) -> None:
    # Stamps within BIGINT are divided as BIGINTs, others as HUGEINTs (load._MICROS):
    # both branches give the stamp's whole microseconds.
    stamps = [0, 1_999, 2**63 - 1, 2**63 + 1_234_567]

    def change(data: dict[str, Any]) -> None:
        for record, stamp in zip(_records(data), stamps, strict=False):
            record["timeUnixNano"] = str(stamp)

    edited = _rewrite(fleet, tmp_path / "stamps.jsonl", 1, change)
    con = load.connect([edited])
    try:
        loaded = {row[0] for row in con.execute("SELECT epoch_us(Timestamp) FROM logs").fetchall()}
    finally:
        spill.close(con)
    assert {stamp // 1000 for stamp in stamps} <= loaded


def test_gates_refuses_a_fleet_where_one_session_lacks_the_owner(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def drop_owner(data: dict[str, Any]) -> None:
        for rl in data["resourceLogs"]:
            rl["resource"]["attributes"] = [
                a for a in rl["resource"]["attributes"] if a["key"] != "enduser.pseudo.id"
            ]

    stripped = _rewrite(fleet, tmp_path / "stripped.jsonl", 3, drop_owner)
    report = tmp_path / "report"
    assert main(["rollout", "gates", str(stripped), "--report", str(report)]) == 2
    err = capsys.readouterr().err
    assert "refusing to conclude" in err and "lack enduser.pseudo.id" in err
    assert "KeyError" not in err and not report.exists()


def test_an_empty_input_file_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for content in ("", "\n\n  \n"):
        empty = tmp_path / "empty.jsonl"
        empty.write_text(content, encoding="utf-8")
        assert main(["rollout", "check", str(empty)]) == 2
        assert f"{empty}: empty" in capsys.readouterr().err
    metrics_only = tmp_path / "metrics.jsonl"
    metrics_only.write_text('{"resourceMetrics": []}\n', encoding="utf-8")
    assert main(["rollout", "gates", str(metrics_only)]) == 2
    assert "no tool_failure_guard records" in capsys.readouterr().err


def test_file_attributes_outside_the_vocabulary_are_kept_and_found(fleet: Path) -> None:
    """From OTLP JSON: an unknown key and a key given twice load (nothing is dropped) and
    make their records ``forbidden_telemetry_field`` findings; lookups read a key's first
    value, as ClickHouse's ``Map`` does."""
    from tool_failure_guard.rollout import load

    def change(data: dict[str, Any]) -> None:
        prompts = [r for r in _records(data) if r["eventName"] == EVENTS["prompt"]]
        prompts[0]["attributes"].append({"key": "user_email", "value": {"stringValue": "a@b"}})
        mode = next(a for a in prompts[-1]["attributes"] if a["key"] == "mode")
        prompts[-1]["attributes"].append({"key": "mode", "value": {"stringValue": "enforce"}})
        changed.extend(
            next(a["value"]["stringValue"] for a in r["attributes"] if a["key"] == "prompt_id")
            for r in (prompts[0], prompts[-1])
        )
        changed.append(mode["value"]["stringValue"])
        sizes.extend(len(r["attributes"]) for r in (prompts[0], prompts[-1]))

    changed: list[str] = []
    sizes: list[int] = []
    lines = fleet.read_text(encoding="utf-8").splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line.count(EVENTS["prompt"]) >= 2)
    edited = _rewrite(fleet, fleet.with_name("edited.jsonl"), number, change)
    built = load.duckdb_engine([edited])
    try:
        found = check.check(built, check.preflight(built, "edited"))
        forbidden = [
            example
            for env in found["environments"].values()
            for example in env["invariants"]["forbidden_telemetry_field"]["examples"]
        ]
        assert sorted(forbidden) == sorted(changed[:2])
        rows = built.rows(
            "SELECT LogAttributes['user_email'], cardinality(LogAttributes), "
            "LogAttributes['mode'] FROM logs "
            f"WHERE LogAttributes['prompt_id'] IN ('{changed[0]}', '{changed[1]}') "
            f"AND EventName = '{EVENTS['prompt']}' ORDER BY 1 NULLS LAST"
        )
        first, twice = rows
        assert first[0] == "a@b" and twice[0] is None
        assert [first[1], twice[1]] == sizes  # every key kept, the repeated one twice
        assert twice[2] == changed[2]  # the first of the two values
    finally:
        built.close()


# -- hand-built records -------------------------------------------------------------------


def test_calls_saved_count_only_prompts_whose_guard_could_have_stopped() -> None:
    built = engine(
        [
            *loop("a-shadow########0", "shadow", "o1"),  # saves batch 4's call
            *loop("b-enforce-downgraded########0", "enforce", "o2"),  # would_stop in enforce
            *loop("c-shadow-downgraded########0", "shadow", "o3", downgrade_at=1),
        ]
    )
    checked = check.check(built, check.preflight(built, "hand-built"))
    internal = checked["environments"]["internal"]
    assert internal["would_stop"] == 3
    assert internal["estimated_calls_saved"] == 1


def test_the_no_raw_data_invariant_is_a_closed_vocabulary() -> None:
    ok = "p-ok########0"
    rows: list[Any] = [
        ("prompt", "o1", prompt(ok, "shadow", 1)),
        ("call", "o1", call(ok, 1)),
        # A relative path where an error type belongs: no leading slash, no whitespace.
        ("call", "o1", call("p-path########0", 1, execution_error_type="src/app/.env")),
        ("prompt", "o1", prompt("p-path########0", "shadow", 1)),
        ("prompt", "o2", prompt("p-enum########0", "shadow", 1, stop_reason="finished")),
        ("prompt", "o2", prompt("not a prompt id", "shadow", 1)),
        ("prompt", "o2", prompt("p-boundary########0", "shadow", 1, input_boundary="acpx")),
    ]
    built = engine(rows)
    found = check.check(built, check.preflight(built, "hand-built"))
    forbidden = found["environments"]["internal"]["invariants"]["forbidden_telemetry_field"]
    assert forbidden["examples"] == [
        "not a prompt id",
        "p-boundary########0",
        "p-enum########0",
        "p-path########0",
    ]


def test_records_without_input_boundary_derive_it_from_drain_supported() -> None:
    rows: list[Any] = [
        ("prompt", "o1", prompt("a-drain########0", "shadow", 1)),
        ("prompt", "o2", prompt("b-old-host########0", "shadow", 1, drain_supported="false")),
        ("prompt", "o3", prompt("c-declared########0", "shadow", 1, input_boundary="prompt-only")),
        ("prompt", "o4", prompt("d-new-drain########0", "shadow", 1, input_boundary="drain")),
        (
            "prompt",
            "o5",
            prompt(
                "e-unsupported########0",
                "shadow",
                1,
                input_boundary="unsupported",
                drain_supported="false",
            ),
        ),
    ]
    built = engine(rows)
    env = check.check(built, check.preflight(built, "hand-built"))["environments"]["internal"]
    assert {k: c["prompts"] for k, c in env["cohorts"].items()} == {
        "drain": 2,
        "prompt-only": 1,
        "unsupported": 2,
    }
    assert (env["supported_prompts"], env["prompt_only_prompts"]) == (2, 1)
    assert env["unsupported_host_prompts"] == 2


# -- the docs name only options the commands have ------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


def test_every_option_docs_rollout_names_exists_where_it_is_named() -> None:
    from tool_failure_guard.commands.cli import build_parser

    top = _subparsers(build_parser())
    parsers = _subparsers(top["rollout"])
    # A bare option is one of the analysis commands' (what the doc is about) or the agent's.
    bare = _options(parsers["check"]) | _options(parsers["gates"]) | _options(top["agent"])
    for span in re.findall(r"`([^`\n]+)`", DOCS.read_text(encoding="utf-8")):
        named = re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", span)
        command = re.search(r"rollout (check|gates|assign|simulate)\b", span)
        allowed = _options(parsers[command.group(1)]) if command else bare
        missing = [o for o in named if o not in allowed]
        assert not missing, f"docs/rollout.md `{span}` names {missing}"


def test_duckdb_rendering_changes_only_the_map_spellings() -> None:
    """``to_duckdb`` rewrites map access, ``map_keys`` and ``cardinality`` of the attribute
    columns to their key and value lists, and leaves every other character alone."""
    import duckdb

    from tool_failure_guard.rollout import dialect, sql

    query = (
        "SELECT g.attributes['it''s'] AS a, map_keys( LogAttributes ) AS k, "
        "cardinality(attributes) AS n, my_attributes, 'attributes[''x'']' AS s, 7 // 2 AS d "
        "FROM (SELECT LogAttributes, LogAttributes AS attributes, 1 AS my_attributes "
        "FROM logs) g"
    )
    rendered = dialect.to_duckdb(query)
    assert rendered.startswith("SELECT list_extract(struct_extract(g.attributes, 'vals'), ")
    assert "my_attributes, 'attributes[''x'']' AS s, 7 // 2 AS d FROM (SELECT" in rendered
    con = duckdb.connect()
    con.execute(sql.LOGS_TABLE)
    con.execute(
        "INSERT INTO logs VALUES (NULL, 'e', '', {'keys': [], 'vals': []}, "
        "{'keys': ['it''s', 'b', 'it''s'], 'vals': ['1', '2', '3']})"
    )
    row = con.execute(rendered).fetchone()
    assert row == ("1", ["it's", "b", "it's"], 3, 1, "attributes['x']", 3)
