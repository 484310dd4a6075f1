"""The Claude Code plugin from this checkout: valid, installed headless, the operator's mode.

Each run installs the plugin the documented way in a private HOME (``claude plugin
marketplace add`` + ``install``) and records the executable with ``hook configure``
(the operator's config: the effective user's home, shared, so held under a lock and
restored).  The fake model answers two failing Reads per response, eleven times.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_clis import require
from agent_fakes.script import Turn
from claude_hook_harness import read
from hook_homes import EXE, home_env, hook, no_managed_install, operator_config
from plugin_harness import PLUGIN, ROOT, VERSIONS, claude_at, plugin_home, run_plugin_claude

LAUNCHER = ROOT / "plugins" / "tool-failure-guard" / "scripts" / "tool-failure-guard-hook"


def _two_failing_reads(ws: Path) -> list[Turn]:
    missing = str(ws / "missing.txt")
    return [Turn(text="Reading.", calls=(read(missing), read(missing)))] * 11


@pytest.fixture
def config() -> Iterator[Path]:
    with operator_config() as folder:
        yield folder


def _configure(*mode: str) -> None:
    done = subprocess.run(
        [str(EXE), "hook", "configure", "claude-code", *mode], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "next: tool-failure-guard hook status claude-code" in done.stdout


@pytest.mark.parametrize("version", VERSIONS)
def test_the_marketplace_and_the_plugin_validate_without_a_warning(version: str) -> None:
    binary = require(lambda: claude_at(version))
    for folder in (ROOT, ROOT / "plugins" / "tool-failure-guard"):
        done = subprocess.run(
            [str(binary), "plugin", "validate", str(folder)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        # (2.1.337 adds advice for publishing to its plugin directory: not the validation)
        assert "✔ Validation passed" in done.stdout, done.stdout
        assert "Validation passed with warnings" not in done.stdout, done.stdout


@pytest.mark.parametrize("version", VERSIONS)
def test_by_default_the_plugin_observes_and_changes_nothing(
    version: str, tmp_path: Path, config: Path
) -> None:
    _configure()  # records the executable; no mode: shadow
    run = run_plugin_claude(version, _two_failing_reads, base=tmp_path)
    assert len(run.requests) == 12, run.stderr[-2000:]
    assert run.reminded_in() == []
    assert run.result["terminal_reason"] != "hook_stopped"
    # it did observe: the session's state was written by the plugin's hook
    state = run.root / "state" / "tool-failure-guard" / "hooks" / "claude-code"
    assert any(p.suffix == ".json" for p in state.iterdir())


@pytest.mark.parametrize("version", VERSIONS)
def test_the_operators_enforce_reminds_in_request_5_and_stops_after_it(
    version: str, tmp_path: Path, config: Path
) -> None:
    _configure("--mode", "enforce")
    run = run_plugin_claude(version, _two_failing_reads, base=tmp_path)
    assert len(run.requests) == 5, run.stderr[-2000:]
    assert run.reminded_in() == [4]
    assert run.result["terminal_reason"] == "hook_stopped"


def test_a_project_cannot_change_the_plugins_mode(tmp_path: Path, config: Path) -> None:
    _configure("--mode", "enforce")
    # a project's own "config" and every variable it can set for the hook: all ignored
    project_config = {"claude-code": {"mode": "off"}}
    env = {
        "TOOL_FAILURE_GUARD_MODE": "off",
        "QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD": "off",
        "XDG_CONFIG_HOME": "/tmp",
    }
    (tmp_path / "fake-config" / "tool-failure-guard").mkdir(parents=True)
    (tmp_path / "fake-config" / "tool-failure-guard" / "hooks.json").write_text(
        json.dumps(project_config)
    )
    env["XDG_CONFIG_HOME"] = str(tmp_path / "fake-config")
    run = run_plugin_claude(
        "2.1.197", _two_failing_reads, base=tmp_path, project_settings={"env": env}
    )
    assert len(run.requests) == 5, run.stderr[-2000:]
    assert run.result["terminal_reason"] == "hook_stopped"


def test_hook_status_lists_the_plugin_install(tmp_path: Path, config: Path) -> None:
    binary = require(lambda: claude_at("2.1.197"))
    _configure("--mode", "warn")
    env = home_env(tmp_path)
    home, plugin_env = plugin_home(binary, tmp_path / "p")
    env["HOME"] = str(home)
    with no_managed_install():  # another test's managed install would be listed too
        done = hook("status", "claude-code", env=env, cwd=tmp_path)
    assert f"installed at plugin: {PLUGIN}" in done.stdout, done.stdout
    assert "scope plugin, mode warn" in done.stdout
    assert f"executable: {EXE}" in done.stdout
    assert done.returncode == 0, done.stdout
    removed = subprocess.run(
        [str(binary), "plugin", "uninstall", PLUGIN], env=plugin_env, capture_output=True,
        text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert removed.returncode == 0, removed.stderr
    with no_managed_install():
        done = hook("status", "claude-code", env=env, cwd=tmp_path)
    assert "installed at plugin" not in done.stdout and done.returncode == 1


def test_without_an_executable_the_plugin_fails_open_with_one_line_once(
    tmp_path: Path, config: Path
) -> None:
    config.mkdir(parents=True, exist_ok=True)
    (config / "executable").write_text(str(tmp_path / "gone" / "tool-failure-guard") + "\n")
    cache = Path(os.path.expanduser("~root")) / ".cache" / "tool-failure-guard"
    marker = cache / "plugin-missing-executable"
    marker.unlink(missing_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    # where Claude Code runs it from: a copy in its plugin cache, no clone around it
    launcher = tmp_path / "cache" / "tool-failure-guard" / "0.1.0" / "scripts" / LAUNCHER.name
    launcher.parent.mkdir(parents=True)
    shutil.copy2(LAUNCHER, launcher)
    payload = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s"})
    try:
        answers = [
            subprocess.run(
                [str(launcher), "claude-code"],
                input=payload,
                capture_output=True,
                text=True,
                env=env,
            )
            for _ in range(3)
        ]
        assert answers[0].returncode == 1 and answers[0].stdout == ""
        assert answers[0].stderr.count("\n") == 1
        assert "no tool-failure-guard found" in answers[0].stderr
        assert [(a.returncode, a.stdout, a.stderr) for a in answers[1:]] == [(0, "", "")] * 2
        # found again (hook configure records it): it runs, and a later loss is said again
        _configure()
        found = subprocess.run(
            [str(launcher), "claude-code"], input=payload, capture_output=True,
            text=True, env=dict(env, PYTHONPATH=os.environ.get("PYTHONPATH", str(ROOT))),
        )  # fmt: skip
        assert found.returncode == 0 and "failing open" not in found.stderr, found.stderr
        assert not marker.exists()
    finally:
        marker.unlink(missing_ok=True)


_PLUGIN_PER_CALL = """
import io, json, sys
from tool_failure_guard.commands.cli import main
payload = {"hook_event_name": "PostToolUseFailure", "session_id": "s", "prompt_id": "p",
           "tool_use_id": "a", "tool_name": "Read", "error": "File does not exist.",
           "is_interrupt": False}
sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode()))
assert main(["hook", "claude-code", "--scope", "plugin", "--state-dir", sys.argv[1]]) == 0
heavy = ("attr", "attrs", "typing", "argparse", "tool_failure_guard.core",
         "tool_failure_guard.guard", "tool_failure_guard.agent_outcomes")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy
                        or any(m.startswith(h + ".") for h in heavy))))
"""


def test_reading_the_operators_mode_keeps_the_per_call_event_light(tmp_path: Path) -> None:
    # the plugin's command names no mode: the config is read on every event (docs: Cost)
    done = subprocess.run(
        [sys.executable, "-c", _PLUGIN_PER_CALL, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []
