"""SIGKILL at random points of a multi-batch prompt: no settled outcome is lost.

Each run spawns the real agent over real stdio, sends a prompt whose four
batches write files and run shell commands, and kills the agent with SIGKILL
after a random number of observed session updates or a random delay.  One
more agent process then loads every killed session and continues it with a
new prompt.  Seeded (``CRASH_SEED``), ``CRASH_RUNS`` runs (default 50).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import attrs
from acp import text_block

from tool_failure_guard.session.persistence.assembly import INTERRUPTED
from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.persistence.messages import Message
from tool_failure_guard.session.transport.client import (
    RecordingClient,
    spawn_guarded_agent,
    spawn_guarded_agent_process,
)

T = TypeVar("T")
SEED = int(os.environ.get("CRASH_SEED", "7"))
RUNS = int(os.environ.get("CRASH_RUNS", "50"))
PARALLEL = 4
BATCHES = 4


def scenario() -> dict[str, Any]:
    turns = []
    for b in range(BATCHES):
        calls: list[dict[str, Any]] = [
            {
                "tool": "write_file",
                "args": {"path": f"w{b}-{i}.txt", "content": f"batch {b} file {i}\n"},
                "id": f"w{b}-{i}",
            }
            for i in range(3)
        ]
        calls.append(
            {
                "tool": "run_shell_command",
                "args": {"command": f"echo done > s{b}.txt"},
                "id": f"s{b}",
            }
        )
        turns.append({"text": f"batch {b}", "calls": calls})
    return {
        "prompts": [
            {"turns": turns, "final_text": "all written"},
            {"turns": [], "final_text": "continued after the crash"},
        ]
    }


def effect_done(project: Path, call_id: str) -> bool:
    """The call's tool visibly finished its work (its file is complete)."""
    if call_id.startswith("w"):
        b, i = call_id[1:].split("-")
        path = project / f"w{b}-{i}.txt"
        return path.is_file() and path.read_text() == f"batch {b} file {i}\n"
    return (project / f"s{call_id[1:]}.txt").is_file()


class KillingClient(RecordingClient):
    """Kills the agent once it has seen ``kill_after`` session updates."""

    def __init__(self, kill_after: int | None) -> None:
        super().__init__()
        self.kill_after = kill_after
        self.pid: int | None = None
        self.killed = False

    def kill(self) -> None:
        if self.pid is not None and not self.killed:
            self.killed = True
            os.kill(self.pid, signal.SIGKILL)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        await super().session_update(session_id, update, **kwargs)
        if self.kill_after is not None and len(self.events) >= self.kill_after:
            self.kill()


@attrs.frozen
class Run:
    index: int
    project: Path
    session_id: str
    observed: dict[str, str]  #: call id -> final status the client saw before the kill


async def crash_once(index: int, rng: random.Random, root: Path, scenario_path: str) -> Run:
    project = root / f"project{index}"
    project.mkdir()
    by_updates = rng.random() < 0.6
    kill_after = rng.randint(1, 14 * BATCHES) if by_updates else None
    delay = rng.uniform(0.0, 0.8)
    client = KillingClient(kill_after)
    session_ids: list[str] = []
    try:
        async with spawn_guarded_agent_process(
            client,
            mode="enforce",
            state_dir=root / "state",
            home=root / "home",
            scenario=scenario_path,
        ) as (conn, process):
            client.pid = process.pid
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            session_ids.append(session.session_id)
            prompt = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[text_block("write")])
            )
            if not by_updates:
                await asyncio.sleep(delay)
                client.kill()
            with contextlib.suppress(Exception):  # the connection dies with the agent
                await asyncio.wait_for(prompt, 30)
            client.kill()  # the prompt may have ended before the kill point: kill anyway
            await asyncio.wait_for(process.wait(), 30)
            prompt.cancel()
    except ConnectionError:
        pass  # closing the client side of a killed agent's pipes
    observed = {
        e.call_id: e.status
        for e in client.events
        if e.kind == "tool_update" and e.status in ("completed", "failed")
    }
    return Run(index, project, session_ids[0], observed)


def check_history(run: Run, messages: list[Message]) -> int:
    """Every call answered once, in order; observed outcomes kept; returns interrupted calls."""
    interrupted = 0
    for index, message in enumerate(messages):
        calls = [p for p in message.parts if p.kind == "function_call"]
        if not calls:
            continue
        answer = messages[index + 1]
        responses = [p for p in answer.parts if p.kind == "function_response"]
        assert [p.call_id for p in responses] == [c.call_id for c in calls], run
        for response in responses:
            seen = run.observed.get(response.call_id)
            if seen is not None:  # the client was told: the real outcome was persisted
                assert response.error_type != INTERRUPTED, (run, response)
                assert seen == ("completed" if response.status == "success" else "failed")
            if response.error_type == INTERRUPTED:
                interrupted += 1
                assert response.status == "cancelled"
            elif effect_done(run.project, response.call_id):
                assert response.status == "success", (run, response)
            else:  # no effect: it never ran to its end, and nothing claims it did
                assert response.status != "success", (run, response)
    all_responses = [p for m in messages for p in m.parts if p.kind == "function_response"]
    assert len({p.call_id for p in all_responses}) == len(all_responses)
    return interrupted


def run_bounded(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` with a bound, and bound the clean-up too.

    ``asyncio.run`` waits without limit for leftover tasks to finish cancelling;
    a transport of a killed agent occasionally never does, which would hang the
    suite after the test itself has finished.
    """
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, 300))
    finally:
        leftovers = asyncio.all_tasks(loop)
        for task in leftovers:
            task.cancel()
        if leftovers:
            loop.run_until_complete(asyncio.wait(leftovers, timeout=5))
        loop.close()


def test_sigkill_at_random_points_never_loses_a_settled_outcome(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    scenario_path = tmp_path / "crash.json"
    scenario_path.write_text(json.dumps(scenario()), encoding="utf-8")
    rng = random.Random(SEED)
    seeds = [rng.random() for _ in range(RUNS)]

    async def go() -> tuple[list[Run], dict[str, RecordingClient], dict[str, Any]]:
        gate = asyncio.Semaphore(PARALLEL)

        async def one(index: int) -> Run:
            async with gate:
                return await asyncio.wait_for(
                    crash_once(index, random.Random(seeds[index]), tmp_path, str(scenario_path)),
                    90,
                )

        runs = await asyncio.gather(*(one(i) for i in range(RUNS)))
        replays: dict[str, RecordingClient] = {}
        answers: dict[str, Any] = {}
        client = RecordingClient()
        async with spawn_guarded_agent(
            client,
            mode="enforce",
            state_dir=tmp_path / "state",
            home=tmp_path / "home",
            scenario=str(scenario_path),
        ) as conn:
            for crashed in runs:
                client.events = []
                await conn.load_session(
                    cwd=str(crashed.project), session_id=crashed.session_id, mcp_servers=[]
                )
                replays[crashed.session_id] = client
                replayed = list(client.events)
                answers[crashed.session_id] = (
                    replayed,
                    await conn.prompt(session_id=crashed.session_id, prompt=[text_block("again")]),
                )
        return list(runs), replays, answers

    runs, _replays, answers = run_bounded(go())
    store = HistoryStore(tmp_path / "state")
    interrupted = outcomes = 0
    for crashed in runs:
        replayed, response = answers[crashed.session_id]
        assert response.stop_reason == "end_turn"
        finals: dict[str, str] = {}
        for event in replayed:
            if event.kind in ("tool_call", "tool_update"):
                finals[event.call_id] = event.status
        assert "pending" not in finals.values(), crashed
        assert "in_progress" not in finals.values(), crashed
        messages = store.load_session(crashed.session_id).messages
        # the session continued: the new prompt and its answer follow the crashed one
        assert messages[-1].kind == "model" and messages[-1].texts("text")[-1] in (
            "continued after the crash",
            "all written",
        )
        interrupted += check_history(crashed, messages)
        outcomes += sum(1 for m in messages for p in m.parts if p.kind == "function_response")
    print(f"crash runs: {RUNS} (seed {SEED}); responses {outcomes}, interrupted {interrupted}")
