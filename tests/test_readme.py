"""Every fenced block of README.md is run here, or marked as needing a real model server.

Each block is preceded by ``<!-- readme-check: NAME -->``.  ``real-model-server``
marks a block that needs one (``ollama pull``...); every other name is a check
below that runs the block as written, with only these substitutions:

* the model endpoint is the project's fake OpenAI-compatible server on
  127.0.0.1 (:mod:`openai_server`), the failing-tool loop or a file read;
* ``/path/to/project`` is a temporary project and ``/path/to/tool-failure-guard``
  this checkout;
* ``npx -y @modelcontextprotocol/server-filesystem@VERSION`` is the same
  server at the same version from ``.mcp-servers/`` (``make setup``), so no
  download happens (the version is checked against the pinned one);
* ``acpx`` is the pinned one from ``.clients/``.

The first screen's ``pip install`` line (a dry run of the real pip in a copy of the
checkout), its complete first agent (run as a script) and framework snippets are
checked by :mod:`readme_frameworks` (each snippet's free names bound to its
framework's real model on the fake server).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import ClientCapabilities, Implementation, McpServerStdio
from e2e_helpers import run
from mcp_servers import FILESYSTEM, require_real_servers
from openai_server import FakeOpenAI, Reply, call, serve
from readme_frameworks import (
    check_first_agent,
    check_langchain,
    check_openai_agents,
    check_pip_install,
    check_pydantic_ai,
)
from readme_hooks import check_coding_cli, check_coding_cli_plugin
from test_acpx_e2e import require_acpx

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    DecisionKind,
)
from tool_failure_guard.session.transport.client import RecordingClient

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CLIENT_BIN = ROOT / ".clients" / "node_modules" / ".bin"
MARKER = re.compile(r"^<!-- readme-check: ([a-z-]+) -->$")
NEEDS_A_REAL_MODEL = "real-model-server"
#: The checks, each running the blocks of its names together.
GROUPS: tuple[tuple[str, ...], ...] = (
    ("coding-cli",),
    ("coding-cli-plugin",),
    ("make",),
    ("pip-install",),
    ("first-agent",),
    ("pydantic-ai",),
    ("langchain",),
    ("openai-agents",),
    ("python-api",),
    ("acpx-exec",),
    ("zed-agent",),
    ("acpxrc", "acpx-mcp"),
    ("zed-mcp",),
)
CONFIG_TEXT = "answer = 42\n"


def readme_blocks() -> list[tuple[int, str | None, str, str]]:
    """(line, marker name, language, text) of every fenced block."""
    lines = README.read_text(encoding="utf-8").splitlines()
    blocks: list[tuple[int, str | None, str, str]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("```"):
            language = line[3:].strip()
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
            found = MARKER.match(previous)
            text = "\n".join(lines[index + 1 : end]) + "\n"
            blocks.append((index + 1, found.group(1) if found else None, language, text))
            index = end + 1
        else:
            index += 1
    return blocks


def block(name: str) -> str:
    (text,) = [text for _, marker, _, text in readme_blocks() if marker == name]
    return text


def test_every_block_is_run_here_or_marked_as_needing_a_real_model() -> None:
    blocks = readme_blocks()
    unmarked = [line for line, marker, _, _ in blocks if marker is None]
    assert unmarked == [], f"README.md blocks without a readme-check marker at lines {unmarked}"
    markers = [marker for _, marker, _, _ in blocks]
    run_here = {name for group in GROUPS for name in group}
    assert set(markers) - {NEEDS_A_REAL_MODEL} == run_here
    assert len([m for m in markers if m != NEEDS_A_REAL_MODEL]) == len(run_here)  # once each


# -- substitutions ------------------------------------------------------------------


def pinned_filesystem_version() -> str:
    lock = json.loads((ROOT / ".mcp-servers" / "package-lock.json").read_text(encoding="utf-8"))
    return str(lock["packages"]["node_modules/@modelcontextprotocol/server-filesystem"]["version"])


def offline(command: str, args: list[str], project: Path) -> tuple[str, list[str]]:
    """``npx -y server-filesystem@V ARGS`` -> the pinned install, same version, same args."""
    args = [str(project) if a == "/path/to/project" else a for a in args]
    if command != "npx":
        return command, args
    assert args[0] == "-y"
    package, _, version = args[1].rpartition("@")
    assert package == "@modelcontextprotocol/server-filesystem"
    assert version == pinned_filesystem_version(), "README names another version than the pin"
    return "node", [str(FILESYSTEM), *args[2:]]


def shell_env(fake: FakeOpenAI, home: Path) -> dict[str, str]:
    return {
        "PATH": f"{CLIENT_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "test-key",
    }


def dirs(tmp_path: Path) -> tuple[Path, Path]:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    (project / "config.toml").write_text(CONFIG_TEXT, encoding="utf-8")
    return project, home


# -- the fake model's two behaviours -------------------------------------------------


class FailingShellLoop:
    """Four failing shell calls per turn, five turns, then it gives up."""

    def __init__(self) -> None:
        self.turn = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.turn += 1
        if self.turn > 5:
            return Reply(text="I give up.")
        calls = tuple(
            call(f"c{self.turn}_{i}", "run_shell_command", {"command": "exit 3"}) for i in range(4)
        )
        return Reply(text="Running the tests.", calls=calls)


class ReadsTheConfigWithMcp:
    """Reads ``config.toml`` with the filesystem server's read tool, then answers."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.tools: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        if not self.tools:
            self.tools = [t["function"]["name"] for t in body.get("tools", [])]
            read = sorted(n for n in self.tools if n.startswith("mcp__fs__read"))[0]
            path = str(self.project / "config.toml")
            return Reply(text="Reading.", calls=(call("r1", read, {"path": path}),))
        return Reply(text="The config sets answer.")


def assert_reminded_once_then_stopped(fake: FakeOpenAI, shown: str) -> None:
    counts = [fake.count_in(i, REPEATED_TOOL_FAILURE_REMINDER) for i in range(len(fake.requests))]
    assert counts == [0, 0, 1]
    assert shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE) in shown


def assert_read_through_mcp(fake: FakeOpenAI, model: ReadsTheConfigWithMcp) -> None:
    assert any(name.startswith("mcp__fs__") for name in model.tools)
    assert len(fake.requests) == 2 and fake.count_in(1, "answer = 42") >= 1


# -- the checks ---------------------------------------------------------------------


def test_make_block() -> None:
    """``make demo`` runs for real; ``make test`` is this suite, so only its plan is checked."""
    text = block("make")
    commands = [line.split("#")[0].strip() for line in text.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    # ``-o``: never re-run the set-up from inside the suite (``make test`` has just done it).
    demo = subprocess.run(
        ["make", "-o", ".venv/.installed", "demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "enforce also stops the prompt" in demo.stdout
    plan = subprocess.run(
        ["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert plan.returncode == 0, plan.stderr
    for step in ("ruff check", "ruff format --check", "mypy --strict", "render --check", "pytest"):
        assert step in plan.stdout


def test_coding_cli_block(tmp_path: Path) -> None:
    check_coding_cli(block("coding-cli"), tmp_path)


def test_coding_cli_plugin_block(tmp_path: Path) -> None:
    check_coding_cli_plugin(block("coding-cli-plugin"), tmp_path)


def test_pip_install_block(tmp_path: Path) -> None:
    check_pip_install(block("pip-install"), tmp_path)


def test_first_agent_block(tmp_path: Path) -> None:
    check_first_agent(block("first-agent"), tmp_path)


def test_pydantic_ai_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD", "enforce")
    check_pydantic_ai(block("pydantic-ai"), tmp_path)


def test_langchain_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD", "enforce")
    check_langchain(block("langchain"), tmp_path)


def test_openai_agents_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD", "enforce")
    check_openai_agents(block("openai-agents"), tmp_path)


def test_python_api_block() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(block("python-api"), "README.md", "exec"), namespace)
    assert namespace["decision"].kind is DecisionKind.TRACKED  # one eligible failure: tracked


def run_shell_block(text: str, project: Path, env: dict[str, str]) -> str:
    require_acpx()
    script = text.replace("/path/to/project", str(project))
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


def test_acpx_exec_block(tmp_path: Path) -> None:
    project, home = dirs(tmp_path)
    with serve(FakeOpenAI(FailingShellLoop())) as fake:
        shown = run_shell_block(block("acpx-exec"), project, shell_env(fake, home))
    assert_reminded_once_then_stopped(fake, shown)


def test_acpxrc_and_acpx_mcp_blocks(tmp_path: Path) -> None:
    require_real_servers()
    project, home = dirs(tmp_path)
    config = json.loads(block("acpxrc"))
    for server in config["mcpServers"]:
        server["command"], server["args"] = offline(server["command"], server["args"], project)
    (project / ".acpxrc.json").write_text(json.dumps(config), encoding="utf-8")
    model = ReadsTheConfigWithMcp(project)
    with serve(FakeOpenAI(model)) as fake:
        shown = run_shell_block(block("acpx-mcp"), project, shell_env(fake, home))
    assert_read_through_mcp(fake, model)
    assert "The config sets answer." in shown


async def drive_zed_agent(
    settings: dict[str, Any], fake: FakeOpenAI, project: Path, home: Path
) -> tuple[Any, RecordingClient]:
    """Spawn the agent exactly as Zed would from ``settings``; one prompt, as Zed sends it."""
    agent = settings["agent_servers"]["Guarded agent"]
    command = agent["command"].replace("/path/to/tool-failure-guard", str(ROOT))
    assert Path(command).is_absolute()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **agent["env"]}
    env.update({"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test-key"})
    servers = []
    for name, server in settings.get("context_servers", {}).items():
        exe, args = offline(server["command"], server["args"], project)
        servers.append(McpServerStdio(name=name, command=exe, args=args, env=[]))
    client = RecordingClient(drain="missing")  # Zed speaks plain ACP: no drain method
    async with spawn_agent_process(
        client, command, *agent["args"], env=env, transport_kwargs={"shutdown_timeout": 10.0}
    ) as (conn, _):
        await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="zed-like", version="0"),
        )
        session = await conn.new_session(cwd=str(project), mcp_servers=servers)
        response = await conn.prompt(
            session_id=session.session_id, prompt=[text_block("read the config")]
        )
    return response, client


def test_zed_agent_block(tmp_path: Path) -> None:
    project, home = dirs(tmp_path)
    with serve(FakeOpenAI(FailingShellLoop())) as fake:
        response, client = run(drive_zed_agent(json.loads(block("zed-agent")), fake, project, home))
    assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
    assert_reminded_once_then_stopped(fake, "".join(client.agent_texts()))
    assert {r["model"] for r in fake.requests} == {"qwen2.5-coder:7b"}


def test_zed_mcp_block(tmp_path: Path) -> None:
    require_real_servers()
    project, home = dirs(tmp_path)
    model = ReadsTheConfigWithMcp(project)
    with serve(FakeOpenAI(model)) as fake:
        response, _ = run(drive_zed_agent(json.loads(block("zed-mcp")), fake, project, home))
    assert response.stop_reason == "end_turn"
    assert_read_through_mcp(fake, model)


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: "+".join(g))
def test_each_group_has_a_check(group: tuple[str, ...]) -> None:
    name = "test_" + "_and_".join(n.replace("-", "_") for n in group) + "_block"
    name = name if len(group) == 1 else name + "s"
    assert callable(globals().get(name)), f"no check {name} for README blocks {group}"
