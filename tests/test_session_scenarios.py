"""Scenario files: built-ins parse; malformed files are refused naming the key."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER
from tool_failure_guard.session.model.base import (
    ModelError,
    ScenarioError,
    ScriptedModel,
    builtin_scenarios,
    load_scenario,
    parse_scenario,
)
from tool_failure_guard.session.persistence.messages import Message, Part


def test_builtin_scenarios_all_load() -> None:
    names = builtin_scenarios()
    assert {"read-loop", "shell-loop", "recovery", "siblings", "permission"} <= set(names)
    for name in names:
        assert load_scenario(name).prompts


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({}, "missing required key 'prompts'"),
        ({"turns": "x"}, "s.json:.turns: must be a list"),
        ({"turns": [{"calls": [{"tool": ""}]}]}, "turns[0].calls[0].tool"),
        ({"turns": [{"calls": [{"tool": "a", "args": []}]}]}, "turns[0].calls[0].args"),
        ({"turns": [{}, {"repeat": 0}]}, "turns[1].repeat"),
        ({"turns": [{"colour": 1}]}, "turns[0]: unknown key(s) 'colour'"),
        ({"prompts": [{"turns": [], "final_text": 3}]}, "prompts[0].final_text"),
        ({"prompts": []}, "prompts: must be a non-empty list"),
        ({"turns": [{"todos": [{"content": "a", "status": "done"}]}]}, "todos[0].status"),
        (
            {"turns": [{"calls": [{"tool": "a", "id": "x"}], "repeat": 2}]},
            "cannot repeat a turn whose calls have explicit ids",
        ),
    ],
)
def test_malformed_scenarios_name_what_is_wrong(data: Any, where: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data, "s.json")
    assert where in str(caught.value)


def test_unknown_name_and_bad_json_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="built-in scenarios: "):
        load_scenario("no-such-scenario")
    path = tmp_path / "broken.json"
    path.write_text('{\n  "turns": [,]\n}')
    with pytest.raises(ScenarioError, match=r"broken.json: not JSON: .* line 2"):
        load_scenario(str(path))
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(str(tmp_path / "missing.json"))
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"turns": [], "final_text": "caf\xe9"}')
    with pytest.raises(ScenarioError, match=r"latin.json: not UTF-8 text"):
        load_scenario(str(latin))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    with pytest.raises(ScenarioError, match=r"deep.json: JSON nested too deeply"):
        load_scenario(str(deep))


def prompt(text: str) -> Message:
    return Message(role="user", kind="prompt", parts=(Part(kind="text", text=text),))


def model(n_calls: int = 0) -> Message:
    return Message(
        role="model",
        kind="model",
        parts=tuple(Part(kind="function_call", call_id=f"c{i}") for i in range(n_calls)),
    )


def results(*system: str) -> Message:
    return Message(
        role="user", kind="tool_results", parts=tuple(Part(kind="system", text=t) for t in system)
    )


def test_scripted_model_position_comes_from_history_and_branches_on_the_reminder() -> None:
    scenario = parse_scenario(
        {
            "prompts": [
                {
                    "turns": [{"text": "a", "calls": [{"tool": "read_file"}]}],
                    "on_reminder": [{"text": "changed"}, {"model_error": "down"}],
                    "final_text": "end",
                },
                {"turns": [], "final_text": "second"},
            ]
        },
        "s.json",
    )
    scripted = ScriptedModel(scenario)

    def generate(history: list[Message]) -> Any:
        return asyncio.run(scripted.generate(history))

    first = generate([prompt("go")])
    assert first.text == "a" and first.calls[0].call_id == "call-p0-t0-0"
    assert generate([prompt("go"), model(1), results()]).text == "end"
    reminded = [prompt("go"), model(1), results(REPEATED_TOOL_FAILURE_REMINDER)]
    assert generate(reminded).text == "changed"
    with pytest.raises(ModelError, match="down"):
        generate([*reminded, model(), results()])
    assert generate([prompt("go"), model(), prompt("again")]).text == "second"


def test_docs_example_is_a_valid_scenario() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "scenarios.md").read_text()
    example = text.split("```json", 1)[1].split("```", 1)[0]
    assert parse_scenario(json.loads(example), "docs example").prompts
