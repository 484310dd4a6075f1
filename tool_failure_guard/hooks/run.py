"""The fail-open runner: one hook process, one event, the session's state under its lock.

``tool-failure-guard hook <cli>`` reads one payload and, under the session
state file's exclusive lock: registers this install and takes the session's
effective mode (:mod:`~tool_failure_guard.hooks.installs`), skips an event
already applied (:mod:`~tool_failure_guard.hooks.event_keys`), lets the CLI's
module say what the event means against the event's own agent loop
(:mod:`~tool_failure_guard.hooks.loops`), reports telemetry, and writes the
answer and the state back.  The mode comes from the command line only (the
installer writes it there): a project's settings can put variables into a
hook's environment, so no environment variable is read for it.

Fail open: whatever goes wrong inside (a bad payload, an unusable state folder,
a bug), the hook writes nothing on stdout, exits 0 and names the reason in one
line on stderr, so the CLI goes on exactly as without the guard.  ``off``
registers the install (so a managed ``off`` wins over other installs) and
applies and answers nothing.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tool_failure_guard.hooks.clis import HOOK_CLIS
from tool_failure_guard.hooks.event_keys import AppliedEvents, event_key
from tool_failure_guard.hooks.installs import Installs
from tool_failure_guard.hooks.loops import SessionLoops, handle_event, loop_id_of
from tool_failure_guard.hooks.payload import read_payload, text_field, write_answer
from tool_failure_guard.hooks.prompt import StateDamaged
from tool_failure_guard.hooks.state import StateStore, default_state_dir

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, Final

    from tool_failure_guard.hooks.events import Handled

#: The keys of a session's state (``hooks.state``'s ``{"version": N, "state": {...}}``).
_LOOPS_KEY: Final = "loops"  #: the agent loops (:meth:`SessionLoops.to_state`)
_EVENTS_KEY: Final = "events"  #: the events applied (:class:`AppliedEvents`)
_INSTALLS_KEY: Final = "installs"  #: the installs seen (:class:`Installs`)
_SUMMARY_KEY: Final = "summary"  #: what ``hook status`` reads (:func:`summary`)
#: The keys of earlier versions of the state, dropped when met.
_LEGACY_KEYS: Final = ("prompt", "requests", "started", "started_prompt")


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

    __slots__ = ("cli", "command", "environment", "mode", "scope", "state_dir", "telemetry")

    def __init__(
        self,
        *,
        cli: str,
        mode: str = "shadow",
        state_dir: Path | None = None,
        telemetry: str | None = None,
        scope: str | None = None,
        command: str | None = None,
        environment: str | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        self.cli = cli
        self.mode = str(mode)
        self.state_dir = state_dir
        self.telemetry = telemetry  #: a ``--telemetry`` spec (``file:PATH``), or None
        #: the telemetry's ``deployment.environment`` (``--environment``: no OTEL_* reaches a hook)
        self.environment = environment
        #: the ``--scope`` the installer wrote (``managed``, ``user``, ``plugin``,
        #: ``project``, ``settings``; :mod:`tool_failure_guard.hooks.installs`), or None
        self.scope = scope
        #: the hook's command line as it ran, its words joined by NUL (:func:`join_command`;
        #: text, as every field the worker's header carries): the install's key, and what a
        #: claimed operator scope's settings file must hold
        self.command = command

    @property
    def argv(self) -> tuple[str, ...]:
        """The words of :attr:`command` (its executable first); () when not given."""
        return tuple(self.command.split("\0")) if self.command else ()

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


def join_command(argv: Sequence[str]) -> str | None:
    """``argv`` as :attr:`HookOptions.command` holds it (NUL never occurs in a word)."""
    return "\0".join(argv) if argv else None


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

    Each event is applied once (:mod:`~tool_failure_guard.hooks.event_keys`): ``request``
    names the event when a worker may also be handling it (the client gave up waiting
    and handles it here), and the second of the two to take the state's lock answers
    the first's answer and changes nothing; another install's process with the same
    event answers nothing.
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
    module = cli_module(options.cli)
    session_id = text_field(payload, "session_id")
    directory = options.state_dir or default_state_dir(options.cli)
    store = StateStore(directory, warn=lambda message: _say(options.cli, message, stderr))
    with store.session(session_id) as state:
        now = clock()
        for legacy in _LEGACY_KEYS:
            state.pop(legacy, None)
        installs = Installs.from_state(state.get(_INSTALLS_KEY))
        prompt_id = payload.get("prompt_id")
        installs.register(
            cli=options.cli,
            mode=options.mode,
            scope=options.scope,
            argv=options.argv,
            prompt_id=prompt_id if isinstance(prompt_id, str) else None,
            now=now,
        )
        state[_INSTALLS_KEY] = installs.to_state()
        mode = installs.effective_mode(now) or options.mode
        if options.mode == "off" or mode == "off":
            # registered (a managed ``off`` wins); nothing applied
            state[_SUMMARY_KEY] = summary(state.get(_SUMMARY_KEY), payload, None, mode, None, now)
            return None
        applied = AppliedEvents.from_state(state.get(_EVENTS_KEY))
        key = event_key(payload)
        seen, answer = applied.seen(key, request)
        if seen:
            return answer  # applied already: by this request (its answer), or another install
        try:
            loops = SessionLoops.from_state(mode, state.get(_LOOPS_KEY))
        except StateDamaged as damaged:
            _say(options.cli, f"state damaged ({damaged}); the streak starts over", stderr)
            loops = SessionLoops(mode)
        loops.expire(now)
        handled = handle_event(module, payload, loops)
        loops.expire(now)  # the records this event kept are stamped
        loop_id = loop_id_of(payload)
        started = loops.started(loop_id, now)
        session = loops.get(loop_id)
        reported = handled.settled is not None or handled.prompt_ended is not None
        if options.telemetry is not None and session is not None and reported:
            from tool_failure_guard.hooks.report import report_event

            # a subagent's loop reports under its own prompt id (its parent's and its agent's)
            own = f"{session.prompt_id or 'unknown'}:{loop_id}" if loop_id else None
            report_event(
                options.telemetry,
                route=module.ROUTE,
                session=session,
                handled=handled,
                wall_time_s=max(0.0, now - started),
                prompt_id=own,
                environment=options.environment,
            )
        applied.remember(key, request, handled.answer)
        state[_EVENTS_KEY] = applied.to_state()
        state[_LOOPS_KEY] = loops.to_state()
        state[_SUMMARY_KEY] = summary(
            state.get(_SUMMARY_KEY), payload, handled, mode, len(loops), now
        )
    return handled.answer


def summary(
    previous: Any,
    payload: Mapping[str, Any],
    handled: Handled | None,
    mode: str,
    loops: int | None,
    now: float,
) -> dict[str, Any]:
    """The state's ``summary`` (what ``hook status`` shows): events seen, the last one, the
    last settled batch's decision (a ``DecisionKind`` value), the effective mode, the loops
    (``handled`` None: an event not applied, in ``off``; ``loops`` None: as before)."""
    before = previous if isinstance(previous, dict) else {}
    events = before.get("events")
    decision = before.get("last_decision")
    settled = handled.settled if handled is not None else None
    if settled is not None:
        step = getattr(settled.action, "guard_step", None)
        if step is not None:
            decision = str(step.decision.kind.value)
        elif getattr(settled.action, "loop_type", None) is not None:  # a stop without a step
            decision = "stop"
        else:
            decision = "none"
    event = payload.get("hook_event_name")
    return {
        "events": (events if isinstance(events, int) else 0) + 1,
        "last_event": event[:64] if isinstance(event, str) else "",
        "last_decision": decision if isinstance(decision, str) else None,
        "mode": mode,
        "loops": loops if loops is not None else _count(before.get("loops")),
        "updated": now,
    }


def main(
    cli: str,
    mode: str,
    state_dir: str | None,
    telemetry: str | None,
    *,
    scope: str | None = None,
    argv: Sequence[str] = (),
    environment: str | None = None,
) -> int:
    """The ``tool-failure-guard hook <cli>`` entry: stdin, stdout, stderr of the process."""
    options = HookOptions(
        cli=cli,
        mode=mode,
        state_dir=Path(state_dir) if state_dir else None,
        telemetry=telemetry,
        scope=scope,
        command=join_command(argv),
        environment=environment,
    )
    return run_hook(options, sys.stdin.buffer, sys.stdout, sys.stderr)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
