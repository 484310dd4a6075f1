"""Installing the hook: merged, idempotent, atomic, refused untouched, removed alone."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tool_failure_guard.hooks import install as installer

# -- install / uninstall -----------------------------------------------------------------------


def _install(path: Path, mode: str) -> None:
    command = installer.hook_command(
        "claude-code", mode=mode, executable="/opt/x/bin/tool-failure-guard"
    )
    entries = installer.claude_style_entries(
        command, ("UserPromptSubmit", "PostToolBatch"), ("PostToolBatch",), 30
    )
    installer.install(path, entries, "claude-code")


def test_install_is_idempotent_keeps_everything_else_and_uninstall_removes_only_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "settings.json"
    other = {"type": "command", "command": "/usr/bin/audit-hook"}
    original = {
        "model": "x",
        "env": {"A": "1"},
        "hooks": {
            "PostToolBatch": [{"matcher": "*", "hooks": [other]}],
            "Stop": [{"hooks": [other]}],
        },
    }
    path.write_text(json.dumps(original))
    os.chmod(path, 0o640)
    _install(path, "warn")
    once = path.read_text()
    _install(path, "warn")
    assert path.read_text() == once
    _install(path, "enforce")
    settings = json.loads(path.read_text())
    commands = [h["command"] for g in settings["hooks"]["PostToolBatch"] for h in g["hooks"]]
    assert commands[0] == "/usr/bin/audit-hook"
    assert len(commands) == 2 and "--mode enforce" in commands[1]
    assert settings["model"] == "x" and settings["env"] == {"A": "1"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert installer.uninstall(path, "claude-code") is True
    assert json.loads(path.read_text()) == original
    assert installer.uninstall(path, "claude-code") is False


@pytest.mark.parametrize("content", ["[]", "{not json", '{"hooks": []}', '{"hooks": {"Stop": 1}}'])
def test_a_settings_file_that_is_not_an_object_is_refused_untouched(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "settings.json"
    path.write_text(content)
    with pytest.raises(installer.SettingsError, match="left untouched"):
        _install(path, "warn")
    assert path.read_text() == content
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_the_cli_installs_with_the_running_executable_and_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    exe = Path(sys.executable).parent / "tool-failure-guard"
    done = subprocess.run(
        [
            str(exe),
            "hook",
            "install",
            "claude-code",
            "--mode",
            "warn",
            "--settings",
            str(path),
            "--state-dir",
            str(tmp_path / "st"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "installed" in done.stdout
    settings = json.loads(path.read_text())
    # Stop only gives the telemetry's prompt record: installed only with --telemetry
    assert set(settings["hooks"]) == {"UserPromptSubmit", "PostToolUseFailure", "PostToolBatch"}
    command = settings["hooks"]["PostToolBatch"][0]["hooks"][0]["command"]
    assert command.startswith(str(exe) + " hook claude-code --mode warn --state-dir ")
    with_sink = [
        str(exe),
        "hook",
        "install",
        "claude-code",
        "--mode",
        "warn",
        "--settings",
        str(path),
        "--telemetry",
        f"file:{tmp_path / 't.jsonl'}",
    ]
    subprocess.run(with_sink, capture_output=True, check=True)
    settings = json.loads(path.read_text())
    assert "Stop" in settings["hooks"] and len(settings["hooks"]["PostToolBatch"]) == 1
    assert "--telemetry file:" in settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    uninstall = [str(exe), "hook", "uninstall", "claude-code", "--settings", str(path)]
    assert "removed" in subprocess.run(uninstall, capture_output=True, text=True).stdout
    assert json.loads(path.read_text()) == {"hooks": {}}
    path.write_text("[]")
    refused = subprocess.run(
        [str(exe), "hook", "install", "claude-code", "--mode", "warn", "--settings", str(path)],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "not an object" in refused.stderr


def test_a_relative_telemetry_file_is_made_absolute_and_a_bad_kind_refused(
    tmp_path: Path,
) -> None:
    # a hook runs in the project's folder: a relative path would write the records there
    exe = Path(sys.executable).parent / "tool-failure-guard"
    path = tmp_path / "s.json"
    base = [str(exe), "hook", "install", "claude-code", "--mode", "warn", "--settings", str(path)]
    subprocess.run([*base, "--telemetry", "file:t.jsonl"], cwd=tmp_path, check=True)
    command = json.loads(path.read_text())["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert f"--telemetry file:{tmp_path / 't.jsonl'}" in command
    bad = subprocess.run([*base, "--telemetry", "bogus"], capture_output=True, text=True)
    assert bad.returncode == 2 and "bogus" in bad.stderr
