"""How large a schema's regular expression becomes once compiled, read before compiling it.

The :mod:`regex` engine compiles a counted repeat of a fixed-length item by
copying the item (``a{1000}`` becomes a thousand ``a``), so nested counted
repeats multiply: ``(?:(?:(?:a{1000}){1000}){1000})``, 31 characters, asks
for 10^9 copies and exhausts memory before any argument is checked.  Python's
``re`` (which jsonschema uses to check that a ``pattern`` is a regular
expression) does not copy, so that check passes.

:func:`compiled_size` therefore estimates, from the text alone, the number of
items the compiled pattern holds when every counted repeat is copied: each
item counts 1, a group the sum of its contents (every alternative), and a
quantifier ``{m,n}`` multiplies what it repeats by ``m`` (plus one for the
optional rest).  The reading never under-counts: whatever it cannot tell
apart (a brace inside a set, a verbose-mode comment) counts as if it were a
quantifier or an item.  A schema whose patterns together exceed
:data:`MAX_PATTERN_SIZE` is not compiled at all.
"""

from __future__ import annotations

import re

#: Items a schema's regular expressions may hold in total once compiled, counted repeats
#: copied.  Measured (``regex`` 2026.12.2, a loaded 2-core machine): 100,000 items took
#: 26 MB and 170-280 ms to compile, so 20,000 stay near 5 MB and 50 ms, on the event loop
#: at ``session/new``; a real schema's patterns hold a few hundred.
MAX_PATTERN_SIZE = 20_000

_QUANTIFIER = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")


def _factor(match: re.Match[str]) -> int:
    if max(len(match.group(1)), len(match.group(3) or "")) > 9:
        return 10**10  # past any limit (and past the engine's own bound on a repeat)
    low = int(match.group(1) or 0)
    if match.group(2) is None:  # {m}: m copies
        return max(low, 1)
    high = match.group(3)
    exact = high is not None and high != "" and int(high) == low
    return max(low, 1) + (0 if exact else 1)


def _skip_set(pattern: str, index: int) -> int:
    """The index just past the set opened at ``pattern[index] == "["``."""
    index += 1
    if index < len(pattern) and pattern[index] == "^":
        index += 1
    if index < len(pattern) and pattern[index] == "]":
        index += 1  # a leading "]" is a member
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[" and pattern.startswith("[:", index):
            end = pattern.find(":]", index + 2)
            if end != -1:
                index = end + 2
                continue
        if char == "]":
            return index + 1
        index += 1
    return index


def compiled_size(pattern: str, limit: int = MAX_PATTERN_SIZE) -> int:
    """Items ``pattern`` holds once compiled (counted repeats copied), stopping past ``limit``.

    The reading is linear in the pattern's length; the count is exact enough to
    refuse a pattern that multiplies and never below what the engine builds.
    """
    # One frame per open group: [size so far, size of the last item (what a quantifier repeats)]
    frames: list[list[int]] = [[0, 0]]
    index = 0
    while index < len(pattern):
        frame = frames[-1]
        char = pattern[index]
        if char == "{":
            match = _QUANTIFIER.match(pattern, index)
            if match is not None and frame[1] > 0:
                repeated = frame[1] * _factor(match)
                frame[0] += repeated - frame[1]
                frame[1] = repeated
                index = match.end()
                if frame[0] > limit:
                    return frame[0]
                continue
            frame[0] += 1
            frame[1] = 1
            index += 1
            continue
        if char == "(":
            frames.append([0, 0])
            index += 1
            continue
        if char == ")":
            if len(frames) > 1:
                inner = frames.pop()[0]
                frames[-1][0] += inner
                frames[-1][1] = max(inner, 1)
            index += 1
            continue
        if char == "|":
            frame[1] = 0
            index += 1
            continue
        if char in "*+?":  # repeats that copy nothing (a lazy or possessive mark included)
            index += 1
            continue
        if char == "[":
            index = _skip_set(pattern, index)
        elif char == "\\":
            index += 2  # "\x{41}" then counts as a repeat: more, never less
        else:
            index += 1
        frame[0] += 1
        frame[1] = 1
    total = 0
    for frame in frames:
        total += frame[0]
    return total
