"""``hook install`` and ``hook uninstall``: the settings file of a scope, what to say, what to stop.

:mod:`~tool_failure_guard.hooks.install` merges and removes entries; this module
is the command around it: which file a scope names (``~`` the installing user's
home), the command line written (``--scope`` the install's rank: the scope's name,
``settings`` for ``--settings FILE``), what is refused before anything is written
(telemetry whose extra the installed executable lacks: status would flag it),
the other installs already reaching the CLI (a warning), and the next step.
Uninstall stops the install's warm worker and says where its state folder is
(``--purge`` removes the guard's own files there).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import stat
import sys
from pathlib import Path
from typing import Any, TextIO

from tool_failure_guard.hooks import install as installer

#: The file that marks a folder as the guard's state folder (``hooks.state_folder``).
STATE_FOLDER_MARKER = ".tool-failure-guard-state"


def cli_module(cli: str) -> Any:
    from tool_failure_guard.hooks.clis import HOOK_CLIS

    return importlib.import_module(HOOK_CLIS[cli])


def scope_path(cli: str, scope: str) -> Path:
    """The settings file a scope names, ``~`` expanded for the installing user."""
    return Path(os.path.expanduser(cli_module(cli).SCOPES[scope]))


def install_main(
    cli: str,
    *,
    mode: str,
    scope: str | None,
    settings: Path | None,
    state_dir: Path | None,
    telemetry: str | None,
    environment: str | None,
    timeout: int,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    module = cli_module(cli)
    path = settings if settings is not None else scope_path(cli, str(scope))
    if state_dir is None and scope not in ("managed", "system"):  # operator scopes: hook time
        from tool_failure_guard.hooks.state import default_state_dir

        state_dir = default_state_dir(cli)
    executable = installer.running_executable()
    if telemetry is not None:
        missing = missing_telemetry_extra(executable)
        if missing is not None:
            print(
                f"tool-failure-guard hook install: --telemetry needs the 'telemetry' extra, "
                f"which {executable} lacks ({missing}); install it first: "
                f"{telemetry_install_line()}",
                file=err,
            )
            return 2
    if environment is not None and telemetry is None:
        print("tool-failure-guard hook install: --environment needs --telemetry", file=err)
        return 2
    command = installer.hook_command(
        cli,
        mode=mode,
        executable=executable,
        scope=scope if scope is not None else "settings",
        state_dir=state_dir.absolute() if state_dir is not None else None,
        telemetry=telemetry,
        environment=environment,
    )
    entries = getattr(module, "settings_entries", None)
    skipped = () if telemetry else getattr(module, "TELEMETRY_EVENTS", ())
    if entries is not None:
        made = {e: g for e, g in entries(command, timeout).items() if e not in skipped}
    else:
        events = [event for event in module.EVENTS if event not in skipped]
        made = installer.claude_style_entries(command, events, module.TOOL_EVENTS, timeout)
    others = _other_installs(cli, path)
    done = installer.install(path, made, cli, pin=getattr(module, "PINNED_SETTINGS", None))
    where = f"{path}" if done.target == path.absolute() else f"{path} (-> {done.target})"
    print(f"installed: {cli} hook ({mode}) in {where}", file=out)
    for warning in done.warnings:
        print(f"warning: {warning}", file=err)
    for other in others:
        print(
            f"warning: the guard is also installed for {cli} at {other}; every install runs "
            "on each event (see `tool-failure-guard hook status`)",
            file=err,
        )
    print(f"next: tool-failure-guard hook status {cli}", file=out)
    return 0


def _other_installs(cli: str, path: Path) -> list[str]:
    """Where else the guard reaches ``cli`` (each as status names it), ``path`` left out."""
    from tool_failure_guard.hooks.installs_found import find_installs
    from tool_failure_guard.hooks.settings_file import target_of

    target = target_of(path)
    return [i.where for i in find_installs(cli) if i.path is None or i.path != target]


def uninstall_main(
    cli: str,
    *,
    scope: str | None,
    settings: Path | None,
    purge: bool,
    out: TextIO = sys.stdout,
) -> int:
    path = settings if settings is not None else scope_path(cli, str(scope))
    done = installer.uninstall(path, cli)
    if not done.changed:
        print(f"nothing to remove: {cli} hook in {path}", file=out)
        return 0
    how = " (the file as it was before the install)" if done.restored else ""
    print(f"removed: {cli} hook in {path}{how}", file=out)
    for directory in done.state_dirs():
        stopped = retire_workers(directory)
        if stopped:
            print(f"stopped {stopped} warm worker(s) of {directory}", file=out)
        if purge:
            left = purge_state_dir(directory)
            state = (
                f"removed the state folder {directory}"
                if not left
                else (f"removed the guard's files from {directory}; left {len(left)} other(s)")
            )
            print(state, file=out)
        elif directory.exists():
            print(f"the state folder {directory} is kept (`--purge` removes it)", file=out)
    return 0


def retire_workers(directory: Path) -> int:
    """End the warm workers of ``directory`` (``hooks.workers.retire_workers``; without that
    module: their sockets are removed, and a worker whose socket is gone exits at its next
    check)."""
    workers = optional_module("tool_failure_guard.hooks.workers")
    if workers is not None:
        return int(workers.retire_workers(str(directory)))
    count = 0
    for entry in _entries(directory):
        if entry.name.startswith("worker-") and entry.name.endswith(".sock"):
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISSOCK(info.st_mode) and info.st_uid == os.geteuid():
                os.unlink(entry.path)
                count += 1
    return count


def optional_module(name: str) -> Any:
    """The module ``name``, or None where this tree has none (a part another branch adds)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as found:
            return list(found)
    except OSError:
        return []


def purge_state_dir(directory: Path) -> list[str]:
    """Remove the guard's own files from ``directory`` (and it, when then empty); the names
    of what was left (files the guard does not recognise as its own are never removed)."""
    import json

    left = []
    for entry in _entries(directory):
        name = entry.name
        info = entry.stat(follow_symlinks=False)
        ours = info.st_uid == os.geteuid() and (
            name == STATE_FOLDER_MARKER
            or (name.startswith("worker-") and name.endswith((".sock", ".lock")))
            or (name.startswith("install-") and name.endswith(".record"))
            or (name.startswith(".") and name.endswith(".tmp") and ".json." in name)
        )
        if not ours and name.endswith(".json") and stat.S_ISREG(info.st_mode):
            try:
                with open(entry.path, "rb") as stream:
                    value = json.loads(stream.read(2 * 1024 * 1024))
                ours = isinstance(value, dict) and set(value) == {"version", "state"}
            except (OSError, ValueError, RecursionError):
                ours = False
        if ours:
            os.unlink(entry.path)
        else:
            left.append(name)
    if not left:
        with contextlib.suppress(OSError):
            os.rmdir(directory)
    return left


def missing_telemetry_extra(executable: str) -> str | None:
    """What the interpreter running ``executable`` lacks of the telemetry extra (None: it has
    it): that interpreter is asked, since it may not be this one."""
    import subprocess

    python = _interpreter_of(executable)
    modules = ("opentelemetry.sdk", "google.protobuf", "opentelemetry.proto")
    probe = (
        "import importlib.util,sys\n"
        f"m=[n for n in {modules!r} if importlib.util.find_spec(n) is None]\n"
        "print(' '.join(m))"
    )
    try:
        done = subprocess.run(
            [python, "-I", "-c", probe], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"cannot run {python}: {error}"
    if done.returncode != 0:
        return f"{python} exited {done.returncode}"
    missing = done.stdout.strip()
    return f"no module {missing.split()[0]!r}" if missing else None


def _interpreter_of(executable: str) -> str:
    """The Python a console script runs (its ``#!`` line), else this one."""
    try:
        with open(executable, "rb") as stream:
            first = stream.readline(4096)
    except OSError:
        return sys.executable
    if first.startswith(b"#!"):
        words = first[2:].decode("utf-8", "replace").split()
        if words and os.path.isabs(words[0]) and "python" in os.path.basename(words[0]):
            return words[0]
    return sys.executable


def telemetry_install_line() -> str:
    from tool_failure_guard._extras import install_hint

    return install_hint("telemetry")
