"""Run the guarded agent over ACP stdio with either provider: scripted, or OpenAI-compatible.

``openai`` runs the agent with ``--model openai:test-model`` against a
:class:`tests.openai_server.FakeOpenAI` on 127.0.0.1 (``OPENAI_BASE_URL``,
``OPENAI_API_KEY`` in the agent's environment): the real SDK, real HTTP.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import attrs
from acp import text_block
from openai_server import Answer, FakeOpenAI, Responder, ScenarioResponder, serve

from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.persistence.messages import Message
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent

PROVIDERS = ("scripted", "openai")
MODEL_NAME = "test-model"


@attrs.frozen
class Run:
    client: RecordingClient
    responses: list[Any]
    session_id: str
    history: list[Message]
    fake: FakeOpenAI | None
    stderr: str


def openai_args(fake: FakeOpenAI, *extra: str) -> tuple[list[str], dict[str, str]]:
    return (
        ["--model", f"openai:{MODEL_NAME}", "--model-max-retries", "2", *extra],
        {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test-key"},
    )


def run_agent(
    root: Path,
    *,
    mode: str | None,
    provider: str,
    scenario: dict[str, Any] | None = None,
    answers: Responder | Sequence[Answer] | None = None,
    prompts: Sequence[str] = ("go",),
    reject_later_system: bool = False,
    extra_args: Sequence[str] = (),
    client: RecordingClient | None = None,
) -> Run:
    """One session, ``prompts`` sent in order; errors are collected as responses."""
    project, home, state = root / "project", root / "home", root / "state"
    for folder in (project, home):
        folder.mkdir(exist_ok=True)
    scenario_path = root / "scenario.json"
    scenario_path.write_text(json.dumps(scenario or {"turns": []}), encoding="utf-8")
    client = client or RecordingClient()
    stderr_path = root / "agent.stderr"
    with ExitStack() as stack:
        fake: FakeOpenAI | None = None
        args, env = list(extra_args), {}
        if provider == "openai":
            responder = answers if answers is not None else ScenarioResponder(scenario or {})
            fake = stack.enter_context(
                serve(FakeOpenAI(responder, reject_later_system=reject_later_system))
            )
            more, env = openai_args(fake)
            args = [*more, *args]
        stderr = stack.enter_context(stderr_path.open("w"))

        async def go() -> tuple[list[Any], str]:
            responses: list[Any] = []
            async with spawn_guarded_agent(
                client,
                mode=mode,
                state_dir=state,
                home=home,
                scenario=None if provider == "openai" else str(scenario_path),
                extra_args=args,
                extra_env=env,
                stderr=stderr,
            ) as conn:
                session = await conn.new_session(cwd=str(project), mcp_servers=[])
                for text in prompts:
                    try:
                        responses.append(
                            await conn.prompt(
                                session_id=session.session_id, prompt=[text_block(text)]
                            )
                        )
                    except Exception as exc:  # an error answer is a result here
                        responses.append(exc)
            return responses, session.session_id

        responses, session_id = asyncio.run(asyncio.wait_for(go(), 60))
    history = HistoryStore(state).load(session_id)[1]
    return Run(
        client=client,
        responses=responses,
        session_id=session_id,
        history=history,
        fake=fake,
        stderr=stderr_path.read_text(encoding="utf-8"),
    )
