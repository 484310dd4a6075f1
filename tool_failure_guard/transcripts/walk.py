"""Finding transcripts: files and directories walked, each file sniffed to its kind.

A file named on the command line must be a transcript of a known kind (else a
:class:`~tool_failure_guard.transcripts.model.TranscriptError` naming it); in a
walked directory a file of no known kind is skipped and reported, never read
further.  Importer modules that are not installed (a kind still being written)
are left out of sniffing.  A kind whose transcript is a folder of files (an
OpenHands conversation) has an ``owner(path)`` naming the folder a file
belongs to: every file in it becomes that one source, read once.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import IO

import attrs

from tool_failure_guard.transcripts.importers import IMPORTERS, importer
from tool_failure_guard.transcripts.model import TranscriptError

#: Bytes handed to each importer's ``sniff``.
HEAD_BYTES = 64 << 10
#: Files in a walked directory past this count are an error (bounded input).
MAX_FILES = 1_000_000
#: Inputs at least this large (files or bytes) show progress on a terminal.
PROGRESS_FILES = 20
PROGRESS_BYTES = 32 << 20


@attrs.frozen
class Source:
    path: Path
    kind: str
    size: int


@attrs.frozen
class Skipped:
    path: str
    reason: str


def available_kinds() -> list[str]:
    """The kinds whose importer module is installed, in registry order."""
    package = "tool_failure_guard.transcripts.importers"
    return [k for k, m in IMPORTERS.items() if importlib.util.find_spec(f"{package}.{m}")]


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(HEAD_BYTES)
    except OSError as exc:
        raise TranscriptError(str(path), None, f"cannot read: {exc.strerror or exc}") from None


def sniff(path: Path, modules: Sequence[tuple[str, ModuleType]]) -> str | None:
    """The first kind whose importer claims ``path``, or None."""
    head = _head(path)
    if not head.strip():
        return None
    for kind, module in modules:
        if module.sniff(path, head):
            return kind
    return None


def _owned(path: Path, modules: Sequence[tuple[str, ModuleType]]) -> tuple[str, Path] | None:
    """``(kind, folder)`` when ``path`` is part of a folder-shaped transcript."""
    for kind, module in modules:
        owner = getattr(module, "owner", None)
        folder = owner(path) if owner is not None else None
        if folder is not None:
            return kind, folder
    return None


def discover(paths: Sequence[str], kind: str | None = None) -> tuple[list[Source], list[Skipped]]:
    """Every transcript under ``paths`` (sorted within a directory) and what was skipped."""
    installed = available_kinds()
    if kind is not None and kind not in installed:
        raise TranscriptError(kind, None, "this kind's importer is not installed in this version")
    kinds = [kind] if kind is not None else installed
    modules = [(k, importer(k)) for k in kinds]
    owners = [(k, importer(k)) for k in installed]
    known = ", ".join(kinds)
    sources: list[Source] = []
    skipped: list[Skipped] = []
    folders: set[Path] = set()

    def add_folder(owned: tuple[str, Path], size: int) -> None:
        if owned[1] in folders:
            return
        folders.add(owned[1])
        if owned[0] in kinds:
            sources.append(Source(owned[1], owned[0], size))
        else:  # --kind another: the folder is one skipped transcript, not each of its files
            skipped.append(Skipped(str(owned[1]), f"a {owned[0]} transcript, not {known}"))

    for given in paths:
        path = Path(given)
        owned = _owned(path, owners)
        if owned is not None:
            add_folder(owned, 0)
        elif path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file())
            if len(files) > MAX_FILES:
                raise TranscriptError(given, None, f"more than {MAX_FILES} files")
            for file in files:
                owned = _owned(file, owners)
                if owned is not None:
                    add_folder(owned, file.stat().st_size)
                    continue
                found = sniff(file, modules)
                if found is None:
                    skipped.append(
                        Skipped(str(file), f"not a transcript of a known kind ({known})")
                    )
                else:
                    sources.append(Source(file, found, file.stat().st_size))
        elif path.is_file():
            found = sniff(path, modules)
            if found is None:
                raise TranscriptError(given, 1, f"not a transcript of a known kind ({known})")
            sources.append(Source(path, found, path.stat().st_size))
        else:
            raise TranscriptError(given, None, "no such file or directory")
    return sources, skipped


class Progress:
    """A one-line counter on stderr, redrawn at most every half second."""

    def __init__(
        self,
        total_files: int,
        total_bytes: int,
        enabled: bool | None,
        stream: IO[str] | None = None,
    ) -> None:
        self._stream = stream or sys.stderr
        if enabled is None:
            long_input = total_files >= PROGRESS_FILES or total_bytes >= PROGRESS_BYTES
            enabled = long_input and self._stream.isatty()
        self.enabled = enabled
        self._total = total_files
        self._last = 0.0
        self._shown = False

    def update(self, files: int, runs: int, batches: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.5 and files < self._total:
            return
        self._last = now
        self._stream.write(
            f"\rtranscripts: {files}/{self._total} files, {runs} runs, {batches} batches"
        )
        self._stream.flush()
        self._shown = True

    def done(self) -> None:
        if self._shown:
            self._stream.write("\n")
            self._stream.flush()
