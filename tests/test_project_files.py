"""Files a project controls (env files, settings.json): only regular, bounded, off the loop.

The end-to-end tests run real agent processes over stdio: a project whose
``.env`` is a named pipe once froze the whole agent (``open`` waits for a
writer), and one symlinked to ``/dev/zero`` was read without end.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from acp import text_block
from e2e_helpers import run

from tool_failure_guard.guard import GUARD_MODE_ENV_VAR, GuardMode
from tool_failure_guard.session.config.envconfig import load_env
from tool_failure_guard.session.config.project_files import (
    MAX_SETTINGS_FILE_BYTES,
    NOT_A_REGULAR_FILE,
    TOO_LARGE,
    SettingsFileRefused,
    read_settings_file,
)
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    project, home = tmp_path / "project", tmp_path / "home"
    (project / ".qwen").mkdir(parents=True)
    (home / ".qwen").mkdir(parents=True)
    return project, home


def test_a_named_pipe_or_a_device_is_refused_naming_the_file(dirs: tuple[Path, Path]) -> None:
    project, home = dirs
    os.mkfifo(project / ".env")
    (project / ".qwen" / ".env").symlink_to("/dev/zero")
    (project / ".qwen" / "settings.json").mkdir()
    config = load_env(project, home=home, environ={})
    unread = {refusal.path.relative_to(project): refusal for refusal in config.unread}
    assert set(unread) == {Path(".env"), Path(".qwen/.env"), Path(".qwen/settings.json")}
    assert {refusal.reason for refusal in unread.values()} == {NOT_A_REGULAR_FILE}
    assert "named pipe" in str(unread[Path(".env")])
    assert "character device" in str(unread[Path(".qwen/.env")])
    assert str(project / ".env") in str(unread[Path(".env")])


def test_a_huge_file_is_refused_and_a_small_one_still_read(dirs: tuple[Path, Path]) -> None:
    project, home = dirs
    (project / ".env").write_text("A=1\n" + "#" * MAX_SETTINGS_FILE_BYTES)
    (project / ".qwen" / ".env").write_text("B=2\n")
    with pytest.raises(SettingsFileRefused) as refused:
        read_settings_file(project / ".env")
    assert refused.value.reason == TOO_LARGE
    config = load_env(project, home=home, environ={})
    assert config.get("A") is None and config.get("B") == "2"
    assert [r.reason for r in config.unread] == [TOO_LARGE]


def test_a_settings_file_nested_too_deeply_or_not_utf8_is_ignored(
    dirs: tuple[Path, Path],
) -> None:
    project, home = dirs
    (project / ".qwen" / "settings.json").write_text("[" * 100_000)
    (home / ".qwen" / "settings.json").write_bytes(b'{"env": {"A": "\xff"}}')
    (project / ".env").write_text(f"{GUARD_MODE_ENV_VAR}=enforce\nC=3\n")
    config = load_env(project, home=home, environ={})
    assert config.get("C") == "3" and config.guard_mode() is GuardMode.SHADOW


def test_a_long_blank_run_inside_a_value_parses_in_linear_time() -> None:
    # The old line pattern backtracked quadratically on it (hours for 1 MiB).
    # A child process: a backtracking match holds the GIL, so no thread could time it out.
    script = (
        "from tool_failure_guard.session.config.envconfig import parse_env_file\n"
        "v = parse_env_file('A=x' + ' ' * 1_000_000 + 'y', 'big.env')['A']\n"
        "print(len(v), v[0], v[-1])\n"
    )
    done = subprocess.run(  # the bound is on a hang, not a timing assertion
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["1000002", "x", "y"]


def test_an_agent_keeps_serving_when_a_projects_env_file_is_a_pipe_or_dev_zero(
    tmp_path: Path,
) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    home.mkdir()
    piped, zeroed, plain = (tmp_path / name for name in ("piped", "zeroed", "plain"))
    for folder in (piped, zeroed, plain):
        (folder / ".qwen").mkdir(parents=True)
    os.mkfifo(piped / ".env")
    (zeroed / ".env").symlink_to("/dev/zero")
    os.mkfifo(zeroed / ".qwen" / "settings.json")
    (plain / ".env").write_text("X=1\n")

    async def go() -> list[str]:
        async with spawn_guarded_agent(
            RecordingClient(), mode="enforce", state_dir=state, home=home
        ) as conn:
            stops = []
            for folder in (piped, zeroed, plain):
                created = await asyncio.wait_for(
                    conn.new_session(cwd=str(folder), mcp_servers=[]), 20
                )
                response = await conn.prompt(
                    session_id=created.session_id, prompt=[text_block("go")]
                )
                stops.append(response.field_meta["loopType"])
            return stops

    # The mode comes from the process environment; every session opens and runs.
    assert run(go(), timeout=120) == ["repeated_tool_execution_failure"] * 3


def test_settings_env_values_keep_their_text(dirs: tuple[Path, Path]) -> None:
    project, home = dirs
    (project / ".qwen" / "settings.json").write_text(json.dumps({"env": {"N": 5, "S": "s"}}))
    config = load_env(project, home=home, environ={})
    assert config.get("N") == "5" and config.get("S") == "s"
