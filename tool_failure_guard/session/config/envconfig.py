"""Environment configuration: env files for the agent's settings, and refused sources.

The agent reads settings from, in order of precedence (the first source that
sets a variable wins, like dotenv):

1. the exported process environment;
2. ``~/.qwen/.env``, then ``~/.env`` (user-level);
3. the ``env`` map of ``~/.qwen/settings.json`` (user-level; refused for
   operator-only variables, like every settings ``env`` map);
4. ``<project>/.qwen/.env``, then ``<project>/.env``, then the ``env`` map of
   ``<project>/.qwen/settings.json`` (project-controlled).

A user-level source outranks a project source for every variable: a cloned
project cannot override what the user set.

Deployment policy and the user's credentials cannot be set by the project.
The variables :func:`operator_only` accepts are honoured only from the
exported process environment and the home-level env files, and refused --
with one warning naming the variable and the file -- from every
project-controlled source and every settings ``env`` map:

* operator limits (:data:`OPERATOR_ONLY_VARIABLES`): the guard mode
  (``QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD``), the per-prompt tool-call
  cap, the shell and MCP timeouts.  A project ``.env`` saying ``enforce``
  therefore leaves the mode at the default ``shadow``, and one saying
  ``TOOL_FAILURE_GUARD_MAX_TOOL_CALLS=1000000`` leaves the cap at 100;
* model endpoints and credentials: ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``
  (:data:`CREDENTIAL_VARIABLES`) and, so that a later provider is covered
  without a change here, every variable whose name ends like a provider's
  URL, key, token or header setting (:data:`CREDENTIAL_SUFFIXES`:
  ``ANTHROPIC_BASE_URL``, ``GEMINI_API_KEY``, ``OPENAI_CUSTOM_HEADERS``...).
  A project ``.env`` pointing ``OPENAI_BASE_URL`` at its own server would
  otherwise receive the user's key and the conversation.

A later operator limit joins by being added to :data:`OPERATOR_ONLY_VARIABLES`.
Each file is read only if it is a regular file of at most 1 MiB, in a worker
thread (:mod:`~tool_failure_guard.session.config.project_files`); any other file
(a named pipe, ``/dev/zero``, a directory, a huge file) is ignored with one
warning naming it and why (:attr:`EnvConfig.unread`).
Credentials embedded in a URL (``http://user:secret@host``) are shown only as
:func:`~tool_failure_guard.session.config.redact.redact_url` gives them, in every error and log
line.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from tool_failure_guard.guard import GUARD_MODE_ENV_VAR, GuardMode, resolve_mode
from tool_failure_guard.session.config.project_files import (
    SettingsFileRefused,
    read_settings_file,
    read_settings_files,
)

_log = logging.getLogger("session.envconfig")

#: The per-prompt tool-call cap (protection 4), a whole number.
TOOL_CALL_CAP_ENV_VAR = "TOOL_FAILURE_GUARD_MAX_TOOL_CALLS"
#: The shell tool's timeout in seconds.
SHELL_TIMEOUT_ENV_VAR = "TOOL_FAILURE_GUARD_SHELL_TIMEOUT"
#: Seconds an MCP tool call may run.
MCP_TIMEOUT_ENV_VAR = "TOOL_FAILURE_GUARD_MCP_TIMEOUT"
#: The host's input boundary as the operator declares it (``drain`` or ``prompt-only``).
INPUT_BOUNDARY_ENV_VAR = "TOOL_FAILURE_GUARD_INPUT_BOUNDARY"

#: Operator limits: never from a project-controlled source or a settings ``env`` map.
#: Every later operator-only setting (model limits...) is added here.
OPERATOR_ONLY_VARIABLES = frozenset(
    {GUARD_MODE_ENV_VAR, TOOL_CALL_CAP_ENV_VAR, SHELL_TIMEOUT_ENV_VAR, MCP_TIMEOUT_ENV_VAR}
) | {INPUT_BOUNDARY_ENV_VAR}
#: The model endpoint and key the agent uses today.
CREDENTIAL_VARIABLES = frozenset({"OPENAI_BASE_URL", "OPENAI_API_KEY"})
#: Name endings of a provider's endpoint, key, token or header settings (any provider).
CREDENTIAL_SUFFIXES = (
    "_BASE_URL",
    "_API_BASE",
    "_API_URL",
    "_ENDPOINT",
    "_API_KEY",
    "_KEY",
    "_TOKEN",
    "_SECRET",
    "_HEADERS",
    "_HEADER",
)


def operator_only(name: str) -> bool:
    """Whether ``name`` may be set only by the operator (never by a project source)."""
    upper = name.upper()
    return (
        name in OPERATOR_ONLY_VARIABLES
        or upper in CREDENTIAL_VARIABLES
        or upper.endswith(CREDENTIAL_SUFFIXES)
    )


#: ``KEY=VALUE``; the value is stripped in Python (a lazy ``(.*?)\s*$`` backtracks
#: quadratically on a long run of blanks inside a value).
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$")


@attrs.frozen
class EnvSource:
    name: str  #: e.g. "project .env"
    path: Path | None  #: None for the process environment
    operator_trusted: bool


@attrs.frozen
class Refusal:
    variable: str
    source: str  #: the source's name and path


@attrs.frozen
class EnvConfig:
    """The merged settings of one session, and what was refused."""

    values: Mapping[str, str] = attrs.field(eq=False, hash=False)
    origins: Mapping[str, str] = attrs.field(eq=False, hash=False)
    refused: tuple[Refusal, ...] = ()
    #: Files that were not read (a pipe, a device, too large...), each naming its file.
    unread: tuple[SettingsFileRefused, ...] = attrs.field(default=(), eq=False)

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.values.get(name, default)

    def guard_mode(self) -> GuardMode:
        """The mode, via the core ``resolve_mode`` (missing or invalid: shadow)."""
        return resolve_mode(self.values.get(GUARD_MODE_ENV_VAR))


def parse_env_file(text: str, where: str) -> dict[str, str]:
    """Parse ``KEY=VALUE`` lines (``export``, quotes and ``#`` comments allowed)."""
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            _log.warning("%s:%d: ignoring a line that is not KEY=VALUE", where, number)
            continue
        key, value = match.group(1), match.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        else:
            value = value.split(" #", 1)[0].strip()
        values[key] = value
    return values


def _settings_env(path: Path, raw: bytes) -> dict[str, str]:
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested too deeply
        _log.warning("%s: ignoring an unreadable settings file: %s", path, type(exc).__name__)
        return {}
    env = data.get("env") if isinstance(data, dict) else None
    if not isinstance(env, dict):
        return {}
    found: dict[str, str] = {}
    for key, value in env.items():
        try:
            found[str(key)] = str(value)
        except RecursionError:
            _log.warning("%s: ignoring the value of %s (not a plain value)", path, key)
    return found


def _env_file(path: Path, raw: bytes) -> dict[str, str]:
    try:
        return parse_env_file(raw.decode("utf-8"), str(path))
    except UnicodeDecodeError as exc:
        _log.warning("%s: ignoring an unreadable env file: %s", path, exc.reason)
        return {}


def _parse_source(source: EnvSource, raw: bytes) -> dict[str, str]:
    assert source.path is not None
    if source.path.name == "settings.json":
        return _settings_env(source.path, raw)
    return _env_file(source.path, raw)


def env_sources(project: Path, home: Path) -> list[EnvSource]:
    """The file sources, in precedence order, after the process environment."""
    return [
        EnvSource("home .qwen/.env", home / ".qwen" / ".env", True),
        EnvSource("home .env", home / ".env", True),
        EnvSource("user settings env", home / ".qwen" / "settings.json", False),
        EnvSource("project .qwen/.env", project / ".qwen" / ".env", False),
        EnvSource("project .env", project / ".env", False),
        EnvSource("project settings env", project / ".qwen" / "settings.json", False),
    ]


def load_env(
    project: Path,
    *,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> EnvConfig:
    """Merge the process environment and the env files for a session in ``project``.

    Reads the files here (blocking): the agent uses :func:`load_env_off_loop`.
    """
    home = Path.home() if home is None else home
    sources = env_sources(project, home)
    contents: list[bytes | SettingsFileRefused | None] = []
    for source in sources:
        assert source.path is not None
        try:
            contents.append(read_settings_file(source.path))
        except SettingsFileRefused as exc:
            contents.append(exc)
    return merge_env(sources, contents, environ)


async def load_env_off_loop(
    project: Path,
    *,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> EnvConfig:
    """:func:`load_env` with every file read in a worker thread, each read bounded in time."""
    home = Path.home() if home is None else home
    sources = env_sources(project, home)
    contents = await read_settings_files([source.path for source in sources if source.path])
    return merge_env(sources, contents, environ)


def merge_env(
    sources: Sequence[EnvSource],
    contents: Sequence[bytes | SettingsFileRefused | None],
    environ: Mapping[str, str] | None = None,
) -> EnvConfig:
    """The merged settings from what each source's file held (or why it was not read)."""
    environ = os.environ if environ is None else environ
    values = dict(environ)
    origins = dict.fromkeys(environ, "process environment")
    refused: list[Refusal] = []
    unread: list[SettingsFileRefused] = []
    for source, raw in zip(sources, contents, strict=True):
        if isinstance(raw, SettingsFileRefused):
            unread.append(raw)
            _log.warning("%s: ignored: %s", source.name, raw)
            continue
        if raw is None:
            continue
        for key, value in _parse_source(source, raw).items():
            if operator_only(key) and not source.operator_trusted:
                refusal = Refusal(key, f"{source.name} ({source.path})")
                refused.append(refusal)
                what = (
                    "deployment policy (an operator limit)"
                    if key in OPERATOR_ONLY_VARIABLES
                    else "a model endpoint or credential"
                )
                _log.warning(
                    "%s: %s is %s and may not be set by this source; ignored",
                    refusal.source,
                    key,
                    what,
                )
                continue
            if key not in values:
                values[key] = value
                origins[key] = f"{source.name} ({source.path})"
    return EnvConfig(values=values, origins=origins, refused=tuple(refused), unread=tuple(unread))
