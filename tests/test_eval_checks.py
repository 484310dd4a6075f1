"""The evaluation report's checks and splits, on records built by hand and on the committed ones.

- reproducibility (:mod:`~tool_failure_guard.evaluation.agreement`): which
  episodes must agree with off, over how many batches, and the first divergence;
- the change of course after a reminder (:mod:`~tool_failure_guard.evaluation.course`);
- totals and whether a paired difference rests on one episode
  (:mod:`~tool_failure_guard.evaluation.totals`).
"""

from __future__ import annotations

from typing import Any

from eval_records import CAT_FAIL, LIST_OK, READ_FAIL, batch, episode

from tool_failure_guard.evaluation import agreement, course, totals
from tool_failure_guard.evaluation.records import errored, read_records
from tool_failure_guard.evaluation.run import DEFAULT_RECORDS, RECORDS_FILE


def _row(lines: list[str], *cells: str) -> str:
    prefix = "| " + " | ".join(cells) + " |"
    return next(line for line in lines if line.startswith(prefix))


def _reminded(arm: str, batches: list[dict[str, Any]], at: int, **fields: Any) -> dict[str, Any]:
    record = episode(arm, "failure", batches, **fields)
    label = "would_warn" if arm == "shadow" else "warned"
    record["decisions"] = ["tracked"] * at + [label] + ["none"] * (len(batches) - at - 1)
    return record


def test_the_first_divergence_is_named_by_call_number_and_what_each_side_did() -> None:
    off = episode("off", "failure", [batch(READ_FAIL), batch(READ_FAIL, READ_FAIL)])
    same = episode("shadow", "failure", [batch(READ_FAIL), batch(READ_FAIL, READ_FAIL)])
    assert agreement.first_divergence(off, same) is None
    other = episode("shadow", "failure", [batch(READ_FAIL), batch(READ_FAIL, CAT_FAIL)])
    d = agreement.first_divergence(off, other)
    assert d == agreement.Divergence(
        3, f"read_file {READ_FAIL[1]}", f"run_shell_command {CAT_FAIL[1]}"
    )
    shorter = episode("shadow", "failure", [batch(READ_FAIL)])
    assert agreement.first_divergence(off, shorter) == agreement.Divergence(
        2, f"read_file {READ_FAIL[1]}", "no further call"
    )
    # the same calls and another last answer: the answer is where they part
    answered = episode("shadow", "failure", off["batches"], final_text="Done.")
    d = agreement.first_divergence(off, answered)
    assert d is not None and d.call == 4 and d.right == 'answer "Done."'
    # compared only through the first batch, the later difference does not count
    assert agreement.first_divergence(off, other, through=1) is None


def test_guarded_arms_must_agree_with_off_through_their_first_reminder_only() -> None:
    calls = [batch(READ_FAIL) for _ in range(3)]
    off = episode("off", "failure", calls)
    # warn reminded after batch 2, then (rightly) did something else
    warn = _reminded("warn", [*calls[:2], batch(LIST_OK)], at=1)
    # enforce never reminded, so its whole episode must be off's: it is not
    enforce = episode("enforce", "failure", [*calls[:2], batch(LIST_OK)])
    # shadow must be off's throughout: it is
    shadow = _reminded("shadow", calls, at=1)
    found = {p.arm: p for p in agreement.pairs([off, warn, enforce, shadow])}
    assert found["warn"].through == 2 and found["warn"].divergence is None
    assert found["enforce"].through is None
    assert found["enforce"].divergence == agreement.Divergence(
        3, f"read_file {READ_FAIL[1]}", f"list_directory {LIST_OK[1]}"
    )
    assert found["shadow"].divergence is None
    lines = agreement.table([off, warn, enforce, shadow])
    assert "predate the per-episode cache reset" in lines[0]
    assert _row(lines, "enforce", "through the first reminder's batch (whole episode if none)")
    assert any(line.startswith("- t s1, off vs enforce: call 3: `read_file") for line in lines)


def test_the_cache_sentence_says_how_each_episode_started() -> None:
    reset = {"reset": "slot-erase", "n_erased": 10}
    records = [episode(arm, "failure", [], prompt_cache=reset) for arm in ("off", "shadow")]
    assert agreement.table(records)[0].startswith("The server's prompt cache was emptied")
    records[1]["prompt_cache"] = {"reset": "none"}
    assert agreement.table(records)[0] == (
        "Prompt cache at the episodes' start: none 1, slot-erase 1 (slot-erase: emptied; "
        "none: not emptied by the harness; not recorded: the run predates the reset)."
    )


def test_a_change_of_course_is_split_three_ways_with_success_apart() -> None:
    answered = _reminded("warn", [batch(READ_FAIL)] * 2, at=1, success=False)
    other_tool = _reminded("warn", [batch(READ_FAIL), batch(LIST_OK)], at=0, success=True)
    same_tool_ok = _reminded(
        "enforce", [batch(READ_FAIL), batch(("read_file", '{"path": "a.yml"}', None))], at=0
    )
    identical = _reminded("enforce", [batch(READ_FAIL)] * 2, at=0)
    other_args = _reminded(
        "enforce",
        [batch(READ_FAIL), batch(("read_file", '{"path": "b.yaml"}', "file_not_found"))],
        at=0,
    )
    assert [o for r in (answered, other_tool, same_tool_ok) for o in course.outcomes(r)] == [
        ("no_tool_calls", course.ANSWERED, False),
        ("another_tool", course.CHANGED, False),
        ("another_key", course.CHANGED, False),
    ]
    assert course.outcomes(identical) == [("repeated", course.REPEATED, True)]
    assert course.outcomes(other_args) == [("repeated", course.REPEATED, False)]
    records = [answered, other_tool, same_tool_ok, identical, other_args]
    lines = course.table(records)
    assert _row(
        lines,
        "warn",
        "2",
        "1",
        "1 (1 another tool, 0 same tool, another outcome)",
        "0 (0 the identical call)",
        "1/2",
    )
    assert _row(
        lines,
        "enforce",
        "3",
        "0",
        "1 (0 another tool, 1 same tool, another outcome)",
        "2 (1 the identical call)",
        "0/3",
    )
    line = course.summary_line(records)
    assert line is not None and "1 answered without a further call, 2 changed approach" in line
    assert "2 repeated the failure; 1 of those 5 episodes then succeeded" in line


def test_a_paired_difference_rests_on_one_episode_when_without_it_none_is_left() -> None:
    assert totals.rests_on_one({("a", 1): -20.0, ("b", 1): 2.0, ("c", 1): 1.0}) == (
        ("a", 1),
        -20.0,
    )
    assert totals.rests_on_one({("a", 1): -20.0, ("b", 1): -2.0}) is None
    assert totals.rests_on_one({("a", 1): 0.0}) is None

    def run(arm: str, task: str, calls: int, **fields: Any) -> dict[str, Any]:
        return episode(arm, "failure", [], task=task, tool_calls=calls, **fields)

    capped = {"loop_type": "turn_tool_call_cap"}
    records = [
        run("off", "x", 24, **capped),
        run("off", "y", 2),
        run("warn", "x", 9),
        run("warn", "y", 3),
    ]
    lines = totals.table(records, ["off", "warn"], ["failure"])
    assert _row(lines, "off", "failure", "2", "1 · 0 · 1", "26", "–")
    assert _row(lines, "warn", "failure", "2", "1 · 1 · 0", "12", "-14 (rests on x s1: -15)")


def test_the_committed_records_give_the_split_the_stored_follow_ups_give() -> None:
    """The split is recomputed from batches; it must match what the run itself recorded."""
    records = read_records(DEFAULT_RECORDS / RECORDS_FILE)
    for record in records:
        assert [o for o, _, _ in course.outcomes(record)] == record["follow_ups"], record["episode"]
    # a committed run holds no errored episode (a run with one exits 1 and keeps its records)
    assert not any(errored(r) for r in records)
