"""Private homes for the hook's installer and ``hook status``, and the shared files they touch.

``hook install --scope user`` writes ``$HOME/.claude/settings.json`` and ``hook status``
reads it, so each test gives them a temporary ``HOME`` (and ``XDG_STATE_HOME``).  Two
files are not private to a test: the managed settings (``/etc/claude-code/...``) and the
operator's config (the home of the effective user from the password database, never
``$HOME``, so that no project can choose the guard's mode).  A test that writes or reads
them holds a lock shared by every worktree's tests and restores what was there.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tool_failure_guard.hooks.config import (
    CONFIG_NAME,
    EXECUTABLE_NAME_FILE,
    OWNER_ID_NAME,
    config_folder,
)

ROOT = Path(__file__).resolve().parent.parent
EXE = Path(sys.executable).parent / "tool-failure-guard"
#: Serialises the tests (of every worktree) that write the managed settings file.
MANAGED_LOCK = Path("/tmp/tool-failure-guard-claude-managed.lock")
#: Serialises the tests (of every worktree) that write the operator's config.
CONFIG_LOCK = Path("/tmp/tool-failure-guard-operator-config.lock")


def home_env(root: Path) -> dict[str, str]:
    """An environment whose HOME and XDG state are under ``root`` (this checkout's code)."""
    for name in ("home", "state"):
        (root / name).mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HOME=str(root / "home"), XDG_STATE_HOME=str(root / "state"))
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", str(ROOT))
    return env


def hook(
    *words: str, env: dict[str, str], cwd: Path | None = None, exe: Path = EXE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(exe), "hook", *words], capture_output=True, text=True, env=env, cwd=cwd, check=False
    )


@contextlib.contextmanager
def _locked(lock: Path, files: list[Path]) -> Iterator[None]:
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        saved = {path: path.read_bytes() if path.exists() else None for path in files}
        try:
            yield
        finally:
            for path, data in saved.items():
                if data is None:
                    path.unlink(missing_ok=True)
                else:
                    path.write_bytes(data)


@contextlib.contextmanager
def no_managed_install() -> Iterator[None]:
    """No other test writes the managed settings for the block (they are read as they are)."""
    with _locked(MANAGED_LOCK, []):
        yield


@contextlib.contextmanager
def operator_config() -> Iterator[Path]:
    """The operator's config folder for the block (what was there is restored after it)."""
    folder = config_folder()
    assert folder is not None
    files = [Path(folder) / name for name in (CONFIG_NAME, EXECUTABLE_NAME_FILE, OWNER_ID_NAME)]
    existed = Path(folder).exists()
    with _locked(CONFIG_LOCK, files):
        for path in files:
            path.unlink(missing_ok=True)
        try:
            yield Path(folder)
        finally:
            if not existed:
                shutil.rmtree(folder, ignore_errors=True)


def lean_executable(root: Path) -> Path:
    """A ``tool-failure-guard`` in a venv without the telemetry extra: this environment's
    packages linked in, all but OpenTelemetry's SDK and protobuf (and this checkout first)."""
    venv = root / "lean-venv"
    subprocess.run(
        [os.path.realpath(sys.executable), "-m", "venv", "--without-pip", str(venv)], check=True
    )
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    deps = root / "lean-deps"
    (deps / "opentelemetry").mkdir(parents=True)
    for entry in site.iterdir():
        skip = entry.name in ("opentelemetry", "google") or entry.suffix == ".pth"
        if not skip and not entry.name.startswith(("__editable__", "tool_failure_guard")):
            (deps / entry.name).symlink_to(entry)
    for entry in (site / "opentelemetry").iterdir():
        if entry.name not in ("sdk", "proto"):
            (deps / "opentelemetry" / entry.name).symlink_to(entry)
    (lib,) = (venv / "lib").iterdir()
    (lib / "site-packages" / "lean.pth").write_text(f"{ROOT}\n{deps}\n")
    exe = venv / "bin" / "tool-failure-guard"
    exe.write_text(
        f"#!{venv / 'bin' / 'python'}\nimport sys\n"
        "from tool_failure_guard.commands.cli import main\nsys.exit(main())\n"
    )
    exe.chmod(0o755)
    return exe
