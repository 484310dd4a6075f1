"""What the end-to-end tests share: bounded runs, a test's directories, polling, reading output."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.persistence.messages import Message

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    """Run one client scenario; the bound keeps a hung agent from hanging the suite."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


class Box:
    """Directories of one test: project (session cwd), home, state."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = root / "project"
        self.home = root / "home"
        self.state = root / "state"
        self.project.mkdir()
        self.home.mkdir()

    def scenario(self, data: dict[str, Any], name: str = "scenario.json") -> str:
        """Write a scenario file (docs/scenarios.md) and return its path."""
        path = self.root / name
        path.write_text(json.dumps(data), encoding="utf-8")
        return str(path)

    def history(self, session_id: str) -> list[Message]:
        """The session's history as ``session/load`` assembles it."""
        return HistoryStore(self.state).load_session(session_id).messages


async def wait_until(condition: Callable[[], bool], attempts: int = 3000) -> None:
    """Poll ``condition`` every 10 ms; a bound keeps a broken agent from hanging the suite."""
    for _ in range(attempts):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never became true")


def decisions(response: Any) -> list[str]:
    """The guard decision of each batch, from a ``--report-decisions`` prompt response."""
    return [row["decision"] for row in response.field_meta["toolFailureGuard"]["batches"]]


def telemetry_documents(text: str) -> list[dict[str, Any]]:
    """The JSON documents the console exporters printed (each starts at column 0)."""
    decoder = json.JSONDecoder()
    documents: list[dict[str, Any]] = []
    end = 0
    for match in re.finditer(r"^\{", text, re.MULTILINE):
        if match.start() < end:
            continue
        document, end = decoder.raw_decode(text, match.start())
        documents.append(document)
    return documents
