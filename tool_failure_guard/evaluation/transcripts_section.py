"""The report's ``transcripts`` section: the command on the committed agent-written fixtures.

It renders ``docs/evaluation/transcripts.json``, which is exactly what
``tool-failure-guard transcripts --json tests/fixtures/transcripts`` prints from
the repository root (``tests/test_transcripts_cli.py`` checks that it still
is); without that file the section is left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTS_FILE = ROOT / "docs" / "evaluation" / "transcripts.json"
#: the argument the committed document was made with, from the repository root
FIXTURES_ARG = "tests/fixtures/transcripts"

_AGENTS = {
    "claude-code": "Claude Code 2.1.197 (npm; session logs and `--output-format stream-json`)",
    "codex": "OpenAI Codex CLI 0.169.0 (npm; `codex exec` rollouts)",
    "gemini-cli": "Gemini CLI 0.61.0 (npm; `-p` chat logs)",
    "qwen-code": "Qwen Code 0.24.4 (npm; `-p` and ACP, yolo)",
    "mini-swe-agent": "mini-swe-agent 2.4.6 and 1.15.0 (PyPI, default agent, litellm)",
    "openhands": "OpenHands SDK 1.58.2 (PyPI `openhands-sdk`; terminal and file editor tools)",
    "swe-agent": "SWE-agent 1.1.0 `.traj` format (written by hand from its source: no usable "
    "release on PyPI)",
    "tool-failure-guard": "this project's ACP agent (scripted-model scenarios)",
}
PUBLIC_CORPUS_NOTE = (
    "These are fixtures, not published runs. On published logs (500 SWE-bench Verified runs "
    "of mini-swe-agent 1.15 with Gemini 3 Pro and their verdicts, and SWE-agent's own "
    "demonstrations, read from their public repositories at recorded commits): "
    "[docs/evidence.md](evidence.md), made by `python -m "
    "tool_failure_guard.transcripts.evidence`."
)


def _cell(row: Mapping[str, Any]) -> str:
    median = row["median_call"]
    at = "" if median is None else f" (median call {median:g})"
    return f"{row['runs']}{at}"


def lines(path: Path = TRANSCRIPTS_FILE) -> list[str]:
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    fleet = data["fleet"]
    by_kind: dict[str, list[int]] = {}
    for file in data["files"]:
        files_runs = by_kind.setdefault(file["kind"], [0, 0])
        files_runs[0] += 1
        files_runs[1] += file["runs"]
    out = [
        "## `transcripts` on agent-written logs",
        "",
        "`tool-failure-guard transcripts` (docs/transcripts.md) replays agents' own session "
        "logs through the shipped core in every mode and the peers' rules. Corpus: the "
        f"fixtures under `{FIXTURES_ARG}/`, each written by the agent itself but SWE-agent's "
        "(written by hand in its format): Qwen Code, mini-swe-agent and the OpenHands SDK "
        "against the project's scripted OpenAI-compatible server on 127.0.0.1 (model "
        "`test-model`), Claude Code, the Codex CLI and Gemini CLI against local fakes of their "
        "APIs, this "
        "project's agent with its built-in scripted model; the scripts are failing loops and "
        "mostly successful runs (README there):",
        "",
        "| agent | files | runs |",
        "|---|---|---|",
        *(f"| {_AGENTS.get(k, k)} | {f} | {r} |" for k, (f, r) in by_kind.items()),
        "",
        f"{fleet['runs']} runs ({fleet['by_outcome']['succeeded']} succeeded, "
        f"{fleet['by_outcome']['failed']} failed, {fleet['by_outcome']['not_recorded']} "
        f"where the log does not say), {fleet['batches']} batches, {fleet['calls']} calls "
        f"({fleet['failed_calls']} failed).",
        "",
        "| rule | fires on runs | succeeded | failed | not recorded |",
        "|---|---|---|---|---|",
    ]
    for rule, label in data["rules"].items():
        row = fleet["rules"][rule]
        out.append(
            f"| {label} | {_cell(row)} | {row['succeeded']} | {row['failed']} | "
            f"{row['not_recorded']} |"
        )
    tokens = fleet["saved_input_tokens"], fleet["saved_output_tokens"]
    out += [
        "",
        f"Enforce would have saved {fleet['saved_calls']} calls and {fleet['saved_turns']} "
        f"model turns on {fleet['saved_runs']} runs (tokens in/out {tokens[0]}/{tokens[1]} "
        "where the log records usage), assuming the same calls after a reminder. On Qwen "
        "Code's own record of an ACP prompt its guard stopped (enforce, "
        "`acp-enforce-stopped.jsonl`), the replay reminds and stops at the same batches as "
        "the original did (`tests/test_transcripts_replay.py`). Qwen "
        "Code's own identical-call check halts a run at the 5th identical request, before "
        "it runs, so its own records never show it firing.",
        "",
        PUBLIC_CORPUS_NOTE,
        "",
    ]
    return out
