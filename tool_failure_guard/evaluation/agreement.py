"""Reproducibility: the episodes that must make the same calls, and where they did not.

Shadow sends the model exactly what off sends, and warn and enforce do too until
the request after their first reminder; every arm uses the same seeds.  With the
server's prompt cache emptied before every episode
(:func:`~tool_failure_guard.evaluation.server.erase_slot`) the off and shadow
episodes of a task and seed must then agree call for call, and a guarded
episode must agree with off through the batch at which it reminded.  These
functions check that on the saved records and name the first divergence; a
record without ``prompt_cache`` predates the reset.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

Record = Mapping[str, Any]
_REMIND = frozenset({"warned", "would_warn"})


@attrs.frozen
class Divergence:
    """The first call at which two episodes differ (1-based), and what each did there."""

    call: int
    left: str
    right: str


def _calls(record: Record) -> list[list[tuple[str, str]]]:
    return [[(c["name"], c["args"]) for c in b["calls"]] for b in record["batches"]]


def _say(call: tuple[str, str] | None) -> str:
    return "no further call" if call is None else f"{call[0]} {call[1]}"


def first_divergence(left: Record, right: Record, through: int | None = None) -> Divergence | None:
    """Where ``right`` first differs from ``left``, over their first ``through`` batches.

    ``through=None`` compares the whole episodes, and then their final answers
    too (call number one past the last call).  Batches are compared in order; in
    the first that differs, the first differing position is the divergence, a
    missing call on either side being "no further call".
    """
    a, b = _calls(left), _calls(right)
    if through is not None:
        a, b = a[:through], b[:through]
    before = 0
    for index in range(max(len(a), len(b))):
        x = a[index] if index < len(a) else []
        y = b[index] if index < len(b) else []
        if x != y:
            for position in range(max(len(x), len(y))):
                cx = x[position] if position < len(x) else None
                cy = y[position] if position < len(y) else None
                if cx != cy:
                    return Divergence(before + position + 1, _say(cx), _say(cy))
        before += len(x)
    if through is None and (left.get("final_text") or "") != (right.get("final_text") or ""):
        return Divergence(
            before + 1,
            "answer " + json.dumps((left.get("final_text") or "")[:60]),
            "answer " + json.dumps((right.get("final_text") or "")[:60]),
        )
    return None


def reminded_through(record: Record) -> int | None:
    """Batches up to and including the first (would-be) reminder; None: it never reminded."""
    for index, label in enumerate(record["decisions"]):
        if label in _REMIND:
            return index + 1
    return None


@attrs.frozen
class Pair:
    task: str
    seed: int
    arm: str  #: the arm compared with off
    through: int | None  #: batches compared (None: the whole episode)
    divergence: Divergence | None


def pairs(records: Sequence[Record]) -> list[Pair]:
    """Every episode paired with off's of the same task and seed, and how they compare.

    Shadow: the whole episode.  Warn and enforce: through the batch of the first
    reminder (the next request carries it), or the whole episode if none came.
    """
    off = {(r["task"], r["seed"]): r for r in records if r["arm"] == "off"}
    out: list[Pair] = []
    for record in records:
        if record["arm"] == "off" or (record["task"], record["seed"]) not in off:
            continue
        base = off[(record["task"], record["seed"])]
        through = None if record["arm"] == "shadow" else reminded_through(record)
        out.append(
            Pair(
                record["task"],
                record["seed"],
                record["arm"],
                through,
                first_divergence(base, record, through),
            )
        )
    return out


def cache_resets(records: Sequence[Record]) -> dict[str, int]:
    """How the prompt cache stood at each episode's start: reset label -> episodes."""
    counts: dict[str, int] = {}
    for record in records:
        cache = record.get("prompt_cache")
        label = "not recorded" if cache is None else str(cache.get("reset", "none"))
        counts[label] = counts.get(label, 0) + 1
    return counts


def _cache_sentence(records: Sequence[Record]) -> str:
    counts = cache_resets(records)
    if counts.get("slot-erase") == len(records):
        return "The server's prompt cache was emptied before every episode (slot erase)."
    if counts.get("not recorded") == len(records):
        return (
            "These records predate the per-episode cache reset (they hold no "
            "`prompt_cache`): the server's prompt cache carried over from one episode to "
            "the next, so how much of a prompt was recomputed, and with it the floating-point "
            "sums the sampling starts from, depended on the episode run before; a divergence "
            "below may be that rather than anything the arms did."
        )
    return (
        "Prompt cache at the episodes' start: "
        + ", ".join(f"{label} {n}" for label, n in sorted(counts.items()))
        + " (slot-erase: emptied; none: not emptied by the harness; not recorded: the run "
        "predates the reset)."
    )


def table(records: Sequence[Record]) -> list[str]:
    """The report's reproducibility section: the sentence, the table, each divergence."""
    found = pairs(records)
    if not found:
        return ["No episode has an off episode of the same task and seed to compare with."]
    lines = [_cache_sentence(records), ""]
    lines += [
        "| compared with off | over | pairs | agree call for call | diverge |",
        "|---|---|---|---|---|",
    ]
    for arm in ("shadow", "warn", "enforce"):
        chosen = [p for p in found if p.arm == arm]
        if not chosen:
            continue
        over = (
            "the whole episode"
            if arm == "shadow"
            else "through the first reminder's batch (whole episode if none)"
        )
        agree = sum(p.divergence is None for p in chosen)
        lines.append(
            f"| {arm} | {over} | {len(chosen)} | {agree}/{len(chosen)} | {len(chosen) - agree} |"
        )
    diverged = [p for p in found if p.divergence is not None]
    if diverged:
        lines += ["", "First divergences (off's call, then the other arm's):", ""]
        for p in diverged:
            d = p.divergence
            assert d is not None
            lines.append(
                f"- {p.task} s{p.seed}, off vs {p.arm}: call {d.call}: "
                f"`{d.left}` vs `{d.right}`".replace("|", "\\|")
            )
    return lines


def summary_line(records: Sequence[Record]) -> str | None:
    found = pairs(records)
    shadow = [p for p in found if p.arm == "shadow"]
    guarded = [p for p in found if p.arm != "shadow"]
    if not found:
        return None
    reset = cache_resets(records).get("slot-erase", 0) == len(records)
    return (
        f"- Reproducibility: {sum(p.divergence is None for p in shadow)} of {len(shadow)} "
        "off/shadow pairs agree call for call, and "
        f"{sum(p.divergence is None for p in guarded)} of {len(guarded)} warn/enforce "
        "episodes agree with off up to their first reminder, or throughout if none came; "
        + (
            "the prompt cache was emptied before every episode."
            if reset
            else "the prompt cache was not emptied between episodes in these records."
        )
    )
