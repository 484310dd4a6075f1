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
  first and one of the second.

Printed: per command the median wall time per call and the spread (10th-90th
percentile), and the ratio of each guard median to the no-op Python hook's
(issue 31's goal: at most 1.5).  ``python -m benches.hooks [--rounds N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
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


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benches.hooks", description=__doc__)
    parser.add_argument("--rounds", type=int, default=40, help="rounds of all three (40)")
    args = parser.parse_args(argv)
    exe = Path(sys.executable).parent / "tool-failure-guard"
    with tempfile.TemporaryDirectory(prefix="bench-hooks-") as temp:
        root = Path(temp)
        noop = root / "noop_hook.py"
        noop.write_text("import sys\nsys.stdin.buffer.read()\n")
        guard = [str(exe), "hook", "claude-code", "--mode", "enforce", "--state-dir", str(root)]
        for number in range(STORED_BATCHES):  # the session's prompt so far
            subprocess.run(guard, input=_batch(number), check=True, capture_output=True)
        failure = _payload(
            "PostToolUseFailure",
            0,
            tool_use_id="toolu_x",
            tool_name="Read",
            error="File does not exist.",
            is_interrupt=False,
        )
        batch = _batch(10_000)  # a batch of successes: the state does not grow between calls
        commands = {
            "true (no-op command)": (["true"], batch),
            "no-op Python hook": ([sys.executable, str(noop)], batch),
            "guard, PostToolUseFailure": (guard, failure),
            "guard, PostToolBatch": (guard, batch),
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        names = list(commands)
        env = dict(os.environ)
        for round_ in range(args.rounds):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                command, payload = commands[name]
                started = time.perf_counter()
                subprocess.run(command, input=payload, capture_output=True, env=env)
                times[name].append(time.perf_counter() - started)
    print(
        f"hook wall time per call, {args.rounds} interleaved rounds ({STORED_BATCHES} stored "
        "batches in the guard's session)"
    )
    for name, values in times.items():
        print(
            f"  {name:26s} median {statistics.median(values) * 1000:7.1f} ms   "
            f"p10-p90 {_percentile(values, 0.1) * 1000:6.1f}-"
            f"{_percentile(values, 0.9) * 1000:6.1f} ms"
        )
    floor = statistics.median(times["no-op Python hook"])
    for name in ("guard, PostToolUseFailure", "guard, PostToolBatch"):
        ratio = statistics.median(times[name]) / floor
        print(f"  ratio {name} / no-op Python (medians): {ratio:.2f} (goal <= {GOAL})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
