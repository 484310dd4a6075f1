"""State is private whatever the umask (issue 15 §1).

The history holds what the model read -- here the content of a 0600 secret --
so the state directory and ``sessions/`` are 0700 and the history, the
corrupt-line sidecar and a ``--telemetry file:`` file are 0600, also when the
agent runs under ``umask 000``, and an existing wider mode is narrowed.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import text_block
from e2e_helpers import Box

from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.persistence.messages import Message, Part
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The test process (and the agent it spawns) with ``umask 000``."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def test_the_agents_state_and_telemetry_file_are_private(tmp_path: Path, open_umask: None) -> None:
    box = Box(tmp_path)
    secret = box.project / "id_ed25519"
    secret.write_text("PRIVATE KEY")
    secret.chmod(0o600)
    telemetry = tmp_path / "telemetry.jsonl"
    scenario = box.scenario(
        {
            "turns": [{"calls": [{"tool": "read_file", "args": {"path": "id_ed25519"}}]}],
            "final_text": "read it",
        }
    )

    async def go() -> str:
        async with spawn_guarded_agent(
            RecordingClient(),
            mode="shadow",
            state_dir=box.state,
            home=box.home,
            scenario=scenario,
            extra_args=["--telemetry", f"file:{telemetry}"],
        ) as conn:
            session = await conn.new_session(cwd=str(box.project), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            return session.session_id

    session_id = asyncio.run(asyncio.wait_for(go(), 60))
    history = HistoryStore(box.state).path(session_id)
    assert "PRIVATE KEY" in history.read_text()  # why it must be private
    assert (mode(box.state), mode(box.state / "sessions")) == (0o700, 0o700)
    assert mode(history) == 0o600
    assert mode(telemetry) == 0o600


def test_existing_state_is_narrowed_and_the_sidecar_is_private(
    tmp_path: Path, open_umask: None
) -> None:
    state = tmp_path / "state"
    (state / "sessions").mkdir(parents=True, mode=0o755)
    state.chmod(0o755)
    store = HistoryStore(state)
    store.create("s1", str(tmp_path))
    history = store.path("s1")
    history.chmod(0o644)
    store.append(
        "s1",
        Message(role="user", kind="prompt", prompt_id="p", parts=(Part(kind="text", text="hi"),)),
    )
    assert (mode(state), mode(state / "sessions"), mode(history)) == (0o700, 0o700, 0o600)
    with history.open("a") as handle:
        handle.write("{not json\n")
    store.append(
        "s1",
        Message(role="model", kind="model", prompt_id="p", parts=(Part(kind="text", text="ok"),)),
    )
    assert store.load_session("s1").skipped_lines == (3,)
    assert mode(store.corrupt_path("s1")) == 0o600
