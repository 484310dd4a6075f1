"""``transcripts`` on logs as they are published (issue 32).

- mini-swe-agent 1.x trajectories (``mini-swe-agent-1``: text actions), from
  the real mini-swe-agent 1.15 (``tests/fixtures/transcripts/mini-swe-agent/v1-*``);
- SWE-bench's own verdicts beside the trajectories deciding a run's outcome;
- Claude Code logs that open with a ``permission-mode`` line, write a result
  before its call, or record a declined permission;
- providers that reuse call ids in every turn (Claude Code, Codex, Qwen Code);
- every fixture's runs, calls, failed calls and batches against counts written
  here from the scenarios that made them (``tests/transcript_agents.py``,
  ``tests/transcript_capture.py`` and the fixtures' READMEs), never from the
  importers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from transcript_files import CLAUDE, CODEX, FIXTURES, Record, edited, lines_of, outcome_rows

from tool_failure_guard.commands.cli import main
from tool_failure_guard.transcripts.importers import claude_code, codex, importer, qwen_code
from tool_failure_guard.transcripts.importers import mini_swe_agent as mini
from tool_failure_guard.transcripts.model import Run
from tool_failure_guard.transcripts.replay import replay_run
from tool_failure_guard.transcripts.walk import discover

MINI = FIXTURES / "mini-swe-agent"
QWEN = FIXTURES / "qwen-code"

#: fixture -> (runs, calls, failed calls, batches), counted from the scenario that made it
COUNTS: dict[str, tuple[int, int, int, int]] = {
    # claude: the capture's script (transcript_capture.py): 9 batches, 12 calls; all but the
    # successful MCP call and the refused Write fail (the Write is cancelled, not an error)
    "claude-code/failing.session.jsonl": (1, 12, 10, 9),
    "claude-code/failing.stream.jsonl": (1, 12, 10, 9),
    "claude-code/success.session.jsonl": (1, 3, 0, 2),
    "claude-code/success.stream.jsonl": (1, 3, 0, 2),
    "claude-code/two-prompts.session.jsonl": (2, 3, 2, 3),
    "claude-code/two-prompts.stream.jsonl": (2, 3, 2, 3),
    # codex: 10 responses, 12 calls; the refused escalation is cancelled, the last MCP call ok
    "codex/failing.rollout.jsonl": (1, 12, 10, 10),
    "codex/success.rollout.jsonl": (1, 2, 0, 1),
    "codex/two-prompts.rollout.jsonl": (2, 3, 2, 3),
    # gemini cli 0.61.0 (tests/transcript_gemini.py): a two-call batch with a missing file and
    # a failing `cat`, `exit 3`, an unknown tool, a read without its path, `echo ok`; ten
    # reads of different missing files (as tests/test_transcripts_gemini_cli.py counts them)
    "gemini-cli/mixed.session.jsonl": (1, 6, 5, 5),
    "gemini-cli/varied-missing.session.jsonl": (1, 10, 10, 10),
    # mini-swe-agent 2.4.6: 14 steps of `cat missing.txt`; a failure, a two-call batch, a
    # timeout, an answer, an unknown tool, the submit
    "mini-swe-agent/failing-command.traj.json": (1, 14, 14, 14),
    "mini-swe-agent/submits.traj.json": (1, 6, 3, 5),
    # mini-swe-agent 1.15: the same failing loop; a failure, a success, a timeout, two
    # blocks (one rejected message: one refused record), no block (an answer), the submit
    "mini-swe-agent/v1-failing-command.traj.json": (1, 14, 14, 14),
    "mini-swe-agent/v1-submits.traj.json": (1, 5, 3, 5),
    # openhands sdk 1.58.2 (tests/transcript_agents.py): 4 identical failing commands before
    # its stuck detector; a two-call batch, a missing file, an unknown tool, a refused call,
    # a timeout, a failing `ls`, `finish`; 10 different missing files
    "openhands/failing-command": (1, 4, 4, 4),
    "openhands/mixed": (1, 8, 5, 7),
    "openhands/varied-missing": (1, 10, 10, 10),
    # qwen code: 3 failing reads in each of 4 turns; 4 identical reads before its own halt;
    # a read, a two-call batch, `exit 3`, an echo; 12 reads of missing files
    "qwen-code/acp-enforce-stopped.jsonl": (1, 12, 12, 4),
    "qwen-code/identical-missing-read.jsonl": (1, 4, 4, 4),
    "qwen-code/mostly-successful.jsonl": (1, 5, 1, 4),
    "qwen-code/varied-missing-reads.jsonl": (1, 12, 12, 12),
    # swe-agent, written by hand (tests/test_transcripts_swe_agent.py): 7 steps, 4 failing;
    # ten missing scripts
    "swe-agent/hand-written-exit-cost.traj": (1, 10, 10, 10),
    "swe-agent/hand-written-submitted.traj": (1, 7, 4, 7),
    # this project's agent: two prompts each; 21 function_call parts, 20 answered with errors;
    # 30 parts, 24 errors (the responses' statuses in the file)
    "tool-failure-guard/read-loop-shadow.jsonl": (2, 21, 20, 6),
    "tool-failure-guard/siblings-enforce.jsonl": (2, 30, 24, 6),
}


def _counts(runs: list[Run]) -> tuple[int, int, int, int]:
    calls = [c for r in runs for t in r.turns for c in t.calls]
    return (
        len(runs),
        len(calls),
        sum(1 for c in calls if c.status.value == "error"),
        sum(1 for r in runs for t in r.turns if t.calls),
    )


def test_every_fixture_is_counted_here() -> None:
    found = discover([str(FIXTURES)])
    assert sorted(str(s.path.relative_to(FIXTURES)) for s in found.sources) == sorted(COUNTS)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_the_importers_counts_on_every_fixture(name: str) -> None:
    (source,) = discover([str(FIXTURES / name)]).sources
    assert _counts(list(importer(source.kind).read(source.path))) == COUNTS[name]


# -- mini-swe-agent 1.x ---------------------------------------------------------------------

OK = ("bash", "success", "success", None, False, False)
FAILED = ("bash", "error", "error", "shell_execute_error", False, False)
TIMEOUT = ("bash", "error", "error", "execution_timeout", True, False)
REFUSED = ("bash", "error", "not_started", "invalid_tool_params", False, False)


def _only(path: Path) -> Run:
    (run,) = list(mini.read(path))
    return run


def test_mini_v1_is_sniffed_and_read_with_its_outcomes() -> None:
    path = MINI / "v1-submits.traj.json"
    assert json.loads(path.read_text())["trajectory_format"] == "mini-swe-agent-1"
    run = _only(path)
    assert outcome_rows(run) == [[FAILED], [OK], [TIMEOUT], [REFUSED], [], [OK]]
    assert run.succeeded is True and run.model == "openai/test-model"
    assert [t.input_tokens for t in run.turns] == [11] * 6  # the fake server's usage
    failing = _only(MINI / "v1-failing-command.traj.json")
    assert failing.succeeded is False
    assert outcome_rows(failing) == [[FAILED]] * 14
    assert len({c.arguments_fingerprint for t in failing.turns for c in t.calls}) == 1


def test_mini_v1_rows() -> None:
    row = mini.mini_swe_agent_text.row
    assert row(1, "<returncode>0</returncode>\n<output>\n</output>", False) == "returncode 0"
    assert row(1, "<returncode>127</returncode>", False) == "returncode not 0"
    assert row(1, "Observation: {'output': 'x', 'returncode': 2}", False) == "returncode not 0"
    assert row(1, "The last command <command>x</command> timed out and has been killed.", False)
    assert row(0, "Please always provide EXACTLY ONE action", False).startswith("format error")
    assert row(1, "", True) == "last response of a Submitted run"
    assert row(1, "Step limit exceeded", False) == "anything else"
    assert set(mini.mini_swe_agent_text.ROWS) == {
        "returncode 0",
        "returncode not 0",
        "timeout notice",
        "format error, two or more blocks (one record)",
        "last response of a Submitted run",
        "anything else",
    }


def test_an_older_v1_without_a_format_field_is_read_as_v1(tmp_path: Path) -> None:
    data = json.loads((MINI / "v1-submits.traj.json").read_text())
    del data["trajectory_format"]
    path = tmp_path / "old.traj.json"
    path.write_text(json.dumps(data, indent=2))
    assert outcome_rows(_only(path)) == [[FAILED], [OK], [TIMEOUT], [REFUSED], [], [OK]]


def test_a_v1_run_whose_submission_is_past_the_head_is_still_sniffed(tmp_path: Path) -> None:
    # published SWE-bench runs: `info.submission` (the diff) comes before `mini_version`
    data = json.loads((MINI / "v1-submits.traj.json").read_text())
    info = data["info"]
    data["info"] = {"exit_status": info["exit_status"], "submission": "+x\n" * 40_000, **info}
    for key in ("mini_version", "config"):
        data["info"].pop(key)
    path = tmp_path / "django__django-11099.traj.json"
    path.write_text(json.dumps(data, indent=2))
    head = path.read_bytes()[: 64 << 10]
    assert b"mini_version" not in head and b"minisweagent." not in head
    assert mini.sniff(path, head)
    assert discover([str(path)]).sources[0].kind == "mini-swe-agent"


def test_a_run_with_turns_and_no_readable_call_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads((MINI / "v1-failing-command.traj.json").read_text())
    for message in data["messages"]:  # actions in a form no importer knows
        if message["role"] == "assistant":
            message["content"] = message["content"].replace("```bash", "```sh")
    path = tmp_path / "other.traj.json"
    path.write_text(json.dumps(data))
    assert main(["transcripts", str(path)]) == 0
    out = capsys.readouterr().out
    assert "no_call_read" in out.split("\n")[3]  # the run's row
    assert "no_call_read: 1 run with model turns and no call" in out
    assert main(["transcripts", "--json", str(path)]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["turns"] == 14 and run["calls"] == 0 and run["flags"] == ["no_call_read"]


# -- SWE-bench verdicts ---------------------------------------------------------------------


def _swe_bench_run(root: Path) -> Path:
    """A minimal published-run layout written by this test: two trajectories (copies of the
    real 1.15 fixtures, named as instances), the harness's report.json for one, a summary."""
    trajs = root / "trajs"
    trajs.mkdir(parents=True)
    shutil.copy(MINI / "v1-submits.traj.json", trajs / "astropy__astropy-12907.traj.json")
    shutil.copy(MINI / "v1-failing-command.traj.json", trajs / "django__django-11099.traj.json")
    report = root / "logs" / "astropy__astropy-12907" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(
        json.dumps(
            {
                "astropy__astropy-12907": {
                    "patch_is_None": False,
                    "patch_exists": True,
                    "patch_successfully_applied": True,
                    "resolved": False,
                    "tests_status": {"FAIL_TO_PASS": {"success": [], "failure": ["t"]}},
                }
            }
        )
    )
    (root / "model.run1.json").write_text(
        json.dumps(
            {
                "schema_version": 2,
                "total_instances": 2,
                "resolved_instances": 1,
                "unresolved_instances": 1,
                "submitted_ids": ["astropy__astropy-12907", "django__django-11099"],
                "resolved_ids": ["astropy__astropy-12907"],
                "unresolved_ids": ["django__django-11099"],
                "error_ids": [],
                "empty_patch_ids": [],
            }
        )
    )
    return root


def test_swe_bench_verdicts_decide_the_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _swe_bench_run(tmp_path / "run")
    assert main(["transcripts", "--json", str(root)]) == 0  # verdict files are not skipped
    data = json.loads(capsys.readouterr().out)
    runs = {r["run_id"]: r for r in data["runs"]}
    # submitted, but the harness says unresolved: its report.json wins over the summary
    assert runs["astropy__astropy-12907"]["succeeded"] is False
    assert runs["astropy__astropy-12907"]["outcome_from"] == "swe-bench report.json"
    assert runs["django__django-11099"]["succeeded"] is False
    assert runs["django__django-11099"]["outcome_from"] == "swe-bench summary"
    assert not data["skipped"]
    # without the verdicts: the agent's own exit status
    assert main(["transcripts", "--json", str(root / "trajs")]) == 0
    own = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert own["astropy__astropy-12907"]["succeeded"] is True
    assert own["astropy__astropy-12907"]["outcome_from"] == "agent"
    assert main(["transcripts", str(root)]) == 0
    assert "SWE-bench's verdict where one is beside" in capsys.readouterr().out


def test_conflicting_verdicts_keep_the_first_and_list_the_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _swe_bench_run(tmp_path / "run")
    other = root / "zz.json"
    other.write_text(json.dumps({"resolved_ids": ["django__django-11099"], "unresolved_ids": []}))
    assert main(["transcripts", "--json", str(root)]) == 1
    data = json.loads(capsys.readouterr().out)
    (skipped,) = data["skipped"]
    assert skipped["path"] == str(other) and "django__django-11099" in skipped["reason"]
    runs = {r["run_id"]: r for r in data["runs"]}
    assert runs["django__django-11099"]["succeeded"] is False


# -- Claude Code ----------------------------------------------------------------------------

FAILING_SESSION = CLAUDE / "failing.session.jsonl"


def _claude(path: Path | str) -> Run:
    (run,) = list(claude_code.read(str(path)))
    return run


def test_a_leading_permission_mode_line_is_not_refused(tmp_path: Path) -> None:
    def lead(records: list[Record]) -> list[Record]:
        session = next(r["sessionId"] for r in records if "sessionId" in r)
        mode = {"type": "permission-mode", "permissionMode": "default", "sessionId": session}
        return [mode, *records]

    path = Path(edited(FAILING_SESSION, tmp_path / "s.jsonl", lead))
    assert claude_code.sniff(str(path), path.read_bytes()[:65536])
    assert outcome_rows(_claude(path)) == outcome_rows(_claude(FAILING_SESSION))


def test_a_result_written_before_its_call_pairs(tmp_path: Path) -> None:
    def results_first(records: list[Record]) -> list[Record]:
        out = list(records)
        for record in records:
            if record.get("type") != "user" or not isinstance(
                record["message"].get("content"), list
            ):
                continue
            ids = {b.get("tool_use_id") for b in record["message"]["content"]}
            use = next(
                i
                for i, r in enumerate(out)
                if r.get("type") == "assistant"
                and any(b.get("id") in ids for b in r["message"]["content"])
            )
            out.remove(record)
            out.insert(use, record)  # the result line now comes first
        return out

    path = edited(FAILING_SESSION, tmp_path / "s.jsonl", results_first)
    assert outcome_rows(_claude(path)) == outcome_rows(_claude(FAILING_SESSION))


# -- reused call ids --------------------------------------------------------------------------


def _reuse(value: Any, ids: dict[str, str]) -> Any:
    """Every known call id replaced by the per-response numbering of some providers."""
    if isinstance(value, dict):
        return {k: _reuse(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_reuse(v, ids) for v in value]
    return ids.get(value, value) if isinstance(value, str) else value


def _reused(source: Path, target: Path, ids: list[str]) -> str:
    same = {i: "functions.read_file:0" for i in ids}
    return edited(source, target, lambda records: [_reuse(r, same) for r in records])


def test_claude_code_reused_ids_do_not_collapse_calls(tmp_path: Path) -> None:
    # one call per message: the first of each message keeps its own place
    records = lines_of(FAILING_SESSION)
    ids = [
        b["id"]
        for r in records
        if r.get("type") == "assistant"
        for b in r["message"]["content"]
        if b.get("type") == "tool_use"
    ]
    firsts = []
    seen_messages = set()
    for r in records:
        if r.get("type") == "assistant" and r["message"]["id"] not in seen_messages:
            for b in r["message"]["content"]:
                if b.get("type") == "tool_use":
                    seen_messages.add(r["message"]["id"])
                    firsts.append(b["id"])
    assert len(ids) == 12 and len(firsts) < 12
    path = _reused(FAILING_SESSION, tmp_path / "s.jsonl", firsts)
    original, reused = _claude(FAILING_SESSION), _claude(path)
    assert sum(len(t.calls) for t in reused.turns) == 12
    assert outcome_rows(reused) == outcome_rows(original)


def test_codex_reused_ids_do_not_collapse_calls(tmp_path: Path) -> None:
    source = CODEX / "failing.rollout.jsonl"
    runs = list(codex.read(str(source)))
    firsts = [t.calls[0].call_id for t in runs[0].turns if t.calls]
    path = _reused(source, tmp_path / "r.jsonl", firsts)
    (reused,) = list(codex.read(path))
    assert sum(len(t.calls) for t in reused.turns) == 12
    assert outcome_rows(reused) == outcome_rows(runs[0])


def test_qwen_code_reused_ids_pair_each_call_with_its_own_result(tmp_path: Path) -> None:
    source = QWEN / "mostly-successful.jsonl"
    (original,) = list(qwen_code.read(source))
    firsts = [t.calls[0].call_id for t in original.turns if t.calls]
    path = Path(_reused(source, tmp_path / "q.jsonl", firsts))
    (reused,) = list(qwen_code.read(path))
    # the failing `exit 3` keeps its error; the others their success
    assert outcome_rows(reused) == outcome_rows(original)
    assert [c.error_text is None for t in reused.turns for c in t.calls] == [
        c.error_text is None for t in original.turns for c in t.calls
    ]


def test_reused_ids_replay_as_the_calls_they_are_not_as_provider_replays(tmp_path: Path) -> None:
    # the same failing command each turn under one id: each ran, so no replay stop
    source = CODEX / "failing.rollout.jsonl"
    (original,) = list(codex.read(str(source)))
    firsts = [t.calls[0].call_id for t in original.turns if t.calls]
    (reused,) = list(codex.read(_reused(source, tmp_path / "r.jsonl", firsts)))
    ids = [c.call_id for t in reused.turns for c in t.calls]
    assert ids.count("functions.read_file:0") == len(firsts) > 2
    replayed, expected = replay_run(reused), replay_run(original)
    assert replayed.modes == expected.modes
    assert all(
        m.stop is None or m.stop.loop_type != "global_tool_call_duplicate" for m in replayed.modes
    )
