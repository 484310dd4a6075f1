"""A declared prompt-only input boundary (``TOOL_FAILURE_GUARD_INPUT_BOUNDARY``).

Plain ACP hosts (Zed, acpx) answer the drain "method not found", so with the
default ``drain`` every boundary is unreliable and the guard is inert there.
An operator may declare ``prompt-only``: the agent never calls the drain and
each boundary is reliable.  Each test drives a real :class:`GuardedSession`
(real tools on a temporary project, the scripted read loop) against a host
that, like a plain ACP client, has no drain method.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from acp.exceptions import RequestError
from session_harness import in_process_session
from telemetry_harness import Harness
from test_session_loop import FakeClient

from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    GuardMode,
)
from tool_failure_guard.session.config.declared_boundary import (
    INPUT_BOUNDARY_ENV_VAR,
    INPUT_BOUNDARY_RECORD_VALUES,
    UNSUPPORTED,
    BoundaryKind,
    resolve_boundary_kind,
)
from tool_failure_guard.session.config.envconfig import OPERATOR_ONLY_VARIABLES, load_env
from tool_failure_guard.session.model.base import ModelTurn, ScriptedModel, load_scenario
from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.persistence.messages import Message
from tool_failure_guard.session.pipeline.session import GuardedSession, SessionOptions
from tool_failure_guard.telemetry.sink import PROMPT_EVENT


class PlainAcpClient(FakeClient):
    """A plain ACP v1 client: every extension request is "method not found"."""

    def __init__(self) -> None:
        super().__init__()
        self.ext_requests: list[str] = []

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ext_requests.append(method)
        raise RequestError.method_not_found(method)


class DrainClient(FakeClient):
    """A host with the drain: nothing queued, ever."""

    def __init__(self) -> None:
        super().__init__()
        self.ext_requests: list[str] = []

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ext_requests.append(method)
        return {"messages": [], "hasQueuedPrompt": False}


class PushingModel:
    """The scripted read loop; before model request ``at`` a client pushes steering input."""

    def __init__(self, at: int | None = None) -> None:
        self.inner = ScriptedModel(load_scenario("read-loop"))
        self.at = at
        self.requests = 0
        self.session: GuardedSession | None = None

    async def generate(self, history: Any) -> ModelTurn:
        if self.requests == self.at and self.session is not None:
            self.session.drain.push(["use the other file"])
        self.requests += 1
        return await self.inner.generate(history)


def session_for(
    tmp_path: Path,
    client: FakeClient,
    boundary: BoundaryKind,
    mode: GuardMode = GuardMode.ENFORCE,
    model: Any = None,
    sink: Any = None,
) -> GuardedSession:
    return in_process_session(
        HistoryStore(tmp_path / "state"),
        tmp_path,
        client=client,
        model=model or ScriptedModel(load_scenario("read-loop")),
        mode=mode,
        telemetry=sink,
        options=SessionOptions(report_decisions=True),
        boundary=boundary,
    )


def decisions(response: Any) -> list[tuple[str, str | None]]:
    rows = response.field_meta["toolFailureGuard"]["batches"]
    return [(row["decision"], row["reason"]) for row in rows]


def system_texts(history: list[Message]) -> list[str]:
    return [p.text for m in history for p in m.parts if p.kind == "system"]


def notices(history: list[Message]) -> list[str]:
    return [p.text for m in history for p in m.parts if p.kind == "notice"]


def test_prompt_only_on_a_plain_acp_host_reminds_once_then_stops(tmp_path: Path) -> None:
    client = PlainAcpClient()
    session = session_for(tmp_path, client, BoundaryKind.PROMPT_ONLY)
    response = asyncio.run(session.run_prompt(["go"], channel=False))
    assert client.ext_requests == []  # the drain is never called
    assert [d for d, _ in decisions(response)] == ["tracked", "warn", "stop"]
    assert system_texts(session.history).count(REPEATED_TOOL_FAILURE_REMINDER) == 1
    assert notices(session.history) == [REPEATED_TOOL_FAILURE_STOP_MESSAGE]
    assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
    assert response.field_meta["toolFailureGuard"]["drainSupported"] is False


def test_the_default_boundary_on_a_plain_acp_host_is_unchanged(tmp_path: Path) -> None:
    client = PlainAcpClient()
    session = session_for(tmp_path, client, BoundaryKind.DRAIN)
    response = asyncio.run(session.run_prompt(["go"], channel=False))
    assert client.ext_requests == ["craft/drainMidTurnQueue"]  # asked once, then disabled
    kinds = [d for d, _ in decisions(response)]
    assert kinds[0] == "reset" and set(kinds[1:]) == {"none"}
    assert decisions(response)[0][1] == "unreliable_input"
    assert REPEATED_TOOL_FAILURE_REMINDER not in system_texts(session.history)
    assert notices(session.history) == []
    assert response.stop_reason == "end_turn"


def test_prompt_only_never_asks_even_a_host_that_has_the_drain(tmp_path: Path) -> None:
    client = DrainClient()
    session = session_for(tmp_path, client, BoundaryKind.PROMPT_ONLY)
    response = asyncio.run(session.run_prompt(["go"], channel=False))
    assert client.ext_requests == []
    assert [d for d, _ in decisions(response)] == ["tracked", "warn", "stop"]


def test_pushed_steering_input_still_resets_under_prompt_only(tmp_path: Path) -> None:
    model = PushingModel(at=1)
    session = session_for(tmp_path, PlainAcpClient(), BoundaryKind.PROMPT_ONLY, model=model)
    model.session = session
    response = asyncio.run(session.run_prompt(["go"], channel=False))
    rows = decisions(response)
    assert rows[0] == ("tracked", None)
    assert rows[1] == ("reset", "external_input")
    queued = [p.text for m in session.history for p in m.parts if p.kind == "queued_input"]
    assert queued == ["[User message received during tool execution]: use the other file"]
    # The streak restarts after the reset: reminder, then stop, two batches later.
    assert [d for d, _ in rows[2:]] == ["tracked", "warn", "stop"]


@pytest.mark.parametrize(
    ("client", "boundary", "expected"),
    [
        (DrainClient, BoundaryKind.DRAIN, ("drain", True)),
        (PlainAcpClient, BoundaryKind.DRAIN, ("unsupported", False)),
        (PlainAcpClient, BoundaryKind.PROMPT_ONLY, ("prompt-only", False)),
        (DrainClient, BoundaryKind.PROMPT_ONLY, ("prompt-only", False)),
    ],
)
def test_the_prompt_record_names_the_boundary_kind_used(
    tmp_path: Path, client: type[FakeClient], boundary: BoundaryKind, expected: tuple[str, bool]
) -> None:
    harness = Harness()
    session = session_for(tmp_path, client(), boundary, mode=GuardMode.SHADOW, sink=harness.sink)
    asyncio.run(session.run_prompt(["go"], channel=False))
    (record,) = harness.logs(PROMPT_EVENT)
    assert (record["input_boundary"], record["drain_supported"]) == expected
    assert record["input_boundary"] in INPUT_BOUNDARY_RECORD_VALUES


def test_invalid_value_warns_once_naming_the_variable_and_falls_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="session.declared_boundary"):
        assert resolve_boundary_kind("prompt_only") is BoundaryKind.DRAIN
    (warning,) = caplog.records
    text = warning.getMessage()
    assert INPUT_BOUNDARY_ENV_VAR in text and "drain, prompt-only" in text
    assert "'prompt_only'" in text


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, BoundaryKind.DRAIN),
        ("", BoundaryKind.DRAIN),
        ("drain", BoundaryKind.DRAIN),
        ("prompt-only", BoundaryKind.PROMPT_ONLY),
        (" Prompt-Only ", BoundaryKind.PROMPT_ONLY),
    ],
)
def test_valid_values_resolve_without_a_warning(
    value: str | None, kind: BoundaryKind, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert resolve_boundary_kind(value) is kind
    assert caplog.records == []


def test_the_declaration_is_refused_from_project_sources(tmp_path: Path) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    (project / ".qwen").mkdir(parents=True)
    home.mkdir()
    (project / ".env").write_text(f"{INPUT_BOUNDARY_ENV_VAR}=prompt-only\n", encoding="utf-8")
    assert INPUT_BOUNDARY_ENV_VAR in OPERATOR_ONLY_VARIABLES
    env = load_env(project, home=home, environ={})
    assert env.get(INPUT_BOUNDARY_ENV_VAR) is None
    assert [r.variable for r in env.refused] == [INPUT_BOUNDARY_ENV_VAR]
    (home / ".env").write_text(f"{INPUT_BOUNDARY_ENV_VAR}=prompt-only\n", encoding="utf-8")
    assert load_env(project, home=home, environ={}).get(INPUT_BOUNDARY_ENV_VAR) == "prompt-only"
    exported = load_env(project, home=home, environ={INPUT_BOUNDARY_ENV_VAR: "drain"})
    assert exported.get(INPUT_BOUNDARY_ENV_VAR) == "drain"


def test_the_record_values_are_each_declarable_kind_then_unsupported() -> None:
    # the vocabulary lives in telemetry (below the hosts); the declaration must match it
    assert (*(kind.value for kind in BoundaryKind), UNSUPPORTED) == INPUT_BOUNDARY_RECORD_VALUES
