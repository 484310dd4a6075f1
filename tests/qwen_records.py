"""What the released original recorded about its guard: its telemetry outfile and ``--debug`` log.

Re-exported by :mod:`qwen_original`.  Its telemetry outfile (``settings.telemetry.outfile``)
holds JSON documents written one after another (log records, spans, metrics); its
``--debug`` log (``~/.qwen/debug/<session>.txt``) has one
``[repeated-tool-failure-guard] mode=... decision=...`` line per guard decision that is
not ``none``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

GUARD_EVENT = "qwen-code.repeated_tool_failure_guard"
LOOP_EVENT = "loop_detected"
_DEBUG_LINE = re.compile(
    r"\[repeated-tool-failure-guard\] mode=(?P<mode>\S+) decision=(?P<decision>\S+) "
    r"phase=(?P<phase>\S+) candidate=(?P<candidate>\d+) failures=(?P<failures>\d+) "
    r"batches=(?P<batches>\d+)"
)


def read_telemetry(outfile: Path) -> list[dict[str, Any]]:
    """Every record of a telemetry outfile (JSON documents written one after another)."""
    if not outfile.is_file():
        return []
    text = outfile.read_text(encoding="utf-8")
    decoder = json.JSONDecoder()
    records: list[dict[str, Any]] = []
    index = 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            return records
        record, index = decoder.raw_decode(text, index)
        records.append(record)


def log_events(records: Sequence[Mapping[str, Any]], event_name: str) -> list[dict[str, Any]]:
    """The attributes of every log record named ``event_name``, in file order."""
    found = []
    for record in records:
        attributes = record.get("attributes")
        if isinstance(attributes, dict) and attributes.get("event.name") == event_name:
            found.append(dict(attributes))
    return found


def guard_events(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The guard's decision records (``qwen-code.repeated_tool_failure_guard``)."""
    return log_events(records, GUARD_EVENT)


def debug_decisions(home: Path, session_id: str) -> list[dict[str, str]]:
    """The ``--debug`` log's guard lines of one session, parsed, in order."""
    path = home / ".qwen" / "debug" / f"{session_id}.txt"
    if not path.is_file():
        return []
    return [
        match.groupdict()
        for match in _DEBUG_LINE.finditer(path.read_text(encoding="utf-8", errors="replace"))
    ]


# -- the names and counters both agents write ------------------------------------------

#: counter name -> (sorted label items) -> the counter's last cumulative value
Counters = dict[str, dict[tuple[tuple[str, str], ...], int]]


def outfile_counters(records: Sequence[Mapping[str, Any]]) -> Counters:
    """The cumulative counters of the original's outfile (its metric batches, last wins)."""
    found: Counters = {}
    for record in records:
        for scope in record.get("scopeMetrics") or ():
            for metric in scope.get("metrics") or ():
                if metric.get("descriptor", {}).get("type") != "COUNTER":
                    continue  # histograms, gauges
                series = found.setdefault(str(metric["descriptor"]["name"]), {})
                for point in metric.get("dataPoints") or ():
                    labels = tuple(sorted((k, str(v)) for k, v in point["attributes"].items()))
                    series[labels] = int(point["value"])
    return found


def otlp_counters(path: Path) -> Counters:
    """The cumulative counters of an OTLP JSON-lines file (ours: ``--telemetry file:``)."""
    found: Counters = {}
    if not path.is_file():
        return found
    for line in path.read_text(encoding="utf-8").splitlines():
        for resource in json.loads(line).get("resourceMetrics", ()):
            for scope in resource.get("scopeMetrics", ()):
                for metric in scope.get("metrics", ()):
                    if "sum" not in metric:
                        continue  # histograms, gauges
                    series = found.setdefault(str(metric["name"]), {})
                    for point in metric.get("sum", {}).get("dataPoints", ()):
                        labels = tuple(
                            sorted(
                                (a["key"], str(next(iter(a["value"].values()))))
                                for a in point.get("attributes", ())
                            )
                        )
                        series[labels] = int(point.get("asInt", 0))
    return found


def totals_by(series: Mapping[tuple[tuple[str, str], ...], int], *keys: str) -> dict[Any, int]:
    """A counter's totals summed over every label but ``keys``."""
    totals: dict[Any, int] = {}
    for labels, value in series.items():
        kept = tuple(v for k, v in labels if k in keys)
        totals[kept] = totals.get(kept, 0) + value
    return totals
