"""The interval gates: what each phase measures, from per-owner sums of each arm.

:data:`COLUMNS` is the per-owner sum vector (name -> the SQL summed over the
owner's prompts); :func:`metric_gates` turns two arms' owner x column matrices
(and the p95 bootstrap interval) into gate results.
"""

from __future__ import annotations

import math
from typing import Any, Final

from tool_failure_guard.rollout import stats
from tool_failure_guard.rollout.stats import Array, Interval, Verdict

#: ``rollout gates --phase``: (treatment mode, control mode).
ARMS: Final = {"enforce": ("enforce", "warn"), "warn": ("warn", "shadow")}
#: Consistency bounds (treatment / control) for the stopped-loop rate and saved calls.
CONSISTENCY_BOUNDS: Final = (0.5, 2.0)
#: Phase 2 cancel-rate margin (T − C): the specification gives none; the same as the
#: disconnect-or-retry margin, the other measure of a user abandoning a prompt.
CANCEL_MARGIN: Final = 0.005
_STOP = "loop_type = 'repeated_tool_execution_failure'"

#: Per-owner sums: name -> the expression summed over the owner's prompts.
COLUMNS: Final = {
    "n": "1",
    "completed": "completed",
    "cancelled": "CASE WHEN stop_reason = 'cancelled' THEN 1 ELSE 0 END",
    "dor": "disconnect_or_retry",
    "tokens": "input_tokens + output_tokens",
    "tokens_n": "CASE WHEN input_tokens + output_tokens IS NULL THEN 0 ELSE 1 END",
    "turns": "model_turns",
    "stops": f"CASE WHEN {_STOP} THEN 1 ELSE 0 END",
    "would_stops": "would_stop",
    "calls": "tool_calls",
    "calls_in_stops": f"CASE WHEN {_STOP} THEN tool_calls ELSE 0 END",
    "calls_to_would_stop": "CASE WHEN would_stop = 1 THEN tool_calls - calls_after_would_stop "
    "ELSE 0 END",
    "could_stop": "could_stop",
    "calls_saved": "calls_saved",
}
_NAMES = tuple(COLUMNS)


def col(matrix: Array, name: str) -> Array:
    return matrix[:, _NAMES.index(name)]


def gate_row(
    name: str, kind: str, interval: Interval, margin: Any, verdict: Verdict, note: str = ""
) -> dict[str, Any]:
    def num(v: float) -> float | None:
        return v if math.isfinite(v) else None

    return {
        "gate": name,
        "kind": kind,
        "estimate": num(interval.estimate),
        "low": num(interval.low),
        "high": num(interval.high),
        "margin": margin,
        "verdict": verdict.value,
        "note": note,
    }


def metric_gates(phase: str, t: Array, c: Array, latency: Interval) -> list[dict[str, Any]]:
    """The interval gates: Phase 3's list, or Phase 2's (cancels, reconnects, cost)."""
    results: list[dict[str, Any]] = []

    def pair(num: str, den: str) -> tuple[tuple[Array, Array], tuple[Array, Array]]:
        return (col(t, num), col(t, den)), (col(c, num), col(c, den))

    if phase == "enforce":
        completion = stats.difference_interval(*pair("completed", "n"))
        results.append(
            gate_row(
                "completion",
                "T − C (rate)",
                completion,
                -0.01,
                stats.lower_bound_verdict(completion, -0.01),
            )
        )
    else:
        cancels = stats.difference_interval(*pair("cancelled", "n"))
        results.append(
            gate_row(
                "cancel_rate",
                "T − C (rate)",
                cancels,
                CANCEL_MARGIN,
                stats.upper_bound_verdict(cancels, CANCEL_MARGIN),
                "margin chosen as for disconnect-or-retry (the specification gives none)",
            )
        )
    dor = stats.difference_interval(*pair("dor", "n"))
    results.append(
        gate_row(
            "disconnect_or_retry_10min",
            "T − C (rate)",
            dor,
            0.005,
            stats.upper_bound_verdict(dor, 0.005),
        )
    )
    results.append(
        gate_row(
            "p95_latency",
            "T / C",
            latency,
            1.10,
            stats.upper_bound_verdict(latency, 1.10),
            "owner-level Poisson bootstrap (wall times to 3 significant digits)",
        )
    )
    tokens = stats.ratio_interval(*pair("tokens", "tokens_n"))
    results.append(
        gate_row(
            "mean_tokens",
            "T / C",
            tokens,
            1.10,
            stats.upper_bound_verdict(tokens, 1.10),
            "" if tokens.finite else "the model reported no tokens",
        )
    )
    turns = stats.ratio_interval(*pair("turns", "n"))
    results.append(
        gate_row("mean_turns", "T / C", turns, 1.10, stats.upper_bound_verdict(turns, 1.10))
    )
    if phase != "enforce":
        return results
    stop_rate = stats.ratio_interval(
        (col(t, "stops"), col(t, "n")), (col(c, "would_stops"), col(c, "n"))
    )
    results.append(
        gate_row(
            "stopped_loop_rate",
            "T stops / C would_stops",
            stop_rate,
            list(CONSISTENCY_BOUNDS),
            stats.equivalence_verdict(stop_rate, *CONSISTENCY_BOUNDS),
        )
    )
    where = stats.ratio_interval(
        (col(t, "calls_in_stops"), col(t, "stops")),
        (col(c, "calls_to_would_stop"), col(c, "would_stops")),
    )
    saved = saved_calls_estimate(t, c)
    results.append(
        gate_row(
            "saved_calls",
            "T calls/stop ÷ C calls/would_stop",
            where,
            list(CONSISTENCY_BOUNDS),
            stats.equivalence_verdict(where, *CONSISTENCY_BOUNDS),
            f"stops land where warn's would_stop did; estimated calls saved {saved:.0f}"
            if math.isfinite(saved)
            else "no stops or no would_stops to compare",
        )
    )
    return results


def saved_calls_estimate(t: Array, c: Array) -> float:
    """Treatment stops × control's calls saved per prompt whose guard could have stopped."""
    if not len(t) or not len(c):
        return math.nan
    could = float(col(c, "could_stop").sum())
    if could <= 0:
        return math.nan
    per_stop = float(col(c, "calls_saved").sum()) / could
    return float(col(t, "stops").sum()) * per_stop
