"""Rendering the one SQL source (DuckDB dialect, :mod:`~tool_failure_guard.rollout.sql`) for
ClickHouse.

sqlglot's DuckDB -> ClickHouse transpiler does the bulk (``CAST`` to
``Nullable(...)``, quoting, window syntax); the rewrites below fix the few
places where the same spelling means something else in ClickHouse:

* ``m['k']`` on a ``Map`` is ``''`` for a missing key in ClickHouse, ``NULL`` in
  DuckDB: it becomes ``if(mapContains(m, 'k'), m['k'], NULL)``;
* ``a // b`` (integer division) becomes ``intDiv(a, b)``, not a float division cast;
* ``epoch_us(ts)``/``make_timestamp(us)`` become ``toUnixTimestamp64Micro``/
  ``fromUnixTimestamp64Micro``; ``split_part(s, sep, 1)`` becomes ``splitByString``;
* ``lead(x) OVER (...)`` becomes ``leadInFrame`` over the whole partition;
* ``regexp_full_match(s, p)`` becomes ``match(s, '^(?:p)$')``;
* ``cardinality(map)``, ``len(list)``, ``map_keys``, ``list_intersect`` become
  ``length``, ``length``, ``mapKeys``, ``arrayIntersect``;
* the source table ``logs`` becomes the configured table, and ``EventName`` a
  ``NULL`` where the table predates that column.

No setting is changed (a ``readonly = 1`` user can run every query): the outer
joins read only ``Nullable`` columns of their optional side, or ``coalesce`` them,
so ClickHouse's default ``join_use_nulls = 0`` gives DuckDB's answers.
"""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp

#: Columns holding ``Map(String, String)`` values.
MAP_COLUMNS = frozenset({"attributes", "resourceattributes", "logattributes"})


def _is_map(node: exp.Expression) -> bool:
    return isinstance(node, exp.Column) and node.name.lower() in MAP_COLUMNS


def _names(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.MapKeys):
        return exp.Anonymous(this="mapKeys", expressions=[node.this])
    if _function_name(node) == "list_intersect":
        return exp.Anonymous(this="arrayIntersect", expressions=list(node.expressions))
    return node


def _map_access(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Bracket) and _is_map(node.this) and len(node.expressions) == 1:
        key = node.expressions[0]
        return exp.If(
            this=exp.Anonymous(this="mapContains", expressions=[node.this.copy(), key.copy()]),
            true=node.copy(),
            false=exp.Null(),
        )
    return node


def _rewrite(node: exp.Expression, table: str, has_event_name: bool) -> exp.Expression:
    if isinstance(node, exp.IntDiv):
        return exp.Anonymous(this="intDiv", expressions=[node.this, node.expression])
    if isinstance(node, exp.Table) and node.name == "logs" and not node.args.get("db"):
        database, _, name = table.rpartition(".")
        return exp.table_(name, db=database or None, alias=node.alias or None)
    if isinstance(node, exp.Column) and node.name == "EventName" and not has_event_name:
        return exp.Null()
    if isinstance(node, exp.Window) and isinstance(node.this, exp.Lead):
        lead = node.this
        node.set("this", exp.Anonymous(this="leadInFrame", expressions=[lead.this]))
        node.set(
            "spec",
            exp.WindowSpec(
                kind="ROWS",
                start="UNBOUNDED",
                start_side="PRECEDING",
                end="UNBOUNDED",
                end_side="FOLLOWING",
            ),
        )
        return node
    if isinstance(node, exp.Length):  # only ever of a list here: its element count
        return exp.Anonymous(this="length", expressions=[node.this])
    name = _function_name(node)
    if name == "epoch_us":
        return exp.Anonymous(this="toUnixTimestamp64Micro", expressions=list(node.expressions))
    if isinstance(node, exp.UnixToTime):
        return exp.Anonymous(
            this="fromUnixTimestamp64Micro", expressions=[node.this, exp.Literal.string("UTC")]
        )
    if name == "regexp_full_match" or isinstance(node, exp.RegexpFullMatch):
        subject, pattern = _args(node)
        anchored = exp.Literal.string(f"^(?:{pattern.name})$")
        return exp.Anonymous(this="match", expressions=[subject, anchored])
    if isinstance(node, exp.SplitPart):
        subject = node.this
        return exp.If(
            this=exp.Is(this=subject.copy(), expression=exp.Null()),
            true=exp.Null(),
            false=exp.Anonymous(
                this="arrayElement",
                expressions=[
                    exp.Anonymous(
                        this="splitByString",
                        expressions=[
                            node.args["delimiter"],
                            exp.Anonymous(this="assumeNotNull", expressions=[subject.copy()]),
                        ],
                    ),
                    node.args["part_index"],
                ],
            ),
        )
    if name == "cardinality":
        return exp.Anonymous(this="length", expressions=list(node.expressions))
    return node


def _function_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return ""


def _args(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    return [node.this, node.expression]


@functools.lru_cache(maxsize=256)
def to_clickhouse(sql: str, table: str = "otel_logs", has_event_name: bool = True) -> str:
    """The ClickHouse rendering of one DuckDB-dialect statement of the analysis."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    tree = tree.transform(lambda node: _rewrite(node, table, has_event_name))
    # Later passes reach inside what the earlier ones built (a pass skips a new node's
    # children): renamed functions (idempotent, twice for nesting), then map access.
    for _ in range(2):
        tree = tree.transform(_names)
    tree = tree.transform(_map_access)
    return tree.sql(dialect="clickhouse")
