"""``tool-failure-guard hook status [CLI]``: is the guard installed, running, and what has it seen.

For each CLI (or the one named): every install that reaches it
(:mod:`~tool_failure_guard.hooks.installs_found`) with its scope, mode and
command; each state folder, its warm workers (running, the version they serve,
current or stale) and its recent sessions, read from the summary the hook keeps
in each session's state (events seen, the last event, the last decision: what
shadow would have done); then the problems: an executable that is missing (a
moved or deleted venv), installs at two scopes in different modes, telemetry
configured where its extra is missing, a stale worker, a settings file that
cannot be read.  Exit 0 when all is well, 1 when a problem is listed (or the
guard is installed nowhere).

Everything is read defensively and bounded: a damaged state file is named, never
a crash, and only the newest :data:`MAX_SESSIONS_SHOWN` sessions are read.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import sys
from pathlib import Path
from typing import Any, Final, TextIO

import attrs

from tool_failure_guard.hooks.clis import HOOK_CLIS
from tool_failure_guard.hooks.config import config_where_text
from tool_failure_guard.hooks.installs_found import (
    FoundInstall,
    find_installs_and_problems,
    runnable,
)

#: The most recent sessions shown per state folder.
MAX_SESSIONS_SHOWN: Final = 5
#: The most session files looked at per state folder (the newest are shown).
MAX_SESSIONS_LOOKED_AT: Final = 2000
#: The most bytes of a state file read.
MAX_STATE_READ: Final = 1024 * 1024


@attrs.frozen
class Worker:
    pid: int | None
    version: str
    running: bool
    current: bool


def workers_of(directory: Path) -> list[Worker]:
    """The folder's warm workers (``hooks.workers.list_workers`` where it exists; else read
    from each ``worker-KEY.lock``: running while its lock is held, current when KEY is the
    running package's)."""
    from tool_failure_guard.hooks.install_flow import optional_module

    workers = optional_module("tool_failure_guard.hooks.workers")
    if workers is not None:
        return [
            Worker(w.pid, w.version, w.running, w.current)
            for w in workers.list_workers(str(directory))
        ]
    from tool_failure_guard.hooks.channel import install_key

    key = install_key()
    found = []
    for name in sorted(_names(directory)):
        if not (name.startswith("worker-") and name.endswith(".lock")):
            continue
        running, pid = _lock_held(directory / name)
        found.append(Worker(pid, "?", running, name == f"worker-{key}.lock"))
    return found


def _lock_held(path: Path) -> tuple[bool, int | None]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False, None
    try:
        text = os.read(fd, 64).decode("ascii", "replace").strip()
        pid = int(text) if text.isdigit() else None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True, pid
        return False, pid
    finally:
        os.close(fd)


def _names(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def recent_sessions(directory: Path) -> list[tuple[str, float, dict[str, Any] | None]]:
    """(session file, modified, summary or None) of the newest session files."""
    entries = []
    for name in _names(directory)[:MAX_SESSIONS_LOOKED_AT]:
        if not name.endswith(".json"):
            continue
        try:
            info = os.lstat(directory / name)
        except OSError:
            continue
        entries.append((info.st_mtime, name))
    entries.sort(reverse=True)
    return [
        (name[: -len(".json")], modified, _summary(directory / name))
        for modified, name in entries[:MAX_SESSIONS_SHOWN]
    ]


def _summary(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as stream:
            value = json.loads(stream.read(MAX_STATE_READ))
    except (OSError, ValueError, RecursionError):
        return None
    state = value.get("state") if isinstance(value, dict) else None
    summary = state.get("summary") if isinstance(state, dict) else None
    return summary if isinstance(summary, dict) else None


def _session_line(session: str, modified: float, summary: dict[str, Any] | None) -> str:
    when = datetime.datetime.fromtimestamp(modified, datetime.UTC)
    head = f"    {session[:64]}  ({when:%Y-%m-%d %H:%M} UTC)"
    if summary is None:
        return f"{head}: no summary (an older hook's state, or damaged)"

    def field(name: str) -> str:
        value = summary.get(name)
        return str(value)[:64] if isinstance(value, (str, int, float)) else "-"

    return (
        f"{head}: {field('events')} events, last {field('last_event')}, "
        f"last decision {field('last_decision')}, mode {field('mode')}, loops {field('loops')}"
    )


def problems_of(installs: list[FoundInstall]) -> list[str]:
    """What keeps the guard from working as installed."""
    problems = []
    for found in installs:
        if found.executable is None:
            problems.append(
                f"{found.where}: no tool-failure-guard executable found (the clone's .venv, "
                "the path `hook configure` recorded, PATH): the plugin does nothing"
            )
        elif not runnable(found.executable):
            problems.append(
                f"{found.where}: {found.executable} is missing or cannot run (a moved or "
                "deleted venv? an editable install is its clone): install again from where "
                "it is now"
            )
        elif found.telemetry is not None:
            from tool_failure_guard.hooks.install_flow import (
                missing_telemetry_extra,
                telemetry_install_line,
            )

            missing = missing_telemetry_extra(found.executable)
            if missing is not None:
                problems.append(
                    f"{found.where}: --telemetry is configured but {found.executable} lacks the "
                    f"'telemetry' extra ({missing}): every event fails open, the guard is off; "
                    f"{telemetry_install_line()}"
                )
    modes = {(found.scope, found.mode) for found in installs}
    if len({mode for _scope, mode in modes}) > 1:
        listed = ", ".join(f"{found.where} in {found.mode}" for found in installs)
        problems.append(f"installs in different modes reach one CLI: {listed}")
    return problems


def report(cli: str, out: TextIO, cwd: Path | None = None) -> tuple[bool, list[str]]:
    """Print ``cli``'s part; (installed anywhere, problems)."""
    installs, problems = find_installs_and_problems(cli, cwd)
    if not installs and not problems:
        return False, []
    print(f"{cli}:", file=out)
    for found in installs:
        print(f"  installed at {found.where}", file=out)
        print(f"    scope {found.scope}, mode {found.mode}", file=out)
        print(f"    command: {found.command}", file=out)
        if found.scope == "plugin":
            print(f"    executable: {found.executable or '(none found)'}", file=out)
            print(f"    mode from: {config_where_text()}", file=out)
    problems += problems_of(installs)
    for directory in dict.fromkeys(found.state_dir for found in installs):
        print(f"  state folder: {directory}", file=out)
        workers = workers_of(directory)
        for worker in workers:
            what = "running" if worker.running else "not running"
            age = "current" if worker.current else "stale: older code than is installed now"
            print(f"    worker pid {worker.pid}: {what}, version {worker.version}, {age}", file=out)
            if worker.running and not worker.current:
                problems.append(f"a stale worker (pid {worker.pid}) serves {directory}")
        if not any(worker.running for worker in workers):
            print("    no warm worker running (one starts at the next batch event)", file=out)
        sessions = recent_sessions(directory)
        if sessions:
            print("    recent sessions:", file=out)
        for session, modified, summary in sessions:
            print(_session_line(session, modified, summary), file=out)
    return bool(installs), problems


def status_main(cli: str | None, out: TextIO = sys.stdout, cwd: Path | None = None) -> int:
    """``hook status [CLI]``: 0 when all is well, 1 when a problem is listed."""
    installed, problems = False, []
    for name in [cli] if cli is not None else list(HOOK_CLIS):
        found, more = report(name, out, cwd)
        installed = installed or found
        problems += more
    if not installed:
        problems.append(
            f"the guard is not installed for {cli or 'any CLI'} "
            "(`tool-failure-guard hook install CLI --scope user`, or the Claude Code plugin)"
        )
    if problems:
        print("problems:", file=out)
        for problem in problems:
            print(f"  - {problem}", file=out)
        return 1
    print("all well", file=out)
    return 0
