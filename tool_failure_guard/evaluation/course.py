"""After a reminder: what the model's next batch did, split three ways, success apart.

Recomputed from each record's batches (the committed records predate the split;
:func:`~tool_failure_guard.evaluation.records.follow_up` reads the tool, the
error type and whether a further call followed, all of which they hold):

- *answered without a further call*: the model made no further tool call;
- *changed approach*: another tool, or the same tool not failing the reminded way;
- *repeated the failure*: the same tool failing the same way again (how many of
  these were the identical call, same arguments, is said beside it).

Whether the episode then succeeded is its own column: a change of course that
ends in "I could not find the file" is not a success.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tool_failure_guard.evaluation import stats
from tool_failure_guard.evaluation.records import WOULD_REMIND, follow_up

Record = Mapping[str, Any]
ANSWERED = "answered without a further call"
CHANGED = "changed approach"
REPEATED = "repeated the failure"
#: follow_up's outcome -> the split's category
CATEGORY = {
    "no_tool_calls": ANSWERED,
    "another_tool": CHANGED,
    "another_key": CHANGED,
    "repeated": REPEATED,
}


def _identical(batches: Sequence[Mapping[str, Any]], reminded: int) -> bool:
    """Whether the batch after ``reminded`` only repeated calls of that batch verbatim."""
    failing = {(c["name"], c["args"]) for c in batches[reminded]["calls"]}
    following = [c for c in batches[reminded + 1]["calls"] if not c["duplicate"]]
    return bool(following) and all((c["name"], c["args"]) in failing for c in following)


def outcomes(record: Record) -> list[tuple[str, str, bool]]:
    """Per (would-be) reminder: (follow_up outcome, category, identical call repeated)."""
    batches = record["batches"]
    out = []
    for index, label in enumerate(record["decisions"]):
        if label not in WOULD_REMIND:
            continue
        outcome = follow_up(batches, index)
        same = outcome == "repeated" and _identical(batches, index)
        out.append((outcome, CATEGORY[outcome], same))
    return out


def counts(records: Sequence[Record]) -> dict[str, int]:
    """Category -> reminders, plus ``another_tool``/``another_key``/``identical`` detail."""
    total: dict[str, int] = {}
    for record in records:
        for outcome, category, same in outcomes(record):
            total[category] = total.get(category, 0) + 1
            total[outcome] = total.get(outcome, 0) + 1
            total["identical"] = total.get("identical", 0) + same
    return total


def reached(records: Sequence[Record], arm: str) -> list[Record]:
    return [r for r in records if r["arm"] == arm and outcomes(r)]


def table(records: Sequence[Record]) -> list[str]:
    rows = []
    for arm in ("shadow", "warn", "enforce"):
        chosen = [r for r in records if r["arm"] == arm]
        if not chosen:
            continue
        c = counts(chosen)
        total = sum(c.get(k, 0) for k in (ANSWERED, CHANGED, REPEATED))
        episodes = reached(chosen, arm)
        ok = sum(bool(r["success"]) for r in episodes)
        rows.append(
            [
                arm + (" (none sent: baseline)" if arm == "shadow" else ""),
                str(total),
                str(c.get(ANSWERED, 0)),
                f"{c.get(CHANGED, 0)} ({c.get('another_tool', 0)} another tool, "
                f"{c.get('another_key', 0)} same tool, another outcome)",
                f"{c.get(REPEATED, 0)} ({c.get('identical', 0)} the identical call)",
                stats.share(ok, len(episodes)),
            ]
        )
    header = (
        "arm",
        "reminders (shadow: would-be)",
        ANSWERED,
        CHANGED,
        REPEATED,
        "episodes that then succeeded",
    )
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def summary_line(records: Sequence[Record]) -> str | None:
    sent = [r for r in records if r["arm"] in ("warn", "enforce")]
    base = [r for r in records if r["arm"] == "shadow"]
    c, b = counts(sent), counts(base)
    n_sent = sum(c.get(k, 0) for k in (ANSWERED, CHANGED, REPEATED))
    n_base = sum(b.get(k, 0) for k in (ANSWERED, CHANGED, REPEATED))
    if not (n_sent or n_base):
        return None
    ok_sent = sum(bool(r["success"]) for r in sent if outcomes(r))
    ok_base = sum(bool(r["success"]) for r in base if outcomes(r))
    reached_sent = sum(bool(outcomes(r)) for r in sent)
    reached_base = sum(bool(outcomes(r)) for r in base)
    # until the reminder warn and enforce sample the same course: how many situations are there
    situations = len({(r["task"], r["seed"]) for r in sent if outcomes(r)})
    return (
        f"- After the {n_sent} reminders sent (warn and enforce, from {situations} distinct "
        "task and seed situations: until the reminder both arms sample the same course) the "
        "next batch: "
        f"{c.get(ANSWERED, 0)} answered without a further call, {c.get(CHANGED, 0)} changed "
        f"approach (another tool or another outcome), {c.get(REPEATED, 0)} repeated the "
        f"failure; {ok_sent} of those {reached_sent} episodes then succeeded. At the same "
        f"point in shadow, where nothing was sent: {b.get(ANSWERED, 0)}, {b.get(CHANGED, 0)} "
        f"and {b.get(REPEATED, 0)} of {n_base}; {ok_base} of {reached_base} succeeded."
    )
