"""Where the analysis runs: DuckDB (embedded, the default) or ClickHouse (in place).

An :class:`Engine` answers :meth:`Engine.rows` for a DuckDB-dialect query
over the relations of :mod:`~tool_failure_guard.rollout.sql`.  :class:`DuckDBEngine` materialises
the relations as tables once; :class:`ClickHouseEngine` renders every query
for ClickHouse (:mod:`~tool_failure_guard.rollout.dialect`) with the relations as its common
table expressions (each relation parsed and rendered once per engine, then reused),
over the exporter's table, and hands the text to a thin
"execute SQL, return rows" seam (:mod:`~tool_failure_guard.rollout.executors`):
:class:`ConnectExecutor` (``clickhouse-connect``
against a server, the production path) or :class:`ChdbExecutor` (``chdb``,
ClickHouse in-process, for the tests).  Nothing is created on the server.

Only with ``session_tables=True`` -- for chdb, whose session is this process's own
ClickHouse, never a server -- are the relations materialised once as ``TEMPORARY``
tables of that session (as DuckDB materialises them), read by every query instead
of being recomputed per query, and dropped by :meth:`ClickHouseEngine.close`.

A time window, environments and service versions are filters on the source
table, pushed into every scan on both engines (:class:`Filters`).
"""

from __future__ import annotations

import abc
import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import sqlglot
from sqlglot import exp

from tool_failure_guard.rollout import dialect, sql
from tool_failure_guard.rollout.errors import (
    EngineError,
    InputError,
    MalformedNumbers,
    Row,
    first_line,
)
from tool_failure_guard.rollout.executors import ChdbExecutor, ConnectExecutor, redact
from tool_failure_guard.rollout.options import instant_problem

__all__ = [
    "ChdbExecutor",
    "ClickHouseEngine",
    "ConnectExecutor",
    "DuckDBEngine",
    "Engine",
    "EngineError",
    "Execute",
    "Filters",
    "InputError",
    "MalformedNumbers",
    "Row",
    "redact",
]


_MAP_TYPE = re.compile(r"Map\((String|LowCardinality\(String\)), String\)$")
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
#: The seam: one SQL text in, its rows out (raises :class:`EngineError`).
Execute = Callable[[str], list[Row]]


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _utc(moment: datetime.datetime | None) -> datetime.datetime | None:
    if moment is None:
        return None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)
    problem = instant_problem(moment)
    if problem:
        raise InputError(problem)
    return moment


@attrs.frozen(kw_only=True)
class Filters:
    """Which records the analysis reads: ``[since, until)`` (UTC), environments, versions.

    A bound without a time zone is UTC; one outside what both engines compare alike
    (:func:`~tool_failure_guard.rollout.options.instant_problem`) is an :class:`InputError`.
    """

    since: datetime.datetime | None = attrs.field(default=None, converter=_utc)
    until: datetime.datetime | None = attrs.field(default=None, converter=_utc)
    environments: tuple[str, ...] = ()
    service_versions: tuple[str, ...] = ()

    def sql(self) -> str:
        """`` AND …`` conditions on the source table (DuckDB dialect), or ``""``."""
        parts = []
        for bound, op in ((self.since, ">="), (self.until, "<")):
            if bound is not None:
                micros = int(bound.timestamp() * 1_000_000)
                parts.append(f"Timestamp {op} make_timestamp({micros})")
        if self.environments:
            values = ", ".join(_literal(v) for v in self.environments)
            parts.append(f"{sql.ENVIRONMENT} IN ({values})")
        if self.service_versions:
            values = ", ".join(_literal(v) for v in self.service_versions)
            parts.append(f"{sql.SERVICE_VERSION} IN ({values})")
        return "".join(f"\n  AND {p}" for p in parts)


class Engine(abc.ABC):
    """Runs the analysis's queries; every result row holds plain values (int, str, None)."""

    name: str

    @abc.abstractmethod
    def rows(self, query: str) -> list[Row]:
        """The rows of a DuckDB-dialect ``query`` over the analysis relations."""

    def close(self) -> None:  # noqa: B027 - most engines hold nothing to close
        """Release the engine's connection."""


class DuckDBEngine(Engine):
    """DuckDB over a filled ``logs`` table: the relations become tables once.

    Every statement is rendered for the ``logs`` table's attribute lists first
    (:func:`~tool_failure_guard.rollout.dialect.to_duckdb`).
    """

    name = "duckdb"

    def __init__(self, con: Any, filters: Filters | None = None) -> None:
        from tool_failure_guard.rollout import queries

        self.con = con
        for relation, body in sql.RELATIONS:
            text = dialect.to_duckdb(body.replace("{filters}", (filters or Filters()).sql()))
            if relation == "records":
                con.execute(f"CREATE VIEW records AS {text}")
                # The tables below cast counts: a value that is not one is bad input.
                bad = self.rows(queries.malformed_numbers())
                if bad:
                    raise MalformedNumbers(sorted(bad))
                continue
            # Materialised once: every query reads these, and extracting map values
            # again for each query would dominate the run time.
            con.execute(f"CREATE TABLE {relation} AS {text}")

    def rows(self, query: str) -> list[Row]:
        import duckdb

        try:
            return [tuple(r) for r in self.con.execute(dialect.to_duckdb(query)).fetchall()]
        except duckdb.Error as error:
            raise EngineError(f"DuckDB: {first_line(error)}") from error

    def close(self) -> None:
        """Close the connection and remove its private spill directory, if it has one."""
        from tool_failure_guard.rollout import spill

        spill.close(self.con)


class ClickHouseEngine(Engine):
    """The same queries on ClickHouse, over the exporter's table, through ``execute``."""

    name = "clickhouse"

    def __init__(
        self,
        execute: Execute,
        *,
        table: str = "otel_logs",
        filters: Filters | None = None,
        close: Callable[[], None] | None = None,
        session_tables: bool = False,
    ) -> None:
        """``session_tables``: materialise the relations as temporary tables of the
        executor's own session (chdb in-process only, never a server: see the module's
        docstring); :meth:`close` drops them."""
        if not _TABLE.fullmatch(table):
            raise EngineError(f"{table!r} is not a table name (NAME or DATABASE.NAME)")
        self._execute = execute
        self._close = close
        self.table = table
        self.queries = 0
        self.result_bytes = 0
        columns = self._columns(table)
        missing = [
            c for c in ("Timestamp", "ResourceAttributes", "LogAttributes") if c not in columns
        ]
        if missing:
            raise EngineError(
                f"table {table} is not the exporter's otel_logs table "
                f"(no column {', '.join(missing)})"
            )
        _refuse_unsupported_schema(table, columns)
        self.has_event_name = "EventName" in columns
        self.has_scope_name = "ScopeName" in columns
        self._relations = [
            (name, body.replace("{filters}", self._pushdown(filters or Filters(), columns)))
            for name, body in sql.RELATIONS
        ]
        # Each relation is parsed and rendered for ClickHouse once per engine (not once
        # per query): the queries then parse only their own, short text.
        self._reads = _reads(self._relations)
        self._rendered = {name: self._to_clickhouse(body) for name, body in self._relations}
        self._tables: list[str] = []
        if session_tables:
            self._materialise()

    def _materialise(self) -> None:
        from tool_failure_guard.rollout import queries

        # The tables cast counts: with a value that is not one, stay with common table
        # expressions and let the preflight name the bad input.
        if self.rows(queries.malformed_numbers()):
            return
        for name, body in self._relations:
            if name == "records":  # a projection of the source, read by the tables only
                continue
            self._execute(f"CREATE TEMPORARY TABLE {name} AS {self.render(body)}")
            self._tables.append(name)

    def _to_clickhouse(self, query: str) -> str:
        return dialect.to_clickhouse(
            query,
            table=self.table,
            has_event_name=self.has_event_name,
            has_scope_name=self.has_scope_name,
        )

    def _columns(self, table: str) -> dict[str, str]:
        """The table's columns: name -> ClickHouse type."""
        database, _, name = table.rpartition(".")
        where = f"table = {_literal(name)} AND database = " + (
            _literal(database) if database else "currentDatabase()"
        )
        rows = self._execute(f"SELECT name, type FROM system.columns WHERE {where}")
        if not rows:
            raise EngineError(f"no table {table} on the ClickHouse server")
        return {str(r[0]): str(r[1]) for r in rows}

    @staticmethod
    def _pushdown(filters: Filters, columns: Mapping[str, str]) -> str:
        text = filters.sql()
        if "TimestampTime" in columns:
            # The exporter partitions by toDate(TimestampTime): a bound on it prunes parts.
            for bound, op in ((filters.since, ">="), (filters.until, "<=")):
                if bound is not None:
                    micros = int(bound.timestamp()) * 1_000_000
                    text += f"\n  AND TimestampTime {op} make_timestamp({micros})"
        return text

    def render(self, query: str) -> str:
        """The ClickHouse text of ``query`` with the relations as common table expressions.

        The query alone is parsed and rendered; each relation it needs (with those they
        read in turn) is prepended as a ``WITH`` entry from the engine's cache, ahead of
        the query's own common table expressions, in dependency order.
        """
        tree = sqlglot.parse_one(query, read="duckdb")
        used = {t.name for t in tree.find_all(exp.Table)}
        needed = _closure(used - set(self._tables), self._reads, set(self._tables))
        own = tree.args.get("with_") or tree.args.get("with")
        text = self._to_clickhouse(query)
        ctes = [
            f"{name} AS ({self._rendered[name]})" for name, _ in self._relations if name in needed
        ]
        if not ctes:
            return text
        if own is None:
            return f"WITH {', '.join(ctes)} {text}"
        if not text.startswith("WITH "):  # pragma: no cover - sqlglot always leads with it
            raise EngineError(f"cannot place the relations before {text[:40]!r}")
        return f"WITH {', '.join(ctes)}, {text[len('WITH ') :]}"

    def rows(self, query: str) -> list[Row]:
        text = self.render(query)
        self.queries += 1
        result = self._execute(text)
        self.result_bytes += sum(len(repr(r)) for r in result)
        return result

    def close(self) -> None:
        while self._tables:
            self._execute(f"DROP TEMPORARY TABLE IF EXISTS {self._tables.pop()}")
        if self._close is not None:
            self._close()


def _reads(relations: Sequence[tuple[str, str]]) -> dict[str, frozenset[str]]:
    """For each relation, the other relations its body reads (parsed once)."""
    names = {name for name, _ in relations}
    return {
        name: frozenset(t.name for t in sqlglot.parse_one(body, read="duckdb").find_all(exp.Table))
        & names
        for name, body in relations
    }


def _refuse_unsupported_schema(table: str, columns: Mapping[str, str]) -> None:
    """The attribute columns must be maps; the exporter's JSON schema is named as such."""
    for column in ("ResourceAttributes", "LogAttributes"):
        kind = columns[column]
        if _MAP_TYPE.match(kind):
            continue
        if kind.startswith(("JSON", "Object(")):
            raise EngineError(
                f"table {table} has the ClickHouse exporter's JSON schema ({column} is "
                f"{kind}, the exporter's json: true), which the analysis does not read; it "
                "reads the exporter's default schema, attributes as Map(LowCardinality(String), "
                "String) (json: false), or exported files"
            )
        raise EngineError(
            f"table {table}: {column} is {kind}, not the exporter's "
            "Map(LowCardinality(String), String)"
        )


def _closure(
    used: set[str], reads: dict[str, frozenset[str]], present: set[str] | None = None
) -> set[str]:
    """The relations ``used`` needs, with every relation they read in turn (not ``present``)."""
    needed: set[str] = set()
    skip = present or set()
    pending = [name for name in used if name in reads and name not in skip]
    while pending:
        name = pending.pop()
        if name in needed:
            continue
        needed.add(name)
        pending.extend(t for t in reads[name] if t not in needed and t not in skip)
    return needed
