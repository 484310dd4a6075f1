"""Run the real coding-agent CLIs headless, hooks configured, against local model fakes.

Each ``run_*`` starts one CLI (pinned: :mod:`agent_clis`, :mod:`qwen_original`)
in a fresh temporary root holding its own ``HOME`` (and XDG folders), a
workspace, and the CLI's settings at the scopes a test names: ``system`` (the
operator's: the file the CLI's system-settings variable names), ``user`` (in
the private ``HOME``) and ``project`` (in the workspace).  The model is a local
fake on 127.0.0.1 playing a script of :class:`agent_fakes.script.Turn`; every
main-loop request body is recorded in order (:attr:`Run.requests`), so a test
can say which request carried what, and how many were made.

* Qwen Code 0.24.4: ``qwen -p`` (``cli.js``), ``OPENAI_BASE_URL`` at
  ``tests/openai_server.py``; system settings via ``QWEN_CODE_SYSTEM_SETTINGS_PATH``.
* Gemini CLI 0.61.0: ``gemini -p``, ``GOOGLE_GEMINI_BASE_URL`` at
  :mod:`agent_fakes.gemini_api`; system settings via ``GEMINI_CLI_SYSTEM_SETTINGS_PATH``
  (read only where root owns the file and every folder above it is writable by
  root only: :func:`secure_folder`).
* Codex CLI 0.169.0: ``codex exec`` at :mod:`agent_fakes.openai_responses`.
* Copilot CLI 1.0.102: ``copilot -p`` offline with BYOK at ``tests/openai_server.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
from agent_fakes.gemini_api import FakeGemini, serve_gemini
from agent_fakes.script import Turn, arguments_json
from transcript_capture import codex_provider_config

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 240


@attrs.frozen
class Run:
    """What one headless run left: the model requests it made, its output, its exit."""

    root: Path
    workspace: Path
    requests: list[dict[str, Any]]
    stdout: str
    stderr: str
    returncode: int


def _base_env(root: Path) -> dict[str, str]:
    home = root / "home"
    for name in ("home", "xdg-config", "xdg-state", "xdg-cache", "xdg-data"):
        (root / name).mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(root / "xdg-config"),
        "XDG_STATE_HOME": str(root / "xdg-state"),
        "XDG_CACHE_HOME": str(root / "xdg-cache"),
        "XDG_DATA_HOME": str(root / "xdg-data"),
        "NO_COLOR": "1",
    }
    if "PYTHONPATH" in os.environ:  # the hook is this checkout's code
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir()
    (ws / "present.txt").write_text("hello\n", encoding="utf-8")
    return ws


def _write_json(path: Path, document: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def secure_folder_unavailable() -> str | None:
    """Why a root-only system-settings folder cannot be made here (Gemini CLI needs one)."""
    if os.geteuid() != 0:
        return (
            "Gemini CLI reads a system settings file only when root owns it and no folder above "
            "it is writable by group or others; these tests are not running as root"
        )
    for folder in (ROOT, *ROOT.parents):
        mode = folder.stat().st_mode
        if folder.stat().st_uid != 0 or mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{folder} is not root-owned and writable by root only"
    return None


@contextmanager
def secure_folder() -> Iterator[Path]:
    """A private folder under the checkout (root-owned, 0700), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix=".tfg-system-", dir=ROOT))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )


# -- Gemini CLI -----------------------------------------------------------------------------

GEMINI_MODEL = "gemini-2.5-flash"
#: What every private Gemini home holds: API-key auth, no telemetry, no update checks.
GEMINI_USER_SETTINGS: Mapping[str, Any] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"disableAutoUpdate": True},
}


def gemini_hooks(
    command: str, events: Sequence[str] = ("AfterTool", "BeforeModel")
) -> dict[str, Any]:
    """A settings ``hooks`` block running ``command`` on ``events`` (every tool)."""
    return {
        event: [{"matcher": "*", "hooks": [{"type": "command", "command": command}]}]
        for event in events
    }


def run_gemini(
    turns: Sequence[Turn],
    *,
    system: Mapping[str, Any] | None = None,
    system_folder: Path | None = None,
    user: Mapping[str, Any] | None = None,
    project: Mapping[str, Any] | None = None,
    trusted: bool = False,
    env: Mapping[str, str] | None = None,
    prompt: str = "Read missing.txt",
    base: Path | None = None,
    setup: Callable[[Path, dict[str, str]], None] | None = None,
) -> Run:
    """``gemini -p PROMPT --output-format stream-json --yolo`` in a fresh root
    (``setup(script, env)`` runs first, in its environment: e.g. installing an extension).

    ``system`` goes to ``system_folder/settings.json`` (see :func:`secure_folder`);
    ``trusted`` lists the workspace in ``~/.gemini/trustedFolders.json`` (so its
    ``.gemini/settings.json`` is read); otherwise ``GEMINI_CLI_TRUST_WORKSPACE``
    lets the headless run start.
    """
    from agent_clis import gemini_script

    script = gemini_script()
    root = Path(tempfile.mkdtemp(prefix="tfg-gemini-", dir=base))
    ws = _workspace(root)
    run_env = _base_env(root)
    home = Path(run_env["HOME"])
    _write_json(home / ".gemini" / "settings.json", {**GEMINI_USER_SETTINGS, **(user or {})})
    if project is not None:
        _write_json(ws / ".gemini" / "settings.json", project)
    if trusted:
        _write_json(home / ".gemini" / "trustedFolders.json", {str(ws): "TRUST_FOLDER"})
    else:
        run_env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
    if system is not None:
        if system_folder is None:
            raise ValueError("system settings need a system_folder (secure_folder())")
        path = _write_json(system_folder / "settings.json", system)
        path.chmod(0o600)
        run_env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] = str(path)
    fake = FakeGemini(turns)
    with serve_gemini(fake):
        run_env.update(
            {"GOOGLE_GEMINI_BASE_URL": fake.base_url, "GEMINI_API_KEY": "fake-gemini-key"}
        )
        if setup is not None:
            setup(script, dict(run_env))
        run_env.update(env or {})
        argv = ["node", str(script), "-p", prompt, "--output-format", "stream-json"]
        done = _run([*argv, "--yolo", "-m", GEMINI_MODEL], cwd=ws, env=run_env)
    return Run(root, ws, fake.loop_requests(), done.stdout, done.stderr, done.returncode)


# -- Qwen Code -p ---------------------------------------------------------------------------


def agent_of(body: Any, markers: Sequence[str]) -> str | None:
    """The marker (of ``markers``) in the request's first user message: whose subagent's
    request ``body`` is (None: the main agent's)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    first = next((m for m in messages or () if m.get("role") == "user"), None)
    text = json.dumps(first.get("content")) if first else ""
    return next((marker for marker in markers if marker in text), None)


def openai_turns_responder(
    turns: Sequence[Turn],
    final: str = "Done.",
    agents: Mapping[str, Sequence[Turn]] | None = None,
) -> Any:
    """A ``tests/openai_server.py`` responder playing ``turns`` by the assistant turns held;
    a subagent's request (its first user message holds a marker of ``agents``) plays that
    script, its call ids its own (``call_aK_PPII``)."""
    from openai_server import Reply

    scripts = dict(agents or {})

    def respond(body: dict[str, Any]) -> Any:
        messages = body.get("messages") or []
        at = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        marker = agent_of(body, list(scripts)) if body.get("tools") else None
        script, tag, done = turns, "", final
        if marker is not None:
            script, tag = scripts[marker], f"a{list(scripts).index(marker)}_"
            done = f"{marker} finished."
        if at >= len(script):
            return Reply(text=done)
        turn = script[at]
        calls = tuple(
            (f"call_{tag}{at:02d}{i:02d}", c.name, arguments_json(c))
            for i, c in enumerate(turn.calls)
        )
        return Reply(text=turn.text, calls=calls)

    return respond


def qwen_hooks(
    command: str, events: Sequence[str] = ("PostToolBatch", "UserPromptSubmit")
) -> dict[str, Any]:
    """A settings ``hooks`` block running ``command`` on ``events``."""
    return {
        event: [{"matcher": "*", "hooks": [{"type": "command", "command": command}]}]
        for event in events
    }


def run_qwen(
    turns: Sequence[Turn] | Callable[[Path], Sequence[Turn]],
    *,
    system: Mapping[str, Any] | None = None,
    user: Mapping[str, Any] | None = None,
    project: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    prompt: str = "Read missing.txt",
    base: Path | None = None,
    agents: Callable[[Path], Mapping[str, Sequence[Turn]]] | None = None,
    setup: Callable[[Path, dict[str, str]], None] | None = None,
) -> Run:
    """``qwen -p PROMPT --output-format stream-json --approval-mode yolo`` in a fresh root
    (``agents``: the subagents' scripts by the marker in their prompt; ``setup(cli, env)``
    runs first, in its environment: e.g. installing an extension)."""
    from openai_server import FakeOpenAI, serve
    from qwen_original import MODEL, cli_path, environment, settings

    cli = cli_path()
    root = Path(tempfile.mkdtemp(prefix="tfg-qwen-", dir=base))
    ws = _workspace(root)
    run_env = _base_env(root)
    home = Path(run_env["HOME"])
    _write_json(home / ".qwen" / "settings.json", settings(extra=user))
    if project is not None:
        _write_json(ws / ".qwen" / "settings.json", project)
    if system is not None:
        path = _write_json(root / "system" / "settings.json", system)
        run_env["QWEN_CODE_SYSTEM_SETTINGS_PATH"] = str(path)
    script = turns(ws) if callable(turns) else turns
    fake = FakeOpenAI(openai_turns_responder(script, agents=agents(ws) if agents else None))
    with serve(fake):
        run_env.update(environment(home=home, base_url=fake.base_url, mode=None))
        run_env.update(_base_env(root))
        if system is not None:
            run_env["QWEN_CODE_SYSTEM_SETTINGS_PATH"] = str(root / "system" / "settings.json")
        if setup is not None:
            setup(cli, dict(run_env))
        run_env.update(env or {})
        argv = ["node", str(cli), "-p", prompt, "--output-format", "stream-json"]
        argv += ["--auth-type", "openai", "--approval-mode", "yolo", "-m", MODEL]
        done = _run(argv, cwd=ws, env=run_env)
    requests = [body for body in fake.requests if body.get("tools")]
    return Run(root, ws, requests, done.stdout, done.stderr, done.returncode)


# -- Copilot CLI -p (BYOK, offline) -----------------------------------------------------------


def copilot_hooks(command: str, events: Sequence[str]) -> dict[str, Any]:
    """A ``~/.copilot/hooks/*.json`` document running ``command`` on ``events``."""
    return {
        "version": 1,
        "hooks": {
            event: [{"type": "command", "bash": command, "timeoutSec": 30}] for event in events
        },
    }


def run_copilot(
    turns: Sequence[Turn] | Callable[[Path], Sequence[Turn]],
    *,
    hooks: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    prompt: str = "Read missing.txt",
    base: Path | None = None,
) -> Run:
    """``copilot -p PROMPT --allow-all-tools`` offline, BYOK at ``tests/openai_server.py``.

    ``hooks`` goes to ``~/.copilot/hooks/guard.json`` (the personal scope).
    """
    from agent_clis import copilot_script
    from openai_server import FakeOpenAI, serve

    script = copilot_script()
    root = Path(tempfile.mkdtemp(prefix="tfg-copilot-", dir=base))
    ws = _workspace(root)
    run_env = _base_env(root)
    home = Path(run_env["HOME"])
    if hooks is not None:
        _write_json(home / ".copilot" / "hooks" / "guard.json", hooks)
    played = turns(ws) if callable(turns) else turns
    fake = FakeOpenAI(openai_turns_responder(played))
    with serve(fake):
        run_env.update(
            {
                "COPILOT_OFFLINE": "true",
                "COPILOT_PROVIDER_BASE_URL": fake.base_url,
                "COPILOT_PROVIDER_API_KEY": "sk-fake-key",
                "COPILOT_MODEL": "test-model",
            }
        )
        run_env.update(env or {})
        argv = ["node", str(script), "-p", prompt, "--allow-all-tools"]
        try:
            done = _run(argv, cwd=ws, env=run_env)
        finally:  # the CLI unpacks itself into its cache on every fresh HOME (about 235 MB)
            shutil.rmtree(Path(run_env["XDG_CACHE_HOME"]) / "copilot", ignore_errors=True)
    requests = [body for body in fake.requests if body.get("tools")]
    return Run(root, ws, requests, done.stdout, done.stderr, done.returncode)


# -- Codex CLI exec --------------------------------------------------------------------------


def codex_hooks(command: str, events: Sequence[str]) -> dict[str, Any]:
    """A ``$CODEX_HOME/hooks.json`` document running ``command`` on ``events``."""
    return {
        "hooks": {
            event: [{"matcher": "*", "hooks": [{"type": "command", "command": command}]}]
            for event in events
        }
    }


def run_codex(
    turns: Sequence[Turn],
    *,
    hooks: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    prompt: str = "Read missing.txt",
    base: Path | None = None,
) -> Run:
    """``codex exec --json`` at :mod:`agent_fakes.openai_responses`; ``hooks`` in
    ``$CODEX_HOME/hooks.json``, run without the per-hook trust prompt
    (``--dangerously-bypass-hook-trust``: these are the test's own hooks)."""
    from agent_clis import codex_script
    from agent_fakes.openai_responses import FakeResponses, serve_responses

    script = codex_script()
    root = Path(tempfile.mkdtemp(prefix="tfg-codex-", dir=base))
    ws = _workspace(root)
    run_env = _base_env(root)
    codex_home = root / "codex-home"
    codex_home.mkdir()
    if hooks is not None:
        _write_json(codex_home / "hooks.json", hooks)
    fake = FakeResponses(turns, final="Done.")
    with serve_responses(fake):
        config = [*codex_provider_config(fake.base_url), ""]
        (codex_home / "config.toml").write_text("\n".join(config), encoding="utf-8")
        run_env.update({"CODEX_HOME": str(codex_home), "FAKE_API_KEY": "sk-fake-key"})
        run_env.update(env or {})
        argv = ["node", str(script), "exec", "--json", "--skip-git-repo-check"]
        argv += ["--dangerously-bypass-hook-trust", "-s", "read-only", prompt]
        done = _run(argv, cwd=ws, env=run_env)
    requests = [
        body
        for method, path, body in fake.recorder.requests
        if method == "POST" and path.split("?")[0].endswith("/responses")
    ]
    return Run(root, ws, requests, done.stdout, done.stderr, done.returncode)
