"""The shared API test set every framework adapter runs (issue 23, items 1-3).

The three adapters offer one API (``tool_failure_guard.integrations._api``):
``stop_of(result)`` / ``report_of(result)`` answering ``GuardStop`` /
``RunReport``; the same constructor parameters (``mode``, ``telemetry``,
``on_stop``, ``tool_call_cap``); a stop in the framework's idiom (``on_stop``
``"error"``, the default: the adapter's ``ProtectionStopped`` subclass, which
also subclasses :attr:`ApiDriver.framework_error`; ``"end"``: the stop text as
the final answer where the output is text, else the error all the same);
the mode read per run, an explicit ``mode=`` winning over the environment; one
``tool_failure_guard`` log record at a run's first would-warn/warn and one at
its first would-stop/stop.

The driver protocol
===================

One module ``tests/adapter_hosts/<name>.py`` defining ``DRIVER`` with:

- ``name`` and ``framework_error`` (the framework's own limit-error class);
- ``guard(*, mode, on_stop)``: the adapter object (capability, middleware,
  runner) built with ``mode=`` (None: not passed) and ``on_stop=`` (None: not
  passed, the default);
- ``final_reply(typed_output)``: the model's final answer as this framework
  expects it (text, or a ``Summary`` the framework's structured-output way);
- ``run(guard, *, base_url, workspace, typed_output)``: ONE run of a fresh
  agent using ``guard`` against the OpenAI-compatible server at ``base_url``
  (key ``sk-test-key``, model ``test-model``), prompt ``go``, with the tool
  ``read_file(path: str)`` reading ``workspace`` (a missing file fails as
  ``file_not_found``, the framework's idiomatic way); ``typed_output``: the
  agent's output type is the structured :class:`Summary` instead of text.
  Return :class:`ApiOutcome`: what was raised (then ``report`` is the
  exception's), else the output, ``stop_of`` and ``report_of`` of the result.

Then add the module's name to ``ADAPTERS`` in ``tests/adapter_hosts/__init__.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import attrs
import pydantic
from openai_server import Reply, call

from tool_failure_guard.integrations._api import GuardStop, RunReport

MODEL_NAME = "test-model"
API_KEY = "sk-test-key"
FINAL_TEXT = "Done."


class Summary(pydantic.BaseModel):
    """The structured output type of ``typed_output`` runs."""

    text: str


@attrs.frozen(kw_only=True)
class ApiOutcome:
    raised: BaseException | None
    output: object  #: the run's final output (None when it raised)
    stop: GuardStop | None  #: ``stop_of(result)`` (None when it raised)
    report: RunReport | None  #: ``report_of(result)``, or the raised ProtectionStopped's


class ApiDriver(Protocol):
    name: str
    framework_error: type[BaseException]

    def guard(self, *, mode: str | None, on_stop: str | None) -> object: ...

    def final_reply(self, typed_output: bool) -> Reply: ...

    def run(
        self, guard: object, *, base_url: str, workspace: Path, typed_output: bool
    ) -> ApiOutcome: ...


def passed(*, mode: str | None, on_stop: str | None) -> dict[str, Any]:
    """The constructor keywords a driver's ``guard`` passes: only those the test gave."""
    given = {"mode": mode, "on_stop": on_stop}
    return {name: value for name, value in given.items() if value is not None}


def failing_replies(driver: ApiDriver, batches: int, *, typed_output: bool) -> list[Reply]:
    """``batches`` model answers of 4 failing ``read_file`` calls each, then the final answer."""
    answers = [
        Reply(
            calls=tuple(call(f"b{n}c{i}", "read_file", {"path": "missing.txt"}) for i in range(4))
        )
        for n in range(1, batches + 1)
    ]
    return [*answers, driver.final_reply(typed_output)]
