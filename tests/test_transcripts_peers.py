"""Today's peers' rules (issue 39 item 5), on the cases their own sources state."""

from __future__ import annotations

from tool_failure_guard.peer_rules import (
    CLINE,
    CRUSH,
    PEER_KEYS,
    PEER_RULES,
    QWEN_REPEATED_ERROR,
    PeerCall,
)

QWEN = PEER_RULES[QWEN_REPEATED_ERROR]
CLINE_RULE = PEER_RULES[CLINE]
CRUSH_RULE = PEER_RULES[CRUSH]


def _rounds(*rounds: tuple[str | None, ...]) -> list[PeerCall]:
    """One turn per tuple; each item a call: an error text, or None for a success."""
    return [
        PeerCall(
            tool="run_shell_command",
            arguments=f"args-{turn}-{n}",
            failed=text is not None,
            error_text=text,
            turn=turn,
        )
        for turn, calls in enumerate(rounds, start=1)
        for n, text in enumerate(calls)
    ]


def test_qwen_10916_three_rounds_in_a_row_of_one_error() -> None:
    assert QWEN(_rounds(("A",), ("A",), ("A",))) == 3
    # its test "restarts the streak on a different error": errA errA errB errA errA
    assert QWEN(_rounds(("A",), ("A",), ("B",), ("A",), ("A",))) is None
    # "keeps the streak alive across a fully successful round": err, success, err, err
    assert QWEN(_rounds(("A",), (None,), ("A",), ("A",))) == 4
    # "counts sibling calls of one parallel batch as ONE round, not as retries"
    assert QWEN(_rounds(("A", "A", "A", "A"))) is None
    assert QWEN(_rounds(("A", "A"), ("A", "A"), ("A",))) == 5  # the last call of round 3
    # a mixed round: each distinct signature in order takes the one slot
    assert QWEN(_rounds(("A", "B"), ("A", "B"), ("A", "B"))) is None
    assert QWEN(_rounds(("B", "A"), ("A",), ("A",))) == 4


def test_qwen_10916_leaves_a_failure_without_recorded_text_out() -> None:
    calls = _rounds(("A",), ("A",), ("A",))
    calls[1] = PeerCall(tool="t", arguments="x", failed=True, error_text=None, turn=2)
    assert QWEN(calls) is None  # round 2 carries no evidence: the streak is A, A


def test_cline_counts_turns_without_a_success_and_resets_on_one() -> None:
    assert CLINE_RULE(_rounds(("A",), ("B", "C"), ("D",))) == 4
    assert CLINE_RULE(_rounds(("A",), ("B", None), ("C",), ("D",))) is None
    assert CLINE_RULE(_rounds(("A",), ("B",), (None,), ("C",), ("D",), ("E",))) == 6


def test_crush_needs_ten_steps_and_a_sixth_repeat_in_the_last_ten() -> None:
    same = [
        PeerCall(tool="bash", arguments="cat x", failed=True, error_text="no such file", turn=t)
        for t in range(1, 15)
    ]
    assert CRUSH_RULE(same[:9]) is None  # fewer than 10 steps ran
    assert CRUSH_RULE(same) == 10  # 10 identical steps: more than 5 in the last 10
    varied = [
        PeerCall(tool="bash", arguments=str(t), failed=True, error_text="e", turn=t)
        for t in range(1, 15)
    ]
    assert CRUSH_RULE(varied) is None  # the input differs every step
    alternating = [
        PeerCall(tool="bash", arguments=str(t % 2), failed=True, error_text="e", turn=t)
        for t in range(1, 15)
    ]
    assert CRUSH_RULE(alternating) is None  # two steps, each 5 times in any 10: never more
    # a successful call's output is not in a log: such a step never matches another
    successes = [PeerCall(tool="bash", arguments="ls", failed=False, turn=t) for t in range(1, 15)]
    assert CRUSH_RULE(successes) is None


def test_every_peer_has_a_short_key() -> None:
    assert set(PEER_KEYS) == set(PEER_RULES)
    assert {"qwen_code_repeated_error", "cline_mistakes", "crush_repeated_steps"} <= set(
        PEER_KEYS.values()
    )
