"""``hook status``: where the guard is installed, what it has seen, and what is wrong."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hook_homes import EXE, ROOT, home_env, hook, lean_executable, no_managed_install


@pytest.fixture(autouse=True)
def _managed_left_alone() -> object:
    with no_managed_install():
        yield


def test_nothing_installed_is_a_problem(tmp_path: Path) -> None:
    env = home_env(tmp_path)
    done = hook("status", "claude-code", env=env, cwd=tmp_path)
    assert done.returncode == 1
    assert "the guard is not installed for claude-code" in done.stdout


def test_a_user_scope_install_is_listed_with_its_state_and_recent_sessions(
    tmp_path: Path,
) -> None:
    env = home_env(tmp_path)
    installed = hook("install", "claude-code", "--scope", "user", env=env)
    assert installed.returncode == 0, installed.stderr
    assert "next: tool-failure-guard hook status claude-code" in installed.stdout
    state = tmp_path / "state" / "tool-failure-guard" / "hooks" / "claude-code"
    summary = {"events": 7, "last_event": "PostToolBatch", "last_decision": "would_warn",
               "mode": "shadow", "loops": 1, "updated": 1.0}  # fmt: skip
    (state / "sess-1.json").write_text(json.dumps({"version": 3, "state": {"summary": summary}}))
    (state / "sess-2.json").write_text("{damaged")
    done = hook("status", "claude-code", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    settings = tmp_path / "home" / ".claude" / "settings.json"
    assert f"installed at user: {settings}" in done.stdout
    assert "scope user, mode shadow" in done.stdout
    assert f"command: {EXE} hook claude-code --scope user --mode shadow" in done.stdout
    assert f"state folder: {state}" in done.stdout
    assert "7 events, last PostToolBatch, last decision would_warn, mode shadow" in done.stdout
    assert "sess-2" in done.stdout and "no summary" in done.stdout
    assert done.stdout.rstrip().endswith("all well")


def test_user_and_project_installs_in_different_modes_are_a_problem(tmp_path: Path) -> None:
    env = home_env(tmp_path)
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    hook("install", "claude-code", "--scope", "user", "--mode", "enforce", env=env)
    settings = project / ".claude" / "settings.json"
    done = hook("install", "claude-code", "--settings", str(settings), "--mode", "warn",
                env=env, cwd=project)  # fmt: skip
    assert done.returncode == 0
    # a second install warns that one already reaches the CLI
    assert "the guard is also installed for claude-code at user:" in done.stderr
    status = hook("status", "claude-code", env=env, cwd=project)
    assert status.returncode == 1
    assert "installs in different modes reach one CLI" in status.stdout
    assert f"project: {settings} in warn" in status.stdout


def test_a_moved_venv_is_a_problem(tmp_path: Path) -> None:
    env = home_env(tmp_path)
    venv = tmp_path / "clone" / ".venv" / "bin"
    venv.mkdir(parents=True)
    shutil.copy2(EXE, venv / "tool-failure-guard")
    done = hook(
        "install", "claude-code", "--scope", "user", env=env, exe=venv / "tool-failure-guard"
    )
    assert done.returncode == 0, done.stderr
    (tmp_path / "clone").rename(tmp_path / "moved-clone")
    status = hook("status", "claude-code", env=env, cwd=tmp_path)
    assert status.returncode == 1
    assert f"{venv / 'tool-failure-guard'} is missing or cannot run" in status.stdout
    # uninstall needs no working copy of the moved program: any venv of the guard removes it
    done = hook("uninstall", "claude-code", "--scope", "user", env=env)
    assert done.returncode == 0 and "removed" in done.stdout
    assert not (tmp_path / "home" / ".claude" / "settings.json").exists()


def test_telemetry_without_its_extra_is_refused_at_install_and_flagged_by_status(
    tmp_path: Path,
) -> None:
    env = home_env(tmp_path)
    lean = lean_executable(tmp_path)
    sink = f"file:{tmp_path / 't.jsonl'}"
    refused = hook("install", "claude-code", "--scope", "user", "--telemetry", sink,
                   env=env, exe=lean)  # fmt: skip
    assert refused.returncode == 2
    assert "--telemetry needs the 'telemetry' extra" in refused.stderr
    assert "pip install" in refused.stderr and "[telemetry]" in refused.stderr
    assert not (tmp_path / "home" / ".claude" / "settings.json").exists()
    # installed by an executable that has it, then run by one that lacks it (as after a
    # reinstall of the venv without the extra): status says so
    assert hook("install", "claude-code", "--scope", "user", "--telemetry", sink, env=env)
    settings = tmp_path / "home" / ".claude" / "settings.json"
    settings.write_text(settings.read_text().replace(str(EXE), str(lean)))
    status = hook("status", "claude-code", env=env, cwd=tmp_path)
    assert status.returncode == 1
    assert (
        "--telemetry is configured but" in status.stdout
        and "lacks the 'telemetry'" in status.stdout
    )


def test_a_stale_worker_is_a_problem(tmp_path: Path) -> None:
    from test_hooks_install import _worker

    env = home_env(tmp_path)
    assert hook("install", "claude-code", "--scope", "user", env=env).returncode == 0
    state = tmp_path / "state" / "tool-failure-guard" / "hooks" / "claude-code"
    # a worker still serving an older copy of the package (as after an upgrade)
    old = tmp_path / "old"
    shutil.copytree(ROOT / "tool_failure_guard", old / "tool_failure_guard",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    worker = _worker(state, old)
    try:
        status = hook("status", "claude-code", env=env, cwd=tmp_path)
    finally:
        worker.kill()
        worker.wait()
    assert status.returncode == 1, status.stdout
    assert f"worker pid {worker.pid}: running" in status.stdout
    assert f"a stale worker (pid {worker.pid}) serves {state}" in status.stdout
