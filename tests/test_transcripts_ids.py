"""Call ids reused across a run's turns are kept apart; a repeat within one response is not."""

from __future__ import annotations

from tool_failure_guard.guard import ExecutionStatus, TerminalStatus
from tool_failure_guard.transcripts.importers._ids import distinct_across_turns
from tool_failure_guard.transcripts.model import ImportedCall, Turn


def _turn(line: int, *ids: str) -> Turn:
    calls = tuple(
        ImportedCall(
            call_id=i,
            tool="read_file",
            arguments_fingerprint="a",
            status=TerminalStatus.SUCCESS,
            execution_status=ExecutionStatus.SUCCESS,
            error_type=None,
        )
        for i in ids
    )
    return Turn(line=line, calls=calls)


def test_ids_a_provider_numbers_per_response() -> None:
    turns = [_turn(1, "f:0", "f:1"), _turn(2, "f:0"), _turn(3), _turn(4, "f:0", "f:1", "g")]
    out = distinct_across_turns(turns)
    assert [[c.call_id for c in t.calls] for t in out] == [
        ["f:0", "f:1"],
        ["f:0#2"],
        [],
        ["f:0#3", "f:1#2", "g"],
    ]
    assert out[0] is turns[0] and out[2] is turns[2]  # untouched turns are kept as they are


def test_a_repeat_within_one_response_stays_a_duplicate() -> None:
    (turn,) = distinct_across_turns([_turn(1, "x", "x")])
    assert [c.call_id for c in turn.calls] == ["x", "x"]
