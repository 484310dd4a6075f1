"""``tool-failure-guard transcripts PATH…``: the guard and the peers' rules on agents' own logs.

Reads each transcript with its importer (sniffed, or ``--kind``), replays
every run through the shipped protection core in shadow, warn and enforce
(:mod:`~tool_failure_guard.transcripts.replay`) and prints one row per run and
the fleet summary, or ``--json``.  Arguments, outputs and error texts are
printed only with ``--show-content``.  Exit 0: every file was read; 1: the
report is complete but some files under a directory were skipped (listed,
with why); 2: an error naming ``file:line`` (a file named on the command line
that is not a transcript of a known kind, or is damaged or truncated; no run
read at all; a ``--plot`` target that cannot be written).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HELP = "what the guard and peers' loop rules would have done on agents' own session logs"


def configure(parser: argparse.ArgumentParser) -> None:
    from tool_failure_guard.transcripts.importers import IMPORTERS, where_logs_live
    from tool_failure_guard.transcripts.profiles import BY_KIND, PROFILES

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = where_logs_live()

    parser.add_argument("paths", nargs="+", metavar="PATH", help="transcript files or directories")
    parser.add_argument("--kind", choices=sorted(IMPORTERS), help="read every file as this kind")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument(
        "--profile",
        choices=list(PROFILES),
        help="replay every run with the guard as this host runs it (default: each agent's own: "
        + ", ".join(f"{kind} {name}" for kind, name in BY_KIND.items())
        + ")",
    )
    parser.add_argument(
        "--show-content",
        action="store_true",
        help="also print error texts and argument fingerprints (never printed otherwise)",
    )
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="PNG",
        help="write a plot: a .png file, or a directory to write transcripts.png in (needs [plot])",
    )
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress", action="store_true", default=None, help="always show progress"
    )
    progress.add_argument(
        "--no-progress", dest="progress", action="store_false", help="never show progress"
    )


def _write(text: str) -> None:
    """All of ``text`` in one write, in whatever encoding stdout has (never half a report)."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    sys.stdout.write(text.encode(encoding, "backslashreplace").decode(encoding))
    sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    from tool_failure_guard.transcripts.collect import NoRuns, collect
    from tool_failure_guard.transcripts.model import TranscriptError
    from tool_failure_guard.transcripts.plot import PlotUnavailable, plot_target, write_plot
    from tool_failure_guard.transcripts.profiles import profile
    from tool_failure_guard.transcripts.report import document, fleet
    from tool_failure_guard.transcripts.text import render, shown

    def fail(message: str) -> int:
        print(f"tool-failure-guard transcripts: {shown(message)}", file=sys.stderr)
        return 2

    try:
        plot = None if args.plot is None else plot_target(args.plot)  # before any work
        with tempfile.TemporaryDirectory(prefix="tfg-transcripts-") as streams:
            chosen = None if args.profile is None else profile(args.profile)
            found = collect(args.paths, args.kind, Path(streams), args.progress, chosen)
    except NoRuns as exc:
        for skipped in exc.skipped:
            print(f"  skipped {shown(skipped.path)}: {shown(skipped.reason)}", file=sys.stderr)
        return fail(str(exc))
    except (TranscriptError, PlotUnavailable) as exc:
        return fail(str(exc))
    summary = fleet(found.results, found.batches)
    if plot is not None:
        try:
            write_plot(summary, plot)
        except OSError as exc:
            return fail(f"--plot {args.plot}: {exc.strerror or exc}")
    if args.json:
        data = document(
            found.sources,
            found.skipped,
            found.runs_per_file,
            found.results,
            summary,
            args.show_content,
        )
        # built whole, ASCII (a lone surrogate or undecodable name is a JSON escape)
        _write(json.dumps(data, indent=2, ensure_ascii=True) + "\n")
    else:
        _write(render(found.results, summary, found.skipped, len(found.sources), args.show_content))
    return 1 if found.skipped else 0
