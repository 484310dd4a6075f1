"""Persist the agent-side input queue, so ``session/load`` restores undelivered input.

:class:`~tool_failure_guard.session.pipeline.drain.MidTurnInput` reports its whole agent-side queue
on every change (``on_queue_change``).  Input that *joins* the queue (``_session/steering``
pushes, input requeued at a stop or a cancel) is persisted at once as a
``pending_input`` snapshot line.  Input that *leaves* the queue is in flight until
the message that delivers it to the model is persisted: the snapshot without it is
written in the same append as that message (one write, one fsync), so a crash
in between can neither lose nor duplicate it.  On load the last snapshot wins.
"""

from __future__ import annotations

import logging

from tool_failure_guard.session.persistence.history import HistoryStore, HistoryWriteError

_log = logging.getLogger("session.pending")


class PendingInputLog:
    """One session's persisted input queue."""

    def __init__(
        self, store: HistoryStore, session_id: str, restored: tuple[str, ...] = ()
    ) -> None:
        self._store = store
        self._session_id = session_id
        self._queue = restored  #: the queue as the drain last reported it
        self._in_flight: tuple[str, ...] = ()  #: taken, not yet in a persisted message
        self._due = False  #: the persisted snapshot is stale until the next message

    def changed(self, queue: tuple[str, ...]) -> None:
        """``MidTurnInput``'s ``on_queue_change`` hook."""
        previous, self._queue = self._queue, queue
        if len(queue) < len(previous):
            # Taken for delivery: the persisted snapshot keeps it until the message
            # that carries it is persisted (see snapshot_for_message).
            self._in_flight += previous[: len(previous) - len(queue)]
            self._due = True
            return
        added = queue[: len(queue) - len(previous)]
        if self._in_flight and added[-len(self._in_flight) :] == self._in_flight:
            self._in_flight = ()  # the in-flight input was put back (requeued)
        try:
            self._store.append_pending_input(self._session_id, (*self._in_flight, *queue))
            self._due = False
        except HistoryWriteError as exc:
            # The input is queued in memory and will be delivered; only a crash loses it now.
            _log.error("the queued input could not be persisted: %s", exc)
            self._due = True

    def snapshot_for_message(self) -> tuple[str, ...] | None:
        """The snapshot to persist with the next message, or None if none is owed."""
        return self._queue if self._due or self._in_flight else None

    def message_persisted(self) -> None:
        """A message (carrying whatever was in flight) was persisted with its snapshot."""
        self._in_flight = ()
        self._due = False
