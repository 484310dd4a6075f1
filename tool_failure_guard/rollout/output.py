"""Rendering results: a terminal table, and an HTML report with plots (matplotlib, Agg).

The report is written into a temporary directory beside the target and renamed
into place, so a failed run never leaves half a report.

Strings from telemetry (environments, versions, example prompt ids) are written
by fleet members, so the terminal text shows their control characters escaped
(:func:`displayable`, :func:`escape_controls`: ``ESC`` as ``\\x1b``, a newline
as ``\\n``): nothing a record holds can move the cursor, recolour or retitle an
operator's terminal, or forge a line of the table. ``--json`` and the report's
``result.json`` stay exact.
"""

from __future__ import annotations

import base64
import html
import io
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

#: C0 and C1 controls, DEL, and the Unicode line separators and bidirectional controls.
_CONTROL = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(match[0])
    return named or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape_controls(text: str) -> str:
    """``text`` with every control character (newlines too) written as an escape."""
    return _CONTROL.sub(_escape, text)


def displayable(value: Any) -> Any:
    """A copy of a result with :func:`escape_controls` applied to every string in it."""
    if isinstance(value, str):
        return escape_controls(value)
    if isinstance(value, dict):
        return {displayable(k): displayable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [displayable(v) for v in value]
    return value


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return "[" + ", ".join(f"{v:.3g}" for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def check_table(result: dict[str, Any]) -> str:
    result = displayable(result)
    lines = []
    for env, e in result["environments"].items():
        lines.append(
            f"environment {env}: {'MAY ADVANCE' if e['may_advance'] else 'MAY NOT ADVANCE'}"
        )
        for reason in e["reasons"]:
            lines.append(f"  - {reason}")
        lines.append(
            f"  days covered {e['days_covered']} ({e['first_day']} .. {e['last_day']}), "
            f"owners {e['owners']}, modes {', '.join(e['modes'])}"
        )
        lines.append(
            f"  supported-host (drain) prompts {e['supported_prompts']}  "
            f"(reported apart: prompt-only {e['prompt_only_prompts']}, unsupported-host "
            f"{e['unsupported_host_prompts']}; off/channel: {e['off_prompts']})"
        )
        lines.append(
            f"  would_warn {e['would_warn']} ({_pct(e['would_warn_rate'])})  "
            f"would_stop {e['would_stop']} ({_pct(e['would_stop_rate'])})  "
            f"stopped {e['stopped']} ({_pct(e['stopped_rate'])})  "
            f"estimated calls saved {e['estimated_calls_saved']}"
        )
        for kind, c in e["cohorts"].items():
            if kind != "drain":
                lines.append(
                    f"  cohort {kind}: {c['prompts']} prompts, {c['owners']} owners, "
                    f"would_warn {c['would_warn']} ({_pct(c['would_warn_rate'])}), "
                    f"would_stop {c['would_stop']} ({_pct(c['would_stop_rate'])}), "
                    f"stopped {c['stopped']}, calls saved {c['estimated_calls_saved']}"
                )
        lines.append(f"  {'invariant':<34}{'violations':>10}  examples")
        for name, inv in e["invariants"].items():
            examples = ", ".join(inv["examples"])
            lines.append(f"  {name:<34}{inv['violations']:>10}  {examples}")
    verdict = "may advance" if result["may_advance"] else "may NOT advance"
    lines.append(f"check: {verdict}")
    return "\n".join(lines)


def _cohort_lines(label: str, e: dict[str, Any]) -> list[str]:
    lines = [
        f"{label}: treatment ({e['treatment_mode']}) {e['treatment_owners']} "
        f"owners / {e['treatment_prompts']} prompts, control ({e['control_mode']}) "
        f"{e['control_owners']} owners / {e['control_prompts']} prompts"
    ]
    if "assignment" in e:
        a = e["assignment"]
        lines.append(
            f"  assignment {'ok' if a['ok'] else 'NOT ok'}: treatment share "
            f"{_pct(a['treatment_share'])}, versions {', '.join(a['service_versions'])}, "
            f"owners in both arms {a['owners_in_both_arms']}"
        )
    else:
        a = e["before_after"]
        periods = "; ".join(
            f"{mode} {p['first_day']} .. {p['last_day']} ({p['days_covered']} days, "
            f"versions {', '.join(p['service_versions'])})"
            for mode, p in sorted(a["periods"].items())
        )
        lines.append(f"  before/after {'ok' if a['ok'] else 'NOT ok'} (not randomised): {periods}")
        if a["overlapping"]:
            lines.append("  note: the warn period starts before the shadow period ends")
    for problem in a["problems"]:
        lines.append(f"  - {problem}")
    lines.append(
        f"  {'gate':<28}{'kind':<26}{'estimate':>10}{'low':>10}{'high':>10}  {'margin':<14}verdict"
    )
    for g in e["gates"]:
        lines.append(
            f"  {g['gate']:<28}{g['kind']:<26}{_num(g['estimate']):>10}"
            f"{_num(g['low']):>10}{_num(g['high']):>10}  {_num(g['margin']):<14}"
            f"{g['verdict']}"
        )
        if g.get("examples"):
            lines.append(f"    examples: {', '.join(g['examples'])}")
    return lines


def gates_table(result: dict[str, Any]) -> str:
    result = displayable(result)
    phase = result.get("phase", "enforce")
    lines = [f"phase {phase}: {result.get('comparison', '')}"]
    for env, e in result["environments"].items():
        lines.extend(_cohort_lines(f"environment {env} (drain hosts)", e))
        for kind, cohort in e.get("cohorts", {}).items():
            lines.extend(_cohort_lines(f"environment {env}, cohort {kind} (judged apart)", cohort))
        if e.get("unsupported_host_prompts"):
            lines.append(
                f"  unsupported-host prompts (guard inert, reported apart): "
                f"{e['unsupported_host_prompts']}"
            )
    verdict = "may advance" if result["may_advance"] else "may NOT advance"
    lines.append(f"gates: {verdict}")
    return "\n".join(lines)


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def forest_plot(result: dict[str, Any]) -> Any:
    """Each gate's interval (line) and estimate (dot) against its margin(s) (dashed).

    One small panel per gate and environment, in the gate's own units: a
    rate difference, a ratio, or a consistency band.  Colour is the verdict.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        (env, g)
        for env, e in result["environments"].items()
        for g in e["gates"]
        if g["low"] is not None and g["high"] is not None
    ]
    figure, axes = plt.subplots(
        max(1, len(panels)), 1, figsize=(8, 0.4 + 0.85 * max(1, len(panels))), squeeze=False
    )
    colours = {"pass": "tab:green", "fail": "tab:red", "inconclusive": "tab:orange"}
    for ax, (env, g) in zip(axes[:, 0], panels, strict=False):
        margins = g["margin"] if isinstance(g["margin"], list) else [g["margin"]]
        ax.plot([g["low"], g["high"]], [0, 0], color=colours[g["verdict"]], linewidth=4)
        ax.plot([g["estimate"]], [0], "o", color="black", markersize=5)
        for margin in margins:
            ax.axvline(margin, color="grey", linestyle="--", linewidth=1)
        ax.set_yticks([0], [f"{escape_controls(env)}: {g['gate']}"])
        ax.set_ylim(-1, 1)
        ax.tick_params(axis="x", labelsize=7)
        ax.text(1.01, 0.5, g["verdict"], transform=ax.transAxes, va="center", fontsize=8)
    phase = result.get("phase", "enforce")
    design = "before/after, not randomised" if phase == "warn" else "randomised per owner"
    figure.suptitle(f"{phase} gates ({design}): line 95 % interval, dot estimate, dashed margin")
    figure.tight_layout()
    return figure


def daily_plot(daily: list[tuple[str, str, float, float, float]]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = sorted({row[0] for row in daily})
    figure, axes = plt.subplots(
        len(envs) or 1, 1, figsize=(8, 0.6 + 2.6 * max(1, len(envs))), squeeze=False
    )
    for ax, env in zip(axes[:, 0], envs, strict=False):
        rows = [r for r in daily if r[0] == env]
        days = [r[1][5:] for r in rows]
        for index, label in ((2, "would_warn"), (3, "would_stop"), (4, "stop")):
            ax.plot(days, [100 * r[index] for r in rows], marker="o", label=label)
        ax.set_title(f"{escape_controls(env)}: daily rates per supported-host prompt")
        ax.set_ylabel("% of prompts")
        ax.legend()
    figure.tight_layout()
    return figure


def write_report(
    directory: Path,
    title: str,
    text: str,
    figures: list[tuple[str, Any]],
    data: dict[str, Any],
) -> None:
    """Write ``index.html`` (+ PNGs, result.json) to a temp dir, then rename it into place."""
    import json

    import matplotlib.pyplot as plt

    parent = directory.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=parent))
    try:
        images = []
        for name, figure in figures:
            encoded = _png(figure)
            (staging / f"{name}.png").write_bytes(base64.b64decode(encoded))
            images.append(
                f'<h2>{html.escape(name)}</h2><img alt="{html.escape(name)}" '
                f'src="data:image/png;base64,{encoded}">'
            )
            plt.close(figure)
        page = (
            "<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title></head><body>"
            f"<h1>{html.escape(title)}</h1><pre>{html.escape(text)}</pre>"
            + "".join(images)
            + "</body></html>"
        )
        (staging / "index.html").write_text(page, encoding="utf-8")
        (staging / "result.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
        if directory.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old.", dir=parent))
            os.replace(directory, old / directory.name)
            os.replace(staging, directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
