"""docs/integrations.md's python blocks run as written, for behaviour (issue 34, item 2).

Each block's free names are bound the way ``tests/readme_frameworks.py`` binds the
README's: ``model`` / ``agent`` / ``tools`` to the framework's real model over the real
wire to the 127.0.0.1 test server playing the shared failing loop (``read_file`` of a
missing file, four calls a batch), in ``enforce`` from the environment.  The own-loop
block's names (``c``, ``args``, ``run_tool``, ``messages``) are one model tool call and a
tool that fails.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from readme_frameworks import LOOP_TYPE, looping, run_snippet

import tool_failure_guard as tfg

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "integrations.md"
KEY = "FailureKey(policy_tool_name='read_file', execution_error_type='file_not_found')"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.M | re.S)


def block(first_line: str) -> str:
    (found,) = [text for text in python_blocks() if first_line in text.splitlines()[0]]
    return found


@pytest.fixture(autouse=True)
def enforce(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD", "enforce")


def printed(run: Any) -> tuple[str, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _, namespace = looping(run)
    return out.getvalue(), namespace


def test_the_own_loop_block_settles_a_failure_and_continues() -> None:
    def run_tool(call: Any) -> str:
        raise FileNotFoundError(call.name)

    names: dict[str, Any] = {
        "c": SimpleNamespace(id="c1", function=SimpleNamespace(name="read_file")),
        "args": {"path": "gone"},
        "run_tool": run_tool,
        "messages": [],
    }
    done = run_snippet(block("import tool_failure_guard as tfg"), names)
    assert isinstance(done["action"], tfg.Continue) and done["messages"] == []
    (outcome,) = done["batch"].settled()
    assert outcome.execution_error_type == "file_not_found"


def test_the_pydantic_ai_block_catches_the_stop(tmp_path: Path) -> None:
    from hosts.pydantic_ai import workspace_tools
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    def run(url: str) -> dict[str, Any]:
        model = OpenAIChatModel("test-model", provider=OpenAIProvider(base_url=url, api_key="k"))
        names = {"model": model, "tools": workspace_tools(tmp_path, [])}
        return run_snippet(block("from pydantic_ai import Agent"), names)

    out, done = printed(run)
    assert out.strip() == f"{LOOP_TYPE} {KEY}"
    assert done["history"]  # the run's messages, to continue later


def test_the_openai_agents_blocks_run_and_catch_the_stop(tmp_path: Path) -> None:
    from hosts.openai_agents import behaviour_tools, make_agent

    from tool_failure_guard.integrations.openai_agents import GuardedRunner, ProtectionStopped

    def run(text: str) -> Any:
        def go(url: str) -> dict[str, Any]:
            names = {"agent": make_agent(url, behaviour_tools(tmp_path))}
            return run_snippet(text, {**names, "GuardedRunner": GuardedRunner})

        return go

    first = block("from tool_failure_guard.integrations.openai_agents import GuardedRunner")
    with pytest.raises(ProtectionStopped):  # enforce: the two changed lines raise the stop
        looping(run(first))
    out, _ = printed(run(block("from agents import MaxTurnsExceeded")))
    assert out.splitlines()[0] == f"{LOOP_TYPE} {KEY}"


def test_the_langchain_block_catches_the_stop(tmp_path: Path) -> None:
    from hosts.langchain import chat_model
    from langchain_core.tools import StructuredTool, ToolException

    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        try:
            return (tmp_path / path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ToolException(f"cannot read {path}") from exc

    tools = [StructuredTool.from_function(read_file, handle_tool_error=True)]
    out, done = printed(
        lambda url: run_snippet(
            block("from langchain.agents import create_agent"),
            {"model": chat_model(url), "tools": tools},
        )
    )
    assert out.strip() == f"{LOOP_TYPE} {KEY}"
    assert done["report"].stop is not None and done["report"].stop.key.execution_error_type == (
        "file_not_found"
    )
