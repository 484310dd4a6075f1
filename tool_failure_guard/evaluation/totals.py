"""Totals beside the medians, paired differences from off, and whether one episode carries them.

The calls per episode are bimodal (a few calls, or the per-prompt cap), so a
median says little about what an arm saves: the totals over the same tasks and
seeds do.  Every difference is paired (the same task and seed in both arms), and
a difference *rests on one episode* when taking that one pair out leaves no
difference in the same direction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tool_failure_guard.core import LOOP_TOOL_CALL_CAP
from tool_failure_guard.evaluation import stats

Record = Mapping[str, Any]
Key = tuple[str, int]
FEW_CALLS = 3


def _tokens(record: Record) -> float:
    return stats.metric(record, "tokens") or 0.0


def _calls(record: Record) -> float:
    return float(record.get("tool_calls") or 0)


QUANTITIES: dict[str, Callable[[Record], float]] = {"tool calls": _calls, "tokens": _tokens}


def rests_on_one(differences: Mapping[Key, float]) -> tuple[Key, float] | None:
    """The one pair without which the summed difference vanishes or turns; else None."""
    total = sum(differences.values())
    if total == 0 or not differences:
        return None
    sign = 1 if total > 0 else -1
    key = max(differences, key=lambda k: sign * differences[k])
    rest = total - differences[key]
    return (key, differences[key]) if sign * rest <= 0 else None


def paired(
    records: Sequence[Record], arm: str, base: str, kind: str, value: Callable[[Record], float]
) -> dict[Key, float]:
    """(task, seed) -> value in ``arm`` minus value in ``base``, over the pairs both have."""
    of = {
        (r["arm"], r["task"], r["seed"]): r
        for r in records
        if r["kind"] == kind and r["arm"] in (arm, base)
    }
    return {
        (task, seed): value(of[(arm, task, seed)]) - value(of[(base, task, seed)])
        for (a, task, seed) in of
        if a == arm and (base, task, seed) in of
    }


def shape(records: Sequence[Record]) -> str:
    """How the calls per episode fall: a few, in between, or ended at the cap."""
    few = sum(_calls(r) <= FEW_CALLS for r in records)
    cap = sum(r.get("loop_type") == LOOP_TOOL_CALL_CAP for r in records)
    return f"{few} · {len(records) - few - cap} · {cap}"


def _difference(records: Sequence[Record], arm: str, kind: str, label: str) -> str:
    diffs = paired(records, arm, "off", kind, QUANTITIES[label])
    if not diffs:
        return "–"
    total = sum(diffs.values())
    text = f"{total:+.0f}"
    one = rests_on_one(diffs)
    if one is not None:
        (task, seed), value = one
        text += f" (rests on {task} s{seed}: {value:+.0f})"
    return text


def table(records: Sequence[Record], arms: Sequence[str], kinds: Sequence[str]) -> list[str]:
    rows = []
    for arm in arms:
        for kind in kinds:
            chosen = [r for r in records if r["arm"] == arm and r["kind"] == kind]
            if not chosen:
                continue
            calls = sum(_calls(r) for r in chosen)
            tokens = sum(_tokens(r) for r in chosen)
            cells = [arm, kind, str(len(chosen)), shape(chosen), f"{calls:.0f}"]
            cells.append("–" if arm == "off" else _difference(records, arm, kind, "tool calls"))
            cells.append(f"{tokens:.0f}")
            cells.append("–" if arm == "off" else _difference(records, arm, kind, "tokens"))
            rows.append(cells)
    header = (
        "arm",
        "tasks",
        "n",
        f"episodes with ≤{FEW_CALLS} calls · more · ended at the cap",
        "tool calls (total)",
        "vs off (paired)",
        "tokens (total)",
        "vs off (paired)",
    )
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def after_reminder_difference(
    after: Mapping[tuple[str, Key], float], arm: str, base: str = "shadow"
) -> str:
    """``arm`` minus ``base`` in calls after the reminder, over the pairs both reached."""
    diffs = {
        key: value - after[(base, key)]
        for (a, key), value in after.items()
        if a == arm and (base, key) in after
    }
    if not diffs:
        return "–"
    text = f"{sum(diffs.values()):+.0f} over {len(diffs)} pairs"
    one = rests_on_one(diffs)
    if one is not None:
        (task, seed), value = one
        text += f" (rests on {task} s{seed}: {value:+.0f})"
    return text
