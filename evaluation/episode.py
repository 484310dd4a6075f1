"""One episode: one task, one arm, one seed, through the real path.

The project's own ACP client (:mod:`session.client`) spawns ``python -m
tool_failure_guard agent --model openai:<name> --telemetry file:PATH`` over
stdio, opens a session in the task's throwaway workspace (with the
evaluation's MCP server when the task needs it) and sends the one prompt.  The
agent talks to the endpoint through the official ``openai`` SDK.  When the
agent has exited (its telemetry flushed), :func:`evaluation.records.episode_record`
reads the agent's own telemetry and history into the episode's record.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import attrs
from acp import text_block
from acp.schema import McpServerStdio

from evaluation.records import episode_record
from evaluation.tasks import MCP_SERVER_NAME, Task
from session.client import RecordingClient, spawn_guarded_agent_process
from session.envconfig import MCP_TIMEOUT_ENV_VAR, TOOL_CALL_CAP_ENV_VAR

ARMS = ("off", "shadow", "warn", "enforce")
MCP_SERVER_SCRIPT = Path(__file__).resolve().parent / "mcp_slow_server.py"


@attrs.frozen(kw_only=True)
class Settings:
    """What every episode of a run shares."""

    base_url: str
    api_key: str = attrs.field(repr=False)
    model: str
    temperature: float = 0.7
    max_tokens: int = 256
    tool_call_cap: int = 24
    mcp_timeout_s: float = 3.0
    #: harness limit on one episode; an episode past it is recorded as "harness_timeout"
    episode_timeout_s: float = 900.0


def episode_id(task: Task, arm: str, seed: int) -> str:
    return f"{task.name}.{arm}.s{seed}"


def _mcp_servers(task: Task) -> list[Any]:
    if not task.mcp:
        return []
    return [
        McpServerStdio(
            name=MCP_SERVER_NAME, command=sys.executable, args=[str(MCP_SERVER_SCRIPT)], env=[]
        )
    ]


async def _drive(
    task: Task, arm: str, seed: int, settings: Settings, root: Path
) -> tuple[str, str, float, dict[str, Any]]:
    """Run the prompt; (session id, ACP stop reason or error, wall seconds, response meta)."""
    project, home, state = root / "project", root / "home", root / "state"
    home.mkdir(parents=True, exist_ok=True)
    task.build(project)
    client = RecordingClient()
    args = [
        "--model",
        f"openai:{settings.model}",
        "--telemetry",
        f"file:{root / 'telemetry.jsonl'}",
        "--temperature",
        str(settings.temperature),
        "--seed",
        str(seed),
        "--max-tokens",
        str(settings.max_tokens),
        "--model-max-retries",
        "1",
    ]
    env = {
        "OPENAI_BASE_URL": settings.base_url,
        "OPENAI_API_KEY": settings.api_key,
        TOOL_CALL_CAP_ENV_VAR: str(settings.tool_call_cap),
        MCP_TIMEOUT_ENV_VAR: f"{settings.mcp_timeout_s:g}",
    }
    with (root / "agent.stderr").open("w") as stderr:
        async with spawn_guarded_agent_process(
            client,
            mode=arm,
            state_dir=state,
            home=home,
            extra_args=args,
            extra_env=env,
            stderr=stderr,
        ) as (conn, _process):
            session = await conn.new_session(cwd=str(project), mcp_servers=_mcp_servers(task))
            started = time.monotonic()
            try:
                response = await asyncio.wait_for(
                    conn.prompt(session_id=session.session_id, prompt=[text_block(task.prompt)]),
                    settings.episode_timeout_s,
                )
            except TimeoutError:
                await conn.cancel(session_id=session.session_id)
                return session.session_id, "harness_timeout", time.monotonic() - started, {}
            except Exception as exc:  # the prompt failed: recorded, never a verdict
                return session.session_id, f"error: {exc}"[:300], time.monotonic() - started, {}
            wall = time.monotonic() - started
            meta = dict((response.field_meta or {}).get("toolFailureGuard") or {})
            return session.session_id, str(response.stop_reason), wall, meta


def run_episode(
    task: Task, arm: str, seed: int, settings: Settings, work: Path
) -> dict[str, Any]:
    """Run one episode in ``work/<episode id>`` and return its record."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; arms: {', '.join(ARMS)}")
    root = work / episode_id(task, arm, seed)
    root.mkdir(parents=True, exist_ok=False)
    session_id, acp_stop, wall, meta = asyncio.run(_drive(task, arm, seed, settings, root))
    return episode_record(
        task=task,
        arm=arm,
        seed=seed,
        root=root,
        session_id=session_id,
        acp_stop=acp_stop,
        wall_s=wall,
        meta=meta,
    )
