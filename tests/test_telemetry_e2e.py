"""End to end: the guarded agent over stdio with ``--telemetry console``.

A prompt whose user text, ``_meta`` user id, MCP server name, working
directory, tool arguments (paths, shell commands), tool results, error
messages, call ids and model text all carry one unique sentinel runs until
enforcement stops it.  Everything the console exporters printed on stderr is
parsed back; no telemetry document may contain the sentinel, and every
attribute must lie in the documented finite sets.  A second run whose stderr
cannot be written -- so every export fails -- must produce the same
decisions, transcript, history and stop.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import IO, Any

import attrs
from acp import text_block
from acp.schema import McpServerStdio, PromptResponse
from e2e_helpers import telemetry_documents

from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent
from tool_failure_guard.telemetry import sink as telemetry
from tool_failure_guard.telemetry.sink import (
    GUARD_COUNTER,
    GUARD_LOG_EVENT,
    LOOP_DETECTED_COUNTER,
    LOOP_DETECTED_EVENT,
    TOOL_CALL_COUNTER,
)

_DOCUMENTED = {
    GUARD_COUNTER: telemetry.GUARD_METRIC_ATTRIBUTE_VALUES,
    TOOL_CALL_COUNTER: telemetry.TOOL_CALL_ATTRIBUTE_VALUES,
    LOOP_DETECTED_COUNTER: telemetry.LOOP_DETECTED_ATTRIBUTE_VALUES,
}


@attrs.frozen
class Run:
    """What one agent run left behind, minus the per-run session id."""

    response: PromptResponse
    transcript: list[str]
    history: list[tuple[str, str, Any]]
    session_id: str


def scenario(sentinel: str) -> dict[str, Any]:
    """Two failing shell calls per batch beside successful reads and writes, five batches."""
    turns = []
    for n in range(5):
        turns.append(
            {
                "text": f"{sentinel} model text {n}",
                "calls": [
                    {
                        "tool": "run_shell_command",
                        "args": {"command": f"echo {sentinel}-error-message; exit 3"},
                        "id": f"{sentinel}-call-{n}-a",
                    },
                    {
                        "tool": "run_shell_command",
                        "args": {"command": f"echo {sentinel}-error-message; exit 3"},
                        "id": f"{sentinel}-call-{n}-b",
                    },
                    {
                        "tool": "read_file",
                        "args": {"path": f"{sentinel}-notes.txt"},
                        "id": f"{sentinel}-call-{n}-c",
                    },
                    {
                        "tool": "write_file",
                        "args": {"path": f"{sentinel}-out.txt", "content": f"{sentinel}-content"},
                        "id": f"{sentinel}-call-{n}-d",
                    },
                ],
            }
        )
    return {"turns": turns, "final_text": f"{sentinel} final text"}


def run_agent(root: Path, sentinel: str, stderr: IO[Any]) -> Run:
    project = root / f"project-{sentinel}"
    home = root / "home"
    state = root / "state"
    project.mkdir()
    home.mkdir()
    (project / f"{sentinel}-notes.txt").write_text(f"{sentinel}-file-result\n", encoding="utf-8")
    scenario_path = root / "scenario.json"
    scenario_path.write_text(json.dumps(scenario(sentinel)), encoding="utf-8")
    client = RecordingClient()

    async def go() -> tuple[PromptResponse, str]:
        async with spawn_guarded_agent(
            client,
            mode="enforce",
            state_dir=state,
            home=home,
            scenario=str(scenario_path),
            extra_args=["--telemetry", "console"],
            extra_env={"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=e2e-test"},
            stderr=stderr,
        ) as conn:
            server = McpServerStdio(
                name=f"{sentinel}-mcp-server", command="/bin/true", args=[], env=[]
            )
            session = await conn.new_session(cwd=str(project), mcp_servers=[server])
            raw = await conn._conn.send_request(
                "session/prompt",
                {
                    "sessionId": session.session_id,
                    "prompt": [text_block(f"{sentinel} user text").model_dump(by_alias=True)],
                    "_meta": {"userId": f"{sentinel}-user-id"},
                },
            )
            return PromptResponse.model_validate(raw), session.session_id

    response, session_id = asyncio.run(go())
    messages = HistoryStore(state).load(session_id)[1]
    return Run(
        response=response,
        transcript=client.transcript(),
        history=[(m.role, m.kind, m.parts) for m in messages],
        session_id=session_id,
    )


def metric_points(documents: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    points = []
    for document in documents:
        for rm in document.get("resource_metrics", []):
            for sm in rm["scope_metrics"]:
                for metric in sm["metrics"]:
                    for point in metric["data"]["data_points"]:
                        points.append((metric["name"], point["attributes"]))
    return points


def test_console_telemetry_of_a_stopped_prompt_carries_no_sentinel(tmp_path: Path) -> None:
    sentinel = f"SENTINEL{uuid.uuid4().hex[:12]}"
    log = tmp_path / "agent.stderr"
    with log.open("w") as stderr:
        run = run_agent(tmp_path, sentinel, stderr)

    # The sentinel really went through the system: arguments, results, error messages.
    assert run.response.field_meta["loopType"] == "repeated_tool_execution_failure"
    shown = "\n".join(run.transcript)
    assert f"{sentinel}-error-message" in shown
    assert f"{sentinel}-call-0-a" in shown

    documents = telemetry_documents(log.read_text(encoding="utf-8"))
    logs = [d for d in documents if "event_name" in d]
    metrics = [d for d in documents if "resource_metrics" in d]
    assert logs and metrics  # metrics are printed at exit, logs as they happen
    for document in documents:
        assert sentinel not in json.dumps(document)

    guard_logs = [d["attributes"] for d in logs if d["event_name"] == GUARD_LOG_EVENT]
    assert [a["decision"] for a in guard_logs] == [
        "tracked",
        "tracked",
        "tracked",
        "warned",
        "stopped",
    ]
    allowed_log_keys = (
        set(telemetry.GUARD_METRIC_ATTRIBUTE_VALUES) | telemetry.GUARD_LOG_ONLY_FIELDS
    )
    for attributes in guard_logs:
        assert attributes.pop(telemetry.EVENT_NAME_ATTRIBUTE) == GUARD_LOG_EVENT  # both names
        assert set(attributes) <= allowed_log_keys
        assert attributes["execution_error_type"] == "shell_execute_error"
        assert attributes["tool_type"] == "native"
        assert attributes["candidate_ordinal"] == 1
        assert attributes["prompt_id"].startswith(run.session_id)
    loop_logs = [d["attributes"] for d in logs if d["event_name"] == LOOP_DETECTED_EVENT]
    assert [a["loop_type"] for a in loop_logs] == ["repeated_tool_execution_failure"]

    points = metric_points(metrics)
    names = {name for name, _ in points}
    assert {GUARD_COUNTER, TOOL_CALL_COUNTER, LOOP_DETECTED_COUNTER} <= names
    for name, attributes in points:
        if name not in _DOCUMENTED:
            continue  # not ours (the SDK may add its own instruments)
        for key, value in attributes.items():
            assert value in _DOCUMENTED[name][key], (name, key, value)
    for document in documents:
        resource = document.get("resource") or document["resource_metrics"][0]["resource"]
        assert resource["attributes"]["deployment.environment"] == "e2e-test"
        assert resource["attributes"]["service.name"] == "tool-failure-guard"


def test_an_exporter_failing_on_every_call_changes_nothing_end_to_end(tmp_path: Path) -> None:
    sentinel = f"SENTINEL{uuid.uuid4().hex[:12]}"
    good_root, broken_root = tmp_path / "good", tmp_path / "broken"
    good_root.mkdir()
    broken_root.mkdir()
    with (good_root / "agent.stderr").open("w") as stderr:
        good = run_agent(good_root, sentinel, stderr)
    unwritable = broken_root / "unwritable.stderr"
    unwritable.write_text("", encoding="utf-8")
    with unwritable.open("r") as stderr:  # a read-only descriptor: every export write fails
        broken = run_agent(broken_root, sentinel, stderr)

    assert unwritable.read_text(encoding="utf-8") == ""
    assert good.response.field_meta["loopType"] == "repeated_tool_execution_failure"
    assert broken.response.stop_reason == good.response.stop_reason
    assert broken.response.field_meta["loopType"] == good.response.field_meta["loopType"]
    assert (
        broken.response.field_meta["toolFailureGuard"]["batches"]
        == good.response.field_meta["toolFailureGuard"]["batches"]
    )
    # Sibling calls of one batch settle in either order, so their updates may swap:
    # the same updates must arrive, and the history (in the model's order) is identical.
    assert sorted(broken.transcript) == sorted(good.transcript)
    assert broken.history == good.history
