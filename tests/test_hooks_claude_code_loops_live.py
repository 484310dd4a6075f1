"""The command hook in the real Claude Code (2.1.197 and 2.1.337) as its users run it:
subagents, background agents, the guard installed twice.

One guard per agent loop: the fake plays the main agent's script and each subagent's
own (a subagent's requests are told apart by the prompt the ``Agent`` call gave it);
every call has its own ``tool_use_id``.  What each loop's model was sent is read from
the fake's recorded requests; where the run ended from the stream-json result line.
Each run costs seconds: few runs, each asserting several things.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from agent_clis import CLAUDE_NEWEST_VERSION, CLAUDE_VERSIONS
from agent_fakes.script import Turn
from claude_hook_harness import Run, agent, install, read, run_claude

from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)
from tool_failure_guard.hooks.state import StateStore

STOP_TEXT = REPEATED_TOOL_FAILURE_STOP_MESSAGE.removeprefix("System: ")
SUB = "SUBAGENT-ONE"
TOOLS = ("Read", "Bash", "Agent")


def _failing(ws: Path, calls: int = 2) -> Turn:
    return Turn(text="Reading.", calls=(read(str(ws / "missing.txt")),) * calls)


def _present(ws: Path) -> Turn:
    return Turn(text="Reading.", calls=(read(str(ws / "present.txt")),))


def _foreground(version: str) -> bool | None:
    # 2.1.337 runs subagents in the background by default; 2.1.197 has no such option
    return False if version == CLAUDE_NEWEST_VERSION else None


def _not_stopped(run: Run) -> None:
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.result.get("terminal_reason") != "hook_stopped", run.stderr[-2000:]
    assert run.result["result"] == "Done."


@pytest.mark.parametrize("version", CLAUDE_VERSIONS)
def test_a_stubborn_subagent_is_stopped_alone_and_its_parent_is_told(
    tmp_path: Path, version: str
) -> None:
    def main(ws: Path) -> list[Turn]:
        return [Turn(text="Delegating.", calls=(agent(SUB, background=_foreground(version)),))]

    def agents(ws: Path) -> dict[str, Sequence[Turn]]:
        return {SUB: [_failing(ws)] * 8}

    run = run_claude(
        main, mode="enforce", base=tmp_path, agents=agents, version=version, allowed=TOOLS
    )
    # 2 failures a response: 8 in 4 batches, the reminder in the subagent's 5th request;
    # its 5th batch fails the same way: stopped, no 6th request
    assert run.reminded_in(SUB) == [4], run.stderr[-2000:]
    assert len(run.agents[SUB]) == 5
    # the main agent goes on: its next request carries the guard's stop text, naming the
    # subagent; it is never sent the subagent's reminder; the run ends normally
    assert len(run.requests) == 2
    assert run.carrying(STOP_TEXT) == [1]
    assert run.carrying("tool-failure-guard stopped the subagent") == [1]
    assert run.reminded_in() == []
    _not_stopped(run)


def test_a_stubborn_background_subagent_is_told_at_its_task_notification(
    tmp_path: Path,
) -> None:
    def main(ws: Path) -> list[Turn]:
        return [Turn(text="Delegating.", calls=(agent(SUB, background=True),))]

    def agents(ws: Path) -> dict[str, Sequence[Turn]]:
        return {SUB: [_failing(ws)] * 8}

    run = run_claude(
        main,
        mode="enforce",
        base=tmp_path,
        agents=agents,
        version=CLAUDE_NEWEST_VERSION,
        allowed=TOOLS,
    )
    assert run.reminded_in(SUB) == [4], run.stderr[-2000:]
    assert len(run.agents[SUB]) == 5
    # the Agent call returned at once; the subagent's completion came as a
    # <task-notification> prompt, whose request carries the guard's stop text
    last = len(run.requests) - 1
    assert run.carrying(STOP_TEXT) == [last]
    assert "task-notification" in json.dumps(run.requests[last]["messages"][-1])
    assert run.reminded_in() == []
    _not_stopped(run)


def _around_a_subagent(version: str | None = None) -> Callable[[Path], list[Turn]]:
    """The main agent fails 3 batches of 2, delegates, then fails on (the issue's scenario:
    the subagent's first failures used to complete the parent's streak)."""

    def main(ws: Path) -> list[Turn]:
        background = _foreground(version) if version else None
        delegate = Turn(text="Delegating.", calls=(agent(SUB, background=background),))
        return [_failing(ws)] * 3 + [delegate] + [_failing(ws)] * 4

    return main


@pytest.mark.parametrize("version", CLAUDE_VERSIONS)
def test_the_main_agents_streak_is_its_own_around_a_subagent(tmp_path: Path, version: str) -> None:
    runs = {}
    for sub_fails in (True, False):

        def agents(ws: Path, sub_fails: bool = sub_fails) -> dict[str, Sequence[Turn]]:
            return {SUB: [_failing(ws) if sub_fails else _present(ws)] * 3}

        runs[sub_fails] = run_claude(
            _around_a_subagent(version),
            mode="enforce",
            base=tmp_path,
            agents=agents,
            version=version,
            allowed=TOOLS,
        )
    for run in runs.values():
        # the subagent's 3 responses (6 failures, or none) and its final answer: never
        # reminded, though with its parent's 6 failures its first batch would make 8
        assert len(run.agents[SUB]) == 4, run.stderr[-2000:]
        assert run.reminded_in(SUB) == []
        # the parent: 3 failing batches, the Agent call (another tool's success leaves the
        # Read streak as it is), a 4th failing batch: 8 failures, the reminder in request
        # 5; the 5th: the stop.  The same whether its subagent's Reads failed or not
        assert run.reminded_in() == [5]
        assert len(run.requests) == 6
        assert run.result["terminal_reason"] == "hook_stopped"
    assert [m["role"] for m in runs[True].requests[-1]["messages"]] == [
        m["role"] for m in runs[False].requests[-1]["messages"]
    ]


def test_in_warn_the_main_agent_is_reminded_not_its_subagent(tmp_path: Path) -> None:
    def agents(ws: Path) -> dict[str, Sequence[Turn]]:
        return {SUB: [_failing(ws)] * 3}

    run = run_claude(_around_a_subagent(), mode="warn", base=tmp_path, agents=agents, allowed=TOOLS)
    # the reminder the issue saw go to the subagent goes to the main agent, once a streak
    assert run.reminded_in() == [5], run.stderr[-2000:]
    assert run.reminded_in(SUB) == []
    assert len(run.requests) == 9  # every scripted batch, then the final answer
    _not_stopped(run)
    # the state's summary (what ``hook status`` reads): the two loops, the effective mode
    summary = _state(run)["summary"]
    assert (summary["mode"], summary["loops"], summary["last_event"]) == (
        "warn",
        2,
        "PostToolBatch",
    )
    assert summary["last_decision"] == "none"  # warn: past its one reminder, a streak is quiet


def _after_a_background_agent(first: Callable[[Path], Turn]) -> Callable[[Path], list[Turn]]:
    def main(ws: Path) -> list[Turn]:
        return [first(ws)] + [_failing(ws)] * 8

    return main


def test_a_background_agent_finishing_mid_turn_resets_nothing(tmp_path: Path) -> None:
    def launch(ws: Path) -> Turn:
        return Turn(text="Delegating.", calls=(agent(SUB, background=True),))

    def agents(ws: Path) -> dict[str, Sequence[Turn]]:
        return {SUB: [_present(ws)]}

    version = CLAUDE_NEWEST_VERSION
    with_agent = run_claude(
        _after_a_background_agent(launch),
        mode="enforce",
        base=tmp_path,
        agents=agents,
        version=version,
        allowed=TOOLS,
    )
    without = run_claude(
        _after_a_background_agent(_present), mode="enforce", base=tmp_path, version=version
    )
    # its completion came as a <task-notification> user prompt while the main agent worked
    notified = [
        i
        for i, body in enumerate(with_agent.requests)
        if "task-notification" in json.dumps(body["messages"])
    ]
    assert notified and notified[0] < len(with_agent.requests) - 1, with_agent.stderr[-2000:]
    assert len(with_agent.agents[SUB]) == 2
    # 2 failures a batch: the reminder after the 4th failing batch, the stop after the 5th
    assert without.reminded_in() == [5]
    assert len(without.requests) == 6
    assert with_agent.reminded_in() == without.reminded_in()
    assert len(with_agent.requests) == len(without.requests)
    assert with_agent.result["terminal_reason"] == "hook_stopped"


# -- installed twice -------------------------------------------------------------------------


def _stubborn(ws: Path) -> list[Turn]:
    return [_failing(ws, 4)] * 6


def _healthy(ws: Path) -> list[Turn]:
    return [_present(ws)] * 12


def _project_install(mode: str, claim: str = "project") -> Callable[[Path], None]:
    def also(root: Path) -> None:
        settings = root / "ws" / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        install(mode, settings=settings, state_dir=root / "state", claim=claim)

    return also


def _user_install(mode: str) -> Callable[[Path], None]:
    def also(root: Path) -> None:
        settings = root / "home" / ".claude" / "settings.json"
        install(mode, settings=settings, state_dir=root / "state", claim="user")

    return also


def _state(run: Run) -> dict[str, Any]:
    path = StateStore(run.root / "state").path_of(run.result["session_id"])
    return json.loads(path.read_text())["state"]  # type: ignore[no-any-return]


def _installs_seen(run: Run) -> list[str]:
    installs = _state(run)["installs"].values()
    return sorted(f"{entry[0]}:{entry[1]}:{entry[2]}" for entry in installs)


def _reminders_in(run: Run, index: int) -> int:
    return json.dumps(run.requests[index]["messages"][-1]).count(
        json.dumps(REPEATED_TOOL_FAILURE_REMINDER)[1:-1]
    )


@pytest.mark.parametrize(
    ("user_mode", "project_mode", "stops"),
    [("enforce", "warn", True), ("warn", "warn", False)],
)
def test_installed_at_user_scope_and_in_a_project_it_acts_as_one_guard(
    tmp_path: Path, user_mode: str, project_mode: str, stops: bool
) -> None:
    runs = [
        run_claude(
            turns,
            mode=user_mode,
            base=tmp_path,
            claim="user",
            passwd_home=True,
            also=_project_install(project_mode),
        )
        for turns in (_stubborn, _healthy)
    ]
    stubborn, healthy = runs
    # both installs ran: the user one verified in the passwd home's settings (rank 2)
    assert _installs_seen(stubborn) == [f"project:{project_mode}:1", f"user:{user_mode}:2"]
    # one reminder (not one per install), and the stop where one enforce install stops
    assert stubborn.reminded_in() == [2], stubborn.stderr[-2000:]
    assert _reminders_in(stubborn, 2) == 1
    if stops:
        assert len(stubborn.requests) == 3
        assert stubborn.result["terminal_reason"] == "hook_stopped"
    else:
        assert len(stubborn.requests) == 7
        _not_stopped(stubborn)
    # calls that all succeed: never stopped, never reminded (each batch reduced once)
    assert len(healthy.requests) == 13, healthy.stderr[-2000:]
    assert healthy.reminded_in() == []
    _not_stopped(healthy)


def test_installed_at_managed_and_user_scope_the_managed_mode_decides(tmp_path: Path) -> None:
    runs = [
        run_claude(
            turns,
            mode="enforce",
            base=tmp_path,
            managed=True,
            claim="managed",
            also=_user_install("warn"),
        )
        for turns in (_stubborn, _healthy)
    ]
    stubborn, healthy = runs
    seen = _installs_seen(stubborn)
    assert seen[0] == "managed:enforce:3" and seen[1].startswith("user:warn:"), seen
    assert stubborn.reminded_in() == [2], stubborn.stderr[-2000:]
    assert len(stubborn.requests) == 3
    assert stubborn.result["terminal_reason"] == "hook_stopped"
    assert len(healthy.requests) == 13, healthy.stderr[-2000:]
    assert healthy.reminded_in() == []
    _not_stopped(healthy)
