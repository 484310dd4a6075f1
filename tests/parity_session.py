"""Both agents over ACP stdio against one scripted model: what ``test_parity_session`` compares.

One :class:`openai_server.FakeOpenAI` serves every session of both agents.  A session's
prompt carries a tag (``[[parity AGENT GROUP LABEL]]``, the label ``EPISODE[.VARIANT]``);
the responder finds it in the request, counts the model turns already taken, and answers
the episode's next batch with arguments each agent accepts (the original's ``read_file``
takes an absolute ``file_path``, ours a ``path`` relative to the working directory; the
same files).

One agent process per (agent, mode, drain names) serves its sessions one after another
(the mode is read at ``session/new`` from the process environment); the processes run
concurrently.  Each :class:`SessionRun` keeps the prompt's outcome, the host's record,
the model requests of that session, and the guard decisions the agent recorded: ours
from its ``--telemetry file:PATH`` sink, the original's from its telemetry outfile and
its ``--debug`` lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from openai_server import Reply, call
from qwen_original import (
    API_KEY,
    MODEL,
    Host,
    HostPlan,
    debug_decisions,
    log_events,
    make_home,
    read_telemetry,
    spawn_original,
    telemetry_settings,
)
from qwen_records import Counters, otlp_counters, outfile_counters

from tool_failure_guard.session.transport.client import agent_environment
from tool_failure_guard.telemetry.names import GUARD_LOG_EVENT, LOOP_DETECTED_EVENT

AGENTS = ("ours", "original")
FAILING_SHELL = "exit 3"
#: A batch: what each call does (``missing``: read a missing file; ``present``: read an
#: existing one; ``shell``: a shell command that exits 3).
Batch = tuple[str, ...]
#: Episode -> (model turns with tool calls, the batch of each turn); then the model gives up.
#: Each is as long as its point needs (the original takes most of the suite's time).
EPISODES: dict[str, tuple[int, Callable[[int], Batch]]] = {
    # enforce stops after batch 3; with a reset at batch 2 (host variants) after batch 5
    "stubborn": (5, lambda turn: ("missing",) * 4),
    "shell": (4, lambda turn: ("shell",) * 4),
    # warned at 2, the candidate's own success at 3, a new streak stopped at 6
    "recovery": (6, lambda turn: ("present",) if turn == 2 else ("missing",) * 4),
    "alternating": (4, lambda turn: ("missing",) * 4 if turn % 2 == 0 else ("shell",) * 4),
    "same_tool_mixed": (3, lambda turn: ("missing", "missing", "missing", "present")),
    "control": (0, lambda turn: ()),
}
_TAG = re.compile(r"\[\[parity (\S+) (\S+) (\S+)\]\]")
_T = TypeVar("_T")


def tag(agent: str, group: str, episode: str) -> str:
    return f"[[parity {agent} {group} {episode}]]"


class FixtureError(RuntimeError):
    """Something raised inside the fixture (the model's answer, a group's run): the test fails
    with it at once, never waiting for an agent that retries a failing model."""


@attrs.define
class Model:
    """The scripted model both agents talk to; it knows each agent group's project dir.

    An exception while answering (in the fake server's thread) is kept in ``failures`` and
    wakes every running group (:func:`run_group` then fails): the server answers it with an
    error the original retries with back-off, which would hold the test until its timeout.
    """

    root: Path
    requests: dict[str, list[dict[str, Any]]] = attrs.field(factory=lambda: defaultdict(list))
    untagged: list[dict[str, Any]] = attrs.field(factory=list)
    failures: list[BaseException] = attrs.field(factory=list)
    watchers: list[Callable[[], None]] = attrs.field(factory=list)

    def __call__(self, body: dict[str, Any]) -> Reply:
        try:
            return self.answer(body)
        except BaseException as exc:
            self.failures.append(exc)
            for wake in list(self.watchers):
                wake()
            raise

    def project(self, agent: str, group: str) -> Path:
        return self.root / f"{agent}-{group}" / "project"

    def arguments(self, agent: str, group: str, action: str) -> tuple[str, dict[str, Any]]:
        if action == "shell":
            return "run_shell_command", {"command": FAILING_SHELL}
        name = "missing.txt" if action == "missing" else "present.txt"
        if agent == "original":
            return "read_file", {"file_path": str(self.project(agent, group) / name)}
        return "read_file", {"path": name}

    def answer(self, body: dict[str, Any]) -> Reply:
        found = _TAG.search(json.dumps(body.get("messages", [])))
        if found is None:
            self.untagged.append(body)
            return Reply(text="(no episode)")
        agent, group, label = found.groups()
        episode = label.split(".")[0]
        self.requests[found.group(0)].append(body)
        turn = sum(1 for m in body["messages"] if m.get("role") == "assistant")
        turns, script = EPISODES[episode]
        batch = script(turn) if turn < turns else ()
        if not batch:
            return Reply(text="Hello." if episode == "control" else "Gave up.")
        calls = tuple(
            call(f"{episode[:3]}{turn}_{index}", *self.arguments(agent, group, action))
            for index, action in enumerate(batch)
        )
        return Reply(text=f"Turn {turn}.", calls=calls)


@attrs.frozen
class Group:
    """One agent process per agent named: its mode, the host's drain names, its sessions."""

    name: str
    mode: str
    drain: str
    sessions: tuple[tuple[str, str, HostPlan], ...]  #: (label, episode, plan)
    agents: tuple[str, ...] = AGENTS


@attrs.frozen
class SessionRun:
    agent: str
    mode: str
    group: str
    label: str
    episode: str
    session_id: str
    outcome: Any  #: the PromptResponse, or the RequestError the prompt ended with
    host: Host
    requests: list[dict[str, Any]]
    #: the guard's log records of this session (attributes), in order
    guard_records: list[dict[str, Any]]
    loop_records: list[dict[str, Any]]
    #: the original's ``--debug`` guard lines (empty for ours)
    debug: list[dict[str, str]]
    #: what the session's agent process wrote, all its sessions together
    signals: Signals


@attrs.frozen
class Signals:
    """One agent process's telemetry by name: each log record's event name and body, and
    its counters (both agents' files hold both)."""

    #: (``event.name`` attribute, body) of every log record
    records: frozenset[tuple[str, str]]
    counters: Counters

    @property
    def events(self) -> frozenset[str]:
        return frozenset(event for event, _ in self.records)

    def bodies(self, event: str) -> frozenset[str]:
        return frozenset(body for name, body in self.records if name == event)


def _signals(records: Sequence[dict[str, Any]], counters: Counters) -> Signals:
    named = frozenset(
        (str(r["attributes"].get("event.name")), str(r.get("body", r.get("_body"))))
        for r in records
        if "event.name" in r.get("attributes", {})  # log records (not spans, metrics)
    )
    return Signals(records=named, counters=counters)


def _attribute_value(value: dict[str, Any]) -> Any:
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in value:
            return value[kind]
    if "intValue" in value:
        return int(value["intValue"])
    return None


def our_log_records(path: Path) -> list[dict[str, Any]]:
    """Every log record of our OTLP JSON-lines file as ``{"attributes": {...}, "body": ...}``.

    Each record names its event twice: OTLP's ``eventName`` and the ``event.name``
    attribute, the original's spelling (the only one it writes); they must agree.
    """
    records = []
    if not path.is_file():
        return records
    for line in path.read_text(encoding="utf-8").splitlines():
        document = json.loads(line)
        for resource in document.get("resourceLogs", ()):
            for scope in resource.get("scopeLogs", ()):
                for record in scope.get("logRecords", ()):
                    attributes = {
                        a["key"]: _attribute_value(a.get("value", {}))
                        for a in record.get("attributes", ())
                    }
                    assert attributes.get("event.name") == record.get("eventName"), record
                    body = _attribute_value(record.get("body", {}))
                    records.append({"attributes": attributes, "body": body})
    return records


def _of_session(records: Sequence[dict[str, Any]], session_id: str) -> list[dict[str, Any]]:
    return [r for r in records if str(r.get("prompt_id", "")).startswith(session_id + "#")]


async def _serve_sessions(
    conn: Any, host: Host, model: Model, agent: str, group: Group
) -> list[tuple[str, str, str, Any]]:
    project = model.project(agent, group.name)
    done = []
    for label, episode, plan in group.sessions:
        session = await conn.new_session(cwd=str(project), mcp_servers=[])
        host.plan(session.session_id, plan)
        text = f"Please work on it. {tag(agent, group.name, label)}"
        try:
            outcome: Any = await conn.prompt(
                session_id=session.session_id, prompt=[text_block(text)]
            )
        except RequestError as exc:
            outcome = exc
        done.append((label, episode, session.session_id, outcome))
    return done


async def _unless_the_model_fails(work: Awaitable[_T], model: Model) -> _T | None:
    """``work``'s result, or None as soon as the model raised (``work`` then cancelled).

    The caller raises (:func:`_raise_if_the_model_failed`) once its agent is stopped: an
    error raised inside the agent's ``async with`` would leave its process to the collector.
    """
    failed = asyncio.Event()
    loop = asyncio.get_running_loop()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(failed.set)

    model.watchers.append(wake)
    if model.failures:
        failed.set()
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(failed.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        model.watchers.remove(wake)
        waiter.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
    return None if model.failures or task.cancelled() else task.result()


def _raise_if_the_model_failed(model: Model, what: str) -> None:
    if model.failures:
        first = model.failures[0]
        raise FixtureError(f"{what}: the model raised {type(first).__name__}: {first}") from first


async def run_group(model: Model, agent: str, group: Group, base_url: str) -> list[SessionRun]:
    """Start one agent process for ``group``, serve its sessions, stop it, read its records.

    Anything raising meanwhile -- here or in the model's answer -- ends it with that error.
    """
    what = f"{agent} {group.name}"
    folder = model.root / f"{agent}-{group.name}"
    project = model.project(agent, group.name)
    project.mkdir(parents=True)
    (project / "present.txt").write_text("present\n", encoding="utf-8")
    home, telemetry = folder / "home", folder / "telemetry.json"
    host = Host(group.drain)  # type: ignore[arg-type]
    with (folder / "stderr.txt").open("w") as stderr:
        if agent == "original":
            make_home(home, telemetry=telemetry_settings(outfile=telemetry))
            async with spawn_original(
                host,
                home=home,
                base_url=base_url,
                mode=group.mode,
                cwd=project,
                debug=True,
                stderr=stderr,
            ) as conn:
                done = await _unless_the_model_fails(
                    _serve_sessions(conn, host, model, agent, group), model
                )
            _raise_if_the_model_failed(model, what)
            records = read_telemetry(telemetry)
            signals = _signals(records, outfile_counters(records))
        else:
            home.mkdir()
            argv = ["-m", "tool_failure_guard", "agent", "--model", f"openai:{MODEL}"]
            argv += ["--state-dir", str(folder / "state"), "--telemetry", f"file:{telemetry}"]
            env = agent_environment(
                group.mode,
                home=home,
                extra={"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": API_KEY},
            )
            async with spawn_agent_process(
                host,
                sys.executable,
                *argv,
                env=env,
                cwd=str(project),
                transport_kwargs={"stderr": stderr, "shutdown_timeout": 10.0},
            ) as (conn, _process):
                host.attach(conn)
                await conn.initialize(protocol_version=PROTOCOL_VERSION)
                done = await _unless_the_model_fails(
                    _serve_sessions(conn, host, model, agent, group), model
                )
            _raise_if_the_model_failed(model, what)
            records = our_log_records(telemetry)
            signals = _signals(records, otlp_counters(telemetry))
    assert done is not None  # None only when the model failed, which raised above
    # One name for both: the original's (ours took them, tests/test_parity_session.py).
    guard, loops = log_events(records, GUARD_LOG_EVENT), log_events(records, LOOP_DETECTED_EVENT)
    return [
        SessionRun(
            agent=agent,
            mode=group.mode,
            group=group.name,
            label=label,
            episode=episode,
            session_id=session_id,
            outcome=outcome,
            host=host,
            requests=model.requests[tag(agent, group.name, label)],
            guard_records=_of_session(guard, session_id),
            loop_records=_of_session(loops, session_id),
            debug=debug_decisions(home, session_id) if agent == "original" else [],
            signals=signals,
        )
        for label, episode, session_id, outcome in done
    ]


async def run_all(
    model: Model, groups: Sequence[Group], base_url: str, *, parallel: int = 4
) -> tuple[dict[tuple[str, str, str], SessionRun], float]:
    """Every group under its agents; runs keyed (agent, mode, label), and the wall time."""
    limit = asyncio.Semaphore(parallel)
    started = time.monotonic()

    async def one(agent: str, group: Group) -> list[SessionRun]:
        async with limit:
            return await run_group(model, agent, group, base_url)

    # The original first: its processes take longest.
    jobs = [(a, g) for a in reversed(AGENTS) for g in groups if a in g.agents]
    # Every group settles before the first failure is raised: a failing model ends them all
    # at once, and none is cancelled inside its agent's shutdown.
    settled = await asyncio.gather(*(one(a, g) for a, g in jobs), return_exceptions=True)
    failures = [r for r in settled if isinstance(r, BaseException)]
    if failures:
        raise failures[0]
    results = [r for r in settled if not isinstance(r, BaseException)]
    runs = {(r.agent, r.mode, r.label): r for batch in results for r in batch}
    return runs, time.monotonic() - started
