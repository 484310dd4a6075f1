"""The operator's configuration of the hooks: the mode of an install that names none (the plugin).

One file, ``<home>/.config/tool-failure-guard/hooks.json``, ``<home>`` the home of
the **effective user** as the password database has it, never ``$HOME`` nor any
other variable: a project's settings can put variables into a hook's
environment, and no project may choose the guard's mode.  A project's files are
never read.  ``{"claude-code": {"mode": "enforce"}}``, written by
``tool-failure-guard hook configure claude-code --mode enforce``, which also
records where its executable is (``executable``, one line beside it), so that the
plugin's launcher finds it from a new shell.  Missing, unreadable or damaged, or
a file others can write: the default mode, ``shadow`` (it observes only).

Read on the hook's own path: ``pwd``, ``os`` and ``json`` only.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Final

#: The folder under the euid's home.
CONFIG_FOLDER: Final = ".config/tool-failure-guard"
CONFIG_NAME: Final = "hooks.json"
#: The file the plugin's launcher reads: the path of the executable, one line.
EXECUTABLE_NAME_FILE: Final = "executable"
#: Beside the home: the plugin's launcher said once that it found no executable.
MISSING_MARKER: Final = ".cache/tool-failure-guard/plugin-missing-executable"
#: The mode of a hook command without ``--mode`` when nothing is configured.
DEFAULT_MODE: Final = "shadow"
#: The most bytes of the config read.
MAX_CONFIG_BYTES: Final = 64 * 1024
_MODES: Final = ("off", "shadow", "warn", "enforce")


def operator_home() -> str | None:
    """The effective user's home from the password database (None: no entry)."""
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_dir or None
    except KeyError:
        return None


def config_folder() -> str | None:
    home = operator_home()
    return None if home is None else os.path.join(home, CONFIG_FOLDER)


def config_path() -> str | None:
    folder = config_folder()
    return None if folder is None else os.path.join(folder, CONFIG_NAME)


def read_config() -> dict[str, Any]:
    """The config object ({} when missing, unreadable, damaged, or writable by others)."""
    path = config_path()
    if path is None:
        return {}
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o022:
            return {}
        if info.st_uid not in (0, os.geteuid()):
            return {}
        data = os.read(fd, MAX_CONFIG_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        return {}
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def configured_mode(cli: str, config: dict[str, Any] | None = None) -> str:
    """The operator's mode for ``cli``'s hook (``shadow`` when none is configured)."""
    entry = (read_config() if config is None else config).get(cli)
    mode = entry.get("mode") if isinstance(entry, dict) else None
    return mode if isinstance(mode, str) and mode in _MODES else DEFAULT_MODE


def configure(cli: str, *, mode: str | None, executable: str | None) -> Path:
    """Set ``cli``'s mode (and record the executable); the config file written."""
    import tempfile
    from pathlib import Path

    if mode is not None and mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(_MODES)}; got {mode!r}")
    folder = config_folder()
    if folder is None:
        raise ValueError("the effective user has no home in the password database")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    config = read_config()
    if mode is not None:
        entry = config.get(cli)
        config[cli] = {**(entry if isinstance(entry, dict) else {}), "mode": mode}
    if executable is not None:
        config["executable"] = executable
    written = Path(folder) / CONFIG_NAME
    for path, text in (
        (written, json.dumps(config, indent=2) + "\n"),
        *([(Path(folder) / EXECUTABLE_NAME_FILE, executable + "\n")] if executable else []),
    ):
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            os.fchmod(stream.fileno(), 0o644)
            stream.write(text)
        os.replace(temp, path)
    home = operator_home()
    if executable is not None and home is not None:  # the plugin's "said once" starts over
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(home, MISSING_MARKER))
    return written


def config_where_text() -> str:
    """Where the operator's config is, for a message."""
    path = config_path()
    return "(the effective user has no home)" if path is None else path


#: Beside the config: the effective user's pseudonymous owner id for telemetry (random).
OWNER_ID_NAME: Final = "owner-id"


def owner_id() -> str | None:
    """The effective user's ``enduser.pseudo.id``: a random value made once and kept in the
    config folder (never derived from a login or a host name); None without a home."""
    folder = config_folder()
    if folder is None:
        return None
    path = os.path.join(folder, OWNER_ID_NAME)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            _make_owner_id(folder, path)
            continue
        except OSError:
            return None
        try:
            text = os.read(fd, 128).decode("ascii", "replace").strip()
        finally:
            os.close(fd)
        return text if text.startswith("hook-") and text[5:].isalnum() else None
    return None


def _make_owner_id(folder: str, path: str) -> None:
    """Create the id whole, or leave the one a concurrent hook created (link: no overwrite)."""
    import secrets
    import tempfile

    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=".owner-id.", dir=folder)
    try:
        os.write(fd, f"hook-{secrets.token_hex(8)}\n".encode("ascii"))
        os.close(fd)
        with contextlib.suppress(FileExistsError):
            os.link(temp, path)
    finally:
        os.unlink(temp)
