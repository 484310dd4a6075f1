"""Reading the telemetry the released original, Qwen Code (0.24.4), writes itself.

Qwen Code writes its telemetry in two shapes, and ``rollout check``/``gates``
read both:

* **OTLP** (``telemetry.otlpEndpoint`` with ``otlpProtocol: "http"``, or gRPC):
  sent to a Collector, whose ``file`` exporter writes OTLP JSON lines and whose
  ClickHouse exporter fills ``otel_logs`` -- the same files and table our own
  agent's records arrive in, read by :mod:`~tool_failure_guard.rollout.load`
  unchanged.  Qwen Code sets no OTLP ``eventName``: the name is the
  ``event.name`` attribute, which the analysis already falls back to.
* its **local outfile** (``telemetry: {enabled: true, target: "local", outfile:
  PATH}``): the OpenTelemetry JS SDK's own objects, pretty-printed and
  concatenated -- log records (``_hrTime``, ``attributes``, ``resource._rawAttributes``),
  spans and metric batches (``scopeMetrics``).  :func:`outfile_to_otlp` turns
  its log records into OTLP JSON lines (one ``ExportLogsServiceRequest`` per
  record), so both engines load it like any export; spans are skipped.

Read in bounded pieces: an object larger than :data:`MAX_OBJECT_CHARS` is bad
input, as is a file that is not concatenated JSON objects of those kinds
(:class:`~tool_failure_guard.rollout.engine.InputError` naming file and object).

The guard counter ``qwen-code.repeated_tool_failure_guard.count`` (metrics,
in both file shapes) is summed by :func:`counter_totals` per environment and
decision, to check the log records against it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Final

from tool_failure_guard.rollout.engine import InputError
from tool_failure_guard.telemetry.names import GUARD_COUNTER as GUARD_COUNTER
from tool_failure_guard.telemetry.names import GUARD_LOG_EVENT, LOOP_DETECTED_EVENT

# The guard's and the loop's names are the original's, which ours took (telemetry.names).
GUARD_EVENT: Final = GUARD_LOG_EVENT
LOOP_EVENT: Final = LOOP_DETECTED_EVENT
PROMPT_EVENT: Final = "qwen-code.user_prompt"
API_RESPONSE_EVENT: Final = "qwen-code.api_response"
TOOL_CALL_EVENT: Final = "qwen-code.tool_call"
#: The records the analysis reads (every other Qwen Code record is ignored).
EVENTS: Final = (GUARD_EVENT, LOOP_EVENT, PROMPT_EVENT, API_RESPONSE_EVENT, TOOL_CALL_EVENT)
#: The largest single object of an outfile (a span or a record with long prompt text).
MAX_OBJECT_CHARS: Final = 32 * 1024 * 1024
_CHUNK = 1 << 20
_SNIFF = 4096
_SPACE = re.compile(r"\s*")


def is_outfile(path: Path) -> bool:
    """Whether ``path`` looks like Qwen Code's local outfile (its first key is ``resource``).

    OTLP JSON lines start ``{"resourceLogs"``/``{"resourceMetrics"``; Parquet is binary.
    """
    if path.suffix == ".parquet":
        return False
    try:
        with path.open("r", encoding="utf-8", errors="replace") as stream:
            head = stream.read(_SNIFF).lstrip()
    except OSError:
        return False
    if not head.startswith("{"):
        return False
    rest = head[1:].lstrip()
    return rest.startswith('"resource"') and not rest.startswith('"resourceLogs"')


def objects(
    path: Path, stream: IO[str], limit: int = MAX_OBJECT_CHARS
) -> Iterator[tuple[int, Any]]:
    """(ordinal, value) of each concatenated JSON value of ``stream``, each at most ``limit``."""
    decoder = json.JSONDecoder()
    buffer, pos, ordinal, eof = "", 0, 0, False
    while True:
        pos = _SPACE.match(buffer, pos).end()  # type: ignore[union-attr]
        if pos == len(buffer):
            if eof:
                return
            buffer, pos = stream.read(_CHUNK), 0
            eof = not buffer
            continue
        try:
            value, end = decoder.raw_decode(buffer, pos)
        except json.JSONDecodeError as error:
            if len(buffer) - pos > limit:
                raise InputError(
                    f"{path}: object {ordinal + 1} is larger than {limit} characters"
                ) from None
            if eof:
                raise InputError(
                    f"{path}: object {ordinal + 1} is not valid JSON ({error.msg})"
                ) from None
            # An object cut by the read: read as much again (each object parsed O(log n) times).
            more = stream.read(max(_CHUNK, len(buffer) - pos))
            eof = not more
            buffer, pos = buffer[pos:] + more, 0
            continue
        ordinal += 1
        yield ordinal, value
        pos = end


def _any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    return {"stringValue": json.dumps(value, separators=(",", ":"))}


def _key_values(items: Any) -> list[dict[str, Any]]:
    pairs = items.items() if isinstance(items, Mapping) else items
    return [{"key": str(k), "value": _any_value(v)} for k, v in pairs]


def _resource(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    resource = obj.get("resource")
    raw = resource.get("_rawAttributes") if isinstance(resource, dict) else None
    if not isinstance(raw, list):
        return []
    return _key_values((pair[0], pair[1]) for pair in raw if isinstance(pair, list) and pair)


def _nanos(stamp: Any) -> str | None:
    if (
        isinstance(stamp, list)
        and len(stamp) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in stamp)
    ):
        return str(stamp[0] * 1_000_000_000 + stamp[1])
    return None


def _kind(obj: Any) -> str:
    if not isinstance(obj, dict) or "resource" not in obj:
        return "other"
    if "scopeMetrics" in obj:
        return "metrics"
    if "_hrTime" in obj and isinstance(obj.get("attributes"), dict):
        return "log"
    if "_spanContext" in obj or "_duration" in obj:
        return "span"
    return "other"


def outfile_to_otlp(path: Path, sink: IO[str]) -> int:
    """Write the log records of Qwen Code's outfile ``path`` to ``sink`` as OTLP JSON lines.

    Returns how many records were written; an object of an unknown kind, a log
    record without a valid ``_hrTime``, or JSON that does not parse is bad input.
    """
    written = 0
    with path.open("r", encoding="utf-8") as stream:
        try:
            for ordinal, obj in objects(path, stream):
                kind = _kind(obj)
                if kind == "other":
                    raise InputError(
                        f"{path}: object {ordinal} is not an OpenTelemetry log record, span "
                        "or metrics batch of Qwen Code's local telemetry outfile"
                    )
                if kind != "log":
                    continue
                nanos = _nanos(obj.get("_hrTime"))
                if nanos is None:
                    raise InputError(f"{path}: object {ordinal}: _hrTime is not [seconds, nanos]")
                record: dict[str, Any] = {
                    "timeUnixNano": nanos,
                    "attributes": _key_values(obj["attributes"]),
                }
                if isinstance(obj.get("_body"), str):
                    record["body"] = {"stringValue": obj["_body"]}
                scope = obj.get("instrumentationScope")
                name = scope.get("name", "") if isinstance(scope, dict) else ""
                request = {
                    "resourceLogs": [
                        {
                            "resource": {"attributes": _resource(obj)},
                            "scopeLogs": [{"scope": {"name": str(name)}, "logRecords": [record]}],
                        }
                    ]
                }
                sink.write(json.dumps(request, separators=(",", ":"), ensure_ascii=False) + "\n")
                written += 1
        except UnicodeDecodeError as error:
            raise InputError(f"{path}: not UTF-8 text ({error.reason})") from None
    return written


# -- the guard counter -----------------------------------------------------------------

#: (environment or None, decision) -> transitions.
Totals = dict[tuple[str | None, str], int]


def _environment(attributes: Mapping[str, Any]) -> str | None:
    value = attributes.get("deployment.environment", attributes.get("deployment.environment.name"))
    return None if value is None else str(value)


def _otlp_attributes(items: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in items or ():
        if isinstance(item, dict) and isinstance(item.get("value"), dict):
            value = item["value"]
            found[str(item.get("key"))] = next(iter(value.values()), None) if value else None
    return found


def _add_points(
    totals: Totals, environment: str | None, points: Any, cumulative: bool, seen: dict[Any, int]
) -> None:
    for point in points or ():
        if not isinstance(point, dict):
            continue
        attributes = point.get("attributes")
        labels = dict(attributes) if isinstance(attributes, dict) else _otlp_attributes(attributes)
        value: Any = point.get("value", point.get("asInt", 0))
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            continue
        try:
            count = int(value)
        except ValueError:
            continue
        key = (environment, str(labels.get("decision", "")))
        if not cumulative:
            totals[key] = totals.get(key, 0) + count
            continue
        # A cumulative series (same labels, same start) is counted at its latest value.
        start = json.dumps(point.get("startTime", point.get("startTimeUnixNano")))
        series = (environment, json.dumps(labels, sort_keys=True), start)
        previous = seen.get(series, 0)
        if count > previous:
            totals[key] = totals.get(key, 0) + count - previous
            seen[series] = count


def counter_totals(paths: list[Path]) -> Totals:
    """Transitions per (environment, decision) from the guard counter in ``paths``."""
    totals: Totals = {}
    seen: dict[Any, int] = {}
    for path in paths:
        if path.suffix == ".parquet":
            continue
        with path.open("r", encoding="utf-8", errors="replace") as stream:
            for _, obj in objects(path, stream):
                if not isinstance(obj, dict):
                    continue
                if "scopeMetrics" in obj:  # the outfile: JS SDK objects
                    raw = obj.get("resource", {}).get("_rawAttributes") or []
                    env = _environment({p[0]: p[1] for p in raw if isinstance(p, list) and p})
                    for scope in obj.get("scopeMetrics") or ():
                        for metric in scope.get("metrics") or ():
                            if metric.get("descriptor", {}).get("name") == GUARD_COUNTER:
                                # The JS SDK's AggregationTemporality: 0 delta, 1 cumulative.
                                cumulative = metric.get("aggregationTemporality", 1) == 1
                                _add_points(totals, env, metric.get("dataPoints"), cumulative, seen)
                for resource_metrics in obj.get("resourceMetrics") or ():  # OTLP JSON
                    env = _environment(
                        _otlp_attributes(resource_metrics.get("resource", {}).get("attributes"))
                    )
                    for scope in resource_metrics.get("scopeMetrics") or ():
                        for metric in scope.get("metrics") or ():
                            if metric.get("name") == GUARD_COUNTER and "sum" in metric:
                                total = metric["sum"]
                                # OTLP's AggregationTemporality: 1 delta, 2 cumulative.
                                cumulative = total.get("aggregationTemporality", 2) == 2
                                _add_points(totals, env, total.get("dataPoints"), cumulative, seen)
    return totals
