"""Loading exported telemetry into DuckDB: one ``logs`` table shaped like ``otel_logs``.

Input files are OTLP JSON lines (what ``--telemetry file:PATH`` and the
Collector's ``file`` exporter write: one ``ExportLogsServiceRequest`` or
``ExportMetricsServiceRequest`` per line) or Parquet files holding the
``logs`` columns below (for large exports).  Metric lines are skipped: the
analysis needs only the log records.

The ``logs`` table mirrors the Collector's ClickHouse exporter table
``otel_logs`` (the same analysis runs there: :mod:`~tool_failure_guard.rollout.engine`)::

    Timestamp           TIMESTAMP            -- otel_logs.Timestamp
    EventName           VARCHAR              -- otel_logs.EventName
    ScopeName           VARCHAR              -- otel_logs.ScopeName ('' where none was kept)
    ResourceAttributes  STRUCT(keys VARCHAR[], vals VARCHAR[])  -- otel_logs' Map, as lists
    LogAttributes       STRUCT(keys VARCHAR[], vals VARCHAR[])

Each attribute map is kept as its keys and their values in the record's order
(every attribute, known or not): building a DuckDB ``MAP`` per record cost as
much as parsing the JSON, and the queries read the lists as maps
(:func:`~tool_failure_guard.rollout.dialect.to_duckdb`).  Parquet files hold the
``otel_logs`` columns, the attributes as maps (:func:`export_parquet`).

Bad input never produces a half-loaded analysis: :class:`InputError` names
the file and, for a line that is not JSON or is mistyped OTLP JSON (a count
that is not a count, a non-numeric timestamp, ``logRecords`` not a list, an
attribute without a key), the line.  An empty file is bad input too.  A key
twice in one record is kept twice (lookups read the first, as ClickHouse's
``Map`` does); in a guard record it is a ``forbidden_telemetry_field`` finding.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from tool_failure_guard.rollout import queries, qwen_code, spill, sql
from tool_failure_guard.rollout.engine import DuckDBEngine, Filters, InputError, MalformedNumbers
from tool_failure_guard.telemetry.names import EARLIER_EVENT_NAMES

#: Larger than any line the file exporter writes for one export batch.
MAX_LINE_BYTES = 32 * 1024 * 1024

_ANY_VALUE = "STRUCT(stringValue VARCHAR, intValue VARCHAR, boolValue BOOLEAN, doubleValue DOUBLE)"
_KEY_VALUES = f"STRUCT(key VARCHAR, value {_ANY_VALUE})[]"
_LOG_RECORD = f"STRUCT(timeUnixNano HUGEINT, eventName VARCHAR, attributes {_KEY_VALUES})"
_RESOURCE_LOGS = (
    f"STRUCT(resource STRUCT(attributes {_KEY_VALUES}), "
    f"scopeLogs STRUCT(scope STRUCT(name VARCHAR), logRecords {_LOG_RECORD}[])[])[]"
)
#: The part of an OTLP JSON line the analysis reads (everything else is ignored).
OTLP_COLUMNS = {"resourceLogs": _RESOURCE_LOGS, "resourceMetrics": "JSON"}


def _lists(attributes: str) -> str:
    """SQL: an OTLP key/value list -> the ``logs`` table's keys and values, as ClickHouse
    stores the values (:data:`~tool_failure_guard.rollout.sql.ATTRIBUTES`)."""
    value = (
        "coalesce(a.value.stringValue, a.value.intValue, "
        "CAST(a.value.boolValue AS VARCHAR), CAST(a.value.doubleValue AS VARCHAR))"
    )
    # coalesce the built lists, not the OTLP list (that would copy the nested values).
    return (
        f"struct_pack(keys := coalesce([a.key for a in {attributes}], []), "
        f"vals := coalesce([{value} for a in {attributes}], []))"
    )


_NUMBER = "a decimal count"


def _kv_problem(items: Any, where: str) -> str | None:
    if items is None:
        return None
    if not isinstance(items, list):
        return f"{where} is not a list"
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            return f"{where}: an entry without a string key"
        value = item.get("value", {})
        if not isinstance(value, dict):
            return f"{where}[{item['key']}]: value is not an OTLP AnyValue object"
        kinds: dict[str, type | tuple[type, ...]] = {
            "stringValue": str,
            "boolValue": bool,
            "doubleValue": (int, float),
        }
        for kind, types in kinds.items():
            if kind in value and not isinstance(value[kind], types):
                return f"{where}[{item['key']}]: {kind} has the wrong type"
        if "intValue" in value and not _is_int(value["intValue"]):
            return f"{where}[{item['key']}]: intValue is not an integer"
    return None


def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and value.lstrip("-").isdigit()


def _flat(value: Mapping[str, Any]) -> str | None:
    for kind in ("stringValue", "intValue"):
        if kind in value:
            return str(value[kind])
    if "boolValue" in value:
        return "true" if value["boolValue"] else "false"
    return None


def _record_problem(record: Any) -> str | None:
    if not isinstance(record, dict):
        return "a log record is not an object"
    stamp = record.get("timeUnixNano")
    if stamp is not None and not (_is_int(stamp) and int(stamp) >= 0):
        return f"timeUnixNano {stamp!r} is not a non-negative integer"
    name = record.get("eventName")
    if name is not None and not isinstance(name, str):
        return "eventName is not a string"
    problem = _kv_problem(record.get("attributes"), "attributes")
    if problem or not isinstance(name, str):
        return problem
    for key in queries.NUMERIC.get(EARLIER_EVENT_NAMES.get(name, name), ()):
        for item in record.get("attributes") or ():
            if item["key"] == key:
                flat = _flat(item.get("value", {}))
                if flat is not None and not flat.isdigit():
                    return f"{name} field {key} is {flat!r}, not {_NUMBER}"
    return None


def _line_problem(data: Any) -> str | None:
    """What is wrong with one decoded line as an OTLP JSON export request (None: nothing)."""
    if not isinstance(data, dict) or not (
        isinstance(data.get("resourceLogs"), list) or isinstance(data.get("resourceMetrics"), list)
    ):
        return "not an OTLP JSON request (expected resourceLogs or resourceMetrics)"
    for rl in data.get("resourceLogs") or ():
        if not isinstance(rl, dict):
            return "a resourceLogs entry is not an object"
        resource = rl.get("resource", {})
        if not isinstance(resource, dict):
            return "resource is not an object"
        problem = _kv_problem(resource.get("attributes"), "resource attributes")
        if problem:
            return problem
        scopes = rl.get("scopeLogs", [])
        if not isinstance(scopes, list):
            return "scopeLogs is not a list"
        for scope in scopes:
            if not isinstance(scope, dict) or not isinstance(scope.get("logRecords", []), list):
                return "logRecords is not a list"
            for record in scope.get("logRecords", []):
                problem = _record_problem(record)
                if problem:
                    return problem
    return None


def _first_bad_line(path: Path) -> str | None:
    """Name the first line of ``path`` that is not a well-typed OTLP JSON request (slow path)."""
    try:
        with path.open("r", encoding="utf-8") as stream:
            for number, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as error:
                    return f"{path}:{number}: not valid JSON ({error.msg})"
                except ValueError as error:  # e.g. an integer past Python's digit limit
                    return f"{path}:{number}: not valid JSON ({error})"
                problem = _line_problem(data)
                if problem:
                    return f"{path}:{number}: {problem}"
    except UnicodeDecodeError as error:
        return f"{path}: not UTF-8 text ({error.reason})"
    except OSError as error:
        return f"{path}: cannot be read ({error.strerror})"
    return None


def _is_blank(path: Path) -> bool:
    """Whether ``path`` holds no line but blank ones (reads only up to the first other)."""
    with path.open("rb") as stream:
        return all(not line.strip() for line in stream)


def _json_source(path: Path) -> str:
    columns = ", ".join(f"'{name}': '{kind}'" for name, kind in OTLP_COLUMNS.items())
    quoted = str(path).replace("'", "''")
    return (
        f"read_json('{quoted}', format='newline_delimited', columns={{{columns}}}, "
        f"maximum_object_size={MAX_LINE_BYTES})"
    )


#: ``timeUnixNano`` (HUGEINT) -> microseconds.  A stamp within BIGINT, every real one, is
#: divided as a BIGINT: HUGEINT division is a 128-bit long division, ~5 % of the whole load.
#: Any other value (negative, past 2262) takes the HUGEINT path as before: the same result.
_MICROS = (
    "CASE WHEN r.timeUnixNano BETWEEN 0 AND 9223372036854775807 "
    "THEN CAST(r.timeUnixNano AS BIGINT) // 1000 "
    "ELSE CAST(r.timeUnixNano // 1000 AS BIGINT) END"
)


def _insert_json(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    # One streaming pass: each line parsed once, nothing read twice.  A line that is not
    # an export request, or an attribute without a key, stops it (the caller names the line).
    query = f"""
        INSERT INTO logs
        SELECT make_timestamp({_MICROS}),
               r.eventName, scope, ra, la
        FROM (
            SELECT ra, scope, r, {_lists("r.attributes")} AS la
            FROM (SELECT ra, coalesce(sl.scope.name, '') AS scope, unnest(sl.logRecords) AS r
                  FROM (SELECT {_lists("rl.resource.attributes")} AS ra,
                               unnest(rl.scopeLogs) AS sl
                        FROM (SELECT unnest(resourceLogs) AS rl FROM {_json_source(path)}
                              WHERE CASE WHEN resourceLogs IS NULL AND resourceMetrics IS NULL
                                         THEN error('not an OTLP JSON request')
                                         ELSE resourceLogs IS NOT NULL END)))
        )
        WHERE CASE WHEN list_position(la.keys, NULL) IS NOT NULL
                        OR list_position(ra.keys, NULL) IS NOT NULL
                   THEN error('an attribute without a key') ELSE true END
    """
    con.execute(query)


def _insert_outfile(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Qwen Code's local outfile, its log records staged as OTLP JSON lines first."""
    with tempfile.TemporaryDirectory(prefix="tfg-qwen-outfile-") as scratch:
        staged = Path(scratch) / "records.jsonl"
        with staged.open("w", encoding="utf-8") as sink:
            written = qwen_code.outfile_to_otlp(path, sink)
        if written:
            _insert_json(con, staged)


def _insert_parquet(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    quoted = str(path).replace("'", "''")
    lists = ", ".join(
        f"struct_pack(keys := map_keys({c}), vals := map_values({c}))"
        for c in ("ResourceAttributes", "LogAttributes")
    )
    # Files exported before the scope was kept have no ScopeName (their records are named
    # in the project's own namespace, which is how the analysis knows them).
    columns = {
        str(row[0])
        for row in con.execute(f"SELECT name FROM parquet_schema('{quoted}')").fetchall()
    }
    scope = "ScopeName" if "ScopeName" in columns else "''"
    con.execute(
        f"INSERT INTO logs SELECT Timestamp, EventName, {scope}, {lists} "
        f"FROM read_parquet('{quoted}')"
    )


def connect(
    paths: Sequence[Path], *, memory_limit: str = "1500MB", temp_dir: Path | None = None
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection holding ``logs``, filled from ``paths`` (nothing else yet).

    It spills into a private directory under ``temp_dir`` or the system temporary
    directory; :func:`~tool_failure_guard.rollout.spill.close` closes it and removes that.
    """
    if not paths:
        raise InputError("no telemetry files given")
    con = spill.connect(temp_dir=temp_dir, memory_limit=memory_limit)
    try:
        _fill(con, paths)
    except BaseException:
        spill.close(con)
        raise
    return con


def _fill(con: duckdb.DuckDBPyConnection, paths: Sequence[Path]) -> None:
    con.execute(sql.LOGS_TABLE)
    for path in paths:
        if not path.is_file():
            raise InputError(f"{path}: no such file")
        if path.suffix != ".parquet" and _is_blank(path):
            raise InputError(f"{path}: empty (no telemetry records)")
        try:
            if path.suffix == ".parquet":
                _insert_parquet(con, path)
            elif qwen_code.is_outfile(path):  # Qwen Code's local telemetry outfile
                _insert_outfile(con, path)
            else:
                _insert_json(con, path)
        except duckdb.Error as error:
            located = (
                None
                if path.suffix == ".parquet" or qwen_code.is_outfile(path)
                else _first_bad_line(path)
            )
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise InputError(located or f"{path}: unreadable telemetry ({first})") from error


def duckdb_engine(
    paths: Sequence[Path],
    filters: Filters | None = None,
    *,
    memory_limit: str = "1500MB",
    temp_dir: Path | None = None,
) -> DuckDBEngine:
    """The analysis engine over ``paths``; a mistyped count is named by file and line."""
    con = connect(paths, memory_limit=memory_limit, temp_dir=temp_dir)
    try:
        return DuckDBEngine(con, filters)
    except BaseException as error:
        spill.close(con)
        if not isinstance(error, MalformedNumbers):
            raise
        for path in paths:
            located = None if path.suffix == ".parquet" else _first_bad_line(path)
            if located:
                raise InputError(located) from error
        raise InputError(f"{', '.join(map(str, paths))}: {error}") from error


def export_parquet(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Write the ``logs`` table as Parquet, its attributes as maps (the ``otel_logs`` columns,
    readable back by :func:`connect`)."""
    quoted = str(path).replace("'", "''")
    maps = ", ".join(
        f"map({c}.keys, {c}.vals) AS {c}" for c in ("ResourceAttributes", "LogAttributes")
    )
    con.execute(
        f"COPY (SELECT Timestamp, EventName, ScopeName, {maps} FROM logs) "
        f"TO '{quoted}' (FORMAT parquet)"
    )
