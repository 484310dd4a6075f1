"""The model interface and the embedded scripted model that plays JSON scenarios.

A :class:`Model` gets the whole session history (the newest message last) and
answers one :class:`ModelTurn`: optional text, function calls, optionally its
todo list and what the request cost (:class:`ModelUsage`).  A turn without
calls ends the prompt (unless the todo stop guard continues it).  A model that
also implements :class:`StreamingModel` is told the session's tools and
streams its text as it arrives (``session.openai_model``); the prompt step
calls :func:`request_turn`, so a model with only ``generate`` keeps working.

:class:`ScriptedModel` plays a scenario (format: ``docs/scenarios.md``).  It
keeps no state of its own: its position is derived from the history (which
prompt this is, how many model turns it already took in it, whether the
corrective reminder was in its input), so a session reloaded after an agent
restart continues exactly where the history says it is.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER
from tool_failure_guard.line_input import InputTooLarge, read_small_text
from tool_failure_guard.session.persistence.messages import Message
from tool_failure_guard.session.tools.executor import FunctionCall

if TYPE_CHECKING:
    from tool_failure_guard.session.tools.builtin import Tool

DEFAULT_FINAL_TEXT = "Done."
TODO_STATUSES = ("pending", "in_progress", "completed")


class ModelError(Exception):
    """The model request failed (the prompt ends with this error)."""


#: Bytes of a scenario file read (a built-in scenario is a few KiB): ``/dev/zero`` is refused.
MAX_SCENARIO_BYTES = 4 << 20


class ScenarioError(ValueError):
    """A scenario file is malformed; the message names the file and the key."""


@attrs.frozen(kw_only=True)
class TodoItem:
    content: str
    status: str

    @property
    def open(self) -> bool:
        return self.status != "completed"


@attrs.frozen(kw_only=True)
class ModelUsage:
    """What one model request cost, as far as the provider reported it.

    Token counts are None when the provider reported none; latency is the wall
    time of the request as the agent measured it.  Summed per prompt for the
    per-prompt outcome record that rollout analysis needs.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float = 0.0


@attrs.frozen(kw_only=True)
class ModelTurn:
    text: str = ""
    calls: tuple[FunctionCall, ...] = ()
    todos: tuple[TodoItem, ...] | None = None  #: None: the todo list is unchanged
    usage: ModelUsage | None = None  #: None: the model reports no usage (scripted)


@attrs.frozen(kw_only=True)
class UsageTotals:
    """One prompt's model usage, summed over its model requests (``PromptRun.usage_totals``).

    ``model_turns`` counts every answered model request; the token sums only
    count what providers reported (``reported_turns`` of them), so a mean is
    ``input_tokens / reported_turns``.
    """

    model_turns: int = 0
    reported_turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0

    def add(self, usage: ModelUsage | None) -> UsageTotals:
        if usage is None:
            return attrs.evolve(self, model_turns=self.model_turns + 1)
        reported = usage.input_tokens is not None or usage.output_tokens is not None
        return UsageTotals(
            model_turns=self.model_turns + 1,
            reported_turns=self.reported_turns + int(reported),
            input_tokens=self.input_tokens + (usage.input_tokens or 0),
            output_tokens=self.output_tokens + (usage.output_tokens or 0),
            latency_s=self.latency_s + usage.latency_s,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "modelTurns": self.model_turns,
            "reportedTurns": self.reported_turns,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "latencyS": round(self.latency_s, 6),
        }


#: Receives each text delta of a streaming model turn as it arrives.
TextSink = Callable[[str], Awaitable[None]]


class Model(Protocol):
    async def generate(self, history: Sequence[Message]) -> ModelTurn: ...


@runtime_checkable
class StreamingModel(Protocol):
    """A model that is told the session's tools and streams its text.

    Optional on top of :class:`Model`, so a model with only ``generate`` keeps
    working.  Text passed to ``on_text`` has been shown to the client; the
    returned turn's ``text`` must start with it (the prompt step shows only
    the rest).
    """

    async def generate_streaming(
        self, history: Sequence[Message], *, tools: Sequence[Tool], on_text: TextSink
    ) -> ModelTurn: ...


async def request_turn(
    model: Model, history: Sequence[Message], *, tools: Sequence[Tool], on_text: TextSink
) -> ModelTurn:
    """Ask ``model`` for its next turn, streaming when it can."""
    if isinstance(model, StreamingModel):
        return await model.generate_streaming(history, tools=tools, on_text=on_text)
    return await model.generate(history)


# -- scenarios ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CallSpec:
    tool: str
    args: Mapping[str, Any] = attrs.field(factory=dict, eq=False, hash=False)
    call_id: str | None = None


@attrs.frozen(kw_only=True)
class TurnSpec:
    text: str = ""
    calls: tuple[CallSpec, ...] = ()
    todos: tuple[TodoItem, ...] | None = None
    model_error: str | None = None


@attrs.frozen(kw_only=True)
class PromptScript:
    turns: tuple[TurnSpec, ...]
    on_reminder: tuple[TurnSpec, ...] | None = None
    final_text: str = DEFAULT_FINAL_TEXT


@attrs.frozen(kw_only=True)
class Scenario:
    name: str
    description: str
    prompts: tuple[PromptScript, ...]


_SCENARIO_KEYS = {"name", "description", "prompts", "turns", "on_reminder", "final_text"}
_PROMPT_KEYS = {"turns", "on_reminder", "final_text"}
_TURN_KEYS = {"text", "calls", "repeat", "todos", "model_error"}
_CALL_KEYS = {"tool", "args", "id"}


def _fail(where: str, message: str) -> ScenarioError:
    return ScenarioError(f"{where}: {message}")


def _check_keys(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise _fail(where, f"unknown key(s) {names}; allowed: {', '.join(sorted(allowed))}")


def _string(data: Mapping[str, Any], key: str, where: str, default: str = "") -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise _fail(f"{where}.{key}", f"must be a string, got {type(value).__name__}")
    return value


def _parse_call(data: Any, where: str) -> CallSpec:
    if not isinstance(data, dict):
        raise _fail(where, f"a call must be an object, got {type(data).__name__}")
    _check_keys(data, _CALL_KEYS, where)
    tool = data.get("tool")
    if not isinstance(tool, str) or not tool:
        raise _fail(f"{where}.tool", "must be a non-empty string")
    args = data.get("args", {})
    if not isinstance(args, dict):
        raise _fail(f"{where}.args", f"must be an object, got {type(args).__name__}")
    call_id = data.get("id")
    if call_id is not None and (not isinstance(call_id, str) or not call_id):
        raise _fail(f"{where}.id", "must be a non-empty string")
    return CallSpec(tool=tool, args=args, call_id=call_id)


def _parse_todos(data: Any, where: str) -> tuple[TodoItem, ...]:
    if not isinstance(data, list):
        raise _fail(where, "must be a list of {content, status} objects")
    items = []
    for index, item in enumerate(data):
        at = f"{where}[{index}]"
        if not isinstance(item, dict):
            raise _fail(at, "must be an object")
        _check_keys(item, {"content", "status"}, at)
        status = _string(item, "status", at, "pending")
        if status not in TODO_STATUSES:
            raise _fail(f"{at}.status", f"must be one of {', '.join(TODO_STATUSES)}")
        items.append(TodoItem(content=_string(item, "content", at), status=status))
    return tuple(items)


def _parse_turns(data: Any, where: str) -> tuple[TurnSpec, ...]:
    if not isinstance(data, list):
        raise _fail(where, f"must be a list of turns, got {type(data).__name__}")
    turns: list[TurnSpec] = []
    for index, item in enumerate(data):
        at = f"{where}[{index}]"
        if not isinstance(item, dict):
            raise _fail(at, f"a turn must be an object, got {type(item).__name__}")
        _check_keys(item, _TURN_KEYS, at)
        calls_data = item.get("calls", [])
        if not isinstance(calls_data, list):
            raise _fail(f"{at}.calls", "must be a list of calls")
        repeat = item.get("repeat", 1)
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise _fail(f"{at}.repeat", f"must be a positive integer, got {repeat!r}")
        model_error = item.get("model_error")
        if model_error is not None and not isinstance(model_error, str):
            raise _fail(f"{at}.model_error", "must be a string")
        turn = TurnSpec(
            text=_string(item, "text", at),
            calls=tuple(_parse_call(c, f"{at}.calls[{i}]") for i, c in enumerate(calls_data)),
            todos=_parse_todos(item["todos"], f"{at}.todos") if "todos" in item else None,
            model_error=model_error,
        )
        if repeat > 1 and any(call.call_id for call in turn.calls):
            raise _fail(f"{at}.repeat", "cannot repeat a turn whose calls have explicit ids")
        turns.extend([turn] * repeat)
    return tuple(turns)


def _parse_prompt(data: Mapping[str, Any], where: str) -> PromptScript:
    if "turns" not in data:
        raise _fail(where, "missing required key 'turns'")
    on_reminder = data.get("on_reminder")
    return PromptScript(
        turns=_parse_turns(data["turns"], f"{where}.turns"),
        on_reminder=(
            _parse_turns(on_reminder, f"{where}.on_reminder") if on_reminder is not None else None
        ),
        final_text=_string(data, "final_text", where, DEFAULT_FINAL_TEXT),
    )


def parse_scenario(data: Any, source: str) -> Scenario:
    """Validate a decoded scenario; errors name ``source`` and the offending key."""
    if not isinstance(data, dict):
        raise _fail(source, f"a scenario must be a JSON object, got {type(data).__name__}")
    _check_keys(data, _SCENARIO_KEYS, source)
    if "prompts" in data:
        if _PROMPT_KEYS & set(data):
            raise _fail(source, "use either 'prompts' or top-level 'turns', not both")
        prompts_data = data["prompts"]
        if not isinstance(prompts_data, list) or not prompts_data:
            raise _fail(f"{source}: prompts", "must be a non-empty list")
        prompts = []
        for index, item in enumerate(prompts_data):
            at = f"{source}: prompts[{index}]"
            if not isinstance(item, dict):
                raise _fail(at, "must be an object")
            _check_keys(item, _PROMPT_KEYS, at)
            prompts.append(_parse_prompt(item, at))
    elif "turns" in data:
        prompts = [_parse_prompt(data, f"{source}:")]
    else:
        raise _fail(source, "missing required key 'prompts' (or top-level 'turns')")
    return Scenario(
        name=_string(data, "name", source, Path(source).stem),
        description=_string(data, "description", source),
        prompts=tuple(prompts),
    )


def builtin_scenarios() -> list[str]:
    """Names of the scenarios shipped with the package."""
    folder = resources.files("tool_failure_guard.session") / "scenarios"
    return sorted(
        entry.name[: -len(".json")] for entry in folder.iterdir() if entry.name.endswith(".json")
    )


def load_scenario(name_or_path: str) -> Scenario:
    """Load a built-in scenario by name, or a scenario JSON file by path."""
    path = Path(name_or_path)
    if path.suffix == ".json" or path.exists():
        source = str(path)
        try:
            text = read_small_text(source, MAX_SCENARIO_BYTES, "scenario file")
        except InputTooLarge as exc:
            raise ScenarioError(str(exc)) from None
        except OSError as exc:
            raise ScenarioError(f"{source}: cannot read: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise ScenarioError(f"{source}: not UTF-8 text: {exc.reason}") from exc
    else:
        names = builtin_scenarios()
        if name_or_path not in names:
            raise ScenarioError(
                f"unknown scenario {name_or_path!r}; built-in scenarios: {', '.join(names)} "
                "(or give a path to a .json file)"
            )
        source = f"{name_or_path}.json"
        resource = resources.files("tool_failure_guard.session") / "scenarios" / source
        text = resource.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{source}: not JSON: {exc.msg} at line {exc.lineno}") from exc
    except RecursionError:
        raise ScenarioError(f"{source}: JSON nested too deeply") from None
    return parse_scenario(data, source)


# -- the scripted model -----------------------------------------------------------


def reminder_in(message: Message) -> bool:
    return REPEATED_TOOL_FAILURE_REMINDER in message.texts("system")


class ScriptedModel:
    """Plays a :class:`Scenario`; its position comes from the history alone."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    async def generate(self, history: Sequence[Message]) -> ModelTurn:
        prompt_starts = [i for i, m in enumerate(history) if m.kind == "prompt"]
        if not prompt_starts:
            raise ModelError("the history holds no user prompt")
        prompt_index = len(prompt_starts) - 1
        start = prompt_starts[-1]
        script = self.scenario.prompts[min(prompt_index, len(self.scenario.prompts) - 1)]
        turns = script.turns
        tag = "t"
        if script.on_reminder is not None:
            reminded = next(
                (i for i in range(start, len(history)) if reminder_in(history[i])), None
            )
            if reminded is not None:
                start, turns, tag = reminded, script.on_reminder, "r"
        position = sum(1 for m in history[start:] if m.role == "model")
        if position >= len(turns):
            return ModelTurn(text=script.final_text)
        spec = turns[position]
        if spec.model_error is not None:
            raise ModelError(spec.model_error)
        calls = tuple(
            FunctionCall(
                call_id=call.call_id or f"call-p{prompt_index}-{tag}{position}-{index}",
                name=call.tool,
                args=dict(call.args),
            )
            for index, call in enumerate(spec.calls)
        )
        return ModelTurn(text=spec.text, calls=calls, todos=spec.todos)
