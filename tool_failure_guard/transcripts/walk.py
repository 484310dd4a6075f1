"""Finding transcripts: files and directories walked, each file sniffed to its kind.

A path named on the command line must be a transcript of a known kind (else a
:class:`~tool_failure_guard.transcripts.model.TranscriptError` naming it); in a
walked directory a file of no known kind, one that cannot be read, or one that
is not a regular file (a FIFO, a device, a socket: never opened there, as
opening one may block or never end) is skipped and listed with its reason,
never read further.  A named pipe or a process substitution (``<(zcat
log.gz)``) named on the command line is read as a stream: copied, at most
:data:`~tool_failure_guard.transcripts.importers._read.MAX_FILE_BYTES` bytes,
into a private temporary file (0600 in a 0700 directory) and read from there;
a device (``/dev/zero``) or a socket is refused by name, unread.  Importer
modules that are not installed (a kind still being written) are left out of
sniffing.  A kind whose transcript is a folder of files (an OpenHands
conversation) has an ``owner(path)`` naming the folder a file belongs to: every
file in it becomes that one source, read once.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import IO

import attrs

from tool_failure_guard.line_input import file_kind
from tool_failure_guard.transcripts import verdicts
from tool_failure_guard.transcripts.importers import IMPORTERS, _read, importer
from tool_failure_guard.transcripts.model import TranscriptError

#: Bytes handed to each importer's ``sniff``.
HEAD_BYTES = 64 << 10
#: Files in a walked directory past this count are an error (bounded input).
MAX_FILES = 1_000_000
#: Inputs at least this large (files or bytes) show progress on a terminal.
PROGRESS_FILES = 20
PROGRESS_BYTES = 32 << 20
_COPY_CHUNK = 1 << 20


@attrs.frozen
class Source:
    """A transcript to read: ``path`` is what is opened, ``name`` what the user gave or walked
    (they differ for a stream, read from its private copy)."""

    path: Path
    kind: str
    size: int
    name: str = ""
    named: bool = False  #: named on the command line (an error there is exit 2, not a skip)

    @property
    def shown(self) -> str:
        return self.name or str(self.path)


@attrs.frozen
class Skipped:
    path: str
    reason: str


@attrs.define
class Found:
    """What the paths hold: transcripts, SWE-bench verdict files, and what was skipped."""

    sources: list[Source] = attrs.field(factory=list)
    skipped: list[Skipped] = attrs.field(factory=list)
    verdicts: list[tuple[str, dict[str, verdicts.Verdict]]] = attrs.field(factory=list)
    folders: set[Path] = attrs.field(factory=set)  #: folder-shaped transcripts already taken

    def add_folder(self, owned: tuple[str, Path], size: int, kinds: Sequence[str]) -> None:
        """One folder-shaped transcript, once, whichever of its files named it."""
        kind, folder = owned
        if folder in self.folders:
            return
        self.folders.add(folder)
        if kind in kinds:
            self.sources.append(Source(folder, kind, size, str(folder)))
        else:  # --kind another: the folder is one skipped transcript, not each of its files
            known = ", ".join(kinds)
            self.skipped.append(Skipped(str(folder), f"a {kind} transcript, not {known}"))


def available_kinds() -> list[str]:
    """The kinds whose importer module is installed, in registry order."""
    package = "tool_failure_guard.transcripts.importers"
    return [k for k, m in IMPORTERS.items() if importlib.util.find_spec(f"{package}.{m}")]


def _head(path: Path) -> bytes:
    try:
        with _read.open_regular(str(path)) as handle:
            return handle.read(HEAD_BYTES)
    except OSError as exc:
        raise TranscriptError(str(path), None, f"cannot read: {exc.strerror or exc}") from None


def sniff(path: Path, modules: Sequence[tuple[str, ModuleType]]) -> str | None:
    """The first kind whose importer claims ``path``, or None (never raises on content)."""
    head = _head(path)
    if not head.strip():
        return None
    for kind, module in modules:
        try:
            claimed = module.sniff(path, head)
        except (ValueError, TypeError, RecursionError):  # content a sniffer did not expect
            claimed = False
        if claimed:
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


def spool(given: str, into: Path) -> Path:
    """A stream (named pipe, process substitution) copied, bounded, into a private file."""
    target = into / f"stream-{len(list(into.iterdir()))}"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    total = 0
    try:
        with open(given, "rb") as source, os.fdopen(fd, "wb") as out:
            while chunk := source.read(_COPY_CHUNK):
                total += len(chunk)
                if total > _read.MAX_FILE_BYTES:
                    raise TranscriptError(
                        given,
                        None,
                        f"a stream longer than {_read.MAX_FILE_BYTES} bytes (the bound of one "
                        "transcript); write it to files and split it",
                    )
                out.write(chunk)
    except OSError as exc:
        raise TranscriptError(given, None, f"cannot read: {exc.strerror or exc}") from None
    return target


def _walk(
    given: str,
    modules: Sequence[tuple[str, ModuleType]],
    owners: Sequence[tuple[str, ModuleType]],
    out: Found,
) -> None:
    sources, skipped = out.sources, out.skipped
    kinds = [kind for kind, _ in modules]
    known = ", ".join(kinds)
    try:
        entries = sorted(Path(given).rglob("*"))
    except OSError as exc:
        raise TranscriptError(given, None, f"cannot list: {exc.strerror or exc}") from None
    if len(entries) > MAX_FILES:
        raise TranscriptError(given, None, f"more than {MAX_FILES} files")
    for file in entries:
        try:
            mode = file.stat().st_mode
        except OSError as exc:
            skipped.append(Skipped(str(file), f"cannot read: {exc.strerror or exc}"))
            continue
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            skipped.append(Skipped(str(file), f"{file_kind(mode)}: not read in a walked directory"))
            continue
        owned = _owned(file, owners)
        if owned is not None:
            out.add_folder(owned, file.stat().st_size, kinds)
            continue
        try:
            found = sniff(file, modules)
        except TranscriptError as exc:
            skipped.append(Skipped(str(file), exc.message))
            continue
        if found is not None:
            sources.append(Source(file, found, file.stat().st_size, str(file)))
        elif (held := verdicts.read(file)) is not None:
            out.verdicts.append((str(file), held))
        else:
            skipped.append(Skipped(str(file), f"not a transcript of a known kind ({known})"))


def discover(paths: Sequence[str], kind: str | None = None, streams: Path | None = None) -> Found:
    """Every transcript under ``paths`` (sorted within a directory) and what was skipped.

    ``streams``: a private directory to copy named pipes into (without one, a
    pipe is refused).
    """
    installed = available_kinds()
    if kind is not None and kind not in installed:
        raise TranscriptError(kind, None, "this kind's importer is not installed in this version")
    kinds = [kind] if kind is not None else installed
    modules = [(k, importer(k)) for k in kinds]
    owners = [(k, importer(k)) for k in installed]
    known = ", ".join(kinds)
    out = Found()
    for given in paths:
        owned = _owned(Path(given), owners)
        if owned is not None:
            out.add_folder(owned, 0, kinds)
            continue
        try:
            mode = os.stat(given).st_mode
        except OSError as exc:
            reason = "no such file or directory" if isinstance(exc, FileNotFoundError) else None
            raise TranscriptError(
                given, None, reason or f"cannot read: {exc.strerror or exc}"
            ) from None
        if stat.S_ISDIR(mode):
            _walk(given, modules, owners, out)
            continue
        if stat.S_ISFIFO(mode):
            if streams is None:
                raise TranscriptError(given, None, "a named pipe, and no place to copy it to")
            path = spool(given, streams)
        elif stat.S_ISREG(mode):
            path = Path(given)
        else:
            raise TranscriptError(
                given,
                None,
                f"{file_kind(mode)}, not a transcript file, directory or pipe: not read",
            )
        found = sniff(path, modules)
        if found is not None:
            out.sources.append(Source(path, found, path.stat().st_size, given, named=True))
        elif (held := verdicts.read(path)) is not None:
            out.verdicts.append((given, held))
        else:
            raise TranscriptError(given, 1, f"not a transcript of a known kind ({known})")
    return out


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
