"""What the guard's command hook costs per hook call, beside two no-op hooks, in one run.

A coding CLI starts one process per hook event, so the hook's cost is its
start-up plus the event's work.  The three commands are run interleaved (each
round runs all three, in a rotating order, so drift in the machine's load
hits all alike), each fed the same ``PostToolBatch`` payload on stdin:

- ``true``: a no-op command hook (the floor: starting a process);
- a no-op Python hook: the same interpreter running a script that reads stdin
  and exits (what any Python hook pays);
- the guard, ``tool-failure-guard hook claude-code --mode enforce``, for its two
  kinds of event: a per-call ``PostToolUseFailure`` (recorded as it came: no core
  loaded) and a per-batch ``PostToolBatch`` against a session whose prompt
  already holds :data:`STORED_BATCHES` settled batches (replayed through the
  core, then the new batch reduced).  A batch of N failing calls costs N of the
  first and one of the second.  The batch event is measured warm (the state
  folder's worker already running: the hook's client hands it the event) and
  cold (no worker: handled in the hook's own process, which then starts one;
  the bench stops it again, untimed, before every cold call).

Printed: per command the median wall time per call and the spread (10th-90th
percentile), and the ratio of each guard median to the no-op Python hook's
(issue 31's goal: at most 1.5).  ``python -m benches.hooks [--rounds N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

#: Settled batches the measured session already holds (a prompt some way into its loop).
STORED_BATCHES = 6
GOAL = 1.5


def _payload(event: str, number: int, **more: object) -> bytes:
    body = {"hook_event_name": event, "session_id": "bench", "prompt_id": "p", **more}
    del number
    return json.dumps(body).encode()


def _batch(number: int) -> bytes:
    calls = [
        {"tool_use_id": f"toolu_{number}_{i}", "tool_name": "Read", "tool_response": "text"}
        for i in range(3)
    ]
    return _payload("PostToolBatch", number, tool_calls=calls)


def _lock(folder: Path) -> Path:
    from tool_failure_guard.hooks import channel

    return folder / channel.lock_name(channel.install_key())


def _wait_for_worker(folder: Path) -> None:
    """Until the worker the hooks started listens (its socket is there)."""
    from tool_failure_guard.hooks import channel

    socket_path = folder / channel.socket_name(channel.install_key())
    deadline = time.monotonic() + 60
    while not socket_path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"no worker started in {folder}")
        time.sleep(0.02)


def _stop_worker(folder: Path) -> None:
    """Kill the folder's worker (its pid is in its lock file's record) and wait until it is gone."""
    import fcntl

    path = _lock(folder)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # a just-started worker writes its pid first
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return  # nobody holds the lock: no worker lives
            except BlockingIOError:
                pass
            with contextlib.suppress(ValueError, ProcessLookupError):  # its record: JSON
                pid = json.loads(os.pread(fd, 4096, 0))["pid"]
                os.kill(int(pid), signal.SIGKILL)
        finally:
            os.close(fd)
        time.sleep(0.005)
    raise SystemExit(f"the worker of {folder} did not stop")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benches.hooks", description=__doc__)
    parser.add_argument("--rounds", type=int, default=40, help="rounds of all commands (40)")
    args = parser.parse_args(argv)
    exe = Path(sys.executable).parent / "tool-failure-guard"
    with tempfile.TemporaryDirectory(prefix="bench-hooks-") as temp:
        root = Path(temp)
        noop = root / "noop_hook.py"
        noop.write_text("import sys\nsys.stdin.buffer.read()\n")
        guard = [str(exe), "hook", "claude-code", "--mode", "enforce", "--state-dir"]
        try:
            times = _measure(args.rounds, root, noop, guard)
        finally:  # no worker outlives the bench
            for folder in (root / "warm", root / "cold"):
                _stop_worker(folder)
    _print(args.rounds, times)
    return 0


def _measure(rounds: int, root: Path, noop: Path, guard: list[str]) -> dict[str, list[float]]:
    """Every command's wall times per call, ``rounds`` interleaved rounds."""
    warm = [*guard, str(root / "warm")]
    cold = [*guard, str(root / "cold")]
    for command in (warm, cold):
        for number in range(STORED_BATCHES):  # the session's prompt so far
            subprocess.run(command, input=_batch(number), check=True, capture_output=True)
    _stop_worker(root / "cold")
    _wait_for_worker(root / "warm")

    def failure(number: int) -> bytes:
        return _payload(
            "PostToolUseFailure",
            number,
            tool_use_id=f"toolu_x{number}",
            tool_name="Read",
            error="File does not exist.",
            is_interrupt=False,
        )

    # each call its own event (its own tool_use_ids): an event seen before is answered from
    # the state's memory without being applied (hooks.event_keys), which would measure less;
    # a batch of successes: the streak stays where it is
    commands: dict[str, tuple[list[str], Callable[[int], bytes]]] = {
        "true (no-op command)": (["true"], _batch),
        "no-op Python hook": ([sys.executable, str(noop)], _batch),
        "guard, PostToolUseFailure": (warm, failure),
        "guard, PostToolBatch": (warm, _batch),
        "guard, PostToolBatch cold": (cold, _batch),
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    env = dict(os.environ)
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            command, make = commands[name]
            payload = make(10_000 + round_)
            started = time.perf_counter()
            subprocess.run(command, input=payload, capture_output=True, env=env)
            times[name].append(time.perf_counter() - started)
            if command is cold:
                _stop_worker(root / "cold")  # untimed: the next cold call finds none
    return times


def _print(rounds: int, times: dict[str, list[float]]) -> None:
    print(
        f"hook wall time per call, {rounds} interleaved rounds ({STORED_BATCHES} stored "
        "batches in the guard's session; PostToolBatch warm: the worker runs; cold: none)"
    )
    for name, values in times.items():
        print(
            f"  {name:26s} median {statistics.median(values) * 1000:7.1f} ms   "
            f"p10-p90 {_percentile(values, 0.1) * 1000:6.1f}-"
            f"{_percentile(values, 0.9) * 1000:6.1f} ms"
        )
    floor = statistics.median(times["no-op Python hook"])
    for name in ("guard, PostToolUseFailure", "guard, PostToolBatch", "guard, PostToolBatch cold"):
        ratio = statistics.median(times[name]) / floor
        print(f"  ratio {name} / no-op Python (medians): {ratio:.2f} (goal <= {GOAL})")


if __name__ == "__main__":
    raise SystemExit(main())
