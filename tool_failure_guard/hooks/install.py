"""Installing the hook into a CLI's settings file: merged, idempotent, atomic, reversible.

``tool-failure-guard hook install <cli>`` writes the hook's entries into a
settings JSON (``{"hooks": {EVENT: [{"matcher": "*", "hooks": [{"type":
"command", "command": ..., "timeout": S}]}]}}``, the shape Claude Code, Qwen
Code and Gemini CLI share) and keeps everything else in the file as it was.
Its own entries are recognised by their command (``tool-failure-guard ... hook
<cli>``): installing again replaces them (a new mode, the same file otherwise),
``uninstall`` removes only them.  A file that is not a JSON object, or whose
``hooks`` is not one, is refused with the file untouched.  The new file is
written beside the old one and renamed over it (atomic), keeping its mode.

The command written holds the absolute path of the running
``tool-failure-guard`` and ``--mode MODE``: the mode on the command line is the
operator's, and no environment variable a project can set changes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

#: The most bytes of a settings file read (4 MiB).
MAX_SETTINGS_BYTES: Final = 4 * 1024 * 1024
#: The name of the console script the installed command runs.
EXECUTABLE_NAME: Final = "tool-failure-guard"
#: Seconds a CLI waits for the hook before it drops its answer (the guard takes milliseconds).
DEFAULT_TIMEOUT_S: Final = 30


class SettingsError(ValueError):
    """The settings file cannot be merged into (not a JSON object, or its hooks are not)."""


def own_command_pattern(cli: str) -> re.Pattern[str]:
    """What this project's command for ``cli`` looks like (``tool-failure-guard … hook <cli>``)."""
    return re.compile(rf"{re.escape(EXECUTABLE_NAME)}\S*['\"]?\s+hook\s+{re.escape(cli)}(\s|$)")


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
    mode: str,
    executable: str,
    state_dir: Path | None = None,
    telemetry: str | None = None,
) -> str:
    """The command a CLI runs: ``EXE hook CLI --mode MODE [--state-dir D] [--telemetry T]``."""
    argv = [executable, "hook", cli, "--mode", mode]
    if state_dir is not None:
        argv += ["--state-dir", str(state_dir)]
    if telemetry is not None:
        argv += ["--telemetry", telemetry]
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


def read_settings(path: Path) -> dict[str, Any]:
    """The settings object in ``path`` ({} when it does not exist), or a :class:`SettingsError`."""
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_SETTINGS_BYTES + 1)
    except FileNotFoundError:
        return {}
    if len(data) > MAX_SETTINGS_BYTES:
        raise SettingsError(f"{path} is larger than {MAX_SETTINGS_BYTES} bytes; left untouched")
    if not data.strip():
        return {}
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
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


def _without_own(groups: list[Any], own: Callable[[str], bool]) -> list[Any]:
    """``groups`` without this project's commands (a group left empty goes too)."""
    kept: list[Any] = []
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            handlers = [h for h in group["hooks"] if not _is_own(h, own)]
            if len(handlers) != len(group["hooks"]):
                if handlers:
                    kept.append({**group, "hooks": handlers})
                continue
        elif _is_own(group, own):
            continue
        kept.append(group)
    return kept


def _is_own(handler: Any, own: Callable[[str], bool]) -> bool:
    if not isinstance(handler, dict):
        return False
    return any(
        isinstance(handler.get(key), str) and own(handler[key]) for key in ("command", "bash")
    )


def merged(
    settings: Mapping[str, Any],
    entries: Mapping[str, list[dict[str, Any]]],
    own: Callable[[str], bool],
) -> dict[str, Any]:
    """``settings`` with this project's old entries replaced by ``entries``, all else kept."""
    result = removed(settings, own)
    hooks: dict[str, Any] = dict(result.get("hooks") or {})
    for event, groups in entries.items():
        hooks[event] = [*hooks.get(event, []), *groups]
    result["hooks"] = hooks
    return result


def removed(settings: Mapping[str, Any], own: Callable[[str], bool]) -> dict[str, Any]:
    """``settings`` without this project's entries (an event left empty is dropped)."""
    result = dict(settings)
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return result
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        left = _without_own(groups, own) if isinstance(groups, list) else groups
        if left != [] or groups == []:
            kept[event] = left
    if kept or "hooks" in settings:
        result["hooks"] = kept
    return result


def write_settings(path: Path, settings: Mapping[str, Any], *, default_mode: int = 0o644) -> None:
    """Write ``settings`` atomically (temp file beside it, then rename), keeping its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = default_mode
    text = json.dumps(settings, indent=2, ensure_ascii=False) + "\n"
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            os.fchmod(stream.fileno(), mode)
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def pinned(settings: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with ``values`` set, nested objects merged key by key (all else kept).

    What a CLI needs beside the entries for its hooks to run at that scope
    (Qwen Code: ``disableAllHooks: false``; Gemini CLI: ``hooksConfig.enabled: true``).
    """
    result = dict(settings)
    for key, value in values.items():
        inner = result.get(key)
        if isinstance(value, Mapping) and isinstance(inner, Mapping):
            result[key] = pinned(inner, value)
        elif isinstance(value, Mapping):
            result[key] = pinned({}, value)
        else:
            result[key] = value
    return result


def install(
    path: Path,
    entries: Mapping[str, list[dict[str, Any]]],
    cli: str,
    *,
    pin: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge ``entries`` (and ``pin``: :func:`pinned`) into the settings at ``path``
    (idempotent); the settings written."""
    pattern = own_command_pattern(cli)
    settings = merged(read_settings(path), entries, lambda c: pattern.search(c) is not None)
    if pin:
        settings = pinned(settings, pin)
    write_settings(path, settings)
    return settings


def uninstall(path: Path, cli: str) -> bool:
    """Remove this project's entries for ``cli`` from ``path``; False when there were none."""
    if not path.exists():
        return False
    pattern = own_command_pattern(cli)
    before = read_settings(path)
    after = removed(before, lambda c: pattern.search(c) is not None)
    if after == before:
        return False
    write_settings(path, after)
    return True
