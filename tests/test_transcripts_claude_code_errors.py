"""The Claude Code importer on damaged files: each is a TranscriptError naming ``file:line``."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_transcripts_claude_code import (
    FAILING_SESSION,
    FAILING_STREAM,
    SUCCESS_SESSION,
    _tool_use,
)
from transcript_files import CODEX, Record, edited, lines_of

from tool_failure_guard.line_input import MAX_LINE_CHARS
from tool_failure_guard.transcripts.importers import _read, claude_code
from tool_failure_guard.transcripts.model import TranscriptError


def _error(path: Path | str) -> TranscriptError:
    with pytest.raises(TranscriptError) as caught:
        list(claude_code.read(str(path)))
    return caught.value


def test_a_file_of_another_kind(tmp_path: Path) -> None:
    path = CODEX / "success.rollout.jsonl"
    error = _error(path)
    assert (error.path, error.line) == (str(path), 1)
    assert str(error).startswith(f"{path}:1: not a Claude Code")


@pytest.mark.parametrize("source", [FAILING_SESSION, FAILING_STREAM])
def test_a_truncated_last_line(tmp_path: Path, source: Path) -> None:
    text = source.read_text(encoding="utf-8")
    path = tmp_path / "cut.jsonl"
    path.write_text(text[: len(text) - 40], encoding="utf-8")
    error = _error(path)
    assert error.line == len(text.splitlines())
    assert (
        str(error) == f"{path}:{error.line}: truncated: the last line is an incomplete JSON record"
    )


def test_bad_json_in_the_middle(tmp_path: Path) -> None:
    lines = FAILING_SESSION.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[9] = lines[9][:30] + "\n"
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    error = _error(path)
    assert error.line == 10 and str(error).startswith(f"{path}:10: not a JSON record (")


def test_a_line_that_is_not_an_object(tmp_path: Path) -> None:
    lines = SUCCESS_SESSION.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(5, "[1, 2]\n")
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    assert str(_error(path)) == f"{path}:6: not a JSON object (a list)"


def test_a_tool_use_without_an_id(tmp_path: Path) -> None:
    def strip(records: list[Record]) -> list[Record]:
        for r in records:
            if _tool_use(r, "toolu_0101fake"):
                del r["message"]["content"][0]["id"]
        return records

    path = edited(FAILING_SESSION, tmp_path / "s.jsonl", strip)
    line = next(
        i for i, r in enumerate(lines_of(FAILING_SESSION), 1) if _tool_use(r, "toolu_0101fake")
    )
    assert str(_error(path)) == f"{path}:{line}: a tool_use block without an id and a name"


def test_an_assistant_record_without_a_message(tmp_path: Path) -> None:
    def strip(records: list[Record]) -> list[Record]:
        records[5]["message"] = "gone"
        return records

    path = edited(SUCCESS_SESSION, tmp_path / "s.jsonl", strip)
    assert str(_error(path)) == f"{path}:6: a assistant record without a message object"


def test_a_line_past_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "long.jsonl"
    first = SUCCESS_SESSION.read_text(encoding="utf-8").splitlines()[0]
    limit = len(first.encode()) + 1  # the first line, its newline included, is at the bound
    monkeypatch.setattr(_read, "MAX_LINE_BYTES", limit)
    path.write_text(first + "\n" + " " * limit + "\n", encoding="utf-8")
    assert str(_error(path)) == f"{path}:2: a record longer than {limit} bytes"


def test_the_line_bound_holds_every_line_the_replay_bound_does() -> None:
    # a line of MAX_LINE_CHARS characters, each of 4 UTF-8 bytes, newline included
    assert _read.MAX_LINE_BYTES >= 4 * MAX_LINE_CHARS


def test_an_empty_or_missing_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    assert str(_error(empty)) == f"{empty}: empty file"
    error = _error(tmp_path / "absent.jsonl")
    assert error.line is None and "cannot read" in str(error)
