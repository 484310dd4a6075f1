"""One behavioural test set, run against both providers: the guarded loop is provider-independent.

Every test runs once with the scripted model and once with the OpenAI-compatible
model (``--model openai:...`` against the test server on 127.0.0.1, real SDK,
real HTTP), from the same scenario, and asserts the same observable behaviour:
stop reasons, loop types, guard decisions, tool-call statuses, the fixed texts
the model was sent, and the persisted history.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import decisions
from provider_harness import PROVIDERS, Run, run_agent

from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
)
from tool_failure_guard.session.model.base import load_scenario
from tool_failure_guard.session.persistence.messages import Message
from tool_failure_guard.session.pipeline.drain import QUEUED_INPUT_PREFIX

READ = {"tool": "read_file", "args": {"path": "missing.txt"}}
LOOP = {"turns": [{"text": "Reading.", "calls": [READ] * 4, "repeat": 5}], "final_text": "Gave up."}
RECOVERY = {
    "turns": [{"text": "Reading.", "calls": [READ] * 4, "repeat": 5}],
    "on_reminder": [
        {
            "text": "Creating it.",
            "calls": [{"tool": "write_file", "args": {"path": "missing.txt", "content": "x"}}],
        },
        {"text": "Reading it.", "calls": [READ]},
    ],
    "final_text": "Recovered.",
}
INVALID = {
    "turns": [{"calls": [{"tool": "read_file", "args": {"path": 7}}], "repeat": 4}],
    "final_text": "never",
}


def system_texts(history: list[Message]) -> list[str]:
    return [text for m in history for text in m.texts("system")]


def notices(history: list[Message]) -> list[str]:
    return [text for m in history for text in m.texts("notice")]


def tool_statuses(run: Run) -> list[str]:
    return list(run.client.final_statuses().values())


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_shadow_never_reminds_and_runs_every_batch(tmp_path: Path, provider: str) -> None:
    run = run_agent(tmp_path, mode="shadow", provider=provider, scenario=LOOP)
    (response,) = run.responses
    assert response.stop_reason == "end_turn"
    assert len(decisions(response)) == 5
    assert REPEATED_TOOL_FAILURE_REMINDER not in system_texts(run.history)
    assert "".join(run.client.agent_texts()).endswith("Gave up.")


def test_warn_reminds_once_and_runs_to_the_end(tmp_path: Path, provider: str) -> None:
    run = run_agent(tmp_path, mode="warn", provider=provider, scenario=LOOP)
    (response,) = run.responses
    assert response.stop_reason == "end_turn"
    assert decisions(response).count("warn") == 1
    assert system_texts(run.history).count(REPEATED_TOOL_FAILURE_REMINDER) == 1
    assert response.field_meta.get("loopType") is None


def test_enforce_stops_after_the_reminder_with_the_fixed_notice(
    tmp_path: Path, provider: str
) -> None:
    run = run_agent(tmp_path, mode="enforce", provider=provider, scenario=LOOP)
    (response,) = run.responses
    assert response.stop_reason == "end_turn"
    assert response.field_meta["loopType"] == "repeated_tool_execution_failure"
    assert decisions(response)[-2:] == ["warn", "stop"]
    assert notices(run.history) == [REPEATED_TOOL_FAILURE_STOP_MESSAGE]
    assert run.client.agent_texts().count(shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)) == 1
    assert set(tool_statuses(run)) == {"failed"}
    if run.fake is not None:  # no model request after the stop
        assert len(run.fake.requests) == 3


def test_a_model_that_recovers_after_the_reminder_finishes_normally(
    tmp_path: Path, provider: str
) -> None:
    run = run_agent(tmp_path, mode="enforce", provider=provider, scenario=RECOVERY)
    (response,) = run.responses
    assert response.stop_reason == "end_turn"
    assert response.field_meta.get("loopType") is None
    assert "warn" in decisions(response) and "stop" not in decisions(response)
    assert (tmp_path / "project" / "missing.txt").read_text() == "x"
    assert tool_statuses(run)[-2:] == ["completed", "completed"]
    assert "".join(run.client.agent_texts()).endswith("Recovered.")


def test_invalid_parameters_stop_before_the_guard(tmp_path: Path, provider: str) -> None:
    run = run_agent(tmp_path, mode="enforce", provider=provider, scenario=INVALID)
    (response,) = run.responses
    assert response.field_meta["loopType"] == "invalid_tool_params_stagnation"
    errors = [
        part.error_type for m in run.history for part in m.parts if part.kind == "function_response"
    ]
    assert errors == ["invalid_tool_params"] * 3


def test_a_second_prompt_after_a_stop_starts_fresh(tmp_path: Path, provider: str) -> None:
    scenario = {"prompts": [LOOP, {"turns": [], "final_text": "Fresh start."}]}
    run = run_agent(
        tmp_path, mode="enforce", provider=provider, scenario=scenario, prompts=("go", "again")
    )
    first, second = run.responses
    assert first.field_meta["loopType"] == "repeated_tool_execution_failure"
    assert second.stop_reason == "end_turn" and second.field_meta.get("loopType") is None
    assert "".join(run.client.agent_texts()).endswith("Fresh start.")


def test_mid_turn_input_joins_the_next_model_message_with_its_prefix(
    tmp_path: Path, provider: str
) -> None:
    from tool_failure_guard.session.transport.client import RecordingClient

    client = RecordingClient(drain_messages={0: ["use notes.txt instead"]})
    scenario = {"turns": [{"calls": [READ]}, {"text": "ok"}], "final_text": "Done."}
    run = run_agent(tmp_path, mode="warn", provider=provider, scenario=scenario, client=client)
    queued = [t for m in run.history for t in m.texts("queued_input")]
    assert queued == [QUEUED_INPUT_PREFIX + "use notes.txt instead"]
    if run.fake is not None:
        users = [m for m in run.fake.messages(1) if m["role"] == "user"]
        assert users[-1]["content"] == QUEUED_INPUT_PREFIX + "use notes.txt instead"


@pytest.mark.parametrize("mode", ["shadow", "warn", "enforce"])
def test_both_providers_leave_the_same_history(tmp_path: Path, mode: str) -> None:
    """The strongest form: one scenario, two providers, one and the same history."""
    scenario_file = load_scenario("read-loop")
    assert scenario_file.name == "read-loop"
    import json
    from importlib import resources

    data = json.loads(
        (resources.files("tool_failure_guard.session") / "scenarios" / "read-loop.json").read_text()
    )
    runs = [
        run_agent(
            tmp_path / provider,
            mode=mode,
            provider=provider,
            scenario=data,
            prompts=("go", "again"),
        )
        for provider in PROVIDERS
        if (tmp_path / provider).mkdir() is None
    ]
    scripted, served = runs
    strip = [[m.to_json() | {"prompt_id": ""} for m in run.history] for run in runs]
    assert strip[0] == strip[1]
    assert [r.stop_reason for r in scripted.responses] == [r.stop_reason for r in served.responses]
    assert [decisions(r) for r in scripted.responses] == [decisions(r) for r in served.responses]
