"""One drain answer as read: its messages, and whether it kept the drain contract.

:mod:`~tool_failure_guard.session.pipeline.drain` asks the host for its queued
mid-turn input; this module reads what comes back, leniently: every item the
host handed over is delivered (an item that is not text as a visible note in its
place), and an answer without the contract's shape is flagged, never dropped.
Plain functions on values: no IO.
"""

from __future__ import annotations

from typing import Any

import attrs

_JSON_TYPE_NAMES = {
    bool: "boolean",
    int: "number",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}


@attrs.frozen
class DrainAnswer:
    """One drain answer as read: what it carried, and whether it had the contract's shape.

    ``messages`` holds every item in order: readable text as is, anything else
    as a note saying what was left out, so nothing the host handed over
    disappears without a trace.
    """

    messages: tuple[str, ...] = ()
    has_queued_prompt: bool = False
    well_formed: bool = True
    unreadable: int = 0


def unreadable_note(item: Any) -> str:
    """The visible stand-in for a queued item that cannot be read as text."""
    kind = item.get("type") if isinstance(item, dict) else None
    if not isinstance(kind, str) or not kind:
        kind = _JSON_TYPE_NAMES.get(type(item), "unknown")
    return f"[queued input that is not text was left out: {kind[:40]}]"


def _message_text(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
        return str(item["text"])
    return None


def parse_drain_answer(answer: Any, *, watched: bool) -> DrainAnswer:
    """Read an answer leniently: deliver what it carried, flag what breaks the contract.

    The contract is an object with a ``messages`` list of text items and, when
    the watch flag was sent, a boolean ``hasQueuedPrompt``.  Anything else still
    yields the messages it carried (a bare list, string or object counts as the
    item list), but ``well_formed`` is False and the boundary is unreliable.
    """
    well_formed = True
    queued: Any = False
    if isinstance(answer, dict):
        raw: Any = answer.get("messages", [])
        queued = answer.get("hasQueuedPrompt")
        if queued is None:
            well_formed = not watched  # a legacy answer to a watched request
            queued = False
        elif not isinstance(queued, bool):
            well_formed = False
            queued = False
    else:
        raw = answer
        well_formed = False
    if raw is None:
        items: list[Any] = []
        well_formed = False
    elif isinstance(raw, list):
        items = raw
    else:
        items = [raw]
        well_formed = False
    messages: list[str] = []
    unreadable = 0
    for item in items:
        text = _message_text(item)
        if text is None:
            unreadable += 1
            text = unreadable_note(item)
        messages.append(text)
    if unreadable:
        well_formed = False
    return DrainAnswer(tuple(messages), bool(queued), well_formed, unreadable)
