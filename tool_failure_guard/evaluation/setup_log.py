"""Set-up's bookkeeping: each step's measured time (kept when interrupted), and a logged build.

Standard library only, like :mod:`~tool_failure_guard.evaluation.setup_model`.

- :func:`timed`: runs one step and appends an attempt (minutes, outcome, load
  average) to the cache's ``setup-times.json`` whether the step finished, failed
  or was interrupted; a later attempt after an unfinished one adds to it, one
  after a finished one starts afresh.  :func:`read_times` says it in words.
- :func:`run_logged`: runs a build command with all its output (thousands of
  compiler warning lines) into a log file, printing only its progress (cmake's
  ``[ NN%]`` or Ninja's ``[n/m]``) in steps, and the log's last lines when it fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

TIMES_FILE = "setup-times.json"
#: A step that found everything cached returns within this; its time is not recorded.
NOTHING_DONE_S = 1.0
PROGRESS_STEP = 10  # percent
TAIL_LINES = 30
_PERCENT = re.compile(r"^\[\s*(\d+)%\]")
_NINJA = re.compile(r"^\[(\d+)/(\d+)\]")

T = TypeVar("T")


def _load() -> float | None:
    with contextlib.suppress(OSError):
        return round(os.getloadavg()[0], 1)
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record_attempt(root: Path, step: str, attempt: dict[str, Any]) -> None:
    path = root / TIMES_FILE
    times = _read(path)
    entry = times.get(step)
    attempts = entry.get("attempts", []) if isinstance(entry, dict) else []
    if attempts and attempts[-1].get("outcome") == "done":
        attempts = []  # the step is being done again from scratch
    times[step] = {"attempts": [*attempts, attempt], "nproc": os.cpu_count()}
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    partial.replace(path)


def _unfinished(root: Path, step: str) -> bool:
    entry = _read(root / TIMES_FILE).get(step)
    attempts = entry.get("attempts", []) if isinstance(entry, dict) else []
    return bool(attempts) and attempts[-1].get("outcome") != "done"


def timed(root: Path, step: str, action: Callable[[], T]) -> T:
    """Run one step; record its time if it did work, also when it fails or is interrupted.

    A step that finds its work done (under :data:`NOTHING_DONE_S`) is recorded only
    when it finishes an unfinished attempt.
    """
    started = time.monotonic()
    load = _load()
    outcome = "interrupted"
    try:
        result = action()
        outcome = "done"
        return result
    except Exception:
        outcome = "failed"
        raise
    finally:  # KeyboardInterrupt and SystemExit (SIGTERM) leave "interrupted"
        spent = time.monotonic() - started
        if spent > NOTHING_DONE_S or outcome != "done" or _unfinished(root, step):
            record_attempt(
                root,
                step,
                {
                    "minutes": round(spent / 60, 2),
                    "outcome": outcome,
                    "load_average": [load, _load()],
                },
            )


def describe(entry: Any) -> str:
    """One step's recorded time in words (an older file's plain string as it is)."""
    if not isinstance(entry, dict):
        return str(entry)
    attempts = [a for a in entry.get("attempts", []) if isinstance(a, dict)]
    if not attempts:
        return "not recorded"
    total = sum(float(a.get("minutes", 0)) for a in attempts)
    loads = [x for a in attempts for x in a.get("load_average", []) if isinstance(x, int | float)]
    load = f"; load average {min(loads):g}-{max(loads):g}" if loads else ""
    last = attempts[-1].get("outcome", "?")
    state = "" if last == "done" else f", not finished ({last})"
    if len(attempts) == 1:
        return f"{total:.1f} min{state} (nproc {entry.get('nproc', '?')}{load})"
    parts = ", ".join(f"{float(a.get('minutes', 0)):.1f} {a.get('outcome', '?')}" for a in attempts)
    return (
        f"{total:.1f} min over {len(attempts)} attempts ({parts}){state} "
        f"(nproc {entry.get('nproc', '?')}{load})"
    )


def read_times(root: Path) -> dict[str, str]:
    return {str(step): describe(entry) for step, entry in _read(root / TIMES_FILE).items()}


def progress_of(line: str) -> int | None:
    """The build's percentage a line of cmake's or Ninja's output announces, if any."""
    match = _PERCENT.match(line)
    if match:
        return int(match.group(1))
    match = _NINJA.match(line)
    if match and int(match.group(2)):
        return 100 * int(match.group(1)) // int(match.group(2))
    return None


def run_logged(
    command: Sequence[str], log_path: Path, log: Callable[[str], None], label: str
) -> tuple[int, list[str], int]:
    """Run ``command`` with its output into ``log_path``; (exit status, last lines, warnings).

    Only the progress reaches ``log``: every :data:`PROGRESS_STEP` percent.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    warnings = 0
    shown = -PROGRESS_STEP
    started = time.monotonic()
    with log_path.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        process = subprocess.Popen(
            list(command),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        try:
            assert process.stdout is not None
            for line in process.stdout:
                out.write(line)
                tail.append(line.rstrip("\n"))
                warnings += "warning:" in line
                percent = progress_of(line)
                if percent is not None and percent >= shown + PROGRESS_STEP:
                    shown = percent - percent % PROGRESS_STEP
                    minutes = (time.monotonic() - started) / 60
                    log(f"{label}: {percent}% ({minutes:.1f} min)")
            status = process.wait()
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait()
    return status, list(tail), warnings
