"""The Claude Code importer, on session logs and stream-json captured from the real CLI.

Every row of its mapping table (``docs/transcripts.md``, "Claude Code") is asserted:
the rows the capture produced on the real fixtures; the others (an interrupted call,
a refusal at the terminal, a permission error, an error it cannot classify, a call
with no result) on a real fixture whose one result is rewritten as the published
format records that case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from transcript_files import CLAUDE, CODEX, Record, canonical_sha256, edited, lines_of, outcome_rows

from tool_failure_guard.transcripts.importers import claude_code, codex, importer
from tool_failure_guard.transcripts.model import Run

FAILING_SESSION = CLAUDE / "failing.session.jsonl"
FAILING_STREAM = CLAUDE / "failing.stream.jsonl"
SUCCESS_SESSION = CLAUDE / "success.session.jsonl"
SUCCESS_STREAM = CLAUDE / "success.stream.jsonl"

NF = ("error", "error", "file_not_found", True, False)
SHELL = ("error", "error", "shell_execute_error", True, False)
#: What the real failing run did, call by call (tool, then the mapping table's columns).
FAILING = [
    [("Read", *NF), ("Bash", *SHELL)],
    [("Read", *NF)],
    [("Read", *NF), ("Read", *NF)],
    [("Bash", *SHELL)],
    [
        ("Read", "error", "not_started", "invalid_tool_params", True, False),
        ("NoSuchTool", "error", "not_started", "tool_not_registered", True, False),
    ],
    [("Write", "cancelled", "not_started", None, True, False)],
    [("mcp__fs__read_text_file", "error", "error", "mcp_tool_error", False, True)],
    [("mcp__fs__list_allowed_directories", "success", "success", None, False, True)],
    [("Bash", "error", "error", "execution_timeout", True, False)],
]
OK = ("success", "success", None, False, False)
SUCCESS = [[("Read", *OK), ("Bash", *OK)], [("Write", *OK)], []]


def only(path: Path | str) -> Run:
    runs = list(claude_code.read(str(path)))
    assert len(runs) == 1
    return runs[0]


def head(path: Path | str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(64 * 1024)


@pytest.mark.parametrize("path", [FAILING_SESSION, FAILING_STREAM])
def test_the_failing_run_maps_every_observed_row(path: Path) -> None:
    run = only(path)
    assert outcome_rows(run) == FAILING
    assert run.agent == "claude-code" and run.source == str(path)
    assert run.model == "claude-sonnet-4-5"
    session_id = lines_of(path)[-1].get("session_id") or lines_of(path)[-1].get("sessionId")
    assert run.run_id == session_id


@pytest.mark.parametrize("path", [SUCCESS_SESSION, SUCCESS_STREAM])
def test_the_successful_run(path: Path) -> None:
    assert outcome_rows(only(path)) == SUCCESS


def test_success_is_what_the_log_records() -> None:
    # stream-json's result record: error_max_turns / success
    assert only(FAILING_STREAM).succeeded is False
    assert only(SUCCESS_STREAM).succeeded is True
    # a session log records only running out of turns
    assert only(FAILING_SESSION).succeeded is False
    assert only(SUCCESS_SESSION).succeeded is None


def test_a_batch_is_one_assistant_message_over_its_lines() -> None:
    records = lines_of(FAILING_SESSION)
    first = only(FAILING_SESSION).turns[0]
    # the first message (text, Read, Bash) is three lines sharing one message.id
    ids = [r["message"]["id"] for r in records if r.get("type") == "assistant"]
    assert ids[:3] == [ids[0]] * 3 and ids[3] != ids[0]
    assert records[first.line - 1]["message"]["id"] == ids[0]
    assert [c.call_id for c in first.calls] == ["toolu_0100fake", "toolu_0101fake"]


def test_lines_of_one_message_group_even_when_a_result_comes_between(tmp_path: Path) -> None:
    # Claude Code may run a call while the message still streams: its result line then
    # falls between the message's lines
    def move_first_result_up(records: list[Record]) -> list[Record]:
        bash = next(i for i, r in enumerate(records) if _tool_use(r, "toolu_0101fake"))
        result = next(i for i, r in enumerate(records) if _result_of(r, "toolu_0100fake"))
        moved = records.pop(result)
        records.insert(bash, moved)
        return records

    path = edited(FAILING_SESSION, tmp_path / "s.jsonl", move_first_result_up)
    assert outcome_rows(only(path)) == FAILING


def test_tokens_are_the_recorded_usage() -> None:
    session = only(FAILING_SESSION)
    assert [(t.input_tokens, t.output_tokens) for t in session.turns] == [(120, 30)] * 9
    done = only(SUCCESS_SESSION).turns[-1]
    assert (done.input_tokens, done.output_tokens) == (150, 12)
    # stream-json lines carry the usage of the message's start: output is not final
    stream = only(FAILING_STREAM)
    assert [(t.input_tokens, t.output_tokens) for t in stream.turns] == [(120, None)] * 9


def test_input_tokens_count_the_cache(tmp_path: Path) -> None:
    def cached(records: list[Record]) -> list[Record]:
        for r in records:
            if r.get("type") == "assistant":
                r["message"]["usage"].update(
                    cache_creation_input_tokens=7, cache_read_input_tokens=1000
                )
        return records

    run = only(edited(SUCCESS_SESSION, tmp_path / "s.jsonl", cached))
    assert run.turns[0].input_tokens == 120 + 7 + 1000


def test_arguments_fingerprint_is_the_sha256_of_canonical_json() -> None:
    run = only(FAILING_SESSION)
    inputs = {
        b["id"]: b["input"]
        for r in lines_of(FAILING_SESSION)
        if r.get("type") == "assistant"
        for b in r["message"]["content"]
        if b["type"] == "tool_use"
    }
    calls = [c for t in run.turns for c in t.calls]
    for call in calls:
        assert call.arguments_fingerprint == canonical_sha256(inputs[call.call_id])
    reads = {
        c.arguments_fingerprint
        for c in calls
        if c.tool == "Read" and c.error_type == "file_not_found"
    }
    assert len(reads) == 1  # the same missing file each time
    assert len({c.arguments_fingerprint for c in calls}) > 3
    # the session log and the stream agree on every call
    stream = [c for t in only(FAILING_STREAM).turns for c in t.calls]
    assert [c.arguments_fingerprint for c in stream] == [c.arguments_fingerprint for c in calls]


def test_error_text_is_kept_for_failures_only() -> None:
    calls = [c for t in only(FAILING_SESSION).turns for c in t.calls]
    assert calls[0].error_text is not None and "File does not exist" in calls[0].error_text
    assert all(c.error_text is None for t in only(SUCCESS_SESSION).turns for c in t.calls)


# -- rows the capture did not produce: a real result rewritten as the format records them --


def _tool_use(record: Record, call_id: str) -> bool:
    return record.get("type") == "assistant" and any(
        b.get("id") == call_id for b in record["message"]["content"] if isinstance(b, dict)
    )


def _result_of(record: Record, call_id: str) -> bool:
    content = record.get("message", {}).get("content")
    return (
        record.get("type") == "user"
        and isinstance(content, list)
        and any(b.get("tool_use_id") == call_id for b in content)
    )


def _bash_result(tmp_path: Path, content: Any, is_error: bool | None, structured: Any) -> Any:
    """The successful run with its ``echo ok`` result replaced."""

    def rewrite(records: list[Record]) -> list[Record]:
        bash = next(
            b["id"]
            for r in records
            if r.get("type") == "assistant"
            for b in r["message"]["content"]
            if b.get("name") == "Bash"
        )
        for r in records:
            if _result_of(r, bash):
                block = r["message"]["content"][0]
                block["content"] = content
                block.pop("is_error", None)
                if is_error is not None:
                    block["is_error"] = is_error
                r["toolUseResult"] = structured
        return records

    path = edited(SUCCESS_SESSION, tmp_path / "s.jsonl", rewrite)
    return only(path).turns[0].calls[1]


@pytest.mark.parametrize(
    ("content", "is_error", "structured", "expected"),
    [
        pytest.param(
            "ok",
            None,
            {"stdout": "", "stderr": "", "interrupted": True},
            ("cancelled", "cancelled", None, False),
            id="interrupted flag",
        ),
        pytest.param(
            "[Request interrupted by user for tool use]",
            True,
            "Error: [Request interrupted by user for tool use]",
            ("cancelled", "cancelled", None, True),
            id="interrupted text",
        ),
        pytest.param(
            "The user doesn't want to proceed with this tool use. The tool use was rejected.",
            True,
            "Error: rejected",
            ("cancelled", "not_started", None, True),
            id="refused at the terminal",
        ),
        pytest.param(
            "The user doesn't want to take this action right now. STOP what you are doing and "
            "wait for the user to tell you how to proceed.",
            True,
            "Error: declined",
            ("cancelled", "not_started", None, True),
            id="permission declined",
        ),
        pytest.param(
            "<tool_use_error>File has not been read yet. Read it first.</tool_use_error>",
            True,
            "Error: File has not been read yet.",
            ("error", "not_started", "invalid_tool_params", True),
            id="other validation refusal",
        ),
        pytest.param(
            [{"type": "text", "text": "EACCES: permission denied, open '/x'"}],
            True,
            "Error: EACCES",
            ("error", "error", "permission_denied", True),
            id="permission denied (text blocks)",
        ),
        pytest.param(
            "Request timed out",
            True,
            "Error: Request timed out",
            ("error", "error", "execution_timeout", True),
            id="timed out",
        ),
        pytest.param(
            "something else went wrong",
            True,
            "Error: something else went wrong",
            ("error", "error", "execution_failed", False),
            id="unclassified error",
        ),
        pytest.param(
            "ok\n",
            False,
            {"stdout": "ok", "stderr": "", "interrupted": False},
            ("success", "success", None, False),
            id="success",
        ),
    ],
)
def test_rows_from_the_published_format(
    tmp_path: Path, content: Any, is_error: bool | None, structured: Any, expected: tuple[Any, ...]
) -> None:
    call = _bash_result(tmp_path, content, is_error, structured)
    assert (
        call.status.value,
        call.execution_status.value,
        call.error_type,
        call.heuristic,
    ) == expected


def test_a_call_without_a_result_is_unknown(tmp_path: Path) -> None:
    def drop_last_result(records: list[Record]) -> list[Record]:
        index = max(i for i, r in enumerate(records) if _result_of(r, "toolu_0800fake"))
        return records[:index]

    run = only(edited(FAILING_SESSION, tmp_path / "s.jsonl", drop_last_result))
    last = run.turns[-1].calls[-1]
    assert (last.status.value, last.execution_status.value, last.error_type) == (
        "error",
        "unknown",
        None,
    )


TWO_SESSION = CLAUDE / "two-prompts.session.jsonl"
TWO_STREAM = CLAUDE / "two-prompts.stream.jsonl"


@pytest.mark.parametrize("path", [TWO_SESSION, TWO_STREAM])
def test_each_prompt_is_a_run(path: Path) -> None:
    # the real `claude -p` then `claude -p --continue`: one session, two prompts
    runs = list(claude_code.read(str(path)))
    session = lines_of(TWO_SESSION)[0]["sessionId"]
    assert [r.run_id for r in runs] == [f"{session}/1", f"{session}/2"]
    assert [outcome_rows(r) for r in runs] == [
        [[("Read", *OK)], []],
        [[("Read", *NF)], [("Read", *NF)], []],
    ]
    # stream-json says how each prompt ended; the session log does not
    expected = [True, True] if path == TWO_STREAM else [None, None]
    assert [r.succeeded for r in runs] == expected
    assert runs[0].turns[-1].line < runs[1].turns[0].line


def test_sidechain_and_synthetic_messages_are_not_turns(tmp_path: Path) -> None:
    def mark(records: list[Record]) -> list[Record]:
        for r in records:
            if _tool_use(r, "toolu_0200fake") or _result_of(r, "toolu_0200fake"):
                r["isSidechain"] = True  # a subagent's call
            if r.get("type") == "assistant" and r["message"]["id"] == "msg_0003fake":
                r["message"]["model"] = "<synthetic>"  # Claude Code's own message
        return records

    run = only(edited(FAILING_SESSION, tmp_path / "s.jsonl", mark))
    assert [len(t.calls) for t in run.turns] == [2, 1, 2, 1, 1, 1, 1]


def test_sniff_tells_claude_code_from_others() -> None:
    for path in CLAUDE.glob("*.jsonl"):
        assert claude_code.sniff(str(path), head(path))
        assert not codex.sniff(str(path), head(path))
    for path in CODEX.glob("*.jsonl"):
        assert not claude_code.sniff(str(path), head(path))
    # Qwen Code's chat records (Gemini contents: parts) and our own history's header
    qwen = b'{"uuid": "u", "parentUuid": null, "sessionId": "s", "type": "user", '
    qwen += b'"message": {"role": "user", "parts": [{"text": "hi"}]}}\n'
    assert not claude_code.sniff("x", qwen)
    own = b'{"type": "session", "version": 1, "session_id": "s", "cwd": "/w"}\n'
    assert not claude_code.sniff("x", own)
    assert not claude_code.sniff("x", b"not json\n")
    assert importer("claude-code") is claude_code


def test_claude_codes_own_user_notes_are_not_prompts(tmp_path: Path) -> None:
    def add_notes(records: list[Record]) -> list[Record]:
        base = next(r for r in records if r.get("type") == "user")
        notes = []
        for content in (
            [{"type": "text", "text": "[Request interrupted by user]"}],
            "<command-name>/cost</command-name>",
            "<local-command-stdout>$0.00</local-command-stdout>",
        ):
            note = dict(base, message={"role": "user", "content": content})
            notes.append(note)
        meta = dict(base, isMeta=True)
        at = next(i for i, r in enumerate(records) if _result_of(r, "toolu_0100fake"))
        return records[:at] + notes + [meta] + records[at:]

    assert outcome_rows(only(edited(SUCCESS_SESSION, tmp_path / "s.jsonl", add_notes))) == SUCCESS


def test_a_session_log_may_start_with_records_that_name_no_session(tmp_path: Path) -> None:
    # what Claude Code writes first in many logs: a title summary, a file-history snapshot
    def prepend(records: list[Record]) -> list[Record]:
        summary = {"type": "summary", "summary": "Reading a file", "leafUuid": "u-1"}
        snapshot = {
            "type": "file-history-snapshot",
            "messageId": "m-1",
            "snapshot": {"messageId": "m-1", "trackedFileBackups": {}, "timestamp": "t"},
            "isSnapshotUpdate": False,
        }
        return [summary, snapshot, *records]

    path = edited(SUCCESS_SESSION, tmp_path / "s.jsonl", prepend)
    assert claude_code.sniff(path, head(path))
    run = only(path)
    assert outcome_rows(run) == SUCCESS
    assert run.run_id == lines_of(SUCCESS_SESSION)[0]["sessionId"]
