"""``docs/evaluation.md``: the report, generated from the saved episode records only.

:func:`render` is a pure function of the records and the run's metadata
(``run.json``), so a test can regenerate the committed report from the
committed records and compare.  :func:`plot` draws the calls-per-episode
figure (matplotlib, Agg).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tool_failure_guard.core import LOOP_TOOL_CALL_CAP
from tool_failure_guard.evaluation import (
    agreement,
    course,
    sections,
    stats,
    totals,
    transcripts_section,
)
from tool_failure_guard.evaluation.howto import HOW_TO_RUN, SETUP_FAILURES, SETUP_FAILURES_NOTE
from tool_failure_guard.evaluation.records import errored
from tool_failure_guard.evaluation.replays import PEER_RULES, per_key_guard, shipped_guard
from tool_failure_guard.evaluation.tasks import TASKS

Record = Mapping[str, Any]


def scale_note(meta: Mapping[str, Any], records: Sequence[Record]) -> str:
    cells = stats.group(records, "task", "arm")
    smallest = min((len(v) for v in cells.values()), default=0)
    first, whole, pairs = sections.off_shadow_agreement(records)
    return (
        f"{len(records)} episodes: {len(cells)} task × arm cells of {smallest} or more "
        f"seeds each, one {meta.get('model', '?')} model on {meta.get('hardware', '?')}. "
        "With so few episodes per cell the intervals are wide and overlap; a difference "
        "between arms is evidence only where the intervals separate, and per-task "
        "numbers are anecdotes. The seeds are shared across arms. Shadow sends the model "
        f"exactly what off sends: of {pairs} off/shadow pairs (same task and seed), {first} "
        f"made the same first batch and {whole} the same calls throughout (see "
        "Reproducibility), so an arm's episodes are the other arms' sampling until a "
        "reminder or a stop makes them differ, except in the pairs named there. The calls "
        "per episode are bimodal (a few, or the cap), so beside each median stand the "
        "totals, and a difference that one episode carries is marked. A small "
        "quantised model loops "
        "readily and reasons weakly; a "
        "stronger model may repeat failures less and heed reminders more. The peer "
        "rules are re-statements of documented rules, not those tools' code, and the "
        "replays assume the same calls would have been made without a reminder."
    )


def summary(records: Sequence[Record]) -> list[str]:
    """The headline facts, each computed from the records."""
    failures = [r for r in records if r["kind"] == "failure"]
    controls = [r for r in records if r["kind"] == "control"]
    remind = sum(r["would_remind"] > 0 for r in records)
    cap = sum(r.get("loop_type") == LOOP_TOOL_CALL_CAP for r in records)
    cap_controls = sum(r.get("loop_type") == LOOP_TOOL_CALL_CAP for r in controls)
    no_calls = sum(not r.get("tool_calls") for r in failures)
    calls = stats.values(failures, "tool_calls")
    bad = sum(errored(r) for r in records)
    clean_controls = [r for r in controls if r["arm"] in ("off", "shadow")]
    peer_false = {
        label: sum(rule(r["batches"]) is not None for r in clean_controls)
        for label, rule in PEER_RULES.items()
    }
    lines = []
    if bad:
        lines.append(
            f"- **{'Every episode' if bad == len(records) else f'{bad} of {len(records)} episodes'}"
            " errored** (the endpoint, the agent or the cache reset failed: "
            + ", ".join(sorted({str(r.get("acp_stop", ""))[:200] for r in records if errored(r)}))
            + "): an errored episode says nothing about the model or the guard, and the run "
            "exited 1."
        )
    lines += [
        f"- The guard reminded or would have reminded in {remind} of {len(records)} "
        f"episodes. On the failure tasks the model made a median of "
        f"{stats.fmt(statistics.median(calls)) if calls else '–'} tool calls "
        f"per episode, {stats.fmt(sum(calls))} over all {len(failures)} ({no_calls} made "
        f"none; with ≤{totals.FEW_CALLS} calls · more · ended at the cap: "
        f"{totals.shape(failures)})"
        + (
            ": it never failed the same way 8 times, so the guard's threshold was not reached."
            if remind == 0
            else "."
        ),
        f"- {cap} episodes ended at the per-prompt tool-call cap, {cap_controls} of them on "
        "control tasks: the per-prompt cap (protection 4) ended them; this guard acts only "
        "on calls failing the same way.",
    ]
    reached = {
        arm: [
            float(sections.calls_after_reminder(r) or 0)
            for r in records
            if r["arm"] == arm and sections.reminder_index(r) is not None
        ]
        for arm in ("shadow", "warn", "enforce")
    }
    if any(reached.values()):
        lines.append(
            "- From the (would-be) reminder on, the model made a median of "
            + ", ".join(
                f"{stats.fmt(statistics.median(v))} further calls in {arm} "
                f"({len(v)} episodes, {stats.fmt(sum(v))} calls in all"
                f"{', nothing sent' if arm == 'shadow' else ''})"
                for arm, v in reached.items()
                if v
            )
            + "."
        )
    for line in (course.summary_line(records), agreement.summary_line(records)):
        if line is not None:
            lines.append(line)
    guard_stops = [r for r in records if r.get("loop_type") == "repeated_tool_execution_failure"]
    lines.append(
        f"- The guard stopped {len(guard_stops)} episodes, "
        f"{sum(r['kind'] == 'control' for r in guard_stops)} of them on control tasks."
    )
    clean = [r for r in records if r["arm"] in ("off", "shadow")]
    differ = sum(shipped_guard(r["batches"]) != per_key_guard(r["batches"]) for r in clean)
    lines.append(
        f"- The one-streak-per-key what-if fires differently from the shipped guard on "
        f"{differ} of {len(clean)} off/shadow episodes."
    )
    lines += [
        f"- {label} [re-stated rule] would have fired on {n} of {len(clean_controls)} "
        "off/shadow control episodes."
        for label, n in peer_false.items()
    ]
    return lines


def render(records: Sequence[Record], meta: Mapping[str, Any], *, plot_name: str) -> str:
    agree, guarded = sections.replay_agreement(records)
    out = [
        "# Evaluation on a real model",
        "",
        "<!-- generated by `python -m tool_failure_guard.evaluation report` from the episode "
        "records in docs/evaluation/ (which `make eval` rewrites only when they are named); "
        "do not edit by hand -->",
        "",
        "What the guard changes when a real model keeps failing the same way, measured "
        "through the real path: the project's ACP client drives "
        "`tool-failure-guard agent --model openai:NAME` over stdio, the agent calls the "
        "endpoint through the official `openai` SDK. Every number below is computed from "
        "the saved episode records (`docs/evaluation/episodes.jsonl`, from the agent's own "
        "`--telemetry file:` output and session history); `tests/test_evaluation.py` "
        "and `tests/test_eval_checks.py` recompute them. The agent runs with "
        "`tool_failure_guard/evaluation/system_prompt.txt`: the built-in "
        'system prompt plus "make the call, never describe it" (with the built-in one '
        "alone this 1.5B model mostly described its calls in prose and made none). Each "
        "arm and seed is one agent process; each task is a fresh session in a fresh "
        "workspace.",
        "",
        "## Run",
        "",
        *sections.meta_table(meta, records),
        "",
        "## Summary",
        "",
        *summary(records),
        "",
        "## Scale: what these numbers can and cannot show",
        "",
        scale_note(meta, records),
        "",
        "## Tasks",
        "",
        *sections.table(
            ("task", "kind", "provokes", "prompt"),
            [[t.name, t.kind, t.provokes or "–", t.prompt.replace("|", "\\|")] for t in TASKS],
        ),
        "",
        "## Per arm and task kind",
        "",
        "Medians over episodes with 95 % bootstrap intervals of the median "
        f"({stats.BOOTSTRAP_RESAMPLES} resamples, seed {stats.BOOTSTRAP_SEED}). Tokens are "
        "the summed `usage` of every request (prompt tokens include the re-sent prefix). "
        "Wall time is the agent's own per-prompt wall time.",
        "",
        *sections.per_arm_kind(records),
        "",
        "Totals over the same tasks and seeds, beside the medians (the calls per episode "
        "are bimodal). Each difference from off is paired (the same task and seed in both "
        "arms); *rests on* names the one episode pair without which the difference would "
        "vanish or turn.",
        "",
        *totals.table(records, sections.arms_of(records), sections.KIND_ORDER),
        "",
        f"![tool calls per episode by arm]({plot_name})",
        "",
        "Per task (median tool calls, checker successes):",
        "",
        *sections.per_task(records),
        "",
        "## How this model uses its tools",
        "",
        "Over every arm (the guard cannot change a first turn). A reply that is a tool call "
        "written as text (a JSON object naming a tool, outside the fenced block the chat "
        "template asks for) is not parsed by the server as a call, so the episode ends "
        "with that text; an identical call repeated within one batch is the model "
        "degenerating into repetition until `max_tokens`.",
        "",
        *sections.model_behaviour(records),
        "",
        "## How episodes ended",
        "",
        "The loop type when a protection stopped the prompt, else the ACP stop reason.",
        "",
        *sections.endings(records),
        "",
        "## After a reminder: did the model change course?",
        "",
        "For each reminder (warn and enforce put it into the next request), the next batch: "
        "the model *answered without a further call*, *changed approach* (another tool, or "
        "the same tool not failing the reminded way), or *repeated the failure* (the same "
        "tool failing the same way; how many were the identical call is in brackets). "
        "Whether the episode then succeeded is apart: answering is not succeeding. The "
        "shadow row is the baseline: the same point in shadow episodes, where the reminder "
        "was only counted, not sent. Recomputed from each record's batches (tool, error "
        "type, arguments, whether a further call followed).",
        "",
        *course.table(records),
        "",
        "## From the reminder on: what the guard saves",
        "",
        "The episodes in which the guard reminded (warn, enforce) or would have reminded "
        "(shadow), and the tool calls the model made after that batch. In shadow nothing "
        "was sent, so its row is what the model does on its own from that point; warn "
        "shows what the reminder alone changes, enforce what the reminder and the stop "
        "change. Until the reminder the arms mostly sample the same course (see "
        "Reproducibility), so the rows are largely the same task and seed pairs, listed in "
        "each row.",
        "",
        *sections.after_reminder(records),
        "",
        "## Reproducibility: episodes that must agree",
        "",
        "Shadow sends the model exactly what off sends, and warn and enforce do until the "
        "request after their first reminder; the seeds are the same. So off and shadow must "
        "agree call for call (and in their last answer), and warn and enforce must agree "
        "with off through the batch at which they reminded. Each pair is checked here and "
        "the first divergence named.",
        "",
        *agreement.table(records),
        "",
        "## Control tasks: false reminders and stops",
        "",
        "A control task is one the model can finish with a few successful calls. The guard "
        "only counts eligible failures of one key, so a (would-)reminder here means the "
        "model itself went off and failed the same way 8 times (the records show which "
        "calls); it is false only in the sense that the task did not call for it.",
        "",
        *sections.controls(records),
        "",
        "## Offline replays of the same receipts",
        "",
        "Over the `off` and `shadow` episodes (the model's course was not changed by a "
        "reminder), each rule's firing: episodes where it fired, and the median call "
        "number at which it did. Rules marked *re-stated* are re-statements of those "
        "projects' documented rules (identical tool name + arguments N times in a row; "
        "the same tool returning the same error text, first 100 characters, 3 times in a "
        "row), not their code. The what-if keeps one streak per failure key (the shipped "
        "guard has one active candidate, as the specification says); it is computed "
        "offline with the shipped guard per key, and the shipped behaviour does not change.",
        "",
        *sections.replays(records),
        "",
        "What-if per failure task (reminder only):",
        "",
        *sections.per_task_whatif(records),
        "",
        f"Replay check: on {agree} of {guarded} guarded episodes the shipped guard, replayed "
        "offline over the recorded receipts, gives exactly the recorded decisions.",
        "",
        *transcripts_section.lines(),
        "## Running it",
        "",
        HOW_TO_RUN,
        "",
        "### Set-up failures",
        "",
        SETUP_FAILURES_NOTE,
        "",
        "| failure | what set-up does |",
        "|---|---|",
        *(f"| {failure} | {action} |" for failure, action in SETUP_FAILURES),
        "",
    ]
    return "\n".join(out)


def plot(records: Sequence[Record], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = sections.arms_of(records)
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for axis, kind in zip(axes, sections.KIND_ORDER, strict=True):
        data = [
            stats.values([r for r in records if r["arm"] == a and r["kind"] == kind], "tool_calls")
            for a in arms
        ]
        axis.boxplot([d or [0.0] for d in data], tick_labels=arms, showfliers=False)
        for position, points in enumerate(data, start=1):
            jitter = [position + 0.08 * ((i % 5) - 2) for i in range(len(points))]
            axis.scatter(jitter, points, s=12, alpha=0.6)
        axis.set_title(f"{kind} tasks")
        axis.set_xlabel("arm")
    axes[0].set_ylabel("tool calls per episode")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(figure)
