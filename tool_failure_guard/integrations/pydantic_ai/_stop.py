"""How a stopped pydantic-ai run ends: the framework's limit error, or the stop text, typed.

- :class:`ProtectionStopped` (``on_stop="error"``, the default): raised by the
  run like pydantic-ai's own :class:`~pydantic_ai.exceptions.UsageLimitExceeded`,
  which it subclasses, so a handler already written for a usage limit catches
  it; it carries the :class:`~tool_failure_guard.integrations._api.GuardStop`,
  the run's :class:`~tool_failure_guard.integrations._api.RunReport` and the
  run's messages (``all_messages()``, as ``RunCancelled`` has them; the
  framework's ``capture_run_messages()`` holds them too).
- :class:`ProtectionStop` (``on_stop="end"``, where the run's output type is
  plain text): the run's output, a ``str`` equal to the stop text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai.exceptions import AgentRunError, UsageLimitExceeded
from pydantic_ai.messages import ModelMessage

from tool_failure_guard.integrations import _api
from tool_failure_guard.integrations._api import GuardStop, RunReport


class ProtectionStop(str):
    """The output of a run a protection stopped (``on_stop="end"``): the stop text, typed.

    It *is* the stop text as a person reads it (``result.output == stop.notice``),
    so a caller that only prints the output prints the right thing; a caller
    that must react tests the type or :func:`stop_of`, never the text.  It is
    the output only of a run whose output type accepts plain ``str``: any
    other run raises :class:`ProtectionStopped` instead.
    """

    stop: GuardStop

    def __new__(cls, stop: GuardStop) -> ProtectionStop:
        value = super().__new__(cls, stop.notice)
        value.stop = stop
        return value

    @property
    def loop_type(self) -> str:
        return self.stop.loop_type

    @property
    def notice(self) -> str:
        """The stop text as a plain ``str``."""
        return str.__str__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ProtectionStop, (self.stop,))


class ProtectionStopped(_api.ProtectionStopped, UsageLimitExceeded):
    """A protection stopped the run (``on_stop="error"``): no further model request was made.

    Subclasses pydantic-ai's :class:`~pydantic_ai.exceptions.UsageLimitExceeded`
    (so ``except UsageLimitExceeded`` / ``except AgentRunError`` catch it) and
    the shared :class:`tool_failure_guard.integrations._api.ProtectionStopped`
    (``stop``, ``report``, ``loop_type``, ``key``).  :meth:`all_messages` is the
    run's history at the stop: the message history it started with, the
    settled tool returns of the stopping batch, then the stop text; pass it as
    ``message_history`` to continue the conversation with new user input.
    """

    def __init__(
        self,
        stop: GuardStop,
        report: RunReport,
        *,
        messages: Sequence[ModelMessage] = (),
        run_id: str | None = None,
    ) -> None:
        self.stop = stop
        self.report = report
        self._messages = list(messages)
        self._run_id = run_id
        # AgentRunError's own: UsageLimitExceeded would append its "raise the limit" hint.
        AgentRunError.__init__(self, stop.notice)

    @property
    def run_id(self) -> str | None:
        return self._run_id

    def all_messages(self) -> list[ModelMessage]:
        """The run's messages at the stop (a copy)."""
        return list(self._messages)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (type(self), self.stop, self.report, self._messages, self._run_id),
        )


def _rebuild(
    cls: type[ProtectionStopped],
    stop: GuardStop,
    report: RunReport,
    messages: Sequence[ModelMessage],
    run_id: str | None,
) -> ProtectionStopped:
    return cls(stop, report, messages=messages, run_id=run_id)
