"""Loading exported telemetry into DuckDB: one ``logs`` table shaped like ``otel_logs``.

Input files are OTLP JSON lines (what ``--telemetry file:PATH`` and the
Collector's ``file`` exporter write: one ``ExportLogsServiceRequest`` or
``ExportMetricsServiceRequest`` per line) or Parquet files holding the
``logs`` table below (for large exports).  Metric lines are skipped: the
analysis needs only the log records.

The ``logs`` table mirrors the Collector's ClickHouse exporter table
``otel_logs``, so the views and queries in :mod:`rollout.sql` run there with
only the table name changed::

    Timestamp           TIMESTAMP            -- otel_logs.Timestamp
    EventName           VARCHAR              -- otel_logs.EventName
    ResourceAttributes  MAP(VARCHAR, VARCHAR)
    LogAttributes       MAP(VARCHAR, VARCHAR)

Bad input never produces a half-loaded analysis: :class:`InputError` names
the file and, for malformed JSON lines, the line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import duckdb

from rollout import sql

#: Larger than any line the file exporter writes for one export batch.
MAX_LINE_BYTES = 32 * 1024 * 1024

_ANY_VALUE = "STRUCT(stringValue VARCHAR, intValue VARCHAR, boolValue BOOLEAN, doubleValue DOUBLE)"
_KEY_VALUES = f"STRUCT(key VARCHAR, value {_ANY_VALUE})[]"
_LOG_RECORD = f"STRUCT(timeUnixNano VARCHAR, eventName VARCHAR, attributes {_KEY_VALUES})"
_RESOURCE_LOGS = (
    f"STRUCT(resource STRUCT(attributes {_KEY_VALUES}), "
    f"scopeLogs STRUCT(logRecords {_LOG_RECORD}[])[])[]"
)
#: The part of an OTLP JSON line the analysis reads (everything else is ignored).
OTLP_COLUMNS = {"resourceLogs": _RESOURCE_LOGS, "resourceMetrics": "JSON"}


class InputError(ValueError):
    """The telemetry cannot be read; the message names the file (and line)."""


def _flatten(attributes: str) -> str:
    """SQL: an OTLP key/value list -> MAP(VARCHAR, VARCHAR), as ClickHouse stores it."""
    value = (
        "coalesce(a.value.stringValue, a.value.intValue, "
        "CAST(a.value.boolValue AS VARCHAR), CAST(a.value.doubleValue AS VARCHAR))"
    )
    return (
        f"map_from_entries(list_transform(coalesce({attributes}, []), "
        f"lambda a: struct_pack(k := a.key, v := {value})))"
    )


def _first_bad_line(path: Path) -> str | None:
    """Name the first line of ``path`` that is not an OTLP JSON request (slow path only)."""
    try:
        with path.open("r", encoding="utf-8") as stream:
            for number, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as error:
                    return f"{path}:{number}: not valid JSON ({error.msg})"
                if not isinstance(data, dict) or not (
                    isinstance(data.get("resourceLogs"), list)
                    or isinstance(data.get("resourceMetrics"), list)
                ):
                    return (
                        f"{path}:{number}: not an OTLP JSON request "
                        "(expected resourceLogs or resourceMetrics)"
                    )
    except UnicodeDecodeError as error:
        return f"{path}: not UTF-8 text ({error.reason})"
    except OSError as error:
        return f"{path}: cannot be read ({error.strerror})"
    return None


def _json_source(path: Path) -> str:
    columns = ", ".join(f"'{name}': '{kind}'" for name, kind in OTLP_COLUMNS.items())
    quoted = str(path).replace("'", "''")
    return (
        f"read_json('{quoted}', format='newline_delimited', columns={{{columns}}}, "
        f"maximum_object_size={MAX_LINE_BYTES})"
    )


def _insert_json(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    resource = _flatten("rl.resource.attributes")
    record = _flatten("r.attributes")
    query = f"""
        INSERT INTO logs
        WITH lines AS (SELECT resourceLogs, resourceMetrics FROM {_json_source(path)}),
        bad AS (SELECT count(*) AS n FROM lines
                WHERE resourceLogs IS NULL AND resourceMetrics IS NULL),
        rls AS (SELECT unnest(resourceLogs) AS rl FROM lines WHERE resourceLogs IS NOT NULL),
        res AS (SELECT {resource} AS ra, unnest(rl.scopeLogs) AS sl FROM rls),
        recs AS (SELECT ra, unnest(sl.logRecords) AS r FROM res)
        SELECT make_timestamp(CAST(CAST(r.timeUnixNano AS HUGEINT) // 1000 AS BIGINT)),
               r.eventName, ra, {record}
        FROM recs, bad
        WHERE CASE WHEN bad.n > 0 THEN error('not an OTLP JSON request') ELSE true END
    """
    con.execute(query)


def _insert_parquet(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    quoted = str(path).replace("'", "''")
    con.execute(
        "INSERT INTO logs SELECT Timestamp, EventName, ResourceAttributes, LogAttributes "
        f"FROM read_parquet('{quoted}')"
    )


def connect(paths: Sequence[Path], *, memory_limit: str = "1500MB") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection holding ``logs`` (from ``paths``) and the analysis views."""
    if not paths:
        raise InputError("no telemetry files given")
    con = duckdb.connect(config={"memory_limit": memory_limit})
    con.execute(sql.LOGS_TABLE)
    for path in paths:
        if not path.is_file():
            raise InputError(f"{path}: no such file")
        try:
            if path.suffix == ".parquet":
                _insert_parquet(con, path)
            else:
                _insert_json(con, path)
        except duckdb.Error as error:
            located = None if path.suffix == ".parquet" else _first_bad_line(path)
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise InputError(located or f"{path}: unreadable telemetry ({first})") from error
    build_views(con)
    return con


def build_views(con: duckdb.DuckDBPyConnection) -> None:
    """Create the analysis views over a filled ``logs`` table (the four read often as tables)."""
    for statement in sql.VIEWS:
        # Materialised once: every invariant and gate reads these, and extracting
        # map values again for each query would dominate the run time.
        con.execute(
            statement.replace("CREATE VIEW", "CREATE TABLE", 1)
            if "CREATE VIEW records" not in statement
            else statement
        )


def export_parquet(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Write the ``logs`` table as Parquet (readable back by :func:`connect`)."""
    quoted = str(path).replace("'", "''")
    con.execute(f"COPY logs TO '{quoted}' (FORMAT parquet)")
