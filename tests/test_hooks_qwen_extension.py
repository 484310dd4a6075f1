"""The guard as a Qwen Code extension from this checkout (``qwen extensions install``).

``plugins/tool-failure-guard-qwen`` (``qwen-extension.json`` and ``hooks/hooks.json``)
runs the same launcher as the Claude Code plugin with ``qwen-code``: the mode is the
operator's (``hook configure qwen-code``), the executable the one it recorded.  Qwen
Code 0.24.4 copies the extension (the launcher's link followed) into
``~/.qwen/extensions``; its hooks fire in ``qwen -p``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hook_clis import run_qwen
from hook_homes import EXE, ROOT, hook, operator_config
from qwen_original import require_qwen
from test_hooks_qwen_code import _reads, _result, reminders

EXTENSION = ROOT / "plugins" / "tool-failure-guard-qwen"


@pytest.fixture(autouse=True)
def _qwen() -> None:
    require_qwen()


@pytest.fixture
def config() -> Iterator[Path]:
    with operator_config() as folder:
        yield folder


def _install_extension(cli: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        ["node", str(cli), "extensions", "install", str(EXTENSION), "--consent"],
        env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "installed successfully" in done.stdout + done.stderr


def _configure(*mode: str) -> None:
    subprocess.run([str(EXE), "hook", "configure", "qwen-code", *mode], check=True,
                   capture_output=True)  # fmt: skip


@pytest.mark.parametrize(("mode", "expected"), [(None, [0] * 7), ("enforce", [0, 0, 1])])
def test_the_extension_runs_the_guard_in_the_operators_mode(
    tmp_path: Path, config: Path, mode: str | None, expected: list[int]
) -> None:
    _configure(*(["--mode", mode] if mode else []))
    run = run_qwen(
        lambda ws: [_reads(ws, b) for b in range(6)], base=tmp_path, setup=_install_extension
    )
    # shadow (nothing configured): every scripted batch, then the answer, no reminder;
    # enforce: the reminder in request 3, the stop after the next matching batch
    assert reminders(run) == expected, run.stderr[-2000:]
    assert run.returncode == 0
    if mode == "enforce":
        assert _result(run)["result"] == ""
    state = run.root / "xdg-state" / "tool-failure-guard" / "hooks" / "qwen-code"
    assert any(p.suffix == ".json" for p in state.iterdir())  # it observed
    env = dict(os.environ, HOME=str(run.root / "home"), XDG_STATE_HOME=str(state.parents[2]))
    status = hook("status", "qwen-code", env=env, cwd=tmp_path)
    extension = run.root / "home" / ".qwen" / "extensions" / "tool-failure-guard"
    assert f"installed at extension: {extension}" in status.stdout, status.stdout
    assert f"scope plugin, mode {mode or 'shadow'}" in status.stdout
    assert "recent sessions:" in status.stdout
