"""Each log is replayed with the guard its agent's host would run (issue 39 item 1).

The profiles are built by the hosts' own code; here: a Claude Code, Codex or Gemini CLI log
never stops by a limit their hook does not run, a Qwen Code log keeps the original's limits
and the parity suite's episodes, and ``--profile`` overrides and is named in the report.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import attrs
import pytest
from transcript_files import FIXTURES

from tool_failure_guard import framework_protection
from tool_failure_guard.commands.cli import main
from tool_failure_guard.core import (
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_REPEATED_TOOL_FAILURE,
    LOOP_TOOL_CALL_CAP,
)
from tool_failure_guard.guard import ExecutionStatus, TerminalStatus
from tool_failure_guard.transcripts.importers import IMPORTERS, importer
from tool_failure_guard.transcripts.model import ImportedCall, Run, Turn
from tool_failure_guard.transcripts.profiles import BY_KIND, PROFILES, for_kind, profile
from tool_failure_guard.transcripts.replay import RunResult, replay_run

#: the limits a hook or an adapter does not run (the ACP agent's always-on backstops)
ACP_ONLY = frozenset({LOOP_INVALID_TOOL_PARAMS, LOOP_TOOL_CALL_CAP})


def _stops(result: RunResult) -> set[str | None]:
    return {m.stop.loop_type for m in result.modes if m.stop is not None}


def _only(path: Path) -> Run:
    """The first run of a fixture, read by the importer of its folder's kind."""
    return next(iter(importer(path.relative_to(FIXTURES).parts[0]).read(path)))


def _with_limits_reached(run: Run) -> Run:
    """``run`` with its refused call's turn made again twice more and a turn of 101 calls
    that succeed: what the ACP agent's invalid-parameter stop and cap would stop."""
    refused = next(
        t
        for t in run.turns
        if any(c.execution_status is ExecutionStatus.NOT_STARTED for c in t.calls)
    )
    ok = next(c for t in run.turns for c in t.calls if c.status is TerminalStatus.SUCCESS)
    wide = Turn(
        line=0,
        calls=tuple(attrs.evolve(ok, call_id=f"wide{n}") for n in range(101)),
    )
    return attrs.evolve(run, turns=(*run.turns, refused, refused, wide))


HOOK_LOGS = [
    FIXTURES / "claude-code" / "failing.session.jsonl",
    FIXTURES / "codex" / "failing.rollout.jsonl",
    FIXTURES / "gemini-cli" / "mixed.session.jsonl",
]


def test_every_importer_kind_has_a_profile() -> None:
    assert set(BY_KIND) == set(IMPORTERS)
    assert {BY_KIND[k] for k in ("claude-code", "codex", "gemini-cli")} == {"hook"}
    assert {BY_KIND[k] for k in ("mini-swe-agent", "swe-agent", "openhands")} == {"adapter"}
    assert BY_KIND["qwen-code"] == "acp"
    with pytest.raises(ValueError, match="unknown profile 'cap'"):
        profile("cap")
    assert for_kind("some-new-agent").name == "adapter"


@pytest.mark.parametrize("path", HOOK_LOGS, ids=lambda p: p.parent.name)
def test_a_coding_cli_log_never_stops_by_a_limit_its_hook_does_not_run(path: Path) -> None:
    run = _with_limits_reached(_only(path))
    result = replay_run(run)
    assert result.profile == "hook"
    assert not _stops(result) & ACP_ONLY
    # the same calls under the ACP agent's limits stop: the run does reach them
    acp = replay_run(run, PROFILES["acp"])
    assert acp.mode("enforce").stop is not None
    assert acp.mode("enforce").stop.loop_type in ACP_ONLY
    assert acp.mode("shadow").stop is not None and not acp.mode("shadow").stop.would


def test_the_adapter_profile_runs_the_adapters_defaults() -> None:
    run = _with_limits_reached(_only(FIXTURES / "mini-swe-agent" / "submits.traj.json"))
    result = replay_run(run)
    assert result.profile == "adapter"
    assert not _stops(result) & ACP_ONLY


def test_the_adapters_constructors_default_to_the_profiles_limits() -> None:
    """The adapter profile reads ``framework_protection``'s defaults; every adapter takes
    them as its own."""
    from tool_failure_guard.integrations.langchain import RepeatedToolFailureMiddleware
    from tool_failure_guard.integrations.openai_agents import GuardedRunner
    from tool_failure_guard.integrations.pydantic_ai import RepeatedToolFailureCapability

    for adapter in (RepeatedToolFailureMiddleware, GuardedRunner, RepeatedToolFailureCapability):
        parameters = inspect.signature(adapter).parameters
        assert parameters["tool_call_cap"].default is framework_protection.DEFAULT_TOOL_CALL_CAP
        assert (
            parameters["invalid_params_limit"].default
            is framework_protection.DEFAULT_INVALID_PARAMS_LIMIT
        )


def _qwen_call(n: int, ok: bool) -> ImportedCall:
    return ImportedCall(
        call_id=f"c{n}",
        tool="read_file",
        arguments_fingerprint=f"sha256:{n}",
        status=TerminalStatus.SUCCESS if ok else TerminalStatus.ERROR,
        execution_status=ExecutionStatus.SUCCESS if ok else ExecutionStatus.ERROR,
        error_type=None if ok else "file_not_found",
    )


def _episode(batches: list[tuple[bool, ...]]) -> Run:
    """A Qwen Code run whose turns read files that exist (True) or not (False)."""
    numbered = iter(range(10_000))
    turns = tuple(
        Turn(line=i, calls=tuple(_qwen_call(next(numbered), ok) for ok in batch))
        for i, batch in enumerate(batches, start=1)
    )
    return Run(agent="qwen-code", source="episode", run_id="e", turns=turns)


def test_a_qwen_code_log_keeps_the_originals_limits() -> None:
    refused = attrs.evolve(
        _qwen_call(0, False),
        execution_status=ExecutionStatus.NOT_STARTED,
        error_type="invalid_tool_params",
    )
    turns = tuple(Turn(line=n, calls=(attrs.evolve(refused, call_id=f"r{n}"),)) for n in range(3))
    result = replay_run(Run(agent="qwen-code", source="q", run_id="q", turns=turns))
    assert result.profile == "acp"
    for mode in result.modes:  # always on, in every mode, as in the original
        assert mode.stop is not None and mode.stop.loop_type == LOOP_INVALID_TOOL_PARAMS
        assert not mode.stop.would and mode.stop.turn == 3
    wide = _episode([(True,) * 101])
    assert replay_run(wide).mode("shadow").stop.loop_type == LOOP_TOOL_CALL_CAP  # type: ignore[union-attr]


def test_the_parity_suites_episodes_agree_on_a_qwen_code_log() -> None:
    """tests/parity_session.py's episodes, as the original ran them in enforce: "stubborn"
    (4 missing reads a batch) stops after batch 3; "recovery" is warned at 2, its own
    success at 3 resets it, and a new streak stops at 6."""
    from parity_session import EPISODES

    def shaped(name: str) -> Run:
        count, batch = EPISODES[name]
        return _episode([tuple(a == "present" for a in batch(t)) for t in range(count)])

    stubborn = replay_run(shaped("stubborn")).mode("enforce")
    assert stubborn.stop is not None and stubborn.stop.turn == 3
    assert stubborn.stop.loop_type == LOOP_REPEATED_TOOL_FAILURE
    recovery = replay_run(shaped("recovery")).mode("enforce")
    assert recovery.remind is not None and recovery.remind.turn == 2
    assert recovery.stop is not None and recovery.stop.turn == 6
    assert replay_run(shaped("control")).mode("enforce").stop is None


def test_profile_overrides_and_the_report_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = str(FIXTURES / "claude-code" / "failing.session.jsonl")
    assert main(["transcripts", "--json", log]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["profile"] == "hook"
    assert main(["transcripts", "--json", "--profile", "acp", log]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["runs"][0]["profile"] == "acp"
    assert document["fleet"]["profiles"] == {"acp": 1}
    assert main(["transcripts", "--profile", "adapter", log]) == 0
    text = capsys.readouterr().out
    assert " adapter " in text.splitlines()[3]
    assert "replayed as: adapter (1 run; a framework adapter's defaults)" in text
    assert for_kind("claude-code").name == "hook"
