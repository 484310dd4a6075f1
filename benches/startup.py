"""Start-up figures of ``make bench``: importing the library, its first use, the agent.

``import tool_failure_guard`` loads only the facade (PEP 562): the guard, the core
and attrs load when a name is first used.  So two library figures are printed, both
against ``python -c pass``: the bare import, and :data:`FIRST_USE` (the import, a
:class:`~tool_failure_guard.core.PromptProtection` built, one batch admitted, settled
and reduced), where the cost the import no longer pays is paid.  Then the agent
spawned and answering ``initialize``.

Each is the CPU time (user + system, from ``wait4``) of fresh processes, the
compared commands interleaved round by round so that load on a shared machine
falls on all; the median and the interquartile range are printed, and the
ratio of the medians.  Bytecode is cached for all (one warm-up run each, in a
private ``PYTHONPYCACHEPREFIX``), as an installed package has it.  When valgrind
is installed, the library's commands are also run once each under
``valgrind --tool=callgrind`` and their instruction counts printed: they repeat to
within a fraction of a percent whatever the machine's load.
"""

from __future__ import annotations

import json
import os
import re
import shutil
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


#: The library's first use: a guard built (inside the run's protection), one batch reduced.
FIRST_USE = """\
import tool_failure_guard as tfg
from tool_failure_guard.core import outcomes
protection = tfg.PromptProtection(tfg.GuardMode.ENFORCE)
admission = protection.admit([tfg.FunctionCall(call_id="c1", name="read_file", args={"p": 1})])
batch = protection.open_batch(admission)
for call in admission.calls:
    batch.settle(outcomes.failed(call, "file_not_found", "no such file"))
assert isinstance(protection.after_batch(batch), tfg.Continue)
"""


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


def instructions(commands: dict[str, tuple[list[str], bytes | None]]) -> dict[str, int] | None:
    """Instructions of one run of each command under callgrind; None without valgrind.

    Bytecode is cached first (one plain run each, in a private ``PYTHONPYCACHEPREFIX``);
    a command given ``stdin`` must answer it (``"result"`` in its output).
    """
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    counted: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as state:
        env = _environment(cache)
        env["TOOL_FAILURE_GUARD_STATE_DIR"] = state
        for name, (argv, stdin) in commands.items():
            for measured in (False, True):
                prefix = [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null"]
                done = subprocess.run(
                    [*prefix, *argv] if measured else argv,
                    env=env,
                    input=stdin,
                    capture_output=True,
                    timeout=900,
                    check=False,
                )
                if done.returncode != 0 or (stdin is not None and b'"result"' not in done.stdout):
                    raise RuntimeError(f"{argv}: exit {done.returncode}: {done.stderr[-2000:]!r}")
            found = re.findall(rb"Collected : (\d+)", done.stderr)
            if not found:
                raise RuntimeError(f"callgrind of {argv} counted nothing: {done.stderr[-2000:]!r}")
            counted[name] = int(found[-1])
    return counted


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
    line = (json.dumps(INITIALIZE) + "\n").encode()
    agent = [python, "-m", "tool_failure_guard", "agent"]
    library = {
        "pass": [python, "-c", "pass"],
        "import": [python, "-c", "import tool_failure_guard"],
        "first use": [python, "-c", FIRST_USE],
    }
    imports = interleaved({name: (argv, None) for name, argv in library.items()}, rounds)
    print(
        f"import tool_failure_guard, CPU over {rounds} interleaved processes: "
        f"{describe(imports['import'])}; first use (PromptProtection, one batch reduced) "
        f"{describe(imports['first use'])}; python -c pass {describe(imports['pass'])}; "
        f"ratios to pass: import {ratio(imports, 'import', 'pass'):.2f}, "
        f"first use {ratio(imports, 'first use', 'pass'):.2f}"
    )
    counted = instructions(
        {
            **{name: (argv, None) for name, argv in library.items()},
            "import attrs": ([python, "-c", "import attrs"], None),
            "agent spawn -> initialize (scripted)": (agent, line),
        }
    )
    if counted is None:
        print("import tool_failure_guard, instructions: not counted (valgrind not installed)")
    else:
        base = counted["pass"]
        print(
            "instructions (callgrind, one run each): "
            + "; ".join(
                f"{name} {count / 1e6:,.1f} M ({count / base:.2f}x pass)"
                for name, count in counted.items()
                if name != "pass"
            )
            + f"; python -c pass {base / 1e6:.1f} M   target import <= 2x pass: "
            + ("met" if counted["import"] <= 2 * base else "MISSED")
        )
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


if __name__ == "__main__":
    report()
