"""Fuzz: arbitrary frames interleaved with a real initialize/new/prompt exchange.

One agent process serves every example on the same stdio connection (as a
client would see it), with a 64 KiB frame limit.  Each example scatters
generated frames (every kind at least once) over five points of the exchange: before ``initialize``,
before ``session/new``, before ``session/prompt``, right after the prompt was
sent, and while the agent waits for the client's answer to its first request of
the prompt (a permission request or the drain).  Every frame is generated with
what it must cause, so the test checks, per example: each valid request is
answered, each bad frame gets exactly its answer (code and id, in order) or none,
one warning line per bad frame, no traceback, and the process never exits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stdio_driver import RawAgent, frame

from tool_failure_guard.session.transport.framing import INVALID_REQUEST, PARSE_ERROR

LIMIT = 64 * 1024
SLOTS = 5  # before initialize, before new, before prompt, mid-prompt, at an agent request


@attrs.frozen
class Frame:
    data: bytes
    #: (code, id) of the answer the agent must write, or None.
    reply: tuple[int, Any] | None = None
    #: Logged as a bad frame (one warning line).
    bad: bool = True
    #: A valid request: sent with a fresh id, and it must be answered.
    request: str | None = None


scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
unusable_ids = (
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(scalars, max_size=2)
    | st.dictionaries(st.text(max_size=4), scalars, max_size=2)
)
unknown_ids = st.integers(10**9, 10**15) | st.text(max_size=10).map(lambda t: f"stray-{t}")
not_method = st.text(max_size=6).filter(lambda k: k not in {"id", "method", "result", "error"})


def _truncate(text: str) -> st.SearchStrategy[bytes]:
    return st.integers(1, len(text) - 1).map(lambda k: text[:k].encode("utf-8"))


not_json = st.one_of(
    st.dictionaries(st.text(max_size=6), values, min_size=1, max_size=3)
    .map(json.dumps)
    .flatmap(_truncate),
    st.binary(max_size=20).map(lambda b: b"\xff" + b.replace(b"\n", b" ")),
    st.text(max_size=20).map(lambda t: ("x" + t).replace("\n", " ").encode("utf-8")),
    st.sampled_from([b"NaN", b"[Infinity]", b'{"a": -Infinity}', b"tru", b"{]", b'{"id":1,}']),
).map(lambda data: Frame(data, (PARSE_ERROR, None)))

not_an_object = st.one_of(
    st.lists(values, max_size=3),
    scalars,
    st.integers(1000, 60_000).map(lambda n: "y" * n),  # large, under the limit
).map(lambda value: Frame(frame(value), (INVALID_REQUEST, None)))


def _request(**fields: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "bad", "method": "x", **fields}


invalid_objects = st.one_of(
    values.filter(lambda v: not isinstance(v, str)).map(
        lambda m: Frame(frame(_request(method=m)), (INVALID_REQUEST, "bad"))
    ),
    unusable_ids.map(lambda i: Frame(frame(_request(id=i)), (INVALID_REQUEST, None))),
    st.one_of(st.just("1.0"), st.integers(), st.none()).map(
        lambda v: Frame(frame(_request(jsonrpc=v)), (INVALID_REQUEST, "bad"))
    ),
    scalars.map(lambda p: Frame(frame(_request(params=p)), (INVALID_REQUEST, "bad"))),
    st.dictionaries(not_method, values, max_size=3).map(
        lambda d: Frame(frame(d), (INVALID_REQUEST, None))
    ),
)

stray_responses = st.builds(
    lambda i, key, v: Frame(frame({"jsonrpc": "2.0", "id": i, key: v})),
    unusable_ids | unknown_ids,
    st.sampled_from(["result", "error"]),
    values,
)

oversized = st.integers(LIMIT + 1, 4 * LIMIT).flatmap(
    lambda n: st.sampled_from(
        [
            Frame(frame(_request(id="big", params={"s": "a" * n})), (INVALID_REQUEST, "big")),
            Frame(b"z" * n, (INVALID_REQUEST, None)),
            Frame(frame({"jsonrpc": "2.0", "id": 10**9, "result": "a" * n})),
        ]
    )
)

harmless = st.one_of(
    st.sampled_from(["no/such/method", "_ext/unknown", "session/set_mode"]).map(
        lambda m: Frame(b"", bad=False, request=m)
    ),
    st.just(Frame(frame({"jsonrpc": "2.0", "method": "_ext/notice", "params": {}}), bad=False)),
    st.sampled_from([b"", b"   ", b"\r"]).map(lambda b: Frame(b, bad=False)),
)

KINDS = (not_json, not_an_object, invalid_objects, stray_responses, oversized, harmless)
slots = st.integers(0, SLOTS - 1)
#: Every kind at least once per example (a few dozen examples skew towards few kinds),
#: plus a few more of any kind, in a drawn order.
plans = (
    st.tuples(
        st.tuples(*(st.tuples(slots, kind) for kind in KINDS)),
        st.lists(st.tuples(slots, st.one_of(*KINDS)), max_size=5),
    )
    .map(lambda drawn: [*drawn[0], *drawn[1]])
    .flatmap(st.permutations)
)


@pytest.fixture(scope="module")
def shared_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawAgent]:
    root: Path = tmp_path_factory.mktemp("framing-fuzz")
    # The drain timeout is far beyond any answer time, so a loaded machine cannot turn a
    # drain into a timed-out one (which would change nothing asserted here, but would
    # make the exchange differ from one run to the next).
    agent = RawAgent(root, "--max-frame-bytes", str(LIMIT), "--drain-timeout", "120")
    yield agent
    assert agent.close() == 0  # a clean end of input, never a crash
    assert "Traceback" not in agent.stderr_path.read_text(encoding="utf-8", errors="replace")


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(plan=plans)
def test_the_connection_survives_any_frame(
    shared_agent: RawAgent, plan: list[tuple[int, Frame]]
) -> None:
    agent = shared_agent
    agent.stray.clear()
    agent.new_stderr()
    slots: list[list[Frame]] = [[f for slot, f in plan if slot == k] for k in range(SLOTS)]
    requests: list[str] = []

    def send(batch: list[Frame]) -> None:
        for item in batch:
            if item.request is not None:
                requests.append(agent.request(item.request, {}))
            else:
                agent.send(item.data)

    asked: list[bool] = []

    def at_agent_request(_: dict[str, Any]) -> None:
        if not asked:
            asked.append(True)
            send(slots[4])

    send(slots[0])
    assert agent.initialize()["protocolVersion"] == 1
    send(slots[1])
    session_id = agent.new_session()
    send(slots[2])
    prompt_id = agent.request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
    )
    send(slots[3])
    answer = agent.wait_for([prompt_id], on_agent_request=at_agent_request)[0]
    assert answer["result"]["stopReason"] == "end_turn"
    assert asked, "the prompt sent the client no request"
    for reply in agent.wait_for(requests):
        assert "result" in reply or "error" in reply

    sent = [f for k in range(SLOTS) for f in slots[k]]
    expected = [f.reply for f in sent if f.reply is not None]
    assert [(r["error"]["code"], r["id"]) for r in agent.stray] == expected
    stderr = agent.new_stderr()
    warnings = [line for line in stderr.splitlines() if "session.framing" in line]
    assert len(warnings) == sum(f.bad for f in sent)
    assert "Traceback" not in stderr
    assert agent.alive()
