"""Checking a schema's regular expressions within a time budget, never stalling the agent.

An MCP server's ``inputSchema`` may declare a ``pattern`` such as ``^(a+)+$``:
jsonschema matches it with Python's ``re``, which backtracks exponentially on
``"a" * 40 + "!"`` and holds the interpreter lock all the while, so no thread or
timer could interrupt it.  The validators :func:`bounded_validator_class` gives
therefore match every schema regular expression (``pattern``,
``patternProperties`` and the ``additionalProperties`` that depends on them)
with the :mod:`regex` engine, which takes a ``timeout`` and releases the
interpreter lock while it matches (``concurrent=True``); and every keyword
checks the check's deadline (:data:`CHECK_BUDGET_S` from its start) before it
runs.  Past it the check raises :class:`CheckTimedOut`: the call's verdict is
``not_started`` / ``invalid_tool_params``, never a stall.  The executor runs
the check in a worker thread, so ``session/cancel`` and other sessions are
served meanwhile.

``unevaluatedProperties`` together with ``patternProperties`` would match with
``re`` inside jsonschema: such a schema is unusable (:func:`pattern_problem`),
checked as "an object" like any other schema that cannot be checked safely.
So is a schema whose patterns would compile too large (nested counted repeats,
:mod:`~tool_failure_guard.session.tools.pattern_size`): they are measured from
their text and never compiled.

``uniqueItems`` is checked here too: jsonschema compares unhashable items
pairwise (2,500 small objects took 20 s, never looking at the deadline); this
one keys each item once and looks at the deadline while it does.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tool_failure_guard.session.tools.pattern_size import MAX_PATTERN_SIZE, compiled_size

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
# jsonschema and regex are imported where a validator is made, a pattern matched or a
# violation reported (see schema_check: not with the agent).

#: Seconds one call's arguments may take to check (a real check takes microseconds).
CHECK_BUDGET_S = 1.0

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "argument_check_deadline", default=None
)


class CheckTimedOut(Exception):
    """Checking the arguments took longer than its budget (a backtracking pattern...)."""


@contextlib.contextmanager
def deadline(budget: float = CHECK_BUDGET_S) -> Iterator[None]:
    """Bound the checks made inside this block (in this thread) to ``budget`` seconds."""
    token = _DEADLINE.set(time.monotonic() + budget)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _remaining() -> float:
    limit = _DEADLINE.get()
    if limit is None:
        return CHECK_BUDGET_S
    left = limit - time.monotonic()
    if left <= 0:
        raise CheckTimedOut(f"checking the arguments took longer than {CHECK_BUDGET_S:g}s")
    return left


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text``, within the check's deadline."""
    import regex

    if compiled_size(pattern) > MAX_PATTERN_SIZE:  # a schema not measured when registered
        raise CheckTimedOut(f"the pattern {pattern[:80]!r} {_too_large()}")
    compiled = regex.compile(pattern)  # the engine caches compiled patterns
    try:
        return compiled.search(text, timeout=_remaining(), concurrent=True) is not None
    except TimeoutError:
        raise CheckTimedOut(
            f"checking the arguments took longer than {CHECK_BUDGET_S:g}s "
            f"(the pattern {pattern[:80]!r} backtracks)"
        ) from None


def _too_large() -> str:
    return f"would hold more than {MAX_PATTERN_SIZE:,} items once compiled (nested counted repeats)"


#: Items of one array between two looks at the deadline while ``uniqueItems`` keys them.
_ITEMS_PER_LOOK = 256


def _item_key(item: Any, depth: int = 0) -> Any:
    """A hashable key equal for two items exactly when JSON Schema calls them equal.

    ``true`` is not ``1``, ``1`` is ``1.0``, objects ignore their keys' order.
    """
    if depth > 200:
        raise CheckTimedOut("an argument nests deeper than 200 levels")
    if isinstance(item, bool) or item is None:
        return ("literal", item)
    if isinstance(item, int | float):
        return ("number", item)
    if isinstance(item, str):
        return ("string", item)
    if isinstance(item, list):
        return ("array", tuple(_item_key(value, depth + 1) for value in item))
    if isinstance(item, Mapping):
        return (
            "object",
            frozenset((key, _item_key(value, depth + 1)) for key, value in item.items()),
        )
    return ("other", id(item))


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for number, item in enumerate(instance):
        if number % _ITEMS_PER_LOOK == 0:
            _remaining()
        key = _item_key(item)
        if key in seen:
            from jsonschema.exceptions import ValidationError

            yield ValidationError(f"item {number} repeats an earlier item")
            return
        seen.add(key)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        from jsonschema.exceptions import ValidationError

        yield ValidationError(f"the value does not match {pattern[:200]!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(original: Callable[..., Any]) -> Callable[..., Any]:
    def keyword(validator: Any, additional: Any, instance: Any, schema: Any) -> Any:
        patterns = schema.get("patternProperties")
        if not patterns or not validator.is_type(instance, "object"):
            return original(validator, additional, instance, schema)
        return _additional_with_patterns(validator, additional, instance, schema, patterns)

    return keyword


def _additional_with_patterns(
    validator: Any, additional: Any, instance: Any, schema: Any, patterns: Mapping[str, Any]
) -> Iterator[Any]:
    properties = schema.get("properties", {})
    extras = [
        key
        for key in instance
        if key not in properties and not any(search(pattern, key) for pattern in patterns)
    ]
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        from jsonschema.exceptions import ValidationError

        names = ", ".join(repr(key[:80]) for key in sorted(extras))
        yield ValidationError(f"unexpected argument(s) {names}")


def _on_deadline(keyword: Callable[..., Any]) -> Callable[..., Any]:
    def checked(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _remaining()  # raises CheckTimedOut past the deadline
        return keyword(validator, value, instance, schema)

    return checked


_BOUNDED: dict[type[Any], type[Any]] = {}


def bounded_validator_class(cls: type[Validator]) -> type[Validator]:
    """``cls`` with its regular expressions matched by :func:`search` and a deadline."""
    bounded = _BOUNDED.get(cls)
    if bounded is None:
        from jsonschema.validators import extend

        keywords = dict(cls.VALIDATORS)
        if "pattern" in keywords:
            keywords["pattern"] = _pattern
        if "patternProperties" in keywords:
            keywords["patternProperties"] = _pattern_properties
        if "uniqueItems" in keywords:
            keywords["uniqueItems"] = _unique_items
        if "additionalProperties" in keywords:
            keywords["additionalProperties"] = _additional_properties(
                keywords["additionalProperties"]
            )
        checked = {name: _on_deadline(fn) for name, fn in keywords.items()}
        bounded = extend(cls, checked)  # type: ignore[no-untyped-call]
        _BOUNDED[cls] = bounded
    return bounded


def _walk(node: Any, depth: int = 0) -> Iterator[Mapping[str, Any]]:
    if depth > 200:
        return
    if isinstance(node, Mapping):
        yield node
        for value in node.values():
            yield from _walk(value, depth + 1)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item, depth + 1)


def pattern_problem(schema: Mapping[str, Any]) -> str | None:
    """Why the schema's regular expressions cannot be checked safely, or None."""
    import regex

    nodes = list(_walk(schema))
    patterns: list[str] = []
    for node in nodes:
        if isinstance(node.get("pattern"), str):
            patterns.append(node["pattern"])
        if isinstance(node.get("patternProperties"), Mapping):
            patterns.extend(str(p) for p in node["patternProperties"])
    size = 0
    for pattern in patterns:
        size += compiled_size(pattern, MAX_PATTERN_SIZE - size)
        if size > MAX_PATTERN_SIZE:
            return f"its pattern {pattern[:80]!r} {_too_large()} (with the schema's others)"
    for pattern in patterns:
        try:
            regex.compile(pattern)
        except (regex.error, RecursionError, ValueError, OverflowError) as exc:
            return f"its pattern {pattern[:80]!r} is not a usable regular expression: {exc}"
    if any("patternProperties" in node for node in nodes) and any(
        "unevaluatedProperties" in node for node in nodes
    ):
        return "it combines unevaluatedProperties with patternProperties"
    return None
