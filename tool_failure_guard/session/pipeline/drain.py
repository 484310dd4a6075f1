"""The input boundary: mid-turn input drained between batches, pulled and pushed.

Pull
    Between batches the agent asks the client for its queued mid-turn input
    with the host extension method ``craft/drainMidTurnQueue``.  Two wire
    names are in use for it: the bare one the specification and Qwen Code
    0.24.4 send, and ``_craft/drainMidTurnQueue`` (what the Python SDK puts on
    the wire for an extension name).  The connection tries the bare name first
    and learns once which one the host answers
    (:mod:`~tool_failure_guard.session.transport.drain_names`); here the
    request is simply :data:`DRAIN_METHOD`.

    Params: ``{"sessionId": ...}`` plus ``"todoStopGuardWatchQueuedPrompt": true``
    when the guard mode is not ``off`` (``off`` keeps the legacy request
    shape).  Answer: ``{"messages": [text | {"type": "text", "text": ...}],
    "hasQueuedPrompt": bool}``; ``hasQueuedPrompt`` is required when the watch
    flag was sent.  Timeout 2 s.  "Method not found" or a third timeout
    disables pulling for the rest of the session.

Push
    Clients may also push input with ``_session/steering``
    (``{"sessionId", "prompt": [content blocks]}``), advertised in the
    ``initialize`` answer as ``_meta.steering.supported = true``.  Pushed input
    is queued inside the agent.

No input is lost
    Whatever the host hands over reaches the model, in order, exactly once, in
    every mode.  Every answer -- on time or late -- is adopted into the
    agent-side queue the moment it arrives (so it is persisted through
    ``on_queue_change``), and each boundary takes the whole queue.  A legacy
    answer (no ``hasQueuedPrompt`` although it was asked for) or a malformed
    one makes the *boundary* unreliable, never the messages: what parses is
    delivered, and an item that cannot be read as text is delivered as a
    visible note in its place (and logged).  No count limit applies.  A request
    that times out is not cancelled: its answer, when it comes, joins the queue
    and is delivered at the next boundary or with the next prompt (the host
    believes it delivered it).  Only one request is outstanding at a time.

Unreliable boundaries
    An error, a timeout, or a legacy/malformed answer makes that boundary
    unreliable (the guard resets with ``unreliable_input`` and disables
    enforcement for the prompt).  When pulling is unavailable for the session
    (method not found, the third timeout, no client) *every* boundary is
    unreliable -- the agent-side queue alone cannot tell whether the host holds
    input -- so no candidate ever accumulates on such a host; the guard reports
    only the first such reset of a prompt (later resets from ``idle`` are
    silent), so it is one diagnostic per prompt.  Pushed input is still
    delivered.  :attr:`MidTurnInput.drain_supported` tells rollout analysis
    which prompts ran against such a host.

A declared prompt-only boundary
    With ``TOOL_FAILURE_GUARD_INPUT_BOUNDARY=prompt-only``
    (:mod:`~tool_failure_guard.session.config.declared_boundary`) the host is never asked: each
    boundary is reliable, has no queued prompt, and carries the agent-side queue alone
    (``_session/steering`` pushes still count as external input and reset).

Cancellation
    ``session/cancel`` wins over a hung drain: the wait is raced against the
    prompt's cancel event, the request stays outstanding, and its answer is
    kept as queued input.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from tool_failure_guard.guard import GuardMode, InputBoundary
from tool_failure_guard.session.config.declared_boundary import UNSUPPORTED, BoundaryKind

# the answer's reading, re-exported: the pipeline and its tests name them from here
from tool_failure_guard.session.pipeline.drain_answer import DrainAnswer as DrainAnswer
from tool_failure_guard.session.pipeline.drain_answer import (
    parse_drain_answer as parse_drain_answer,
)
from tool_failure_guard.session.pipeline.drain_answer import unreadable_note as unreadable_note

_log = logging.getLogger("session.drain")


#: The one warning of a ``warn``/``enforce`` session whose client has no drain and no
#: declared boundary (``off`` and ``shadow`` ask the guard for nothing it could not do).
CANNOT_ACT_WARNING = (
    "session %s: the ACP client answers %s with 'method not found' (a plain ACP client "
    "such as Zed or acpx), so every batch boundary is unreliable and the repeated-failure "
    "guard can never remind or stop in this session, although its mode is %s; if this "
    "client delivers user input only as session/prompt, set "
    "TOOL_FAILURE_GUARD_INPUT_BOUNDARY=prompt-only in the agent's environment"
)
#: The modes whose guard acts (a reminder, a stop): only these need a reliable boundary.
ACTING_MODES = frozenset({GuardMode.WARN, GuardMode.ENFORCE})

#: The drain's name; the wire name is the transport's (``transport.drain_names``).
DRAIN_METHOD = "craft/drainMidTurnQueue"
#: The push extension, as the SDK hands it to ``ext_method`` (wire: ``_session/steering``).
STEERING_METHOD = "session/steering"
WATCH_FLAG = "todoStopGuardWatchQueuedPrompt"
QUEUED_INPUT_PREFIX = "[User message received during tool execution]: "
DEFAULT_DRAIN_TIMEOUT = 2.0
MAX_DRAIN_TIMEOUTS = 3
METHOD_NOT_FOUND = -32601

#: Sends the drain request to the client (``DrainMethodNames.request`` on a connection).
ExtRequest = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
#: Told the whole agent-side queue each time it changes (the session persists it).
QueueListener = Callable[[tuple[str, ...]], None]


@attrs.frozen
class DrainResult:
    """What one drain found, and whether the boundary can be trusted."""

    messages: tuple[str, ...] = ()
    has_queued_prompt: bool = False
    reliable: bool = True

    def boundary(self) -> InputBoundary:
        return InputBoundary(
            has_external_input=bool(self.messages),
            has_queued_prompt=self.has_queued_prompt,
            reliable=self.reliable,
        )


#: A request's end: the answer as read, or None when the request failed.
_Reply = DrainAnswer | None


class MidTurnInput:
    """One session's input boundary: the host's pull queue and the agent's queue."""

    def __init__(
        self,
        session_id: str,
        ext_request: ExtRequest | None,
        *,
        timeout: float = DEFAULT_DRAIN_TIMEOUT,
        on_queue_change: QueueListener | None = None,
        declared: BoundaryKind = BoundaryKind.DRAIN,
        mode: GuardMode = GuardMode.SHADOW,
    ) -> None:
        self._session_id = session_id
        #: the session's mode: whether a host without the drain leaves it unable to act
        self._mode = mode
        self._declared = declared
        self._on_queue_change = on_queue_change
        self._ext_request = ext_request
        self._timeout = timeout
        self._pushed: list[str] = []
        self._timeouts = 0
        # A prompt-only host is never asked: pulling is off from the start.
        self._pull_disabled = ext_request is None or declared is BoundaryKind.PROMPT_ONLY
        self._inflight: asyncio.Future[_Reply] | None = None
        self._contract_kept = True

    @property
    def pull_disabled(self) -> bool:
        return self._pull_disabled

    @property
    def declared(self) -> BoundaryKind:
        """The boundary the operator declared for this session's host."""
        return self._declared

    def record_value(self, reliable_throughout: bool) -> str:
        """The prompt record's ``input_boundary``: the kind actually used for the prompt.

        ``prompt-only`` when declared; otherwise ``drain`` when the host kept
        the drain contract at every boundary (``reliable_throughout``) and
        ``unsupported`` when it lacked or failed it.
        """
        if self._declared is BoundaryKind.PROMPT_ONLY:
            return BoundaryKind.PROMPT_ONLY.value
        return BoundaryKind.DRAIN.value if reliable_throughout else UNSUPPORTED

    @property
    def request_outstanding(self) -> bool:
        """A drain request was sent and the host has not answered it yet."""
        return self._inflight is not None and not self._inflight.done()

    @property
    def drain_supported(self) -> bool:
        """Whether this prompt ran against a host that keeps the drain contract.

        False once, during the current prompt, pulling was unavailable (method
        not found, disabled after repeated timeouts, no client) or an answer
        lacked the contract's shape (legacy or malformed).  Every boundary of
        such a prompt is unreliable, so rollout analysis keeps these prompts
        out of the supported-host conclusions.  A single timeout or error of an
        otherwise conforming host does not clear it.
        """
        return self._contract_kept

    @property
    def pending(self) -> tuple[str, ...]:
        """The agent-side queue: pushed, requeued and late input not yet delivered."""
        return tuple(self._pushed)

    def _queue_changed(self) -> None:
        """Every change of the agent-side queue goes through here, so it can be persisted."""
        if self._on_queue_change is not None:
            self._on_queue_change(tuple(self._pushed))

    def push(self, texts: list[str]) -> None:
        """Queue input pushed by the client (``_session/steering``)."""
        self._pushed.extend(texts)
        self._queue_changed()

    def requeue(self, texts: tuple[str, ...]) -> None:
        """Put drained input back at the front: a stopped prompt leaves it queued."""
        self._pushed[:0] = list(texts)
        self._queue_changed()

    def restore(self, texts: tuple[str, ...]) -> None:
        """Start from a persisted queue (``session/load``); nothing is re-persisted."""
        self._pushed = list(texts)

    def take_pushed(self) -> list[str]:
        """Take the whole agent-side queue (pushed, requeued and pulled input), in order."""
        pushed, self._pushed = self._pushed, []
        if pushed:
            self._queue_changed()
        return pushed

    def start_prompt(self) -> None:
        self._contract_kept = not self._pull_disabled

    async def _request(self, watched: bool) -> _Reply:
        """One drain request; its messages join the queue the moment they arrive."""
        assert self._ext_request is not None
        params: dict[str, Any] = {"sessionId": self._session_id}
        if watched:
            params[WATCH_FLAG] = True
        try:
            answer = await self._ext_request(DRAIN_METHOD, params)
        except Exception as exc:
            if getattr(exc, "code", None) == METHOD_NOT_FOUND:
                # Once per session (pulling stops here): a plain ACP client (Zed, acpx)
                # leaves every boundary unreliable, so the guard can never act -- worth a
                # warning only where it is meant to act (the prompt records say it anyway).
                if self._mode in ACTING_MODES:
                    _log.warning(
                        CANNOT_ACT_WARNING, self._session_id, DRAIN_METHOD, self._mode.value
                    )
                self._pull_disabled = True
                self._contract_kept = False
            else:
                _log.warning("%s failed: %s", DRAIN_METHOD, exc)
            return None
        reply = parse_drain_answer(answer, watched=watched)
        if reply.unreadable:
            _log.warning(
                "%s: %d queued item(s) are not text; delivered as a note in their place",
                DRAIN_METHOD,
                reply.unreadable,
            )
        if not reply.well_formed:
            _log.warning(
                "%s answered without the contract's shape; the boundary is unreliable",
                DRAIN_METHOD,
            )
        if reply.messages:
            self._pushed.extend(reply.messages)
            self._queue_changed()
        return reply

    async def _wait(self, request: asyncio.Future[_Reply], cancelled: asyncio.Event | None) -> bool:
        """Wait for ``request`` within the timeout; True if it ended, False if not.

        The request itself is never cancelled here: a late answer is still kept.
        """
        if cancelled is None:
            done, _ = await asyncio.wait({request}, timeout=self._timeout)
            return bool(done)
        stop: asyncio.Future[Any] = asyncio.ensure_future(cancelled.wait())
        waiting: set[asyncio.Future[Any]] = {request, stop}
        try:
            done, _ = await asyncio.wait(
                waiting, timeout=self._timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stop
        return request in done

    async def drain(
        self, *, watch_queued_prompt: bool, cancelled: asyncio.Event | None = None
    ) -> DrainResult:
        """One input boundary: ask the host (if it can be asked), then take the whole queue.

        If ``cancelled`` is set while the host is being waited for, return at
        once with an empty, unreliable result and the queue untouched.  A
        declared prompt-only host is never asked: the boundary is reliable, with
        no queued prompt, and carries the agent-side queue alone.
        """
        if self._declared is BoundaryKind.PROMPT_ONLY:
            return DrainResult(tuple(self.take_pushed()), False, True)
        reply: _Reply = None
        if not self._pull_disabled and self._ext_request is not None:
            if self._inflight is None or self._inflight.done():
                # An earlier request that ended late was already adopted into the queue.
                self._inflight = asyncio.ensure_future(self._request(watch_queued_prompt))
            request = self._inflight
            if await self._wait(request, cancelled):
                self._inflight = None
                reply = request.result()
                if reply is not None and not reply.well_formed:
                    self._contract_kept = False
            elif cancelled is not None and cancelled.is_set():
                return DrainResult((), False, False)
            else:
                self._timeouts += 1
                _log.warning(
                    "%s timed out (%d/%d); a late answer is kept as queued input",
                    DRAIN_METHOD,
                    self._timeouts,
                    MAX_DRAIN_TIMEOUTS,
                )
                if self._timeouts >= MAX_DRAIN_TIMEOUTS:
                    self._pull_disabled = True
        if self._pull_disabled:
            self._contract_kept = False
        messages = tuple(self.take_pushed())
        if reply is None or not reply.well_formed:
            return DrainResult(messages, False, False)
        return DrainResult(messages, reply.has_queued_prompt, True)
