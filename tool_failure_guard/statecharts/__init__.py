"""The one declaration of the repeated tool-failure guard's statechart.

Everything else about the state machine -- the runtime's transition table in
:mod:`guard`, the diagrams in ``diagrams/`` and the model checks in ``tests/`` --
is derived from, or checked against, :class:`RepeatedToolFailureChart`.
"""

from tool_failure_guard.statecharts.repeated_tool_failure import (
    ACTIONS,
    CONDITIONS,
    SETTLE,
    RepeatedToolFailureChart,
)

__all__ = ["ACTIONS", "CONDITIONS", "SETTLE", "RepeatedToolFailureChart"]
