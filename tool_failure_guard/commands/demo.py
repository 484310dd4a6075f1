"""``tool-failure-guard demo``: the failing-loop scenario over real ACP, in three modes.

An ACP client from the SDK spawns ``python -m tool_failure_guard agent`` three
times -- guard mode shadow, warn and enforce -- and sends the same prompt to
the ``read-loop`` scenario (a model that keeps reading a missing file, four
reads per turn, and ignores the corrective reminder).  For each run it prints
the transcript the client saw, what the model was sent after each batch (from
the session's history file), and the guard's decision per batch.

``--mcp-server "NAME=COMMAND ARG..."`` (repeatable) hands MCP servers to
``session/new``, as an ACP client does, so a scenario such as ``mcp-read-loop``
can loop on a real server's tool (``mcp__NAME__TOOL``).  The server runs in
the demo's temporary project directory.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HELP = "run the built-in failing-loop scenario in shadow, warn and enforce"
MODES = ("shadow", "warn", "enforce")
PROMPT = "Please read config/settings.toml and summarise it."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        default="read-loop",
        metavar="NAME|FILE",
        help="scenario to play (default: read-loop)",
    )
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help="comma-separated guard modes to run (default: shadow,warn,enforce)",
    )
    parser.add_argument(
        "--mcp-server",
        action="append",
        default=[],
        metavar="NAME=COMMAND ARG...",
        help="an MCP stdio server to give the session (repeatable), e.g. "
        "'fs=npx -y @modelcontextprotocol/server-filesystem .'",
    )


def parse_mcp_server(text: str) -> tuple[str, list[str]]:
    """``NAME=COMMAND ARG...`` -> (name, argv); ValueError names what is wrong."""
    name, sep, command = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"--mcp-server {text!r}: expected NAME=COMMAND ARG...")
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"--mcp-server {text!r}: {exc}") from None
    if not argv:
        raise ValueError(f"--mcp-server {text!r}: the command is empty")
    return name.strip(), argv


def run(args: argparse.Namespace) -> int:
    import asyncio

    from tool_failure_guard._extras import AGENT_MODULES, MissingExtra, require_extra

    try:
        require_extra("agent", *AGENT_MODULES)
    except MissingExtra as missing:
        print(f"tool-failure-guard demo: {missing}", file=sys.stderr)
        return 2
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    bad = [mode for mode in modes if mode not in ("off", *MODES)]
    if bad or not modes:
        print(f"demo: unknown mode(s) {bad}; expected off, shadow, warn, enforce", file=sys.stderr)
        return 2
    from tool_failure_guard.session.model.base import ScenarioError, load_scenario

    try:
        load_scenario(args.scenario)
    except ScenarioError as exc:
        print(f"demo: bad scenario: {exc}", file=sys.stderr)
        return 2
    try:
        servers = [parse_mcp_server(text) for text in args.mcp_server]
    except ValueError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    results = [asyncio.run(_run_mode(mode, args.scenario, servers)) for mode in modes]
    _print_summary(results)
    return 0 if all(result["ok"] for result in results) else 1


async def _run_mode(
    mode: str, scenario: str, servers: Sequence[tuple[str, list[str]]] = ()
) -> dict[str, Any]:
    import tempfile

    from acp import text_block
    from acp.schema import McpServerStdio

    from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent

    with tempfile.TemporaryDirectory(prefix="tfg-demo-") as tmp:
        root = Path(tmp)
        project, home, state = root / "project", root / "home", root / "state"
        project.mkdir()
        home.mkdir()
        client = RecordingClient()
        _rule(f"guard mode: {mode}")
        print(f"user: {PROMPT}")
        async with spawn_guarded_agent(
            client, mode=mode, state_dir=state, home=home, scenario=scenario
        ) as conn:
            mcp_servers = [
                McpServerStdio(name=name, command=argv[0], args=argv[1:], env=[])
                for name, argv in servers
            ]
            session = await conn.new_session(cwd=str(project), mcp_servers=mcp_servers)
            response = await conn.prompt(session_id=session.session_id, prompt=[text_block(PROMPT)])
        meta = response.field_meta or {}
        report = meta.get("toolFailureGuard", {})
        batches = report.get("batches", [])
        model_inputs = _model_inputs(state / "sessions" / f"{session.session_id}.jsonl")
        _print_transcript(client, batches, model_inputs)
        loop_type = meta.get("loopType")
        print(
            f"prompt ended: stopReason={response.stop_reason}"
            + (f", _meta.loopType={loop_type}" if loop_type else "")
        )
        _print_table(batches)
        return {
            "mode": mode,
            "ok": True,
            "batches": len(batches),
            "tool_calls": sum(1 for e in client.events if e.kind == "tool_call"),
            "reminders": sum(1 for text in model_inputs if "REMINDER" in text),
            "stopped": loop_type == "repeated_tool_execution_failure",
            "stop_reason": response.stop_reason,
        }


def _model_inputs(history: Path) -> list[str]:
    """One line per post-batch model message: what the model was sent."""
    import json

    from tool_failure_guard.guard import (
        REPEATED_TOOL_FAILURE_REMINDER,
        REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    )

    lines: list[str] = []
    for raw in history.read_text(encoding="utf-8").splitlines():
        record = json.loads(raw)
        if record.get("type") != "message" or record.get("kind") != "tool_results":
            continue
        parts = record["parts"]
        responses = sum(1 for p in parts if p["kind"] == "function_response")
        extra = []
        for part in parts:
            if part.get("text") == REPEATED_TOOL_FAILURE_REMINDER:
                extra.append("REMINDER")
            elif part["kind"] == "queued_input":
                extra.append("mid-turn input")
        content = " + ".join([f"{responses} function responses", *extra])
        if any(p.get("text") == REPEATED_TOOL_FAILURE_STOP_MESSAGE for p in parts):
            lines.append(f"history gets: {content} + STOP MESSAGE; no further model request")
        else:
            lines.append(f"next model message: {content}")
    return lines


def _print_transcript(client: Any, batches: list[dict[str, Any]], inputs: list[str]) -> None:
    titles: dict[str, str] = {}
    batch = 0
    pending = 0
    for event in client.events:
        if event.kind == "agent":
            print(f"agent: {event.text}")
        elif event.kind == "user":
            print(f"user: {event.text}")
        elif event.kind == "tool_call":
            titles[event.call_id] = event.text
            pending += 1
        elif event.kind == "tool_update" and event.status in ("completed", "failed"):
            first = event.text.splitlines()[0] if event.text else ""
            print(f"    {titles.get(event.call_id, event.call_id)} -> {event.status}: {first}")
            pending -= 1
            if pending == 0:
                if batch < len(batches):
                    row = batches[batch]
                    phases = f"{row['phaseBefore']} -> {row['phaseAfter']}"
                    print(f"    => guard: {row['decision']} ({phases})")
                if batch < len(inputs):
                    print(f"    => {inputs[batch]}")
                batch += 1


def _print_table(batches: list[dict[str, Any]]) -> None:
    headers = ("batch", "decision", "reason", "phase", "failures", "batches", "input")
    rows = [
        (
            str(row["batch"]),
            row["decision"],
            row["reason"] or "-",
            f"{row['phaseBefore']} -> {row['phaseAfter']}",
            str(row["failureCount"]),
            str(row["batchCount"]),
            "reliable" if row["reliableInput"] else "unreliable",
        )
        for row in batches
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print()
    print("guard decisions per batch:")
    for cells in (headers, tuple("-" * w for w in widths), *rows):
        line = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
        print("  " + line.rstrip())
    print()


def _print_summary(results: list[dict[str, Any]]) -> None:
    _rule("summary")
    print(f"  {'mode':<8} {'batches':>7} {'tool calls':>10} {'reminders':>9}  outcome")
    for r in results:
        outcome = "stopped (enforce)" if r["stopped"] else f"ran to the end ({r['stop_reason']})"
        counts = f"{r['batches']:>7} {r['tool_calls']:>10} {r['reminders']:>9}"
        print(f"  {r['mode']:<8} {counts}  {outcome}")
    print()
    print("shadow changes nothing the model or the user sees; warn injects the reminder once;")
    print("enforce also stops the prompt when the same failure follows the reminder.")


def _rule(title: str) -> None:
    print()
    print(f"==== {title} " + "=" * max(4, 72 - len(title)))
