"""The same guard, with the python-statemachine engine choosing each transition.

This twin exists for the model checks and the benchmark, never for sessions:
it instantiates :class:`statecharts.RepeatedToolFailureChart` per guard and
sends it one ``settle`` event per batch, which costs about a thousand times
more than the derived table.  Everything except the choice of transition --
classification, facts, actions, decisions -- is the runtime's own code, so a
difference between the two can only come from deriving the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from guard._classify import BatchVerdict
from guard._guard import RepeatedToolFailureGuard
from guard._table import Transition, declared_transitions
from guard._values import GuardMode, Phase
from statecharts import ACTIONS, CONDITIONS, SETTLE, RepeatedToolFailureChart

_BY_SOURCE: dict[Phase, list[Transition]] = {}
for _transition in declared_transitions():
    _BY_SOURCE.setdefault(_transition.source, []).append(_transition)


class _ChartModel:
    """The engine's model: it only records which action the engine ran.

    One recording method per action the chart may name (``statecharts.ACTIONS``),
    generated below, so the engine resolves every ``on=`` name and nothing
    else.
    """

    def __init__(self) -> None:
        self.state: Any = None
        self.fired: list[str] = []


def _recorder(name: str) -> Callable[[_ChartModel], None]:
    def record(self: _ChartModel) -> None:
        self.fired.append(name)

    record.__name__ = name
    return record


for _action in ACTIONS:
    setattr(_ChartModel, _action, _recorder(_action))


class EngineGuard(RepeatedToolFailureGuard):
    """A :class:`RepeatedToolFailureGuard` whose transitions the engine picks."""

    __slots__ = ("_chart", "_model")

    def __init__(self, mode: GuardMode | str = GuardMode.SHADOW) -> None:
        super().__init__(mode)
        self._model = _ChartModel()
        self._chart = RepeatedToolFailureChart(model=self._model)

    @property
    def engine_phase(self) -> Phase:
        """The phase the engine believes it is in."""
        return Phase(self._model.state)

    def _select(self, index: int, verdict: BatchVerdict) -> Transition:
        facts = {name: bool(index >> bit & 1) for bit, name in enumerate(CONDITIONS)}
        source = self.engine_phase
        fired_before = len(self._model.fired)
        self._chart.send(SETTLE, facts=facts)
        fired = self._model.fired[fired_before:]
        if len(fired) != 1:
            raise AssertionError(f"engine ran actions {fired} for one settle event")
        target = self.engine_phase
        for transition in _BY_SOURCE[source]:
            if transition.target is target and transition.action == fired[0]:
                # Several declared transitions may share (target, action); the
                # table row names the first that matches, and so does this.
                return transition
        raise AssertionError(f"engine took {source} -> {target} / {fired[0]}, not declared")
