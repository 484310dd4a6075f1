"""``tool-failure-guard replay``: the JSON Lines contract, end to end through main()."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benches.corpus import build_corpus, wire_lines
from tool_failure_guard.commands.cli import main
from tool_failure_guard.commands.replay import decision_record, parse_batch, replay
from tool_failure_guard.guard import GuardMode, RepeatedToolFailureGuard

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "receipts.jsonl"


def line(prompt: str = "p1", n: int = 4, **extra: object) -> str:
    observations = [
        {
            "callId": f"c{i}",
            "policyToolName": "read_file",
            "toolType": "native",
            "terminalStatus": "error",
            "executionStatus": "error",
            "executionErrorType": "file_not_found",
        }
        for i in range(n)
    ]
    return json.dumps({"prompt": prompt, "observations": observations, **extra})


def run_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str], *args: str
) -> tuple[int, list[dict[str, object]], str]:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    status = main(["replay", str(source), *args])
    captured = capsys.readouterr()
    return status, [json.loads(x) for x in captured.out.splitlines()], captured.err


def test_one_output_line_per_batch_with_every_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run_replay(
        tmp_path, capsys, [line(), line(), line(n=1)], "--mode", "enforce"
    )
    assert status == 0 and err == ""
    assert [o["decision"] for o in out] == ["tracked", "warn", "stop"]
    assert out[2] == {
        "prompt": "p1",
        "decision": "stop",
        "reason": None,
        "phase": "latched",
        "key": {"policyToolName": "read_file", "executionErrorType": "file_not_found"},
        "failureCount": 9,
        "batchCount": 3,
        "candidateOrdinal": 1,
        "enforcementDisabled": False,
    }


def test_default_mode_is_shadow_and_a_lines_mode_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [line("a"), line("a"), line("b", mode="warn"), line("b"), line("a"), line("b")]
    status, out, _ = run_replay(tmp_path, capsys, lines)
    assert status == 0
    assert [o["decision"] for o in out] == [
        "tracked",
        "would_warn",
        "tracked",
        "warn",
        "would_stop",
        "would_stop",
    ]


def test_each_prompt_has_its_own_guard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_replay(tmp_path, capsys, [line("a"), line("b"), line("a")])
    assert status == 0
    assert [(o["prompt"], o["failureCount"]) for o in out] == [("a", 4), ("b", 4), ("a", 8)]


def test_optional_boundary_and_completeness_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        line(),
        line(complete=False),
        line(),
        line(hasQueuedPrompt=True),
        line(inputReliable=False),
        line(hasExternalInput=True),
    ]
    status, out, _ = run_replay(tmp_path, capsys, lines, "--mode", "enforce")
    assert status == 0
    assert [(o["decision"], o["reason"]) for o in out] == [
        ("tracked", None),
        ("reset", "incomplete"),
        ("tracked", None),
        ("reset", "queued_prompt"),
        ("reset", "unreliable_input"),
        ("none", None),
    ]
    assert out[-1]["enforcementDisabled"] is True


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "line 2: not valid JSON"),
        ("[1, 2]", "line 2: expected a JSON object, got list"),
        ("[" * 100_000, "line 2: JSON nested too deeply"),
        (json.dumps({"observations": []}), "line 2: missing required key 'prompt'"),
        (json.dumps({"prompt": "p1"}), "line 2: missing required key 'observations'"),
        (json.dumps({"prompt": "", "observations": []}), "line 2: 'prompt' must be a non-empty"),
        (
            json.dumps({"prompt": "p1", "observations": [], "mode": "loud"}),
            "line 2: 'mode' must be one of off, shadow, warn, enforce, got 'loud'",
        ),
        (
            json.dumps({"prompt": "p1", "observations": [], "complete": "yes"}),
            "line 2: 'complete' must be a boolean, got 'yes'",
        ),
        (
            json.dumps({"prompt": "p1", "observations": [], "compete": True}),
            "line 2: unknown key 'compete'",
        ),
        (
            json.dumps({"prompt": "p1", "observations": [{"terminalStatus": "error"}]}),
            "line 2: observations[0]: missing required key 'callId'",
        ),
        (
            json.dumps(
                {"prompt": "p1", "observations": [{"callId": "c", "terminalStatus": "failed"}]}
            ),
            "line 2: observations[0]: terminalStatus must be one of success, error, cancelled; "
            "got 'failed'",
        ),
        (
            json.dumps(
                {
                    "prompt": "p1",
                    "observations": [
                        {"callId": "c", "terminalStatus": "error", "executionStatuss": "error"}
                    ],
                }
            ),
            "line 2: observations[0]: unknown key 'executionStatuss'",
        ),
        (
            json.dumps(
                {
                    "prompt": "p1",
                    "observations": [
                        {"callId": "c", "terminalStatus": "error", "toolType": "plugin"}
                    ],
                }
            ),
            "line 2: observations[0]: toolType must be native, mcp or None; got 'plugin'",
        ),
        (
            json.dumps(
                {
                    "prompt": "p1",
                    "observations": [
                        {"callId": "c", "terminalStatus": "error", "providerDuplicate": 1}
                    ],
                }
            ),
            "line 2: observations[0]: 'providerDuplicate' must be a boolean, got 1",
        ),
        (line("p1", mode="warn"), "line 2: prompt 'p1' started in mode 'shadow'"),
    ],
)
def test_a_malformed_line_stops_after_earlier_decisions_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str, message: str
) -> None:
    status, out, err = run_replay(tmp_path, capsys, [line(), bad, line()])
    assert status == 2
    assert len(out) == 1 and out[0]["decision"] == "tracked"
    assert err.startswith(message), err


def test_blank_lines_are_skipped_but_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run_replay(tmp_path, capsys, [line(), "", "   ", "oops"])
    assert status == 2 and len(out) == 1
    assert err.startswith("line 4: not valid JSON")


def test_missing_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(tmp_path / "absent.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and "absent.jsonl" in err


def test_reads_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(line() + "\n" + line() + "\n"))
    assert main(["replay", "-", "--mode", "warn"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [o["decision"] for o in out] == ["tracked", "warn"]


def test_summary_counts_decisions_and_reasons_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run_replay(
        tmp_path, capsys, [line(), line(), line(hasExternalInput=True)], "--summary"
    )
    assert status == 0 and len(out) == 3
    rows = {tuple(r.split()[:2]): r.split()[-1] for r in err.splitlines()[1:-1]}
    assert rows == {
        ("tracked", "-"): "1",
        ("would_warn", "-"): "1",
        ("reset", "external_input"): "1",
    }
    assert err.splitlines()[-1].split() == ["total", "3"]


def test_the_shipped_example_replays_in_every_mode(capsys: pytest.CaptureFixture[str]) -> None:
    results = {}
    for mode in ("shadow", "warn", "enforce"):
        assert main(["replay", str(EXAMPLE), "--mode", mode]) == 0
        results[mode] = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    stops = {
        mode: [o["prompt"] for o in out if o["decision"] == "stop"] for mode, out in results.items()
    }
    assert stops == {"shadow": [], "warn": [], "enforce": ["read-loop", "shell-loop"]}
    old_host = [o["decision"] for o in results["enforce"] if o["prompt"] == "old-host"]
    assert old_host[-1] == "would_stop"  # an unreliable drain disabled enforcement


def test_candidate_ordinal_is_the_active_candidates_and_zero_in_idle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    success = json.dumps(
        {
            "prompt": "p1",
            "observations": [
                {
                    "callId": "s",
                    "policyToolName": "read_file",
                    "terminalStatus": "success",
                    "executionStatus": "success",
                }
            ],
        }
    )
    empty = json.dumps({"prompt": "p1", "observations": []})
    lines = [empty, line(n=2), line(n=2), success, empty, success, line(n=1)]
    status, out, _ = run_replay(tmp_path, capsys, lines)
    assert status == 0
    assert [(o["decision"], o["phase"], o["candidateOrdinal"]) for o in out] == [
        ("none", "idle", 0),
        ("tracked", "tracking", 1),
        ("tracked", "tracking", 1),
        ("reset", "idle", 0),
        ("none", "idle", 0),
        ("none", "idle", 0),
        ("tracked", "tracking", 2),
    ]


def reference_replay(lines: list[str], default_mode: GuardMode = GuardMode.SHADOW) -> str:
    """Replay as the schema reads: parse_batch per line, json.dumps of the record."""
    guards: dict[str, RepeatedToolFailureGuard] = {}
    out = []
    for text in lines:
        if not text.strip():
            continue
        batch = parse_batch(text)
        guard = guards.setdefault(
            batch.prompt, RepeatedToolFailureGuard(batch.mode or default_mode)
        )
        decision = guard.observe(batch.receipt, batch.boundary)
        out.append(json.dumps(decision_record(batch.prompt, decision, guard)) + "\n")
    return "".join(out)


def unicode_lines() -> list[str]:
    def entry(call: str, tool: str, error: str | None, terminal: str = "error") -> dict[str, str]:
        values = {"callId": call, "policyToolName": tool, "terminalStatus": terminal}
        values["executionStatus"] = "error" if terminal == "error" else "success"
        if error is not None:
            values["executionErrorType"] = error
        return values

    failing = [entry(f"c{i}", "lire_fichier_é", 'pas "trouvé"\\') for i in range(4)]
    return [
        json.dumps({"prompt": "prompt ✓ 1", "mode": "enforce", "observations": failing}),
        json.dumps({"prompt": "prompt ✓ 1", "observations": failing}, ensure_ascii=False),
        json.dumps({"prompt": "p\n2", "observations": [entry("x", "t", None, "success")]}),
        json.dumps({"prompt": "prompt ✓ 1", "observations": failing[:1]}),
    ]


@pytest.mark.parametrize("compact", [True, False])
def test_output_is_json_dumps_of_the_record_line_for_line(compact: bool) -> None:
    lines = [*wire_lines(build_corpus(1_500, seed=3), compact=compact), *unicode_lines()]
    lines += EXAMPLE.read_text(encoding="utf-8").splitlines()
    out = io.StringIO()
    replay(lines, out)
    assert out.getvalue() == reference_replay(lines)


def test_replay_streams_each_decision_before_reading_the_next_line() -> None:
    out = io.StringIO()
    source = [line(), line(), line(n=1)]

    def lines() -> Iterator[str]:
        for index, text in enumerate(source):
            # every earlier line's decision is already written when this one is read
            assert out.getvalue().count("\n") == index
            yield text

    replay(lines(), out, GuardMode.ENFORCE)
    assert out.getvalue().count("\n") == 3


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"prompt": "p1", "observations": [], "mode": None}, "'mode' must be a string"),
        ({"prompt": "p1", "observations": [], "inputReliable": 1}, "'inputReliable' must be a"),
        ({"prompt": 1, "observations": []}, "'prompt' must be a string"),
        ({"prompt": "p1", "observations": {}}, "'observations' must be an array"),
        ({"prompt": "p1", "observations": [[]]}, "observations[0]: expected a JSON object"),
        (
            {"prompt": "p1", "observations": [{"callId": "", "terminalStatus": "error"}]},
            "observations[0]: callId must be a non-empty string",
        ),
        (
            {"prompt": "p1", "observations": [{"callId": "c", "terminalStatus": ["error"]}]},
            "observations[0]: 'terminalStatus' must be a string",
        ),
        (
            {
                "prompt": "p1",
                "observations": [{"callId": "c", "terminalStatus": "error", "toolType": ["mcp"]}],
            },
            "observations[0]: 'toolType' must be a string or null",
        ),
        (
            {
                "prompt": "p1",
                "observations": [
                    {"callId": "c", "terminalStatus": "error", "providerDuplicate": None}
                ],
            },
            "observations[0]: 'providerDuplicate' must be a boolean, got None",
        ),
    ],
)
def test_lines_off_the_fast_path_still_get_the_strict_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: dict[str, object], message: str
) -> None:
    status, out, err = run_replay(tmp_path, capsys, [line(), json.dumps(bad)])
    assert status == 2 and len(out) == 1
    assert err.startswith(f"line 2: {message}"), err


# Compressed input (.gz), bounded


def test_a_gzip_file_replays_like_the_plain_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import gzip

    text = "\n".join([line(), line(), line("p2")]) + "\n"
    plain = tmp_path / "in.jsonl"
    plain.write_text(text, encoding="utf-8")
    packed = tmp_path / "in.jsonl.gz"
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    assert main(["replay", str(plain), "--mode", "warn"]) == 0
    expected = capsys.readouterr().out
    assert main(["replay", str(packed), "--mode", "warn"]) == 0
    assert capsys.readouterr().out == expected
    assert [json.loads(x)["decision"] for x in expected.splitlines()] == [
        "tracked",
        "warn",
        "tracked",
    ]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda data: b"not gzip at all" + data, "not a readable gzip file"),
        (lambda data: data[: len(data) // 2], "truncated"),
        (lambda data: data[:12] + bytes(b ^ 0xFF for b in data[12:40]) + data[40:], "gzip"),
    ],
    ids=["not-gzip", "truncated", "corrupt-deflate"],
)
def test_a_corrupt_gzip_file_is_a_clear_error_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Any, message: str
) -> None:
    import gzip
    import random

    rng = random.Random(7)
    # Incompressible enough that half the file is mid-stream, past the first line.
    lines = [line(f"p{rng.randrange(10**9)}") for _ in range(200)]
    packed = tmp_path / "in.jsonl.gz"
    packed.write_bytes(damage(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"))))
    assert main(["replay", str(packed)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("replay: "), captured.err
    assert message in captured.err and "in.jsonl.gz" in captured.err
    assert "Traceback" not in captured.err
    for text in captured.out.splitlines():  # what was decided before the damage is kept
        assert json.loads(text)["decision"] == "tracked"


def test_a_gzip_bomb_is_read_in_bounded_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1 GiB of one line, 1 MiB compressed: refused at the line limit, never held whole."""
    import gzip
    import resource

    from tool_failure_guard.line_input import MAX_LINE_CHARS

    bomb = tmp_path / "bomb.jsonl.gz"
    chunk = b"x" * (1 << 20)
    with gzip.open(bomb, "wb", compresslevel=9) as sink:
        sink.write(line().encode("utf-8") + b"\n")
        for _ in range(1024):
            sink.write(chunk)
    assert bomb.stat().st_size < 8 << 20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert main(["replay", str(bomb)]) == 2
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    captured = capsys.readouterr()
    assert captured.err.strip() == f"line 2: longer than {MAX_LINE_CHARS} characters"
    assert [json.loads(x)["decision"] for x in captured.out.splitlines()] == ["tracked"]
    # ru_maxrss is KiB on Linux: the peak grew by far less than the 1 GiB inflated line.
    assert after - before < 256 * 1024


def test_an_overlong_plain_line_is_refused_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tool_failure_guard.line_input import bounded_lines

    stream = io.StringIO(line() + "\n" + "y" * 100 + "\n" + line() + "\n")
    lines = bounded_lines(stream, limit=64 * 1024)
    assert json.loads(next(lines))["prompt"] == "p1"
    assert next(lines) == "y" * 100 + "\n"
    with pytest.raises(ValueError, match="line 2: longer than 10 characters"):
        list(bounded_lines(io.StringIO("short\n" + "z" * 11 + "\n"), limit=10))
