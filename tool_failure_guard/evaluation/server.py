"""The inference endpoint of a run: a local ``llama-server``, or the user's own.

:func:`local_server` starts the cached ``llama-server`` on 127.0.0.1 at a free
port, waits for ``/health`` to answer 200 (the model is loaded), yields the
endpoint, and stops the server (SIGTERM, then SIGKILL) however the block ends.
:func:`external_endpoint` reads ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` /
``TFG_EVAL_MODEL`` for a user who brings an OpenAI-compatible server.

Reproducible episodes: llama-server reuses a prompt's KV cache for the next
request that shares its prefix (its slot keeps the last prompt) and, by
default, keeps up to 8 GiB of earlier prompts in host memory (``--cache-ram``)
to load for a new one.  How much of a prompt is recomputed changes the
floating-point sums, so with a cache carried over an episode's sampling
depended on the episode run before it.  The local server is started with the
host-memory prompt cache off (``--cache-ram 0``) and the slot API enabled
(``--slot-save-path``, which llama-server requires for any slot action;
nothing is ever saved there), and :func:`erase_slot` empties the one slot
before every episode (``POST /slots/0?action=erase``): each episode starts from
an empty cache, and within it the requests reuse only its own prefix.
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

from tool_failure_guard.redaction import redact_text, redact_url

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
    #: how the server's prompt cache is emptied between episodes: "slot-erase" (llama-server's
    #: slot API) or "none" (not controlled: the endpoint's own server)
    cache_reset: str = "none"

    @property
    def root_url(self) -> str:
        """The server's root (the slot API is at ``/slots``, beside ``/v1``)."""
        base = self.base_url.rstrip("/")
        return base[: -len("/v1")] if base.endswith("/v1") else base


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
    raise EndpointError(
        f"llama-server not healthy at {redact_url(base)}/health within {timeout:g}s"
    )


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


def erase_slot(root_url: str, slot: int = 0, timeout: float = 30.0) -> int:
    """Empty llama-server's slot ``slot`` (its cached prompt); the tokens it held.

    llama-server defers the erase until the slot is idle, so when this returns
    no earlier request's cache is left in it.  Anything but a 200 with
    ``n_erased`` is an :class:`EndpointError`: a run that cannot reset the cache
    says so rather than running irreproducible episodes.
    """
    url = f"{root_url.rstrip('/')}/slots/{slot}?action=erase"
    request = urllib.request.Request(url, data=b"{}", method="POST")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = json.loads(response.read(1 << 16) or b"{}")
    except urllib.error.HTTPError as error:
        detail = redact_text(error.read(300).decode("utf-8", "replace"))
        raise EndpointError(f"POST {redact_url(url)}: HTTP {error.code} {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise EndpointError(f"POST {redact_url(url)}: {redact_text(str(error))}") from None
    if not isinstance(body, dict) or not isinstance(body.get("n_erased"), int):
        raise EndpointError(
            f"POST {redact_url(url)}: no n_erased in the answer {redact_text(str(body)[:200])}"
        )
    return int(body["n_erased"])


def server_command(
    binary: Path,
    model: Path,
    template: Path,
    *,
    port: int,
    threads: int,
    context: int,
    slot_dir: Path,
) -> list[str]:
    """The llama-server command line: one slot, no host-memory prompt cache, slot API on."""
    return [
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
        "--cache-ram",
        "0",
        "--slot-save-path",
        str(slot_dir),
    ]


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
    slot_dir = log_path.parent / "llama-slots"
    slot_dir.mkdir(parents=True, exist_ok=True)
    command = server_command(
        binary,
        model,
        template,
        port=port,
        threads=threads,
        context=context,
        slot_dir=slot_dir,
    )
    version = server_version(binary)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_healthy(base, process, HEALTH_TIMEOUT_S)
            yield Endpoint(
                f"{base}/v1", "local-no-key", LOCAL_MODEL_NAME, version, True, "slot-erase"
            )
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def external_endpoint(cache_reset: str = "none") -> Endpoint | None:
    """The user's own server, when ``OPENAI_BASE_URL`` is set (else None: run locally).

    ``cache_reset="slot-erase"`` says the server is a llama-server started with
    ``--slot-save-path`` (and ideally ``--cache-ram 0``): its slot 0 is erased
    before every episode as for the local one.
    """
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
    return Endpoint(base.rstrip("/"), key, model, version, False, cache_reset)
