"""Installing the hook: merged, idempotent, atomic, refused untouched, undone exactly."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tool_failure_guard.hooks import install as installer
from tool_failure_guard.hooks.claude_code import MANAGED_SETTINGS

EXE = Path(sys.executable).parent / "tool-failure-guard"
ROOT = Path(__file__).resolve().parent.parent

# -- install / uninstall -----------------------------------------------------------------------


def _install(path: Path, mode: str, state: Path) -> None:
    command = installer.hook_command(
        "claude-code",
        mode=mode,
        executable="/opt/x/bin/tool-failure-guard",
        scope="settings",
        state_dir=state,
    )
    entries = installer.claude_style_entries(
        command, ("UserPromptSubmit", "PostToolBatch"), ("PostToolBatch",), 30
    )
    installer.install(path, entries, "claude-code")


def test_install_is_idempotent_keeps_everything_else_and_uninstall_gives_the_bytes_back(
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
    text = json.dumps(original, separators=(",", ":"))  # not how the installer writes JSON
    path.write_text(text)
    os.chmod(path, 0o640)
    _install(path, "warn", tmp_path / "st")
    once = path.read_text()
    _install(path, "warn", tmp_path / "st")
    assert path.read_text() == once
    _install(path, "enforce", tmp_path / "st")
    settings = json.loads(path.read_text())
    commands = [h["command"] for g in settings["hooks"]["PostToolBatch"] for h in g["hooks"]]
    assert commands[0] == "/usr/bin/audit-hook"
    assert len(commands) == 2 and "--mode enforce" in commands[1]
    assert "--scope settings" in commands[1]
    assert settings["model"] == "x" and settings["env"] == {"A": "1"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    done = installer.uninstall(path, "claude-code")
    assert done.changed and done.restored and done.state_dirs() == [tmp_path / "st"]
    assert path.read_text() == text
    assert not installer.uninstall(path, "claude-code").changed


def test_uninstall_after_the_user_changed_the_file_removes_only_what_the_install_added(
    tmp_path: Path,
) -> None:
    path = tmp_path / "settings.json"
    _install(path, "warn", tmp_path / "st")  # the file did not exist: the install made it
    settings = json.loads(path.read_text())
    settings["model"] = "y"  # the user's own change, after the install
    path.write_text(json.dumps(settings))
    done = installer.uninstall(path, "claude-code")
    assert done.changed and not done.restored
    assert json.loads(path.read_text()) == {"model": "y"}  # no emptied "hooks" left
    # unchanged since: a file the install created is removed with the folder it made
    deep = tmp_path / "new" / "folder" / "settings.json"
    _install(deep, "warn", tmp_path / "st")
    assert installer.uninstall(deep, "claude-code").restored
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    "command",
    [
        "notify-send 'tool-failure-guard hook claude-code stopped a run'",
        "docker run --rm tool-failure-guard hook claude-code",
        "/opt/x/bin/tool-failure-guard hook claude-code --mode warn --verbose",
        "/opt/x/bin/tool-failure-guard-wrapper hook claude-code --mode warn",
        "/opt/x/bin/tool-failure-guard hook claude-code --mode warn; rm -rf /tmp/x",
    ],
)
def test_a_users_hook_that_only_mentions_the_guard_is_never_taken_for_its_own(
    tmp_path: Path, command: str
) -> None:
    path = tmp_path / "settings.json"
    mine = {"hooks": {"PostToolBatch": [{"hooks": [{"type": "command", "command": command}]}]}}
    path.write_text(json.dumps(mine))
    _install(path, "warn", tmp_path / "st")
    groups = json.loads(path.read_text())["hooks"]["PostToolBatch"]
    assert groups[0] == mine["hooks"]["PostToolBatch"][0] and len(groups) == 2
    installer.uninstall(path, "claude-code")
    assert json.loads(path.read_text()) == mine
    assert installer.parse_command(command) is None


def test_a_linked_settings_file_is_updated_at_its_target_with_owner_group_and_mode_kept(
    tmp_path: Path,
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "claude-settings.json"
    target.write_text('{"model": "x"}\n')
    os.chmod(target, 0o600)
    user = 65534 if os.geteuid() == 0 else os.geteuid()  # root installing into a user's file
    os.chown(target, user, user) if os.geteuid() == 0 else None
    link = tmp_path / "home" / ".claude" / "settings.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    _install(link, "warn", tmp_path / "st")
    assert link.is_symlink() and link.resolve() == target
    info = target.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (user, user, 0o600)
    assert "hooks" in json.loads(target.read_text())
    assert [p.name for p in dotfiles.iterdir()] == ["claude-settings.json"]  # no temp left
    installer.uninstall(link, "claude-code")
    assert link.is_symlink() and target.read_text() == '{"model": "x"}\n'
    assert target.stat().st_uid == user


@pytest.mark.parametrize("content", ["[]", "{not json", '{"hooks": []}', '{"hooks": {"Stop": 1}}'])
def test_a_settings_file_that_is_not_an_object_is_refused_untouched(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "settings.json"
    path.write_text(content)
    with pytest.raises(installer.SettingsError, match="left untouched"):
        _install(path, "warn", tmp_path / "st")
    assert path.read_text() == content
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_managed_scope_has_each_platforms_own_path() -> None:
    assert MANAGED_SETTINGS["darwin"] == (
        "/Library/Application Support/ClaudeCode/managed-settings.json"
    )
    assert MANAGED_SETTINGS["linux"] == "/etc/claude-code/managed-settings.json"


# -- the command line -----------------------------------------------------------------------------


def _cli(*words: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), "hook", *words], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_the_cli_installs_with_the_running_executable_the_scope_and_the_mode(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.json"
    state = tmp_path / "st"
    done = _cli("install", "claude-code", "--settings", str(path), "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    assert "installed: claude-code hook (shadow)" in done.stdout  # shadow: the default
    assert "next: tool-failure-guard hook status claude-code" in done.stdout
    settings = json.loads(path.read_text())
    # Stop only gives the telemetry's prompt record: installed only with --telemetry
    assert set(settings["hooks"]) == {"UserPromptSubmit", "PostToolUseFailure", "PostToolBatch"}
    command = settings["hooks"]["PostToolBatch"][0]["hooks"][0]["command"]
    assert command == f"{EXE} hook claude-code --scope settings --mode shadow --state-dir {state}"
    sink = f"file:{tmp_path / 't.jsonl'}"
    with_sink = ["--settings", str(path), "--state-dir", str(state), "--telemetry", sink]
    with_sink += ["--environment", "staging"]
    done = _cli("install", "claude-code", "--mode", "warn", *with_sink)
    assert done.returncode == 0, done.stderr
    settings = json.loads(path.read_text())
    assert "Stop" in settings["hooks"] and len(settings["hooks"]["PostToolBatch"]) == 1
    assert "--telemetry file:" in settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert "--environment staging" in settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    uninstall = _cli("uninstall", "claude-code", "--settings", str(path))
    assert "removed" in uninstall.stdout
    assert f"the state folder {state} is kept (`--purge` removes it)" in uninstall.stdout
    assert not path.exists()  # the install created it: gone, not left as {"hooks": {}}
    path.write_text("[]")
    refused = _cli("install", "claude-code", "--mode", "warn", "--settings", str(path))
    assert refused.returncode == 2 and "not an object" in refused.stderr


def test_environment_without_telemetry_is_refused(tmp_path: Path) -> None:
    done = _cli("install", "claude-code", "--settings", str(tmp_path / "s.json"),
                "--environment", "prod")  # fmt: skip
    assert done.returncode == 2 and "--environment needs --telemetry" in done.stderr
    assert not (tmp_path / "s.json").exists()


def test_a_relative_telemetry_file_is_made_absolute_and_a_bad_kind_refused(
    tmp_path: Path,
) -> None:
    # a hook runs in the project's folder: a relative path would write the records there
    path = tmp_path / "s.json"
    base = ["install", "claude-code", "--mode", "warn", "--settings", str(path)]
    base += ["--state-dir", str(tmp_path / "st")]
    assert _cli(*base, "--telemetry", "file:t.jsonl", cwd=tmp_path).returncode == 0
    command = json.loads(path.read_text())["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert f"--telemetry file:{tmp_path / 't.jsonl'}" in command
    bad = _cli(*base, "--telemetry", "bogus")
    assert bad.returncode == 2 and "bogus" in bad.stderr


def test_qwen_code_leaves_a_users_disable_all_hooks_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    text = '{\n    "disableAllHooks": true,\n    "model": {"name": "q"}\n}\n'
    path.write_text(text)
    state = ["--state-dir", str(tmp_path / "st")]
    done = _cli("install", "qwen-code", "--mode", "enforce", "--settings", str(path), *state)
    assert done.returncode == 0, done.stderr
    settings = json.loads(path.read_text())
    assert settings["disableAllHooks"] is True and "UserPromptSubmit" in settings["hooks"]
    assert "disableAllHooks to true; left as it is" in done.stderr
    _cli("uninstall", "qwen-code", "--settings", str(path))
    assert path.read_text() == text
    # absent: the install adds it (hooks on at that scope), uninstall removes exactly it,
    # even after the user changed something else in the file meanwhile
    path.write_text('{"model": {"name": "q"}}')
    assert _cli("install", "qwen-code", "--settings", str(path), *state).returncode == 0
    settings = json.loads(path.read_text())
    assert settings["disableAllHooks"] is False
    settings["ui"] = {"theme": "dark"}
    path.write_text(json.dumps(settings))
    _cli("uninstall", "qwen-code", "--settings", str(path))
    assert json.loads(path.read_text()) == {"model": {"name": "q"}, "ui": {"theme": "dark"}}


def test_gemini_cli_adds_only_the_missing_hooks_config_key(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    text = '{"hooksConfig": {"notifications": false}}'
    path.write_text(text)
    state = ["--state-dir", str(tmp_path / "st")]
    assert _cli("install", "gemini-cli", "--settings", str(path), *state).returncode == 0
    assert json.loads(path.read_text())["hooksConfig"] == {"notifications": False, "enabled": True}
    _cli("uninstall", "gemini-cli", "--settings", str(path))
    assert path.read_text() == text


def _worker(state: Path, package_root: Path) -> subprocess.Popen[bytes]:
    """A real warm worker of ``state`` serving the package at ``package_root``."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "tool_failure_guard.hooks.worker", "--state-dir", str(state),
         "--idle-s", "120"],
        env=dict(os.environ, PYTHONPATH=str(package_root)),
        cwd=package_root,  # `-m` puts the working folder first on the import path
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not any(p.name.endswith(".sock") for p in state.iterdir()):
        assert time.monotonic() < deadline and worker.poll() is None, "no worker socket"
        time.sleep(0.1)
    return worker


def test_uninstall_stops_the_installs_worker_and_purge_removes_only_the_guards_files(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.json"
    state = tmp_path / "st"
    assert _cli("install", "claude-code", "--settings", str(path), "--state-dir", str(state))
    worker = _worker(state, ROOT)
    try:
        (state / "s1.json").write_text('{"version": 3, "state": {}}')
        done = _cli("uninstall", "claude-code", "--settings", str(path))
        assert f"the state folder {state} is kept (`--purge` removes it)" in done.stdout
        assert "stopped 1 warm worker(s)" in done.stdout
        worker.wait(timeout=30)  # it ends: its socket is gone (or it was retired)
    finally:
        worker.kill()
        worker.wait()
    assert (state / "s1.json").exists()
    _cli("install", "claude-code", "--settings", str(path), "--state-dir", str(state))
    (state / "notes.txt").write_text("mine")  # not the guard's: never removed
    done = _cli("uninstall", "claude-code", "--settings", str(path), "--purge")
    assert "left 1 other(s)" in done.stdout
    assert sorted(p.name for p in state.iterdir()) == ["notes.txt"]
    (state / "notes.txt").unlink()
    _cli("install", "claude-code", "--settings", str(path), "--state-dir", str(state))
    done = _cli("uninstall", "claude-code", "--settings", str(path), "--purge")
    assert f"removed the state folder {state}" in done.stdout and not state.exists()


def test_a_reinstall_after_the_user_changed_the_file_keeps_their_change_at_uninstall(
    tmp_path: Path,
) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"model": "x"}')
    _install(path, "warn", tmp_path / "st")
    settings = json.loads(path.read_text())
    settings["theme"] = "dark"  # the user's change between two installs
    path.write_text(json.dumps(settings))
    _install(path, "enforce", tmp_path / "st")
    assert installer.uninstall(path, "claude-code").restored  # unchanged since the reinstall
    assert json.loads(path.read_text()) == {"model": "x", "theme": "dark"}
