"""OpenHands conversations: the fixtures the real SDK wrote, counted independently, and re-captured.

The fixtures (``tests/fixtures/transcripts/openhands/``) are conversation
folders the OpenHands SDK 1.58.2 persisted itself, run against the scripted
OpenAI-compatible server (``tests/transcript_openhands.py``).  Counts are
checked twice: against numbers written here by hand from the scripts, and
against :func:`independent_counts`, which reads the event files with its own
small logic (never the importer's).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from transcript_files import FIXTURES, outcome_rows
from transcript_scrub import SCRUBBED_ROOT

from tool_failure_guard.transcripts.importers import openhands
from tool_failure_guard.transcripts.model import Run, TranscriptError
from tool_failure_guard.transcripts.replay import replay_run
from tool_failure_guard.transcripts.walk import Skipped, Source, discover

OPENHANDS = FIXTURES / "openhands"

#: scenario -> (runs, calls, failed calls, batches, succeeded), by hand from the scripts in
#: tests/transcript_agents.py and what the SDK did (its stuck detector stopped the first at
#: the 4th identical call; the iteration limit of 10 ended the second)
BY_HAND = {
    "failing-command": (1, 4, 4, 4, False),
    "varied-missing": (1, 10, 10, 10, False),
    "mixed": (1, 8, 5, 7, True),
}


def independent_counts(folder: Path) -> tuple[int, int, int, int]:
    """(runs, calls, failed calls, batches) from the event files, by a reading of their own."""
    events = [json.loads(p.read_text()) for p in sorted((folder / "events").glob("event-*.json"))]
    runs = sum(1 for e in events if e["kind"] == "MessageEvent" and e["source"] == "user")
    calls = [e for e in events if e["kind"] == "ActionEvent"]
    batches = len({e["llm_response_id"] for e in calls})  # one model response each
    failed = 0
    for event in events:
        if event["kind"] in ("AgentErrorEvent", "UserRejectObservation"):
            failed += 1
        elif event["kind"] == "ObservationEvent":
            observation = event["observation"]
            code = observation.get("exit_code")
            failed += bool(observation["is_error"] or (code is not None and code != 0))
    return runs, len(calls), failed, batches


def _runs(folder: Path) -> list[Run]:
    return list(openhands.read(folder / "base_state.json"))


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_counts_match_a_count_written_independently(name: str) -> None:
    runs = _runs(OPENHANDS / name)
    calls = [c for r in runs for t in r.turns for c in t.calls]
    counted = (
        len(runs),
        len(calls),
        sum(c.status.value != "success" for c in calls),
        sum(1 for r in runs for t in r.turns if t.calls),
    )
    assert counted == BY_HAND[name][:4] == independent_counts(OPENHANDS / name)
    assert [r.succeeded for r in runs] == [BY_HAND[name][4]]
    assert runs[0].model == "openai/test-model"
    assert runs[0].run_id.startswith("0e0e0e0e-0000-4000-8000-00000000000")


def test_the_mixed_run_maps_row_by_row() -> None:
    (run,) = _runs(OPENHANDS / "mixed")
    assert outcome_rows(run) == [
        [
            ("terminal", "success", "success", None, False, False),
            ("file_editor", "error", "error", "file_not_found", True, False),
        ],
        [("terminal", "success", "success", None, False, False)],
        [("python", "error", "not_started", "tool_not_registered", True, False)],
        [("terminal", "error", "not_started", "invalid_tool_params", True, False)],
        [("terminal", "error", "error", "execution_timeout", False, False)],
        [("terminal", "error", "error", "shell_execute_error", False, False)],
        [("finish", "success", "success", None, False, False)],
    ]
    assert [t.line for t in run.turns] == [2, 6, 8, 10, 12, 14, 16]  # the event numbers
    texts = [c.error_text for t in run.turns for c in t.calls if c.error_text]
    assert texts[0].startswith("Invalid `path` parameter")
    assert texts[1].startswith("Tool 'python' not found")


def test_the_guard_and_the_peers_on_the_sdk_runs() -> None:
    (varied,) = _runs(OPENHANDS / "varied-missing")
    result = replay_run(varied)
    stop = result.mode("enforce").stop
    assert stop is not None and stop.loop_type == "repeated_tool_execution_failure"
    assert (stop.turn, stop.call) == (9, 9)
    assert result.saved is not None and result.saved.calls == 1
    assert {k: result.peers[k] for k in ("gemini_cli", "opencode_roo", "goose", "qwen_code")} == {
        "gemini_cli": None,
        "opencode_roo": None,
        "goose": None,
        "qwen_code": None,
    }
    # the SDK's own stuck detector ends the identical loop after 4 calls: before the guard
    (identical,) = _runs(OPENHANDS / "failing-command")
    result = replay_run(identical)
    assert result.mode("enforce").stop is None
    assert result.peers["opencode_roo"] == 3 and result.peers["goose"] == 3


def _discover(paths: list[str], kind: str | None = None) -> tuple[list[Source], list[Skipped]]:
    found = discover(paths, kind)
    return found.sources, found.skipped


def test_a_walk_reads_each_conversation_once_and_skips_none_of_its_files(tmp_path: Path) -> None:
    sources, skipped = _discover([str(OPENHANDS)])
    assert sorted(s.path.name for s in sources) == sorted(BY_HAND)
    assert {s.kind for s in sources} == {"openhands"} and skipped == []
    # the SDK's lock and length-marker files, as it leaves them, are part of the folder too
    copy = shutil.copytree(OPENHANDS / "mixed", tmp_path / "conv")
    (copy / "events" / ".eventlog.lock").write_bytes(b"")
    (copy / "events" / ".eventlog-len-18.marker").write_bytes(b"")
    sources, skipped = _discover([str(tmp_path)])
    assert [s.path for s in sources] == [copy] and skipped == []
    # a file of the folder named on the command line reads its conversation
    (event,) = (copy / "events").glob("event-00003-*.json")
    sources, _ = _discover([str(event)])
    assert [s.path for s in sources] == [copy]
    # --kind another: the folder is one skipped entry, not each of its files
    sources, skipped = _discover([str(tmp_path)], kind="qwen-code")
    assert sources == [] and [s.path for s in skipped] == [str(copy)]


def _copy(tmp_path: Path, name: str = "mixed") -> Path:
    return Path(shutil.copytree(OPENHANDS / name, tmp_path / name))


def test_a_missing_event_is_an_error_naming_it(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    next((folder / "events").glob("event-00005-*.json")).unlink()
    with pytest.raises(TranscriptError, match="event 5 is missing"):
        _runs(folder)


def test_a_truncated_event_is_an_error_naming_its_file(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    last = sorted((folder / "events").glob("event-*.json"))[-1]
    last.write_text(last.read_text()[:-40])
    with pytest.raises(TranscriptError, match=re.escape(last.name) + r".*truncated"):
        _runs(folder)


def test_a_file_that_is_not_an_event_is_an_error(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "events" / "notes.txt").write_text("x")
    with pytest.raises(TranscriptError, match=r"notes\.txt: not an OpenHands event file name"):
        _runs(folder)


def _rewrite(folder: Path, edit: Any) -> None:
    for path in (folder / "events").glob("event-*.json"):
        data = json.loads(path.read_text())
        path.write_text(json.dumps(edit(data)))


def test_call_ids_a_provider_reuses_stay_apart(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "varied-missing")

    def same_id(event: dict[str, Any]) -> dict[str, Any]:
        if "tool_call_id" in event:
            event["tool_call_id"] = "functions.terminal:0"
        return event

    _rewrite(folder, same_id)
    (run,) = _runs(folder)
    calls = [c for t in run.turns for c in t.calls]
    assert len(calls) == 10 and all(c.error_type == "shell_execute_error" for c in calls)
    # the ids stay apart, so the replay sees ten calls that ran, not provider replays
    assert len({c.call_id for c in calls}) == 10
    stop = replay_run(run).mode("enforce").stop
    assert stop is not None and stop.loop_type == "repeated_tool_execution_failure"


def test_a_rejected_call_and_one_without_a_result(tmp_path: Path) -> None:
    folder = _copy(tmp_path)

    def reject_first(event: dict[str, Any]) -> dict[str, Any]:
        if event.get("tool_call_id") == "call_m2" and event["kind"] == "ObservationEvent":
            return {**event, "kind": "UserRejectObservation", "rejection_reason": "no"}
        return event

    _rewrite(folder, reject_first)
    last = sorted((folder / "events").glob("event-*.json"))[-1]
    last.unlink()  # the finish call's observation: the log ends first
    (state := folder / "base_state.json").write_text(
        json.dumps({**json.loads(state.read_text()), "execution_status": "running"})
    )
    (run,) = _runs(folder)
    rows = outcome_rows(run)
    assert rows[1] == [("terminal", "cancelled", "not_started", None, False, False)]
    assert rows[-1] == [("finish", "error", "unknown", None, False, False)]
    assert run.succeeded is None


def test_the_fixtures_hold_no_machine_paths_or_keys() -> None:
    for path in OPENHANDS.rglob("*.json"):
        text = path.read_text(encoding="utf-8")
        for found in re.findall(r"/tmp/[^/\"\\\s]*", text):
            assert found == SCRUBBED_ROOT, (path, found)
        assert "/root" not in text and "sk-" not in text, path


def test_a_fresh_capture_maps_like_the_fixture() -> None:
    """The pinned SDK (``make agents``) run again: the same runs, calls and outcomes."""
    from transcript_agents import openhands as capture

    with tempfile.TemporaryDirectory() as tmp:
        for fresh in capture(Path(tmp), only=("mixed", "failing-command")):
            assert _summary(_runs(fresh)) == _summary(_runs(OPENHANDS / fresh.name))
            for path in fresh.rglob("*.json"):
                assert tmp not in path.read_text(encoding="utf-8")


def _summary(runs: list[Run]) -> list[Any]:
    return [(r.succeeded, r.model, outcome_rows(r), [t.line for t in r.turns]) for r in runs]


def _conversation(folder: Path, events: list[dict[str, Any]], status: str) -> Path:
    """A conversation folder in the SDK's layout, its events given in order."""
    (folder / "events").mkdir(parents=True)
    state = {"id": "c0ffee00-0000-4000-8000-000000000000", "execution_status": status}
    (folder / "base_state.json").write_text(json.dumps(state))
    for number, event in enumerate(events):
        name = f"event-{number:05d}-{number:08d}-0000-4000-8000-000000000000.json"
        (folder / "events" / name).write_text(json.dumps(event))
    return folder


def _action(
    call_id: str, response: str, ran: bool = True, tool: str = "terminal"
) -> dict[str, Any]:
    return {
        "kind": "ActionEvent",
        "source": "agent",
        "tool_name": tool,
        "tool_call_id": call_id,
        "tool_call": {"id": call_id, "name": tool, "arguments": json.dumps({"n": call_id})},
        "llm_response_id": response,
        "action": {"kind": "MCPToolAction" if tool.startswith("mcp") else "TerminalAction"}
        if ran
        else None,
    }


def _observation(call_id: str, kind: str, is_error: bool, **more: Any) -> dict[str, Any]:
    content = [{"type": "text", "text": "out"}]
    observation = {"kind": kind, "is_error": is_error, "content": content, **more}
    return {"kind": "ObservationEvent", "tool_call_id": call_id, "observation": observation}


def test_a_refusal_amid_a_response_keeps_it_one_batch(tmp_path: Path) -> None:
    refusal = {"kind": "AgentErrorEvent", "tool_call_id": "b", "error": "Tool 'x' not found."}
    raised = {"kind": "AgentErrorEvent", "tool_call_id": "e", "error": "Error executing tool"}
    events = [
        {"kind": "MessageEvent", "source": "user"},
        _action("a", "r1"),
        _action("b", "r1", ran=False, tool="x"),
        refusal,
        _action("c", "r1"),
        _observation("a", "TerminalObservation", False, exit_code=0),
        _observation("c", "TerminalObservation", False, exit_code=2),
        _action("d", "r2", tool="mcp_fs_read"),
        _observation("d", "MCPToolObservation", True),
        _action("e", "r3"),
        raised,
        {"kind": "ConversationErrorEvent", "code": "MaxIterationsReached", "detail": "x"},
        {"kind": "MessageEvent", "source": "user"},
        _action("f", "r4", tool="finish"),
        _observation("f", "FinishObservation", False),
    ]
    runs = list(openhands.read(_conversation(tmp_path / "c", events, "finished")))
    assert [outcome_rows(r) for r in runs] == [
        [
            [
                ("terminal", "success", "success", None, False, False),
                ("x", "error", "not_started", "tool_not_registered", True, False),
                ("terminal", "error", "error", "shell_execute_error", False, False),
            ],
            [("mcp_fs_read", "error", "error", "mcp_tool_error", False, True)],
            [("terminal", "error", "error", "execution_failed", False, False)],
        ],
        [[("finish", "success", "success", None, False, False)]],
    ]
    assert [r.succeeded for r in runs] == [False, True]  # the error event; the last's status
    assert [r.run_id for r in runs] == [
        "c0ffee00-0000-4000-8000-000000000000/1",
        "c0ffee00-0000-4000-8000-000000000000/2",
    ]
