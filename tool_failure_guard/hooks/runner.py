"""Running one coding-CLI hook event: bounded payload in, locked private state, answer out.

A CLI spawns the hook once per event, concurrently for parallel calls, so the
prompt's state lives in one file per (CLI, session) under the operator's
private state folder (``$XDG_STATE_HOME/tool-failure-guard/hooks/<cli>/``,
0700; files 0600; never in the project), updated under an exclusive
``flock``.  The session id is hashed into the file name, so a payload cannot
name a path.  A state file that does not parse is a reset (the streak starts
again), never a crash; any other error answers nothing and exits 0 (fail
open), saying why on stderr: a hook that breaks must not break the agent.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Final, Protocol

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.private_files import PRIVATE_FILE_MODE, private_directory

from .batches import PromptState

#: The largest payload read from stdin (bytes); a larger one is refused (fail open).
MAX_PAYLOAD: Final = 4 * 1024 * 1024
#: The largest state file read (bytes); a larger one is a reset.
MAX_STATE: Final = 2 * 1024 * 1024

Answer = dict[str, Any]
Handler = Callable[
    [GuardMode, dict[str, Any], PromptState | None], tuple[PromptState | None, Answer | None]
]


class HookModule(Protocol):
    CLI: str

    def handle(
        self, mode: GuardMode, payload: dict[str, Any], state: PromptState | None
    ) -> tuple[PromptState | None, Answer | None]: ...


def state_folder(cli: str, environ: Mapping[str, str]) -> Path:
    """The operator's private folder for ``cli``'s hook state."""
    base = environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "tool-failure-guard" / "hooks" / cli


def read_payload(stream: IO[bytes]) -> dict[str, Any]:
    raw = stream.read(MAX_PAYLOAD + 1)
    if len(raw) > MAX_PAYLOAD:
        raise ValueError(f"the hook payload is larger than {MAX_PAYLOAD} bytes")
    payload = json.loads(raw.decode("utf-8"))
    if not isinstance(payload, dict):
        raise ValueError("the hook payload is not a JSON object")
    return payload


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def load_state(path: Path, warn: Callable[[str], None]) -> PromptState | None:
    """The stored state, or None (none yet; or damaged: then a reset, said on stderr)."""
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_STATE + 1)
    except FileNotFoundError:
        return None
    try:
        if len(raw) > MAX_STATE:
            raise ValueError(f"larger than {MAX_STATE} bytes")
        return PromptState.from_json(json.loads(raw.decode("utf-8")))
    except ValueError as exc:  # json and unicode errors are ValueErrors too
        warn(f"state file {path.name} is damaged ({exc}); the streak starts again")
        return None


def save_state(path: Path, state: PromptState | None) -> None:
    if state is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as stream:
        json.dump(state.to_json(), stream, separators=(",", ":"))
    os.replace(temporary, path)


def run_hook(
    module: HookModule,
    mode: GuardMode,
    stdin: IO[bytes],
    stdout: IO[str],
    stderr: IO[str],
    environ: Mapping[str, str],
) -> int:
    """One event, end to end; always exits 0 (an error answers nothing: fail open)."""

    def warn(message: str) -> None:
        stderr.write(f"tool-failure-guard hook {module.CLI}: {message}\n")

    try:
        payload = read_payload(stdin)
        session = payload.get("session_id")
        if not isinstance(session, str) or not session:
            raise ValueError("the hook payload has no session_id")
        folder = state_folder(module.CLI, environ)
        private_directory(folder.parent)
        private_directory(folder)
        name = hashlib.sha256(session.encode("utf-8")).hexdigest()[:40]
        path = folder / f"{name}.json"
        with _locked(folder / f"{name}.lock"):
            state = load_state(path, warn)
            new, answer = module.handle(mode, payload, state)
            if new is not state:
                save_state(path, new)
    except Exception as exc:  # fail open: the agent goes on as if no hook were installed
        warn(f"{type(exc).__name__}: {exc}; answering nothing (fail open)")
        return 0
    if answer is not None:
        stdout.write(json.dumps(answer))
        stdout.flush()
    return 0
