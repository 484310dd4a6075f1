"""Finding and stopping the hook's warm workers a test started (none outlives a test).

A worker's lock file (``worker-KEY.lock`` in its state folder) marks a folder that had
workers; their pids are read from ``/proc`` (every one, lock or not), and a pid is killed
only when its command line is a worker's for that very folder (a pid can be reused).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

_MARK = "tool_failure_guard.hooks.worker"


def worker_pids(directory: Path) -> list[int]:
    """The live workers serving ``directory`` (read from /proc: every one, lock or not)."""
    found = []
    wanted = str(directory)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(_MARK in word for word in words) and wanted in words:
            found.append(int(entry.name))
    return sorted(found)


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return True
    return status == "Z"


def stop_workers(root: Path) -> int:
    """Kill every worker of a state folder under ``root`` (by pid); how many were killed."""
    folders = {lock.parent for lock in root.rglob("worker-*.lock")}
    killed = 0
    for folder in folders:
        for pid in worker_pids(folder):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed += 1
            deadline = time.monotonic() + 10
            while not _gone(pid) and time.monotonic() < deadline:
                time.sleep(0.01)
    return killed


def comparable_state(path: Path) -> dict[str, Any]:
    """A session state file's body without what differs by design between a worker's
    and an in-process hook's handling of the same events: request ids, times, the order
    of applied events, and which install's command line registered (the modes stay; the
    applied events' keys, the loops and their records stay)."""
    body = json.loads(path.read_text())["state"]
    # which events were applied, each once (their order follows the processes' timing)
    body["events"] = sorted(key for key, _request, _answer in body.get("events", []) if key)
    body["installs"] = sorted({entry[1] for entry in body.get("installs", {}).values()})
    body.get("summary", {}).pop("updated", None)
    loops = body.get("loops", {})
    loops.pop("started", None)
    for loop in loops.get("loops", {}).values():
        loop["pending_at"] = sorted(loop.get("pending_at", {}))
    return body  # type: ignore[no-any-return]
