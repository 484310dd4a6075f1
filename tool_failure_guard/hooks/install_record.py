"""What an install changed in a settings file, kept so that uninstall undoes exactly that.

An install writes beside its state (in the install's private state folder)
``install-<digest>.record``: the settings file's bytes before the first install
(none: the file did not exist), a digest of what it wrote last, the keys it added
beside its entries (Qwen Code's ``disableAllHooks``, Gemini CLI's
``hooksConfig.enabled``, each only where the file had no such key), whether it
added the ``hooks`` object, and the folders it created for a new file.
Uninstall then gives the file back byte for byte when nobody changed it since
(its digest still the one written), else removes exactly those entries and keys.
The name does not end in ``.json``: it is never taken for a session's state.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Final

import attrs

from tool_failure_guard.private_files import PRIVATE_FILE_MODE, private_directory

#: The record format written (a record of another version is not used).
RECORD_VERSION: Final = 1
#: The most bytes of a record read (the settings' bytes, base64, and a little).
MAX_RECORD_BYTES: Final = 6 * 1024 * 1024


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@attrs.frozen
class InstallRecord:
    """One install of ``cli`` into the settings file ``settings`` (its target's path)."""

    cli: str
    settings: str
    before: bytes | None
    written: str
    #: (key path, value) pairs the install set where the file had no such key.
    added: tuple[tuple[tuple[str, ...], Any], ...] = ()
    hooks_added: bool = False
    created_folders: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "version": RECORD_VERSION,
            "cli": self.cli,
            "settings": self.settings,
            "before": None if self.before is None else base64.b64encode(self.before).decode(),
            "written": self.written,
            "added": [[list(path), value] for path, value in self.added],
            "hooks_added": self.hooks_added,
            "created_folders": list(self.created_folders),
        }

    @classmethod
    def from_json(cls, value: Any) -> InstallRecord | None:
        """The record in ``value``; None for anything else (another version, damaged)."""
        try:
            if not isinstance(value, dict) or value.get("version") != RECORD_VERSION:
                return None
            before = value["before"]
            added = tuple(
                (tuple(str(key) for key in path), item)
                for path, item in value["added"]
                if isinstance(path, list) and path
            )
            return cls(
                cli=str(value["cli"]),
                settings=str(value["settings"]),
                before=None if before is None else base64.b64decode(before, validate=True),
                written=str(value["written"]),
                added=added,
                hooks_added=bool(value["hooks_added"]),
                created_folders=tuple(str(f) for f in value["created_folders"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


def record_path(state_dir: Path, cli: str, settings: Path) -> Path:
    """Where the record of ``cli`` installed into ``settings`` lives in ``state_dir``."""
    name = digest(f"{cli}\0{settings}".encode("utf-8", "surrogateescape"))[:24]
    return state_dir / f"install-{name}.record"


def load_record(state_dir: Path, cli: str, settings: Path) -> InstallRecord | None:
    """The record there, or None (none, unreadable, damaged, or of another file)."""
    path = record_path(state_dir, cli, settings)
    try:
        with open(path, "rb", opener=_no_follow) as stream:
            data = stream.read(MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_RECORD_BYTES:
        return None
    try:
        record = InstallRecord.from_json(json.loads(data))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if record is None or record.cli != cli or record.settings != str(settings):
        return None
    return record


def state_folder(state_dir: Path) -> None:
    """Create or check the state folder as the hook does (``hooks.state_folder`` where it
    exists: 0700, marked as the guard's, a folder holding others' files refused untouched),
    so the record never makes the hook take the folder for someone else's."""
    import importlib

    try:
        folders: Any = importlib.import_module("tool_failure_guard.hooks.state_folder")
    except ImportError:
        folders = None
    if folders is not None:
        folders.ensure_state_folder(state_dir)
    else:
        private_directory(state_dir)


def save_record(state_dir: Path, record: InstallRecord) -> Path:
    """Write ``record`` (0600, atomic) into ``state_dir`` (created 0700 when missing)."""
    state_folder(state_dir)
    path = record_path(state_dir, record.cli, Path(record.settings))
    fd, temp = tempfile.mkstemp(prefix=".install-", suffix=".tmp", dir=state_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            os.fchmod(stream.fileno(), PRIVATE_FILE_MODE)
            json.dump(record.to_json(), stream)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return path


def drop_record(state_dir: Path, cli: str, settings: Path) -> None:
    with contextlib.suppress(OSError):
        record_path(state_dir, cli, settings).unlink()


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)
