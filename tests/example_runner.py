"""Running the runnable examples as a user would: a subprocess against the 127.0.0.1 server.

Two kinds of example take the same arguments: the library-level ones
(``own_loop.py``, ``pydantic_ai_agent.py``: ``--workspace``) and the framework
ones (``langchain_agent.py``, ``openai_agents_agent.py``: ``--root``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from host_behaviour import SCENARIOS
from openai_server import FakeOpenAI, Reply, call, serve

from tool_failure_guard.guard import GUARD_MODE_ENV_VAR

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
#: The shared behaviour set's failing loop: what the workspace examples are driven with.
LOOP = next(s for s in SCENARIOS if s.name == "failing_loop")


def run_workspace_example(
    script: str, tmp_path: Path, *args: str, env_mode: str | None = None
) -> tuple[FakeOpenAI, subprocess.CompletedProcess[str]]:
    """``examples/<script>`` asked to read a missing file, the model playing the failing loop."""
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    with serve(FakeOpenAI(LOOP.replies())) as fake:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "PYTHONPATH": str(ROOT),
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-test-key",
        }
        if env_mode is not None:
            env[GUARD_MODE_ENV_VAR] = env_mode
        done = subprocess.run(
            [
                sys.executable,
                str(EXAMPLES / script),
                "--model",
                "test-model",
                "--workspace",
                str(tmp_path),
                *args,
                "Read missing.txt",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    return fake, done


def run_root_example(
    script: str, fake: FakeOpenAI, root: Path, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``examples/<script> --root ROOT ARGS`` in enforce against ``fake``."""
    return subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / script),
            "--model",
            "test-model",
            "--root",
            str(root),
            *args,
        ],
        env={
            **os.environ,
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-test-key",
            GUARD_MODE_ENV_VAR: "enforce",
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def reading(path: str, calls_per_turn: int = 1) -> Callable[[dict[str, Any]], Reply]:
    """A model that reads ``path`` (``calls_per_turn`` calls a turn) for 20 turns, then gives up."""

    def respond(body: dict[str, Any]) -> Reply:
        n = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if n >= 20:
            return Reply(text="I could not read it.")
        if calls_per_turn == 1:
            return Reply(calls=(call(f"c{n}", "read_file", {"path": path}),))
        calls = tuple(call(f"c{n}-{i}", "read_file", {"path": path}) for i in range(calls_per_turn))
        return Reply(calls=calls)

    return respond
