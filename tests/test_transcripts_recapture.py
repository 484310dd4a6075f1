"""The fixtures are what the real CLIs write: capture afresh, import both, compare.

Runs the pinned Claude Code and Codex CLI (``.agents/``, ``make setup``) against the
local fakes exactly as ``tests/transcript_capture.py`` made the committed fixtures
(a few seconds each), then checks that the importer reads the same runs from the new
logs as from the committed ones: every call's tool and outcome, the batches, the
tokens, success.  ``heuristic`` is left out of the comparison: whether Codex records
a completed item for a command its sandbox refused varies between runs, and with it
only whether that row's type came from the item or from the output's text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import agent_clis
import pytest
import transcript_capture as capture
from transcript_files import CLAUDE, CODEX
from transcript_scrub import SCRUBBED_ROOT

from tool_failure_guard.transcripts.importers import claude_code, codex
from tool_failure_guard.transcripts.model import Run


def summary(run: Run) -> dict[str, Any]:
    return {
        "model": run.model,
        "succeeded": run.succeeded,
        "turns": [
            (
                turn.input_tokens,
                turn.output_tokens,
                [
                    (
                        c.tool,
                        c.status,
                        c.execution_status,
                        c.error_type,
                        c.mcp,
                        c.arguments_fingerprint,
                    )
                    for c in turn.calls
                ],
            )
            for turn in run.turns
        ],
    }


def _same_runs(reader: Any, fresh: Path, committed: Path) -> None:
    fresh_runs = [summary(r) for r in reader(str(fresh))]
    committed_runs = [summary(r) for r in reader(str(committed))]
    assert fresh_runs == committed_runs


def test_claude_code_writes_what_the_fixtures_hold(tmp_path: Path) -> None:
    agent_clis.require(agent_clis.claude_binary)
    (tmp_path / "runs").mkdir()
    written = capture.write_claude(capture.capture_claude(tmp_path / "runs"), tmp_path / "out")
    assert sorted(p.name for p in written) == sorted(p.name for p in CLAUDE.glob("*.jsonl"))
    for path in written:
        # the arguments name the workspace: scrubbed to the same /tmp/capture as the fixtures
        _same_runs(claude_code.read, path, CLAUDE / path.name)
        assert str(tmp_path) not in path.read_text(encoding="utf-8")  # scrubbed


def test_codex_writes_what_the_fixtures_hold(tmp_path: Path) -> None:
    agent_clis.require(agent_clis.codex_script)
    (tmp_path / "runs").mkdir()
    written = capture.write_codex(capture.capture_codex(tmp_path / "runs"), tmp_path / "out")
    assert sorted(p.name for p in written) == sorted(p.name for p in CODEX.glob("*.jsonl"))
    for path in written:
        _same_runs(codex.read, path, CODEX / path.name)
        assert str(tmp_path) not in path.read_text(encoding="utf-8")  # scrubbed


@pytest.mark.parametrize("find", [agent_clis.claude_binary, agent_clis.codex_script])
def test_an_absent_cli_says_how_to_get_it(
    find: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(agent_clis.AGENTS_PREFIX_ENV, str(tmp_path))
    with pytest.raises(agent_clis.AgentUnavailable, match="make agents"):
        find()


def test_the_fixtures_hold_no_machine_paths_or_keys() -> None:
    for path in [*CLAUDE.glob("*.jsonl"), *CODEX.glob("*.jsonl")]:
        text = path.read_text(encoding="utf-8")
        for found in re.findall(r"/tmp/[^/\"\\\s]*", text):
            assert found == SCRUBBED_ROOT, (path.name, found)
        for found in re.findall(r"-tmp-[A-Za-z0-9]*", text):
            assert found == "-tmp-capture", (path.name, found)
        assert "/root" not in text.replace("<root>", "").replace("</root>", "")
        assert "sk-" not in text, path.name
