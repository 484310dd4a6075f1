"""The Codex CLI importer, on rollouts captured from the real CLI.

Every row of its mapping table (``docs/transcripts.md``, "Codex CLI") is asserted: the
rows the capture produced on the real fixtures; the others (a declined or interrupted
command, a failed or interrupted MCP call, dynamic tools and file changes, the older
shell tool's JSON output, an aborted call, a call with no result) on a real rollout
whose one result is rewritten as the published format (the app-server schema
``codex app-server generate-json-schema`` prints) records that case.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from transcript_files import CLAUDE, CODEX, Record, canonical_sha256, edited, lines_of, outcome_rows

from tool_failure_guard.transcripts.importers import claude_code, codex, importer
from tool_failure_guard.transcripts.model import Run, TranscriptError

FAILING = CODEX / "failing.rollout.jsonl"
SUCCESS = CODEX / "success.rollout.jsonl"

SHELL = ("exec_command", "error", "error", "shell_execute_error", False, False)
PARAMS = ("exec_command", "error", "not_started", "invalid_tool_params", True, False)
#: What the real failing run did, call by call (tool, then the mapping table's columns).
FAILING_ROWS = [
    [SHELL, SHELL],
    [SHELL],
    [SHELL, SHELL],
    [PARAMS],  # `command` instead of `cmd`
    [("shell", "error", "not_started", "tool_not_registered", True, False)],
    [PARAMS],  # arguments that are not JSON
    [("exec_command", "cancelled", "not_started", None, True, False)],  # escalation refused
    [("exec_command", "error", "error", "shell_execute_error", True, False)],  # sandbox: exit 1
    [("mcp__fs__read_text_file", "error", "error", "mcp_tool_error", False, True)],
    [("mcp__fs__list_allowed_directories", "success", "success", None, False, True)],
]
OK = ("exec_command", "success", "success", None, False, False)


def only(path: Path | str) -> Run:
    runs = list(codex.read(str(path)))
    assert len(runs) == 1
    return runs[0]


def head(path: Path | str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(64 * 1024)


def thread_id(path: Path) -> str:
    return str(lines_of(path)[0]["payload"]["id"])


def test_the_failing_run_maps_every_observed_row() -> None:
    run = only(FAILING)
    assert outcome_rows(run) == FAILING_ROWS
    assert run.agent == "codex" and run.source == str(FAILING)
    assert run.run_id == thread_id(FAILING)
    assert run.model == "test-model"


def test_the_successful_run() -> None:
    run = only(SUCCESS)
    assert outcome_rows(run) == [[OK, OK], []]


def test_success_is_the_task_completion() -> None:
    assert only(SUCCESS).succeeded is True
    assert only(FAILING).succeeded is False  # task_complete with an error (the HTTP 400)


def test_an_aborted_or_unfinished_task(tmp_path: Path) -> None:
    def abort(records: list[Record]) -> list[Record]:
        last = records[-1]
        assert last["payload"]["type"] == "task_complete"
        last["payload"] = {"type": "turn_aborted", "reason": "interrupted"}
        return records

    assert only(edited(SUCCESS, tmp_path / "a.jsonl", abort)).succeeded is False
    unfinished = edited(SUCCESS, tmp_path / "u.jsonl", lambda records: records[:-1])
    assert only(unfinished).succeeded is None


def test_a_batch_is_one_model_response() -> None:
    records = lines_of(FAILING)
    run = only(FAILING)
    first = run.turns[0]
    # the first response: a message, then two function calls, then its usage record
    assert records[first.line - 1]["payload"]["type"] == "message"
    assert [c.call_id for c in first.calls] == ["call_0100fake", "call_0101fake"]
    assert [len(t.calls) for t in run.turns] == [2, 1, 2, 1, 1, 1, 1, 1, 1, 1]


def test_tokens_are_each_responses_usage() -> None:
    run = only(FAILING)
    assert [(t.input_tokens, t.output_tokens) for t in run.turns] == [(120, 30)] * 10
    done = only(SUCCESS).turns[-1]
    assert (done.input_tokens, done.output_tokens) == (150, 12)


def test_tokens_from_token_count_where_there_are_no_usage_records(tmp_path: Path) -> None:
    def older(records: list[Record]) -> list[Record]:
        return [r for r in records if r["type"] != "token_usage_record"]

    run = only(edited(SUCCESS, tmp_path / "o.jsonl", older))
    assert [(t.input_tokens, t.output_tokens) for t in run.turns] == [(120, 30), (150, 12)]


def test_arguments_fingerprint() -> None:
    arguments = {
        r["payload"]["call_id"]: r["payload"]["arguments"]
        for r in lines_of(FAILING)
        if r["payload"].get("type") == "function_call"
    }
    calls = [c for t in only(FAILING).turns for c in t.calls]
    for call in calls:
        raw = arguments[call.call_id]
        try:
            expected = canonical_sha256(json.loads(raw))
        except ValueError:  # the arguments that are not JSON: their text
            import hashlib

            expected = "sha256:" + hashlib.sha256(raw.encode()).hexdigest()
        assert call.arguments_fingerprint == expected
    cats = {c.arguments_fingerprint for c in calls[:5] if c.call_id != "call_0101fake"}
    assert len(cats) == 1  # `cat missing.txt`, four times


def test_error_text_is_what_the_model_was_shown() -> None:
    calls = [c for t in only(FAILING).turns for c in t.calls]
    assert calls[0].error_text is not None and "No such file or directory" in calls[0].error_text
    mcp = calls[-2]
    assert mcp.error_text is not None and "ENOENT" in mcp.error_text  # input_text items
    assert all(c.error_text is None for t in only(SUCCESS).turns for c in t.calls)


# -- rows the capture did not produce: a real result rewritten as the format records them --


def _first_result(tmp_path: Path, item: dict[str, Any] | None, output: Any = "ok") -> Any:
    """The successful rollout with its first call's completed item and output replaced."""

    def rewrite(records: list[Record]) -> list[Record]:
        out = []
        for r in records:
            payload = r["payload"]
            if payload.get("type") == "item_completed" and payload["item"]["id"] == "call_0100fake":
                if item is None:
                    continue
                payload["item"] = {"id": "call_0100fake", **item}
            if (
                payload.get("type") == "function_call_output"
                and payload["call_id"] == "call_0100fake"
            ):
                if output is None:
                    continue
                payload["output"] = output
            out.append(r)
        return out

    return only(edited(SUCCESS, tmp_path / "r.jsonl", rewrite)).turns[0].calls[0]


@pytest.mark.parametrize(
    ("item", "output", "expected"),
    [
        pytest.param(
            {"type": "CommandExecution", "status": "declined", "exit_code": None},
            "exec command rejected by user",
            ("cancelled", "not_started", None, False),
            id="command declined",
        ),
        pytest.param(
            {"type": "commandExecution", "status": "completed", "exitCode": 0},
            "ok",
            ("success", "success", None, False),
            id="camelCase item",
        ),
        pytest.param(
            {"type": "McpToolCall", "status": "failed", "error": {"message": "gone"}},
            "gone",
            ("error", "error", "mcp_tool_error", False),
            id="mcp call failed",
        ),
        pytest.param(
            {"type": "CollabAgentToolCall", "status": "interrupted"},
            "x",
            ("cancelled", "cancelled", None, False),
            id="interrupted item",
        ),
        pytest.param(
            {"type": "DynamicToolCall", "status": "completed", "success": False},
            "x",
            ("error", "error", "execution_failed", False),
            id="dynamic tool unsuccessful",
        ),
        pytest.param(
            {"type": "FileChange", "status": "failed"},
            "x",
            ("error", "error", "execution_failed", False),
            id="file change failed",
        ),
        pytest.param(
            {"type": "FileChange", "status": "completed"},
            "x",
            ("success", "success", None, False),
            id="file change applied",
        ),
        pytest.param(
            None,
            '{"output":"cat: x: No such file","metadata":{"exit_code":1,"duration_seconds":0.0}}',
            ("error", "error", "shell_execute_error", False),
            id="older shell output, exit 1",
        ),
        pytest.param(
            None,
            '{"output":"hello","metadata":{"exit_code":0,"duration_seconds":0.0}}',
            ("success", "success", None, False),
            id="older shell output, exit 0",
        ),
        pytest.param(
            None,
            {"content": "failed", "success": False},
            ("error", "error", "execution_failed", False),
            id="output with success false",
        ),
        pytest.param(None, "aborted", ("cancelled", "cancelled", None, True), id="aborted"),
        pytest.param(
            None,
            "Chunk ID: 1\nProcess exited with code 0\nOutput:\nok\n",
            ("success", "success", None, False),
            id="exit 0 text",
        ),
        pytest.param(
            None,
            "apply_patch verification failed: Failed to find expected lines in a.py:\nx = 1",
            ("error", "error", "execution_failed", True),
            id="apply_patch verification failed",
        ),
        pytest.param(
            None,
            "collab spawn failed: agent thread limit reached",
            ("error", "error", "execution_failed", True),
            id="spawn_agent failed",
        ),
        pytest.param(
            None,
            "write_stdin failed: Unknown process id 7",
            ("error", "error", "execution_failed", True),
            id="write_stdin to an unknown process",
        ),
        pytest.param(
            None,
            "resources/list failed: server fs: connection closed",
            ("error", "error", "mcp_tool_error", True),
            id="resources/list failed",
        ),
        pytest.param(None, "Plan updated", ("success", "success", None, False), id="plain output"),
        pytest.param(None, None, ("error", "unknown", None, False), id="no result"),
    ],
)
def test_rows_from_the_published_format(
    tmp_path: Path, item: dict[str, Any] | None, output: Any, expected: tuple[Any, ...]
) -> None:
    call = _first_result(tmp_path, item, output)
    assert (
        call.status.value,
        call.execution_status.value,
        call.error_type,
        call.heuristic,
    ) == expected


def test_each_task_is_a_run() -> None:
    # the real `codex exec`, then `codex exec resume --last`: one thread, two tasks
    path = CODEX / "two-prompts.rollout.jsonl"
    runs = list(codex.read(str(path)))
    base = thread_id(path)
    assert [r.run_id for r in runs] == [f"{base}/1", f"{base}/2"]
    failed = ("exec_command", "error", "error", "shell_execute_error", False, False)
    assert [outcome_rows(r) for r in runs] == [[[OK], []], [[failed], [failed], []]]
    assert [r.succeeded for r in runs] == [True, True]
    assert [[t.input_tokens for t in r.turns] for r in runs] == [[120, 120], [120, 120, 150]]


def test_sniff_tells_codex_from_others() -> None:
    for path in CODEX.glob("*.jsonl"):
        assert codex.sniff(str(path), head(path))
        assert not claude_code.sniff(str(path), head(path))
    for path in CLAUDE.glob("*.jsonl"):
        assert not codex.sniff(str(path), head(path))
    # a session_meta line longer than the head is still recognised
    assert codex.sniff(
        "x", b'{"timestamp":"2026-12-02T00:00:00Z","ordinal":0,"type":"session_meta",'
    )
    assert not codex.sniff("x", b'{"timestamp": 1, "type": "other", "payload": {}}\n')
    assert importer("codex") is codex


# -- damaged files: TranscriptError naming file:line ------------------------------------


def _error(path: Path | str) -> TranscriptError:
    with pytest.raises(TranscriptError) as caught:
        list(codex.read(str(path)))
    return caught.value


def test_a_file_of_another_kind() -> None:
    path = CLAUDE / "success.session.jsonl"
    assert str(_error(path)) == f"{path}:1: not a Codex CLI rollout"


def test_a_truncated_last_line(tmp_path: Path) -> None:
    text = FAILING.read_text(encoding="utf-8")
    path = tmp_path / "cut.jsonl"
    path.write_text(text[: len(text) - 25], encoding="utf-8")
    lines = len(text.splitlines())
    assert str(_error(path)) == (
        f"{path}:{lines}: truncated: the last line is an incomplete JSON record"
    )


def test_bad_json_in_the_middle(tmp_path: Path) -> None:
    lines = FAILING.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[20] = "{" + lines[20]
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    assert str(_error(path)).startswith(f"{path}:21: not a JSON record (")


def test_a_record_without_a_payload_object(tmp_path: Path) -> None:
    def strip(records: list[Record]) -> list[Record]:
        records[3]["payload"] = "gone"
        return records

    path = edited(SUCCESS, tmp_path / "p.jsonl", strip)
    kind = lines_of(SUCCESS)[3]["type"]
    assert str(_error(path)) == f"{path}:4: a {kind} record without a payload object"


def test_a_function_call_without_a_call_id(tmp_path: Path) -> None:
    def strip(records: list[Record]) -> list[Record]:
        for r in records:
            if r["payload"].get("type") == "function_call":
                del r["payload"]["call_id"], r["payload"]["id"]
                break
        return records

    path = edited(SUCCESS, tmp_path / "c.jsonl", strip)
    line = next(
        i for i, r in enumerate(lines_of(SUCCESS), 1) if r["payload"].get("type") == "function_call"
    )
    assert str(_error(path)) == f"{path}:{line}: a function_call item without a call_id"


def test_a_file_too_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tool_failure_guard.transcripts.importers import _read

    monkeypatch.setattr(_read, "MAX_FILE_BYTES", 1000)
    assert str(_error(SUCCESS)) == f"{SUCCESS}: larger than 1000 bytes; split it before importing"


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(SUCCESS.read_bytes()[:200] + b"\xff\xfe\n")
    assert str(_error(path)) == f"{path}:1: not UTF-8 text"


def test_a_still_running_command_falls_back_to_the_output(tmp_path: Path) -> None:
    item = {"type": "CommandExecution", "status": "inProgress", "exit_code": None}
    call = _first_result(tmp_path, item, "Chunk ID: 1\nProcess running with session ID 3\n")
    assert (call.status.value, call.execution_status.value, call.error_type) == (
        "success",
        "success",
        None,
    )


def test_a_long_error_text_is_cut(tmp_path: Path) -> None:
    from tool_failure_guard.agent_outcomes.vocabulary import MAX_ERROR_TEXT

    output = "Process exited with code 1\nOutput:\n" + "x" * (3 * MAX_ERROR_TEXT)
    call = _first_result(tmp_path, None, output)
    assert call.error_type == "shell_execute_error"
    assert call.error_text is not None and len(call.error_text) == MAX_ERROR_TEXT
    assert call.error_text.endswith("…") and call.error_text.startswith("Process exited")
