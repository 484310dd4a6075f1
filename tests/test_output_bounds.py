"""Every output is bounded: MCP errors, the shell tool's output, a server's stdout noise.

The MCP cases run the agent over ACP stdio with ``tests/mcp_bounds_server.py``,
a server written with the official SDK that answers megabytes where a line
would do; the shell cases run real commands through the executor.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.schema import EnvVariable, McpServerStdio
from e2e_helpers import Box, run
from test_session_executor import execute

from tool_failure_guard.session.tools.executor import MAX_RESPONSE_CHARS, FunctionCall
from tool_failure_guard.session.tools.shell_output import SHELL_KEEP_BYTES, ShellOutput
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent

BOUNDS = Path(__file__).resolve().parent / "mcp_bounds_server.py"
#: The longest a capped text may be: the cap and its note.
CAPPED = MAX_RESPONSE_CHARS + 100
HUGE = 5_000_000


def bounds_server(name: str, **env: str) -> McpServerStdio:
    return McpServerStdio(
        name=name,
        command=sys.executable,
        args=[str(BOUNDS)],
        env=[EnvVariable(name=k, value=v) for k, v in env.items()],
    )


def run_mcp(
    box: Box, calls: list[dict[str, Any]], **env: str
) -> tuple[RecordingClient, Any, Any, str]:
    """One prompt whose one turn makes ``calls`` to a bounds server named ``b``."""
    scenario = box.scenario({"turns": [{"text": "Calling.", "calls": calls}]})
    client = RecordingClient()
    log = box.root / "agent.stderr"

    async def go() -> tuple[Any, Any]:
        with log.open("w") as stderr:
            async with spawn_guarded_agent(
                client,
                mode="shadow",
                state_dir=box.state,
                home=box.home,
                scenario=scenario,
                stderr=stderr,
            ) as conn:
                session = await conn.new_session(
                    cwd=str(box.project), mcp_servers=[bounds_server("b", **env)]
                )
                response = await conn.prompt(
                    session_id=session.session_id, prompt=[text_block("go")]
                )
                return session, response

    session, response = run(go())
    return client, session, response, log.read_text(encoding="utf-8")


def test_huge_mcp_errors_and_results_are_capped_before_the_client_and_the_history(
    tmp_path: Path,
) -> None:
    box = Box(tmp_path)
    tools = ("huge_error", "huge_rpc_error", "huge_refusal", "huge_ok")
    calls = [{"tool": f"mcp__b__{tool}", "args": {}, "id": tool} for tool in tools]
    client, session, response, stderr = run_mcp(box, calls)
    assert response.stop_reason == "end_turn"
    results = {
        p.call_id: p
        for m in box.history(session.session_id)
        for p in m.parts
        if p.kind == "function_response"
    }
    assert {k: (p.status, p.error_type) for k, p in results.items()} == {
        "huge_error": ("error", "mcp_tool_error"),
        "huge_rpc_error": ("error", "mcp_protocol_error"),
        "huge_refusal": ("error", "invalid_tool_params"),
        "huge_ok": ("success", None),
    }
    for part in results.values():
        assert len(part.text) <= CAPPED
        assert part.text.endswith("more characters cut]")
    error = results["huge_error"].text
    assert error == "E" * MAX_RESPONSE_CHARS + (
        f"\n[output truncated: {HUGE - MAX_RESPONSE_CHARS} more characters cut]"
    )
    # What the client was sent is the capped text too.
    updates = [e for e in client.events if e.kind == "tool_update" and e.text]
    assert {e.call_id for e in updates} == set(tools)
    assert max(len(e.text) for e in updates) <= CAPPED
    # Each result is stored twice (its call_settled record, the batch's tool_results),
    # capped both times: the whole state is far below one huge answer.
    stored = sum(f.stat().st_size for f in box.state.rglob("*") if f.is_file())
    assert stored < len(tools) * 2 * CAPPED + 20_000, stored
    assert len(stderr) < 20_000


def test_a_server_printing_to_stdout_costs_one_warning_not_a_traceback_per_line(
    tmp_path: Path,
) -> None:
    box = Box(tmp_path)
    calls = [{"tool": "mcp__b__quiet", "args": {}, "id": "quiet"}]
    client, session, response, stderr = run_mcp(box, calls, BOUNDS_SERVER_NOISE="1000")
    assert response.stop_reason == "end_turn"
    [status] = session.field_meta["toolFailureGuard"]["mcpServers"]
    assert status["status"] == "connected"
    assert client.final_statuses() == {"quiet": "completed"}  # it still serves
    assert "Traceback" not in stderr and "Failed to parse JSONRPC" not in stderr
    warnings = [line for line in stderr.splitlines() if "not JSON-RPC" in line]
    # One warning when the first line came; one count when the server was closed.
    assert len(warnings) == 2, warnings
    assert "'b' wrote a line to stdout that is not JSON-RPC" in warnings[0]
    assert "'b': 1000 stdout lines that are not JSON-RPC ignored so far" in warnings[1]
    assert len(stderr) < 5_000


# -- the shell tool -------------------------------------------------------------------


def shell(tmp_path: Path, command: str) -> Any:
    call = FunctionCall(call_id="s", name="run_shell_command", args={"command": command})
    return execute(None, call, tmp_path)


def test_shell_output_keeps_head_and_tail_and_reports_the_bytes_cut(tmp_path: Path) -> None:
    total = 50_000_000
    outcome = shell(tmp_path, f"head -c {total - 3} /dev/zero | tr '\\0' x; printf END")
    assert (outcome.terminal_status, outcome.execution_status) == ("success", "success")
    cut = total - 2 * SHELL_KEEP_BYTES
    assert outcome.output == (
        "x" * SHELL_KEEP_BYTES
        + f"\n[... {cut} bytes of output cut ...]\n"
        + "x" * (SHELL_KEEP_BYTES - 3)
        + "END"
    )


def test_a_failing_command_with_huge_output_names_its_status_and_the_cut(
    tmp_path: Path,
) -> None:
    outcome = shell(tmp_path, "yes | head -c 10000000; echo the-real-error; exit 3")
    assert (outcome.terminal_status, outcome.execution_error_type) == (
        "error",
        "shell_execute_error",
    )
    assert outcome.output.startswith("exit status 3\n")
    assert outcome.output.endswith("the-real-error")  # the tail is kept
    assert len(outcome.output) < 2100


def test_small_output_is_returned_whole(tmp_path: Path) -> None:
    assert shell(tmp_path, "printf 'a\\nb'").output == "a\nb"


def test_a_cut_never_splits_a_utf8_character() -> None:
    output = ShellOutput(keep=4)
    output.add("aééé".encode())  # 7 bytes: head a,é,lead of é
    output.add("éééz".encode())
    text = output.bytes().decode("utf-8")  # would raise on half a character
    head, note, tail = text.split("\n")
    assert (head, tail) == ("aé", "éz")
    assert note == f"[... {14 - len('aé'.encode()) - len('éz'.encode())} bytes of output cut ...]"


def test_a_quarter_gigabyte_of_output_keeps_memory_bounded() -> None:
    """Peak RSS of a fresh process running the tool on 256 MiB of output stays far below it."""
    code = (
        "import asyncio, json, tempfile\n"
        "from pathlib import Path\n"
        "from tool_failure_guard.session.tools.builtin import RunShellCommand, ToolContext\n"
        "out = asyncio.run(RunShellCommand().run({'command': 'head -c 268435456 /dev/zero'},"
        " ToolContext(cwd=Path(tempfile.gettempdir()))))\n"
        # VmHWM is this program's own peak: ru_maxrss would carry a big forking parent's
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "print(json.dumps({'len': len(out), 'peak_kib': int(hwm.split()[1])}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    measured = json.loads(result.stdout)
    print(f"shell tool, 256 MiB of output: peak RSS {measured['peak_kib'] / 1024:.0f} MiB")
    assert measured["len"] < 3 * SHELL_KEEP_BYTES
    assert measured["peak_kib"] < 200 * 1024  # the output alone would be 256 MiB


@pytest.mark.parametrize("size", [MAX_RESPONSE_CHARS, MAX_RESPONSE_CHARS + 1])
def test_the_cap_keeps_text_at_the_limit_and_cuts_one_past_it(size: int) -> None:
    from tool_failure_guard.session.tools.executor import cap_text

    capped = cap_text("y" * size)
    if size == MAX_RESPONSE_CHARS:
        assert capped == "y" * size
    else:
        assert capped == "y" * MAX_RESPONSE_CHARS + "\n[output truncated: 1 more characters cut]"


def test_stdout_noise_warnings_are_rate_limited_per_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tool_failure_guard.session.tools.mcp_bounds import NOISE_WARNING_INTERVAL, StdoutNoise

    now = [0.0]
    noise = StdoutNoise("srv", clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="session.mcp")
    for at, lines in ((0.0, 500), (NOISE_WARNING_INTERVAL / 2, 500), (NOISE_WARNING_INTERVAL, 1)):
        now[0] = at
        for _ in range(lines):
            run(noise(ValueError("not JSON-RPC")))
    run(noise(object()))  # a notification is not noise
    noise.close()
    noise.close()  # nothing new: no second count
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "MCP server 'srv' wrote a line to stdout that is not JSON-RPC (stdout is the protocol "
        "channel; logs belong on stderr): ignored, and so will be any more",
        "MCP server 'srv': 1001 stdout lines that are not JSON-RPC ignored so far",
    ]
    assert noise.lines == 1001
