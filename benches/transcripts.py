"""What ``transcripts`` costs on 20,000 batches: reading, replaying, the whole command.

Part of ``tool-failure-guard bench``.  A seeded generator writes Qwen Code
session records (the shape of ``tests/fixtures/transcripts/qwen-code/``, one
prompt per file, 100 batches each: failing reads of one tool with successes
and other tools between, a two-call batch every seventh turn) to a temporary
directory; then it times, best of three, (a) the importer alone, (b) the
replay alone (shipped core in shadow, warn and enforce, and the peers'
rules) over the imported runs, and (c) the whole command (``--json`` to
``os.devnull``: walk, sniff, read, replay, summary); and (d) mini-swe-agent 1.x's
action scan on a 10 MiB hostile message.  It prints numbers and asserts nothing about
time.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BATCHES = 20_000
PER_FILE = 100


def _record(kind: str, session: str, n: int, **fields: Any) -> str:
    base = {"uuid": f"u{n}", "sessionId": session, "type": kind, "version": "0.24.4"}
    return json.dumps({**base, **fields}) + "\n"


def write_corpus(root: Path, batches: int = BATCHES, seed: int = 25) -> int:
    """Write ``batches`` batches as Qwen Code session records under ``root``; the file count."""
    rng = random.Random(seed)
    files = 0
    for start in range(0, batches, PER_FILE):
        session = f"bench-{files:05d}"
        lines = [_record("user", session, 0, message={"role": "user", "parts": [{"text": "go"}]})]
        for turn in range(min(PER_FILE, batches - start)):
            width = 2 if turn % 7 == 6 else 1
            calls, results = [], []
            for k in range(width):
                call_id = f"c{turn}-{k}"
                failing = rng.random() < 0.7
                tool = "read_file" if rng.random() < 0.8 else "run_shell_command"
                calls.append(
                    {"functionCall": {"id": call_id, "name": tool, "args": {"p": rng.randrange(9)}}}
                )
                status = "error" if failing else "success"
                result = {"callId": call_id, "status": status, "executionStatus": status}
                if failing:
                    result["errorType"] = (
                        "file_not_found" if tool == "read_file" else "shell_execute_error"
                    )
                response = {"error": "not found"} if failing else {"output": "ok"}
                part = {"functionResponse": {"id": call_id, "name": tool, "response": response}}
                results.append((result, part))
            usage = {"promptTokenCount": 1000 + 50 * turn, "candidatesTokenCount": 40}
            lines.append(
                _record("assistant", session, 2 * turn + 1, model="bench",
                        message={"role": "model", "parts": calls}, usageMetadata=usage)
            )  # fmt: skip
            for result, part in results:
                lines.append(
                    _record("tool_result", session, 2 * turn + 2, toolCallResult=result,
                            message={"role": "user", "parts": [part]})
                )  # fmt: skip
        (root / f"{session}.jsonl").write_text("".join(lines), encoding="utf-8")
        files += 1
    return files


def _best(function: Any, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def report(batches: int = BATCHES) -> None:
    from tool_failure_guard.commands.cli import main
    from tool_failure_guard.peer_rules import PEER_RULES
    from tool_failure_guard.transcripts.importers import qwen_code
    from tool_failure_guard.transcripts.importers.mini_swe_agent_text import actions
    from tool_failure_guard.transcripts.replay import replay_run

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = write_corpus(root, batches)
        paths = sorted(root.glob("*.jsonl"))
        size = sum(p.stat().st_size for p in paths)
        runs = [run for path in paths for run in qwen_code.read(path)]
        calls = sum(len(t.calls) for run in runs for t in run.turns)

        def read_all() -> None:
            for path in paths:
                list(qwen_code.read(path))

        def replay_all() -> None:
            for run in runs:
                replay_run(run)

        def command() -> None:
            with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
                status = main(["transcripts", "--json", "--no-progress", str(root)])
            if status != 0:
                print(f"transcripts exited {status}", file=sys.stderr)

        read_s, replay_s, whole_s = _best(read_all), _best(replay_all), _best(command)
    print(
        f"transcripts on {batches} batches ({calls} calls, {len(runs)} runs, {files} Qwen Code "
        f"session files, {size / 1e6:.1f} MB): import {read_s:.2f} s, replay (3 modes + "
        f"{len(PEER_RULES)} peer rules) {replay_s:.2f} s ({replay_s / batches * 1e6:.0f} µs per "
        f"batch), whole command --json {whole_s:.2f} s ({batches / whole_s:,.0f} batches/s)"
    )
    hostile = "```bash" + "\n" * (10 << 20) + "x"
    scan_s = _best(lambda: actions(hostile))
    print(
        f"mini-swe-agent 1.x actions on a 10 MiB hostile message (a fence, then newlines): "
        f"{scan_s * 1e3:.0f} ms"
    )
