"""Run the real Claude Code and Codex CLIs against the local fakes and keep their logs.

Claude Code (``@anthropic-ai/claude-code``) runs ``claude -p ... --output-format
stream-json --verbose`` with ``ANTHROPIC_BASE_URL`` at
:mod:`agent_fakes.anthropic_messages`, a private ``HOME`` (its session log is
``$HOME/.claude/projects/<cwd>/<session>.jsonl``) and every non-essential request
switched off.  The Codex CLI (``@openai/codex``) runs ``codex exec --json`` with a
private ``CODEX_HOME`` whose ``config.toml`` names a model provider at
:mod:`agent_fakes.openai_responses` (``wire_api = "responses"``); its rollout is
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``.

Where the CLIs are installed: :mod:`agent_clis` (``.agents/``, or the npm prefix
``$TOOL_FAILURE_GUARD_AGENTS_PREFIX``; see ``tests/fixtures/transcripts/*/README.md``).  ``python
tests/transcript_capture.py OUT_DIR`` writes the fixtures afresh, scrubbed: the
temporary directory becomes ``/tmp/capture``, and the agents' own long
instruction texts are trimmed (they are the vendors', not ours).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from agent_clis import claude_binary, codex_script
from agent_fakes.anthropic_messages import FakeAnthropic, serve_anthropic
from agent_fakes.openai_responses import FakeResponses, serve_responses
from agent_fakes.script import Call, Turn
from transcript_scrub import scrub_lines

ROOT = Path(__file__).resolve().parent.parent
MCP_FILESYSTEM = (
    ROOT
    / ".mcp-servers"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-filesystem"
    / "dist"
    / "index.js"
)


@attrs.frozen
class Captured:
    """The files one run left: the session log (and the stream-json stdout, Claude Code)."""

    root: Path
    session_log: Path
    stdout: str
    returncode: int


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir()
    (ws / "present.txt").write_text("hello\n", encoding="utf-8")
    return ws


# -- Claude Code ------------------------------------------------------------------------


def _read(path: str) -> Call:
    return Call(name="Read", arguments={"file_path": path})


def _bash(command: str, **more: Any) -> Call:
    return Call(name="Bash", arguments={"command": command, "description": "run it", **more})


def claude_failing_turns(ws: Path) -> list[Turn]:
    missing = str(ws / "missing.txt")
    return [
        Turn(text="I will read it both ways.", calls=(_read(missing), _bash("cat missing.txt"))),
        Turn(calls=(_read(missing),)),
        Turn(text="Once more, twice.", calls=(_read(missing), _read(missing))),
        Turn(calls=(_bash("cat missing.txt"),)),
        Turn(calls=(Call(name="Read", arguments={}), Call(name="NoSuchTool", arguments={}))),
        Turn(
            calls=(Call(name="Write", arguments={"file_path": str(ws / "x.txt"), "content": "x"}),)
        ),
        Turn(calls=(Call(name="mcp__fs__read_text_file", arguments={"path": missing}),)),
        Turn(calls=(Call(name="mcp__fs__list_allowed_directories", arguments={}),)),
        Turn(calls=(_bash("sleep 5", timeout=1000),)),
    ]


def claude_success_turns(ws: Path) -> list[Turn]:
    return [
        Turn(
            text="Reading and checking.",
            calls=(_read(str(ws / "present.txt")), _bash("echo ok")),
        ),
        Turn(
            calls=(
                Call(
                    name="Write", arguments={"file_path": str(ws / "new.txt"), "content": "made\n"}
                ),
            )
        ),
    ]


def claude_two_prompt_turns(ws: Path) -> list[Turn]:
    # the fake's position counts the session's assistant messages: both prompts share them
    return [
        Turn(calls=(_read(str(ws / "present.txt")),)),
        Turn(text="It says hello."),
        Turn(text="Reading it.", calls=(_read(str(ws / "missing.txt")),)),
        Turn(calls=(_read(str(ws / "missing.txt")),)),
    ]


def claude_env(home: Path, base_url: str) -> dict[str, str]:
    """Claude Code's environment against a local fake Messages API: private home, no traffic."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-fake-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def claude_command(binary: Path, allowed: Sequence[str]) -> list[str]:
    """``claude -p`` on the scripted prompt, stream-json out, ``allowed`` tools allowed."""
    return [
        str(binary),
        "-p",
        "Read missing.txt",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        "claude-sonnet-4-5",
        "--permission-mode",
        "default",
        "--allowedTools",
        *allowed,
    ]


def codex_provider_config(base_url: str) -> list[str]:
    """The Codex CLI's ``config.toml`` lines for a local fake Responses API, no retries."""
    return [
        'model = "test-model"',
        'model_provider = "fake"',
        "[model_providers.fake]",
        'name = "fake"',
        f'base_url = "{base_url}"',
        'wire_api = "responses"',
        'env_key = "FAKE_API_KEY"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
    ]


def run_claude(
    turns_of: Any,
    *,
    allowed: Sequence[str],
    max_turns: int | None = None,
    mcp: Path | None = None,
    prompts: int = 1,
    base: Path | None = None,
) -> Captured:
    """Claude Code in print mode; ``prompts`` > 1 runs it again with ``--continue``
    (the same session: its log grows, and the stream-json outputs are concatenated)."""
    binary = claude_binary()
    root = Path(tempfile.mkdtemp(prefix="tfg-claude-", dir=base))
    home = root / "home"
    home.mkdir()
    ws = _workspace(root)
    fake = FakeAnthropic(turns_of(ws), final="I could not do it." if max_turns else "Done.")
    with serve_anthropic(fake):
        env = claude_env(home, fake.base_url)
        command = claude_command(binary, allowed)
        if max_turns is not None:
            command += ["--max-turns", str(max_turns)]
        if mcp is not None:
            config = {"mcpServers": {"fs": {"command": "node", "args": [str(mcp), str(ws)]}}}
            command += ["--mcp-config", json.dumps(config), "--strict-mcp-config"]
        outputs = []
        for number in range(prompts):
            done = subprocess.run(
                command + (["--continue"] if number else []),
                cwd=ws,
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
                stdin=subprocess.DEVNULL,
            )
            outputs.append(done.stdout)
    logs = sorted((home / ".claude" / "projects").glob("*/*.jsonl"))
    if not logs:
        raise RuntimeError(f"Claude Code left no session log: {done.stderr[-2000:]}")
    return Captured(root, logs[0], "".join(outputs), done.returncode)


# -- Codex CLI --------------------------------------------------------------------------


def _exec(command: str, **more: Any) -> Call:
    return Call(name="exec_command", arguments={"cmd": command, **more})


def codex_failing_turns() -> list[Turn]:
    return [
        Turn(text="Looking both ways.", calls=(_exec("cat missing.txt"), _exec("ls nope"))),
        Turn(calls=(_exec("cat missing.txt"),)),
        Turn(calls=(_exec("cat missing.txt"), _exec("cat missing.txt"))),
        Turn(calls=(Call(name="exec_command", arguments={"command": "cat missing.txt"}),)),
        Turn(calls=(Call(name="shell", arguments={"command": ["cat", "missing.txt"]}),)),
        Turn(calls=(Call(name="exec_command", arguments='{"cmd": "cat'),)),
        Turn(
            calls=(
                _exec("touch made.txt", sandbox_permissions="require_escalated", justification="x"),
            )
        ),
        Turn(calls=(_exec("touch made.txt"),)),
        Turn(calls=(Call(name="mcp__fs__read_text_file", arguments={"path": "missing.txt"}),)),
        Turn(calls=(Call(name="mcp__fs__list_allowed_directories", arguments={}),)),
    ]


def codex_two_prompt_turns() -> list[Turn]:
    # the fake's position counts the thread's model turns: both tasks share them
    return [
        Turn(calls=(_exec("cat present.txt"),)),
        Turn(text="It says hello."),
        Turn(text="Reading it.", calls=(_exec("cat missing.txt"),)),
        Turn(calls=(_exec("cat missing.txt"),)),
    ]


def codex_success_turns() -> list[Turn]:
    return [Turn(text="Reading and checking.", calls=(_exec("cat present.txt"), _exec("echo ok")))]


def run_codex(
    turns: list[Turn],
    *,
    final: str | None,
    sandbox: str,
    mcp: Path | None = None,
    prompts: int = 1,
    base: Path | None = None,
) -> Captured:
    """``codex exec``; ``prompts`` > 1 runs ``codex exec resume --last`` after it (the same
    thread: its rollout grows by one task each)."""
    script = codex_script()
    root = Path(tempfile.mkdtemp(prefix="tfg-codex-", dir=base))
    home = root / "home"
    codex_home = root / "codex-home"
    home.mkdir()
    codex_home.mkdir()
    ws = _workspace(root)
    fake = FakeResponses(turns, final=final)
    with serve_responses(fake):
        (codex_home / "config.toml").write_text(
            "\n".join(
                [
                    *codex_provider_config(fake.base_url),
                    *(
                        [
                            "[mcp_servers.fs]",
                            'command = "node"',
                            f"args = {json.dumps([str(mcp), str(ws)])}",
                        ]
                        if mcp is not None
                        else []
                    ),
                    "",
                ]
            ),
            encoding="utf-8",
        )
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "CODEX_HOME": str(codex_home),
            "FAKE_API_KEY": "sk-fake-key",
        }
        for number in range(prompts):
            resume = ["resume", "--last"] if number else []
            done = subprocess.run(
                [
                    "node",
                    str(script),
                    "exec",
                    *resume,
                    "--json",
                    "--skip-git-repo-check",
                    *([] if number else ["-s", sandbox]),
                    "Read missing.txt",
                ],
                cwd=ws,
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
                stdin=subprocess.DEVNULL,
            )
    logs = sorted((codex_home / "sessions").glob("**/rollout-*.jsonl"))
    if not logs:
        raise RuntimeError(f"Codex left no rollout: {done.stderr[-2000:]}")
    return Captured(root, logs[0], done.stdout, done.returncode)


def capture_claude(base: Path | None = None) -> dict[str, Captured]:
    """The failing run (with the MCP filesystem server where installed) and the successful one."""
    mcp = MCP_FILESYSTEM if MCP_FILESYSTEM.is_file() else None
    return {
        "failing": run_claude(
            claude_failing_turns,
            allowed=["Read", "Bash", "mcp__fs"],
            max_turns=9,
            mcp=mcp,
            base=base,
        ),
        "success": run_claude(claude_success_turns, allowed=["Read", "Bash", "Write"], base=base),
        "two-prompts": run_claude(claude_two_prompt_turns, allowed=["Read"], prompts=2, base=base),
    }


def capture_codex(base: Path | None = None) -> dict[str, Captured]:
    mcp = MCP_FILESYSTEM if MCP_FILESYSTEM.is_file() else None
    return {
        "failing": run_codex(
            codex_failing_turns(), final=None, sandbox="read-only", mcp=mcp, base=base
        ),
        "success": run_codex(codex_success_turns(), final="Done.", sandbox="read-only", base=base),
        "two-prompts": run_codex(
            codex_two_prompt_turns(), final="Done.", sandbox="read-only", prompts=2, base=base
        ),
    }


def write_claude(captured: dict[str, Captured], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, run in captured.items():
        log = run.session_log.read_text(encoding="utf-8")
        for suffix, text in (("session", log), ("stream", run.stdout)):
            target = out / f"{name}.{suffix}.jsonl"
            target.write_text(scrub_lines(text, run.root, kind="claude-code"), encoding="utf-8")
            written.append(target)
    return written


def write_codex(captured: dict[str, Captured], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, run in captured.items():
        target = out / f"{name}.rollout.jsonl"
        text = run.session_log.read_text(encoding="utf-8")
        target.write_text(scrub_lines(text, run.root, kind="codex"), encoding="utf-8")
        written.append(target)
    return written


def main(out: Path) -> None:
    for path in write_claude(capture_claude(), out / "claude-code"):
        print(path)
    for path in write_codex(capture_codex(), out / "codex"):
        print(path)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
