"""Deterministic per-owner assignment: a pure function a deployment control plane can call.

An owner's *bucket* is a number in [0, 1) derived from SHA-256 of
``salt`` and the owner id; the owner is in the treatment when its bucket is
below ``percent / 100``.  So the assignment is stable (same inputs, same
answer, on any machine), and monotone: owners inside P % stay inside when P
grows.  A new salt reshuffles everyone (a new experiment).  There is no
service and no state: the specification forbids a second rollout service.
"""

from __future__ import annotations

import hashlib

#: 2**64: the bucket resolution.
_SCALE = float(1 << 64)


def bucket(owner: str, salt: str) -> float:
    """The owner's position in [0, 1) for this salt."""
    digest = hashlib.sha256(f"{salt}\x00{owner}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


def in_treatment(owner: str, percent: float, salt: str) -> bool:
    """Whether ``owner`` is among the ``percent`` % treated owners for ``salt``."""
    if not 0.0 <= percent <= 100.0:
        raise ValueError(f"percent must be between 0 and 100, got {percent}")
    return bucket(owner, salt) < percent / 100.0
