"""Gemini CLI chat logs: the fixtures the real CLI wrote, counted independently, and re-captured.

The fixtures (``tests/fixtures/transcripts/gemini-cli/``) are the chat logs Gemini CLI
0.61.0 wrote itself in ``-p`` against the fake Gemini API (``tests/transcript_gemini.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import agent_clis
import pytest
from transcript_files import FIXTURES, outcome_rows
from transcript_scrub import SCRUBBED_ROOT

from tool_failure_guard.transcripts.importers import IMPORTERS, gemini_cli, importer
from tool_failure_guard.transcripts.model import Run, TranscriptError
from tool_failure_guard.transcripts.replay import replay_run

GEMINI = FIXTURES / "gemini-cli"

#: file -> (runs, turns, calls, failed calls, batches), by hand from tests/transcript_gemini.py
BY_HAND = {
    "mixed.session.jsonl": (1, 6, 6, 5, 5),
    "varied-missing.session.jsonl": (1, 11, 10, 10, 10),
}


def independent_counts(path: Path) -> tuple[int, int, int, int]:
    """(turns, calls, failed calls, batches) from the log's last version of each message."""
    last: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "gemini":
            last[record["id"]] = record
    calls = [c for m in last.values() for c in m.get("toolCalls", [])]
    failed = 0
    for call in calls:
        output = str(call["result"][0]["functionResponse"]["response"].get("output", ""))
        failed += call["status"] != "success" or bool(re.search(r"Exit Code: [1-9]", output))
    return len(last), len(calls), failed, sum(1 for m in last.values() if m.get("toolCalls"))


def _read(path: Path) -> list[Run]:
    assert gemini_cli.sniff(path, path.read_bytes()[: 64 << 10])
    return list(gemini_cli.read(path))


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_counts_match_a_count_written_independently(name: str) -> None:
    runs = _read(GEMINI / name)
    calls = [c for r in runs for t in r.turns for c in t.calls]
    counted = (
        sum(len(r.turns) for r in runs),
        len(calls),
        sum(c.status.value != "success" for c in calls),
        sum(1 for r in runs for t in r.turns if t.calls),
    )
    assert (len(runs), *counted) == BY_HAND[name]
    assert counted == independent_counts(GEMINI / name)
    assert [r.succeeded for r in runs] == [None]  # the chat log does not record it
    assert runs[0].model == "gemini-2.5-flash"
    assert all(t.input_tokens == 120 and t.output_tokens == 30 for t in runs[0].turns)


def test_the_mixed_session_maps_row_by_row() -> None:
    (run,) = _read(GEMINI / "mixed.session.jsonl")
    assert outcome_rows(run) == [
        [
            ("read_file", "error", "error", "file_not_found", True, False),
            ("run_shell_command", "error", "error", "shell_execute_error", True, False),
        ],
        [("run_shell_command", "error", "error", "shell_execute_error", True, False)],
        [("no_such_tool", "error", "not_started", "tool_not_registered", True, False)],
        [("read_file", "error", "not_started", "invalid_tool_params", True, False)],
        [("run_shell_command", "success", "success", None, False, False)],
        [],
    ]


def test_the_guard_fires_on_the_varied_loop() -> None:
    (run,) = _read(GEMINI / "varied-missing.session.jsonl")
    result = replay_run(run)
    stop = result.mode("enforce").stop
    assert stop is not None and (stop.turn, stop.call) == (9, 9)
    assert stop.loop_type == "repeated_tool_execution_failure"
    assert result.saved is not None and result.saved.input_tokens == 240  # 2 turns after it
    assert result.peers["gemini_cli"] is None  # different arguments every call


def test_no_other_kind_claims_the_logs_and_gemini_claims_no_other_fixture() -> None:
    for kind in IMPORTERS:
        if kind == "gemini-cli":
            continue
        module = importer(kind)
        for path in GEMINI.glob("*.jsonl"):
            assert not module.sniff(path, path.read_bytes()[: 64 << 10]), (kind, path.name)
    for path in FIXTURES.glob("*/*.json*"):
        if path.parent != GEMINI:
            assert not gemini_cli.sniff(path, path.read_bytes()[: 64 << 10]), path


def test_the_older_whole_document_form_reads_alike(tmp_path: Path) -> None:
    """Before JSON Lines the CLI kept ``session-*.json``: the metadata with a messages list."""
    source = GEMINI / "mixed.session.jsonl"
    lines = [json.loads(line) for line in source.read_text().splitlines()]
    metadata, messages = lines[0], {}
    for record in lines[1:]:
        if "id" in record:
            messages[record["id"]] = record
    target = tmp_path / "session-old.json"
    target.write_text(json.dumps({**metadata, "messages": list(messages.values())}, indent=2))
    assert outcome_rows(_read(target)[0]) == outcome_rows(_read(source)[0])


def test_a_set_of_messages_replaces_the_list(tmp_path: Path) -> None:
    source = GEMINI / "mixed.session.jsonl"
    lines = source.read_text().splitlines()
    target = tmp_path / "rewound.jsonl"
    # the CLI rewrites the whole list (a rewind, a resume): what came before is gone
    target.write_text("\n".join([*lines, json.dumps({"$set": {"messages": []}})]) + "\n")
    assert list(gemini_cli.read(target)) == []


def test_a_damaged_log_names_its_line(tmp_path: Path) -> None:
    source = GEMINI / "mixed.session.jsonl"
    target = tmp_path / "cut.jsonl"
    target.write_text(source.read_text()[:-30])
    with pytest.raises(TranscriptError, match=r"cut\.jsonl:\d+: truncated"):
        list(gemini_cli.read(target))
    target.write_text(source.read_text() + json.dumps({"type": "gemini"}) + "\n")
    with pytest.raises(TranscriptError, match="a message record without an id"):
        list(gemini_cli.read(target))


def test_the_fixtures_hold_no_machine_paths_or_keys() -> None:
    for path in GEMINI.glob("*.jsonl"):
        text = path.read_text(encoding="utf-8")
        for found in re.findall(r"/tmp/[^/\"\\\s]*", text):
            assert found == SCRUBBED_ROOT, (path.name, found)
        assert "/root" not in text and "fake-gemini-key" not in text, path.name


def test_a_fresh_capture_maps_like_the_fixture(tmp_path: Path) -> None:
    agent_clis.require(agent_clis.gemini_script)
    from transcript_gemini import capture

    (tmp_path / "runs").mkdir()
    for fresh in capture(tmp_path / "out", base=tmp_path / "runs"):
        now, committed = _read(fresh), _read(GEMINI / fresh.name)
        assert [outcome_rows(r) for r in now] == [outcome_rows(r) for r in committed]
        assert [[(t.input_tokens, t.output_tokens) for t in r.turns] for r in now] == [
            [(t.input_tokens, t.output_tokens) for t in r.turns] for r in committed
        ]
        assert str(tmp_path) not in fresh.read_text(encoding="utf-8")


def test_a_subagents_own_log_holds_no_runs(tmp_path: Path) -> None:
    lines = (GEMINI / "mixed.session.jsonl").read_text().splitlines()
    first = {**json.loads(lines[0]), "kind": "subagent"}
    target = tmp_path / "sub.jsonl"
    target.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert gemini_cli.sniff(target, target.read_bytes()) and list(gemini_cli.read(target)) == []
