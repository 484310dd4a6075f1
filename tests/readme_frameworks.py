"""The README's first-screen blocks: ``pip install`` lines and one snippet per framework.

Each framework snippet runs as written, its free names (``model``, ``tools``,
``agent``) bound to the framework's real model over the real wire to the
127.0.0.1 test server playing the shared failing loop (``read_file`` of a
missing file, four calls a batch), in ``enforce`` from the environment: the
snippet's agent must be stopped by the guard.  The prerequisite each snippet's
sentence states (a plain exception ends a pydantic-ai run; a LangChain tool
without an error handler ends the run on its first exception) is run too.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from openai_server import FakeOpenAI, serve

ROOT = Path(__file__).resolve().parent.parent
LOOP_TYPE = "repeated_tool_execution_failure"


def run_snippet(text: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Run a README python block (top-level ``await`` allowed) in ``namespace``."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    code = compile(text, "README.md", "exec", flags=flags, dont_inherit=True)
    pending = eval(code, namespace)
    if inspect.iscoroutine(pending):
        asyncio.run(pending)
    return namespace


#: What a build of the project reads from the checkout (caches and node_modules stay out).
SOURCES = ("pyproject.toml", "README.md", "tool_failure_guard")


def check_pip_install(text: str, tmp_path: Path) -> None:
    """Each line installs this checkout (``.``) with extras of pyproject, and pip takes it.

    The package is not on PyPI: the install that works is from the clone.  Each line runs
    as written in a copy of the checkout's sources, as a dry run of the real pip with no
    index (every requirement is already here), which must resolve and name the project.
    """
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
            "optional-dependencies"
        ]
    )
    lines = [line.split("#")[0].strip() for line in text.splitlines() if line.strip()]
    form = re.compile(r"pip install (-e )?'\.(\[[a-z,-]+\])?'")
    assert lines and all(form.fullmatch(line) for line in lines), lines
    named = set(re.findall(r"\[([a-z-]+)\]", text))
    assert named - extras == set(), f"extras not in pyproject.toml: {named - extras}"
    assert {"pydantic-ai", "langchain", "openai-agents"} <= named
    source = tmp_path / "clone"
    source.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
    for line in lines:
        argv = shlex.split(line)[2:]
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index",
             "--no-build-isolation", "--disable-pip-version-check", *argv],
            cwd=source, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (line, done.stderr[-3000:])
        assert "Would install tool-failure-guard" in done.stdout, (line, done.stdout[-2000:])
        assert "does not provide the extra" not in done.stderr, (line, done.stderr)


def check_first_agent(text: str, tmp_path: Path) -> None:
    """The complete agent runs as written, as a script, and shows what the README says."""
    script = tmp_path / "first_agent.py"
    script.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        f"{LOOP_TYPE} FailureKey(policy_tool_name='read_file', "
        "execution_error_type='file_not_found')",
        "('tracked', 'warn', 'stop')",
    ]
    assert "injected the reminder at batch 2" in done.stderr
    assert "stopped the run at batch 3" in done.stderr
    assert "Traceback" not in done.stderr


def looping(run: Callable[[str], dict[str, Any]]) -> tuple[FakeOpenAI, dict[str, Any]]:
    """``run(base_url)`` against the test server playing the shared failing loop."""
    from host_behaviour import SCENARIOS

    loop = next(s for s in SCENARIOS if s.name == "failing_loop")
    with serve(FakeOpenAI(loop.replies())) as fake:
        namespace = run(fake.base_url)
    return fake, namespace


def check_pydantic_ai(text: str, tmp_path: Path) -> None:
    from hosts.pydantic_ai import workspace_tools
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    def model(base_url: str) -> OpenAIChatModel:
        return OpenAIChatModel(
            "test-model", provider=OpenAIProvider(base_url=base_url, api_key="k")
        )

    def with_tools(tools: list[Any]) -> Callable[[str], dict[str, Any]]:
        return lambda url: run_snippet(text, {"model": model(url), "tools": tools})

    _, done = looping(with_tools(workspace_tools(tmp_path, [])))
    stop = done["stop"]  # the snippet caught the default stop, ProtectionStopped
    assert stop.loop_type == LOOP_TYPE and "result" not in done

    def read_file(path: str) -> str:
        """Read a file (raises a plain exception)."""
        return (tmp_path / path).read_text(encoding="utf-8")

    with pytest.raises(FileNotFoundError):  # the prerequisite: a plain exception ends the run
        looping(with_tools([read_file]))


def check_langchain(text: str, tmp_path: Path) -> None:
    from hosts.langchain import behaviour_tools, chat_model
    from langchain_core.tools import StructuredTool, ToolException

    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        try:
            return (tmp_path / path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ToolException(f"cannot read {path}: {exc.strerror}") from exc

    handled = [StructuredTool.from_function(read_file, handle_tool_error=True)]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        _, done = looping(
            lambda url: run_snippet(text, {"model": chat_model(url), "tools": handled})
        )
    assert "result" not in done  # the stop raised ProtectionStopped, the snippet caught it
    assert printed.getvalue().strip() == LOOP_TYPE

    plain = behaviour_tools(tmp_path)  # no error handler, no error middleware
    with pytest.raises(FileNotFoundError):  # the prerequisite: the first exception ends the run
        looping(lambda url: run_snippet(text, {"model": chat_model(url), "tools": plain}))


def check_openai_agents(text: str, tmp_path: Path) -> None:
    from hosts.openai_agents import behaviour_tools, make_agent

    from tool_failure_guard.integrations.openai_agents import GuardStop

    def run(url: str) -> dict[str, Any]:
        return run_snippet(text, {"agent": make_agent(url, behaviour_tools(tmp_path))})

    fake, done = looping(run)
    stop = done["stop"]  # the default: the stopped run raised, the snippet caught it
    assert "result" not in done and isinstance(stop, GuardStop)
    assert stop.loop_type == LOOP_TYPE
    assert len(fake.requests) == 3  # tracked, warned, stopped: no fourth request
