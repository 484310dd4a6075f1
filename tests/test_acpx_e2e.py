"""acpx, a plain ACP client, drives the agent end to end against the local fake model.

acpx 0.19.1 (pinned in ``.clients/package-lock.json``, installed by ``make
setup``) runs ``tool-failure-guard agent --model openai:...`` against
:class:`openai_server.FakeOpenAI` on 127.0.0.1.  The model keeps calling a
failing shell command, four calls per turn.  acpx has no drain method, so:

* with ``TOOL_FAILURE_GUARD_INPUT_BOUNDARY=prompt-only`` in enforce the guard
  acts as on a drain host: the reminder once (in the third model request),
  then the stop;
* with the default boundary nothing changes: no reminder, no stop, the loop
  runs until the model gives up.

``acpx exec`` cannot ask the user, and by default it rejects every permission
request except reads: the shell, write and MCP calls need ``--approve-all`` or
a permission policy that approves their kinds (``docs/session.md``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_servers import REQUIRE_ENV_VAR
from openai_server import FakeOpenAI, Reply, call, serve

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)
from tool_failure_guard.session.transport.drain_names import DRAIN_NAMES

ROOT = Path(__file__).resolve().parent.parent
ACPX = ROOT / ".clients" / "node_modules" / ".bin" / "acpx"
#: The policy that lets ``acpx exec`` run shell (execute), write (edit) and MCP (other) calls.
POLICY = json.dumps({"autoApprove": ["execute", "edit", "other"]})
FAILING_TURNS = 5


def require_acpx() -> None:
    if ACPX.is_file():
        return
    message = "acpx is not installed: install Node.js 20+ with npm, then run `make setup`"
    if os.environ.get(REQUIRE_ENV_VAR) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV_VAR}=1)")
    pytest.skip(message)


def failing_shell_loop(body: dict[str, Any], counter: list[int]) -> Reply:
    """Turns 1..5: four ``exit 3`` shell calls; then the model gives up."""
    counter[0] += 1
    turn = counter[0]
    if turn > FAILING_TURNS:
        return Reply(text="I give up on the tests.")
    calls = tuple(
        call(f"c{turn}_{i}", "run_shell_command", {"command": "exit 3"}) for i in range(4)
    )
    return Reply(text="Running the tests.", calls=calls)


def run_acpx(
    tmp_path: Path, boundary: str | None, permissions: list[str], *, exit_status: int = 0
) -> tuple[FakeOpenAI, list[dict[str, Any]]]:
    """One ``acpx exec`` in enforce; the fake model's record and acpx's JSON-RPC lines."""
    require_acpx()
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    counter = [0]
    with serve(FakeOpenAI(lambda body: failing_shell_loop(body, counter))) as fake:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "PYTHONPATH": str(ROOT),
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "test-key",
            "QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD": "enforce",
        }
        if boundary is not None:
            env["TOOL_FAILURE_GUARD_INPUT_BOUNDARY"] = boundary
        agent = (
            f"{sys.executable} -m tool_failure_guard agent --model openai:test-model "
            f"--state-dir {tmp_path / 'state'}"
        )
        done = subprocess.run(
            [
                str(ACPX),
                "--agent",
                agent,
                "--cwd",
                str(project),
                *permissions,
                "--format",
                "json",
                "exec",
                "run the tests",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert done.returncode == exit_status, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return fake, lines


SHOWN_STOP = shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)


def agent_texts(lines: list[dict[str, Any]]) -> str:
    return "".join(
        str(line["params"]["update"]["content"].get("text", ""))
        for line in lines
        if line.get("method") == "session/update"
        and line["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
    )


def prompt_result(lines: list[dict[str, Any]]) -> dict[str, Any]:
    results = [line["result"] for line in lines if "stopReason" in (line.get("result") or {})]
    assert len(results) == 1
    return results[0]


def reminders(fake: FakeOpenAI) -> list[int]:
    return [fake.count_in(i, REPEATED_TOOL_FAILURE_REMINDER) for i in range(len(fake.requests))]


def drain_requests(lines: list[dict[str, Any]]) -> list[str]:
    return [line["method"] for line in lines if line.get("method") in DRAIN_NAMES]


@pytest.mark.parametrize("permissions", [["--approve-all"], ["--permission-policy", POLICY]])
def test_prompt_only_in_enforce_reminds_once_then_stops(
    tmp_path: Path, permissions: list[str]
) -> None:
    fake, lines = run_acpx(tmp_path, "prompt-only", permissions)
    assert reminders(fake) == [0, 0, 1]  # the third request carries it, once; no fourth
    assert agent_texts(lines).count(SHOWN_STOP) == 1
    assert REPEATED_TOOL_FAILURE_STOP_MESSAGE not in agent_texts(lines)  # no System: shown
    result = prompt_result(lines)
    assert result["stopReason"] == "end_turn"
    assert {k: result["_meta"][k] for k in ("code", "errorKind", "loopType")} == {
        "code": "LOOP_DETECTED",
        "errorKind": "loop_detected",
        "loopType": "repeated_tool_execution_failure",
    }
    assert drain_requests(lines) == []  # the agent never calls the drain


def test_the_default_boundary_is_unchanged_on_acpx(tmp_path: Path) -> None:
    fake, lines = run_acpx(tmp_path, None, ["--approve-all"])
    assert reminders(fake) == [0] * (FAILING_TURNS + 1)  # every failing turn, then the last
    assert SHOWN_STOP not in agent_texts(lines)
    assert "I give up on the tests." in agent_texts(lines)
    result = prompt_result(lines)
    assert result["stopReason"] == "end_turn" and "loopType" not in (result.get("_meta") or {})
    # acpx has neither name: each asked once, "method not found", never again
    assert drain_requests(lines) == list(DRAIN_NAMES)


def test_acpx_exec_rejects_shell_calls_without_a_permission_policy(tmp_path: Path) -> None:
    # acpx exits 5 when it denied permission requests.
    fake, lines = run_acpx(tmp_path, "prompt-only", [], exit_status=5)
    answers = [
        line["result"]["outcome"].get("optionId")
        for line in lines
        if isinstance(line.get("result"), dict) and "outcome" in line["result"]
    ]
    assert answers and set(answers) == {"reject"}
    # Rejected calls never ran, so no failure was counted: no reminder, no stop.
    assert reminders(fake) == [0] * (FAILING_TURNS + 1)
    assert SHOWN_STOP not in agent_texts(lines)
