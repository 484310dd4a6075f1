"""The runtime transition table, derived from the statechart class at import time.

The python-statemachine engine costs about a millisecond per prompt (see
``docs/performance.md``), so the runtime never instantiates it.  Instead this
module reads the declared transitions of
:class:`~tool_failure_guard.statecharts.RepeatedToolFailureChart` -- sources, targets, condition
expressions and action names, in declaration order -- and evaluates them once
for every combination of the five facts.  The result is a plain table:

    TRANSITIONS[phase][facts_index] -> Transition(target, action)

where bit ``i`` of ``facts_index`` is the truth of ``CONDITIONS[i]``.  A final
phase has no row: nothing leaves ``latched``.

Nothing here is written by hand twice: change the chart and the table changes
with it; the model checks in ``tests/`` drive the engine beside this table.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from statemachine import StateChart

from tool_failure_guard.guard._values import Phase
from tool_failure_guard.statecharts import ACTIONS, CONDITIONS, SETTLE, RepeatedToolFailureChart

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


def _compile_condition(expression: str) -> Callable[[Facts], bool]:
    """Compile a condition expression using only names from CONDITIONS and and/or/not."""
    try:
        tree = ast.parse(expression, mode="eval").body
    except SyntaxError as exc:
        raise ChartError(f"condition {expression!r} is not an expression: {exc}") from exc

    def build(node: ast.expr) -> Callable[[Facts], bool]:
        if isinstance(node, ast.Name):
            if node.id not in CONDITIONS:
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


def facts_of(index: int) -> dict[str, bool]:
    """The facts mapping that ``index`` encodes (bit i is CONDITIONS[i])."""
    return {name: bool(index >> bit & 1) for bit, name in enumerate(CONDITIONS)}


def facts_index(facts: Facts) -> int:
    """The inverse of :func:`facts_of`."""
    return sum(1 << bit for bit, name in enumerate(CONDITIONS) if facts[name])


FACT_COMBINATIONS = 1 << len(CONDITIONS)


def declared_transitions(
    chart: type[StateChart[Any]] = RepeatedToolFailureChart,
) -> list[Transition]:
    """Every transition of the ``settle`` event, in declaration order per phase."""
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


def derive_table(
    chart: type[StateChart[Any]] = RepeatedToolFailureChart,
) -> dict[Phase, tuple[Transition, ...]]:
    """Evaluate the declared transitions for every facts combination.

    Raises :class:`ChartError` when a non-final phase has a combination that
    no transition takes (the chart would silently drop a batch), or when a
    declared transition can never fire (it is dead and misleads reviewers).
    """
    by_source: dict[Phase, list[tuple[Transition, Callable[[Facts], bool]]]] = {}
    for transition in declared_transitions(chart):
        predicate = (
            _compile_condition(transition.condition) if transition.condition else lambda _: True
        )
        by_source.setdefault(transition.source, []).append((transition, predicate))

    table: dict[Phase, tuple[Transition, ...]] = {}
    for state in chart.states:
        phase = Phase(state.value)
        candidates = by_source.get(phase, [])
        if state.final:  # python-statemachine refuses transitions out of a final state
            continue
        row: list[Transition] = []
        for index in range(FACT_COMBINATIONS):
            facts = facts_of(index)
            chosen = next((t for t, holds in candidates if holds(facts)), None)
            if chosen is None:
                raise ChartError(f"{phase}: no transition for facts {facts}")
            row.append(chosen)
        dead = [t for t, _ in candidates if t not in row]
        if dead:
            raise ChartError(f"{phase}: transitions that can never fire: {dead}")
        table[phase] = tuple(row)
    return table


#: The runtime's table, derived once at import.
TRANSITIONS: dict[Phase, tuple[Transition, ...]] = derive_table()
