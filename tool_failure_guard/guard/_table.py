"""The runtime transition table, derived from the statechart class.

The python-statemachine engine costs about a millisecond per prompt (see
``docs/performance.md``), so the runtime never instantiates it.  Instead
:func:`derive_table` reads the declared transitions of
:class:`~tool_failure_guard.statecharts.RepeatedToolFailureChart` -- sources, targets, condition
expressions and action names, in declaration order -- and evaluates them once
for every combination of the five facts.  The result is a plain table:

    TRANSITIONS[phase][facts_index] -> Transition(target, action)

where bit ``i`` of ``facts_index`` is the truth of ``CONDITIONS[i]``.  A final
phase has no row: nothing leaves ``latched``.

Importing python-statemachine costs more than the rest of the library, so the
derivation runs when the chart changes, not at every import: ``tool-failure-guard
render`` writes its result to ``tool_failure_guard/guard/_chart_table.py`` (:func:`table_module`),
and :data:`TRANSITIONS` is read from there.  Nothing is written by hand twice:
``render --check`` (CI) and ``tests/test_chart.py`` fail when that module is not
exactly what the chart derives, and the model checks in ``tests/`` drive the
engine beside this table.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from tool_failure_guard.guard import _chart_table
from tool_failure_guard.guard._chart_table import CONDITIONS
from tool_failure_guard.guard._values import Phase

if TYPE_CHECKING:
    from statemachine import StateChart

Facts = Mapping[str, bool]


@attrs.frozen
class Transition:
    """One row of the derived table: where the chart goes, and which action runs."""

    source: Phase
    target: Phase
    action: str
    condition: str  #: the condition expression as declared ("" when unconditional)
    order: int  #: position among the transitions leaving ``source``


class ChartError(Exception):
    """The statechart declaration cannot be turned into a runtime table."""


def _compile_condition(
    expression: str, names: Sequence[str] | None = None
) -> Callable[[Facts], bool]:
    """Compile a condition expression using only ``names`` and and/or/not.

    ``names`` defaults to the chart's declared conditions (``statecharts.CONDITIONS``).
    """
    if names is None:
        from tool_failure_guard.statecharts import CONDITIONS

        names = CONDITIONS
    known = frozenset(names)
    try:
        tree = ast.parse(expression, mode="eval").body
    except SyntaxError as exc:
        raise ChartError(f"condition {expression!r} is not an expression: {exc}") from exc

    def build(node: ast.expr) -> Callable[[Facts], bool]:
        if isinstance(node, ast.Name):
            if node.id not in known:
                raise ChartError(f"condition {expression!r} names unknown guard {node.id!r}")
            name = node.id
            return lambda facts: facts[name]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = build(node.operand)
            return lambda facts: not inner(facts)
        if isinstance(node, ast.BoolOp):
            parts = [build(value) for value in node.values]
            if isinstance(node.op, ast.And):
                return lambda facts: all(part(facts) for part in parts)
            return lambda facts: any(part(facts) for part in parts)
        raise ChartError(f"condition {expression!r} uses unsupported syntax {ast.dump(node)}")

    return build(tree)


def facts_of(index: int, names: Sequence[str] = CONDITIONS) -> dict[str, bool]:
    """The facts mapping that ``index`` encodes (bit i is ``names[i]``, CONDITIONS by default)."""
    return {name: bool(index >> bit & 1) for bit, name in enumerate(names)}


def facts_index(facts: Facts) -> int:
    """The inverse of :func:`facts_of`."""
    return sum(1 << bit for bit, name in enumerate(CONDITIONS) if facts[name])


FACT_COMBINATIONS = 1 << len(CONDITIONS)


def _chart(chart: type[StateChart[Any]] | None) -> type[StateChart[Any]]:
    if chart is not None:
        return chart
    from tool_failure_guard.statecharts import RepeatedToolFailureChart

    return RepeatedToolFailureChart


def declared_transitions(chart: type[StateChart[Any]] | None = None) -> list[Transition]:
    """Every transition of the ``settle`` event, in declaration order per phase.

    ``chart`` defaults to :class:`~tool_failure_guard.statecharts.RepeatedToolFailureChart`.
    """
    from tool_failure_guard.statecharts import ACTIONS, SETTLE

    chart = _chart(chart)
    result: list[Transition] = []
    for state in chart.states:
        source = Phase(state.value)
        for order, transition in enumerate(state.transitions):
            if [event for event in transition.events] != [SETTLE]:
                raise ChartError(f"{source}: transition on {transition.events}, expected {SETTLE}")
            actions = [spec.func for spec in transition.on if not spec.is_convention]
            if len(actions) != 1 or actions[0] not in ACTIONS:
                raise ChartError(f"{source} -> {transition.target.value}: actions {actions}")
            conditions = []
            for spec in transition.cond:
                text = spec.func if isinstance(spec.func, str) else ""
                if not text:
                    raise ChartError(f"{source}: conditions must be named, got {spec.func!r}")
                conditions.append(text if spec.expected_value else f"not ({text})")
            result.append(
                Transition(
                    source=source,
                    target=Phase(transition.target.value),
                    action=actions[0],
                    condition=" and ".join(conditions),
                    order=order,
                )
            )
    return result


def derive_table(chart: type[StateChart[Any]] | None = None) -> dict[Phase, tuple[Transition, ...]]:
    """Evaluate the declared transitions for every facts combination.

    Raises :class:`ChartError` when a non-final phase has a combination that
    no transition takes (the chart would silently drop a batch), or when a
    declared transition can never fire (it is dead and misleads reviewers).
    """
    from tool_failure_guard.statecharts import CONDITIONS as declared

    chart = _chart(chart)
    by_source: dict[Phase, list[tuple[Transition, Callable[[Facts], bool]]]] = {}
    for transition in declared_transitions(chart):
        predicate = (
            _compile_condition(transition.condition, declared)
            if transition.condition
            else lambda _: True
        )
        by_source.setdefault(transition.source, []).append((transition, predicate))

    table: dict[Phase, tuple[Transition, ...]] = {}
    for state in chart.states:
        phase = Phase(state.value)
        candidates = by_source.get(phase, [])
        if state.final:  # python-statemachine refuses transitions out of a final state
            continue
        row: list[Transition] = []
        for index in range(1 << len(declared)):
            facts = facts_of(index, declared)
            chosen = next((t for t, holds in candidates if holds(facts)), None)
            if chosen is None:
                raise ChartError(f"{phase}: no transition for facts {facts}")
            row.append(chosen)
        dead = [t for t, _ in candidates if t not in row]
        if dead:
            raise ChartError(f"{phase}: transitions that can never fire: {dead}")
        table[phase] = tuple(row)
    return table


def table_module(chart: type[StateChart[Any]] | None = None) -> str:
    """The source of ``tool_failure_guard/guard/_chart_table.py``: :func:`derive_table`, as data.

    ``DECLARED`` lists every transition (source, target, action, condition) in
    declaration order; ``ROWS[source]`` holds, for each facts index, the
    position among ``source``'s transitions of the one taken, as a digit.
    """
    import json

    from tool_failure_guard.statecharts import ACTIONS, CONDITIONS, SETTLE

    chart = _chart(chart)
    table = derive_table(chart)
    declared = declared_transitions(chart)
    if any(t.order > 9 for t in declared):
        raise ChartError("more than ten transitions leave one phase; ROWS holds one digit each")
    quote = json.dumps
    lines = [
        '"""The runtime transition table, as data: generated by ``tool-failure-guard render``.',
        "",
        "Do not edit.  ``tool_failure_guard/statecharts/repeated_tool_failure.py`` is the one",
        "declaration;",
        "``guard._table.derive_table`` evaluates it and ``guard._table.table_module`` writes",
        "this file, so the runtime reads the table without importing python-statemachine.",
        "``render --check`` (CI) and ``tests/test_chart.py`` fail when it is stale.",
        '"""',
        "",
        "#: The one event (statecharts.SETTLE).",
        f"SETTLE = {quote(SETTLE)}",
        "#: statecharts.CONDITIONS: bit i of a facts index is the truth of CONDITIONS[i].",
        "CONDITIONS = (",
        *(f"    {quote(name)}," for name in CONDITIONS),
        ")",
        "#: statecharts.ACTIONS: the actions a transition may run.",
        "ACTIONS = (",
        *(f"    {quote(name)}," for name in ACTIONS),
        ")",
        "#: Every transition of the settle event in declaration order:",
        '#: (source, target, action, condition; "" when unconditional).',
        "DECLARED = (",
        *(
            f"    ({quote(t.source.value)}, {quote(t.target.value)}, {quote(t.action)}, "
            f"{quote(t.condition)}),"
            for t in declared
        ),
        ")",
        "#: ROWS[source][facts_index]: the position, among the transitions leaving source,",
        "#: of the one taken (a final phase has no row).",
        "ROWS = {",
        *(
            f"    {quote(phase.value)}: {quote(''.join(str(t.order) for t in row))},"
            for phase, row in table.items()
        ),
        "}",
    ]
    return "\n".join(lines) + "\n"


def _load(data: Any = _chart_table) -> dict[Phase, tuple[Transition, ...]]:
    """The table ``tool_failure_guard/guard/_chart_table.py`` holds, as :class:`Transition` rows."""
    leaving: dict[str, list[Transition]] = {}
    for source, target, action, condition in data.DECLARED:
        row = leaving.setdefault(source, [])
        row.append(Transition(Phase(source), Phase(target), action, condition, len(row)))
    table = {
        Phase(source): tuple(leaving[source][int(digit)] for digit in digits)
        for source, digits in data.ROWS.items()
    }
    if any(len(row) != FACT_COMBINATIONS for row in table.values()):  # pragma: no cover
        raise ChartError(
            "tool_failure_guard/guard/_chart_table.py is damaged; run `tool-failure-guard render`"
        )
    return table


#: The runtime's table: the chart's derivation, as held by
#: ``tool_failure_guard/guard/_chart_table.py``.
TRANSITIONS: dict[Phase, tuple[Transition, ...]] = _load()
