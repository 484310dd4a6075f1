"""``docs/evidence.md``: the guard and every peer on published logs, made by one command.

From the repository's root, with each published corpus fetched where its source says::

    python -m tool_failure_guard.transcripts.evidence \\
        --corpus gemini-3-pro-mini-1.15=CLONE/swebench_results/20251118_gemini-3-pro-74pct

Each corpus is a folder ``transcripts`` reads (trajectories, and SWE-bench verdicts beside
them), replayed with each run's own profile; its section gives runs, calls and failures,
then per rule the runs it fires on and, for each stop rule, the successful runs it stops
with the exact 95 % upper bound and the failed runs it stops with what that saves.  The
repository's own fixtures are always the last section, labelled as what they are (logs the
agents wrote here against scripted models, not published runs).  A corpus is named, never
a bare path: its source, commit and licence are recorded in :data:`CORPORA`, and the
published files are not in the repository unless their licence allows it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_THRESHOLD
from tool_failure_guard.transcripts.calibration import UPPER_FIELD
from tool_failure_guard.transcripts.collect import collect
from tool_failure_guard.transcripts.replay import RunResult
from tool_failure_guard.transcripts.report import RULE_LABELS, STOP_RULES, fleet

ROOT: Final = Path(__file__).resolve().parents[2]
DEFAULT_OUT: Final = ROOT / "docs" / "evidence.md"
FIXTURES: Final = "fixtures"


@attrs.frozen(kw_only=True)
class Corpus:
    title: str
    source: str  #: where it is published (a repository and the folder in it)
    commit: str | None  #: the commit read, or None for this repository's own files
    licence: str
    in_repository: str  #: whether (and why not) the files are committed here
    default_path: str | None = None  #: relative to the repository's root, when committed


CORPORA: Final[dict[str, Corpus]] = {
    "gemini-3-pro-mini-1.15": Corpus(
        title="mini-swe-agent 1.15.0, Gemini 3 Pro Preview, SWE-bench Verified (500 instances)",
        source="https://github.com/gruckion/mini-swe-agent, folder "
        "`swebench_results/20251118_gemini-3-pro-74pct/` (`trajs/`, `logs/<instance>/report.json`"
        ", `trajs/sb-cli-reports/`): a copy of SWE-bench's published bash-only run "
        "`20251118_mini-v1.15.0_gemini-3-pro-preview-20251118` "
        "(s3://swe-bench-experiments/bash-only/)",
        commit="d12a71affd95403b036b2bdbd827349b77bfffb9",
        licence="the repository's LICENSE.md is MIT (mini-swe-agent's authors); the "
        "trajectories' own terms are not stated",
        in_repository="no: 110 MB, and the trajectories carry no licence of their own",
    ),
    "swe-agent-demonstrations": Corpus(
        title="SWE-agent's own demonstration trajectories (curated runs that submitted: no "
        "failed run, so only the false-stop bound; SWE-agent records no exit code, so a "
        "failure is read from the observation's text and some are missed: "
        "docs/transcripts.md)",
        source="https://github.com/SWE-agent/SWE-agent, folder `trajectories/demonstrations/`",
        commit="3ea751c087f32b16e039a2233dd6eefecef325d5",
        licence="MIT (the repository's LICENSE)",
        in_repository="no: 1.5 MB, read from its repository at the commit named",
    ),
    FIXTURES: Corpus(
        title="this repository's transcript fixtures: NOT published logs, but logs the agents "
        "wrote here against scripted models (tests/fixtures/transcripts/README.md)",
        source="this repository, `tests/fixtures/transcripts/`",
        commit=None,
        licence="Apache-2.0 (this project)",
        in_repository="yes",
        default_path="tests/fixtures/transcripts",
    ),
}


def _pct(bound: float | None) -> str:
    return "no bound (no successful run)" if bound is None else f"{100 * bound:.1f}%"


def _saved(row: dict[str, Any]) -> str:
    saved = row["saved_on_failed"]
    tokens = [t for t in (saved["input_tokens"], saved["output_tokens"]) if t is not None]
    spent = f", {sum(tokens):,} tokens" if tokens else ""
    return f"{saved['turns']} turns, {saved['calls']} calls{spent}"


def _guard_sentence(results: Sequence[RunResult], reminded: int, stopped: int) -> str:
    threshold = REPEATED_TOOL_FAILURE_THRESHOLD
    most = max((r.key_failures for r in results), default=0)
    reaching = sum(1 for r in results if r.key_failures >= threshold)
    if reminded:
        return (
            f"The guard reminds in {reminded} runs and stops {stopped} in enforce. The most "
            f"failures of one key (tool, error type) in a run: {most}."
        )
    rule = (
        f"**The guard never fires here.** It reminds only after {threshold} failures after "
        "running of one key (tool, error type) in a row: a failure of another key starts a "
        "new streak and a success of the key ends it. "
    )
    if not reaching:
        return rule + (
            f"No run has {threshold} failures of one key at all (the most is {most}): these "
            "runs rarely fail, and never on one thing for long."
        )
    return rule + (
        f"The most any run has of one key, in any order, is {most}; {reaching} "
        f"run{'' if reaching == 1 else 's'} reach {threshold} at all, and in none of them do "
        f"{threshold} come in a row. Here the model changes its command or meets a different "
        "kind of failure long before: its failing steps are spread between successful ones, "
        "not one loop on one error type."
    )


def section(name: str, path: str) -> list[str]:
    """One corpus's section: ``transcripts`` on ``path``, as markdown."""
    corpus = CORPORA[name]
    found = collect([path], None, progress=False)
    results = found.results
    summary = fleet(results, found.batches)
    o = summary.by_outcome
    rejected = sum(r.rejected_messages for r in results)
    decided = sorted({r.outcome_from or "not recorded" for r in results})
    profiles = ", ".join(f"{p} ({n})" for p, n in summary.profiles.items())
    lines = [
        f"<!-- corpus:{name}:begin -->",
        f"## {name}",
        "",
        corpus.title + ".",
        "",
        f"- Source: {corpus.source}"
        + ("" if corpus.commit is None else f", commit `{corpus.commit}`")
        + ".",
        f"- Licence: {corpus.licence}. In this repository: {corpus.in_repository}.",
        f"- Outcomes from: {', '.join(decided)}. Replayed as: {profiles}.",
        f"- Files: {len(found.sources)} transcripts read, {len(found.skipped)} other files "
        "skipped (not a transcript of a known kind: READMEs, run logs, predictions).",
        "",
        "| runs | succeeded | failed | not recorded | turns | batches | calls | failed calls "
        "| rejected messages (one record each) |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {summary.runs} | {o['succeeded']} | {o['failed']} | {o['not_recorded']} | "
        f"{summary.turns} | {summary.batches} | {summary.calls} | {summary.failed_calls} | "
        f"{rejected} |",
        "",
        "| rule | fires on runs (succeeded / failed / not recorded) | successful runs stopped "
        "| 95% upper bound | failed runs stopped | stopping them saves |",
        "|---|---|---|---|---|---|",
    ]
    remind = summary.rules["guard_remind"]
    lines.append(
        f"| {RULE_LABELS['guard_remind']} | {remind['runs']} ({remind['succeeded']} / "
        f"{remind['failed']} / {remind['not_recorded']}) | (a reminder stops nothing) | | | |"
    )
    for rule, label in STOP_RULES.items():
        row = summary.calibration[rule]
        fires = summary.rules.get("guard_stop" if rule == "guard_enforce" else rule)
        fired = (
            f"{fires['runs']} ({fires['succeeded']} / {fires['failed']} / {fires['not_recorded']})"
            if fires is not None
            else "(as its stops)"
        )
        lines.append(
            f"| {label} | {fired} | {row['succeeded_stopped']} of {row['succeeded_runs']} | "
            f"{_pct(row[UPPER_FIELD])} | {row['failed_stopped']} of {row['failed_runs']} | "
            f"{_saved(row)} |"
        )
    enforce = summary.rules["guard_stop"]["runs"]
    lines += ["", _guard_sentence(results, remind["runs"], enforce), ""]
    lines.append(f"<!-- corpus:{name}:end -->")
    return lines


HEADER = [
    "# Evidence: the guard and the peers' rules on published logs",
    "",
    "Generated by `python -m tool_failure_guard.transcripts.evidence` "
    "(`tool_failure_guard/transcripts/evidence.py`; do not edit by hand). Each section is "
    "`tool-failure-guard transcripts` on one corpus (docs/transcripts.md): every run "
    "replayed with the guard its agent's host would run (its profile), the peers' rules on "
    "the same calls, and per stop rule the successful runs it would have stopped with the "
    "exact one-sided 95% (Clopper-Pearson) upper bound of that rate, and the failed runs it "
    "stops with what stopping them saves (turns, calls, tokens after the stop; the replay "
    "assumes the same calls after a reminder). A peer stops after the batch of the call it "
    'fires at. How this relates to the shadow week: docs/rollout.md, "Before the shadow '
    'week".',
    "",
    "To make it again: fetch each published corpus at the commit its section names "
    "(`git clone https://github.com/gruckion/mini-swe-agent && git -C mini-swe-agent "
    "checkout d12a71affd95403b036b2bdbd827349b77bfffb9`; `git clone "
    "https://github.com/SWE-agent/SWE-agent && git -C SWE-agent checkout "
    "3ea751c087f32b16e039a2233dd6eefecef325d5`), then from this repository's root run "
    "`python -m tool_failure_guard.transcripts.evidence --corpus "
    "gemini-3-pro-mini-1.15=mini-swe-agent/swebench_results/20251118_gemini-3-pro-74pct "
    "--corpus swe-agent-demonstrations=SWE-agent/trajectories/demonstrations`. "
    "The fixtures' section is always made from the repository "
    "(`tests/test_transcripts_evidence.py` checks it is what the command gives).",
    "",
]


def document(corpora: Sequence[tuple[str, str]]) -> str:
    lines = list(HEADER)
    for name, path in [*corpora, (FIXTURES, str(ROOT / str(CORPORA[FIXTURES].default_path)))]:
        lines += section(name, path)
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _corpus(text: str) -> tuple[str, str]:
    name, equals, path = text.partition("=")
    if not equals or name not in CORPORA or name == FIXTURES:
        known = ", ".join(n for n in CORPORA if n != FIXTURES)
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME=PATH, NAME one of: {known}")
    if not Path(path).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: {path} is not a directory")
    return name, path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tool_failure_guard.transcripts.evidence")
    parser.add_argument("--corpus", type=_corpus, action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="FILE")
    args = parser.parse_args(argv)
    text = document(args.corpus)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(args.corpus) + 1} corpora)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
