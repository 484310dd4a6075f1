"""The replay drives the live core; the peers' rules; fresh logs from the live agents map alike."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from agent_clis import REQUIRE_ENV_VAR

from tool_failure_guard.core import PromptProtection
from tool_failure_guard.guard import ExecutionStatus, GuardMode, RepeatedToolFailureGuard
from tool_failure_guard.guard import TerminalStatus as T
from tool_failure_guard.peer_rules import (
    PEER_RULES,
    QWEN_CODE,
    PeerCall,
    identical_calls,
    same_error_text,
)
from tool_failure_guard.transcripts.importers import mini_swe_agent, own_history, qwen_code
from tool_failure_guard.transcripts.model import ImportedCall, Run, Turn
from tool_failure_guard.transcripts.profiles import PROFILES
from tool_failure_guard.transcripts.replay import (
    RunResult,
    _function_call,
    _outcome,
    replay_mode,
    replay_run,
)

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"


def _notice_turns(path: Path) -> dict[str, int]:
    """prompt id -> the model turn (1-based) after whose batch the live agent showed a stop."""
    turns: dict[str, int] = {}
    stops: dict[str, int] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") != "message":
            continue
        prompt = record["prompt_id"]
        if record["kind"] == "model":
            turns[prompt] = turns.get(prompt, 0) + 1
        elif any(p["kind"] == "notice" for p in record["parts"]) and prompt not in stops:
            stops[prompt] = turns[prompt]
    return stops


def test_enforce_stops_where_the_live_agent_stopped() -> None:
    path = FIXTURES / "tool-failure-guard" / "siblings-enforce.jsonl"
    live = _notice_turns(path)
    runs = list(own_history.read(path))
    assert len(live) == len(runs) == 2
    for run in runs:
        stop = replay_mode(run.turns, GuardMode.ENFORCE, PROFILES["acp"]).stop
        assert stop is not None and not stop.would
        assert stop.turn == live[run.run_id]
        assert stop.loop_type == "repeated_tool_execution_failure"


def test_shadow_decisions_are_the_guards() -> None:
    """The replay's remind/stop points are where a bare guard's decisions say so."""
    for path in sorted((FIXTURES / "tool-failure-guard").glob("*.jsonl")):
        for run in own_history.read(path):
            guard = RepeatedToolFailureGuard(GuardMode.SHADOW)
            protection = PromptProtection(GuardMode.SHADOW)
            kinds = []
            for turn in run.turns:
                if not turn.calls:
                    continue
                admission = protection.admit([_function_call(c) for c in turn.calls])
                batch = protection.open_batch(admission)
                for call in turn.calls:
                    batch.settle(_outcome(call))
                kinds.append(str(guard.observe(batch.receipt()).kind))
                protection.after_batch(batch)
            batches = [i for i, t in enumerate(run.turns, start=1) if t.calls]
            result = replay_mode(run.turns, GuardMode.SHADOW, PROFILES["acp"])
            first_warn = next((batches[i] for i, k in enumerate(kinds) if k == "would_warn"), None)
            first_stop = next((batches[i] for i, k in enumerate(kinds) if k == "would_stop"), None)
            assert (result.remind.turn if result.remind else None) == first_warn
            assert (result.stop.turn if result.stop else None) == first_stop


def _call(n: int, tool: str = "read_file", *, ok: bool = False, args: str = "a") -> ImportedCall:
    return ImportedCall(
        call_id=f"c{n}",
        tool=tool,
        arguments_fingerprint=args,
        status=T.SUCCESS if ok else T.ERROR,
        execution_status=ExecutionStatus.SUCCESS if ok else ExecutionStatus.ERROR,
        error_type=None if ok else "file_not_found",
        error_text=None if ok else "gone",
    )


def test_saved_counts_the_turns_after_the_enforce_stop() -> None:
    turns = tuple(
        Turn(line=n, calls=(_call(n, args=str(n)),), input_tokens=10, output_tokens=1)
        for n in range(12)
    )
    turns += (Turn(line=99, calls=(), input_tokens=5, output_tokens=2),)
    result = replay_run(Run(agent="qwen-code", source="f", run_id="r", turns=turns))
    stop = result.mode("enforce").stop
    assert stop is not None and result.saved is not None
    assert result.saved.turns == len(turns) - stop.turn
    assert result.saved.calls == 12 - stop.turn
    assert result.saved.input_tokens == 10 * (12 - stop.turn) + 5
    assert result.peers["gemini_cli"] is None  # arguments differ every call
    assert result.peers["goose"] == 3  # same tool, same error text


def test_a_run_without_failures_fires_nothing() -> None:
    turns = tuple(Turn(line=n, calls=(_call(n, ok=True),)) for n in range(20))
    result: RunResult = replay_run(Run(agent="qwen-code", source="f", run_id="r", turns=turns))
    assert all(m.remind is None and m.stop is None for m in result.modes)
    assert result.saved is None
    # identical successful calls: the identical-call peers fire, Goose does not
    assert result.peers == {
        "gemini_cli": 5,
        "opencode_roo": 3,
        "goose": None,
        "qwen_code": 5,
        "qwen_code_repeated_error": None,  # no error at all
        "cline_mistakes": None,
        "crush_repeated_steps": None,  # a success's output is not in the log: never matches
    }


def _peer(
    tool: str = "read_file", args: str = "a", failed: bool = True, text: str = "e"
) -> PeerCall:
    return PeerCall(tool=tool, arguments=args, failed=failed, error_text=text)


def test_peer_rules() -> None:
    assert identical_calls(3)([_peer()] * 2) is None
    assert identical_calls(3)([_peer(), _peer(), _peer(args="b"), *[_peer()] * 3]) == 6
    assert same_error_text(3)([_peer(args=str(i)) for i in range(3)]) == 3
    assert same_error_text(3)([_peer(), _peer(failed=False), _peer(), _peer()]) is None
    assert (
        same_error_text(3, chars=3)([_peer(text="abcX"), _peer(text="abcY"), _peer(text="abcZ")])
        == 3
    )


def test_qwen_codes_check_leaves_its_stateful_read_tool_out() -> None:
    qwen = PEER_RULES[QWEN_CODE]
    assert qwen([_peer()] * 5) == 5
    assert qwen([_peer(tool="task_list")] * 10) is None
    assert qwen([*[_peer()] * 4, _peer(tool="task_list"), _peer()]) is None


# -- fresh logs from the live agents ------------------------------------------------------


def _shape(results: list[RunResult]) -> list[tuple[object, ...]]:
    return [
        (r.turns, r.calls, r.failed_calls, r.succeeded, r.modes, r.saved, r.peers) for r in results
    ]


def test_a_fresh_qwen_code_record_maps_like_the_fixture() -> None:
    from qwen_original import require_qwen
    from transcript_agents import qwen_code as run_qwen

    require_qwen()
    with tempfile.TemporaryDirectory() as tmp:
        (fresh,) = run_qwen(Path(tmp), only=("mostly-successful",))
        now = [replay_run(r) for r in qwen_code.read(fresh)]
    committed = [
        replay_run(r) for r in qwen_code.read(FIXTURES / "qwen-code" / "mostly-successful.jsonl")
    ]
    assert _shape(now) == _shape(committed)


def test_a_fresh_mini_swe_agent_trajectory_maps_like_the_fixture() -> None:
    from transcript_mini import available

    reason = available()
    if reason is not None:
        if os.environ.get(REQUIRE_ENV_VAR) == "1":
            pytest.fail(f"{reason} ({REQUIRE_ENV_VAR}=1)")
        pytest.skip(f"{reason}; `make agents` installs it")
    from transcript_agents import mini_swe_agent as run_mini

    with tempfile.TemporaryDirectory() as tmp:
        (fresh,) = run_mini(Path(tmp), only=("submits",))
        now = [replay_run(r) for r in mini_swe_agent.read(fresh)]
    committed = [
        replay_run(r)
        for r in mini_swe_agent.read(FIXTURES / "mini-swe-agent" / "submits.traj.json")
    ]
    assert _shape(now) == _shape(committed)


@pytest.mark.parametrize("scenario", ["v1-submits", "v1-failing-command"])
def test_a_fresh_mini_swe_agent_1_trajectory_maps_like_the_fixture(scenario: str) -> None:
    """mini-swe-agent 1.15 (text actions) in its own venv: ``make agents`` makes ``.mini1``."""
    from transcript_mini import MINI1_VERSION, mini1_python

    if mini1_python() is None:
        reason = f"mini-swe-agent {MINI1_VERSION} is not installed in .mini1"
        if os.environ.get(REQUIRE_ENV_VAR) == "1":
            pytest.fail(f"{reason} ({REQUIRE_ENV_VAR}=1)")
        pytest.skip(f"{reason}; `make agents` installs it")
    from transcript_agents import mini_swe_agent_1 as run_mini1

    with tempfile.TemporaryDirectory() as tmp:
        (fresh,) = run_mini1(Path(tmp), only=(scenario,))
        data = json.loads(fresh.read_text("utf-8"))
        assert data["trajectory_format"] == "mini-swe-agent-1"
        assert data["info"]["mini_version"] == MINI1_VERSION
        now = [replay_run(r) for r in mini_swe_agent.read(fresh)]
    committed = [
        replay_run(r)
        for r in mini_swe_agent.read(FIXTURES / "mini-swe-agent" / f"{scenario}.traj.json")
    ]
    assert _shape(now) == _shape(committed)


def test_on_the_originals_own_record_enforce_stops_where_the_original_stopped() -> None:
    """Qwen Code 0.24.4 in ACP enforce: its guard stopped the prompt after its last batch."""
    (run,) = qwen_code.read(FIXTURES / "qwen-code" / "acp-enforce-stopped.jsonl")
    result = replay_run(run)
    stop = result.mode("enforce").stop
    assert stop is not None and stop.loop_type == "repeated_tool_execution_failure"
    assert stop.turn == len(run.turns)  # the original made no request after that batch
    assert result.saved is not None and result.saved.calls == 0
    remind = result.mode("warn").remind
    assert remind is not None and remind.turn == stop.turn - 1
