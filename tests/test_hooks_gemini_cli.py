"""The guard's hook in the real Gemini CLI 0.61.0, headless (``gemini -p``).

Each test runs the pinned CLI against the local Gemini API fake
(``tests/agent_fakes/gemini_api.py``) with the hook installed by ``hook
install gemini-cli``: at the user scope (a private ``HOME``) for what the hook
does, and at the system scope for what a project cannot undo (Gemini CLI reads
a system file only where root owns it and every folder above it is writable by
root only, so that test needs root).  Gemini CLI's hooks can stop (``BeforeModel``
``decision: "deny"``) but have no reliable way to put the reminder into a
failing batch's next request, so ``warn`` and ``shadow`` send the model exactly
what ``off`` sends, and ``enforce`` stops where the seed stops.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_clis import gemini_script, require
from agent_fakes.script import Call, Turn
from hook_clis import Run, run_gemini, secure_folder, secure_folder_unavailable

from tool_failure_guard.guard import GUARD_MODE_ENV_VAR, REPEATED_TOOL_FAILURE_STOP_MESSAGE

#: Gemini CLI's call ids carry the clock (``read_file_<ms>_<n>``).
CALL_ID_CLOCK = re.compile(r"_\d{10,}_(\d+)")
STOP_SHOWN = REPEATED_TOOL_FAILURE_STOP_MESSAGE.removeprefix("System: ")


@pytest.fixture(autouse=True)
def _gemini() -> None:
    require(gemini_script)


def _reads(batch: int, n: int = 4) -> Turn:
    # relative paths: Gemini CLI refuses a path outside the workspace before running the tool
    return Turn(
        text="Reading.",
        calls=tuple(
            Call(name="read_file", arguments={"file_path": f"missing-{batch}-{i}.txt"})
            for i in range(n)
        ),
    )


def _shell_failure(batch: int) -> Turn:
    command = f"cat missing-{batch}.txt; exit 3"  # Gemini: a success whose text says Exit Code: 3
    return Turn(calls=(Call(name="run_shell_command", arguments={"command": command}),))


def _present() -> Turn:
    return Turn(calls=(Call(name="read_file", arguments={"file_path": "present.txt"}),))


def _installed(mode: str, root: Path, start: dict[str, Any] | None = None) -> dict[str, Any]:
    settings = root / f"settings-{mode}.json"
    settings.write_text(json.dumps(start or {}), encoding="utf-8")
    argv = [sys.executable, "-m", "tool_failure_guard", "hook", "install", "gemini-cli"]
    subprocess.run([*argv, "--mode", mode, "--settings", str(settings)], check=True)
    document: dict[str, Any] = json.loads(settings.read_text(encoding="utf-8"))
    assert document["hooksConfig"]["enabled"] is True
    return document


def _user_run(mode: str, turns: list[Turn], tmp_path: Path) -> Run:
    from hook_clis import GEMINI_USER_SETTINGS

    return run_gemini(
        turns, user=_installed(mode, tmp_path, dict(GEMINI_USER_SETTINGS)), base=tmp_path
    )


def _stop_warnings(run: Run) -> list[str]:
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    return [
        str(line.get("message"))
        for line in lines
        if line.get("type") == "error" and "Agent execution blocked" in str(line.get("message"))
    ]


def _comparable(run: Run) -> list[Any]:
    """The requests' contents, less what differs between any two runs (paths, call-id clocks)."""
    text = json.dumps([r.get("contents") for r in run.requests])
    text = CALL_ID_CLOCK.sub(r"_T_\1", text.replace(str(run.root), "ROOT"))
    return json.loads(text)


def test_enforce_single_calls_stop_after_the_ninth_batch(tmp_path: Path) -> None:
    run = _user_run("enforce", [_shell_failure(b) for b in range(12)], tmp_path)
    # batch 8 reaches 8 failures (the reminder, which Gemini CLI cannot carry); batch 9 stops
    assert len(run.requests) == 9, run.stderr[-2000:]
    assert _stop_warnings(run) == [f"Agent execution blocked: {STOP_SHOWN}"]
    assert run.returncode == 0


def test_warn_and_shadow_send_the_model_exactly_what_off_sends(tmp_path: Path) -> None:
    turns = [_reads(b) for b in range(4)]
    off = _user_run("off", turns, tmp_path)
    runs = {mode: _user_run(mode, turns, tmp_path) for mode in ("shadow", "warn")}
    assert len(off.requests) == 5
    for mode, run in runs.items():
        assert _comparable(run) == _comparable(off), mode
        assert not _stop_warnings(run), mode


def test_a_recovered_run_continues(tmp_path: Path) -> None:
    turns = [_reads(0), _reads(1), _present(), _reads(3), _reads(4)]
    run = _user_run("enforce", turns, tmp_path)
    assert len(run.requests) == 6  # the success reset the streak: no stop
    assert not _stop_warnings(run)


def test_installed_at_the_system_scope_a_trusted_project_changes_nothing(tmp_path: Path) -> None:
    why = secure_folder_unavailable()
    if why is not None:
        pytest.skip(why)
    project = {"hooksConfig": {"enabled": False}, "hooks": {}}
    with secure_folder() as folder:
        run = run_gemini(
            [_reads(b) for b in range(6)],
            system=_installed("enforce", tmp_path),
            system_folder=folder,
            project=project,
            trusted=True,  # a trusted folder: its settings are read, and lose to the system's
            env={GUARD_MODE_ENV_VAR: "off"},
            base=tmp_path,
        )
    # batch 2 reaches 8 failures across 2 batches; batch 3 matches again: no request 4
    assert len(run.requests) == 3, run.stderr[-2000:]
    assert _stop_warnings(run) == [f"Agent execution blocked: {STOP_SHOWN}"]
    assert run.returncode == 0
