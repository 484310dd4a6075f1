"""The deduplicator fingerprints a call only when its id comes back: same answers as hashing
every call at admission.

``EagerDeduplicator`` is the rule written plainly (every admitted call's fingerprint taken at
once, one set of fingerprints per answered id); hypothesis drives both through the same
histories, admissions and answers, with ids, names and arguments from small pools so that
ids come back, with the same call and with others.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tool_failure_guard.core.outcomes import FunctionCall
from tool_failure_guard.core.protections import Admission, CallIdDeduplicator, call_fingerprint


class EagerDeduplicator:
    """The reference: every call fingerprinted when admitted."""

    def __init__(
        self, answered: Iterable[tuple[str, str | None]], open_calls: Iterable[tuple[str, str]]
    ) -> None:
        self.answered: dict[str, set[str] | None] = {}
        for call_id, fingerprint in answered:
            self.remember(call_id, fingerprint)
        self.open = dict(open_calls)

    def remember(self, call_id: str, fingerprint: str | None) -> None:
        known = self.answered.get(call_id, set())
        if fingerprint is None or known is None:
            self.answered[call_id] = None
        else:
            self.answered[call_id] = known | {fingerprint}

    def admit(self, calls: Sequence[FunctionCall]) -> tuple[list[str], set[str], set[str], int]:
        seen: set[str] = set()
        admitted, duplicates, reused, dropped = [], set(), set(), 0
        for call in calls:
            if call.call_id in seen:
                dropped += 1
                continue
            seen.add(call.call_id)
            admitted.append(call.call_id)
            fingerprint = call_fingerprint(call.name, call.args)
            if call.call_id in self.answered:
                known = self.answered[call.call_id]
                if known is None or fingerprint in known:
                    duplicates.add(call.call_id)
                    continue
                reused.add(call.call_id)
            self.open[call.call_id] = fingerprint
        return admitted, duplicates, reused, dropped

    def mark_answered(self, call_ids: Iterable[str]) -> None:
        for call_id in call_ids:
            if call_id in self.open:
                self.remember(call_id, self.open.pop(call_id))
            elif call_id not in self.answered:
                self.remember(call_id, None)


IDS = st.sampled_from(["call_0", "call_1", "call_2", "x"])
NAMES = st.sampled_from(["read_file", "write_file"])
ARGS = st.sampled_from(
    [{}, {"path": "a"}, {"path": "b"}, {"path": "a", "limit": 1}, {"limit": 1, "path": "a"}]
)
CALLS = st.lists(st.tuples(IDS, NAMES, ARGS), min_size=1, max_size=4)
#: One step: admit a batch and answer a subset of its ids (and maybe an id never admitted).
STEPS = st.lists(st.tuples(CALLS, st.lists(st.booleans(), max_size=4), st.booleans()), max_size=8)
HISTORY = st.lists(st.tuples(IDS, st.one_of(st.none(), st.tuples(NAMES, ARGS))), max_size=4)


def _fingerprinted(history: list[tuple[str, Any]]) -> list[tuple[str, str | None]]:
    return [(i, None if c is None else call_fingerprint(*c)) for i, c in history]


def _facts(admission: Admission) -> tuple[list[str], set[str], set[str], int]:
    return (
        [c.call_id for c in admission.calls],
        set(admission.provider_duplicates),
        set(admission.reused_ids),
        admission.dropped,
    )


@settings(max_examples=400, deadline=None)
@given(history=HISTORY, still_open=st.lists(st.tuples(IDS, NAMES, ARGS), max_size=2), steps=STEPS)
def test_lazy_fingerprints_answer_as_eager_ones(
    history: list[tuple[str, Any]],
    still_open: list[tuple[str, str, dict[str, Any]]],
    steps: list[tuple[list[tuple[str, str, dict[str, Any]]], list[bool], bool]],
) -> None:
    answered = _fingerprinted(history)
    open_calls = [(i, call_fingerprint(n, a)) for i, n, a in still_open]
    lazy = CallIdDeduplicator(
        [i if fp is None else (i, fp) for i, fp in answered], open_calls=open_calls
    )
    eager = EagerDeduplicator(answered, open_calls)
    for calls, answers, stray in steps:
        batch = [FunctionCall(call_id=i, name=n, args=dict(a)) for i, n, a in calls]
        got = _facts(lazy.admit(batch))
        assert got == eager.admit(batch)
        ids = [i for i, keep in zip(got[0], answers, strict=False) if keep]
        if stray:
            ids.append("never-admitted")
        lazy.mark_answered(ids)
        eager.mark_answered(ids)
        for call_id in ("call_0", "call_1", "call_2", "x", "never-admitted"):
            assert lazy.is_answered(call_id) == (call_id in eager.answered)
