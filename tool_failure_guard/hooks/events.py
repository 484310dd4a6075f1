"""What a hook host answers and reports for one event: the shape every CLI module returns.

A plain class, not attrs: the per-call events import nothing heavy.
"""

from __future__ import annotations

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tool_failure_guard.hooks.replay import Settled


class Handled:
    """One event's meaning: the answer for the CLI (None: say nothing) and what settled.

    ``settled`` is set when the event closed a batch (the core's action, for
    telemetry); ``prompt_ended`` names how the prompt ended when the event ends it
    (a stop reason of the prompt record), else None.
    """

    __slots__ = ("answer", "prompt_ended", "settled")

    def __init__(
        self,
        *,
        answer: dict[str, Any] | None = None,
        settled: Settled | None = None,
        prompt_ended: str | None = None,
    ) -> None:
        self.answer = answer
        self.settled = settled
        self.prompt_ended = prompt_ended
