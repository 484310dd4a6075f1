"""The report's tables, each a pure function of the episode records.

Every table is built from the saved records alone (and the run's metadata for
the first), so :mod:`~tool_failure_guard.evaluation.report` can be regenerated from
the committed records and compared by a test.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from tool_failure_guard.evaluation import stats, totals
from tool_failure_guard.evaluation.replays import (
    PEER_RULES,
    per_key_guard,
    shipped_decisions,
    shipped_guard,
)
from tool_failure_guard.evaluation.tasks import TASKS

ARM_ORDER = ("off", "shadow", "warn", "enforce")
KIND_ORDER = ("failure", "control")
Record = Mapping[str, Any]
#: Recorded telemetry decision labels -> the guard's decision kinds.
LABEL_TO_KIND = {"warned": "warn", "stopped": "stop"}


def arms_of(records: Sequence[Record]) -> list[str]:
    present = {r["arm"] for r in records}
    return [a for a in ARM_ORDER if a in present]


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def meta_table(meta: Mapping[str, Any], records: Sequence[Record]) -> list[str]:
    rows = [
        ("model", str(meta.get("model", "?"))),
        ("weights", str(meta.get("weights", "?"))),
        ("server", str(meta.get("server_version", "?"))),
        ("server threads", str(meta.get("server_threads", "–"))),
        ("hardware", str(meta.get("hardware", "?"))),
        ("date (UTC)", str(meta.get("date", "?"))),
        ("sampling", str(meta.get("sampling", "?"))),
        ("per-prompt tool-call cap", str(meta.get("tool_call_cap", "?"))),
        (
            "prompt cache between episodes",
            {
                "slot-erase": "emptied before every episode (slot erase, --cache-ram 0)",
                "none": "not reset",
            }.get(
                str(meta.get("cache_reset")),
                "not recorded (the run predates the per-episode reset: carried over)",
            ),
        ),
        ("harness timeout per episode", f"{meta['episode_timeout_s']:g} s")
        if "episode_timeout_s" in meta
        else ("harness timeout per episode", "900 s (not recorded: the default then)"),
        ("seeds", str(meta.get("seeds", "?"))),
        ("episodes", str(len(records))),
        ("measured run time", str(meta.get("run_time", "?"))),
    ]
    if "setup_this_run" in meta:
        rows.append(("set-up on this run", str(meta["setup_this_run"])))
    setup = meta.get("setup_measured") or {}
    rows += [(f"set-up: {step}", str(spent)) for step, spent in sorted(setup.items())]
    return table(("", "value"), rows)


def per_arm_kind(records: Sequence[Record]) -> list[str]:
    groups = stats.group(records, "arm", "kind")
    rows = []
    for arm in arms_of(records):
        for kind in KIND_ORDER:
            chosen = groups.get((arm, kind), [])
            if not chosen:
                continue
            cells = [
                stats.fmt_interval(stats.median_interval(stats.values(chosen, key)))
                for key in stats.METRICS.values()
            ]
            ok = sum(bool(r["success"]) for r in chosen)
            rows.append([arm, kind, str(len(chosen)), *cells, stats.share(ok, len(chosen))])
    return table(("arm", "tasks", "n", *stats.METRICS, "success"), rows)


def per_task(records: Sequence[Record]) -> list[str]:
    arms = arms_of(records)
    groups = stats.group(records, "task", "arm")
    rows = []
    for task in TASKS:
        cells = []
        for arm in arms:
            chosen = groups.get((task.name, arm), [])
            if not chosen:
                cells.append("–")
                continue
            calls = stats.values(chosen, "tool_calls")
            ok = sum(bool(r["success"]) for r in chosen)
            mid = stats.fmt(statistics.median(calls)) if calls else "–"
            cells.append(f"{mid} calls, {stats.share(ok, len(chosen))} ok")
        if any(c != "–" for c in cells):
            rows.append([task.name, task.kind, *cells])
    return table(("task", "kind", *arms), rows)


def endings(records: Sequence[Record]) -> list[str]:
    labels = sorted({stats.stop_label(r) for r in records})
    groups = stats.group(records, "arm")
    rows = []
    for arm in arms_of(records):
        chosen = groups[(arm,)]
        rows.append([arm, *(str(sum(stats.stop_label(r) == lb for r in chosen)) for lb in labels)])
    return table(("arm", *labels), rows)


def controls(records: Sequence[Record]) -> list[str]:
    rows = []
    for arm in arms_of(records):
        chosen = [r for r in records if r["arm"] == arm and r["kind"] == "control"]
        if not chosen:
            continue
        remind = sum(r["would_remind"] > 0 for r in chosen)
        stop = sum(r["would_stop"] > 0 for r in chosen)
        guard_stop = sum(r.get("loop_type") == "repeated_tool_execution_failure" for r in chosen)
        rows.append([arm, str(len(chosen)), str(remind), str(stop), str(guard_stop)])
    return table(
        (
            "arm",
            "control episodes",
            "with a (would-)reminder",
            "with a (would-)stop",
            "stopped by the guard",
        ),
        rows,
    )


def fired(values: Sequence[int | None]) -> str:
    hits = [v for v in values if v is not None]
    if not hits:
        return f"0/{len(values)}"
    summary = stats.median_interval([float(v) for v in hits])
    assert summary is not None
    return f"{len(hits)}/{len(values)} (median call {stats.fmt(summary[0])})"


def replays(records: Sequence[Record]) -> list[str]:
    clean = [r for r in records if r["arm"] in ("off", "shadow")]
    rules: dict[str, Any] = {
        "shipped guard: reminder": lambda b: shipped_guard(b)[0],
        "shipped guard: stop": lambda b: shipped_guard(b)[1],
        "what-if one streak per key: reminder": lambda b: per_key_guard(b)[0],
        "what-if one streak per key: stop": lambda b: per_key_guard(b)[1],
        **{f"{label} [re-stated rule]": rule for label, rule in PEER_RULES.items()},
    }
    kinds = [k for k in KIND_ORDER if any(r["kind"] == k for r in clean)]
    rows = []
    for label, rule in rules.items():
        cells = [fired([rule(r["batches"]) for r in clean if r["kind"] == k]) for k in kinds]
        rows.append([label, *cells])
    return table(("rule (fires at)", *(f"{k} episodes" for k in kinds)), rows)


def per_task_whatif(records: Sequence[Record]) -> list[str]:
    clean = [r for r in records if r["arm"] in ("off", "shadow") and r["kind"] == "failure"]
    rows = []
    for task in TASKS:
        chosen = [r for r in clean if r["task"] == task.name]
        if not chosen:
            continue
        shipped = [shipped_guard(r["batches"]) for r in chosen]
        variant = [per_key_guard(r["batches"]) for r in chosen]
        earlier = sum(
            v[0] is not None and (s[0] is None or v[0] < s[0])
            for s, v in zip(shipped, variant, strict=True)
        )
        rows.append(
            [
                task.name,
                str(len(chosen)),
                fired([s[0] for s in shipped]),
                fired([v[0] for v in variant]),
                str(earlier),
            ]
        )
    return table(
        ("task", "episodes", "shipped: reminder", "per key: reminder", "per key earlier"), rows
    )


def replay_agreement(records: Sequence[Record]) -> tuple[int, int]:
    """(episodes whose offline shipped-guard decisions equal the recorded ones, guarded total)."""
    guarded = [r for r in records if r["arm"] != "off"]
    agree = 0
    for record in guarded:
        offline = shipped_decisions(record["batches"], record["arm"])
        recorded = [LABEL_TO_KIND.get(d, d) for d in record["decisions"]]
        agree += offline == recorded
    return agree, len(guarded)


#: A reply that is a tool call written as text: the server did not parse it as a call.
_CALL_AS_TEXT = re.compile(
    r'"name"\s*:\s*"(?:read_file|write_file|list_directory|run_shell_command|mcp__)'
)
_REMIND_LABELS = frozenset({"warned", "would_warn"})


def _repeats_within_a_batch(record: Record) -> bool:
    for batch in record["batches"]:
        seen = [(c["name"], c["args"]) for c in batch["calls"]]
        if len(set(seen)) < len(seen):
            return True
    return False


def model_behaviour(records: Sequence[Record]) -> list[str]:
    """How this model uses its tools, whatever the arm: what the guard works against."""
    rows = []
    for kind in KIND_ORDER:
        chosen = [r for r in records if r["kind"] == kind]
        if not chosen:
            continue
        as_text = sum(bool(_CALL_AS_TEXT.search(r["final_text"] or "")) for r in chosen)
        no_calls = sum(not r["tool_calls"] for r in chosen)
        repeats = sum(_repeats_within_a_batch(r) for r in chosen)
        sizes = [float(len(b["calls"])) for r in chosen for b in r["batches"]]
        rows.append(
            [
                kind,
                str(len(chosen)),
                stats.share(no_calls, len(chosen)),
                stats.share(as_text, len(chosen)),
                stats.share(repeats, len(chosen)),
                stats.fmt(statistics.median(sizes)) if sizes else "–",
                stats.fmt(max(sizes)) if sizes else "–",
            ]
        )
    return table(
        (
            "tasks",
            "episodes",
            "no tool call",
            "last reply a call written as text",
            "an identical call twice in one batch",
            "median calls per batch",
            "most calls in a batch",
        ),
        rows,
    )


def reminder_index(record: Record) -> int | None:
    """The batch at which the guard (would have) reminded, or None."""
    for index, label in enumerate(record["decisions"]):
        if label in _REMIND_LABELS:
            return index
    return None


def calls_after_reminder(record: Record) -> int | None:
    """Tool calls the model made after the (would-be) reminder's batch."""
    index = reminder_index(record)
    if index is None:
        return None
    return sum(len(batch["calls"]) for batch in record["batches"][index + 1 :])


def after_reminder(records: Sequence[Record]) -> list[str]:
    """What the episodes that reached the reminder did from there on, per arm."""
    rows = []
    paired = {
        (r["arm"], (r["task"], r["seed"])): float(calls_after_reminder(r) or 0)
        for r in records
        if reminder_index(r) is not None
    }
    for arm in ("shadow", "warn", "enforce"):
        chosen = [r for r in records if r["arm"] == arm and reminder_index(r) is not None]
        if not chosen:
            continue
        after = [float(calls_after_reminder(r) or 0) for r in chosen]
        ends: dict[str, int] = {}
        for record in chosen:
            label = stats.stop_label(record)
            ends[label] = ends.get(label, 0) + 1
        rows.append(
            [
                arm + (" (nothing sent: baseline)" if arm == "shadow" else ""),
                str(len(chosen)),
                stats.fmt_interval(stats.median_interval(after)),
                stats.fmt(sum(after)),
                "–" if arm == "shadow" else totals.after_reminder_difference(paired, arm),
                ", ".join(f"{label} {n}" for label, n in sorted(ends.items())),
                ", ".join(sorted(f"{r['task']} s{r['seed']}" for r in chosen)),
                stats.share(sum(bool(r["success"]) for r in chosen), len(chosen)),
            ]
        )
    if not rows:
        return ["No episode reached the (would-be) reminder."]
    return table(
        (
            "arm",
            "episodes reaching the reminder",
            "calls after it (median)",
            "calls after it (total)",
            "vs shadow (paired)",
            "ended by",
            "episodes (task, seed)",
            "success",
        ),
        rows,
    )


def off_shadow_agreement(records: Sequence[Record]) -> tuple[int, int, int]:
    """(pairs with the same first batch, pairs with the same calls throughout, pairs).

    A pair is the off and the shadow episode of one task and seed.  Shadow sends
    the model exactly what off sends, so with a seeded server the two would make
    the same calls throughout if the server's sampling were reproducible.
    """
    calls: dict[tuple[str, str, int], list[list[tuple[str, str]]]] = {}
    for record in records:
        if record["arm"] in ("off", "shadow"):
            key = (record["arm"], record["task"], record["seed"])
            calls[key] = [[(c["name"], c["args"]) for c in b["calls"]] for b in record["batches"]]
    pairs = [(t, s) for (arm, t, s) in calls if arm == "off" and ("shadow", t, s) in calls]
    first = sum(calls[("off", t, s)][:1] == calls[("shadow", t, s)][:1] for t, s in pairs)
    whole = sum(calls[("off", t, s)] == calls[("shadow", t, s)] for t, s in pairs)
    return first, whole, len(pairs)
