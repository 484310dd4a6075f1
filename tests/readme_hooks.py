"""The README's first screen for a coding-CLI user, run as written in a private HOME.

``coding-cli``: the clone's venv lines are checked as forms (``pip install -e .`` is a
dry run of the real pip in a copy of the checkout, offline), every ``tool-failure-guard``
line runs through ``sh`` with ``HOME`` a temporary folder (holding one recorded Claude
Code session under ``~/.claude/projects`` for ``transcripts``).  ``coding-cli-plugin``:
``claude`` is the pinned Claude Code, in the checkout (the clone), the same HOME; the
operator's config it writes is restored after (:mod:`hook_homes`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from agent_clis import claude_binary, require
from hook_homes import EXE, home_env, no_managed_install, operator_config
from readme_frameworks import SOURCES

ROOT = Path(__file__).resolve().parent.parent
SESSION = ROOT / "tests" / "fixtures" / "transcripts" / "claude-code" / "failing.session.jsonl"


def _lines(text: str) -> list[str]:
    return [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]


def _sh(line: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(env, PATH=f"{EXE.parent}:{env.get('PATH', '/usr/bin:/bin')}")
    return subprocess.run(
        ["sh", "-c", line], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )


def _pip_dry_run(tmp_path: Path) -> None:
    source = tmp_path / "clone"
    source.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index",
         "--no-build-isolation", "--disable-pip-version-check", "-e", "."],
        cwd=source, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Would install tool-failure-guard" in done.stdout


def check_coding_cli(text: str, tmp_path: Path) -> None:
    lines = _lines(text)
    assert lines[:3] == [
        "cd tool-failure-guard",
        "python3 -m venv .venv && . .venv/bin/activate",
        "pip install -e .",
    ]
    _pip_dry_run(tmp_path)
    env = home_env(tmp_path)
    projects = tmp_path / "home" / ".claude" / "projects" / "-work-project"
    projects.mkdir(parents=True)
    shutil.copy2(SESSION, projects / "session-1.jsonl")
    outputs = []
    with no_managed_install():  # another test's managed install would show in the status
        for line in lines[3:]:
            assert line.startswith("tool-failure-guard "), line
            done = _sh(line, env, tmp_path)
            assert done.returncode == 0, (line, done.stdout, done.stderr)
            outputs.append(done.stdout)
    assert "installed: claude-code hook (shadow)" in outputs[0]
    assert "scope user, mode shadow" in outputs[1] and "all well" in outputs[1]
    assert "transcripts: 1 files, 1 runs" in outputs[2]
    assert "installed: claude-code hook (enforce)" in outputs[3]
    settings = json.loads((tmp_path / "home" / ".claude" / "settings.json").read_text())
    commands = [h["command"] for g in settings["hooks"]["PostToolBatch"] for h in g["hooks"]]
    assert len(commands) == 1 and "--mode enforce" in commands[0]


def check_coding_cli_plugin(text: str, tmp_path: Path) -> None:
    binary = require(claude_binary)
    lines = _lines(text)
    env = home_env(tmp_path)
    env.update(DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    with operator_config():
        for line in lines:
            if line.startswith("claude "):
                line = f"'{binary}' {line[len('claude ') :]}"
            done = _sh(line, env, ROOT)  # run in the clone
            assert done.returncode == 0, (line, done.stdout, done.stderr)
        status = _sh("tool-failure-guard hook status claude-code", env, tmp_path)
    assert "installed at plugin: tool-failure-guard@tool-failure-guard" in status.stdout
    assert "scope plugin, mode enforce" in status.stdout, status.stdout
