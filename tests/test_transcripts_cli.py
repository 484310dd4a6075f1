"""``tool-failure-guard transcripts``: errors, skips, privacy, ``--json``, progress and plot."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tool_failure_guard.commands.cli import main
from tool_failure_guard.transcripts.walk import Progress

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
#: texts that appear in the fixtures' arguments, outputs and error texts
CONTENT = ("File not found", "missing-3.txt", "No such file", "config/settings.toml", "echo hello")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["transcripts", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    status, out, _ = _run(capsys, "--json", *argv)
    assert status in (0, 1)  # 1: the report is whole, some files were skipped
    data: dict[str, Any] = json.loads(out)
    return data


def test_the_fixtures_report_without_any_content(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _run(capsys, str(FIXTURES))
    assert status == 1 and err == ""  # the README.md files were skipped (and are listed)
    assert "fleet: 31 runs (10 succeeded, 8 failed, 13 not recorded)" in out
    assert "skipped 3 files:" in out
    for text in CONTENT:
        assert text not in out
    data = _json(capsys, str(FIXTURES))
    assert not any(text in json.dumps(data["runs"]) for text in CONTENT)
    assert all("content" not in run for run in data["runs"])


def test_show_content_prints_the_error_texts(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "qwen-code" / "varied-missing-reads.jsonl"
    status, out, _ = _run(capsys, "--show-content", str(path))
    assert status == 0 and "File not found" in out
    (run,) = _json(capsys, "--show-content", str(path))["runs"]
    assert run["content"][0]["error_text"].startswith("File not found")


def test_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, str(FIXTURES))
    assert data["schema"] == "tool-failure-guard.transcripts/1"
    assert set(data) == {"schema", "files", "skipped", "runs", "fleet", "rules", "stop_rules"}
    assert {f["kind"] for f in data["files"]} == {
        "claude-code",
        "codex",
        "gemini-cli",
        "qwen-code",
        "mini-swe-agent",
        "openhands",
        "swe-agent",
        "tool-failure-guard",
    }
    assert sum(f["runs"] for f in data["files"]) == len(data["runs"]) == data["fleet"]["runs"] == 31
    run = next(r for r in data["runs"] if r["source"].endswith("failing-command.traj.json"))
    assert set(run) == {
        "agent", "source", "run_id", "model", "succeeded", "outcome_from", "profile", "flags",
        "turns", "calls", "failed_calls",
        "input_tokens", "output_tokens", "modes", "saved", "peers",
    }  # fmt: skip
    assert run["succeeded"] is False and run["outcome_from"] == "agent" and run["flags"] == []
    assert run["profile"] == "adapter"  # mini-swe-agent runs its own loop
    assert run["modes"]["shadow"]["remind"] == {
        "turn": 8,
        "call": 8,
        "loop_type": None,
        "would": False,
    }
    assert run["modes"]["shadow"]["stop"]["would"] is True
    enforce = run["modes"]["enforce"]["stop"]
    assert enforce == {
        "turn": 9,
        "call": 9,
        "loop_type": "repeated_tool_execution_failure",
        "would": False,
    }
    # 14 turns, stopped after the 9th: the 5 after it, 11 + 7 tokens each, were saved
    assert run["saved"] == {"turns": 5, "calls": 5, "input_tokens": 55, "output_tokens": 35}
    # 14 identical failing steps: Crush needs 10 steps and a 6th repeat among the last 10
    assert run["peers"] == {
        "gemini_cli": 5,
        "opencode_roo": 3,
        "goose": 3,
        "qwen_code": 5,
        "qwen_code_repeated_error": 3,
        "cline_mistakes": 3,
        "crush_repeated_steps": 10,
    }
    rules = data["fleet"]["rules"]
    assert set(rules) == set(data["rules"])
    assert rules["guard_stop"]["failed"] == 4 and rules["guard_stop"]["succeeded"] == 0


def test_the_qwen_identical_loop_is_halted_before_our_guard_counts_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Qwen Code's own check stopped it at the 5th identical request: 4 calls are recorded."""
    (run,) = _json(capsys, str(FIXTURES / "qwen-code" / "identical-missing-read.jsonl"))["runs"]
    assert run["calls"] == 4 and run["modes"]["enforce"]["stop"] is None
    assert run["peers"]["opencode_roo"] == 3 and run["peers"]["qwen_code"] is None


def test_an_unknown_file_is_exit_2_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    other = tmp_path / "notes.jsonl"
    other.write_text('{"hello": 1}\n')
    status, out, err = _run(capsys, str(other))
    assert status == 2 and out == ""
    assert f"{other}:1: not a transcript of a known kind" in err


def test_a_missing_path_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = _run(capsys, str(tmp_path / "nope"))
    assert status == 2 and "no such file or directory" in err


@pytest.mark.parametrize(
    ("fixture", "damage", "message"),
    [
        ("qwen-code/mostly-successful.jsonl", "truncate", r":22: truncated"),
        ("qwen-code/mostly-successful.jsonl", "garble", r":5: not a JSON record"),
        ("tool-failure-guard/read-loop-shadow.jsonl", "truncate", r":38: truncated"),
        ("tool-failure-guard/read-loop-shadow.jsonl", "garble", r":5: not a JSON record"),
        ("mini-swe-agent/submits.traj.json", "truncate", r":\d+: truncated"),
    ],
)
def test_a_damaged_transcript_is_exit_2_naming_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fixture: str, damage: str, message: str
) -> None:
    data = (FIXTURES / fixture).read_bytes()
    if damage == "truncate":
        data = data.rstrip(b"\n")[:-5]
    else:
        lines = data.split(b"\n")
        lines[4] = b'{"broken": '
        data = b"\n".join(lines)
    damaged = tmp_path / "logs" / Path(fixture).name
    damaged.parent.mkdir()
    damaged.write_bytes(data)
    status, out, err = _run(capsys, str(damaged))  # named: an error
    assert status == 2 and out == ""
    assert re.search(re.escape(str(damaged)) + message, err), err
    # in a folder, one damaged file never costs the report of the others
    shutil.copy(FIXTURES / "qwen-code" / "varied-missing-reads.jsonl", damaged.parent)
    status, out, err = _run(capsys, str(damaged.parent))
    assert status == 1 and err == ""
    assert "fleet: 1 runs" in out and "skipped 1 file:" in out
    assert re.search(re.escape(str(damaged)) + r": line \d+: ", out), out


def test_a_mixed_directory_reports_what_it_skipped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.copytree(FIXTURES / "qwen-code", tmp_path / "logs")
    (tmp_path / "logs" / "README.txt").write_text("not a log\n")
    (tmp_path / "logs" / "empty.jsonl").write_text("")
    status, out, _ = _run(capsys, str(tmp_path))
    assert status == 1
    assert "skipped 2 files:" in out and "README.txt: not a transcript of a known kind" in out
    data = _json(capsys, str(tmp_path))
    assert sorted(Path(s["path"]).name for s in data["skipped"]) == ["README.txt", "empty.jsonl"]
    assert len(data["files"]) == 4


def test_kind_reads_every_file_as_that_kind(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, "--kind", "mini-swe-agent", str(FIXTURES))
    assert {f["kind"] for f in data["files"]} == {"mini-swe-agent"}
    # 17 other files, 2 SWE-agent trajectories, 3 OpenHands conversation folders, 3 README.md
    assert len(data["files"]) == 4 and len(data["skipped"]) == 25


def test_progress_on_request() -> None:
    stream = io.StringIO()
    progress = Progress(2, 10, True, stream)
    progress.update(1, 3, 7)
    progress.update(2, 4, 9)
    progress.done()
    assert "1/2 files, 3 runs, 7 batches" in stream.getvalue()
    assert stream.getvalue().endswith("2/2 files, 4 runs, 9 batches\n")
    quiet = io.StringIO()
    auto = Progress(10_000, 1 << 40, None, quiet)  # long, but not a terminal
    auto.update(1, 1, 1)
    assert not auto.enabled and quiet.getvalue() == ""


def test_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "rules.png"
    status, _, _ = _run(capsys, "--plot", str(target), str(FIXTURES / "qwen-code"))
    assert status == 0 and target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_reports_transcripts_document_is_the_commands_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tool_failure_guard.evaluation import transcripts_section

    monkeypatch.chdir(transcripts_section.ROOT)
    fresh = _json(capsys, transcripts_section.FIXTURES_ARG)
    assert json.loads(transcripts_section.TRANSCRIPTS_FILE.read_text()) == fresh
    section = "\n".join(transcripts_section.lines())
    assert "| shipped guard: stop (enforce) | 10 (median call 9) | 0 | 4 | 6 |" in section


def test_the_bench_corpus_is_what_the_command_reads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from benches.transcripts import write_corpus

    assert write_corpus(tmp_path, batches=250) == 3
    data = _json(capsys, str(tmp_path))
    assert data["fleet"]["batches"] == 250 and data["fleet"]["runs"] == 3
    assert {f["kind"] for f in data["files"]} == {"qwen-code"} and not data["skipped"]
    assert data["fleet"]["calls"] > 250  # every seventh batch holds two calls


def test_an_unknown_kind_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["transcripts", "--kind", "gpt-agent", str(FIXTURES)])
    assert exit_.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_progress_flag_writes_the_counter_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _run(capsys, "--progress", str(FIXTURES / "qwen-code"))
    assert status == 0 and "fleet: 4 runs" in out
    assert err.startswith("\rtranscripts: ") and err.endswith("4/4 files, 4 runs, 24 batches\n")
    _, _, quiet = _run(capsys, "--no-progress", str(FIXTURES / "qwen-code"))
    assert quiet == ""
