"""The guard's command hook inside the real Claude Code (2.1.197, and 2.1.337 where
parametrized), headless, end to end.

A fake model keeps calling a failing tool; the hook is installed by the
project's own installer.  What the model is sent is read from the fake's
recorded requests; where the run ended from the stream-json result line.
Each run costs seconds, so there are few of them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from agent_clis import CLAUDE_VERSIONS
from agent_fakes.script import Turn
from claude_hook_harness import bash, read, run_claude


def _reads(count: int) -> Callable[[Path], list[Turn]]:
    def turns(ws: Path) -> list[Turn]:
        missing = str(ws / "missing.txt")
        return [Turn(text="Reading.", calls=(read(missing),) * 4)] * count

    return turns


def _exit_3(ws: Path) -> list[Turn]:
    return [Turn(calls=(bash("exit 3"),))] * 12


def _recovering(ws: Path) -> list[Turn]:
    missing, present = str(ws / "missing.txt"), str(ws / "present.txt")
    failing = Turn(calls=(read(missing),) * 4)
    return [failing, failing, Turn(calls=(read(present),)), failing, failing]


@pytest.mark.parametrize("version", CLAUDE_VERSIONS)
def test_enforce_parallel_calls_remind_once_then_stop_at_the_next_matching_batch(
    tmp_path: Path, version: str
) -> None:
    run = run_claude(_reads(6), mode="enforce", base=tmp_path, version=version)
    # batch 1 (4 failures), batch 2 (8 across 2: the reminder, in the request right after it),
    # batch 3 (the same failure): the stop, and no request after it
    assert len(run.requests) == 3, run.stderr[-2000:]
    assert run.reminded_in() == [2]
    assert run.reminders_in_last() == 1
    assert run.returncode == 0
    assert run.result["terminal_reason"] == "hook_stopped"
    assert run.result["result"] == ""


def test_enforce_single_calls_reach_the_threshold_at_the_eighth_batch(tmp_path: Path) -> None:
    run = run_claude(_exit_3, mode="enforce", base=tmp_path)
    assert len(run.requests) == 9, run.stderr[-2000:]
    assert run.reminded_in() == [8]
    assert run.result["terminal_reason"] == "hook_stopped"


@pytest.mark.parametrize("version", CLAUDE_VERSIONS)
def test_warn_reminds_once_and_never_stops(tmp_path: Path, version: str) -> None:
    run = run_claude(_reads(6), mode="warn", base=tmp_path, version=version)
    assert len(run.requests) == 7  # every scripted batch, then the final answer
    assert run.reminded_in() == [2]
    assert run.reminders_in_last() == 1
    assert run.result.get("terminal_reason") != "hook_stopped"
    assert run.result["result"] == "Done."


def test_shadow_sends_the_model_exactly_what_off_sends(tmp_path: Path) -> None:
    off = run_claude(_reads(4), mode="off", base=tmp_path)
    shadow = run_claude(_reads(4), mode="shadow", base=tmp_path)
    assert len(shadow.requests) == len(off.requests) == 5
    assert shadow.reminded_in() == []
    assert shadow.messages() == off.messages()
    assert shadow.result["result"] == off.result["result"] == "Done."


def test_a_recovered_run_continues(tmp_path: Path) -> None:
    run = run_claude(_recovering, mode="enforce", base=tmp_path)
    # the success resets the streak; the two later failing batches are a new streak that
    # earns its own reminder, and nothing stops the run
    assert len(run.requests) == 6, run.stderr[-2000:]
    assert run.reminded_in() == [2, 5]
    assert run.result.get("terminal_reason") != "hook_stopped"
    assert run.result["result"] == "Done."


_HOSTILE_PROJECT = {"disableAllHooks": True, "env": {"TOOL_FAILURE_GUARD_MODE": "off"}}


def test_managed_scope_ignores_a_projects_disable_all_hooks_and_env(tmp_path: Path) -> None:
    run = run_claude(
        _reads(6), mode="enforce", base=tmp_path, managed=True, project_settings=_HOSTILE_PROJECT
    )
    assert len(run.requests) == 3, run.stderr[-2000:]
    assert run.reminded_in() == [2]
    assert run.result["terminal_reason"] == "hook_stopped"


def test_at_user_scope_the_same_project_switches_the_hook_off(tmp_path: Path) -> None:
    # the control for the test above: the project file does switch user-scope hooks off
    run = run_claude(_reads(6), mode="enforce", base=tmp_path, project_settings=_HOSTILE_PROJECT)
    assert len(run.requests) == 7
    assert run.reminded_in() == []
