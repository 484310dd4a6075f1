"""The Collector's ClickHouse exporter table ``otel_logs``, and OTLP JSON lines as its rows.

:data:`OTEL_LOGS_DDL` is the exporter's documented logs table (its columns
and types; codecs, skip indexes and TTL left out).  :func:`rows` turns OTLP
JSON lines (what ``--telemetry file:PATH`` writes) into that table's rows the
way the exporter flattens them: attribute values as strings (ints in decimal,
booleans ``true``/``false``), the event name in ``EventName``, the resource's
``service.name`` in ``ServiceName``.  The tests and ``make bench`` use it to
load the same fleet into ClickHouse (chdb) that DuckDB reads from the files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

#: The columns the exporter creates (``exporter/clickhouseexporter``, logs table).
OTEL_LOGS_COLUMNS: Final = (
    ("Timestamp", "DateTime64(9)"),
    ("TimestampTime", "DateTime DEFAULT toDateTime(Timestamp)"),
    ("TraceId", "String"),
    ("SpanId", "String"),
    ("TraceFlags", "UInt8"),
    ("SeverityText", "LowCardinality(String)"),
    ("SeverityNumber", "UInt8"),
    ("ServiceName", "LowCardinality(String)"),
    ("Body", "String"),
    ("ResourceSchemaUrl", "LowCardinality(String)"),
    ("ResourceAttributes", "Map(LowCardinality(String), String)"),
    ("ScopeSchemaUrl", "LowCardinality(String)"),
    ("ScopeName", "String"),
    ("ScopeVersion", "LowCardinality(String)"),
    ("ScopeAttributes", "Map(LowCardinality(String), String)"),
    ("LogAttributes", "Map(LowCardinality(String), String)"),
    ("EventName", "String"),
)


def otel_logs_ddl(table: str = "otel_logs", *, event_name: bool = True) -> str:
    """``CREATE TABLE`` for the exporter's table (``event_name=False``: an older exporter)."""
    columns = ",\n    ".join(
        f"{name} {kind}" for name, kind in OTEL_LOGS_COLUMNS if event_name or name != "EventName"
    )
    return (
        f"CREATE TABLE {table} (\n    {columns}\n) ENGINE = MergeTree\n"
        "PARTITION BY toDate(TimestampTime)\nORDER BY (ServiceName, TimestampTime, Timestamp)"
    )


def _value(value: Mapping[str, Any]) -> str:
    if "stringValue" in value:
        return str(value["stringValue"])
    if "intValue" in value:
        return str(int(value["intValue"]))
    if "boolValue" in value:
        return "true" if value["boolValue"] else "false"
    if "doubleValue" in value:
        return repr(float(value["doubleValue"]))
    return json.dumps(value, separators=(",", ":"))


def _attributes(items: Sequence[Mapping[str, Any]] | None) -> dict[str, str]:
    return {str(item["key"]): _value(item.get("value", {})) for item in items or ()}


def rows(paths: Sequence[Path], *, event_name: bool = True) -> Iterator[dict[str, Any]]:
    """``otel_logs`` rows (JSONEachRow-ready dicts) of the log records in ``paths``.

    ``event_name=False`` writes as an older exporter did: no ``EventName``
    column, the name in ``LogAttributes['event.name']``.
    """
    for path in paths:
        with path.open("r", encoding="utf-8") as stream:
            for line in stream:
                if not line.strip():
                    continue
                for resource_logs in json.loads(line).get("resourceLogs", ()):
                    resource = _attributes(resource_logs.get("resource", {}).get("attributes"))
                    for scope_logs in resource_logs.get("scopeLogs", ()):
                        scope = scope_logs.get("scope", {})
                        for record in scope_logs.get("logRecords", ()):
                            yield _row(resource, scope, record, event_name)


def _row(
    resource: dict[str, str], scope: Mapping[str, Any], record: Mapping[str, Any], event: bool
) -> dict[str, Any]:
    nanos = int(record.get("timeUnixNano") or record.get("observedTimeUnixNano") or 0)
    attributes = _attributes(record.get("attributes"))
    name = str(record.get("eventName", ""))
    if not event and name:
        attributes["event.name"] = name
    row: dict[str, Any] = {
        "Timestamp": f"{nanos // 1_000_000_000}.{nanos % 1_000_000_000:09d}",
        "TraceId": str(record.get("traceId", "")),
        "SpanId": str(record.get("spanId", "")),
        "TraceFlags": int(record.get("flags", 0)) & 0xFF,
        "SeverityText": str(record.get("severityText", "")),
        "SeverityNumber": _severity(record.get("severityNumber", 0)),
        "ServiceName": resource.get("service.name", ""),
        "Body": _value(record["body"]) if isinstance(record.get("body"), dict) else "",
        "ResourceAttributes": resource,
        "ScopeName": str(scope.get("name", "")),
        "ScopeVersion": str(scope.get("version", "")),
        "ScopeAttributes": _attributes(scope.get("attributes")),
        "LogAttributes": attributes,
    }
    if event:
        row["EventName"] = name
    return row


def _severity(value: Any) -> int:
    if isinstance(value, int):
        return value & 0xFF
    return 0


def fill(
    command: Any,
    paths: Sequence[Path],
    scratch: Path,
    *,
    table: str = "otel_logs",
    event_name: bool = True,
) -> int:
    """Create ``table`` with ``command`` (one SQL statement per call) and load ``paths``.

    The rows go through a JSONEachRow file in ``scratch``; returns how many.
    """
    command(otel_logs_ddl(table, event_name=event_name))
    import tempfile

    handle, name = tempfile.mkstemp(prefix=f".{table}.", suffix=".rows.jsonl", dir=scratch)
    staged = Path(name)
    count = 0
    with open(handle, "w", encoding="utf-8") as sink:
        for row in rows(paths, event_name=event_name):
            sink.write(json.dumps(row) + "\n")
            count += 1
    quoted = str(staged).replace("'", "''")
    try:
        command(f"INSERT INTO {table} SELECT * FROM file('{quoted}', JSONEachRow)")
    finally:
        staged.unlink()
    return count
