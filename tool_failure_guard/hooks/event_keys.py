"""Each event applied once, however many installs of the guard run on it.

Every matching hook entry of every settings file (managed, user, a project's,
``--settings``, a plugin) runs as its own process on the same event, and the
installs that share a state folder share the session's state.  Reduced twice,
a batch of successes reads as "the model replays calls already answered" and a
healthy prompt is stopped.  So an event is applied once, keyed by what
identifies it (:func:`event_key`: session, loop, prompt, event name, and the
``tool_use_id`` s it carries), and the session's state remembers the recent
keys with the request that applied them and its answer (:class:`AppliedEvents`):

- the same request again (the hook's client handled the event itself after the
  worker was slow, and the worker got to it later) gets the stored answer back
  and changes nothing;
- another request with the same key (a second install) answers nothing: one
  answer per event, so a reminder is injected once.

An event that carries no call id (``UserPromptSubmit``, ``Stop``, Gemini CLI's
``BeforeModel``) has no key: applying it again changes nothing by itself (a
prompt id already entered, a batch already settled, a notice already taken).
This module imports nothing heavy: the per-call events use it.
"""

from __future__ import annotations

from collections.abc import Mapping

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

#: How many applied events a session's state remembers (the duplicates of an event run at
#: the same time as the event, so the window needs only to cover one batch's events).
MAX_REMEMBERED: Final = 64
#: A key longer than this is kept as its SHA-256 (a batch of many calls).
_MAX_KEY: Final = 512
_SEP: Final = "\x1f"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _call_id(entry: Any) -> str:
    if not isinstance(entry, dict):
        return ""
    return _text(entry.get("tool_use_id")) or _text(entry.get("tool_call_id"))


def event_key(payload: Mapping[str, Any]) -> str | None:
    """What identifies the event across installs, or None (an event without a call id).

    A batch event (``tool_calls``) by its calls' sorted ids; a per-call event by its
    ``tool_use_id`` (or ``tool_call_id``); both with the session, the loop
    (``agent_id``), the prompt and the event's name.
    """
    calls = payload.get("tool_calls")
    if isinstance(calls, list):
        ids = sorted(_call_id(entry) for entry in calls)
    else:
        one = _call_id(payload)
        if not one:
            return None
        ids = [one]
    names = ("session_id", "agent_id", "prompt_id", "hook_event_name")
    parts = [_text(payload.get(name)) for name in names]
    key = _SEP.join([*parts, ",".join(ids)])
    if len(key) > _MAX_KEY:
        import hashlib  # only for a long key (keeps it off the common path)

        key = "sha256-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return key


class AppliedEvents:
    """The recent events applied to a session: [key or None, request or None, answer]."""

    __slots__ = ("entries",)

    def __init__(self, entries: list[list[Any]] | None = None) -> None:
        self.entries: list[list[Any]] = entries or []

    @classmethod
    def from_state(cls, stored: Any) -> AppliedEvents:
        """What :meth:`to_state` stored (anything else is forgotten: worst case, an event is
        applied twice, as before the memory existed)."""
        if not isinstance(stored, list):
            return cls()
        return cls([item for item in stored[-MAX_REMEMBERED:] if _is_entry(item)])

    def to_state(self) -> list[list[Any]]:
        return self.entries

    def seen(self, key: str | None, request: str | None) -> tuple[bool, dict[str, Any] | None]:
        """(True, the answer to give) when the event was applied already, else (False, None).

        The same ``request`` gets its stored answer; another request with the same
        ``key`` gets None (nothing: one answer per event).
        """
        if request is not None:
            for _key, stored_request, answer in self.entries:
                if stored_request == request:
                    return True, answer
        if key is not None:
            for stored_key, _request, _answer in self.entries:
                if stored_key == key:
                    return True, None
        return False, None

    def remember(self, key: str | None, request: str | None, answer: dict[str, Any] | None) -> None:
        """Note an applied event (the answer is kept only for a request that may come again)."""
        if key is None and request is None:
            return
        kept = answer if request is not None else None
        self.entries = [*self.entries[-(MAX_REMEMBERED - 1) :], [key, request, kept]]


def _is_entry(item: Any) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 3
        and (item[0] is None or isinstance(item[0], str))
        and (item[1] is None or isinstance(item[1], str))
        and (item[2] is None or isinstance(item[2], dict))
    )
