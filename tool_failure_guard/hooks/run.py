"""The fail-open runner: one hook process, one event, the session's state under its lock.

``tool-failure-guard hook <cli>`` reads one payload, lets the CLI's module say
what the event means against the session's :class:`~tool_failure_guard.hooks.prompt.PromptSession`
(loaded from and written back to its state file under an exclusive lock),
reports telemetry, and writes the answer.  The mode comes from the command line
only (the installer writes it there): a project's settings can put variables
into a hook's environment, so no environment variable is read for it.

Fail open: whatever goes wrong inside (a bad payload, an unusable state folder,
a bug), the hook writes nothing on stdout, exits 0 and names the reason in one
line on stderr, so the CLI goes on exactly as without the guard.  ``off`` reads
the payload and answers nothing, touching no state.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from tool_failure_guard.hooks.clis import HOOK_CLIS
from tool_failure_guard.hooks.payload import read_payload, text_field, write_answer
from tool_failure_guard.hooks.prompt import PromptSession, StateDamaged
from tool_failure_guard.hooks.state import StateStore, default_state_dir

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, Final

    from tool_failure_guard.hooks.events import Handled

#: The key of the prompt's state inside a session's state file.
_PROMPT_KEY: Final = "prompt"
_STARTED_KEY: Final = "started"
_STARTED_PROMPT_KEY: Final = "started_prompt"
#: The key of the last requests handled, each [request id, answer] (see :func:`run_hook`).
_REQUESTS_KEY: Final = "requests"
#: How many handled requests a session's state remembers.
MAX_REMEMBERED_REQUESTS: Final = 16


def cli_module(cli: str) -> Any:
    """The module of ``cli`` (a :class:`ValueError` naming the known ones otherwise)."""
    name = HOOK_CLIS.get(cli)
    if name is None:
        raise ValueError(f"unknown CLI {cli!r}; known: {', '.join(sorted(HOOK_CLIS))}")
    return importlib.import_module(name)


#: The guard modes a hook takes (``GuardMode``'s values; the hook's path loads no guard).
MODES: Final = ("off", "shadow", "warn", "enforce")


class HookOptions:
    """What the installed command line says: the mode, the state folder, the telemetry."""

    __slots__ = ("cli", "mode", "state_dir", "telemetry")

    def __init__(
        self,
        *,
        cli: str,
        mode: str = "shadow",
        state_dir: Path | None = None,
        telemetry: str | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        self.cli = cli
        self.mode = str(mode)
        self.state_dir = state_dir
        self.telemetry = telemetry  #: a ``--telemetry`` spec (``file:PATH``), or None

    def to_header(self) -> dict[str, str | None]:
        """Every field, as the client's header to the warm worker carries it (JSON text)."""
        return {
            name: None if value is None else str(value)
            for name in self.__slots__
            for value in (getattr(self, name),)
        }

    @classmethod
    def from_header(cls, header: Mapping[str, Any]) -> HookOptions:
        """The options a header names (:meth:`to_header`); a ValueError for anything else."""
        unknown = sorted(set(header) - set(cls.__slots__))
        if unknown or not all(v is None or isinstance(v, str) for v in header.values()):
            raise ValueError(f"not hook options: unknown {unknown} or a value not text")
        values = dict(header)
        if values.get("state_dir") is not None:
            values["state_dir"] = Path(values["state_dir"])
        return cls(**values)


def _say(cli: str, message: str, stderr: IO[str]) -> None:
    print(f"tool-failure-guard hook {cli}: {message}", file=stderr)


def run_hook(
    options: HookOptions,
    stdin: IO[bytes],
    stdout: IO[str],
    stderr: IO[str],
    *,
    clock: Callable[[], float] = time.time,
    request: str | None = None,
) -> int:
    """Handle one event; always exit 0 (fail open), the answer on ``stdout`` or nothing.

    ``request`` names the event when a worker may also be handling it (the client
    gave up waiting and handles it here): the session's state remembers the
    last :data:`MAX_REMEMBERED_REQUESTS` requests and their answers, so the second
    of the two to take the state's lock answers the first's answer and changes
    nothing (an event is never applied twice).
    """
    cli = options.cli
    try:
        answer = _handle(options, stdin, stderr, clock, request)
    except Exception as error:  # fail open: the CLI goes on as without the guard
        reason = str(error).splitlines()[0] if str(error) else ""
        _say(cli, f"failing open ({type(error).__name__}: {reason[:300]})", stderr)
        return 0
    try:
        write_answer(answer, stdout)
    except Exception as error:  # e.g. the CLI closed the pipe
        _say(cli, f"could not write the answer ({type(error).__name__})", stderr)
    return 0


def _handle(
    options: HookOptions,
    stdin: IO[bytes],
    stderr: IO[str],
    clock: Callable[[], float],
    request: str | None,
) -> dict[str, Any] | None:
    payload = read_payload(stdin)
    if options.mode == "off":
        return None
    module = cli_module(options.cli)
    handled: Handled
    session_id = text_field(payload, "session_id")
    directory = options.state_dir or default_state_dir(options.cli)
    store = StateStore(directory, warn=lambda message: _say(options.cli, message, stderr))
    with store.session(session_id) as state:
        done = state.get(_REQUESTS_KEY)
        done = [item for item in done if _is_request(item)] if isinstance(done, list) else []
        for item in done:
            if request is not None and item[0] == request:
                return item[1]  # type: ignore[no-any-return]
        try:
            session = PromptSession.from_state(options.mode, state.get(_PROMPT_KEY) or {})
        except StateDamaged as damaged:
            _say(options.cli, f"state damaged ({damaged}); the streak starts over", stderr)
            session = PromptSession(options.mode)
        handled = module.handle(payload, session)
        if state.get(_STARTED_PROMPT_KEY) != session.prompt_id:
            # a new prompt: when it started (its wall time, for telemetry)
            state[_STARTED_PROMPT_KEY] = session.prompt_id
            state[_STARTED_KEY] = clock()
        state[_PROMPT_KEY] = session.to_state()
        if options.telemetry is not None and (handled.settled or handled.prompt_ended):
            from tool_failure_guard.hooks.report import report_event

            started = state.get(_STARTED_KEY)
            report_event(
                options.telemetry,
                route=module.ROUTE,
                session=session,
                handled=handled,
                wall_time_s=max(0.0, clock() - started) if isinstance(started, float) else 0.0,
            )
        if request is not None:
            keep = done[len(done) - MAX_REMEMBERED_REQUESTS + 1 :]
            state[_REQUESTS_KEY] = [*keep, [request, handled.answer]]
    return handled.answer


def _is_request(item: Any) -> bool:
    """A remembered request: [id, answer object or None]."""
    return (
        isinstance(item, list)
        and len(item) == 2
        and isinstance(item[0], str)
        and (item[1] is None or isinstance(item[1], dict))
    )


def main(cli: str, mode: str, state_dir: str | None, telemetry: str | None) -> int:
    """The ``tool-failure-guard hook <cli>`` entry: stdin, stdout, stderr of the process."""
    options = HookOptions(
        cli=cli,
        mode=mode,
        state_dir=Path(state_dir) if state_dir else None,
        telemetry=telemetry,
    )
    return run_hook(options, sys.stdin.buffer, sys.stdout, sys.stderr)
