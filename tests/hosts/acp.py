"""The ACP session as a host: the real agent (``--model openai:test-model``) over ACP stdio.

The agent runs as a subprocess with its working directory's project as the
workspace; a :class:`~tool_failure_guard.session.transport.client.RecordingClient` plays the ACP
client: it cancels every ``write_file`` permission request (``cancel_call``) and sends
``session/cancel`` once a ``run_shell_command`` call is in progress (``cancel_run``).  Decisions
come from ``--report-decisions``; kept results from the persisted history.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from acp import text_block
from acp.schema import ToolCallProgress, ToolCallStart
from host_behaviour import (
    API_KEY,
    CANCELLED,
    COMPLETED,
    MODEL_NAME,
    STOPPED,
    HostOutcome,
    Scenario,
)

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent


class CancellingClient(RecordingClient):
    """Sends ``session/cancel`` as soon as a shell call reports ``in_progress``."""

    def __init__(self) -> None:
        super().__init__(permission=lambda update: "cancel" if update.kind == "edit" else "allow")
        self.conn: Any = None
        self.session_id = ""
        self._shell_calls: set[str] = set()
        self._tasks: list[asyncio.Task[Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        await super().session_update(session_id, update, **kwargs)
        if isinstance(update, ToolCallStart) and update.kind == "execute":
            self._shell_calls.add(update.tool_call_id)
        elif (
            isinstance(update, ToolCallProgress)
            and update.tool_call_id in self._shell_calls
            and update.status == "in_progress"
        ):
            self._tasks.append(asyncio.create_task(self.conn.cancel(session_id=self.session_id)))


class AcpDriver:
    name = "acp"
    capabilities = frozenset({"cancel_call", "cancel_run"})

    def run(
        self, scenario: Scenario, mode: GuardMode, *, base_url: str, workspace: Path, scratch: Path
    ) -> HostOutcome:
        home, state = scratch / "home", scratch / "state"
        home.mkdir(exist_ok=True)
        client = CancellingClient()

        async def go() -> tuple[object, str]:
            with (scratch / "agent.stderr").open("w") as stderr:
                async with spawn_guarded_agent(
                    client,
                    mode=mode.value,
                    state_dir=state,
                    home=home,
                    scenario=None,
                    extra_args=["--model", f"openai:{MODEL_NAME}", "--model-max-retries", "0"],
                    extra_env={"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": API_KEY},
                    stderr=stderr,
                ) as conn:
                    session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
                    client.conn, client.session_id = conn, session.session_id
                    response = await conn.prompt(
                        session_id=session.session_id, prompt=[text_block("go")]
                    )
                    return response, session.session_id

        response, session_id = asyncio.run(asyncio.wait_for(go(), 120))
        meta = getattr(response, "field_meta", None) or {}
        stop_reason = str(getattr(response, "stop_reason", ""))
        loop_type = meta.get("loopType")
        ended = (
            STOPPED
            if loop_type is not None
            else CANCELLED
            if stop_reason == "cancelled"
            else COMPLETED
        )
        # The run's output: the agent text sent after the last tool call update.
        last_tool = max(
            (i for i, e in enumerate(client.events) if e.kind in ("tool_call", "tool_update")),
            default=-1,
        )
        output = "".join(e.text for e in client.events[last_tool + 1 :] if e.kind == "agent")
        history = HistoryStore(state).load(session_id)[1]
        kept = frozenset(
            part.call_id
            for message in history
            for part in message.parts
            if part.kind == "function_response" and part.call_id
        )
        decisions = tuple(row["decision"] for row in meta["toolFailureGuard"]["batches"])
        return HostOutcome(
            ended=ended,
            loop_type=loop_type,
            output=output,
            decisions=decisions,
            kept_call_ids=kept,
        )


DRIVER = AcpDriver()
