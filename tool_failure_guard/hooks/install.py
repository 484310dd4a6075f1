"""Installing the hook into a CLI's settings file: merged, idempotent, atomic, undone exactly.

``tool-failure-guard hook install <cli>`` writes the hook's entries into a
settings JSON (``{"hooks": {EVENT: [{"matcher": "*", "hooks": [{"type":
"command", "command": ..., "timeout": S}]}]}}``, the shape Claude Code, Qwen
Code and Gemini CLI share) and keeps everything else in the file as it was.

- Its own entries are recognised **exactly**: a command that parses
  (:func:`parse_command`) as ``<dir>/tool-failure-guard hook <cli>`` followed by
  the hook's own options only.  A user's hook that merely mentions the guard (a
  ``notify-send`` text, an image name) is never touched.
- Beside the entries it sets only keys the file does not have (Qwen Code's
  ``disableAllHooks: false``, Gemini CLI's ``hooksConfig.enabled: true``: the
  CLI's ``PINNED_SETTINGS``); a key the user set is left as it is, with a warning
  when it keeps the hooks from running.
- What it changed is kept in the install's state folder
  (:mod:`~tool_failure_guard.hooks.install_record`), so :func:`uninstall` gives the
  file back byte for byte when nobody changed it since, and otherwise removes
  exactly the entries and keys it added (an emptied ``hooks`` object it added, a
  file it created).
- Writes go to a symbolic link's target, atomically, keeping mode, owner and
  group (:mod:`~tool_failure_guard.hooks.settings_file`).

The command written holds the absolute path of the running ``tool-failure-guard``,
``--scope SCOPE`` (the install's rank) and ``--mode MODE``: the mode on the command
line is the operator's, and no environment variable a project can set changes it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from tool_failure_guard.hooks.clis import HOOK_CLIS, HOOK_OPTIONS
from tool_failure_guard.hooks.install_record import (
    InstallRecord,
    digest,
    drop_record,
    load_record,
    save_record,
)
from tool_failure_guard.hooks.settings_file import (
    MAX_SETTINGS_BYTES,
    SettingsError,
    parse_settings,
    read_bytes,
    read_settings,
    remove_file,
    settings_text,
    target_of,
    write_bytes,
)
from tool_failure_guard.hooks.settings_merge import (
    dotted,
    drop_added,
    merged,
    pin_missing,
    removed,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "EXECUTABLE_NAME",
    "MAX_SETTINGS_BYTES",
    "Installed",
    "InstalledCommand",
    "SettingsError",
    "Uninstalled",
    "claude_style_entries",
    "hook_command",
    "install",
    "installed_commands",
    "parse_command",
    "read_settings",
    "running_executable",
    "uninstall",
]

#: The name of the console script the installed command runs.
EXECUTABLE_NAME: Final = "tool-failure-guard"
#: Seconds a CLI waits for the hook before it drops its answer (the guard takes milliseconds).
DEFAULT_TIMEOUT_S: Final = 30


@attrs.frozen
class InstalledCommand:
    """An installed command line read back: ``EXE hook CLI [--option VALUE]...``."""

    executable: str
    cli: str
    options: Mapping[str, str]
    text: str = ""  #: the command line as written

    @property
    def mode(self) -> str | None:
        return self.options.get("--mode")

    @property
    def scope(self) -> str | None:
        return self.options.get("--scope")

    @property
    def telemetry(self) -> str | None:
        return self.options.get("--telemetry")

    def state_dir(self) -> Path:
        """The state folder this command's hook uses (the installer's default when unnamed)."""
        named = self.options.get("--state-dir")
        if named:
            return Path(named)
        from tool_failure_guard.hooks.state import default_state_dir

        return default_state_dir(self.cli)


def parse_command(command: str) -> InstalledCommand | None:
    """``command`` read as one the installer writes, or None when it is anything else."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if len(argv) < 3 or os.path.basename(argv[0]) != EXECUTABLE_NAME:
        return None
    if argv[1] != "hook" or argv[2] not in HOOK_CLIS:
        return None
    options: dict[str, str] = {}
    rest = argv[3:]
    while rest:
        name, equals, value = rest.pop(0).partition("=")
        if name not in HOOK_OPTIONS or name in options or (not equals and not rest):
            return None
        options[name] = value if equals else rest.pop(0)
    return InstalledCommand(executable=argv[0], cli=argv[2], options=options, text=command)


def running_executable() -> str:
    """The absolute path of the ``tool-failure-guard`` that is running (or on PATH)."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == EXECUTABLE_NAME and os.path.isfile(argv0):
        return os.path.abspath(argv0)
    beside = Path(sys.executable).parent / EXECUTABLE_NAME
    if beside.is_file():
        return str(beside.absolute())
    found = shutil.which(EXECUTABLE_NAME)
    if found is None:
        raise SettingsError(f"cannot find the {EXECUTABLE_NAME!r} executable to install")
    return os.path.abspath(found)


def hook_command(
    cli: str,
    *,
    mode: str | None,
    executable: str,
    scope: str | None = None,
    state_dir: Path | None = None,
    telemetry: str | None = None,
    environment: str | None = None,
) -> str:
    """``EXE hook CLI [--scope S] [--mode M] [--state-dir D] [--telemetry T] [--environment E]``."""
    argv = [executable, "hook", cli]
    for name, value in (
        ("--scope", scope),
        ("--mode", mode),
        ("--state-dir", None if state_dir is None else str(state_dir)),
        ("--telemetry", telemetry),
        ("--environment", environment),
    ):
        if value is not None:
            argv += [name, value]
    return shlex.join(argv)


def claude_style_entries(
    command: str, events: Sequence[str], tool_events: Sequence[str], timeout: int
) -> dict[str, list[dict[str, Any]]]:
    """One group per event: ``matcher: "*"`` for the tool events, the command hook."""
    entries: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        group: dict[str, Any] = {"matcher": "*"} if event in tool_events else {}
        group["hooks"] = [{"type": "command", "command": command, "timeout": timeout}]
        entries[event] = [group]
    return entries


def _handlers(settings: Mapping[str, Any]) -> Iterator[Any]:
    hooks = settings.get("hooks")
    for groups in (hooks or {}).values() if isinstance(hooks, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                yield from group["hooks"]
            else:
                yield group


def installed_commands(settings: Mapping[str, Any], cli: str) -> list[InstalledCommand]:
    """This project's commands for ``cli`` in ``settings``, in the file's order."""
    found = []
    for handler in _handlers(settings):
        command = handler.get("command") if isinstance(handler, dict) else None
        parsed = parse_command(command) if isinstance(command, str) else None
        if parsed is not None and parsed.cli == cli:
            found.append(parsed)
    return found


def _owned_by(cli: str) -> Callable[[Any], bool]:
    def own(handler: Any) -> bool:
        command = handler.get("command") if isinstance(handler, dict) else None
        parsed = parse_command(command) if isinstance(command, str) else None
        return parsed is not None and parsed.cli == cli

    return own


@attrs.frozen
class Installed:
    """What :func:`install` did: the file written (a link's target), warnings to show."""

    target: Path
    warnings: tuple[str, ...] = ()


def install(
    path: Path,
    entries: Mapping[str, list[dict[str, Any]]],
    cli: str,
    *,
    pin: Mapping[str, Any] | None = None,
) -> Installed:
    """Merge ``entries`` (and ``pin``'s missing keys) into the settings at ``path``
    (idempotent), and record what changed in the new command's state folder."""
    target = target_of(path)
    data = read_bytes(target)
    settings = parse_settings(data, path)
    own = _owned_by(cli)
    old_dirs = _unique(command.state_dir() for command in installed_commands(settings, cli))
    previous = next(
        (r for r in (load_record(d, cli, target) for d in old_dirs) if r is not None), None
    )
    result = merged(settings, entries, own)
    added = list(previous.added) if previous is not None else []
    warnings = []
    if pin:
        more, kept = pin_missing(result, pin)
        added += [item for item in more if item[0] not in {p for p, _ in added}]
        for key_path, found, wanted in kept:
            warnings.append(
                f"{path} sets {dotted(key_path)} to {_json(found)}; left as it is, but the "
                f"hooks at this scope run only with {_json(wanted)} there"
            )
    text = settings_text(result).encode("utf-8")
    created = write_bytes(target, text) if text != data else []
    if previous is not None:
        before, hooks_added = previous.before, previous.hooks_added
        folders = previous.created_folders
        if data is None or digest(data) != previous.written:
            # changed by someone since the last install: the old bytes would undo that
            left = without_install(settings, cli, previous)
            before = None if left is None else settings_text(left).encode("utf-8")
    else:
        # entries from an install that kept no record: "before" is the file without them
        before = data if not old_dirs else settings_text(removed(settings, own)).encode()
        hooks_added, folders = "hooks" not in settings, tuple(str(f) for f in created)
    record = InstallRecord(
        cli=cli,
        settings=str(target),
        before=before,
        written=digest(text),
        added=tuple(added),
        hooks_added=hooks_added,
        created_folders=folders,
    )
    new_dirs = _unique(command.state_dir() for command in installed_commands(result, cli))
    for directory in new_dirs:
        save_record(directory, record)
    for directory in old_dirs:
        if directory not in new_dirs:
            drop_record(directory, cli, target)
    return Installed(target=target, warnings=tuple(warnings))


@attrs.frozen
class Uninstalled:
    """What :func:`uninstall` did: whether it removed anything, the commands it removed."""

    changed: bool
    commands: tuple[InstalledCommand, ...] = ()
    restored: bool = False  #: the file given back byte for byte (or removed: it created it)

    def state_dirs(self) -> list[Path]:
        return _unique(command.state_dir() for command in self.commands)


def uninstall(path: Path, cli: str) -> Uninstalled:
    """Remove this project's entries for ``cli`` from ``path``, and the keys it added."""
    target = target_of(path)
    data = read_bytes(target)
    if data is None:
        return Uninstalled(changed=False)
    settings = parse_settings(data, path)
    commands = tuple(installed_commands(settings, cli))
    if not commands:
        return Uninstalled(changed=False)
    done = Uninstalled(changed=True, commands=commands)
    dirs = done.state_dirs()
    record = next((r for r in (load_record(d, cli, target) for d in dirs) if r is not None), None)
    restored = record is not None and digest(data) == record.written
    if record is not None and restored:
        if record.before is None:
            remove_file(target, list(record.created_folders))
        else:
            write_bytes(target, record.before)
    else:
        result = without_install(settings, cli, record)
        if result is None:
            remove_file(target, list(record.created_folders) if record is not None else [])
        else:
            write_bytes(target, settings_text(result).encode("utf-8"))
    for directory in dirs:
        drop_record(directory, cli, target)
    return attrs.evolve(done, restored=restored)


def without_install(
    settings: Mapping[str, Any], cli: str, record: InstallRecord | None
) -> dict[str, Any] | None:
    """``settings`` without what the install added: its entries, and with its ``record``
    the keys it set (still as it set them), an emptied ``hooks`` object it added; None when
    nothing is left of a file it created."""
    result = removed(settings, _owned_by(cli))
    if record is None:
        return result
    for key_path, value in record.added:
        drop_added(result, key_path, value)
    if record.hooks_added and result.get("hooks") == {}:
        del result["hooks"]
    return None if record.before is None and not result else result


def _unique(paths: Iterator[Path] | Sequence[Path]) -> list[Path]:
    seen: list[Path] = []
    for path in paths:
        if path not in seen:
            seen.append(path)
    return seen


def _json(value: Any) -> str:
    import json

    return json.dumps(value)
