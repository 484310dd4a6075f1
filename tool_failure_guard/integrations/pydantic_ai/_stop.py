"""The typed signal of a stopped run: its output is the stop text, and says so by type."""

from __future__ import annotations

from typing import Any


class ProtectionStop(str):
    """The output of a run a protection stopped: the fixed stop text, typed.

    It *is* the stop text (``result.output == notice``), so a caller that only
    prints the output prints the right thing; a caller that must react tests
    the type, never the text::

        result = await agent.run(prompt)
        if isinstance(result.output, ProtectionStop):
            result.output.loop_type  # "repeated_tool_execution_failure", ...

    The run's declared ``output_type`` does not apply to a stopped run: no
    further model request was made, so there is no model output to validate.
    """

    loop_type: str

    def __new__(cls, notice: str, loop_type: str) -> ProtectionStop:
        value = super().__new__(cls, notice)
        value.loop_type = loop_type
        return value

    @property
    def notice(self) -> str:
        """The stop text as a plain ``str``."""
        return str.__str__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ProtectionStop, (self.notice, self.loop_type))


def stop_of(output: object) -> ProtectionStop | None:
    """``output`` when it is a protection's stop, else None (for ``result.output``)."""
    return output if isinstance(output, ProtectionStop) else None
