"""Capturing the telemetry the released original (Qwen Code 0.24.4) writes, for ``rollout``.

Episodes of the real original (``tests/qwen_original.py`` spawns it) against a
scripted OpenAI-compatible model: per guard mode (shadow, warn, enforce) and
owner, one Qwen Code process whose Resource names the deployment environment
and the pseudonymous owner (``OTEL_RESOURCE_ATTRIBUTES``, which it honours),
serving one session with two prompts -- a greeting that ends normally, then a
prompt whose model keeps reading a missing file four times a turn (tracked,
warned/would_warn, stopped/would_stop).  Each process writes one shape:

* ``local``: its telemetry outfile (``target: "local"``, ``outfile``);
* ``otlp``: OTLP/HTTP to a receiver on 127.0.0.1 (``tests/otlp_receiver.py``)
  that writes what a Collector's ``file`` exporter would.

:func:`trim` cuts a capture down to a committed fixture (``tests/fixtures/qwen_code``):
only the records the analysis reads, only the guard counter among the metrics,
and the free-text attributes (prompt text, request text, call arguments, error
messages: they hold the temporary paths) replaced by ``"(trimmed)"``.
``python tests/qwen_capture.py DIR`` captures both shapes into DIR and writes
the trimmed fixtures next to the raw files.  The outfile's log records also lose the
JS SDK's bookkeeping keys the reader never reads (:data:`SDK_INTERNALS`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import attrs
from acp import spawn_agent_process, text_block
from openai_server import FakeOpenAI, Reply, call, serve
from otlp_receiver import receive
from qwen_original import (
    DrainNames,
    Host,
    command,
    environment,
    make_home,
    telemetry_settings,
)

from tool_failure_guard.rollout import qwen_code

LOOP_PROMPT = "Read notes.txt and summarise it."
GREETING = "Say hello."
MAX_TURNS = 5
ENVIRONMENT = "internal"
#: Attributes of the kept records that carry free text (trimmed from fixtures).
#: The JS SDK's bookkeeping on a log record object, which the reader never reads (trimmed).
SDK_INTERNALS = frozenset(
    {
        "_hrTimeObserved",
        "_spanContext",
        "_attributesCount",
        "_droppedAttributesCount",
        "_isReadonly",
        "_logRecordLimits",
    }
)
FREE_TEXT = frozenset(
    {"prompt", "request_text", "response_text", "function_args", "error", "error.message"}
)


@attrs.frozen
class Episode:
    mode: str
    owner: str
    shape: str  # "local" or "otlp"
    #: The host's drain (``tests/qwen_original.Host``): "none" is a host without the contract.
    drain: DrainNames = "bare"


def episodes(shape: str, owners: int = 2) -> list[Episode]:
    return [
        Episode(mode, f"owner-{mode}-{i}", shape)
        for mode in ("shadow", "warn", "enforce")
        for i in range(owners)
    ]


def responder(missing: Path) -> Any:
    """Greeting: a text answer.  The loop prompt: four reads of ``missing`` per turn."""

    def respond(body: dict[str, Any]) -> Reply:
        messages = body.get("messages", [])
        starts = [
            i
            for i, m in enumerate(messages)
            if m.get("role") == "user" and LOOP_PROMPT in json.dumps(m.get("content"))
        ]
        if not starts:
            return Reply(text="Hello.")
        turns = sum(1 for m in messages[starts[-1] :] if m.get("role") == "assistant")
        if turns >= MAX_TURNS:
            return Reply(text="The file is missing; giving up.")
        calls = tuple(
            call(f"t{turns}_{i}", "read_file", {"file_path": str(missing)}) for i in range(4)
        )
        return Reply(text="Reading.", calls=calls)

    return respond


async def _run(episode: Episode, root: Path, base_url: str, endpoint: str | None) -> Path:
    """One Qwen Code process for ``episode``; returns the file its telemetry went to."""
    work = root / f"{episode.shape}-{episode.owner}"
    project = work / "project"
    project.mkdir(parents=True)
    outfile = work / "telemetry.json"
    telemetry = (
        telemetry_settings(outfile=outfile)
        if endpoint is None
        else telemetry_settings(otlp_endpoint=endpoint, otlp_protocol="http")
    )
    home = make_home(work / "home", telemetry=telemetry)
    resource = f"deployment.environment={ENVIRONMENT},enduser.pseudo.id={episode.owner}"
    env = environment(
        home=home,
        base_url=base_url,
        mode=episode.mode,
        extra={"OTEL_RESOURCE_ATTRIBUTES": resource},
    )
    host = Host(episode.drain)
    argv = command()
    with (work / "stderr.txt").open("w", encoding="utf-8") as stderr:
        async with spawn_agent_process(
            host,
            argv[0],
            *argv[1:],
            env=env,
            cwd=str(project),
            # Room to flush its exporters on stdin's close (it exits by itself).
            transport_kwargs={"stderr": stderr, "shutdown_timeout": 60.0},
        ) as (conn, _process):
            host.attach(conn)
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            for text in (GREETING, LOOP_PROMPT):
                try:
                    await conn.prompt(session_id=session.session_id, prompt=[text_block(text)])
                except Exception as error:  # the enforced stop answers an error: expected
                    if "LOOP_DETECTED" not in repr(getattr(error, "data", error)):
                        raise
    return outfile


async def _all(items: Sequence[Episode], root: Path, base_url: str, endpoint: str | None) -> None:
    limit = asyncio.Semaphore(3)

    async def one(episode: Episode) -> Path:
        async with limit:
            return await _run(episode, root, base_url, endpoint)

    await asyncio.gather(*(one(e) for e in items))


@contextmanager
def capture(
    root: Path, local: int = 2, otlp: int = 1, no_drain: bool = False
) -> Iterator[dict[str, list[Path]]]:
    """Run the episodes (``local``/``otlp`` owners per mode) under ``root``: shape -> files.

    ``no_drain`` adds one local enforce episode on a host without the drain contract.
    """
    missing = root / "notes.txt"  # never created
    fake = FakeOpenAI(responder(missing))
    with ExitStack() as stack:
        stack.enter_context(serve(fake))
        collector = stack.enter_context(receive(root / "collector.jsonl"))
        extra = [Episode("enforce", "owner-no-drain", "local", "none")] if no_drain else []
        asyncio.run(_all([*episodes("local", local), *extra], root, fake.base_url, None))
        asyncio.run(_all(episodes("otlp", otlp), root, fake.base_url, collector.endpoint))
        local = sorted(root.glob("local-*/telemetry.json"))
        yield {"local": local, "otlp": [collector.out]}


# -- trimming a capture into a fixture ------------------------------------------------------


def _keep_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: ("(trimmed)" if k in FREE_TEXT else v) for k, v in attributes.items()}


def trim_outfile(path: Path, out: Path) -> None:
    """The outfile's kept records and guard-counter metrics, pretty-printed as it writes."""
    parts = []
    with path.open(encoding="utf-8") as stream:
        for _, obj in qwen_code.objects(path, stream):
            if "scopeMetrics" in obj:
                metrics = [
                    m
                    for scope in obj["scopeMetrics"]
                    for m in scope.get("metrics", [])
                    if m.get("descriptor", {}).get("name") == qwen_code.GUARD_COUNTER
                ]
                if metrics:
                    scope = {"scope": {"name": "qwen-code"}, "metrics": metrics}
                    parts.append({**obj, "scopeMetrics": [scope]})
            elif obj.get("attributes", {}).get("event.name") in qwen_code.EVENTS and (
                "_hrTime" in obj
            ):
                kept = {k: v for k, v in obj.items() if k not in SDK_INTERNALS}
                parts.append({**kept, "attributes": _keep_attributes(obj["attributes"])})
    out.write_text("".join(json.dumps(p, indent=2) + "\n" for p in parts), encoding="utf-8")


def _otlp_kv_trim(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"key": i["key"], "value": {"stringValue": "(trimmed)"}} if i["key"] in FREE_TEXT else i
        for i in items
    ]


def trim_otlp(path: Path, out: Path) -> None:
    """The Collector lines' kept records and the guard counter, one request per line."""
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        data = json.loads(text)
        for rl in data.get("resourceLogs", []):
            for sl in rl.get("scopeLogs", []):
                sl["logRecords"] = [
                    {**r, "attributes": _otlp_kv_trim(r.get("attributes", []))}
                    for r in sl.get("logRecords", [])
                    if any(
                        a["key"] == "event.name"
                        and a["value"].get("stringValue") in qwen_code.EVENTS
                        for a in r.get("attributes", [])
                    )
                ]
            rl["scopeLogs"] = [s for s in rl.get("scopeLogs", []) if s["logRecords"]]
        for rm in data.get("resourceMetrics", []):
            for sm in rm.get("scopeMetrics", []):
                sm["metrics"] = [
                    m for m in sm.get("metrics", []) if m.get("name") == qwen_code.GUARD_COUNTER
                ]
            rm["scopeMetrics"] = [s for s in rm.get("scopeMetrics", []) if s["metrics"]]
        data = {
            k: [x for x in v if x.get("scopeLogs") or x.get("scopeMetrics")]
            for k, v in data.items()
        }
        if any(data.values()):
            lines.append(json.dumps(data, separators=(",", ":")))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    root = Path(argv[0]).resolve()
    root.mkdir(parents=True, exist_ok=False)
    fixtures = root / "fixtures"
    fixtures.mkdir()
    with capture(root, local=1, otlp=1) as files:
        for path in files["local"]:
            trim_outfile(path, fixtures / f"{path.parent.name}.json")
        trim_otlp(files["otlp"][0], fixtures / "collector.jsonl")
    print(f"captured into {root}; trimmed fixtures in {fixtures}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main(sys.argv[1:]))
