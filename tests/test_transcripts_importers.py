"""Each importer's documented mapping, row by row, and the real fixtures it reads.

The rows are written in each agent's own record shape (as its fixture under
``tests/fixtures/transcripts/<kind>/`` shows it); the fixtures themselves were
written by the agents (see that folder's README).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tool_failure_guard.guard import ExecutionStatus as X
from tool_failure_guard.guard import TerminalStatus as T
from tool_failure_guard.transcripts.importers import mini_swe_agent, own_history, qwen_code
from tool_failure_guard.transcripts.importers._read import fingerprint
from tool_failure_guard.transcripts.model import Run, TranscriptError

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"


def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _runs(module: Any, path: Path) -> list[Run]:
    head = path.read_bytes()[: 64 << 10]
    assert module.sniff(path, head), f"{module.KIND} does not claim {path.name}"
    return list(module.read(path))


# -- Qwen Code --------------------------------------------------------------------------


def _qwen_session(
    results: list[dict[str, Any] | None], name: str = "read_file"
) -> list[dict[str, Any]]:
    base = {"sessionId": "s1", "cwd": "/w", "version": "0.24.4"}
    records: list[dict[str, Any]] = [
        {
            **base,
            "uuid": "u0",
            "type": "user",
            "provenance": "real_user",
            "message": {"role": "user", "parts": [{"text": "go"}]},
        },
    ]
    for index, result in enumerate(results):
        call_id = f"c{index}"
        records.append(
            {
                **base,
                "uuid": f"a{index}",
                "type": "assistant",
                "model": "m",
                "message": {
                    "role": "model",
                    "parts": [
                        {"functionCall": {"id": call_id, "name": name, "args": {"n": index}}}
                    ],
                },
                "usageMetadata": {"promptTokenCount": 10 + index, "candidatesTokenCount": 2},
            }
        )
        if result is not None:
            records.append(
                {
                    **base,
                    "uuid": f"r{index}",
                    "type": "tool_result",
                    "message": {
                        "role": "user",
                        "parts": [
                            {
                                "functionResponse": {
                                    "id": call_id,
                                    "name": name,
                                    "response": {"error": f"boom {index}"},
                                }
                            }
                        ],
                    },
                    "toolCallResult": {"callId": call_id, **result},
                }
            )
    return records


@pytest.mark.parametrize(("status", "execution"), sorted(qwen_code.STATUS_TABLE))
def test_qwen_code_status_rows(tmp_path: Path, status: str, execution: str) -> None:
    result = {"status": status, "executionStatus": execution, "errorType": "file_not_found"}
    (run,) = _runs(qwen_code, _jsonl(tmp_path / "s1.jsonl", _qwen_session([result])))
    (call,) = run.turns[0].calls
    terminal, exec_status = qwen_code.STATUS_TABLE[(status, execution)]
    assert (call.status, call.execution_status) == (terminal, exec_status)
    assert call.error_type == ("file_not_found" if terminal is T.ERROR else None)
    assert not call.heuristic
    assert call.error_text == ("boom 0" if terminal is T.ERROR else None)


@pytest.mark.parametrize("execution", [None, "paused", 3])
def test_qwen_code_an_execution_status_outside_the_contract_is_unknown(
    tmp_path: Path, execution: object
) -> None:
    result: dict[str, Any] = {"status": "error", "errorType": "file_not_found"}
    if execution is not None:
        result["executionStatus"] = execution
    (run,) = _runs(qwen_code, _jsonl(tmp_path / "s1.jsonl", _qwen_session([result])))
    call = run.turns[0].calls[0]
    assert (call.status, call.execution_status) == (T.ERROR, X.UNKNOWN)


def test_qwen_code_a_call_without_a_result_is_error_unknown(tmp_path: Path) -> None:
    (run,) = _runs(qwen_code, _jsonl(tmp_path / "s1.jsonl", _qwen_session([None])))
    call = run.turns[0].calls[0]
    assert (call.status, call.execution_status, call.error_type) == (T.ERROR, X.UNKNOWN, None)


def test_qwen_code_an_unknown_terminal_status_names_the_line(tmp_path: Path) -> None:
    records = _qwen_session([{"status": "exploded", "executionStatus": "error"}])
    path = _jsonl(tmp_path / "s1.jsonl", records)
    with pytest.raises(TranscriptError, match=r"s1\.jsonl:3: unknown toolCallResult\.status"):
        list(qwen_code.read(path))


def test_qwen_code_runs_turns_tokens_and_mcp(tmp_path: Path) -> None:
    ok = {"status": "success", "executionStatus": "success"}
    records = _qwen_session([ok, ok], name="mcp__fs__read")
    records += _qwen_session([ok])[:2]  # a second prompt with one turn
    (first, second) = _runs(qwen_code, _jsonl(tmp_path / "s1.jsonl", records))
    assert (first.run_id, second.run_id) == ("s1#1", "s1#2")
    assert [t.input_tokens for t in first.turns] == [10, 11]
    assert all(c.mcp for t in first.turns for c in t.calls)
    assert first.model == "m" and first.succeeded is None
    assert first.turns[0].calls[0].arguments_fingerprint == fingerprint({"n": 0})


def test_qwen_code_fixtures_written_by_qwen_code() -> None:
    varied = _runs(qwen_code, FIXTURES / "qwen-code" / "varied-missing-reads.jsonl")[0]
    calls = [c for t in varied.turns for c in t.calls]
    assert len(calls) == 12 and {c.error_type for c in calls} == {"file_not_found"}
    assert {(c.status, c.execution_status) for c in calls} == {(T.ERROR, X.ERROR)}
    assert len({c.arguments_fingerprint for c in calls}) == 12
    ok = _runs(qwen_code, FIXTURES / "qwen-code" / "mostly-successful.jsonl")[0]
    assert [len(t.calls) for t in ok.turns] == [1, 2, 1, 1, 0]
    assert ok.turns[2].calls[0].error_type == "shell_execute_error"
    assert all(t.input_tokens == 11 and t.output_tokens == 7 for t in ok.turns)


# -- mini-swe-agent ---------------------------------------------------------------------


def _traj(
    path: Path, messages: list[dict[str, Any]], exit_status: str | None = "Submitted"
) -> Path:
    info: dict[str, Any] = {
        "mini_version": "2.4.6",
        "config": {"model": {"model_name": "openai/m"}},
    }
    if exit_status is not None:
        info["exit_status"] = exit_status
    path.write_text(
        json.dumps(
            {"info": info, "messages": messages, "trajectory_format": "mini-swe-agent-1.1"},
            indent=2,
        )
    )
    return path


def _assistant(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "THOUGHT",
        "extra": {
            "actions": [{"command": f"cmd {i}", "tool_call_id": i} for i in ids],
            "response": {"usage": {"prompt_tokens": 5, "completion_tokens": 3}},
        },
    }


def _tool(call_id: str, **extra: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "<returncode>", "extra": extra}


_OBSERVATIONS: dict[str, dict[str, Any]] = {
    "returncode 0": {"returncode": 0, "exception_info": ""},
    "returncode not 0": {"returncode": 2, "exception_info": "", "raw_output": "no such file"},
    "exception TimeoutExpired": {
        "returncode": -1,
        "exception_info": "timed out",
        "exception_type": "TimeoutExpired",
    },
    "another exception": {"returncode": -1, "exception_info": "boom", "exception_type": "OSError"},
    "action was not executed": {"returncode": -1, "exception_info": "action was not executed"},
}


@pytest.mark.parametrize("row", sorted(mini_swe_agent.OBSERVATION_TABLE))
def test_mini_swe_agent_observation_rows(tmp_path: Path, row: str) -> None:
    assert set(_OBSERVATIONS) == set(mini_swe_agent.OBSERVATION_TABLE)
    messages = [
        {"role": "system", "content": "s"},
        _assistant("a"),
        _tool("a", **_OBSERVATIONS[row]),
    ]
    (run,) = _runs(
        mini_swe_agent, _traj(tmp_path / "x.traj.json", messages, exit_status="LimitsExceeded")
    )
    call = run.turns[0].calls[0]
    assert (
        call.status,
        call.execution_status,
        call.error_type,
    ) == mini_swe_agent.OBSERVATION_TABLE[row]
    assert call.tool == "bash" and call.arguments_fingerprint == fingerprint({"command": "cmd a"})
    assert (run.turns[0].input_tokens, run.turns[0].output_tokens) == (5, 3)


def test_mini_swe_agent_a_format_error_is_a_refused_batch_or_an_answer(tmp_path: Path) -> None:
    refused = {
        "role": "user",
        "content": "Unknown tool 'python'.",
        "extra": {
            "interrupt_type": "FormatError",
            "response": {
                "choices": [
                    {
                        "message": {
                            "tool_calls": [
                                {"id": "p1", "function": {"name": "python", "arguments": "{}"}}
                            ]
                        }
                    }
                ]
            },
        },
    }
    no_call = {
        "role": "user",
        "content": "No tool calls",
        "extra": {"interrupt_type": "FormatError", "response": {"choices": [{"message": {}}]}},
    }
    (run,) = _runs(
        mini_swe_agent, _traj(tmp_path / "x.traj.json", [refused, no_call], exit_status=None)
    )
    assert [len(t.calls) for t in run.turns] == [1, 0]
    call = run.turns[0].calls[0]
    assert (call.status, call.execution_status, call.error_type) == mini_swe_agent.REFUSED
    assert run.succeeded is None


def test_mini_swe_agent_the_submitting_batch(tmp_path: Path) -> None:
    messages = [
        _assistant("a", "b", "c"),
        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}},
    ]
    (run,) = _runs(mini_swe_agent, _traj(tmp_path / "x.traj.json", messages))
    axes = [(c.status, c.execution_status, c.error_type) for c in run.turns[0].calls]
    assert axes == [mini_swe_agent.SUCCESS, mini_swe_agent.NOT_RUN, mini_swe_agent.NOT_RUN]
    assert run.succeeded is True
    (limited,) = _runs(
        mini_swe_agent, _traj(tmp_path / "y.traj.json", messages[:1], "LimitsExceeded")
    )
    assert [(c.status, c.execution_status) for c in limited.turns[0].calls] == [
        mini_swe_agent.UNANSWERED[:2]
    ] * 3
    assert limited.succeeded is False


def test_mini_swe_agent_fixtures_written_by_mini_swe_agent() -> None:
    failing = _runs(mini_swe_agent, FIXTURES / "mini-swe-agent" / "failing-command.traj.json")[0]
    assert failing.succeeded is False and failing.model == "openai/test-model"
    assert [c.error_type for t in failing.turns for c in t.calls] == ["shell_execute_error"] * 14
    submits = _runs(mini_swe_agent, FIXTURES / "mini-swe-agent" / "submits.traj.json")[0]
    assert submits.succeeded is True
    kinds = [[c.error_type or str(c.status) for c in t.calls] for t in submits.turns]
    assert kinds == [
        ["shell_execute_error"],
        ["success", "success"],
        ["execution_timeout"],
        [],
        ["invalid_tool_params"],
        ["success"],
    ]


def test_mini_swe_agent_a_cut_short_trajectory_names_its_last_line(tmp_path: Path) -> None:
    text = (FIXTURES / "mini-swe-agent" / "submits.traj.json").read_text()
    cut = tmp_path / "cut.traj.json"
    cut.write_text(text[: len(text) // 2])
    with pytest.raises(TranscriptError, match=r"cut\.traj\.json:\d+: truncated"):
        list(mini_swe_agent.read(cut))


# -- this project's own history -----------------------------------------------------------


def _history(path: Path, responses: list[dict[str, Any] | None]) -> Path:
    records: list[dict[str, Any]] = [
        {"type": "session", "version": 2, "session_id": "s1", "cwd": "/w"}
    ]
    records.append(
        {
            "type": "message",
            "role": "user",
            "kind": "prompt",
            "prompt_id": "p1",
            "parts": [{"kind": "text", "text": "go"}],
        }
    )
    calls = [
        {"kind": "function_call", "call_id": f"c{i}", "name": "read_file", "args": {"i": i}}
        for i in range(len(responses))
    ]
    records.append(
        {"type": "message", "role": "model", "kind": "model", "prompt_id": "p1", "parts": calls}
    )
    parts = [
        dict(kind="function_response", call_id=f"c{i}", name="read_file", text="t", **r)
        for i, r in enumerate(responses)
        if r is not None
    ]
    if parts:
        records.append(
            {
                "type": "message",
                "role": "user",
                "kind": "tool_results",
                "prompt_id": "p1",
                "parts": parts,
            }
        )
    return _jsonl(path, [{k: v for k, v in r.items()} for r in records])


_OWN_ROWS: list[tuple[dict[str, Any], tuple[T, X, str | None]]] = [
    ({"status": "success"}, (T.SUCCESS, X.SUCCESS, None)),
    ({"status": "cancelled"}, (T.CANCELLED, X.CANCELLED, None)),
    ({"status": "error"}, (T.ERROR, X.UNKNOWN, None)),
    ({"status": "error", "error_type": "file_not_found"}, (T.ERROR, X.ERROR, "file_not_found")),
    *(
        ({"status": "error", "error_type": t}, (T.ERROR, x, None if x is X.UNKNOWN else t))
        for t, x in own_history.EXECUTION_BY_TYPE.items()
    ),
]


@pytest.mark.parametrize(("response", "expected"), _OWN_ROWS)
def test_own_history_rows(
    tmp_path: Path, response: dict[str, Any], expected: tuple[T, X, str | None]
) -> None:
    (run,) = _runs(own_history, _history(tmp_path / "s1.jsonl", [response]))
    call = run.turns[0].calls[0]
    assert (call.status, call.execution_status, call.error_type) == expected
    assert run.run_id == "p1" and run.turns[0].input_tokens is None


def test_own_history_an_unsettled_call_and_a_settled_record(tmp_path: Path) -> None:
    path = _history(tmp_path / "s1.jsonl", [None, None])
    settled = {
        "type": "call_settled",
        "prompt_id": "p1",
        "part": {
            "kind": "function_response",
            "call_id": "c1",
            "name": "read_file",
            "status": "error",
            "error_type": "file_not_found",
        },
    }
    with path.open("a") as handle:
        handle.write(json.dumps(settled) + "\n")
    (run,) = _runs(own_history, path)
    first, second = run.turns[0].calls
    assert (first.status, first.execution_status) == (T.ERROR, X.UNKNOWN)
    assert (second.execution_status, second.error_type) == (X.ERROR, "file_not_found")


def test_own_history_a_damaged_line_is_named(tmp_path: Path) -> None:
    path = _history(tmp_path / "s1.jsonl", [{"status": "maybe"}])
    with pytest.raises(TranscriptError, match=r"s1\.jsonl:4: .*status must be one of"):
        list(own_history.read(path))


def test_own_history_fixtures_written_by_the_agent() -> None:
    runs = _runs(own_history, FIXTURES / "tool-failure-guard" / "read-loop-shadow.jsonl")
    assert [sum(len(t.calls) for t in r.turns) for r in runs] == [20, 1]
    assert {c.error_type for t in runs[0].turns for c in t.calls} == {"file_not_found"}


def test_mini_swe_agent_text_based_observations_pair_in_order(tmp_path: Path) -> None:
    """The text-based models: actions without tool-call ids, ``user`` observations in order."""
    assistant = {
        "role": "assistant",
        "content": "```bash\nls\n```",
        "extra": {"actions": [{"command": "ls"}, {"command": "false"}]},
    }
    observations = [
        {
            "role": "user",
            "content": "<returncode>0",
            "extra": {"returncode": 0, "exception_info": ""},
        },
        {
            "role": "user",
            "content": "<returncode>1",
            "extra": {"returncode": 1, "exception_info": ""},
        },
    ]
    path = _traj(tmp_path / "t.traj.json", [assistant, *observations], exit_status="LimitsExceeded")
    (run,) = _runs(mini_swe_agent, path)
    calls = run.turns[0].calls
    assert [c.call_id for c in calls] == ["t0.0", "t0.1"]
    assert [(c.status, c.error_type) for c in calls] == [
        (T.SUCCESS, None),
        (T.ERROR, "shell_execute_error"),
    ]
    assert run.turns[0].input_tokens is None


# -- The one reader: every JSON Lines kind names damage alike -------------------------------

JSONL_FIXTURES = [
    "claude-code/failing.session.jsonl",
    "codex/failing.rollout.jsonl",
    "qwen-code/mostly-successful.jsonl",
    "tool-failure-guard/read-loop-shadow.jsonl",
]


@pytest.mark.parametrize("fixture", JSONL_FIXTURES)
@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"\xff\xfe{}", "not UTF-8 text"),
        (b"[" * 100_000, "JSON nested too deeply"),
        (b'{"broken": ', "not a JSON record (Expecting value)"),
        (b"[1, 2]", "not a JSON object (a list)"),
    ],
)
def test_every_jsonl_kind_names_a_damaged_line_alike(
    tmp_path: Path, fixture: str, line: bytes, message: str
) -> None:
    from tool_failure_guard.transcripts.importers import importer

    source = FIXTURES / fixture
    lines = source.read_bytes().split(b"\n")
    lines[2] = line
    damaged = tmp_path / source.name
    damaged.write_bytes(b"\n".join(lines))
    with pytest.raises(TranscriptError) as caught:
        list(importer(source.parent.name).read(damaged))
    assert str(caught.value) == f"{damaged}:3: {message}"


def test_a_lone_surrogate_in_the_arguments_still_has_a_fingerprint() -> None:
    assert fingerprint(json.loads('{"path": "\\ud800"}')) != fingerprint({"path": "x"})
    assert fingerprint("not json") == fingerprint("not json") != fingerprint('"not json"')
