"""A raw JSON-RPC client for the spawned agent: writes any bytes, reads every line.

The SDK's client cannot send a broken frame or show the agent's answer to one,
so the framing tests drive ``python -m tool_failure_guard agent`` through its
real stdin/stdout with this synchronous driver.  A thread reads stdout; every
line must parse as one JSON object (a torn line fails the test).  Requests the
agent sends (permission, drain) are answered: permission allowed, drain empty.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tool_failure_guard.session.pipeline.drain import DRAIN_METHOD
from tool_failure_guard.session.transport.client import agent_environment

#: One prompt: a write (asks permission) and a failing read (a batch, then a drain).
SCENARIO = {
    "name": "framing",
    "description": "A permission request and a drain inside one prompt.",
    "prompts": [
        {
            "turns": [
                {
                    "text": "Working.",
                    "calls": [
                        {"tool": "write_file", "args": {"path": "out.txt", "content": "x\n"}},
                        {"tool": "read_file", "args": {"path": "missing.txt"}},
                    ],
                }
            ],
            "final_text": "Done.",
        }
    ],
}

AgentRequestHook = Callable[[dict[str, Any]], None]

#: Seconds without any message from the agent before a wait fails.  A bound on a hung
#: agent, not on its speed: on a loaded machine (2 cores shared by several test runs,
#: this process and the agent both niced) a frame's answer or the agent's start-up can
#: take tens of seconds, and a tight bound made the fuzz fail there (then Hypothesis
#: shrank the "failure" for many minutes).  Nothing the tests assert depends on time.
PROGRESS_TIMEOUT_S = 180.0
#: Seconds the agent may take to exit once its input ended (it waits at most 5 s itself).
EXIT_TIMEOUT_S = 120.0


def frame(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode("utf-8")


class RawAgent:
    """The agent as a subprocess, spoken to in raw lines."""

    def __init__(self, root: Path, *extra_args: str) -> None:
        self.root = root
        self.project = root / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        home = root / "home"
        home.mkdir(exist_ok=True)
        scenario = root / "scenario.json"
        scenario.write_text(json.dumps(SCENARIO), encoding="utf-8")
        self.stderr_path = root / "agent-stderr.txt"
        self._stderr = self.stderr_path.open("wb")
        self._stderr_seen = 0
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tool_failure_guard",
                "agent",
                "--scenario",
                str(scenario),
                "--state-dir",
                str(root / "state"),
                *extra_args,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=agent_environment(None, home=home),
        )
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        #: Error answers to ids nobody here is waiting for (answers to bad frames).
        self.stray: list[dict[str, Any]] = []
        #: Answers to the requests sent with :meth:`request`, by id.
        self.answers: dict[Any, dict[str, Any]] = {}
        self._sent: set[str] = set()
        self.agent_requests: list[dict[str, Any]] = []
        self._next = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if not isinstance(message, dict):  # a torn or non-JSON line
                self._inbox.put({"unreadable": line[:200].decode("utf-8", "replace")})
                continue
            self._inbox.put(message)
        self._inbox.put(None)

    # -- writing ------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """One frame: ``data`` and a newline."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def send_all(self, frames: Sequence[bytes]) -> None:
        for data in frames:
            self.send(data)

    def request(self, method: str, params: Any) -> str:
        self._next += 1
        request_id = f"req-{self._next}"
        self._sent.add(request_id)
        self.send(frame({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        return request_id

    # -- reading ------------------------------------------------------------------

    def _take(self, timeout: float) -> dict[str, Any]:
        try:
            message = self._inbox.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message from the agent in {timeout} s") from None
        if message is None:
            raise AssertionError(f"the agent closed its output (exit code {self.proc.poll()})")
        if "unreadable" in message:
            raise AssertionError(f"the agent wrote a line that is not a JSON object: {message}")
        return message

    def wait_for(
        self,
        ids: Sequence[Any],
        *,
        on_agent_request: AgentRequestHook | None = None,
        timeout: float = PROGRESS_TIMEOUT_S,
    ) -> list[dict[str, Any]]:
        """Read until every id in ``ids`` has its answer; answer the agent's requests."""
        waiting = set(ids) - set(self.answers)
        while waiting:
            message = self._take(timeout)
            if "method" in message:
                if "id" in message:
                    self.agent_requests.append(message)
                    if on_agent_request is not None:
                        on_agent_request(message)
                    self._answer(message)
            elif message.get("id") in self._sent or message.get("id") in waiting:
                self.answers[message["id"]] = message
                waiting.discard(message["id"])
            else:
                self.stray.append(message)
        return [self.answers[i] for i in ids]

    def call(self, method: str, params: Any, **kwargs: Any) -> dict[str, Any]:
        """Send one request and return its answer's result (failing on an error)."""
        answer = self.wait_for([self.request(method, params)], **kwargs)[0]
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def _answer(self, request: dict[str, Any]) -> None:
        method = request["method"]
        if method == "session/request_permission":
            option = next(o for o in request["params"]["options"] if o["kind"] == "allow_once")
            result: Any = {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
        elif method == f"_{DRAIN_METHOD}":
            result = {"messages": [], "hasQueuedPrompt": False}
        else:  # the bare drain name too: this host speaks only the ``_`` one
            error = {"code": -32601, "message": "Method not found", "data": {"method": method}}
            self.send(frame({"jsonrpc": "2.0", "id": request["id"], "error": error}))
            return
        self.send(frame({"jsonrpc": "2.0", "id": request["id"], "result": result}))

    # -- the ACP exchange ---------------------------------------------------------

    def initialize(self) -> dict[str, Any]:
        return self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def new_session(self) -> str:
        session_id: str = self.call("session/new", {"cwd": str(self.project), "mcpServers": []})[
            "sessionId"
        ]
        return session_id

    def prompt(self, session_id: str, **kwargs: Any) -> dict[str, Any]:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
        return self.call("session/prompt", params, **kwargs)

    def new_stderr(self) -> str:
        """What the agent wrote to stderr since the last call."""
        data = self.stderr_path.read_bytes()
        text = data[self._stderr_seen :].decode("utf-8", "replace")
        self._stderr_seen = len(data)
        return text

    def peak_rss_kib(self) -> int:
        """The agent's peak resident memory so far (Linux ``VmHWM``)."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text(encoding="utf-8")
        line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
        return int(line.split()[1])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> int:
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._stderr.close()
        return code
