"""Nothing blocks the event loop: a named pipe is refused, never opened blocking (issue 15 §2).

``read_file`` / ``write_file`` on a real FIFO (``os.mkfifo``) used to open it
with a blocking ``open()`` on the event loop: the agent froze until some
other process opened the other end.  Now a non-regular file is refused with
``not_a_regular_file`` and the agent keeps serving.  A helper thread opens
the other end after a while, so a regression ends (with the wrong outcome)
instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from e2e_helpers import Box

from tool_failure_guard.session.tools.builtin import ToolContext, default_tools
from tool_failure_guard.session.tools.executor import (
    CallOutcome,
    Executor,
    FunctionCall,
    PermissionAnswer,
)
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent

#: Seconds before the helper opens the other end of the pipes (a frozen agent thaws).
UNBLOCK_AFTER_S = 8.0


@contextlib.contextmanager
def pipes(folder: Path, *names: str) -> Iterator[list[Path]]:
    """FIFOs in ``folder``; after :data:`UNBLOCK_AFTER_S` a thread opens their other ends."""
    paths = [folder / name for name in names]
    for path in paths:
        os.mkfifo(path)
    done = threading.Event()

    def unblock() -> None:
        if done.wait(UNBLOCK_AFTER_S):
            return
        for path in paths:  # a reader for a blocked writer, a writer for a blocked reader
            for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
                with contextlib.suppress(OSError):
                    fd = os.open(path, flags)
                    if flags & os.O_WRONLY:
                        os.write(fd, b"thawed")
                    threading.Timer(2.0, os.close, (fd,)).start()

    helper = threading.Thread(target=unblock, daemon=True)
    helper.start()
    try:
        yield paths
    finally:
        done.set()
        helper.join()


async def _allow(*_: Any) -> PermissionAnswer:
    return PermissionAnswer.ALLOWED


def axes(outcome: CallOutcome) -> tuple[str, str, str | None]:
    return (outcome.terminal_status, outcome.execution_status, outcome.execution_error_type)


@pytest.mark.parametrize(
    ("tool", "args"),
    [("read_file", {"path": "pipe"}), ("write_file", {"path": "pipe", "content": "x"})],
    ids=["read", "write"],
)
def test_a_named_pipe_is_not_a_regular_file(
    tmp_path: Path, tool: str, args: dict[str, Any]
) -> None:
    executor = Executor(default_tools(), ToolContext(cwd=tmp_path), _allow)

    async def go() -> CallOutcome:
        call = FunctionCall(call_id="c", name=tool, args=args)
        return await executor.execute(call, asyncio.Event())

    with pipes(tmp_path, "pipe"):
        outcome = asyncio.run(go())
    assert axes(outcome) == ("error", "error", "not_a_regular_file")
    assert "pipe is not a regular file" in outcome.output


def test_the_agent_keeps_serving_while_a_prompt_touches_a_pipe(tmp_path: Path) -> None:
    box = Box(tmp_path)
    scenario = box.scenario(
        {
            "turns": [
                {
                    "calls": [
                        {"tool": "read_file", "args": {"path": "in.fifo"}},
                        {"tool": "write_file", "args": {"path": "out.fifo", "content": "x"}},
                    ]
                }
            ],
            "final_text": "done",
        }
    )
    client = RecordingClient()

    async def go() -> tuple[Any, Any]:
        async with spawn_guarded_agent(
            client, mode="shadow", state_dir=box.state, home=box.home, scenario=scenario
        ) as conn:
            first = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            second = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            piped = asyncio.create_task(
                conn.prompt(session_id=first.session_id, prompt=[text_block("go")])
            )
            other = await conn.prompt(session_id=second.session_id, prompt=[text_block("go")])
            return await piped, other

    with pipes(box.project, "in.fifo", "out.fifo"):
        piped, other = asyncio.run(asyncio.wait_for(go(), 60))
    assert piped.stop_reason == other.stop_reason == "end_turn"
    failures = [e.text for e in client.events if e.kind == "tool_update" and e.status == "failed"]
    assert sum("is not a regular file" in text for text in failures) == 4  # 2 calls x 2 sessions
