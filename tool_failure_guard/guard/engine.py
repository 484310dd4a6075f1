"""The same guard, with the python-statemachine engine choosing each transition.

This twin exists for the model checks and the benchmark, never for sessions:
it instantiates :class:`~tool_failure_guard.statecharts.RepeatedToolFailureChart` per guard and
sends it one ``settle`` event per batch, which costs about a thousand times
more than the derived table.  Everything except the choice of transition --
classification, facts, actions, decisions -- is the runtime's own code, so a
difference between the two can only come from deriving the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tool_failure_guard.guard._guard import STEP_OF, RepeatedToolFailureGuard, Step
from tool_failure_guard.guard._table import Transition, declared_transitions
from tool_failure_guard.guard._values import GuardMode, Phase
from tool_failure_guard.statecharts import ACTIONS, CONDITIONS, SETTLE, RepeatedToolFailureChart

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


class _EngineRow:
    """``row[facts_index]``: send one ``settle`` to the engine, return the step it took."""

    __slots__ = ("_guard", "_source")

    def __init__(self, guard: EngineGuard, source: Phase) -> None:
        self._guard = guard
        self._source = source

    def __getitem__(self, index: int) -> Step:
        return STEP_OF[self._guard.select(self._source, index)]


class _EngineSteps(Mapping[Phase, Any]):
    """The engine twin's stand-in for the derived table the guard looks steps up in."""

    __slots__ = ("_guard",)

    def __init__(self, guard: EngineGuard) -> None:
        self._guard = guard

    def __getitem__(self, phase: Phase) -> Any:
        return _EngineRow(self._guard, phase)

    def __iter__(self) -> Iterator[Phase]:
        return iter(_BY_SOURCE)

    def __len__(self) -> int:
        return len(_BY_SOURCE)


class EngineGuard(RepeatedToolFailureGuard):
    """A :class:`RepeatedToolFailureGuard` whose transitions the engine picks."""

    __slots__ = ("_chart", "_engine_steps", "_model")

    def __init__(self, mode: GuardMode | str = GuardMode.SHADOW) -> None:
        super().__init__(mode)
        self._model = _ChartModel()
        self._chart = RepeatedToolFailureChart(model=self._model)
        self._engine_steps = _EngineSteps(self)

    @property
    def _steps(self) -> Mapping[Phase, Any]:  # type: ignore[override]
        return self._engine_steps

    @property
    def engine_phase(self) -> Phase:
        """The phase the engine believes it is in."""
        return Phase(self._model.state)

    def select(self, source: Phase, index: int) -> Transition:
        """Send the facts of ``index`` to the engine; return the declared transition it took."""
        if source is not self.engine_phase:
            raise AssertionError(f"guard in {source}, engine in {self.engine_phase}")
        facts = {name: bool(index >> bit & 1) for bit, name in enumerate(CONDITIONS)}
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
