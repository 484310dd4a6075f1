"""Every run the paths hold, read and replayed: one file never costs the report.

:func:`collect` finds the transcripts (:func:`~tool_failure_guard.transcripts.walk.discover`),
reads each with its importer and replays each run.  A file in a walked
directory that is damaged, truncated or refused by its importer is listed as
skipped with its ``line N`` and reason, its runs left out whole (never half a
file), and the rest is reported; a file named on the command line is an error
(:class:`~tool_failure_guard.transcripts.model.TranscriptError`, exit 2).
Paths that yield no run at all are an error too (:class:`NoRuns`), never a
table of zeros.  SWE-bench verdicts found beside the trajectories decide the
outcome of the runs they name (:mod:`~tool_failure_guard.transcripts.verdicts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from tool_failure_guard.transcripts import verdicts
from tool_failure_guard.transcripts.importers import importer
from tool_failure_guard.transcripts.model import Run, TranscriptError
from tool_failure_guard.transcripts.profiles import Profile
from tool_failure_guard.transcripts.replay import RunResult, replay_run
from tool_failure_guard.transcripts.walk import Progress, Skipped, Source, discover


class NoRuns(TranscriptError):
    """The paths hold no run that could be read (an empty folder, only skipped files)."""

    def __init__(self, paths: Sequence[str], sources: int, skipped: Sequence[Skipped]) -> None:
        what = f"{sources} transcript{'' if sources == 1 else 's'} read, " + (
            f"{len(skipped)} file{'' if len(skipped) == 1 else 's'} skipped"
        )
        super().__init__(", ".join(paths), None, f"no run could be read ({what})")
        self.skipped = list(skipped)


@attrs.frozen(kw_only=True)
class Collected:
    sources: list[Source]  #: the transcripts read, in order
    runs_per_file: list[int]
    results: list[RunResult]
    skipped: list[Skipped]
    batches: int
    verdicts: int  #: runs whose outcome a SWE-bench verdict decided


def _named(exc: TranscriptError, source: Source) -> TranscriptError:
    """The error naming what the user gave (a stream is read from its private copy)."""
    if exc.path == str(source.path) and source.shown != exc.path:
        return TranscriptError(source.shown, exc.line, exc.message)
    return exc


def _inside(path: str, folder: str) -> str:
    """``path`` relative to the folder-shaped transcript it belongs to (else whole)."""
    prefix = folder.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def _with(run: Run, source: Source, chosen: dict[str, verdicts.Verdict]) -> Run:
    if run.source != source.shown:
        run = attrs.evolve(run, source=source.shown)
    verdict = chosen.get(run.run_id)
    if verdict is not None:
        run = attrs.evolve(run, succeeded=verdict.resolved, outcome_from=verdict.source)
    return run


def collect(
    paths: Sequence[str],
    kind: str | None,
    streams: Path | None = None,
    progress: bool | None = False,
    profile: Profile | None = None,
) -> Collected:
    """Read and replay every run under ``paths`` (see the module's docstring).

    ``profile``: replay every run with it (``--profile``); None: each with its agent's.
    """
    found = discover(paths, kind, streams)
    chosen, conflicts = verdicts.merge(found.verdicts)
    skipped = list(found.skipped)
    skipped += [Skipped(path, why) for path, why in conflicts]
    shown = Progress(len(found.sources), sum(s.size for s in found.sources), progress)
    read: list[Source] = []
    runs_per_file: list[int] = []
    results: list[RunResult] = []
    batches = used = 0
    for number, source in enumerate(found.sources, start=1):
        try:
            runs = list(importer(source.kind).read(source.path))
        except TranscriptError as exc:
            error = _named(exc, source)
            if source.named:
                shown.done()
                raise error from None
            where = "" if error.line is None else f"line {error.line}: "
            if error.path not in (str(source.path), source.shown):  # a file of a folder
                where = f"{_inside(error.path, source.shown)}: {where}"
            skipped.append(Skipped(source.shown, f"{where}{error.message}"))
            continue
        read.append(source)
        runs_per_file.append(len(runs))
        for run in runs:
            run = _with(run, source, chosen)
            used += run.outcome_from in (verdicts.REPORT, verdicts.SUMMARY)
            batches += sum(1 for t in run.turns if t.calls)
            results.append(replay_run(run, profile))
        shown.update(number, len(results), batches)
    shown.done()
    if not results:
        raise NoRuns(paths, len(read), skipped)
    return Collected(
        sources=read,
        runs_per_file=runs_per_file,
        results=results,
        skipped=skipped,
        batches=batches,
        verdicts=used,
    )
