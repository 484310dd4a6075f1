"""Start-up figures of ``make bench``: importing the library, the agent answering initialize.

Each is the CPU time (user + system, from ``wait4``) of fresh processes, the
compared commands interleaved round by round so that load on a shared machine
falls on both; the median and the interquartile range are printed, and the
ratio of the medians.  Bytecode is cached for both (one warm-up run each, in a
private ``PYTHONPYCACHEPREFIX``), as an installed package has it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}


def _environment(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def _cpu_seconds(argv: Sequence[str], env: dict[str, str], stdin: bytes | None = None) -> float:
    """CPU seconds of one process; with ``stdin``, it must answer one line first."""
    process = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if stdin is not None:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(stdin)
        process.stdin.flush()
        answer = process.stdout.readline()
        if b'"result"' not in answer:
            process.kill()
            raise RuntimeError(f"{argv}: no initialize answer: {answer[:200]!r}")
        process.stdin.close()
        process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def interleaved(
    commands: dict[str, tuple[list[str], bytes | None]], rounds: int
) -> dict[str, list[float]]:
    """CPU seconds of each command, ``rounds`` times, the commands alternating per round."""
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as state:
        env = _environment(cache)
        env["TOOL_FAILURE_GUARD_STATE_DIR"] = state
        for argv, stdin in commands.values():  # warm-up: bytecode written
            _cpu_seconds(argv, env, stdin)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        names = list(commands)
        for number in range(rounds):
            for name in names if number % 2 == 0 else reversed(names):
                argv, stdin = commands[name]
                samples[name].append(_cpu_seconds(argv, env, stdin))
    return samples


def describe(samples: list[float]) -> str:
    quartiles = statistics.quantiles(samples, n=4)
    return (
        f"median {statistics.median(samples) * 1000:.0f} ms "
        f"(IQR {quartiles[0] * 1000:.0f}-{quartiles[2] * 1000:.0f})"
    )


def ratio(samples: dict[str, list[float]], over: str, base: str) -> float:
    return statistics.median(samples[over]) / statistics.median(samples[base])


def report(rounds: int = 15) -> None:
    python = sys.executable
    imports = interleaved(
        {
            "pass": ([python, "-c", "pass"], None),
            "import": ([python, "-c", "import tool_failure_guard"], None),
        },
        rounds,
    )
    print(
        f"import tool_failure_guard, CPU over {rounds} interleaved processes: "
        f"{describe(imports['import'])}; python -c pass {describe(imports['pass'])}; "
        f"ratio {ratio(imports, 'import', 'pass'):.2f}"
    )
    line = (json.dumps(INITIALIZE) + "\n").encode()
    agent = [python, "-m", "tool_failure_guard", "agent"]
    started = interleaved(
        {
            "pass": ([python, "-c", "pass"], None),
            "scripted": (agent, line),
            "openai": ([*agent, "--model", "openai:bench-model"], line),
        },
        rounds,
    )
    print(
        f"agent spawn -> initialize answered, CPU over {rounds} interleaved processes: "
        f"scripted {describe(started['scripted'])}, --model openai:NAME "
        f"{describe(started['openai'])}, python -c pass {describe(started['pass'])}"
    )
    print(
        f"agent start-up ratios: openai / scripted {ratio(started, 'openai', 'scripted'):.2f}; "
        f"scripted / python -c pass {ratio(started, 'scripted', 'pass'):.1f}"
    )
