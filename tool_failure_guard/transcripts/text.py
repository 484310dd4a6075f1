"""The human-readable ``transcripts`` report: one row per run, then the fleet summary.

Every text that comes from a log or a file name goes through :func:`shown`:
logs and names are written by others, so nothing in them may move the cursor,
recolour or retitle the operator's terminal, or forge a line of the table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from tool_failure_guard.rollout.output import escape_controls
from tool_failure_guard.transcripts.calibration import UPPER_FIELD
from tool_failure_guard.transcripts.profiles import PROFILES
from tool_failure_guard.transcripts.replay import Point, RunResult
from tool_failure_guard.transcripts.report import (
    OUTCOMES,
    RULE_LABELS,
    STOP_RULES,
    Fleet,
    content,
    flags,
    outcome,
)
from tool_failure_guard.transcripts.walk import Skipped

_PEER_HEADS = {
    "gemini_cli": "gemini",
    "opencode_roo": "oc/roo",
    "goose": "goose",
    "qwen_code": "qwen",
    "qwen_code_repeated_error": "qwen#10916",
    "cline_mistakes": "cline",
    "crush_repeated_steps": "crush",
}
_RESULT = {"succeeded": "ok", "failed": "failed", "not_recorded": "-"}
_SURROGATE = re.compile("[\ud800-\udfff]")


def shown(text: str) -> str:
    """``text`` for a terminal: control characters escaped (``rollout``'s
    :func:`~tool_failure_guard.rollout.output.escape_controls`), and a lone surrogate (an
    undecodable byte of a file name, a JSON ``\\udXXX`` escape in a log) as ``\\uXXXX``,
    which no encoder refuses."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", escape_controls(text))


def _at(point: Point | None) -> str:
    if point is None:
        return "-"
    return f"t{point.turn}/c{point.call}" + ("*" if point.would else "")


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _names(results: Sequence[RunResult]) -> list[str]:
    """``kind:file`` per run, ``#n`` added where a file holds several runs (prompts)."""
    per_file: dict[str, int] = {}
    for r in results:
        per_file[r.source] = per_file.get(r.source, 0) + 1
    seen: dict[str, int] = {}
    names = []
    for r in results:
        seen[r.source] = seen.get(r.source, 0) + 1
        name = f"{r.agent}:{shown(Path(r.source).name)}"
        names.append(name + (f"#{seen[r.source]}" if per_file[r.source] > 1 else ""))
    return names


def runs_table(results: Sequence[RunResult]) -> list[str]:
    head = [
        "run",
        "profile",
        "result",
        "turns",
        "calls",
        "failed",
        "remind",
        "stop (enforce)",
        "saved calls",
        "saved tokens",
    ]
    head += [*_PEER_HEADS.values(), "flags"]
    rows = [head]
    for name, r in zip(_names(results), results, strict=True):
        enforce = r.mode("enforce")
        stop = enforce.stop
        saved_tokens = None
        if r.saved is not None and (
            r.saved.input_tokens is not None or r.saved.output_tokens is not None
        ):
            saved_tokens = (r.saved.input_tokens or 0) + (r.saved.output_tokens or 0)
        rows.append(
            [
                name,
                r.profile,
                _RESULT[outcome(r)],
                str(r.turns),
                str(r.calls),
                str(r.failed_calls),
                _at(r.mode("warn").remind),
                _at(stop) + (f" {stop.loop_type}" if stop is not None and stop.loop_type else ""),
                _num(r.saved.calls if r.saved else None),
                _num(saved_tokens),
                *(_num(r.peers[k]) for k in _PEER_HEADS),
                ",".join(flags(r)) or "-",
            ]
        )
    return _table(rows)


def fleet_lines(summary: Fleet) -> list[str]:
    o = summary.by_outcome
    lines = [
        f"fleet: {summary.runs} runs ({o['succeeded']} succeeded, {o['failed']} failed, "
        f"{o['not_recorded']} not recorded); {summary.turns} turns, {summary.batches} batches, "
        f"{summary.calls} calls ({summary.failed_calls} failed); tokens in/out "
        f"{_num(summary.input_tokens)}/{_num(summary.output_tokens)}",
        "replayed as: "
        + ", ".join(
            f"{name} ({runs} run{'' if runs == 1 else 's'}; {PROFILES[name].host})"
            for name, runs in summary.profiles.items()
        ),
        "",
    ]
    rows = [["rule", "fires on runs", *OUTCOMES, "median call"]]
    for rule, label in RULE_LABELS.items():
        row = summary.rules[rule]
        median = row["median_call"]
        rows.append(
            [
                label,
                str(row["runs"]),
                *(str(row[k]) for k in OUTCOMES),
                "-" if median is None else f"{median:g}",
            ]
        )
    lines += _table(rows)
    lines += ["", *calibration_lines(summary)]
    lines += [
        "",
        f"enforce would have saved: {summary.saved_calls} calls and {summary.saved_turns} model "
        f"turns on {summary.saved_runs} runs; tokens in/out {_num(summary.saved_input_tokens)}/"
        f"{_num(summary.saved_output_tokens)} (where the log records usage)",
    ]
    return lines


def _percent(bound: float | None) -> str:
    return "-" if bound is None else f"{100 * bound:.1f}%"


def calibration_lines(summary: Fleet) -> list[str]:
    """Per stop rule: successful runs it stops with the 95 % upper bound, failed runs it
    stops and what that saves."""
    lines = [
        "false stops (runs with a known outcome; bound: exact 95% upper, Clopper-Pearson):",
    ]
    rows = [["stop rule", "ok runs stopped", "upper 95%", "failed runs stopped", "saved on failed"]]
    for rule, label in STOP_RULES.items():
        row = summary.calibration[rule]
        saved = row["saved_on_failed"]
        tokens = saved["input_tokens"], saved["output_tokens"]
        spent = "" if tokens == (None, None) else f", tokens {(tokens[0] or 0) + (tokens[1] or 0)}"
        rows.append(
            [
                label,
                f"{row['succeeded_stopped']}/{row['succeeded_runs']}",
                _percent(row[UPPER_FIELD]),
                f"{row['failed_stopped']}/{row['failed_runs']}",
                f"{saved['turns']} turns, {saved['calls']} calls{spent}",
            ]
        )
    return lines + _table(rows)


def render(
    results: Sequence[RunResult],
    summary: Fleet,
    skipped: Sequence[Skipped],
    files: int,
    show_content: bool,
) -> str:
    lines = [f"transcripts: {files} files, {summary.runs} runs", ""]
    if results:
        lines += runs_table(results)
        lines += [
            "",
            "remind/stop: tTURN/cCALL (1-based); * = shadow/warn only count it; the stop "
            "column is enforce's; peers: the call at which each rule fires",
        ]
        unread = sum(1 for r in results if flags(r))
        if unread:
            lines.append(
                f"no_call_read: {unread} run{'' if unread == 1 else 's'} with model turns and "
                "no call the importer could read; their zeros say nothing (check the format)"
            )
        verdicts = sorted({r.outcome_from or "agent" for r in results} - {"agent"})
        if verdicts:
            lines.append(
                "result: SWE-bench's verdict where one is beside the trajectories ("
                + ", ".join(verdicts)
                + "), else the agent's own record; --json says which per run"
            )
        lines.append("")
    lines += fleet_lines(summary)
    if skipped:
        lines += ["", f"skipped {len(skipped)} file{'' if len(skipped) == 1 else 's'}:"]
        lines += [f"  {shown(s.path)}: {shown(s.reason)}" for s in skipped]
    if show_content:
        lines += ["", "content (--show-content): the batch where the guard would first act"]
        for name, r in zip(_names(results), results, strict=True):
            for call in content(r):
                axes = f"{call['status']}/{call['execution_status']} {call['error_type'] or '-'}"
                text = shown(call["error_text"] or "")
                what = f"{shown(call['call_id'])} {shown(call['tool'])}"
                lines.append(f"  {name} {what} {shown(axes)}: {text}")
    return "\n".join(lines) + "\n"
