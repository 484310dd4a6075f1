"""Which wire name of the drain method a connection speaks, learnt once per connection.

Two names are in use for the same host method:

* ``craft/drainMidTurnQueue`` -- the bare name the specification and the
  released original (Qwen Code 0.24.4) send; a host built on the TypeScript
  SDK registers exactly that name, since that SDK passes names through
  unchanged;
* ``_craft/drainMidTurnQueue`` -- what this agent sent before, and what its
  documentation told host authors (the Python SDK prefixes ``_`` to every
  extension name it sends, and a Python SDK host receives it in its
  ``ext_method`` as ``craft/drainMidTurnQueue``).

:class:`DrainMethodNames` sends the bare name first, through the connection's
lower-level request path (the SDK's ``ext_method`` would add the ``_``).  A
"method not found" (-32601) answer to one name moves it to the next name in the
same boundary, so a boundary costs at most one extra round trip, and only until
the connection's name is known: the first successful answer fixes the name for
every later request on the connection, whichever session sends it.  When both
names are "method not found" the connection has no drain: the caller gets that
"method not found" (the session disables pulling, fail-open), and later
sessions on the connection get it at once, without a round trip.

Only a -32601 answer switches names.  A timeout is not one (the request is
still outstanding and its answer, when it comes, decides); neither is any
other error, which is passed on unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from acp.exceptions import RequestError

from tool_failure_guard.session.pipeline.drain import DRAIN_METHOD, METHOD_NOT_FOUND

_log = logging.getLogger("session.drain")

#: The seed's and the original's name; tried first.
BARE_DRAIN_NAME = DRAIN_METHOD
#: The ``_``-prefixed name this agent's documentation named before.
PREFIXED_DRAIN_NAME = "_" + DRAIN_METHOD
#: The order the names are tried in.
DRAIN_NAMES = (BARE_DRAIN_NAME, PREFIXED_DRAIN_NAME)

#: Sends one JSON-RPC request with exactly this method name (``Connection.send_request``).
RawRequest = Callable[[str, Any], Awaitable[Any]]
#: Sends an extension request the SDK way (``AgentSideConnection.ext_method``).
ExtRequest = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def _is_method_not_found(exc: BaseException) -> bool:
    return getattr(exc, "code", None) == METHOD_NOT_FOUND


class DrainMethodNames:
    """One connection's knowledge of its drain method's wire name."""

    def __init__(self, send: RawRequest, ext_method: ExtRequest | None = None) -> None:
        self._send = send
        self._ext_method = ext_method
        self._known: str | None = None
        self._missing: set[str] = set()

    @classmethod
    def for_connection(cls, conn: Any) -> DrainMethodNames | None:
        """The names of an ``acp`` ``AgentSideConnection``, through its raw request path.

        None for a client object without one (an in-process test client): its
        ``ext_method`` is then the drain, called the SDK way.
        """
        send = getattr(getattr(conn, "_conn", None), "send_request", None)
        if send is None:
            return None
        return cls(send, conn.ext_method)

    @property
    def known(self) -> str | None:
        """The name the connection answered, once it did."""
        return self._known

    @property
    def absent(self) -> bool:
        """Both names were answered "method not found"."""
        return self._known is None and self._missing.issuperset(DRAIN_NAMES)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send ``method``: the drain under its learnt name, anything else the SDK way."""
        if method != DRAIN_METHOD:
            if self._ext_method is None:
                raise RequestError.method_not_found("_" + method)
            return await self._ext_method(method, params)
        if self._known is not None:
            return await self._send(self._known, params)
        last: BaseException | None = None
        for name in DRAIN_NAMES:
            if name in self._missing:
                continue
            try:
                answer = await self._send(name, params)
            except Exception as exc:
                if not _is_method_not_found(exc):
                    raise
                self._missing.add(name)
                last = exc
                continue
            if self._known is None:
                _log.info("the client answers the drain as %s", name)
            self._known = name
            return answer
        if last is None:  # learnt absent by an earlier request: no round trip
            raise RequestError.method_not_found(" or ".join(DRAIN_NAMES))
        raise last
