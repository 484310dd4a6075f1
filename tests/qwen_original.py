"""The released original, Qwen Code 0.24.4, run as an ACP agent: the parity oracle.

``@qwen-code/qwen-code`` is pinned in ``.clients/package-lock.json`` and installed by
``make setup`` (``npm ci --prefix .clients``) into the git-ignored
``.clients/node_modules``.  This module is the one place the tests learn how to run it:

* :func:`cli_path` finds the installed ``cli.js`` (or raises :class:`QwenUnavailable`
  saying why not); :func:`require_qwen` skips the calling test with that message, or
  fails it where :data:`REQUIRE_ENV_VAR` is ``1`` (CI);
* :func:`make_home` writes a private ``HOME`` whose ``~/.qwen/settings.json`` selects the
  OpenAI-compatible auth and the model, switches off the two helper model requests that
  follow a normal turn (managed auto-memory, follow-up suggestions), and optionally
  turns its telemetry on (:func:`telemetry_settings`: a local outfile, or OTLP);
* :func:`spawn_original` starts ``node cli.js --acp --auth-type openai --approval-mode
  yolo -m MODEL`` with ``OPENAI_BASE_URL`` at a scripted server (``tests/openai_server.py``)
  and the guard mode in ``QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD``, initialised, over
  the official Python SDK (``acp``);
* :class:`Host` is the client side, usable with either agent: it records every update per
  session and plays a host's mid-turn queue under the bare drain name
  (``craft/drainMidTurnQueue``, what the original sends), the ``_`` name (what the
  Python SDK puts on the wire), both, or neither, with typed input or a queued prompt at
  chosen drains (:class:`HostPlan`);
* :func:`read_telemetry`, :func:`guard_events` and :func:`debug_decisions` read back what
  it recorded about the guard (its telemetry outfile; its ``--debug`` log lines).

Nothing of the original is copied into this repository: it is run (and, in
``tests/qwen_reducer.mjs``, read) from the installed package only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any, Literal

import attrs
import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.router import Route
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse
from mcp_servers import REQUIRE_ENV_VAR
from qwen_records import (
    GUARD_EVENT,
    LOOP_EVENT,
    debug_decisions,
    guard_events,
    log_events,
    read_telemetry,
)

from tool_failure_guard.guard import GUARD_MODE_ENV_VAR

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / ".clients" / "node_modules" / "@qwen-code" / "qwen-code"
QWEN_VERSION = "0.24.4"
MODEL = "test-model"
API_KEY = "sk-test-key"
#: The drain method as the original sends it: the bare name, no ``_`` (its SDK passes
#: names through unchanged).
DRAIN_BARE = "craft/drainMidTurnQueue"
#: The same method as the Python SDK puts it on the wire (it prefixes extension names).
DRAIN_UNDERSCORE = "_" + DRAIN_BARE

HOW_TO_GET_IT = (
    "needs Node.js 20+ with npm and the pinned original: install Node.js, then run "
    "`make setup` (runs `npm ci --prefix .clients`)"
)

DrainNames = Literal["bare", "underscore", "both", "none"]
#: What it recorded is read by ``qwen_records``; re-exported here for one import.
__all__ = [
    "GUARD_EVENT",
    "LOOP_EVENT",
    "debug_decisions",
    "guard_events",
    "log_events",
    "read_telemetry",
]


class QwenUnavailable(RuntimeError):
    """The original cannot run here; the message says why and how to get it."""


def cli_path() -> Path:
    """The installed ``cli.js`` of Qwen Code 0.24.4; :class:`QwenUnavailable` if there is none."""
    if shutil.which("node") is None:
        raise QwenUnavailable(f"Qwen Code unavailable (node is not on PATH); {HOW_TO_GET_IT}")
    manifest = PACKAGE_DIR / "package.json"
    cli = PACKAGE_DIR / "cli.js"
    if not manifest.is_file() or not cli.is_file():
        raise QwenUnavailable(
            f"Qwen Code unavailable (not installed: {PACKAGE_DIR.relative_to(ROOT)}); "
            f"{HOW_TO_GET_IT}"
        )
    version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    if version != QWEN_VERSION:
        raise QwenUnavailable(
            f"Qwen Code {version} is installed, the tests pin {QWEN_VERSION}; run `make setup`"
        )
    return cli


def unavailable_message() -> str | None:
    """Why the original cannot run here, and how to get it; None when it can."""
    try:
        cli_path()
    except QwenUnavailable as exc:
        return str(exc)
    return None


def require_qwen() -> Path:
    """``cli.js``; else skip the calling test saying how to get it (fail instead on CI)."""
    try:
        return cli_path()
    except QwenUnavailable as exc:
        if os.environ.get(REQUIRE_ENV_VAR) == "1":
            pytest.fail(f"{exc} ({REQUIRE_ENV_VAR}=1)")
        pytest.skip(str(exc))


def chunk_with(name: str) -> Path:
    """The bundle chunk that defines function ``name`` (chunk names change per release)."""
    pattern = re.compile(rf"^function {re.escape(name)}\(", re.MULTILINE)
    for chunk in sorted((cli_path().parent / "chunks").glob("*.js")):
        if pattern.search(chunk.read_text(encoding="utf-8", errors="replace")):
            return chunk
    raise QwenUnavailable(f"no chunk of the installed Qwen Code defines {name}")


# -- settings and environment ----------------------------------------------------------


def telemetry_settings(
    *,
    outfile: Path | None = None,
    otlp_endpoint: str | None = None,
    otlp_protocol: Literal["grpc", "http"] | None = None,
    **more: Any,
) -> dict[str, Any]:
    """``settings.telemetry``: on; a local outfile (concatenated JSON records) and/or OTLP."""
    settings: dict[str, Any] = {"enabled": True, "target": "local"}
    if outfile is not None:
        settings["outfile"] = str(outfile)
    if otlp_endpoint is not None:
        settings["otlpEndpoint"] = otlp_endpoint
    if otlp_protocol is not None:
        settings["otlpProtocol"] = otlp_protocol
    settings.update(more)
    return settings


def settings(
    model: str = MODEL,
    *,
    telemetry: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``~/.qwen/settings.json``: OpenAI-compatible auth, the model, no helper requests."""
    document: dict[str, Any] = {
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": model},
        "memory": {"enableManagedAutoMemory": False},
        "ui": {"enableFollowupSuggestions": False},
    }
    if telemetry is not None:
        document["telemetry"] = dict(telemetry)
    document.update(extra or {})
    return document


def make_home(
    home: Path,
    model: str = MODEL,
    *,
    telemetry: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Create ``home/.qwen/settings.json`` (see :func:`settings`); return ``home``."""
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    document = settings(model, telemetry=telemetry, extra=extra)
    (home / ".qwen" / "settings.json").write_text(json.dumps(document, indent=2), "utf-8")
    return home


def environment(
    *,
    home: Path,
    base_url: str,
    mode: str | None,
    model: str = MODEL,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The original's whole environment: PATH, the private HOME, the endpoint, the mode."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "OPENAI_API_KEY": API_KEY,
        "OPENAI_BASE_URL": base_url,
        "OPENAI_MODEL": model,
        "NO_COLOR": "1",
    }
    if mode is not None:
        env[GUARD_MODE_ENV_VAR] = mode
    env.update(extra or {})
    return env


def command(model: str = MODEL, *, debug: bool = False) -> list[str]:
    """``node cli.js --acp --auth-type openai --approval-mode yolo -m MODEL [--debug]``."""
    argv = ["node", str(cli_path()), "--acp", "--auth-type", "openai"]
    argv += ["--approval-mode", "yolo", "-m", model]
    return [*argv, "--debug"] if debug else argv


# -- the host ---------------------------------------------------------------------------


@attrs.frozen
class HostPlan:
    """What one session's host holds at each drain (0 = the prompt's first drain)."""

    #: drain index -> messages the person typed while the agent worked
    typed_input: Mapping[int, Sequence[str]] = attrs.field(factory=dict)
    #: drain indexes at which the host holds a queued prompt (``hasQueuedPrompt``)
    queued_prompt_at: frozenset[int] = frozenset()
    #: the drain names for this session only (default: the host's); the original keeps
    #: a failed drain per session, so one of its processes can serve several host kinds
    drain: DrainNames | None = None


@attrs.frozen
class DrainRequest:
    method: str  #: the wire name it arrived under
    session_id: str
    params: dict[str, Any]


class Host:
    """An ACP client (official Python SDK) playing a host, for either agent.

    ``drain`` says under which names the host has the mid-turn drain: ``bare``
    (``craft/drainMidTurnQueue``), ``underscore`` (``_craft/drainMidTurnQueue``),
    ``both`` or ``none``; an absent name is answered -32601.  Per session, a
    :class:`HostPlan` says what each drain returns.  Updates are recorded per session,
    as plain JSON dicts in wire order (synchronously, before any ``await``).
    """

    def __init__(self, drain: DrainNames = "bare") -> None:
        self.drain = drain
        self.plans: dict[str, HostPlan] = {}
        self.updates: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.drain_requests: list[DrainRequest] = []
        #: drain requests under a name this host lacks (answered -32601)
        self.refused: list[DrainRequest] = []
        self.permission_requests: list[dict[str, Any]] = []

    def plan(self, session_id: str, plan: HostPlan) -> None:
        self.plans[session_id] = plan

    def attach(self, conn: ClientSideConnection) -> None:
        """Route the bare name to the drain (the SDK routes only ``_`` names to ``ext_method``)."""
        router = conn._conn._handler

        async def bare(params: Any) -> dict[str, Any]:
            return self._drain(DRAIN_BARE, params if isinstance(params, dict) else {})

        router.add_route(Route(method=DRAIN_BARE, func=bare, kind="request"))

    def _drain(self, wire_name: str, params: dict[str, Any]) -> dict[str, Any]:
        session_id = str(params.get("sessionId", ""))
        plan = self.plans.get(session_id, HostPlan())
        names = plan.drain or self.drain
        wanted = {"bare": (DRAIN_BARE,), "underscore": (DRAIN_UNDERSCORE,)}.get(
            names, (DRAIN_BARE, DRAIN_UNDERSCORE) if names == "both" else ()
        )
        if wire_name not in wanted:
            self.refused.append(DrainRequest(wire_name, session_id, dict(params)))
            raise RequestError.method_not_found(wire_name)
        index = sum(1 for r in self.drain_requests if r.session_id == session_id)
        self.drain_requests.append(DrainRequest(wire_name, session_id, dict(params)))
        return {
            "messages": list(plan.typed_input.get(index, ())),
            "hasQueuedPrompt": index in plan.queued_prompt_at,
        }

    def drains_of(self, session_id: str) -> list[DrainRequest]:
        return [r for r in self.drain_requests if r.session_id == session_id]

    # -- acp.Client --------------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates[session_id].append(
            update.model_dump(mode="json", by_alias=True, exclude_none=True)
        )

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append(tool_call.model_dump(mode="json", by_alias=True))
        option = next((o for o in options if o.kind == "allow_once"), None)
        if option is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
        )

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == DRAIN_BARE:  # the SDK stripped the leading "_"
            return self._drain(DRAIN_UNDERSCORE, params)
        raise RequestError.method_not_found("_" + method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None

    # -- views ---------------------------------------------------------------------------

    def of_kind(self, session_id: str, kind: str) -> list[dict[str, Any]]:
        return [u for u in self.updates[session_id] if u.get("sessionUpdate") == kind]

    def agent_text(self, session_id: str) -> str:
        """Everything the agent said to the person in this session, concatenated."""
        return "".join(
            str((u.get("content") or {}).get("text", ""))
            for u in self.of_kind(session_id, "agent_message_chunk")
        )

    def tool_call_ids(self, session_id: str) -> list[str]:
        """Call ids in the order their ``tool_call`` updates arrived."""
        return [str(u["toolCallId"]) for u in self.of_kind(session_id, "tool_call")]

    def final_statuses(self, session_id: str) -> dict[str, str]:
        """Call id -> the last status reported for it."""
        statuses: dict[str, str] = {}
        for update in self.updates[session_id]:
            kind = update.get("sessionUpdate")
            if kind in ("tool_call", "tool_call_update") and update.get("status"):
                statuses[str(update["toolCallId"])] = str(update["status"])
        return statuses


@asynccontextmanager
async def spawn_original(
    host: Host,
    *,
    home: Path,
    base_url: str,
    mode: str | None,
    cwd: Path,
    model: str = MODEL,
    debug: bool = False,
    stderr: IO[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> AsyncIterator[ClientSideConnection]:
    """Qwen Code as an ACP agent over stdio, initialised, with ``host`` as its client.

    ``home`` must hold the settings (:func:`make_home`).  The mode is read once per
    ``session/new`` from this process environment, so one process serves many sessions
    of one mode.  ``stderr`` defaults to the null device (it must be drained or discarded:
    an agent blocked on a full pipe hangs).  On leaving, the SDK closes its stdin, waits
    2 s and sends SIGTERM (it flushes its telemetry outfile then).
    """
    argv = command(model, debug=debug)
    env = environment(home=home, base_url=base_url, mode=mode, model=model, extra=extra_env)
    sink = stderr if stderr is not None else open(os.devnull, "w")  # noqa: SIM115
    try:
        async with spawn_agent_process(
            host, argv[0], *argv[1:], env=env, cwd=str(cwd), transport_kwargs={"stderr": sink}
        ) as (conn, _process):
            host.attach(conn)
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            yield conn
    finally:
        if stderr is None:
            sink.close()
