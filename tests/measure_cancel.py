"""Print how long ``session/cancel`` takes to end a prompt whose model stream is held open.

Not a test (pytest does not collect it) and it asserts nothing about time:
``.venv/bin/python tests/measure_cancel.py [ROUNDS]``.  It spawns the agent
with ``--model openai:...`` against the test server on 127.0.0.1, starts a
prompt, waits for the first streamed delta, sends ``session/cancel`` and times
the ``cancelled`` answer as the client sees it; then checks the server saw
every held stream closed.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from acp import text_block
from openai_server import FakeOpenAI, Hang, serve
from provider_harness import openai_args

from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent


async def measure(fake: FakeOpenAI, root: Path, rounds: int) -> list[float]:
    client = RecordingClient()
    args, env = openai_args(fake)
    (root / "project").mkdir()
    (root / "home").mkdir()
    latencies = []
    async with spawn_guarded_agent(
        client,
        mode="enforce",
        state_dir=root / "state",
        home=root / "home",
        scenario=None,
        extra_args=args,
        extra_env=env,
    ) as conn:
        session = await conn.new_session(cwd=str(root / "project"), mcp_servers=[])
        for _ in range(rounds):
            seen = len(client.agent_texts())
            prompt = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            )
            while len(client.agent_texts()) == seen:
                await asyncio.sleep(0.002)
            started = time.perf_counter()
            await conn.cancel(session_id=session.session_id)
            response = await prompt
            latencies.append((time.perf_counter() - started) * 1000)
            assert response.stop_reason == "cancelled", response
    return latencies


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    with tempfile.TemporaryDirectory() as folder, serve(FakeOpenAI([Hang()] * rounds)) as fake:
        latencies = asyncio.run(measure(fake, Path(folder), rounds))
        for _ in range(100):
            if fake.disconnects >= rounds:
                break
            time.sleep(0.01)
    print(f"cancel -> cancelled answer over ACP stdio, {rounds} prompts held mid-stream:")
    print(
        f"  median {statistics.median(latencies):.1f} ms, max {max(latencies):.1f} ms; "
        f"streams the server saw closed: {fake.disconnects}/{rounds}"
    )


if __name__ == "__main__":
    main()
