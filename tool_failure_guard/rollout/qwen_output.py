"""Terminal tables of ``rollout check``/``gates`` on a Qwen Code fleet."""

from __future__ import annotations

from typing import Any

from tool_failure_guard.rollout.output import _num, _pct, escape_controls


def _text(value: Any) -> str:
    """A value from the records, its control characters escaped (a table stays a table)."""
    return escape_controls(str(value))


def check_table(result: dict[str, Any]) -> str:
    lines = ["agent qwen-code: Qwen Code's own telemetry (docs/rollout.md, Qwen Code fleets)"]
    for env, e in result["environments"].items():
        lines.append(f"environment {_text(env)}: MAY NOT ADVANCE")
        lines.extend(f"  - {_text(reason)}" for reason in e["reasons"])
        lines.append(
            f"  days covered {e['days_covered']} ({e['first_day']} .. {e['last_day']}), "
            f"modes {', '.join(_text(m) for m in e['modes']) or '-'}"
        )
        lines.append(
            f"  drain prompts {e['supported_prompts']}  (reported apart: unsupported-host "
            f"{e['unsupported_host_prompts']}, no guard record in the session "
            f"{e['unknown_boundary_prompts']}; guard records of prompts without a "
            f"user_prompt record: {e['guard_records_without_prompt_record']})"
        )
        if e["supported_prompts"]:
            lines.append(
                f"  would_warn {e['would_warn']} ({_pct(e['would_warn_rate'])})  "
                f"would_stop {e['would_stop']} ({_pct(e['would_stop_rate'])})  "
                f"stopped {e['stopped']} ({_pct(e['stopped_rate'])})  "
                f"estimated calls saved {e['estimated_calls_saved']}"
            )
        counter = e["guard_counter"]
        if counter is not None:
            state = "agree" if counter["consistent"] else "DISAGREE"
            lines.append(
                f"  guard counter {_counts(counter['counter'])} and log records "
                f"{_counts(counter['log_records'])} {state}"
            )
        lines.append(f"  {'invariant':<34}{'violations':>10}  examples")
        for name, inv in e["invariants"].items():
            if inv["violations"] is None:
                lines.append(f"  {name:<34}{'-':>10}  {inv['note']}")
            else:
                examples = ", ".join(_text(x) for x in inv["examples"])
                lines.append(f"  {name:<34}{inv['violations']:>10}  {examples}")
    lines.append("check: may NOT advance")
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return "{" + ", ".join(f"{_text(k)} {v}" for k, v in sorted(counts.items())) + "}"


def gates_table(result: dict[str, Any]) -> str:
    lines = [
        "agent qwen-code: Qwen Code's own telemetry (docs/rollout.md, Qwen Code fleets)",
        f"phase {result['phase']}: {result['comparison']}",
    ]
    if not result["environments"]:
        lines.append(f"no {result['phase']} prompts with a recorded mode")
    for env, e in result["environments"].items():
        lines.append(
            f"environment {_text(env)}: treatment ({e['treatment_mode']}) "
            f"{e['treatment_owners']} owners / {e['treatment_prompts']} prompts, control "
            f"({e['control_mode']}) {e['control_owners']} owners / {e['control_prompts']} prompts"
        )
        lines.append(
            f"  {'gate':<28}{'estimate':>10}{'low':>10}{'high':>10}  {'margin':<12}{'verdict'}"
        )
        for g in e["gates"]:
            margin = "-" if g["margin"] is None else _num(g["margin"])
            lines.append(
                f"  {g['gate']:<28}{_num(g['estimate']):>10}{_num(g['low']):>10}"
                f"{_num(g['high']):>10}  {margin:<12}{g['verdict']}"
            )
            if g["verdict"] == "not_computable" or g["gate"] == "enforced_stops_well_formed":
                lines.append(f"      {g['note']}")
    lines.append("gates: may NOT advance")
    return "\n".join(lines)
