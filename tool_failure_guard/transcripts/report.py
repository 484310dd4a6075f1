"""The fleet summary and the ``--json`` document of a ``transcripts`` command.

No argument, output or error text appears here unless ``show_content`` is
asked for: a run is named by its file and the agent's own id, a call by its
tool name, error type and position.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import attrs

from tool_failure_guard.peer_rules import PEER_KEYS
from tool_failure_guard.transcripts.calibration import calibrate
from tool_failure_guard.transcripts.replay import ModeResult, Point, RunResult, Saved
from tool_failure_guard.transcripts.walk import Skipped, Source

SCHEMA = "tool-failure-guard.transcripts/1"
#: rule key -> label, in report order (the shipped guard first).
RULE_LABELS: dict[str, str] = {
    "guard_remind": "shipped guard: remind (warn; shadow counts it)",
    "guard_stop": "shipped guard: stop (enforce)",
    **{key: label for label, key in PEER_KEYS.items()},
}
#: stop rule key -> label: the calibration's rows (a stop in each mode of the guard, the peers)
STOP_RULES: dict[str, str] = {
    "guard_shadow": "shipped guard, shadow (always-on backstops only)",
    "guard_warn": "shipped guard, warn",
    "guard_enforce": "shipped guard, enforce",
    **{key: label for label, key in PEER_KEYS.items()},
}
OUTCOMES = ("succeeded", "failed", "not_recorded")
#: A run with model turns and not one call its importer could read: its zeros say nothing
#: (a log format the importer does not know), so it is flagged, never a plausible zero.
NO_CALL_READ = "no_call_read"


def flags(result: RunResult) -> list[str]:
    """What the reader of ``result``'s numbers must know (:data:`NO_CALL_READ`)."""
    return [NO_CALL_READ] if result.turns and not result.calls else []


def outcome(result: RunResult) -> str:
    if result.succeeded is None:
        return "not_recorded"
    return "succeeded" if result.succeeded else "failed"


def fires_at(result: RunResult, rule: str) -> int | None:
    """The 1-based call at which ``rule`` fires on ``result``'s run, or None."""
    if rule == "guard_remind":
        point = result.mode("warn").remind
        return None if point is None else point.call
    if rule == "guard_stop":
        stop = result.mode("enforce").stop
        return None if stop is None or stop.would else stop.call
    return result.peers[rule]


def _sum(values: Sequence[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


@attrs.frozen(kw_only=True)
class Fleet:
    runs: int
    by_outcome: dict[str, int]
    profiles: dict[str, int]  #: replay profile -> runs replayed with it
    turns: int
    batches: int
    calls: int
    failed_calls: int
    input_tokens: int | None
    output_tokens: int | None
    #: rule -> outcome -> runs it fires on; plus "median_call" over the runs it fires on
    rules: dict[str, dict[str, Any]]
    saved_runs: int
    saved_calls: int
    saved_turns: int
    saved_input_tokens: int | None
    saved_output_tokens: int | None
    #: stop rule -> its false stops with their bound, and what stopping failed runs saves
    #: (:meth:`~tool_failure_guard.transcripts.calibration.Calibration.document`)
    calibration: dict[str, dict[str, Any]] = attrs.field(factory=dict)


def fleet(results: Sequence[RunResult], batches: int) -> Fleet:
    by_outcome = dict.fromkeys(OUTCOMES, 0)
    for result in results:
        by_outcome[outcome(result)] += 1
    rules: dict[str, dict[str, Any]] = {}
    for rule in RULE_LABELS:
        row: dict[str, Any] = dict.fromkeys(OUTCOMES, 0)
        at = []
        for result in results:
            call = fires_at(result, rule)
            if call is not None:
                row[outcome(result)] += 1
                at.append(call)
        row["runs"] = len(at)
        row["median_call"] = statistics.median(at) if at else None
        rules[rule] = row
    saved = [r.saved for r in results if r.saved is not None]
    profiles: dict[str, int] = {}
    for result in results:
        profiles[result.profile] = profiles.get(result.profile, 0) + 1
    return Fleet(
        runs=len(results),
        by_outcome=by_outcome,
        profiles=profiles,
        turns=sum(r.turns for r in results),
        batches=batches,
        calls=sum(r.calls for r in results),
        failed_calls=sum(r.failed_calls for r in results),
        input_tokens=_sum([r.input_tokens for r in results]),
        output_tokens=_sum([r.output_tokens for r in results]),
        rules=rules,
        saved_runs=len(saved),
        saved_calls=sum(s.calls for s in saved),
        saved_turns=sum(s.turns for s in saved),
        saved_input_tokens=_sum([s.input_tokens for s in saved]),
        saved_output_tokens=_sum([s.output_tokens for s in saved]),
        calibration={rule: calibrate(results, rule).document() for rule in STOP_RULES},
    )


def _point(point: Point | None) -> dict[str, Any] | None:
    if point is None:
        return None
    return {
        "turn": point.turn,
        "call": point.call,
        "loop_type": point.loop_type,
        "would": point.would,
    }


def _mode(mode: ModeResult) -> dict[str, Any]:
    return {"remind": _point(mode.remind), "stop": _point(mode.stop)}


def _saved(saved: Saved | None) -> dict[str, Any] | None:
    return None if saved is None else attrs.asdict(saved)


def run_document(result: RunResult, show_content: bool) -> dict[str, Any]:
    document: dict[str, Any] = {
        "agent": result.agent,
        "source": result.source,
        "run_id": result.run_id,
        "model": result.model,
        "succeeded": result.succeeded,
        "outcome_from": result.outcome_from,
        "profile": result.profile,
        "flags": flags(result),
        "turns": result.turns,
        "calls": result.calls,
        "failed_calls": result.failed_calls,
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
        "modes": {m.mode: _mode(m) for m in result.modes},
        "saved": _saved(result.saved),
        "peers": dict(result.peers),
    }
    if show_content:
        document["content"] = content(result)
    return document


def content(result: RunResult) -> list[dict[str, Any]]:
    """The calls of the batch where shadow would first remind or stop, with their error text."""
    return [
        {
            "call_id": c.call_id,
            "tool": c.tool,
            "status": str(c.status),
            "execution_status": str(c.execution_status),
            "error_type": c.error_type,
            "heuristic": c.heuristic,
            "arguments_fingerprint": c.arguments_fingerprint,
            "error_text": c.error_text,
        }
        for c in result.content
    ]


def document(
    sources: Sequence[Source],
    skipped: Sequence[Skipped],
    runs_per_file: Sequence[int],
    results: Sequence[RunResult],
    summary: Fleet,
    show_content: bool,
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "files": [
            {"path": s.shown, "kind": s.kind, "runs": n}
            for s, n in zip(sources, runs_per_file, strict=True)
        ],
        "skipped": [{"path": s.path, "reason": s.reason} for s in skipped],
        "runs": [run_document(r, show_content) for r in results],
        "fleet": attrs.asdict(summary),
        "rules": RULE_LABELS,
        "stop_rules": STOP_RULES,
    }
