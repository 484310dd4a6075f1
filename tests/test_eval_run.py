"""``python -m tool_failure_guard.evaluation run``: where it writes, and what it does when it fails.

- By default a run writes into a fresh ``eval-results/run-<time>/``; the
  committed records are never touched unless named.
- A dead endpoint: every episode errors, the report says so, the run exits 1,
  and records already at the output path are kept.
- The local server is started with its host-memory prompt cache off and the
  slot API on, and its slot can be erased (against a stand-in for llama-server
  speaking its HTTP API on 127.0.0.1: the real one cannot be built in a test).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tool_failure_guard.evaluation.records import errored, read_records
from tool_failure_guard.evaluation.run import DEFAULT_RECORDS, DEFAULT_REPORT, main
from tool_failure_guard.evaluation.server import (
    EndpointError,
    erase_slot,
    free_port,
    local_server,
    wait_healthy,
)

FAKE_SERVER = Path(__file__).resolve().parent / "fake_llama_server.py"
ONE_ARM = ["--seeds", "1", "--arms", "off", "--tasks", "missing-config,control-read"]


def _digest(*paths: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


@pytest.fixture
def dead_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """An endpoint nothing listens on."""
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("TFG_EVAL_MODEL", "fake-model")


def test_a_dead_endpoint_errors_every_episode_exits_1_and_the_report_says_so(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dead_endpoint: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    committed = [DEFAULT_RECORDS / "episodes.jsonl", DEFAULT_RECORDS / "run.json", DEFAULT_REPORT]
    before = _digest(*committed)
    monkeypatch.chdir(tmp_path)
    assert main(["run", *ONE_ARM]) == 1
    # a fresh directory under eval-results/, nothing committed touched
    (out,) = (tmp_path / "eval-results").iterdir()
    assert out.name.startswith("run-")
    records = read_records(out / "episodes.jsonl")
    assert len(records) == 2 and all(errored(r) for r in records)
    assert "- **Every episode errored** (" in (out / "evaluation.md").read_text()
    assert _digest(*committed) == before
    # progress: a line per episode as it ended, with why it failed; the count at the end
    printed = capsys.readouterr()
    progress = [line for line in printed.out.splitlines() if line.startswith("[eval] [")]
    assert [line.split(":")[0] for line in progress] == [
        "[eval] [1/2] missing-config",
        "[eval] [2/2] control-read",
    ]
    assert all("cannot reach the model endpoint" in line for line in progress)
    assert "eval: 2 of 2 episodes errored" in printed.err


def test_an_errored_run_never_replaces_the_records_at_its_output_path(
    tmp_path: Path, dead_endpoint: None
) -> None:
    records = tmp_path / "records"
    records.mkdir()
    (records / "episodes.jsonl").write_text((DEFAULT_RECORDS / "episodes.jsonl").read_text())
    (records / "run.json").write_text((DEFAULT_RECORDS / "run.json").read_text())
    before = _digest(records / "episodes.jsonl", records / "run.json")
    report = tmp_path / "evaluation.md"
    assert main(["run", *ONE_ARM, "--records", str(records), "--report", str(report)]) == 1
    assert _digest(records / "episodes.jsonl", records / "run.json") == before
    assert not report.exists()
    partial = read_records(records / "episodes.jsonl.partial")
    assert [r["episode"] for r in partial] == ["missing-config.off.s1", "control-read.off.s1"]
    assert "**Every episode errored**" in (records / "evaluation.errored.partial.md").read_text()


@pytest.mark.parametrize("value", ["0", "-3", "soon"])
def test_the_episode_timeout_must_be_a_positive_number_of_seconds(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--episode-timeout", value])
    assert exit_.value.code == 2
    assert "--episode-timeout" in capsys.readouterr().err


def _fake_binary(tmp_path: Path) -> Path:
    binary = tmp_path / "llama-server"
    binary.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_SERVER} "$@"\n')
    binary.chmod(0o755)
    return binary


def test_the_local_server_runs_without_a_prompt_cache_across_requests_and_its_slot_erases(
    tmp_path: Path,
) -> None:
    binary = _fake_binary(tmp_path)
    log = tmp_path / "work" / "llama-server.log"
    with local_server(binary, tmp_path / "m.gguf", tmp_path / "t.jinja", log_path=log) as ep:
        assert ep.cache_reset == "slot-erase" and ep.base_url.endswith("/v1")
        assert erase_slot(ep.root_url) == 0
        argv = json.loads((log.parent / "llama-slots" / "argv.json").read_text())
        with pytest.raises(EndpointError, match="HTTP 400"):
            erase_slot(ep.root_url, slot=3)
    # the host-memory prompt cache off, one slot, the slot API on
    assert argv[argv.index("--cache-ram") + 1] == "0"
    assert argv[argv.index("-np") + 1] == "1"
    assert argv[argv.index("--slot-save-path") + 1] == str(log.parent / "llama-slots")


def test_a_server_without_the_slot_api_cannot_be_reset_and_says_why(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, str(FAKE_SERVER), "--port", str(port)]
    process = subprocess.Popen(command, cwd=tmp_path)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process, 30)
        with pytest.raises(EndpointError, match=r"HTTP 501 .*--slot-save-path"):
            erase_slot(f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        process.wait(timeout=10)
