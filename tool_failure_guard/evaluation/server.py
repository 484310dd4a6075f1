"""The inference endpoint of a run: a local ``llama-server``, or the user's own.

:func:`local_server` starts the cached ``llama-server`` on 127.0.0.1 at a free
port, waits for ``/health`` to answer 200 (the model is loaded), yields the
endpoint, and stops the server (SIGTERM, then SIGKILL) however the block ends.
:func:`external_endpoint` reads ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` /
``TFG_EVAL_MODEL`` for a user who brings an OpenAI-compatible server.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import attrs

#: llama-server accepts any model name; this one is what the report prints.
LOCAL_MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
HEALTH_TIMEOUT_S = 300.0


class EndpointError(RuntimeError):
    """The endpoint cannot be started or reached; the message says why."""


@attrs.frozen
class Endpoint:
    base_url: str  #: ends in /v1
    api_key: str = attrs.field(repr=False)
    model: str
    server_version: str  #: what the server says it is ("unknown" when it does not say)
    local: bool


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read(1 << 16).decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, ""
    except (urllib.error.URLError, OSError):
        return 0, ""


def wait_healthy(base: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Poll ``base/health`` until 200; a dead process or the deadline is an error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise EndpointError(f"llama-server exited with status {process.returncode}")
        status, _ = _get(f"{base}/health", timeout=2.0)
        if status == 200:
            return
        time.sleep(0.5)
    raise EndpointError(f"llama-server not healthy at {base}/health within {timeout:g}s")


def server_version(binary: Path) -> str:
    """``llama-server --version`` (it prints ``version: N (commit)`` on stderr)."""
    try:
        result = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    for line in (result.stdout + result.stderr).splitlines():
        if line.startswith("version:"):
            return "llama.cpp llama-server " + line.split(":", 1)[1].strip()
    return "unknown"


@contextlib.contextmanager
def local_server(
    binary: Path,
    model: Path,
    template: Path,
    *,
    log_path: Path,
    threads: int = 2,
    context: int = 8192,
) -> Iterator[Endpoint]:
    """Run the cached llama-server for the ``with`` block (127.0.0.1, a free port)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [
        str(binary),
        "-m",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--jinja",
        "--chat-template-file",
        str(template),
        "-c",
        str(context),
        "-t",
        str(threads),
        "-np",
        "1",
    ]
    version = server_version(binary)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_healthy(base, process, HEALTH_TIMEOUT_S)
            yield Endpoint(f"{base}/v1", "local-no-key", LOCAL_MODEL_NAME, version, True)
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def external_endpoint() -> Endpoint | None:
    """The user's own server, when ``OPENAI_BASE_URL`` is set (else None: run locally)."""
    base = os.environ.get("OPENAI_BASE_URL")
    if not base:
        return None
    model = os.environ.get("TFG_EVAL_MODEL")
    if not model:
        raise EndpointError("OPENAI_BASE_URL is set: set TFG_EVAL_MODEL to the model name too")
    key = os.environ.get("OPENAI_API_KEY") or "no-key"
    status, body = _get(base.rstrip("/") + "/models", timeout=10.0)
    version = "unknown"
    if status == 200:
        with contextlib.suppress(ValueError):
            data = json.loads(body)
            owned = {
                str(m.get("owned_by", "")) for m in data.get("data", []) if isinstance(m, dict)
            }
            version = ", ".join(sorted(o for o in owned if o)) or "unknown"
    return Endpoint(base.rstrip("/"), key, model, version, False)
