"""The input boundary: mid-turn input drained between batches, pulled and pushed.

Pull
    Between batches the agent asks the client for its queued mid-turn input
    with the host extension method ``craft/drainMidTurnQueue``.  ACP requires
    extension method names to start with ``_`` and the Python SDK adds that
    prefix to every name it sends, so the exact wire name is
    ``_craft/drainMidTurnQueue`` (:data:`DRAIN_WIRE_NAME`).  A host built on
    the Python SDK receives it in its ``ext_method`` as
    ``craft/drainMidTurnQueue``; a host built on the TypeScript SDK (which
    passes names through unchanged) must register ``_craft/drainMidTurnQueue``.
    Sending the bare name instead would bypass the SDK and be answered
    "method not found" by every spec-conforming client.

    Params: ``{"sessionId": ...}`` plus ``"todoStopGuardWatchQueuedPrompt": true``
    when the guard mode is not ``off`` (``off`` keeps the legacy request
    shape).  Answer: ``{"messages": [text | {"type": "text", "text": ...}],
    "hasQueuedPrompt": bool}``; ``hasQueuedPrompt`` is required when the watch
    flag was sent.  Timeout 2 s.  "Method not found" or a third timeout
    disables pulling for the rest of the session; any failure or malformed
    answer is an *unreliable* drain.

Push
    Clients may also push input with ``_session/steering``
    (``{"sessionId", "prompt": [content blocks]}``), advertised in the
    ``initialize`` answer as ``_meta.steering.supported = true``.  Pushed input
    is queued inside the agent; an agent-side queue is a reliable boundary.

When pulling is unavailable for the session, the first boundary of every
prompt is reported unreliable (the guard resets with ``unreliable_input`` and
disables enforcement for that prompt: enforce acts as warn); the later
boundaries of that prompt are the agent-side queue alone, which is reliable,
so candidates can still be tracked and warned about.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from guard import InputBoundary

_log = logging.getLogger("session.drain")

DRAIN_METHOD = "craft/drainMidTurnQueue"
#: What goes on the wire (the SDK prefixes extension names with ``_``).
DRAIN_WIRE_NAME = "_" + DRAIN_METHOD
#: The push extension, as the SDK hands it to ``ext_method`` (wire: ``_session/steering``).
STEERING_METHOD = "session/steering"
WATCH_FLAG = "todoStopGuardWatchQueuedPrompt"
QUEUED_INPUT_PREFIX = "[User message received during tool execution]: "
MAX_DRAINED_MESSAGES = 10
DEFAULT_DRAIN_TIMEOUT = 2.0
MAX_DRAIN_TIMEOUTS = 3
METHOD_NOT_FOUND = -32601

#: Sends an extension request to the client (``AgentSideConnection.ext_method``).
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


def _message_text(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
        return str(item["text"])
    return None


def parse_drain_answer(answer: Any, *, watched: bool) -> tuple[tuple[str, ...], bool] | None:
    """The queued messages and ``hasQueuedPrompt`` of an answer; None if malformed."""
    if not isinstance(answer, dict):
        return None
    raw = answer.get("messages", [])
    if not isinstance(raw, list):
        return None
    messages: list[str] = []
    for item in raw:
        text = _message_text(item)
        if text is None:
            return None
        messages.append(text)
    queued = answer.get("hasQueuedPrompt")
    if queued is None and not watched:
        queued = False
    if not isinstance(queued, bool):
        return None
    return tuple(messages[:MAX_DRAINED_MESSAGES]), queued


class MidTurnInput:
    """One session's input boundary: the host's pull queue and the agent's push queue."""

    def __init__(
        self,
        session_id: str,
        ext_request: ExtRequest | None,
        *,
        timeout: float = DEFAULT_DRAIN_TIMEOUT,
        on_queue_change: QueueListener | None = None,
    ) -> None:
        self._session_id = session_id
        self._on_queue_change = on_queue_change
        self._ext_request = ext_request
        self._timeout = timeout
        self._pushed: list[str] = []
        self._timeouts = 0
        self._pull_disabled = ext_request is None
        self._reported_this_prompt = False

    @property
    def pull_disabled(self) -> bool:
        return self._pull_disabled

    @property
    def pending(self) -> tuple[str, ...]:
        """The agent-side queue: pushed and requeued input not yet delivered."""
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
        pushed, self._pushed = self._pushed, []
        if pushed:
            self._queue_changed()
        return pushed

    def start_prompt(self) -> None:
        self._reported_this_prompt = False

    def _unavailable(self, pushed: list[str]) -> DrainResult:
        """The pull queue is gone: unreliable once per prompt, then the agent queue alone."""
        if self._reported_this_prompt:
            return DrainResult(tuple(pushed), False, True)
        self._reported_this_prompt = True
        return DrainResult(tuple(pushed), False, False)

    async def drain(self, *, watch_queued_prompt: bool) -> DrainResult:
        pushed = self.take_pushed()
        if self._pull_disabled or self._ext_request is None:
            return self._unavailable(pushed)
        params: dict[str, Any] = {"sessionId": self._session_id}
        if watch_queued_prompt:
            params[WATCH_FLAG] = True
        try:
            answer = await asyncio.wait_for(self._ext_request(DRAIN_METHOD, params), self._timeout)
        except TimeoutError:
            self._timeouts += 1
            _log.warning(
                "%s timed out (%d/%d)", DRAIN_WIRE_NAME, self._timeouts, MAX_DRAIN_TIMEOUTS
            )
            if self._timeouts >= MAX_DRAIN_TIMEOUTS:
                self._pull_disabled = True
            self._reported_this_prompt = True
            return DrainResult(tuple(pushed), False, False)
        except Exception as exc:
            code = getattr(exc, "code", None)
            if code == METHOD_NOT_FOUND:
                _log.info("the client has no %s; draining disabled", DRAIN_WIRE_NAME)
                self._pull_disabled = True
            else:
                _log.warning("%s failed: %s", DRAIN_WIRE_NAME, exc)
            self._reported_this_prompt = True
            return DrainResult(tuple(pushed), False, False)
        parsed = parse_drain_answer(answer, watched=watch_queued_prompt)
        if parsed is None:
            _log.warning("%s answered with a malformed result", DRAIN_WIRE_NAME)
            self._reported_this_prompt = True
            return DrainResult(tuple(pushed), False, False)
        pulled, queued = parsed
        messages = (*pulled, *pushed)
        return DrainResult(messages, queued, True)
