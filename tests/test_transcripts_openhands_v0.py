"""OpenHands V0 as people have it (issue 39 item 3): trajectories and evaluation outputs.

The fixtures (``tests/fixtures/openhands-v0/``, sources in its README; kept apart from
``tests/fixtures/transcripts/``, which holds only logs written here) are
published OpenHands files: three of OpenHands' own ``tests/runtime/trajs`` trajectories, two
instances of a 2024 evaluation ``output.jsonl`` whose history is ``[action, observation]``
pairs, and two instances of the Multi-SWE-bench example ``output.jsonl`` (history: events).
Counts are checked twice: against numbers written here by hand from reading the files, and
against :func:`independent_counts`, which reads them with its own small logic (never the
importer's).  The mapping's rows are checked on event lists written here.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_transcripts_docs import error_types, table
from transcript_files import FIXTURES, outcome_rows

from tool_failure_guard.commands.cli import main
from tool_failure_guard.transcripts.importers import openhands, openhands_v0_events
from tool_failure_guard.transcripts.model import Run, TranscriptError
from tool_failure_guard.transcripts.walk import discover

V0 = FIXTURES.parent / "openhands-v0"

#: file -> (runs, calls, failed calls, batches), by hand from the files:
#: basic_gui_mode: `mkdir`, two edits, a server left running (exit code -1), then a message;
#: basic_interactions: three user messages, two answered by messages, the third by `finish`;
#: wrong_initial_state: a view, a command, a view, `finish`;
#: logic-reasoning: per instance two IPython cells (OpenHands counts a cell as successful),
#: a message and `finish` as text actions (no calls);
#: multi-swe-bench: 34 calls, each its own response (14 failing: 2 commands, 11 editor errors of
#: which 5 its parameter checks, 1 refused response), then 50 (25 failing: 12 commands, 12
#: editor errors of which 2 parameter checks, 1 refused response)
BY_HAND = {
    "basic_gui_mode.json": (1, 4, 1, 4),
    "basic_interactions.json": (3, 1, 0, 1),
    "wrong_initial_state.json": (1, 4, 0, 4),
    "logic-reasoning-2024.output.jsonl": (2, 4, 0, 4),
    "multi-swe-bench.output.jsonl": (2, 84, 39, 84),
}

#: OpenHands' ``Action.runnable`` actions (events/action/*.py), written here again
_RUNS = {"run", "run_ipython", "browse", "browse_interactive", "read", "write", "edit"}
_RUNS |= {"call_tool_mcp"}
_REFUSALS = ("Missing required", "Failed to parse tool call", "Parameter '", "Tool ", "Function '")


def _histories(path: Path) -> list[tuple[list[dict[str, Any]], bool]]:
    """Each history as a flat list of events, and whether user messages split it into runs."""
    if path.suffix == ".json":
        return [(json.loads(path.read_text()), True)]
    out = []
    for line in path.read_text().splitlines():
        flat: list[dict[str, Any]] = []
        for item in json.loads(line)["history"]:
            pair = item if isinstance(item, list) else [item]
            flat += [e for e in pair if e.get("observation") != "null"]
        out.append((flat, False))
    return out


def _failed(call: dict[str, Any], result: dict[str, Any] | None) -> bool:
    if result is None:
        return call["action"] in _RUNS  # never answered; finish/think need no answer
    kind, text = result["observation"], result.get("content", "")
    extras = result.get("extras", {})
    if kind in ("error", "user_rejected"):
        return True
    if kind == "run":
        return extras.get("metadata", extras).get("exit_code", 0) != 0
    if kind in ("read", "edit", "write"):
        return text.startswith("ERROR:")
    return kind == "browse" and extras.get("error") is True


def independent_counts(path: Path) -> tuple[int, int, int, int]:
    runs = calls = failed = batches = 0
    for events, split in _histories(path):
        users = sum(1 for e in events if e.get("action") == "message" and e["source"] == "user")
        runs += users if split else 1
        results = {e["cause"]: e for e in events if "observation" in e and "cause" in e}
        made = [e for e in events if "tool_call_metadata" in e and "action" in e]
        made += [e for e in events if e.get("action") in _RUNS and "tool_call_metadata" not in e]
        refused = [
            e
            for e in events
            if e.get("observation") == "error"
            and "cause" not in e
            and e["content"].startswith(_REFUSALS)
        ]
        calls += len(made) + len(refused)
        failed += len(refused) + sum(_failed(e, results.get(e["id"])) for e in made)
        metadata = [e["tool_call_metadata"] for e in made if "tool_call_metadata" in e]
        responses = {m["model_response"]["id"] for m in metadata}
        batches += len(responses) + len(refused)
        batches += sum(1 for e in made if "tool_call_metadata" not in e)
    return runs, calls, failed, batches


def _runs(path: Path) -> list[Run]:
    return list(openhands.read(path))


def _counts(runs: list[Run]) -> tuple[int, int, int, int]:
    calls = [c for r in runs for t in r.turns for c in t.calls]
    return (
        len(runs),
        len(calls),
        sum(c.status.value != "success" for c in calls),
        sum(1 for r in runs for t in r.turns if t.calls),
    )


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_counts_match_a_count_written_independently(name: str) -> None:
    assert _counts(_runs(V0 / name)) == BY_HAND[name] == independent_counts(V0 / name)


def test_every_file_is_sniffed_as_openhands_and_the_report_counts_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    found = discover([str(V0)])
    assert sorted(s.path.name for s in found.sources) == sorted(BY_HAND)
    assert {s.kind for s in found.sources} == {"openhands"}
    assert sorted(s.path.rsplit("/", 1)[-1] for s in found.skipped) == ["LICENSE", "README.md"]
    assert main(["transcripts", "--json", str(V0)]) == 1  # they are skipped
    fleet = json.loads(capsys.readouterr().out)["fleet"]
    totals = [sum(c[i] for c in BY_HAND.values()) for i in range(4)]
    assert [fleet["runs"], fleet["calls"], fleet["failed_calls"], fleet["batches"]] == totals


def test_outcomes_come_from_test_result_then_the_error_then_finish(tmp_path: Path) -> None:
    logic = _runs(V0 / "logic-reasoning-2024.output.jsonl")
    # test_result {"result": false} / {"result": true}, the benchmark's own verdict
    assert [(r.run_id, r.succeeded, r.outcome_from) for r in logic] == [
        ("ProntoQA_1", False, "openhands test_result"),
        ("ProntoQA_2", True, "openhands test_result"),
    ]
    multi = _runs(V0 / "multi-swe-bench.output.jsonl")
    # no verdict yet (only git_patch): the first called finish, the second hit the iteration
    # limit (its `error`)
    assert [(r.run_id, r.succeeded, r.outcome_from) for r in multi] == [
        ("ponylang__ponyc-4593", True, None),
        ("ponylang__ponyc-4588", False, None),
    ]
    assert {r.model for r in multi} == {"openai/openrouter-llama-4-maverick"}
    # after eval_infer: test_result.report.resolved decides, over finish and error alike
    lines = (V0 / "multi-swe-bench.output.jsonl").read_text().splitlines()
    judged = []
    for line, resolved in zip(lines, (False, True), strict=True):
        record = json.loads(line)
        record["test_result"]["report"] = {"resolved": resolved, "empty_generation": False}
        judged.append(json.dumps(record))
    (path := tmp_path / "output.swebench_eval.jsonl").write_text("\n".join(judged) + "\n")
    assert [(r.succeeded, r.outcome_from) for r in _runs(path)] == [
        (False, "openhands test_result"),
        (True, "openhands test_result"),
    ]
    trajectories = [_runs(V0 / n) for n in ("basic_gui_mode.json", "wrong_initial_state.json")]
    # awaiting_user_input is neither; the second called finish
    assert [[r.succeeded for r in t] for t in trajectories] == [[None], [True]]


def _action(number: int, kind: str, response: str | None, **args: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"id": number, "source": "agent", "action": kind, "args": args}
    if response is not None:
        event["tool_call_metadata"] = {
            "function_name": {"run": "execute_bash", "call_tool_mcp": "fs_read"}.get(kind, kind),
            "tool_call_id": f"call_{number}",
            "model_response": {"id": response, "usage": {"prompt_tokens": 7}},
            "total_calls_in_response": 1,
        }
    return event


def _observation(cause: int | None, kind: str, content: str = "", **extras: Any) -> dict[str, Any]:
    event = {"id": 1000 + (cause or 0), "source": "agent", "observation": kind}
    event |= {"content": content, "extras": extras}
    return event | ({"cause": cause} if cause is not None else {})


ROW_EVENTS: list[dict[str, Any]] = [
    {"id": 0, "source": "user", "action": "message", "args": {"content": "go"}},
    # one response, two calls, each answered before the next runs: one batch
    _action(1, "run", "r1", command="ls"),
    _observation(1, "run", "x", metadata={"exit_code": 0}),
    _action(2, "run", "r1", command="cat nope"),
    _observation(2, "run", "no", metadata={"exit_code": 1}),
    _action(3, "run", "r2", command="sleep 99"),
    _observation(3, "run", "", metadata={"exit_code": -1}),
    _action(4, "run_ipython", "r3", code="1/0"),
    _observation(4, "run_ipython", "ZeroDivisionError"),  # OpenHands: a cell always succeeds
    _action(5, "read", "r4", path="/nope"),
    _observation(5, "error", "File not found: /nope. Your current working directory is /"),
    _action(6, "edit", "r5", path="/a"),
    _observation(6, "edit", "ERROR:\nInvalid `path` parameter: /a. The path /a does not exist."),
    _action(7, "edit", "r6", path="/b"),
    _observation(7, "edit", "ERROR:\nParameter `old_str` is required for command: str_replace."),
    _action(8, "edit", "r7", path="/c"),
    _observation(8, "edit", "ERROR:\nNo replacement was performed, old_str `x` did not appear."),
    _action(9, "browse_interactive", "r8", browser_actions="goto('x')"),
    _observation(9, "browse", "", error=True),
    _action(10, "call_tool_mcp", "r9", name="fs_read"),
    _observation(10, "mcp", json.dumps({"isError": True, "content": []})),
    _action(11, "run", "r10", command="rm -rf /"),
    _observation(11, "user_rejected", "no"),
    _observation(None, "error", 'Missing required argument "command" in tool call execute_bash'),
    _observation(None, "error", "Tool fly is not registered. (arguments: {}). Please check"),
    _observation(None, "error", "LLM returned no action"),  # the agent's, not a call's
    _action(12, "message", None, content="thinking aloud"),  # a model answer: no call
    _action(13, "think", "r11", thought="hm"),
    _observation(13, "think", "Your thought has been logged."),
    _action(14, "run", "r12", command="make"),  # the log ends before its result
    _action(15, "finish", "r13"),  # the controller handles it: no observation is written
]
ROWS = [
    [
        ("execute_bash", "success", "success", None, False, False),
        ("execute_bash", "error", "error", "shell_execute_error", False, False),
    ],
    [("execute_bash", "error", "error", "execution_timeout", False, False)],
    [("run_ipython", "success", "success", None, False, False)],
    [("read", "error", "error", "file_not_found", True, False)],
    [("edit", "error", "error", "file_not_found", True, False)],
    [("edit", "error", "not_started", "invalid_tool_params", True, False)],
    [("edit", "error", "error", "execution_failed", True, False)],
    [("browse_interactive", "error", "error", "execution_failed", False, False)],
    [("fs_read", "error", "error", "mcp_tool_error", False, True)],
    [("execute_bash", "cancelled", "not_started", None, False, False)],
    [("execute_bash", "error", "not_started", "invalid_tool_params", True, False)],
    [("fly", "error", "not_started", "tool_not_registered", True, False)],
    [],
    [("think", "success", "success", None, False, False)],
    [("execute_bash", "error", "unknown", None, False, False)],
    [("finish", "success", "success", None, False, False)],
]


def test_each_rule_on_events_written_here(tmp_path: Path) -> None:
    (path := tmp_path / "trajectory-1.json").write_text(json.dumps(ROW_EVENTS))
    (run,) = _runs(path)
    assert outcome_rows(run) == ROWS
    assert run.run_id == "trajectory-1" and run.succeeded is True  # finish
    assert run.turns[0].input_tokens == 7 and [t.line for t in run.turns][:2] == [2, 6]
    # the API's {"trajectory": [...]} reads alike
    (wrapped := tmp_path / "api.json").write_text(json.dumps({"trajectory": ROW_EVENTS}))
    assert outcome_rows(_runs(wrapped)[0]) == ROWS
    # as pairs in an output.jsonl: the same calls; a runnable action paired with a null
    # observation never got its result
    pairs = [[e, {"observation": "null", "content": "", "extras": {}}] for e in ROW_EVENTS[:2]]
    record = {"instance_id": "i", "test_result": {}, "history": pairs}
    (jsonl := tmp_path / "output.jsonl").write_text(json.dumps(record) + "\n")
    assert outcome_rows(_runs(jsonl)[0]) == [
        [("execute_bash", "error", "unknown", None, False, False)]
    ]


def test_user_messages_split_a_trajectory_not_an_instance(tmp_path: Path) -> None:
    events = [*ROW_EVENTS[:3], {"id": 50, "source": "user", "action": "message", "args": {}}]
    events += [_action(51, "run", "r9", command="ls")]
    (path := tmp_path / "t.json").write_text(json.dumps(events))
    assert [r.run_id for r in _runs(path)] == ["t/1", "t/2"]
    record = {"instance_id": "x", "test_result": {}, "history": events}
    (jsonl := tmp_path / "output.jsonl").write_text(json.dumps(record) + "\n")
    (run,) = _runs(jsonl)
    assert run.run_id == "x" and sum(len(t.calls) for t in run.turns) == 2


def test_the_docs_table_is_the_rules_in_order() -> None:
    rows = table("openhands-v0-mapping")
    assert len(rows) == len(openhands_v0_events.RULES)
    for row, (terminal, execution, error_type, heuristic) in zip(
        rows, openhands_v0_events.RULES.values(), strict=True
    ):
        assert (row[1], row[2]) == (terminal.value, execution.value), row
        assert row[3] == (error_type or "(none)") and row[4] == ("yes" if heuristic else "no")
        assert "published" in row[5] or "source" in row[5], row
    assert error_types(rows) <= {"file_not_found", "shell_execute_error", "execution_timeout"} | {
        "invalid_tool_params",
        "tool_not_registered",
        "mcp_tool_error",
        "execution_failed",
    }


_BAD: tuple[Any, ...] = (None, 7, ["string", "null"], {})


def _places(value: Any, depth: int, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if depth == 0 or not isinstance(value, dict | list):
        return []
    items = value.items() if isinstance(value, dict) else enumerate(value[:3])
    out = []
    for key, inner in items:
        out += [(*at, key), *_places(inner, depth - 1, (*at, key))]
    return out


def test_a_damaged_event_is_an_error_naming_the_file_never_a_crash(tmp_path: Path) -> None:
    events = json.loads((V0 / "wrong_initial_state.json").read_text())[:4]
    target = tmp_path / "t.json"
    for index, event in enumerate(events):
        for place in _places(event, 3):
            for bad in _BAD:
                damaged = copy.deepcopy(events)
                holder = damaged[index]
                for key in place[:-1]:
                    holder = holder[key]
                holder[place[-1]] = bad
                target.write_text(json.dumps(damaged))
                try:
                    _runs(target)
                except TranscriptError as exc:
                    assert exc.path == str(target)


def test_a_damaged_instance_is_an_error_naming_the_file_never_a_crash(tmp_path: Path) -> None:
    line = (V0 / "logic-reasoning-2024.output.jsonl").read_text().splitlines()[0]
    record = json.loads(line)
    record["history"] = record["history"][:3]  # a message pair and two IPython cell pairs
    target = tmp_path / "output.jsonl"
    places = [(key,) for key in record] + [("history", *p) for p in _places(record["history"], 3)]
    for place in places:
        for bad in _BAD:
            damaged = copy.deepcopy(record)
            holder = damaged
            for key in place[:-1]:
                holder = holder[key]
            holder[place[-1]] = bad
            target.write_text(json.dumps(damaged) + "\n")
            try:
                _runs(target)
            except TranscriptError as exc:
                assert exc.path == str(target) and exc.line == 1


def test_a_json_list_of_something_else_is_not_a_trajectory(tmp_path: Path) -> None:
    shutil.copy(V0 / "basic_interactions.json", tmp_path)
    (tmp_path / "numbers.json").write_text("[1, 2, 3]")
    (tmp_path / "rows.json").write_text(json.dumps([{"id": 1, "name": "x"}]))
    (tmp_path / "other.jsonl").write_text(json.dumps({"history": [], "x": 1}) + "\n")
    # SWE-agent's .traj also opens with {"trajectory": [ and steps with action/observation
    step = {"action": "ls", "observation": "x" * 100_000, "response": "r"}
    (tmp_path / "swe.traj").write_text(json.dumps({"trajectory": [step]}))
    found = discover([str(tmp_path)], kind="openhands")
    assert [s.path.name for s in found.sources] == ["basic_interactions.json"]
    assert len(found.skipped) == 4


def test_a_first_event_longer_than_the_head_is_still_sniffed(tmp_path: Path) -> None:
    events = json.loads((V0 / "wrong_initial_state.json").read_text())
    events[0]["args"]["content"] = "x" * 100_000  # the first user message, past 64 KiB
    (path := tmp_path / "long.json").write_text(json.dumps(events))
    (source,) = discover([str(path)]).sources
    assert source.kind == "openhands"
    assert _counts(_runs(path)) == BY_HAND["wrong_initial_state.json"]


def _session(folder: Path, events: list[dict[str, Any]]) -> Path:
    """A session folder as the V0 app's local file store keeps it (storage/locations.py)."""
    (folder / "events").mkdir(parents=True)
    (folder / "event_cache").mkdir()
    for event in events:
        (folder / "events" / f"{event['id']}.json").write_text(json.dumps(event))
    (folder / "event_cache" / "0-25.json").write_text(json.dumps(events[:25]))  # a copy
    metadata = {"conversation_id": "abc123", "llm_model": "anthropic/claude", "title": "t"}
    (folder / "metadata.json").write_text(json.dumps(metadata))
    (folder / "agent_state.pkl").write_bytes(b"\x80\x04not read")
    return folder


def test_a_session_folder_of_the_file_store_is_one_transcript(tmp_path: Path) -> None:
    events = json.loads((V0 / "basic_gui_mode.json").read_text())
    folder = _session(tmp_path / "sessions" / "abc123", events)
    found = discover([str(tmp_path)])
    assert [(s.path, s.kind) for s in found.sources] == [(folder, "openhands")]
    assert found.skipped == []  # its cache pages, metadata and state belong to it
    (run,) = _runs(folder / "events" / "7.json")  # any file of it names the folder
    assert _counts([run]) == BY_HAND["basic_gui_mode.json"]
    assert (run.run_id, run.model) == ("abc123", "anthropic/claude")
    # a file in events/ that is not an event is an error naming it, the folder skipped
    (folder / "events" / "notes.txt").write_text("x")
    with pytest.raises(TranscriptError, match=r"notes\.txt: not an OpenHands event file name"):
        _runs(folder)
