"""Call ids a provider reuses across responses, kept apart within a run.

Some providers number call ids per response (``functions.read_file:0`` in every
turn), and hand-edited or replayed logs repeat ids too.  The calls ran, each
with its own result, but the replay's protection core would read a repeated id
as a provider replay of an earlier call (``global_tool_call_duplicate``) and
never run it.  So an id already used by an earlier turn of the same run gets
``#<n>`` appended (its n-th use); an id repeated within one response is left as
recorded, since the live core treats that as the provider duplicate it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from tool_failure_guard.transcripts.model import Turn


def distinct_across_turns(turns: Sequence[Turn]) -> tuple[Turn, ...]:
    """``turns`` with every call id that an earlier turn already used made distinct."""
    uses: dict[str, int] = {}
    out = []
    for turn in turns:
        earlier = dict(uses)
        calls = []
        for call in turn.calls:
            uses[call.call_id] = uses.get(call.call_id, 0) + 1
            if call.call_id in earlier:
                call = attrs.evolve(call, call_id=f"{call.call_id}#{uses[call.call_id]}")
            calls.append(call)
        out.append(attrs.evolve(turn, calls=tuple(calls)) if calls != list(turn.calls) else turn)
    return tuple(out)
