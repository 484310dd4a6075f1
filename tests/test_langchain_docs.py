"""The LangChain adapter's docs and example stay true.

``docs/integrations.md`` ("LangChain") documents the outcome mapping as a
table: it must be exactly the adapter's :data:`OUTCOME_ROWS`.  The runnable
example ``examples/langchain_agent.py`` runs as a user would run it, as a
subprocess, against the 127.0.0.1 test server.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from example_runner import reading, run_root_example
from openai_server import FakeOpenAI, Reply, call, serve

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)
from tool_failure_guard.integrations.langchain import OUTCOME_ROWS, TOOL_ERROR_STATUS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "integrations.md"


def _section() -> str:
    return DOC.read_text(encoding="utf-8").split("\n## LangChain\n", 1)[1].split("\n## ", 1)[0]


def _table(name: str) -> list[list[str]]:
    body = _section().split(f"<!-- {name}:begin -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    rows = [line for line in body.strip().splitlines() if line.startswith("|")]
    return [[cell.strip().strip("`") for cell in row.strip("|").split("|")] for row in rows[2:]]


def test_the_docs_outcome_table_is_the_adapters() -> None:
    documented = [tuple(row) for row in _table("langchain-outcomes")]
    code = [
        (row.outcome, row.terminal_status, row.execution_status, row.error_type)
        for row in OUTCOME_ROWS
    ]
    assert documented == code
    assert TOOL_ERROR_STATUS in {row.error_type for row in OUTCOME_ROWS}


def test_the_docs_show_the_entry_point_and_the_pins() -> None:
    section = _section()
    for name in (
        "RepeatedToolFailureMiddleware",
        "stop_of",
        "report_of",
        "GuardStop",
        "wrap_model_call",
    ):
        assert name in section
    pin = 'langchain = ["langchain>=1.5,<1.6", "langchain-openai>=1.7,<1.8"]'
    assert pin in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "langchain>=1.5,<1.6" in section and "langchain-openai>=1.7,<1.8" in section
    install = re.search(
        r"pip install -q -e '\.\[([^\]]*)\]'", (ROOT / "Makefile").read_text(encoding="utf-8")
    )
    assert install is not None and "langchain" in install.group(1).split(",")


def _example(fake: FakeOpenAI, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_root_example(
        "langchain_agent.py", fake, root, *args, env={"LANGSMITH_TRACING": "false"}
    )


def test_the_example_is_stopped_by_the_guard_on_a_failing_loop(tmp_path: Path) -> None:
    fake = FakeOpenAI(reading("missing.md", calls_per_turn=4))
    with serve(fake):
        done = _example(fake, tmp_path, "Summarise missing.md")
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
    assert "[stopped by the guard: repeated_tool_execution_failure]" in done.stderr
    assert len(fake.requests) == 3
    assert fake.count_in(2, REPEATED_TOOL_FAILURE_REMINDER) == 1
    assert fake.count_in(2, "missing.md: no such file") == 8  # the tool's own error text


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


def test_tool_error_middleware_after_the_guard_sends_failures_to_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error policy the docs put first: ``ToolErrorMiddleware`` after the middleware."""
    from hosts.langchain import behaviour_tools, chat_model
    from langchain.agents import create_agent
    from langchain.agents.middleware import ToolErrorMiddleware
    from readme_frameworks import LOOP_TYPE, looping

    from tool_failure_guard.integrations.langchain import (
        ProtectionStopped,
        RepeatedToolFailureMiddleware,
    )

    assert (
        "`ToolErrorMiddleware(on_error=...)` *after* `RepeatedToolFailureMiddleware`"
        in (DOC.read_text(encoding="utf-8").split("\n## Use the guard in your own loop\n", 1)[0])
    )
    monkeypatch.setenv("QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD", "enforce")

    def on_error(exc: Exception, request: Any) -> str:
        return f"{type(exc).__name__}: {exc}"

    def run(url: str) -> dict[str, Any]:
        middleware = [RepeatedToolFailureMiddleware(), ToolErrorMiddleware(on_error=on_error)]
        agent = create_agent(chat_model(url), behaviour_tools(tmp_path), middleware=middleware)
        try:
            agent.invoke({"messages": [{"role": "user", "content": "go"}]})
        except ProtectionStopped as stopped:
            return {"result": stopped}
        return {"result": None}

    fake, done = looping(run)
    stop = RepeatedToolFailureMiddleware.stop_of(done["result"])
    assert stop is not None and stop.loop_type == LOOP_TYPE
    assert "FileNotFoundError" in str(fake.messages(1))  # the failure reached the model
