"""Summaries of episode records: medians with seeded bootstrap intervals, shares, counts.

Everything is a pure function of the records (and the bootstrap seed), so the
report can be recomputed from the saved records and checked.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

BOOTSTRAP_SEED = 17
BOOTSTRAP_RESAMPLES = 2000
#: Per-episode quantities the report summarises, and how each is read from a record.
METRICS: dict[str, str] = {
    "tool calls": "tool_calls",
    "model turns": "model_turns",
    "tokens (in+out)": "tokens",
    "wall time (s)": "agent_wall_s",
}

Record = Mapping[str, Any]


def metric(record: Record, key: str) -> float | None:
    if key == "tokens":
        inp, out = record.get("input_tokens"), record.get("output_tokens")
        if inp is None or out is None:
            return None
        return float(inp) + float(out)
    value = record.get(key)
    return None if value is None else float(value)


def median_interval(
    values: Sequence[float], *, seed: int = BOOTSTRAP_SEED, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float, float] | None:
    """(median, 2.5 %, 97.5 %) of the bootstrap distribution of the median; None if empty."""
    if not values:
        return None
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    samples = rng.choice(data, size=(resamples, len(data)), replace=True)
    medians = np.median(samples, axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(statistics.median(values)), float(low), float(high)


def group(records: Iterable[Record], *keys: str) -> dict[tuple[Any, ...], list[Record]]:
    groups: dict[tuple[Any, ...], list[Record]] = {}
    for record in records:
        groups.setdefault(tuple(record[k] for k in keys), []).append(record)
    return groups


def values(records: Iterable[Record], key: str) -> list[float]:
    return [v for r in records if (v := metric(r, key)) is not None]


def share(count: int, total: int) -> str:
    return f"{count}/{total}" if total else "0/0"


def stop_label(record: Record) -> str:
    """How an episode ended: the loop type of a stop, else the stop reason."""
    loop = record.get("loop_type")
    if loop:
        return str(loop)
    return str(record.get("stop_reason") or record.get("acp_stop") or "unknown")


def fmt(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def fmt_interval(summary: tuple[float, float, float] | None) -> str:
    if summary is None:
        return "–"
    mid, low, high = summary
    return f"{fmt(mid)} [{fmt(low)}, {fmt(high)}]"
