"""``transcripts`` under bad input (issue 33, items 5-7 and 10-13): each test fails without
its fix.

A folder holding other JSON (a JSON Schema, a deeply nested line), terminal escapes in
logs and file names, lone surrogates and undecodable names, damaged logs of every JSON
kind, this project's own history mentioning mini-swe-agent, ``--plot`` targets, and
inputs that are not files (``/dev/zero``, FIFOs, ``<(zcat log.gz)``).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from transcript_files import FIXTURES, lines_of, write

from tool_failure_guard.commands.cli import main
from tool_failure_guard.transcripts.importers import _read, importer
from tool_failure_guard.transcripts.model import TranscriptError
from tool_failure_guard.transcripts.walk import discover

QWEN = FIXTURES / "qwen-code" / "mostly-successful.jsonl"
VARIED = FIXTURES / "qwen-code" / "varied-missing-reads.jsonl"
OWN = FIXTURES / "tool-failure-guard" / "read-loop-shadow.jsonl"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["transcripts", *argv])
    out, err = capsys.readouterr()
    return status, out, err


# -- 5: other JSON in a folder ------------------------------------------------------------


def test_a_json_schema_and_a_deeply_nested_line_are_skipped_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(QWEN, tmp_path)
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": ["string", "null"]}
    (tmp_path / "schema.json").write_text(json.dumps(schema) + "\n")
    (tmp_path / "schema.jsonl").write_text(json.dumps({**schema, "sessionId": "s"}) + "\n")
    (tmp_path / "deep.jsonl").write_text("[" * 200_000 + "]" * 200_000 + "\n")
    (tmp_path / "deep-object.jsonl").write_text('{"a":' * 100_000 + "1" + "}" * 100_000 + "\n")
    status, out, err = _run(capsys, str(tmp_path))
    assert status == 1 and err == ""
    assert "fleet: 1 runs" in out and "skipped 4 files:" in out
    status, _, err = _run(capsys, str(tmp_path / "deep-object.jsonl"))
    assert status == 2 and "not a transcript of a known kind" in err


# -- 6: terminal escapes ------------------------------------------------------------------


def test_terminal_escapes_from_logs_and_names_are_shown_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = lines_of(VARIED)
    for record in records:
        result = record.get("toolCallResult")
        if isinstance(result, dict):
            result["resultDisplay"] = "\x1b]0;owned\x07\x1b[2J gone"
            for part in record["message"]["parts"]:
                part["functionResponse"]["response"]["error"] = "\x1b[31mred\u202e\r\nforged row"
    name = tmp_path / "log\x1b[2J\x07.jsonl"
    write(name, records)
    (tmp_path / "junk\x1b]0;t\x07.txt").write_text("x")
    for argv in ([str(tmp_path)], ["--show-content", str(tmp_path)]):
        status, out, _ = _run(capsys, *argv)
        assert status == 1
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
        assert "\r" not in out
    assert "log\\x1b[2J\\x07.jsonl" in out and "junk\\x1b]0;t\\x07.txt" in out
    assert "\\x1b[31mred\\u202e\\r\\nforged row" in out
    status, _, err = _run(capsys, str(tmp_path / "nope\x1b[2J"))
    assert status == 2 and "\x1b" not in err and "nope\\x1b[2J" in err


# -- 7: lone surrogates, undecodable names, --json written whole --------------------------


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    environment = {**os.environ, "PYTHONIOENCODING": "utf-8", "LC_ALL": "C.UTF-8"}
    return subprocess.run(
        [sys.executable, "-m", "tool_failure_guard", "transcripts", *argv],
        capture_output=True,
        env={**environment, **(env or {})},
        cwd="/",  # the module comes from the environment's path, not the working directory
        timeout=120,
    )


def test_a_lone_surrogate_and_a_non_utf8_name_never_cost_the_output(tmp_path: Path) -> None:
    text = VARIED.read_text()
    text = text.replace("File not found", "File \\ud800 not found")  # a JSON escape, lone
    folder = os.fsencode(tmp_path)
    with open(os.path.join(folder, b"log-\xff.jsonl"), "w", encoding="utf-8") as handle:
        handle.write(text)
    done = _cli("--show-content", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    assert b"log-\\udcff.jsonl" in done.stdout and b"File \\ud800 not found" in done.stdout
    done = _cli("--json", "--show-content", str(tmp_path))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # whole, and valid
    (file,) = data["files"]
    assert os.fsencode(file["path"]).endswith(b"log-\xff.jsonl")
    assert "\ud800" in data["runs"][0]["content"][0]["error_text"]
    # an ASCII-only stdout: escapes, never an encoding error half-way through
    done = _cli("--show-content", str(tmp_path), env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0 and b"Traceback" not in done.stderr


# -- 10: damaged logs of every kind --------------------------------------------------------

#: a missing value, a scalar of another type, an unhashable list (a JSON Schema's "type"), an object
_BAD: tuple[Any, ...] = (None, 7, ["string", "null"], {})


def _places(value: Any, depth: int = 3, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if depth == 0:
        return
    items = value.items() if isinstance(value, dict) else enumerate(value[:3])
    for key, inner in items:
        yield (*at, key)
        if isinstance(inner, dict | list):
            yield from _places(inner, depth - 1, (*at, key))


def _with(value: Any, place: tuple[Any, ...], bad: Any) -> Any:
    value = copy.deepcopy(value)
    holder = value
    for key in place[:-1]:
        holder = holder[key]
    holder[place[-1]] = bad
    return value


def _never_a_crash(kind: str, path: Path) -> None:
    try:
        list(importer(kind).read(path))
    except TranscriptError as exc:
        assert exc.path == str(path)


@pytest.mark.parametrize(
    ("kind", "fixture", "lines"),
    [
        ("qwen-code", "qwen-code/mostly-successful.jsonl", 12),
        ("codex", "codex/failing.rollout.jsonl", 16),
        ("claude-code", "claude-code/failing.session.jsonl", 12),
        ("claude-code", "claude-code/failing.stream.jsonl", 12),
    ],
)
def test_a_damaged_record_is_an_error_naming_the_file_never_a_crash(
    tmp_path: Path, kind: str, fixture: str, lines: int
) -> None:
    records = lines_of(FIXTURES / fixture)[:lines]  # (the first lines hold every record type)
    target = tmp_path / Path(fixture).name
    for index, record in enumerate(records):
        for place in _places(record):
            for bad in _BAD:
                damaged = [*records[:index], _with(record, place, bad), *records[index + 1 :]]
                write(target, damaged)
                _never_a_crash(kind, target)


@pytest.mark.parametrize("fixture", ["submits.traj.json", "v1-submits.traj.json"])
def test_a_damaged_trajectory_is_an_error_never_a_crash(tmp_path: Path, fixture: str) -> None:
    document = json.loads((FIXTURES / "mini-swe-agent" / fixture).read_text())
    target = tmp_path / fixture
    for place in _places(document, depth=4):
        if place[:2] == ("info", "config"):
            continue  # the model config: never read but for its model name
        for bad in _BAD:
            target.write_text(json.dumps(_with(document, place, bad)))
            _never_a_crash("mini-swe-agent", target)


def test_the_status_of_a_qwen_result_that_is_a_list_names_the_line(tmp_path: Path) -> None:
    records = lines_of(QWEN)
    at = next(i for i, r in enumerate(records) if r.get("type") == "tool_result")
    records[at]["toolCallResult"]["status"] = ["error"]
    path = write(tmp_path / "q.jsonl", records)
    with pytest.raises(TranscriptError, match=rf":{at + 1}: unknown toolCallResult.status"):
        list(importer("qwen-code").read(path))


# -- 11: this project's own history mentioning mini-swe-agent ------------------------------


def test_own_history_that_mentions_minisweagent_is_not_a_trajectory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = OWN.read_text()
    mention = 'use \\"minisweagent.agents.default.DefaultAgent\\" and \\"mini_version\\"'
    assert text.count('"text":"read the config"') == 1
    text = text.replace('"text":"read the config"', f'"text":"read the config; {mention}"')
    path = tmp_path / "history.jsonl"
    path.write_text(text)
    assert b'"minisweagent.' in path.read_bytes()[: 64 << 10]
    (source,) = discover([str(path)]).sources
    assert source.kind == "tool-failure-guard"
    status, out, _ = _run(capsys, str(tmp_path))
    assert status == 0 and "fleet: 2 runs" in out


# -- 12: --plot ------------------------------------------------------------------------


def test_plot_to_a_non_png_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = _run(capsys, "--plot", str(tmp_path / "rules.txt"), str(tmp_path / "nope"))
    assert status == 2 and out == ""
    assert "--plot" in err and "rules.txt" in err and ".png" in err
    assert "no such file" not in err  # refused before the paths were looked at
    status, _, err = _run(capsys, "--plot", str(tmp_path / "x" / "a.png"), str(QWEN))
    assert status == 2 and "no directory" in err


def test_plot_into_a_directory_writes_inside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    folder = tmp_path / "plots"
    folder.mkdir()
    status, _, _ = _run(capsys, "--plot", str(folder), str(QWEN))
    assert status == 0
    assert (folder / "transcripts.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plots"]  # no plots.png beside
    assert [p.name for p in folder.iterdir()] == ["transcripts.png"]  # no temporary left


# -- 13: /dev/zero, FIFOs, process substitution --------------------------------------------


def test_a_device_is_refused_by_name_unread(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _run(capsys, "/dev/zero")
    assert status == 2
    assert "/dev/zero: a character device, not a transcript file, directory or pipe" in err


def _feed(path: str, data: bytes) -> threading.Thread:
    def writer() -> None:
        with open(path, "wb") as handle:
            handle.write(data)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    return thread


def test_a_fifo_is_read_as_a_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    thread = _feed(str(fifo), QWEN.read_bytes())
    status, out, _ = _run(capsys, "--json", str(fifo))
    thread.join(10)
    assert status == 0
    data = json.loads(out)
    assert data["files"] == [{"path": str(fifo), "kind": "qwen-code", "runs": 1}]
    assert data["runs"][0]["source"] == str(fifo) and data["runs"][0]["calls"] == 5


def test_a_process_substitution_is_read_as_a_stream(capsys: pytest.CaptureFixture[str]) -> None:
    read, written = os.pipe()  # what bash hands over for <(zcat log.gz): /dev/fd/N, a pipe

    def writer() -> None:
        with os.fdopen(written, "wb") as handle:
            handle.write(QWEN.read_bytes())

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        status, out, _ = _run(capsys, f"/dev/fd/{read}")
        thread.join(10)
    finally:
        os.close(read)
    assert status == 0 and "fleet: 1 runs" in out


def test_a_damaged_stream_names_the_stream_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "cut.fifo"
    os.mkfifo(fifo)
    thread = _feed(str(fifo), QWEN.read_bytes().rstrip(b"\n")[:-5])
    status, _, err = _run(capsys, str(fifo))
    thread.join(10)
    assert status == 2 and f"{fifo}:22: truncated" in err


def test_a_stream_past_the_bound_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_read, "MAX_FILE_BYTES", 1000)
    fifo = tmp_path / "big.fifo"
    os.mkfifo(fifo)
    thread = _feed(str(fifo), QWEN.read_bytes())
    status, _, err = _run(capsys, str(fifo))
    thread.join(10)
    assert status == 2 and f"{fifo}: a stream longer than 1000 bytes" in err


def test_a_fifo_in_a_walked_directory_is_listed_never_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(QWEN, tmp_path)
    os.mkfifo(tmp_path / "pipe")  # no writer: opening it would block for ever
    status, out, _ = _run(capsys, str(tmp_path))
    assert status == 1 and "pipe: a named pipe: not read in a walked directory" in out


def test_an_empty_folder_or_one_without_a_run_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = _run(capsys, str(tmp_path))
    assert status == 2 and out == "" and "no run could be read (0 transcripts read" in err
    (tmp_path / "notes.txt").write_text("x\n")
    damaged = tmp_path / "cut.jsonl"
    damaged.write_bytes(QWEN.read_bytes().rstrip(b"\n")[:-5])
    status, out, err = _run(capsys, str(tmp_path))
    assert status == 2 and out == ""
    assert "no run could be read (0 transcripts read, 2 files skipped)" in err
    assert f"skipped {damaged}: line 22: truncated" in err
