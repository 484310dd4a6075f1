"""The shared behaviour test set every host of the guard runs (issue 14, sections 1 and 3).

A *host* runs the model/tool loop and drives the core
(:class:`tool_failure_guard.core.PromptProtection`): the ACP session, each
framework adapter.  No host re-implements a rule, so every host must show the
same observable behaviour for the same scenario: the same guard decisions, the
reminder at the same place, the same stop.  ``tests/test_host_behaviour.py``
runs every scenario here against every registered host driver.

Each scenario is a script of model responses played by the project's
OpenAI-compatible test server (:class:`openai_server.FakeOpenAI` on 127.0.0.1):
response ``n`` carries batch ``n``'s tool calls (call ids ``b<n>c<i>``), the
response after the last batch is plain text (:attr:`Scenario.final_text`).
The expectations are about what can be observed from outside the host: the
request bodies the server received, how the run ended and with what output,
which call results the run's history kept, the guard decisions it reported.

The host driver protocol
========================

A driver is one module ``tests/hosts/<name>.py`` defining ``DRIVER``, an
object with:

- ``name``: the host's name (``"acp"``);
- ``capabilities``: a frozenset of :data:`CAPABILITIES` the host supports
  (scenarios that need one the host lacks are not generated for it);
- ``limits_follow_mode`` (optional, default False): the host's protections beside the
  guard follow the mode and its limits are off by default (the framework adapters);
  a scenario's ``framework_decisions`` / ``framework_stops`` apply to it;
- ``run(scenario, mode, *, base_url, workspace, scratch) -> HostOutcome``: run
  ONE run (one prompt ``go``) of the host against the model server at
  ``base_url`` (OpenAI-compatible; API key ``sk-test-key``, model
  ``test-model``), with the guard in ``mode`` and the tools below working in
  ``workspace`` (which holds :attr:`Scenario.files`); ``scratch`` is a private
  folder for anything else.  Return the :class:`HostOutcome`.

Then add the module's name to ``HOSTS`` in ``tests/hosts/__init__.py``.

The tools every host gives the model, working in ``workspace``:

- ``read_file(path: str)`` (``path`` required): the file's text; a missing
  file fails as ``file_not_found`` (a raised ``FileNotFoundError`` is
  classified so by the core);
- ``list_directory(path: str = ".")``: the entry names, one a line; a missing
  directory fails (any classified type);
- ``write_file(path: str, content: str)``: only in scenarios needing
  ``cancel_call``: the host's user cancels every such call before it runs
  (the ACP client answers its permission request ``cancelled``; a framework
  host rejects the approval or cancels the call its own way);
- ``run_shell_command(command: str)``: only in scenarios needing
  ``cancel_run``: once it runs, the host's user cancels the whole run (the ACP
  client sends ``session/cancel``); it must not finish on its own first.

Calling ``read_file`` without ``path`` must fail argument validation
(``not_started``/``invalid_tool_params``), not execution.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
from openai_server import Reply, call

from tool_failure_guard.core import (
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_REPEATED_TOOL_FAILURE,
    STOP_NOTICES,
)
from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    GuardMode,
)

#: Optional host abilities a scenario may need.
CAPABILITIES = frozenset({"cancel_call", "cancel_run"})
MODEL_NAME = "test-model"
API_KEY = "sk-test-key"
OFF, SHADOW, WARN, ENFORCE = GuardMode.OFF, GuardMode.SHADOW, GuardMode.WARN, GuardMode.ENFORCE

#: How a run ended.
COMPLETED, STOPPED, CANCELLED = "completed", "stopped", "cancelled"


@attrs.frozen(kw_only=True)
class HostOutcome:
    """What a driver reports about one run."""

    ended: str  #: completed, stopped or cancelled
    loop_type: str | None  #: the stopping protection's loop type (None unless stopped)
    output: str  #: the run's final output text: the model's answer, or the stop notice
    decisions: tuple[str, ...]  #: the guard decision kind of every batch the guard reduced
    kept_call_ids: frozenset[str]  #: call ids whose results the run's history keeps


class HostDriver(Protocol):
    name: str
    capabilities: frozenset[str]

    def run(
        self, scenario: Scenario, mode: GuardMode, *, base_url: str, workspace: Path, scratch: Path
    ) -> HostOutcome: ...


@attrs.frozen
class Call:
    """One scripted tool call: a tool name and its arguments."""

    tool: str
    args: Mapping[str, Any] = attrs.field(factory=dict)


FAIL = Call("read_file", {"path": "missing.txt"})  # file_not_found
READ_OK = Call("read_file", {"path": "notes.txt"})
LIST_OK = Call("list_directory", {"path": "."})
LIST_MISSING = Call("list_directory", {"path": "no_such_dir"})
INVALID = Call("read_file", {})  # path is required: fails validation, never runs
CANCELLED_WRITE = Call("write_file", {"path": "out.txt", "content": "x"})
SLOW = Call("run_shell_command", {"command": "sleep 60"})  # the user cancels the run


@attrs.frozen(kw_only=True)
class Scenario:
    """A scripted run and what every host must show for it in each of its modes."""

    name: str
    batches: tuple[tuple[Call, ...], ...]
    modes: tuple[GuardMode, ...]
    #: mode -> the guard decision kind of each batch the guard reduces
    decisions: Mapping[GuardMode, tuple[str, ...]]
    #: 1-based batch whose answer first carries the reminder (warn, enforce); None: never
    reminder_after: int | None
    #: mode -> (1-based batch that stops the run, loop type); absent: the run completes
    stops: Mapping[GuardMode, tuple[int, str]] = attrs.field(factory=dict)
    #: 1-based batch during which the user cancels the run; None: never
    cancelled_in: int | None = None
    needs: frozenset[str] = frozenset()
    files: Mapping[str, str] = attrs.field(factory=lambda: {"notes.txt": "hello\n"})
    final_text: str = "Done."
    #: where a host's protections follow the mode (the framework adapters, their limits at
    #: their defaults: ``limits_follow_mode`` on the driver), its own decisions and stops
    framework_decisions: Mapping[GuardMode, tuple[str, ...]] | None = None
    framework_stops: Mapping[GuardMode, tuple[int, str]] | None = None

    def for_host(self, limits_follow_mode: bool) -> Scenario:
        """This scenario as a host whose limits do (or do not) follow the mode must show it."""
        if not limits_follow_mode:
            return self
        return attrs.evolve(
            self,
            decisions=self.framework_decisions or self.decisions,
            stops=self.framework_stops if self.framework_stops is not None else self.stops,
        )

    def call_ids(self, batch: int) -> list[str]:
        """The call ids of 1-based ``batch``."""
        return [f"b{batch}c{i}" for i in range(len(self.batches[batch - 1]))]

    def replies(self) -> list[Reply]:
        """The model server's answers, in order."""
        answers = [
            Reply(
                calls=tuple(
                    call(call_id, c.tool, dict(c.args))
                    for call_id, c in zip(self.call_ids(n), batch, strict=True)
                )
            )
            for n, batch in enumerate(self.batches, 1)
        ]
        return [*answers, Reply(text=self.final_text)]


def _loop(n: int, *, prefix: Sequence[tuple[Call, ...]] = ()) -> tuple[tuple[Call, ...], ...]:
    return (*prefix, *((FAIL,) * 4 for _ in range(n)))


_RESET_THEN_LOOP = {
    WARN: ("tracked", "reset", "tracked", "warn", "would_stop"),
    ENFORCE: ("tracked", "reset", "tracked", "warn", "stop"),
}

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        name="failing_loop",
        batches=_loop(5),
        modes=(OFF, SHADOW, WARN, ENFORCE),
        decisions={
            OFF: ("none",) * 5,
            SHADOW: ("tracked", "would_warn", "would_stop", "none", "none"),
            WARN: ("tracked", "warn", "would_stop", "none", "none"),
            ENFORCE: ("tracked", "warn", "stop"),
        },
        reminder_after=2,
        stops={ENFORCE: (3, LOOP_REPEATED_TOOL_FAILURE)},
    ),
    Scenario(
        name="another_tools_success_holds_the_streak",
        batches=((FAIL,) * 4, (LIST_OK,), (FAIL,) * 4, (FAIL,) * 4),
        modes=(WARN, ENFORCE),
        decisions={
            WARN: ("tracked", "none", "warn", "would_stop"),
            ENFORCE: ("tracked", "none", "warn", "stop"),
        },
        reminder_after=3,
        stops={ENFORCE: (4, LOOP_REPEATED_TOOL_FAILURE)},
    ),
    Scenario(
        name="the_candidates_own_success_resets_it",
        batches=_loop(3, prefix=((FAIL,) * 4, (READ_OK,))),
        modes=(WARN, ENFORCE),
        decisions=_RESET_THEN_LOOP,
        reminder_after=4,
        stops={ENFORCE: (5, LOOP_REPEATED_TOOL_FAILURE)},
    ),
    Scenario(
        name="a_mixed_batch_resets",
        batches=_loop(3, prefix=((FAIL,) * 4, (FAIL,) * 4 + (LIST_MISSING,) * 4)),
        modes=(WARN, ENFORCE),
        decisions=_RESET_THEN_LOOP,
        reminder_after=4,
        stops={ENFORCE: (5, LOOP_REPEATED_TOOL_FAILURE)},
    ),
    Scenario(
        name="invalid_arguments_are_never_counted",
        batches=_loop(3, prefix=((FAIL,) * 4, (FAIL,) * 4 + (INVALID,))),
        modes=(WARN, ENFORCE),
        decisions=_RESET_THEN_LOOP,
        reminder_after=4,
        stops={ENFORCE: (5, LOOP_REPEATED_TOOL_FAILURE)},
    ),
    Scenario(
        name="repeated_invalid_arguments_stop_as_their_own_protection",
        batches=((INVALID, INVALID), (INVALID,), (FAIL,) * 4),
        modes=(OFF, ENFORCE),
        decisions={OFF: ("none",), ENFORCE: ("none",)},
        reminder_after=None,
        stops={
            OFF: (2, LOOP_INVALID_TOOL_PARAMS),
            ENFORCE: (2, LOOP_INVALID_TOOL_PARAMS),
        },
        # inside a framework the invalid-parameter stop is an option, off by default
        # (issue 34): the run goes on, and off changes nothing
        framework_decisions={OFF: ("none", "none", "none"), ENFORCE: ("none", "none", "tracked")},
        framework_stops={},
    ),
    Scenario(
        name="a_cancelled_call_is_never_counted",
        batches=_loop(3, prefix=((FAIL,) * 4, (FAIL,) * 4 + (CANCELLED_WRITE,))),
        modes=(WARN, ENFORCE),
        decisions=_RESET_THEN_LOOP,
        reminder_after=4,
        stops={ENFORCE: (5, LOOP_REPEATED_TOOL_FAILURE)},
        needs=frozenset({"cancel_call"}),
    ),
    Scenario(
        name="a_cancelled_run_keeps_its_results_and_skips_the_guard",
        batches=((FAIL,) * 4, (FAIL,) * 4 + (SLOW,), (FAIL,) * 4),
        modes=(ENFORCE,),
        decisions={ENFORCE: ("tracked",)},  # batch 2 would have warned: never reduced
        reminder_after=None,
        cancelled_in=2,
        needs=frozenset({"cancel_run"}),
    ),
    Scenario(
        name="parallel_calls_in_one_response",
        batches=((FAIL, FAIL, LIST_OK, FAIL),) * 4,
        modes=(WARN, ENFORCE),
        decisions={
            WARN: ("tracked", "tracked", "warn", "would_stop"),
            ENFORCE: ("tracked", "tracked", "warn", "stop"),
        },
        reminder_after=3,
        stops={ENFORCE: (4, LOOP_REPEATED_TOOL_FAILURE)},
    ),
)

#: The scenario whose off, shadow and warn runs are compared request by request.
COMPARED = "failing_loop"


@attrs.frozen(kw_only=True)
class HostRun:
    """One run: the driver's outcome and the request bodies the model server received."""

    outcome: HostOutcome
    requests: tuple[Mapping[str, Any], ...]

    def messages(self, index: int) -> list[Mapping[str, Any]]:
        return list(self.requests[index]["messages"])


def is_reminder(message: Mapping[str, Any]) -> bool:
    return REPEATED_TOOL_FAILURE_REMINDER in str(message.get("content") or "")


def reminder_counts(run: HostRun) -> list[int]:
    """Per request: how many messages carry the reminder."""
    return [sum(map(is_reminder, run.messages(i))) for i in range(len(run.requests))]


def check(scenario: Scenario, mode: GuardMode, run: HostRun) -> None:
    """Every expectation of ``scenario`` in ``mode`` about ``run``."""
    outcome = run.outcome
    stop = scenario.stops.get(mode)
    ended_in = stop[0] if stop is not None else scenario.cancelled_in
    batches = ended_in if ended_in is not None else len(scenario.batches)
    # One request per batch up to a stop or cancel, plus the final answer's otherwise:
    # no request is ever made after a stop.
    assert len(run.requests) == batches + (0 if ended_in is not None else 1), reminder_counts(run)
    assert outcome.decisions == scenario.decisions[mode]
    if scenario.cancelled_in is not None:
        assert (outcome.ended, outcome.loop_type) == (CANCELLED, None)
    elif stop is not None:
        assert (outcome.ended, outcome.loop_type) == (STOPPED, stop[1])
        # the notice as the model reads it, or as a person does (the ACP agent message)
        notice = STOP_NOTICES[stop[1]]
        assert outcome.output in (notice, shown_text(notice))
        if stop[1] == LOOP_REPEATED_TOOL_FAILURE:
            assert shown_text(outcome.output) == shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
    else:
        assert (outcome.ended, outcome.loop_type) == (COMPLETED, None)
        assert outcome.output == scenario.final_text
    # Settled results stay in the run's history, the stopping batch's included.
    answered = {i for n in range(1, batches + 1) for i in scenario.call_ids(n)}
    assert answered <= outcome.kept_call_ids
    check_batches_answered(scenario, run, batches)
    check_reminder(scenario, mode, run)


def check_batches_answered(scenario: Scenario, run: HostRun, batches: int) -> None:
    """Request ``n`` answers batch ``n``: each of its calls once, in the model's order."""
    for n in range(1, min(batches, len(run.requests) - 1) + 1):
        tool_ids = [m.get("tool_call_id") for m in run.messages(n) if m.get("role") == "tool"]
        ids = scenario.call_ids(n)
        assert [i for i in tool_ids if i in ids] == ids


def check_reminder(scenario: Scenario, mode: GuardMode, run: HostRun) -> None:
    """Warn/enforce: exactly once, as system context right after the warned batch's
    results, kept in every later request; off/shadow: never."""
    counts = reminder_counts(run)
    after = scenario.reminder_after
    if mode in (OFF, SHADOW) or after is None:
        assert counts == [0] * len(run.requests)
        return
    assert counts == [0] * after + [1] * (len(run.requests) - after)
    last_id = scenario.call_ids(after)[-1]
    for index in range(after, len(run.requests)):
        messages = run.messages(index)
        (at,) = [i for i, m in enumerate(messages) if is_reminder(m)]
        assert messages[at].get("role") == "system"
        assert messages[at].get("content") == REPEATED_TOOL_FAILURE_REMINDER
        answered = max(i for i, m in enumerate(messages) if m.get("tool_call_id") == last_id)
        between = messages[answered + 1 : at]
        # at its place: after the warned batch's results, before the next model turn
        assert at > answered and all(m.get("role") != "assistant" for m in between)


def without_reminder(run: HostRun) -> list[list[Mapping[str, Any]]]:
    return [[m for m in run.messages(i) if not is_reminder(m)] for i in range(len(run.requests))]


def check_modes_compared(runs: Mapping[GuardMode, HostRun]) -> None:
    """Shadow sends exactly what off sends; warn too, apart from the reminder."""
    off = without_reminder(runs[OFF])
    assert [list(runs[SHADOW].messages(i)) for i in range(len(runs[SHADOW].requests))] == off
    assert without_reminder(runs[WARN]) == off
    assert reminder_counts(runs[WARN]) != reminder_counts(runs[OFF])  # the one difference
