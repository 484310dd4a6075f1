"""The OpenAI Agents SDK adapter's docs and example stay true.

``docs/integrations.md`` ("OpenAI Agents SDK") documents the outcome mapping
as a table: it must be exactly the adapter's :data:`OUTCOME_ROWS`.  The
runnable example ``examples/openai_agents_agent.py`` runs as a user would run
it, as a subprocess, against the 127.0.0.1 test server.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from example_runner import reading, run_root_example
from openai_server import FakeOpenAI, Reply, call, serve

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)
from tool_failure_guard.integrations.openai_agents import OUTCOME_ROWS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "integrations.md"


def _table(name: str) -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"<!-- {name}:begin -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    rows = [line for line in body.strip().splitlines() if line.startswith("|")]
    return [[cell.strip().strip("`") for cell in row.strip("|").split("|")] for row in rows[2:]]


def test_the_docs_outcome_table_is_the_adapters() -> None:
    documented = [tuple(row) for row in _table("openai-agents-outcomes")]
    code = [
        (row.outcome, row.terminal_status, row.execution_status, row.error_type)
        for row in OUTCOME_ROWS
    ]
    assert documented == code


def test_the_docs_show_the_entry_point_the_module_exports() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## OpenAI Agents SDK", 1)[1]
    for name in ("GuardedRunner", "stop_of", "report_of", "GuardStop", "ProtectionStopped"):
        assert name in section
    assert "openai-agents>=0.24,<0.25" in section
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'openai-agents = ["openai-agents>=0.24,<0.25"]' in pyproject


def _example(fake: FakeOpenAI, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_root_example("openai_agents_agent.py", fake, root, *args)


def test_the_example_is_stopped_by_the_guard_on_a_failing_loop(tmp_path: Path) -> None:
    fake = FakeOpenAI(reading("missing.md"))
    with serve(fake):
        done = _example(fake, tmp_path, "Summarise missing.md")
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
    assert "[stopped by the guard: repeated_tool_execution_failure]" in done.stderr
    assert len(fake.requests) == 9
    assert fake.count_in(8, REPEATED_TOOL_FAILURE_REMINDER) == 1


def test_the_streamed_example_is_stopped_too(tmp_path: Path) -> None:
    fake = FakeOpenAI(reading("missing.md"))
    with serve(fake):
        done = _example(fake, tmp_path, "--stream", "Summarise missing.md")
    assert done.returncode == 3, done.stderr  # raised from stream_events(), caught
    assert done.stdout.strip() == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
    assert len(fake.requests) == 9


def test_the_example_streams_and_completes_when_the_tool_works(tmp_path: Path) -> None:
    (tmp_path / "TODO.md").write_text("ship it\n", encoding="utf-8")

    def respond(body: dict[str, Any]) -> Reply:
        if any(m["role"] == "tool" for m in body["messages"]):
            return Reply(text="The TODO says: ship it.")
        return Reply(calls=(call("c0", "read_file", {"path": "TODO.md"}),))

    fake = FakeOpenAI(respond)
    with serve(fake):
        done = _example(fake, tmp_path, "--stream", "Summarise TODO.md")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "The TODO says: ship it."
    tool_messages = [m for m in fake.messages(1) if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "ship it\n"
