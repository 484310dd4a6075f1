"""The protections beside the guard, most specific first, and the loop-type latch.

Inside one prompt, after a batch settles, the session consults them in this
order and stops at the first that stops the prompt:

1. provider call-id de-duplication (:class:`CallIdDeduplicator`): same-batch
   duplicates are dropped before anything runs; a call already answered in the
   session history (same id, same tool name and arguments) becomes a
   provider-duplicate record and is never executed -- an answered id reused for
   a different call is a new call;
   a provider that keeps replaying answered ids stops the prompt
   (``global_tool_call_duplicate``);
2. the invalid-parameter guard (:class:`InvalidParamGuard`): three
   ``not_started`` failures (invalid arguments or unregistered tool) of one
   tool name in a prompt stop it (``invalid_tool_params_stagnation``);
3. the repeated tool-failure guard (``guard.RepeatedToolFailureGuard``, after
   the mid-turn drain) stops it as ``repeated_tool_execution_failure``;
4. the per-prompt tool-call cap (:class:`ToolCallCap`, default 100):
   ``turn_tool_call_cap`` (the original's name for its per-turn cap; this
   project called it ``tool_call_cap`` before).  It is also applied at
   admission: a batch never starts more calls than the cap leaves
   (``Admission.over_cap``); the rest are skipped, not started, and the cap
   stops the prompt after that batch (in its place in this order, so an
   earlier protection that stops it first still records its loop type).

The first protection that stops a prompt records its loop type in the
prompt's :class:`LoopLatch`; later ones record nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from tool_failure_guard.core.outcomes import CallOutcome, FunctionCall

LOOP_PROVIDER_DUPLICATE = "global_tool_call_duplicate"
LOOP_INVALID_TOOL_PARAMS = "invalid_tool_params_stagnation"
LOOP_REPEATED_TOOL_FAILURE = "repeated_tool_execution_failure"
LOOP_TOOL_CALL_CAP = "turn_tool_call_cap"

#: Protection order, most specific first.
LOOP_TYPES_IN_ORDER = (
    LOOP_PROVIDER_DUPLICATE,
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_REPEATED_TOOL_FAILURE,
    LOOP_TOOL_CALL_CAP,
)

#: Batches with replayed call ids, in one prompt, that stop it.
PROVIDER_REPLAY_BATCH_LIMIT = 3
#: not_started failures of one tool name, in one prompt, that stop it.
INVALID_TOOL_PARAMS_LIMIT = 3
#: Default per-prompt tool-call cap.
DEFAULT_TOOL_CALL_CAP = 100

_PRE_EXECUTION_TYPES = frozenset({"invalid_tool_params", "tool_not_registered"})


@attrs.frozen
class Admission:
    """A model turn's calls after de-duplication, in the model's order."""

    calls: tuple[FunctionCall, ...]  #: de-duplicated calls (provider duplicates included)
    provider_duplicates: frozenset[str]  #: ids among ``calls`` already answered in history
    dropped: int  #: same-batch duplicates removed
    #: ids among ``calls`` answered before for *another* call: new calls (the host logs them)
    reused_ids: frozenset[str] = frozenset()
    #: executable ids past what the tool-call cap leaves: the host settles each
    #: with :func:`~tool_failure_guard.core.outcomes.skipped_by_cap`, never runs it
    over_cap: frozenset[str] = frozenset()

    @property
    def executable(self) -> tuple[FunctionCall, ...]:
        return tuple(c for c in self.calls if c.call_id not in self.provider_duplicates)

    @property
    def runnable(self) -> tuple[FunctionCall, ...]:
        """The executable calls the cap leaves room for, in the model's order."""
        return tuple(c for c in self.executable if c.call_id not in self.over_cap)


@functools.cache
def _canonical_and_digest() -> tuple[Callable[[Any], str], Callable[[bytes], str]]:
    """The canonical JSON encoder and the sha256 hex digest, made at the first fingerprint.

    The encoder is ``json.dumps(args, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False, default=repr)``, made once rather than per call (same text).
    Importing ``hashlib`` (it loads OpenSSL) and ``json`` costs 16 M instructions, and a
    run whose call ids never come back takes no fingerprint.
    """
    import hashlib
    import json

    encoder = json.JSONEncoder(
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )
    sha256 = hashlib.sha256

    def digest(data: bytes) -> str:
        return sha256(data).hexdigest()

    return encoder.encode, digest


def call_fingerprint(name: str, args: Mapping[str, Any]) -> str:
    """What makes two calls the same call: the tool name and the arguments (canonical JSON)."""
    canonical_of, digest = _canonical_and_digest()
    try:
        canonical = canonical_of(args)
    except (TypeError, ValueError, RecursionError):
        canonical = repr(args)
    return digest(f"{name}\0{canonical}".encode("utf-8", "replace"))


#: An answered call as history gives it: its id, and its fingerprint (None: call unknown).
AnsweredCall = tuple[str, str | None]

_NO_IDS: frozenset[str] = frozenset()
#: Marks an id missing from the answered calls (None there means "any call").
_MISSING: Any = object()


class _Answered:
    """The calls one id answered, when it answered more than one: fingerprints, and
    calls not fingerprinted yet."""

    __slots__ = ("calls", "fingerprints")

    def __init__(self, *answered: str | FunctionCall) -> None:
        self.fingerprints: set[str] = set()
        self.calls: list[FunctionCall] = []
        for item in answered:
            self.add(item)

    def add(self, answered: str | FunctionCall) -> None:
        if isinstance(answered, str):
            self.fingerprints.add(answered)
        else:
            self.calls.append(answered)

    def knows(self, fingerprint: str) -> bool:
        if self.calls:
            self.fingerprints.update(call_fingerprint(c.name, c.args) for c in self.calls)
            self.calls.clear()
        return fingerprint in self.fingerprints


class CallIdDeduplicator:
    """Session-wide memory of answered calls (rebuilt from history on load).

    A replay is the same call sent again: an id already answered *with the same
    tool name and arguments*.  Some providers number their call ids per message
    (``call_0`` in every turn): an answered id arriving with a different name or
    arguments is a new call, executed (``Admission.reused_ids``: the host logs it),
    never a replay.  So each
    answered id keeps the fingerprints (:func:`call_fingerprint`) of the calls
    it answered; an id whose call is unknown (given without one) answers every
    call with that id.  A call's fingerprint is taken only when its id arrives
    again (a :class:`FunctionCall` is a value: its arguments are the provider's,
    never changed after admission), so fresh ids cost no hashing.
    """

    __slots__ = ("_answered", "_generated", "_open")

    def __init__(
        self,
        answered: Iterable[str | AnsweredCall] = (),
        *,
        open_calls: Iterable[tuple[str, str]] = (),
    ) -> None:
        #: call id -> what it answered: None (any call), one call (its fingerprint, or the
        #: call while its id has not come back), or several (:class:`_Answered`)
        self._answered: dict[str, str | FunctionCall | _Answered | None] = {}
        for item in answered:
            call_id, fingerprint = (item, None) if isinstance(item, str) else item
            self._remember(call_id, fingerprint)
        #: admitted, not yet answered: call id -> its fingerprint, or the call itself
        self._open: dict[str, str | FunctionCall] = dict(open_calls)
        self._generated = 0

    def _remember(self, call_id: str, answered: str | FunctionCall | None) -> None:
        if answered is None:
            self._answered[call_id] = None
            return
        known = self._answered.get(call_id, _MISSING)
        if known is _MISSING:
            self._answered[call_id] = answered
        elif isinstance(known, _Answered):
            known.add(answered)
        elif known is not None:
            self._answered[call_id] = _Answered(known, answered)

    def is_answered(self, call_id: str) -> bool:
        return call_id in self._answered

    def is_replay(self, call: FunctionCall) -> bool:
        """Whether ``call`` is a call already answered: same id, same name and arguments."""
        return call.call_id in self._answered and self._replay_fingerprint(call) is True

    def _replay_fingerprint(self, call: FunctionCall) -> Literal[True] | str:
        """For a call whose id was answered: True if it is a replay, else its fingerprint."""
        call_id = call.call_id
        known = self._answered[call_id]
        if known is None:
            return True
        fingerprint = call_fingerprint(call.name, call.args)
        if isinstance(known, _Answered):
            return True if known.knows(fingerprint) else fingerprint
        if not isinstance(known, str):  # the one call it answered, fingerprinted now
            known = self._answered[call_id] = call_fingerprint(known.name, known.args)
        return True if known == fingerprint else fingerprint

    def mark_answered(self, call_ids: Iterable[str]) -> None:
        """Remember the answered calls of a settled batch.

        A replay in the batch was answered already and keeps the fingerprints it has
        (marking it as "any call" would make every later reuse of its id a replay); an
        id answered without being admitted here answers every call with that id.
        """
        opened = self._open
        known = self._answered
        for call_id in call_ids:
            answered = opened.pop(call_id, _MISSING)
            if answered is _MISSING:
                if call_id not in known:
                    known[call_id] = None
            elif call_id not in known:  # the id's first answer (most ids have one)
                known[call_id] = answered
            else:
                self._remember(call_id, answered)

    def _new_call_id(self, taken: set[str]) -> str:
        """An id for a call the provider sent without one: deterministic, never answered."""
        while True:
            self._generated += 1
            call_id = f"generated-{self._generated}"
            if call_id not in self._answered and call_id not in taken:
                return call_id

    def admit(self, calls: Sequence[FunctionCall]) -> Admission:
        seen: set[str] = set()
        admitted: list[FunctionCall] = []
        duplicates: set[str] = set()
        reused: set[str] = set()
        dropped = 0
        opened = self._open
        known = self._answered
        for call in calls:
            call_id = call.call_id
            if not call_id:
                call = attrs.evolve(call, call_id=self._new_call_id(seen))
                call_id = call.call_id
            if call_id in seen:
                dropped += 1
                continue
            seen.add(call_id)
            admitted.append(call)
            if call_id not in known:  # never answered: fingerprinted if its id comes back
                opened[call_id] = call
                continue
            found = self._replay_fingerprint(call)
            if found is True:
                duplicates.add(call_id)
            else:
                reused.add(call_id)
                opened[call_id] = found
        return Admission(
            tuple(admitted),
            frozenset(duplicates) if duplicates else _NO_IDS,
            dropped,
            frozenset(reused) if reused else _NO_IDS,
        )


class ProviderReplayCounter:
    """Stops a prompt whose provider keeps replaying answered call ids."""

    __slots__ = ("_batches",)

    def __init__(self) -> None:
        self._batches = 0

    def observe(self, admission: Admission) -> bool:
        if admission.provider_duplicates:
            self._batches += 1
        return self._batches >= PROVIDER_REPLAY_BATCH_LIMIT


class InvalidParamGuard:
    """Counts pre-execution failures per tool name within one prompt.

    ``limit`` None (a framework host's choice) counts nothing and never stops.
    """

    __slots__ = ("_counts", "_limit", "_reached")

    def __init__(self, limit: int | None = INVALID_TOOL_PARAMS_LIMIT) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"the invalid-parameter limit must be at least 1 or None; got {limit}")
        self._counts: dict[str, int] = {}
        self._limit = limit
        self._reached = False

    def observe(self, outcomes: Iterable[CallOutcome | None]) -> bool:
        """Count ``outcomes`` (None: a call never settled, skipped); True once a tool name
        reached the limit (counts only grow, so it stays reached)."""
        limit = self._limit
        if limit is None:
            return False
        counts = self._counts
        for outcome in outcomes:
            if (
                outcome is not None
                and outcome.execution_status == "not_started"
                and outcome.terminal_status == "error"
                and outcome.execution_error_type in _PRE_EXECUTION_TYPES
            ):
                count = counts[outcome.name] = counts.get(outcome.name, 0) + 1
                if count >= limit:
                    self._reached = True
        return self._reached


class ToolCallCap:
    """The absolute per-prompt backstop on executed tool calls (``cap`` None: no backstop)."""

    __slots__ = ("_cap", "_count")

    def __init__(self, cap: int | None = DEFAULT_TOOL_CALL_CAP) -> None:
        if cap is not None and cap < 1:
            raise ValueError(f"the tool-call cap must be at least 1 or None; got {cap}")
        self._cap = cap
        self._count = 0

    @property
    def count(self) -> int:
        return self._count

    @property
    def remaining(self) -> int | None:
        """Calls the prompt may still start before the cap is reached (None: no cap)."""
        return None if self._cap is None else max(self._cap - self._count, 0)

    def limit(self, admission: Admission) -> Admission:
        """``admission`` with the executable calls past :attr:`remaining` marked ``over_cap``.

        A batch never starts more calls than the cap leaves: the first ones, in
        the model's order, run; the rest are settled not_started (skipped, never
        an execution failure), and the cap then stops the prompt after the batch.
        """
        if self._cap is None:
            return admission
        remaining = self._cap - self._count
        if len(admission.calls) <= remaining:  # every executable call fits
            return admission
        remaining = max(remaining, 0)
        past = admission.executable[remaining:]
        if not past:
            return admission
        return attrs.evolve(admission, over_cap=frozenset(call.call_id for call in past))

    def observe(self, executed: int) -> bool:
        self._count += executed
        return self._cap is not None and self._count >= self._cap


class LoopLatch:
    """The loop type of the first protection that stopped the prompt."""

    __slots__ = ("_loop_type",)

    def __init__(self) -> None:
        self._loop_type: str | None = None

    @property
    def loop_type(self) -> str | None:
        return self._loop_type

    def record(self, loop_type: str) -> bool:
        """Record ``loop_type`` if nothing stopped the prompt yet; True when it was recorded."""
        if loop_type not in LOOP_TYPES_IN_ORDER:
            raise ValueError(f"unknown loop type {loop_type!r}")
        if self._loop_type is not None:
            return False
        self._loop_type = loop_type
        return True


class PromptProtections:
    """The per-prompt protections other than the guard, consulted in order."""

    def __init__(
        self,
        dedup: CallIdDeduplicator,
        tool_call_cap: int | None,
        invalid_params_limit: int | None = INVALID_TOOL_PARAMS_LIMIT,
    ) -> None:
        self.dedup = dedup
        self.replays = ProviderReplayCounter()
        self.invalid_params = InvalidParamGuard(invalid_params_limit)
        self.cap = ToolCallCap(tool_call_cap)
        self.latch = LoopLatch()

    def admit(self, calls: Sequence[FunctionCall], *, capped: bool = True) -> Admission:
        """De-duplicated calls, those past the cap marked ``over_cap`` (never to run) when
        ``capped`` (a shadow host's cap only counts)."""
        admission = self.dedup.admit(calls)
        return self.cap.limit(admission) if capped else admission

    def before_guard(self, admission: Admission, outcomes: Sequence[CallOutcome]) -> str | None:
        """Protections 1 and 2 for a settled batch: the loop type that stops it, if any."""
        replaying = self.replays.observe(admission)
        invalid = self.invalid_params.observe(outcomes)
        if replaying:
            return LOOP_PROVIDER_DUPLICATE
        if invalid:
            return LOOP_INVALID_TOOL_PARAMS
        return None

    def after_guard(self, executed: int) -> str | None:
        """Protection 4: the cap, consulted only when nothing earlier stopped the prompt."""
        return LOOP_TOOL_CALL_CAP if self.cap.observe(executed) else None
