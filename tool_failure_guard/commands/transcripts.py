"""``tool-failure-guard transcripts PATH…``: the guard and the peers' rules on agents' own logs.

Reads each transcript with its importer (sniffed, or ``--kind``), replays
every run through the shipped protection core in shadow, warn and enforce
(:mod:`~tool_failure_guard.transcripts.replay`) and prints one row per run and
the fleet summary, or ``--json``.  Arguments, outputs and error texts are
printed only with ``--show-content``.  Exit 2 names ``file:line`` for a file
that is not a transcript of a known kind, or is damaged or truncated.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "what the guard and peers' loop rules would have done on agents' own session logs"


def configure(parser: argparse.ArgumentParser) -> None:
    from tool_failure_guard.transcripts.importers import IMPORTERS, where_logs_live

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = where_logs_live()

    parser.add_argument("paths", nargs="+", metavar="PATH", help="transcript files or directories")
    parser.add_argument("--kind", choices=sorted(IMPORTERS), help="read every file as this kind")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument(
        "--show-content",
        action="store_true",
        help="also print error texts and argument fingerprints (never printed otherwise)",
    )
    parser.add_argument(
        "--plot", type=Path, metavar="PNG", help="write a plot (needs the [plot] extra: matplotlib)"
    )
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress", action="store_true", default=None, help="always show progress"
    )
    progress.add_argument(
        "--no-progress", dest="progress", action="store_false", help="never show progress"
    )


def run(args: argparse.Namespace) -> int:
    from tool_failure_guard.transcripts.importers import importer
    from tool_failure_guard.transcripts.model import TranscriptError
    from tool_failure_guard.transcripts.plot import PlotUnavailable, write_plot
    from tool_failure_guard.transcripts.replay import RunResult, replay_run
    from tool_failure_guard.transcripts.report import document, fleet
    from tool_failure_guard.transcripts.text import render
    from tool_failure_guard.transcripts.walk import Progress, discover

    try:
        sources, skipped = discover(args.paths, args.kind)
        progress = Progress(len(sources), sum(s.size for s in sources), args.progress)
        results: list[RunResult] = []
        runs_per_file: list[int] = []
        batches = 0
        for number, source in enumerate(sources, start=1):
            before = len(results)
            for imported in importer(source.kind).read(source.path):
                batches += sum(1 for t in imported.turns if t.calls)
                results.append(replay_run(imported))
            runs_per_file.append(len(results) - before)
            progress.update(number, len(results), batches)
        progress.done()
    except TranscriptError as exc:
        print(f"tool-failure-guard transcripts: {exc}", file=sys.stderr)
        return 2
    summary = fleet(results, batches)
    if args.plot is not None:
        try:
            write_plot(summary, args.plot)
        except (PlotUnavailable, OSError) as exc:
            print(f"tool-failure-guard transcripts: {exc}", file=sys.stderr)
            return 2
    if args.json:
        data = document(sources, skipped, runs_per_file, results, summary, args.show_content)
        json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(results, summary, skipped, len(sources), args.show_content))
    return 0
