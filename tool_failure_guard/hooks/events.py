"""What a hook host answers and reports for one event: the shape every CLI module returns."""

from __future__ import annotations

from typing import Any

import attrs

from tool_failure_guard.hooks.prompt import Settled


@attrs.frozen(kw_only=True)
class Handled:
    """One event's meaning: the answer for the CLI (None: say nothing) and what settled.

    ``settled`` is set when the event closed a batch (the core's action, for
    telemetry); ``prompt_ended`` names how the prompt ended when the event ends it
    (a stop reason of the prompt record), else None.
    """

    answer: dict[str, Any] | None = None
    settled: Settled | None = None
    prompt_ended: str | None = None
