"""One episode: one task, one arm, one seed, through the real path.

The project's own ACP client (:mod:`~tool_failure_guard.session.transport.client`) spawns ``python
-m
tool_failure_guard agent --model openai:<name> --telemetry file:PATH`` over
stdio, opens a session in the task's throwaway workspace (with the
evaluation's MCP server when the task needs it) and sends the one prompt.  The
agent talks to the endpoint through the official ``openai`` SDK.  When the
agent has exited (its telemetry flushed),
:func:`~tool_failure_guard.evaluation.records.episode_record`
reads the agent's own telemetry and history into the episode's record.

Reproducibility: before each episode's prompt the server's prompt cache is
emptied (``Settings.cache_reset == "slot-erase"``: llama-server's slot API,
see :mod:`~tool_failure_guard.evaluation.server`), and every episode of a task
runs in a workspace at the same path (and with the same HOME) whatever its arm
and seed, so the off and shadow episodes of a task and seed send the server the
same requests until a reminder or a stop makes them differ; a divergence
before that is nondeterminism left in the server, which the report's
reproducibility check names.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
from acp import text_block
from acp.schema import McpServerStdio

from tool_failure_guard.evaluation.records import episode_record
from tool_failure_guard.evaluation.server import EndpointError, erase_slot
from tool_failure_guard.evaluation.tasks import MCP_SERVER_NAME, Task
from tool_failure_guard.session.config.envconfig import MCP_TIMEOUT_ENV_VAR, TOOL_CALL_CAP_ENV_VAR
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent_process

ARMS = ("off", "shadow", "warn", "enforce")
MCP_SERVER_SCRIPT = Path(__file__).resolve().parent / "mcp_slow_server.py"
#: The evaluation's system prompt: the built-in one, plus "make the call, never describe
#: it" (without it the 1.5B model mostly described calls in prose: no tool calls at all).
SYSTEM_PROMPT = Path(__file__).resolve().parent / "system_prompt.txt"


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
    #: "slot-erase": empty llama-server's slot 0 at ``root_url`` before every episode
    cache_reset: str = "none"
    root_url: str = ""


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


@attrs.frozen
class Driven:
    """What the client saw of one episode's prompt."""

    task: Task
    root: Path
    session_id: str
    acp_stop: str  #: the ACP stop reason, "harness_timeout" or "error: ..."
    wall_s: float
    meta: dict[str, Any]
    #: how the server's prompt cache stood at the episode's start (the record's ``prompt_cache``)
    prompt_cache: dict[str, Any] = attrs.field(factory=dict)


#: Called with each episode's outcome as soon as its prompt ends (progress).
OnEpisode = Callable[[Driven], None]


def _error_text(exc: BaseException) -> str:
    data = getattr(exc, "data", None)
    return f"error: {exc}" + (f" ({data})" if data else "")


async def _reset_cache(settings: Settings) -> dict[str, Any]:
    if settings.cache_reset != "slot-erase":
        return {"reset": "none"}
    erased = await asyncio.to_thread(erase_slot, settings.root_url)
    return {"reset": "slot-erase", "n_erased": erased}


async def _prompt(conn: Any, task: Task, root: Path, settings: Settings) -> Driven:
    project = root / "project"
    task.build(project)
    session = await conn.new_session(cwd=str(project), mcp_servers=_mcp_servers(task))
    sid = session.session_id
    try:
        cache = await _reset_cache(settings)
    except EndpointError as error:
        return Driven(task, root, sid, f"error: {error}"[:300], 0.0, {}, {"reset": "failed"})
    started = time.monotonic()
    try:
        response = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[text_block(task.prompt)]),
            settings.episode_timeout_s,
        )
    except TimeoutError:
        await conn.cancel(session_id=sid)
        wall = time.monotonic() - started
        return Driven(task, root, sid, "harness_timeout", wall, {}, cache)
    except Exception as exc:  # the prompt failed: recorded, never a verdict
        wall = time.monotonic() - started
        return Driven(task, root, sid, _error_text(exc)[:300], wall, {}, cache)
    meta = dict((response.field_meta or {}).get("toolFailureGuard") or {})
    wall = time.monotonic() - started
    return Driven(task, root, sid, str(response.stop_reason), wall, meta, cache)


async def _drive(
    tasks: Sequence[Task],
    arm: str,
    seed: int,
    settings: Settings,
    group: Path,
    workspaces: Path,
    on_episode: OnEpisode | None,
) -> list[Driven]:
    """One agent process for ``arm`` and ``seed``; one fresh session per task."""
    # HOME, like the workspaces, is at one path for every arm and seed (see run_group)
    home, state = workspaces.parent / "home", group / "state"
    home.mkdir(parents=True, exist_ok=True)
    args = [
        "--model",
        f"openai:{settings.model}",
        "--telemetry",
        f"file:{group / 'telemetry.jsonl'}",
        "--temperature",
        str(settings.temperature),
        "--seed",
        str(seed),
        "--max-tokens",
        str(settings.max_tokens),
        "--model-max-retries",
        "1",
        "--system-prompt-file",
        str(SYSTEM_PROMPT),
    ]
    env = {
        "OPENAI_BASE_URL": settings.base_url,
        "OPENAI_API_KEY": settings.api_key,
        TOOL_CALL_CAP_ENV_VAR: str(settings.tool_call_cap),
        MCP_TIMEOUT_ENV_VAR: f"{settings.mcp_timeout_s:g}",
    }
    driven: list[Driven] = []
    with (group / "agent.stderr").open("w") as stderr:
        async with spawn_guarded_agent_process(
            client=RecordingClient(),
            mode=arm,
            state_dir=state,
            home=home,
            scenario=None,
            extra_args=args,
            extra_env=env,
            stderr=stderr,
        ) as (conn, _process):
            for task in tasks:
                done = await _prompt(conn, task, workspaces / task.name, settings)
                driven.append(done)
                if on_episode is not None:
                    on_episode(done)
    return driven


def run_group(
    tasks: Sequence[Task],
    arm: str,
    seed: int,
    settings: Settings,
    work: Path,
    on_episode: OnEpisode | None = None,
) -> list[dict[str, Any]]:
    """Run ``tasks`` in one agent (``arm``, ``seed``) under ``work``; their records.

    One agent process serves all the tasks of an arm and seed (each in its own
    session and workspace): starting the agent costs more than a short episode.
    The records are read after the agent exited, when its telemetry is flushed.
    The workspaces are made at ``work/workspace/<task>/project`` for every arm
    and seed, and the agent's HOME is ``work/home`` (the same paths, so the same
    text wherever a path reaches the model); the workspaces are moved to
    ``work/<arm>.s<seed>/<task>`` once the records are read.
    """
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; arms: {', '.join(ARMS)}")
    group = work / f"{arm}.s{seed}"
    group.mkdir(parents=True, exist_ok=False)
    workspaces = work / "workspace"
    shutil.rmtree(workspaces, ignore_errors=True)
    shutil.rmtree(work / "home", ignore_errors=True)
    driven = asyncio.run(_drive(tasks, arm, seed, settings, group, workspaces, on_episode))
    records = [
        episode_record(
            task=d.task,
            arm=arm,
            seed=seed,
            episode=episode_id(d.task, arm, seed),
            workspace=d.root / "project",
            telemetry=group / "telemetry.jsonl",
            state=group / "state",
            session_id=d.session_id,
            acp_stop=d.acp_stop,
            wall_s=d.wall_s,
            meta=d.meta,
            prompt_cache=d.prompt_cache,
        )
        for d in driven
    ]
    for d in driven:
        shutil.move(d.root, group / d.task.name)
    return records
