"""The guard's hook in the real Qwen Code 0.24.4, headless (``qwen -p``), at the system scope.

Each test runs the pinned CLI against the local OpenAI-compatible fake
(``tests/hook_clis.py``), the hook installed with ``tool-failure-guard hook
install qwen-code --settings <system settings file>`` (the file
``QWEN_CODE_SYSTEM_SETTINGS_PATH`` names), and a project whose own
``.qwen/settings.json`` switches all hooks off and whose environment names
another mode: neither may change what the operator installed.  The fake keeps
calling failing tools (four missing-file reads in parallel per batch, or one
failing shell command per batch); what each model request carried is read from
the fake's record.  Qwen Code's own loop detection halts on identical calls,
so every call names a different file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_fakes.script import Call, Turn
from hook_clis import Run, agent_of, run_qwen
from qwen_original import require_qwen

from tool_failure_guard.guard import (
    GUARD_MODE_ENV_VAR,
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)

REMINDER = REPEATED_TOOL_FAILURE_REMINDER
#: What a project tries: hooks off, and another mode in the environment.
PROJECT = {"disableAllHooks": True, "env": {GUARD_MODE_ENV_VAR: "off"}}


@pytest.fixture(autouse=True)
def _qwen() -> None:
    require_qwen()


def _reads(ws: Path, batch: int, n: int = 4) -> Turn:
    return Turn(
        text="Reading.",
        calls=tuple(
            Call(name="read_file", arguments={"file_path": str(ws / f"missing-{batch}-{i}.txt")})
            for i in range(n)
        ),
    )


def _shell_failure(ws: Path, batch: int) -> Turn:
    # exits 3: a failing shell command (Qwen Code counts exit 1 as a success: `test`, `grep`)
    command = f"cat {ws / f'missing-{batch}.txt'}; exit 3"
    return Turn(calls=(Call(name="run_shell_command", arguments={"command": command}),))


def _present(ws: Path) -> Turn:
    return Turn(calls=(Call(name="read_file", arguments={"file_path": str(ws / "present.txt")}),))


def _installed(mode: str, root: Path) -> dict[str, Any]:
    """The system settings ``hook install`` writes (into an existing operator file)."""
    settings = root / f"system-settings-{mode}.json"
    settings.write_text(json.dumps({"general": {"vimMode": False}}), encoding="utf-8")
    argv = [sys.executable, "-m", "tool_failure_guard", "hook", "install", "qwen-code"]
    argv += ["--mode", mode, "--settings", str(settings), "--state-dir", str(_state(mode, root))]
    subprocess.run(argv, check=True, capture_output=True, text=True)
    document: dict[str, Any] = json.loads(settings.read_text(encoding="utf-8"))
    assert document["general"] == {"vimMode": False}  # the operator's other settings kept
    assert document["disableAllHooks"] is False
    return document


def _state(mode: str, root: Path) -> Path:
    return root / f"state-{mode}"


def _run(mode: str, turns: Any, tmp_path: Path) -> Run:
    return run_qwen(
        turns,
        system=_installed(mode, tmp_path),
        project=PROJECT,
        env={GUARD_MODE_ENV_VAR: "off"},
        base=tmp_path,
    )


def _texts(request: dict[str, Any]) -> list[str]:
    texts = []
    for message in request.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    return texts


def reminders(run: Run) -> list[int]:
    """How many times the reminder is in each request's history, in order."""
    return [sum(t.count(REMINDER) for t in _texts(r)) for r in run.requests]


def _result(run: Run) -> dict[str, Any]:
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    results = [line for line in lines if line.get("type") == "result"]
    assert results, run.stdout[-2000:] + run.stderr[-2000:]
    return results[-1]


def test_enforce_parallel_reminds_once_then_stops_after_the_next_matching_batch(
    tmp_path: Path,
) -> None:
    run = _run("enforce", lambda ws: [_reads(ws, b) for b in range(6)], tmp_path)
    # batch 2 reaches 8 failures across 2 batches: request 3 carries the reminder;
    # batch 3 matches again: stopped, no request 4
    assert reminders(run) == [0, 0, 1], run.stderr[-2000:]
    assert run.returncode == 0
    assert _result(run)["result"] == ""  # where the stop shows headless: an empty result
    assert "tool-failure-guard hook" not in run.stderr  # the hook never failed open


def test_enforce_single_calls_stop_after_the_ninth_batch(tmp_path: Path) -> None:
    run = _run("enforce", lambda ws: [_shell_failure(ws, b) for b in range(12)], tmp_path)
    assert reminders(run) == [0] * 8 + [1]
    assert run.returncode == 0 and _result(run)["result"] == ""


def test_warn_reminds_once_and_never_stops(tmp_path: Path) -> None:
    run = _run("warn", lambda ws: [_reads(ws, b) for b in range(5)], tmp_path)
    assert reminders(run) == [0, 0, 1, 1, 1, 1]  # kept in the history, never repeated
    assert _result(run)["result"] == "Done."


def _comparable(run: Run) -> list[Any]:
    text = json.dumps([r.get("messages") for r in run.requests])
    return json.loads(text.replace(str(run.root), "ROOT"))


def test_shadow_sends_the_model_exactly_what_off_sends(tmp_path: Path) -> None:
    def turns(ws: Path) -> list[Turn]:
        return [_reads(ws, b) for b in range(4)]

    shadow = _run("shadow", turns, tmp_path)
    off = _run("off", turns, tmp_path)
    assert len(shadow.requests) == 5
    assert _comparable(shadow) == _comparable(off)
    assert reminders(shadow) == [0] * 5
    # shadow did observe: its state file holds the prompt's four batches; off kept nothing
    states = list(_state("shadow", tmp_path).glob("*.json"))
    assert len(states) == 1
    stored = json.loads(states[0].read_text(encoding="utf-8"))
    assert len(stored["state"]["loops"]["loops"][""]["batches"]) == 4, stored
    # off registered its install only (a managed off wins over others), applied nothing
    assert all(
        "loops" not in json.loads(p.read_text())["state"]
        for p in _state("off", tmp_path).glob("*.json")
    )


def test_a_recovered_run_continues(tmp_path: Path) -> None:
    def turns(ws: Path) -> list[Turn]:
        return [_reads(ws, 0), _reads(ws, 1), _present(ws), _reads(ws, 3)]

    run = _run("enforce", turns, tmp_path)
    assert reminders(run) == [0, 0, 1, 1, 1]  # the success reset the streak: no stop
    assert _result(run)["result"] == "Done."


def test_a_subagent_has_its_own_guard_its_stop_is_told_and_the_main_agent_told(
    tmp_path: Path,
) -> None:
    # notes §8: a subagent's PostToolBatch fires once per response with all its calls, and
    # no answer stops a Qwen Code subagent: the guard tells it the stop text instead
    marker = "SUBAGENT-Q"

    def main(ws: Path) -> list[Turn]:
        arguments = {
            "description": "check the files",
            "prompt": f"{marker}: read the files and report.",
            "subagent_type": "general-purpose",
            "run_in_background": False,
        }
        return [Turn(text="Delegating.", calls=(Call(name="agent", arguments=arguments),))]

    def agents(ws: Path) -> dict[str, list[Turn]]:
        return {marker: [_reads(ws, b) for b in range(5)]}

    run = run_qwen(main, system=_installed("enforce", tmp_path), base=tmp_path, agents=agents)
    ours = [r for r in run.requests if agent_of(r, [marker]) == marker]
    theirs = [r for r in run.requests if agent_of(r, [marker]) is None]

    def holding(requests: list[dict[str, Any]], text: str) -> list[int]:
        return [sum(t.count(text) for t in _texts(r)) for r in requests]

    # the subagent's own streak: reminded after its 2nd batch, the stop text after its 3rd
    # and after every later one (it goes on: its 5 scripted responses, then its answer)
    assert len(ours) == 6, run.stderr[-2000:]
    assert holding(ours, REMINDER) == [0, 0, 1, 1, 1, 1]
    assert holding(ours, REPEATED_TOOL_FAILURE_STOP_MESSAGE) == [0, 0, 0, 1, 2, 3]
    # the main agent: never reminded; its next request carries the notice; it ends normally
    assert len(theirs) == 2
    assert holding(theirs, REMINDER) == [0, 0]
    assert holding(theirs, "tool-failure-guard stopped the subagent") == [0, 1]
    assert run.returncode == 0 and _result(run)["result"] == "Done."
