"""The original's reducer as a long-lived node process (``tests/qwen_reducer.mjs``).

One process per test module: node starts once, and every sequence of batches is one
JSON line each way.  :meth:`OriginalReducer.run_many` sends many sequences in one
request, so a corpus of thousands of prompts costs one round trip.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qwen_original import cli_path

SCRIPT = Path(__file__).resolve().parent / "qwen_reducer.mjs"


class OriginalReducer:
    """``reduceRepeatedToolFailureGuard`` of the installed Qwen Code, behind a pipe."""

    def __init__(self) -> None:
        started = time.monotonic()
        self._process = subprocess.Popen(
            ["node", str(SCRIPT), str(cli_path().parent)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        #: The chunk, the declarations it evaluated, and the module's constants.
        self.description = self._ask({"op": "describe"})
        #: Seconds from spawning node to its first answer (start-up plus loading).
        self.startup_s = time.monotonic() - started

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            assert self._process.stderr is not None
            raise RuntimeError(f"qwen_reducer.mjs exited: {self._process.stderr.read()[-2000:]}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"qwen_reducer.mjs: {answer['error']}")
        return answer

    def run(self, inputs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Reduce ``inputs`` in order from a fresh state; one ``{kind, reason, state}`` each."""
        results: list[dict[str, Any]] = self._ask({"op": "run", "inputs": list(inputs)})["results"]
        return results

    def run_many(
        self,
        sequences: Sequence[Sequence[Any]],
        alphabet: Sequence[dict[str, Any]] | None = None,
    ) -> list[list[dict[str, Any]]]:
        """:meth:`run` for each sequence, in one round trip.

        With ``alphabet``, each sequence lists indexes into it (a short request for an
        exhaustive exploration); without, each sequence lists the inputs themselves.
        """
        request: dict[str, Any] = {"op": "runs", "sequences": [list(s) for s in sequences]}
        if alphabet is not None:
            request["alphabet"] = list(alphabet)
        answer = self._ask(request)
        runs: list[list[dict[str, Any]]] = answer["runs"]
        return runs

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        for stream in (self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()
