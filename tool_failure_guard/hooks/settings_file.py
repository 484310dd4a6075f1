"""A CLI's settings file, read bounded and written whole: a symbolic link's target, its owner kept.

Users keep settings under dotfile managers (``~/.claude/settings.json`` a link into a
repository) and administrators install as root into a user's file.  So a write
goes to the file the link points at (the new text written beside the *target* and
renamed over it: atomic, the link left as it is), and the new file gets the old
one's permission bits, owner and group (root writing a user's 0600 file leaves it
the user's).  A file that is not UTF-8 JSON holding an object, or whose ``hooks``
is not one, is refused with the file untouched.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Final

#: The most bytes of a settings file read (4 MiB).
MAX_SETTINGS_BYTES: Final = 4 * 1024 * 1024


class SettingsError(ValueError):
    """The settings file cannot be merged into (not a JSON object, or its hooks are not)."""


def target_of(path: Path) -> Path:
    """The file a write to ``path`` changes: the end of its chain of links (or ``path``)."""
    return Path(os.path.realpath(path))


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes (None when it does not exist), bounded by :data:`MAX_SETTINGS_BYTES`."""
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_SETTINGS_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(data) > MAX_SETTINGS_BYTES:
        raise SettingsError(f"{path} is larger than {MAX_SETTINGS_BYTES} bytes; left untouched")
    return data


def parse_settings(data: bytes | None, path: Path) -> dict[str, Any]:
    """The settings object in ``data`` ({} for no file or blank), or a :class:`SettingsError`."""
    if data is None or not data.strip():
        return {}
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise SettingsError(f"{path} is not JSON ({error}); left untouched") from None
    if not isinstance(value, dict):
        raise SettingsError(
            f"{path} holds a JSON {type(value).__name__}, not an object; left untouched"
        )
    hooks = value.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise SettingsError(f"{path}: 'hooks' is not a JSON object; left untouched")
    for event, groups in (hooks or {}).items():
        if not isinstance(groups, list):
            raise SettingsError(f"{path}: hooks.{event} is not a list; left untouched")
    return value


def read_settings(path: Path) -> dict[str, Any]:
    """The settings object in ``path`` ({} when it does not exist), or a :class:`SettingsError`."""
    return parse_settings(read_bytes(path), path)


def settings_text(settings: Any) -> str:
    """How the installer writes a settings object (two-space JSON, a final newline)."""
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n"


def write_bytes(path: Path, data: bytes, *, default_mode: int = 0o644) -> list[Path]:
    """Write ``data`` to ``path``'s target atomically, keeping its mode, owner and group.

    Returns the folders created for a new file (outermost first), so that removing
    the file again can remove them too.
    """
    target = target_of(path)
    created = _make_parents(target.parent)
    try:
        info: os.stat_result | None = target.stat()
    except FileNotFoundError:
        info = None
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as stream:
            if info is not None:
                if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
                    os.fchown(stream.fileno(), info.st_uid, info.st_gid)
                os.fchmod(stream.fileno(), stat.S_IMODE(info.st_mode))
            else:
                os.fchmod(stream.fileno(), default_mode)
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return created


def remove_file(path: Path, created_folders: list[str]) -> None:
    """Remove ``path``'s target, then each of ``created_folders`` left empty (innermost first)."""
    target_of(path).unlink(missing_ok=True)
    for folder in reversed(created_folders):
        with contextlib.suppress(OSError):  # not empty, or gone: left as it is
            os.rmdir(folder)


def _make_parents(folder: Path) -> list[Path]:
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        each.mkdir(exist_ok=True)
    return list(reversed(missing))
