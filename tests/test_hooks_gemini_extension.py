"""The guard as a Gemini CLI extension from this checkout (``gemini extensions install``).

``plugins/tool-failure-guard-gemini`` (``gemini-extension.json``, ``hooks/hooks.json``
with ``${extensionPath}``, timeouts in milliseconds) runs the same launcher as the
Claude Code plugin with ``gemini-cli``: the mode is the operator's (``hook configure
gemini-cli``).  A local install headless needs the source folder trusted
(``~/.gemini/trustedFolders.json``).  Gemini CLI 0.61.0 copies the extension and keeps
the launcher's link, made absolute (the clone must stay where it is).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_clis import gemini_script, require
from hook_clis import run_gemini
from hook_homes import EXE, ROOT, operator_config
from test_hooks_gemini_cli import STOP_SHOWN, _reads, _stop_warnings

EXTENSION = ROOT / "plugins" / "tool-failure-guard-gemini"


@pytest.fixture
def config() -> Iterator[Path]:
    require(gemini_script)
    with operator_config() as folder:
        yield folder


def _install_extension(script: Path, env: dict[str, str]) -> None:
    trusted = Path(env["HOME"]) / ".gemini" / "trustedFolders.json"
    folders = json.loads(trusted.read_text()) if trusted.exists() else {}
    trusted.write_text(json.dumps({**folders, str(EXTENSION): "TRUST_FOLDER"}))
    done = subprocess.run(
        ["node", str(script), "extensions", "install", str(EXTENSION), "--consent"],
        env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert "installed successfully" in done.stdout + done.stderr, done.stdout + done.stderr


@pytest.mark.parametrize(("mode", "requests"), [(None, 7), ("enforce", 3)])
def test_the_extension_runs_the_guard_in_the_operators_mode(
    tmp_path: Path, config: Path, mode: str | None, requests: int
) -> None:
    words = ["--mode", mode] if mode else []
    subprocess.run([str(EXE), "hook", "configure", "gemini-cli", *words], check=True,
                   capture_output=True)  # fmt: skip
    run = run_gemini([_reads(b) for b in range(6)], base=tmp_path, setup=_install_extension)
    # shadow (nothing configured): every scripted batch and the answer; enforce: batch 2
    # reaches 8 failures across 2 batches, batch 3 matches again: no request 4
    assert len(run.requests) == requests, run.stderr[-2000:]
    stops = [f"Agent execution blocked: {STOP_SHOWN}"] if mode == "enforce" else []
    assert _stop_warnings(run) == stops
    state = run.root / "xdg-state" / "tool-failure-guard" / "hooks" / "gemini-cli"
    assert any(p.suffix == ".json" for p in state.iterdir())  # it observed
