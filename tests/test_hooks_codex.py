"""The guard's hook in the real Codex CLI 0.169.0 (``codex exec``): a reminder one request late.

The pinned CLI runs against the local Responses API fake with the hook
installed by ``hook install codex --settings $CODEX_HOME/hooks.json`` (run with
``--dangerously-bypass-hook-trust``: these are the test's own hooks).  Codex
has no failure or batch event, so the hook learns a batch's results only when
the next batch starts: the reminder reaches the model one request after the
seed's place, and nothing a hook answers ends a turn (``enforce`` runs as
``warn``).  ``shadow`` sends the model exactly what ``off`` sends.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_clis import codex_script, require
from agent_fakes.script import Call, Turn
from hook_clis import Run, run_codex

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER

REMINDER = REPEATED_TOOL_FAILURE_REMINDER
#: What Codex writes into a command's output that differs between any two runs.
VARYING = re.compile(r"Chunk ID: \w+|Wall time: [0-9.]+ seconds")


@pytest.fixture(autouse=True)
def _codex() -> None:
    require(codex_script)


def _failing(batch: int, n: int) -> Turn:
    calls = tuple(
        Call(name="exec_command", arguments={"cmd": f"cat missing-{batch}-{i}.txt; exit 3"})
        for i in range(n)
    )
    return Turn(text="Reading.", calls=calls)


def _run(mode: str, turns: list[Turn], tmp_path: Path) -> Run:
    settings = tmp_path / f"hooks-{mode}.json"
    argv = [sys.executable, "-m", "tool_failure_guard", "hook", "install", "codex"]
    argv += ["--mode", mode, "--settings", str(settings)]
    argv += ["--state-dir", str(tmp_path / f"state-{mode}")]
    subprocess.run(argv, check=True, capture_output=True, text=True)
    hooks = json.loads(settings.read_text(encoding="utf-8"))
    return run_codex(turns, hooks=hooks, base=tmp_path)


def reminders(run: Run) -> list[int]:
    return [json.dumps(r["input"]).count(json.dumps(REMINDER)[1:-1]) for r in run.requests]


def test_enforce_parallel_reminds_one_request_late_and_never_stops(tmp_path: Path) -> None:
    run = _run("enforce", [_failing(b, 4) for b in range(5)], tmp_path)
    # batch 2 reaches 8 failures across 2 batches; the hook learns it when batch 3 starts,
    # so request 4 (not 3) carries the reminder; every scripted turn runs, then the answer
    assert reminders(run) == [0, 0, 0, 1, 1, 1]
    assert run.returncode == 0 and '"text":"Done."' in run.stdout.replace(" ", "")


def test_warn_single_calls_remind_after_the_ninth_batch_starts(tmp_path: Path) -> None:
    run = _run("warn", [_failing(b, 1) for b in range(10)], tmp_path)
    assert reminders(run) == [0] * 9 + [1, 1]


def _comparable(run: Run) -> Any:
    def scrub(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items() if k not in ("id", "prompt_cache_key")}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    text = json.dumps([scrub(r["input"]) for r in run.requests]).replace(str(run.root), "ROOT")
    return json.loads(VARYING.sub("(varies)", text))


def test_shadow_sends_the_model_exactly_what_off_sends(tmp_path: Path) -> None:
    turns = [_failing(b, 4) for b in range(4)]
    shadow = _run("shadow", turns, tmp_path)
    off = _run("off", turns, tmp_path)
    assert len(shadow.requests) == 5
    assert _comparable(shadow) == _comparable(off)
    assert list((tmp_path / "state-shadow").glob("*.json"))  # shadow observed
    # off registered its install only (a managed off wins over others), applied nothing
    assert all(
        "loops" not in json.loads(p.read_text())["state"]
        for p in (tmp_path / "state-off").glob("*.json")
    )
