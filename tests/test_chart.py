"""The statechart declaration and the table derived from it."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from statemachine import Event, State, StateChart
from statemachine.exceptions import TransitionNotAllowed

from tool_failure_guard.guard import (
    TRANSITIONS,
    ChartError,
    Phase,
    _chart_table,
    declared_transitions,
    derive_table,
)
from tool_failure_guard.guard._table import (
    FACT_COMBINATIONS,
    _load,
    facts_index,
    facts_of,
    table_module,
)
from tool_failure_guard.guard.engine import _ChartModel
from tool_failure_guard.statecharts import ACTIONS, CONDITIONS, SETTLE, RepeatedToolFailureChart


def test_the_chart_declares_the_four_phases_with_idle_initial_and_latched_final() -> None:
    states = {state.value: state for state in RepeatedToolFailureChart.states}
    assert set(states) == {phase.value for phase in Phase}
    assert states["idle"].initial and not states["idle"].final
    assert states["latched"].final
    assert [event.id for event in RepeatedToolFailureChart.events] == [SETTLE]


def test_every_condition_and_action_name_resolves_on_instantiation() -> None:
    # python-statemachine resolves names only when an instance is created.
    chart = RepeatedToolFailureChart(model=_ChartModel())
    assert chart.model.state == "idle"


def test_conditions_are_named_functions_not_lambdas() -> None:
    named = {t.condition for t in declared_transitions()} - {""}
    words = {word for text in named for word in text.replace("(", " ").split()}
    assert words - {"and", "or", "not"} <= set(CONDITIONS)
    assert all(callable(getattr(RepeatedToolFailureChart, name)) for name in CONDITIONS)


def test_unmatched_events_and_condition_errors_are_not_swallowed() -> None:
    chart = RepeatedToolFailureChart(model=_ChartModel())
    with pytest.raises(TransitionNotAllowed):
        chart.send("no_such_event", facts=facts_of(0))
    with pytest.raises(KeyError):
        chart.send(SETTLE, facts={})  # a condition raises: it must surface


def test_the_table_covers_every_non_final_phase_and_fact_combination() -> None:
    assert set(TRANSITIONS) == {Phase.IDLE, Phase.TRACKING, Phase.WARNED}
    for row in TRANSITIONS.values():
        assert len(row) == FACT_COMBINATIONS == 2 ** len(CONDITIONS)
        assert {t.action for t in row} <= set(ACTIONS)


# -- the runtime reads the derivation from tool_failure_guard/guard/_chart_table.py ---------------


def test_the_runtime_table_is_what_the_chart_derives() -> None:
    assert derive_table() == TRANSITIONS
    assert (_chart_table.CONDITIONS, _chart_table.ACTIONS) == (CONDITIONS, ACTIONS)
    assert _chart_table.SETTLE == SETTLE
    committed = Path(_chart_table.__file__).read_text(encoding="utf-8")
    assert committed == table_module(), "run `tool-failure-guard render`"


def test_the_table_module_follows_the_chart_it_is_generated_from() -> None:
    # A chart whose idle phase puts a candidate before a reset reason: what the
    # generator writes, read back, is that chart's derivation, not the committed one.
    reordered = make_chart(
        lambda i, t, w, latched: (
            i.to(t, cond="eligible", on="start_streak")
            | i.to.itself(cond="has_reset_reason", on="reset")
            | i.to.itself(on="hold")
            | t.to.itself(on="hold")
            | w.to.itself(on="hold")
        ),
        **{name: _facts for name in CONDITIONS},
    )
    namespace: dict[str, Any] = {}
    exec(compile(table_module(reordered), "<generated>", "exec"), namespace)
    loaded = _load(type("Generated", (), namespace))
    assert loaded == derive_table(reordered) != derive_table()
    # eligible now wins over a reset reason in idle
    both = facts_index({name: name in ("eligible", "has_reset_reason") for name in CONDITIONS})
    assert loaded[Phase.IDLE][both].action == "start_streak"
    assert TRANSITIONS[Phase.IDLE][both].action == "reset"


def test_importing_the_library_does_not_import_python_statemachine() -> None:
    code = (
        "import sys, tool_failure_guard\n"
        "tool_failure_guard.RepeatedToolFailureGuard(tool_failure_guard.GuardMode.ENFORCE)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('statemachine', 'logging')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_facts_index_round_trips() -> None:
    for index in range(FACT_COMBINATIONS):
        assert facts_index(facts_of(index)) == index


@pytest.mark.parametrize(
    ("phase", "index"),
    list(itertools.product([Phase.IDLE, Phase.TRACKING, Phase.WARNED], range(FACT_COMBINATIONS))),
)
def test_engine_takes_the_tables_transition_for_every_phase_and_facts(
    phase: Phase, index: int
) -> None:
    model = _ChartModel()
    chart = RepeatedToolFailureChart(model=model, start_value=phase.value)
    chart.send(SETTLE, facts=facts_of(index))
    expected = TRANSITIONS[phase][index]
    assert (model.state, model.fired) == (expected.target.value, [expected.action])


def test_nothing_leaves_latched() -> None:
    chart = RepeatedToolFailureChart(model=_ChartModel(), start_value="latched")
    with pytest.raises(TransitionNotAllowed):
        chart.send(SETTLE, facts=facts_of(2))


# -- the derivation refuses charts it cannot honestly turn into a table -------


def _facts(self: Any, facts: dict[str, bool], **_: Any) -> bool:
    return True


def make_chart(build: Any, **conditions: Any) -> type[StateChart]:
    """A throwaway chart with the four phases and the transitions ``build`` returns."""
    idle = State("idle", initial=True)
    tracking = State("tracking")
    warned = State("warned")
    latched = State("latched", final=True)
    namespace = {
        "allow_event_without_transition": False,
        "catch_errors_as_events": False,
        "validate_disconnected_states": False,
        "validate_trap_states": False,
        "validate_final_reachability": False,
        "idle": idle,
        "tracking": tracking,
        "warned": warned,
        "latched": latched,
        "settle": Event(build(idle, tracking, warned, latched), name=SETTLE),
        **conditions,
    }
    return type("Throwaway", (StateChart,), namespace)


def test_derivation_rejects_a_phase_that_drops_some_facts() -> None:
    chart = make_chart(
        lambda i, t, w, latched: (
            i.to(t, cond="eligible", on="start_streak")
            | t.to.itself(on="hold")
            | w.to.itself(on="hold")
        ),
        eligible=_facts,
    )
    with pytest.raises(ChartError, match="idle: no transition"):
        derive_table(chart)


def test_derivation_rejects_a_dead_transition() -> None:
    chart = make_chart(
        lambda i, t, w, latched: (
            i.to.itself(on="hold")
            | i.to(t, cond="eligible", on="start_streak")
            | t.to.itself(on="hold")
            | w.to.itself(on="hold")
        ),
        eligible=_facts,
    )
    with pytest.raises(ChartError, match="can never fire"):
        derive_table(chart)


def test_derivation_rejects_unknown_condition_names_and_actions() -> None:
    typo = make_chart(
        lambda i, t, w, latched: (
            i.to(t, cond="elligible", on="start_streak")
            | i.to.itself(on="hold")
            | t.to.itself(on="hold")
            | w.to.itself(on="hold")
        ),
        elligible=_facts,
    )
    with pytest.raises(ChartError, match="unknown guard 'elligible'"):
        derive_table(typo)
    bad_action = make_chart(
        lambda i, t, w, latched: (
            i.to.itself(on="explode") | t.to.itself(on="hold") | w.to.itself(on="hold")
        ),
    )
    with pytest.raises(ChartError, match="explode"):
        derive_table(bad_action)


def test_derivation_rejects_lambda_conditions() -> None:
    anonymous = make_chart(
        lambda i, t, w, latched: (
            i.to(t, cond=lambda facts: True, on="start_streak")
            | i.to.itself(on="hold")
            | t.to.itself(on="hold")
            | w.to.itself(on="hold")
        ),
    )
    with pytest.raises(ChartError, match="named"):
        derive_table(anonymous)
