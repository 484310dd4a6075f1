"""Rendering the one SQL source (DuckDB dialect, :mod:`~tool_failure_guard.rollout.sql`) for
ClickHouse, and for DuckDB's own ``logs`` table.

The source reads the attribute columns as maps (``m['k']``, ``map_keys(m)``,
``cardinality(m)``), as the exporter's ``otel_logs`` stores them.  DuckDB's
``logs`` table keeps each as two parallel lists instead, ``STRUCT(keys
VARCHAR[], vals VARCHAR[])`` (building a ``MAP`` was 40 % of the load:
``docs/rollout.md`` section 8); :func:`to_duckdb` renders those three spellings
for it (``vals[list_position(keys, 'k')]``, ``keys``, ``len(keys)``) by pattern,
leaving the rest of the text as written (no parse: it runs for every DuckDB query).

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
* the source table ``logs`` becomes the configured table, and ``EventName`` or
  ``ScopeName`` a ``NULL`` where the table predates that column.

No setting is changed (a ``readonly = 1`` user can run every query): the outer
joins read only ``Nullable`` columns of their optional side, or ``coalesce`` them,
so ClickHouse's default ``join_use_nulls = 0`` gives DuckDB's answers.
"""

from __future__ import annotations

import functools
import re

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


def _rewrite(
    node: exp.Expression, table: str, has_event_name: bool, has_scope_name: bool
) -> exp.Expression:
    if isinstance(node, exp.IntDiv):
        return exp.Anonymous(this="intDiv", expressions=[node.this, node.expression])
    if isinstance(node, exp.Table) and node.name == "logs" and not node.args.get("db"):
        database, _, name = table.rpartition(".")
        return exp.table_(name, db=database or None, alias=node.alias or None)
    if isinstance(node, exp.Column) and node.name == "EventName" and not has_event_name:
        return exp.Null()
    if isinstance(node, exp.Column) and node.name == "ScopeName" and not has_scope_name:
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


_MAP = r"(?<![\w.])((?:[A-Za-z_]\w*\.)?(?:" + "|".join(sorted(MAP_COLUMNS)) + r"))"
_ACCESS = re.compile(_MAP + r"\[('(?:[^']|'')*')\]", re.IGNORECASE)
_KEYS = re.compile(r"\bmap_keys\(\s*" + _MAP + r"\s*\)", re.IGNORECASE)
_SIZE = re.compile(r"\bcardinality\(\s*" + _MAP + r"\s*\)", re.IGNORECASE)


@functools.lru_cache(maxsize=512)
def to_duckdb(sql: str) -> str:
    """The statement for DuckDB's ``logs`` table: attribute maps as key and value lists.

    Only the three map spellings change (a key given as a string literal, the keys, their
    count); every other character of the text stays as written.
    """
    sql = _ACCESS.sub(
        r"list_extract(struct_extract(\1, 'vals'), list_position(struct_extract(\1, 'keys'), \2))",
        sql,
    )
    sql = _KEYS.sub(r"struct_extract(\1, 'keys')", sql)
    return _SIZE.sub(r"len(struct_extract(\1, 'keys'))", sql)


@functools.lru_cache(maxsize=256)
def to_clickhouse(
    sql: str, table: str = "otel_logs", has_event_name: bool = True, has_scope_name: bool = True
) -> str:
    """The ClickHouse rendering of one DuckDB-dialect statement of the analysis."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    tree = tree.transform(lambda node: _rewrite(node, table, has_event_name, has_scope_name))
    # Later passes reach inside what the earlier ones built (a pass skips a new node's
    # children): renamed functions (idempotent, twice for nesting), then map access.
    for _ in range(2):
        tree = tree.transform(_names)
    tree = tree.transform(_map_access)
    return tree.sql(dialect="clickhouse")
