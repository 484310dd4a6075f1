"""A host built for the original, on the TypeScript ACP SDK, gets reminders and stops from us.

``tests/ts_drain_host.mjs`` answers the drain only under the bare name
``craft/drainMidTurnQueue`` (what Qwen Code 0.24.4 sends; the TypeScript SDK
passes extension names through unchanged) and reads the stop from the prompt
response's ``_meta``.  The SDK is ``@agentclientprotocol/sdk``, installed with
acpx by ``make setup`` (``.clients/``); without Node.js or that install the test
skips saying so (fails where ``TOOL_FAILURE_GUARD_REQUIRE_MCP_SERVERS=1``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_servers import REQUIRE_ENV_VAR

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import GUARD_MODE_ENV_VAR, REPEATED_TOOL_FAILURE_STOP_MESSAGE

ROOT = Path(__file__).resolve().parent.parent
SDK = ROOT / ".clients" / "node_modules" / "@agentclientprotocol" / "sdk" / "dist" / "acp.js"
HOST = Path(__file__).with_name("ts_drain_host.mjs")


def require_sdk() -> str:
    node = shutil.which("node")
    if node is not None and SDK.is_file():
        return node
    message = (
        "the TypeScript ACP SDK is not installed: install Node.js 20+ with npm, "
        "then run `make setup`"
    )
    if os.environ.get(REQUIRE_ENV_VAR) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV_VAR}=1)")
    pytest.skip(message)


def test_a_bare_name_host_on_the_typescript_sdk_gets_the_reminder_and_the_stop(
    tmp_path: Path,
) -> None:
    node = require_sdk()
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    agent = [sys.executable, "-m", "tool_failure_guard", "agent", "--scenario", "read-loop"]
    agent += ["--state-dir", str(tmp_path / "state"), "--report-decisions"]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "PYTHONPATH": str(ROOT),
        "ACP_TS_SDK": str(SDK),
        GUARD_MODE_ENV_VAR: "enforce",
    }
    done = subprocess.run(
        [node, str(HOST), str(project), *agent],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # the bare name at every boundary: answered the first time, never the `_` name
    assert result["extRequests"] == ["craft/drainMidTurnQueue"] * 3
    response = result["response"]
    meta = response["_meta"]
    assert response["stopReason"] == "end_turn"
    assert [row["decision"] for row in meta["toolFailureGuard"]["batches"]] == [
        "tracked",
        "warn",
        "stop",
    ]
    assert meta["toolFailureGuard"]["drainSupported"] is True
    assert {key: meta[key] for key in ("code", "errorKind", "loopType")} == {
        "code": "LOOP_DETECTED",
        "errorKind": "loop_detected",
        "loopType": "repeated_tool_execution_failure",
    }
    assert result["agentTexts"][-1] == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
