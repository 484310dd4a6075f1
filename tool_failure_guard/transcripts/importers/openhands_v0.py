"""OpenHands V0 (the ``openhands-ai`` app before the SDK): trajectories and evaluation outputs.

Three forms hold the same serialised events (OpenHands'
``events/serialization/event.py`` ``event_to_dict``: ``id``, ``source``
``user``/``agent``/``environment``, ``cause``, and ``action`` + ``args`` or
``observation`` + ``content`` + ``extras``; ``tool_call_metadata`` with
``function_name``, ``tool_call_id``, ``model_response`` on a call the model
made by function calling):

- a **trajectory**: one JSON list of events, as the app's "download trajectory"
  and ``save_trajectory_path`` write it (and OpenHands' own
  ``tests/runtime/trajs``); the API's ``{"trajectory": [...]}`` too;
- an **evaluation output** (``evaluation/.../output.jsonl``): one instance a
  line, its ``history`` a list of events, or in 2024 outputs a list of
  ``[action, observation]`` pairs (``compatibility_for_eval_history_pairs``);
- a **session folder** of the app's local file store (``~/.openhands/sessions/<id>/``,
  ``storage/locations.py``): ``events/<id>.json``, one event a file as the event stream
  writes it, beside ``metadata.json`` / ``agent_state.pkl``; the folder is the transcript
  (:func:`session_owner`), its ``event_cache/`` pages are copies and not read.

Mapping (``docs/transcripts.md``; :mod:`.openhands_v0_events`, its ``RULES``): a call is
an action the model called a tool for (``tool_call_metadata``), or, without one
(text actions, 2024), an action OpenHands runs (``RUNNABLE``, its
``Action.runnable``); a message is never a call.  A batch is the calls of one
model response (``model_response.id``); a trajectory's run is one user
message, an output's run its instance.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import attrs

from tool_failure_guard.transcripts.importers._read import (
    head_records,
    json_document,
    json_value,
    records,
)
from tool_failure_guard.transcripts.importers.openhands_v0_events import Reader, RunState
from tool_failure_guard.transcripts.model import Run, TranscriptError

#: ``test_result`` fields that say whether an instance succeeded, tried in order (a bool only).
TEST_RESULT_FIELDS: Final = (("report", "resolved"), ("success",), ("result",), ("resolved",))
OUTCOME_FROM_TEST_RESULT: Final = "openhands test_result"


#: what marks a session folder of the app's file store, beside its ``events/``
SESSION_MARKERS: Final = ("metadata.json", "agent_state.pkl")
_EVENT_FILE: Final = re.compile(r"^(?P<id>\d+)\.json$")
#: Events past this count in one session are an error (bounded input).
MAX_EVENTS: Final = 1_000_000

#: the start of a list whose first event is longer than the head: its first keys as
#: ``event_to_dict`` writes them (``id``, ``timestamp``, ``source``)
_EVENT_START: Final = re.compile(
    rb'\[\s*\{\s*(?:"id":\s*-?\d+,\s*)?"timestamp":\s*"[^"]*",\s*'
    rb'"source":\s*"(user|agent|environment)"'
)


def _is_event(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("source"), str):
        return False
    return isinstance(value.get("action"), str) or isinstance(value.get("observation"), str)


def sniff_trajectory(head: bytes) -> bool:
    """A JSON list (or ``{"trajectory": [``) whose first item is an event."""
    text = head.lstrip()
    if text.startswith(b'{"trajectory"'):
        text = text[text.find(b"[") :] if b"[" in text else b""
    if not text.startswith(b"["):
        return False
    try:
        first, _ = json.JSONDecoder().raw_decode(text[1:].lstrip().decode("utf-8"))
    except (ValueError, RecursionError):  # cut by the head, or not JSON
        return _EVENT_START.match(text[:4096]) is not None
    return _is_event(first)


def sniff_output(head: bytes) -> bool:
    """A JSON Lines file whose first record is an evaluation instance (``history``,
    ``test_result``); a record longer than the head: its start says so."""
    first = head_records(head, 1)
    if first:
        return isinstance(first[0].get("history"), list) and "test_result" in first[0]
    text = head.lstrip()
    return text.startswith(b"{") and b'"test_result":' in text and b'"agent_class":' in text


def _feed(reader: Reader, history: list[Any]) -> None:
    """Events, or ``[action, observation]`` pairs (the observation answers its action)."""
    for position, item in enumerate(history, start=1):
        if isinstance(item, list) and len(item) == 2 and all(isinstance(x, dict) for x in item):
            action, observation = item
            call = reader.action(action, position) if "action" in action else None
            if "observation" in observation:
                reader.observation(observation, position, call)
        elif isinstance(item, dict) and "action" in item:
            reader.action(item, position)
        elif isinstance(item, dict) and "observation" in item:
            reader.observation(item, position, None)
        else:
            raise TranscriptError(
                reader.where, reader.line, f"history item {position} is not an OpenHands event"
            )


def read_trajectory(path: Path) -> Iterator[Run]:
    """One :class:`Run` per user message of a V0 trajectory file."""
    data = json_value(path)
    if isinstance(data, dict) and isinstance(data.get("trajectory"), list):
        data = data["trajectory"]
    if not isinstance(data, list):
        raise TranscriptError(str(path), 1, "not an OpenHands trajectory (a JSON list of events)")
    reader = Reader(str(path), None, split_on_user=True)
    _feed(reader, data)
    name = path.name[: -len(".json")] if path.name.endswith(".json") else path.name
    yield from reader.result(str(path), name, None)


def read_output(path: Path) -> Iterator[Run]:
    """One :class:`Run` per instance (line) of an evaluation ``output.jsonl``."""
    for line, record in records(path):
        history = record.get("history")
        if not isinstance(history, list):
            raise TranscriptError(str(path), line, "an instance without its history list")
        reader = Reader(str(path), line, split_on_user=False)
        _feed(reader, history)
        if not reader.runs:
            reader.runs.append(RunState())
        instance = record.get("instance_id", record.get("id"))
        run_id = str(instance) if isinstance(instance, str | int) else f"line {line}"
        metadata = record.get("metadata")
        llm = metadata.get("llm_config") if isinstance(metadata, dict) else None
        model = llm.get("model") if isinstance(llm, dict) else None
        (run,) = reader.result(str(path), run_id, model if isinstance(model, str) else None)
        verdict = _test_result(record.get("test_result"))
        if verdict is not None:
            run = _evolve(run, verdict, OUTCOME_FROM_TEST_RESULT)
        elif isinstance(record.get("error"), str) and record["error"]:
            run = _evolve(run, False, None)
        yield run


def _evolve(run: Run, succeeded: bool, outcome_from: str | None) -> Run:
    return attrs.evolve(run, succeeded=succeeded, outcome_from=outcome_from)


def _test_result(value: Any) -> bool | None:
    for path in TEST_RESULT_FIELDS:
        held = value
        for key in path:
            held = held.get(key) if isinstance(held, dict) else None
        if isinstance(held, bool):
            return held
    return None


def session_owner(path: Path) -> Path | None:
    """The session folder (``events/`` beside a :data:`SESSION_MARKERS` file) ``path`` is in."""
    for folder in (path, *list(path.parents)[:3]):
        if (folder / "events").is_dir() and any((folder / m).is_file() for m in SESSION_MARKERS):
            return folder
    return None


def read_session(folder: Path) -> Iterator[Run]:
    """One :class:`Run` per user message of a session folder, its events in id order."""
    events = folder / "events"
    numbered: dict[int, Path] = {}
    try:
        names = os.listdir(events)
    except OSError as exc:
        raise TranscriptError(str(events), None, f"cannot read: {exc.strerror}") from None
    for name in names:
        if name.startswith("."):  # a file manager's or an editor's, not the store's
            continue
        found = _EVENT_FILE.match(name)
        if found is None:
            raise TranscriptError(str(events / name), None, "not an OpenHands event file name")
        numbered[int(found["id"])] = events / name
        if len(numbered) > MAX_EVENTS:
            raise TranscriptError(str(events), None, f"more than {MAX_EVENTS} events")
    metadata: dict[str, Any] = {}
    if (folder / "metadata.json").is_file():
        metadata = json_document(folder / "metadata.json")
    reader = Reader(str(folder), None, split_on_user=True)
    _feed(reader, [json_document(numbered[i]) for i in sorted(numbered)])
    conversation = metadata.get("conversation_id")
    run_id = conversation if isinstance(conversation, str) else folder.name
    model = metadata.get("llm_model")
    yield from reader.result(str(folder), run_id, model if isinstance(model, str) else None)
