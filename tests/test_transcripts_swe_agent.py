"""SWE-agent ``.traj`` trajectories, on fixtures WRITTEN BY HAND (no real capture).

SWE-agent has no usable release on PyPI, so ``tests/fixtures/transcripts/swe-agent/``
holds two trajectories written by hand in the shape of SWE-agent 1.1.0's source
(``sweagent/agent/agents.py``, ``sweagent/types.py``; see docs/transcripts.md).
They test the mapping as documented, not what a real SWE-agent run records.
Counts are written here by hand from the fixtures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from transcript_files import FIXTURES, outcome_rows

from tool_failure_guard.transcripts.importers import mini_swe_agent, swe_agent
from tool_failure_guard.transcripts.model import Run, TranscriptError
from tool_failure_guard.transcripts.replay import replay_run

SWE = FIXTURES / "swe-agent"
SUBMITTED = SWE / "hand-written-submitted.traj"
EXIT_COST = SWE / "hand-written-exit-cost.traj"

#: file -> (runs, turns, calls, failed calls, batches, succeeded), counted by hand
BY_HAND = {
    SUBMITTED.name: (1, 8, 7, 4, 7, True),
    EXIT_COST.name: (1, 11, 10, 10, 10, False),
}


def _read(path: Path) -> list[Run]:
    assert swe_agent.sniff(path, path.read_bytes()[: 64 << 10])
    return list(swe_agent.read(path))


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_counts_match_a_count_written_by_hand(name: str) -> None:
    runs = _read(SWE / name)
    calls = [c for r in runs for t in r.turns for c in t.calls]
    assert (
        len(runs),
        sum(len(r.turns) for r in runs),
        len(calls),
        sum(c.status.value != "success" for c in calls),
        sum(1 for r in runs for t in r.turns if t.calls),
        runs[0].succeeded,
    ) == BY_HAND[name]
    assert runs[0].model == "hand-written/test-model"
    assert runs[0].run_id == name.removesuffix(".traj")


def test_the_submitted_run_maps_row_by_row() -> None:
    (run,) = _read(SUBMITTED)
    assert outcome_rows(run) == [
        [("str_replace_editor", "error", "error", "file_not_found", True, False)],
        [("bash", "success", "success", None, False, False)],
        [],  # a response without an action
        [("vim", "error", "not_started", "invalid_tool_params", True, False)],  # blocked
        [("bash", "error", "error", "execution_timeout", True, False)],
        [("bash", "error", "error", "shell_execute_error", True, False)],
        [("str_replace_editor", "success", "success", None, False, False)],
        [("submit", "success", "success", None, False, False)],
    ]
    ids = [c.call_id for t in run.turns for c in t.calls]
    # the blocked step never entered the history: it has no recorded tool call id
    assert ids == ["call_hand1", "call_hand2", "step4", *(f"call_hand{n}" for n in (3, 4, 5, 6))]


def test_the_guard_fires_on_the_loop() -> None:
    (run,) = _read(EXIT_COST)
    result = replay_run(run)
    stop = result.mode("enforce").stop
    assert stop is not None and (stop.turn, stop.call) == (9, 9)
    assert stop.loop_type == "repeated_tool_execution_failure"
    assert result.peers["goose"] is None  # the error text names a different file each time


def test_the_kinds_do_not_claim_each_others_trajectories() -> None:
    for path in (FIXTURES / "mini-swe-agent").glob("*.traj.json"):
        assert not swe_agent.sniff(path, path.read_bytes()[: 64 << 10])
    for path in SWE.glob("*.traj"):
        assert not mini_swe_agent.sniff(path, path.read_bytes()[: 64 << 10])


def _edited(tmp_path: Path, edit: Any, source: Path = SUBMITTED) -> Path:
    data = json.loads(source.read_text())
    edit(data)
    target = tmp_path / source.name
    target.write_text(json.dumps(data, indent=2))
    return target


@pytest.mark.parametrize(
    ("status", "succeeded"),
    [("submitted", True), ("submitted (exit_cost)", False), ("exit_format", False), (None, None)],
)
def test_success_is_the_exit_status(tmp_path: Path, status: Any, succeeded: Any) -> None:
    path = _edited(tmp_path, lambda d: d["info"].update(exit_status=status))
    assert _read(path)[0].succeeded is succeeded


def test_an_older_trajectory_without_structured_tool_calls(tmp_path: Path) -> None:
    """Older files keep ``tool_calls`` as a string and ``replay_config`` as an object."""

    def older(data: dict[str, Any]) -> None:
        for message in data["history"]:
            if "tool_calls" in message:
                message["tool_calls"] = str(message["tool_calls"])
        data["replay_config"] = {"agent": {"model": {"name": "gpt-4o"}}}

    (run,) = _read(_edited(tmp_path, older))
    assert [c.tool for t in run.turns for c in t.calls][:2] == ["str_replace_editor", "find"]
    assert run.model == "gpt-4o"


def test_a_truncated_trajectory_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.traj"
    path.write_text(SUBMITTED.read_text()[:3000])
    with pytest.raises(TranscriptError, match="truncated"):
        list(swe_agent.read(path))


def test_a_trajectory_without_steps_is_an_error(tmp_path: Path) -> None:
    path = _edited(tmp_path, lambda d: d.pop("trajectory"))
    with pytest.raises(TranscriptError, match="needs trajectory and info"):
        list(swe_agent.read(path))


def test_a_first_observation_larger_than_the_head_still_sniffs(tmp_path: Path) -> None:
    def huge(data: dict[str, Any]) -> None:
        data["trajectory"][0]["observation"] = "x" * (80 << 10)

    path = _edited(tmp_path, huge)
    assert b'"execution_time"' not in path.read_bytes()[: 64 << 10]
    assert [len(r.turns) for r in _read(path)] == [8]


def test_help_lists_the_new_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    from tool_failure_guard.commands.cli import main

    with pytest.raises(SystemExit):
        main(["transcripts", "--help"])
    out = capsys.readouterr().out
    for kind in ("gemini-cli", "openhands", "swe-agent"):
        assert kind in out


def test_ids_reused_across_steps_are_not_provider_replays(tmp_path: Path) -> None:
    """Hand-edited and replayed trajectories repeat tool call ids across steps."""

    def same_ids(data: dict[str, Any]) -> None:
        for message in data["history"]:
            for call in message.get("tool_calls") or []:
                call["id"] = "call_same"

    (run,) = _read(_edited(tmp_path, same_ids, EXIT_COST))
    ids = [c.call_id for t in run.turns for c in t.calls]
    assert ids[:3] == ["call_same", "call_same#2", "call_same#3"] and len(set(ids)) == 10
    stop = replay_run(run).mode("enforce").stop
    assert stop is not None and stop.loop_type == "repeated_tool_execution_failure"
    assert (stop.turn, stop.call) == (9, 9)
