"""SWE-bench's own verdicts beside the trajectories: whether each instance was resolved.

Published SWE-bench runs carry what the benchmark's harness decided, and a
run's outcome there is that verdict, not what the agent said of itself (an
agent that submits has only *finished*).  Two forms are read, both from the
SWE-bench harness:

- ``logs/<instance id>/report.json`` (per instance; ``swebench.harness``'s
  ``run_evaluation`` writes it): ``{"<instance id>": {"resolved": bool,
  "patch_is_None": …, "patch_exists": …, "patch_successfully_applied": …,
  "tests_status": …}}``, or that inner object alone (published runs copy it so; the
  instance is then the folder's name); verdict source :data:`REPORT`;
- a summary: the harness's final ``<model>.<run id>.json`` and the full
  report ``sb-cli get-report`` saves (``<subset>__<split>__<run id>.json``),
  both with ``resolved_ids`` and ``unresolved_ids`` (and ``error_ids``,
  ``empty_patch_ids``, unresolved too); verdict source :data:`SUMMARY`.

A per-instance report wins over a summary.  Two files that disagree about an
instance: the first (in path order) is kept, the second is listed as skipped
with the conflict.  A verdict applies to a run whose id is the instance id
(mini-swe-agent names a trajectory ``<instance id>.traj.json``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import attrs

REPORT: Final = "swe-bench report.json"
SUMMARY: Final = "swe-bench summary"
#: The largest verdict file read (bytes): a summary of every instance is far smaller.
MAX_VERDICT_BYTES: Final = 64 << 20
_HEAD_BYTES: Final = 64 << 10
_UNRESOLVED_LISTS: Final = ("unresolved_ids", "error_ids", "empty_patch_ids")


@attrs.frozen
class Verdict:
    resolved: bool
    source: str  #: :data:`REPORT` or :data:`SUMMARY`
    path: str


def _load(path: Path) -> Any:
    """The file's JSON when its start looks like a verdict file (else None, read no further)."""
    try:
        if path.stat().st_size > MAX_VERDICT_BYTES:
            return None
        with path.open("rb") as handle:
            head = handle.read(_HEAD_BYTES)
            if not head.lstrip().startswith(b"{") or b'"resolved' not in head:
                return None  # (a summary names resolved_instances before its id lists)
            text = head + handle.read(MAX_VERDICT_BYTES)
    except OSError:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def read(path: Path) -> dict[str, Verdict] | None:
    """The verdicts ``path`` holds, or None when it is not a verdict file."""
    data = _load(path)
    if not isinstance(data, dict) or not data:
        return None
    if isinstance(data.get("resolved_ids"), list) and isinstance(data.get("unresolved_ids"), list):
        found: dict[str, Verdict] = {}
        for key in _UNRESOLVED_LISTS:
            for instance in data.get(key) or []:
                if isinstance(instance, str):
                    found[instance] = Verdict(False, SUMMARY, str(path))
        for instance in data["resolved_ids"]:
            if isinstance(instance, str):
                found[instance] = Verdict(True, SUMMARY, str(path))
        return found
    if path.name == "report.json" and all(
        isinstance(v, dict) and isinstance(v.get("resolved"), bool) for v in data.values()
    ):
        return {
            instance: Verdict(value["resolved"], REPORT, str(path))
            for instance, value in data.items()
        }
    if path.name == "report.json" and isinstance(data.get("resolved"), bool) and path.parent.name:
        # one instance's report with its key taken off, as published runs copy it:
        # logs/<instance id>/report.json holding {"resolved": ..., "tests_status": ...}
        return {path.parent.name: Verdict(data["resolved"], REPORT, str(path))}
    return None


def merge(
    files: Sequence[tuple[str, dict[str, Verdict]]],
) -> tuple[dict[str, Verdict], list[tuple[str, str]]]:
    """One verdict per instance (a report over a summary), and ``(file, why)`` per conflict."""
    chosen: dict[str, Verdict] = {}
    conflicts: list[tuple[str, str]] = []
    for _name, found in files:
        for instance, verdict in found.items():
            held = chosen.get(instance)
            if held is None or (held.source == SUMMARY and verdict.source == REPORT):
                chosen[instance] = verdict
            elif held.source == verdict.source and held.resolved != verdict.resolved:
                said = "resolved" if verdict.resolved else "unresolved"
                conflicts.append(
                    (verdict.path, f"says {instance} is {said}, {held.path} says not: not used")
                )
    return chosen, conflicts
