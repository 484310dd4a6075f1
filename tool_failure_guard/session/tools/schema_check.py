"""Checking a tool's arguments against its one JSON Schema, offline and always settling.

A tool declares its arguments once, as a JSON Schema; :func:`check_arguments`
checks the model's arguments against it before anything runs.  Two rules make
that check safe with schemas from outside (an MCP server's ``inputSchema``):

* it never touches the network: ``$ref`` is resolved in a :mod:`referencing`
  registry that holds only the JSON Schema meta-schemas and the schema itself,
  and refuses to retrieve anything else (jsonschema's default would fetch a
  remote ``$ref`` with a blocking HTTP request, on the event loop);
* it always ends in a verdict: a schema that cannot be used -- malformed, a
  ``$ref`` that resolves nowhere, or one that recurses forever (``"$ref": "#"``)
  -- is found by :func:`schema_problem` when the tool is registered (the MCP
  registry then checks only for "an object", with one warning), and any failure
  while checking is :class:`InvalidToolParams`, never an exception escaping the
  executor;
* it never stalls the agent: regular expressions (``pattern``,
  ``patternProperties``) are matched by a bounded engine and every check has a
  deadline (:mod:`~tool_failure_guard.session.tools.schema_patterns`); the
  executor runs it in a worker thread.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tool_failure_guard.session.tools.schema_patterns import (
    CheckTimedOut,
    bounded_validator_class,
    deadline,
    pattern_problem,
)

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator
    from referencing import Registry

# jsonschema (with referencing and the meta-schemas) is imported at the first check or
# schema registration, not with the agent: a scripted session that never calls a tool
# never loads it, and the agent answers ``initialize`` without it.


class InvalidToolParams(Exception):
    """The model's arguments do not fit the tool's schema; nothing was executed."""


@functools.cache
def offline_registry() -> Registry[Any]:
    """The meta-schemas only, and no retrieval (a ``referencing`` registry's default): any
    other ``$ref`` outside the schema is unresolvable, never fetched."""
    from jsonschema_specifications import REGISTRY as META_SCHEMAS

    registry: Registry[Any] = META_SCHEMAS
    return registry


def __getattr__(name: str) -> Any:
    if name == "OFFLINE_REGISTRY":  # the name this module exported before the lazy import
        return offline_registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def schema_validator(schema: Mapping[str, Any]) -> Validator:
    """A validator for one tool's schema (its ``$schema`` draft, else 2020-12), offline.

    A malformed schema raises :class:`jsonschema.exceptions.SchemaError` here:
    built-in schemas are checked by the tests, MCP schemas when registered.
    """
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator)
    cls.check_schema(dict(schema))
    validator: Validator = bounded_validator_class(cls)(schema, registry=offline_registry())
    return validator


def _refs(node: Any, depth: int = 0) -> Iterator[str]:
    """Every ``$ref`` / ``$dynamicRef`` string in a schema (bounded depth)."""
    if depth > 200:
        return
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("$ref", "$dynamicRef", "$recursiveRef") and isinstance(value, str):
                yield value
            else:
                yield from _refs(value, depth + 1)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item, depth + 1)


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why ``schema`` cannot be used to check arguments, or None when it can.

    Malformed (not a JSON Schema), a ``$ref`` that resolves nowhere offline, or
    checking an empty object fails with something other than a verdict (a
    ``$ref`` cycle recursing forever).
    """
    from jsonschema.exceptions import SchemaError, best_match
    from referencing.jsonschema import DRAFT202012, specification_with

    try:
        validator = schema_validator(schema)
    except SchemaError as exc:
        return f"not a valid JSON Schema: {exc.message}"
    except Exception as exc:
        return f"not a usable JSON Schema: {type(exc).__name__}"
    unsafe = pattern_problem(schema)
    if unsafe is not None:
        return unsafe
    dialect = schema.get("$schema")
    specification = specification_with(
        dialect if isinstance(dialect, str) else "", default=DRAFT202012
    )
    resource = specification.create_resource(dict(schema))
    base = resource.id() or ""
    resolver = offline_registry().with_resource(base, resource).resolver(base_uri=base)
    for ref in _refs(schema):
        try:
            resolver.lookup(ref)
        except Exception:
            return f"its $ref {ref[:200]!r} cannot be resolved offline"
    try:
        best_match(validator.iter_errors({}))
    except RecursionError:
        return "checking it recurses without end (a $ref cycle)"
    except Exception as exc:
        return f"checking it fails: {type(exc).__name__}"
    return None


def _describe(error: ValidationError) -> str:
    """One violation, naming the argument and never echoing its (possibly huge) value."""
    instance: Any = error.instance
    schema: Any = error.schema
    expected: Any = error.validator_value
    where = ".".join(str(p) for p in error.absolute_path)
    subject = f"argument {where!r}" if where else "the arguments"
    if error.validator == "type":
        names = " or ".join(expected) if isinstance(expected, list) else str(expected)
        return f"{subject} must be a {names}, got {_json_type(instance)}"
    if error.validator == "required":
        missing = [name for name in expected if name not in instance]
        return f"missing required argument {missing[0]!r}" if missing else error.message
    if error.validator == "additionalProperties" and "patternProperties" in schema:
        return str(error.message)  # the bounded check named the extras itself
    if error.validator == "additionalProperties":
        allowed = set(schema.get("properties", {}))
        extra = sorted(set(instance) - allowed)
        return f"unexpected argument(s) {', '.join(map(repr, extra))}"
    if error.validator == "minLength" and expected == 1:
        return f"{subject} must not be empty"
    if error.validator in ("exclusiveMinimum", "minimum"):
        return f"{subject} must be a number above {expected}"
    if error.validator == "enum":
        return f"{subject} must be one of {', '.join(map(repr, expected))}"
    return f"{subject} does not fit the tool's schema ({error.validator})"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def check_arguments(validator: Validator, args: Any) -> dict[str, Any]:
    """Check ``args`` against a tool's schema or raise :class:`InvalidToolParams`."""
    if not isinstance(args, Mapping):
        raise InvalidToolParams(f"the arguments must be a JSON object, got {_json_type(args)}")
    from jsonschema.exceptions import best_match

    data = dict(args)
    try:
        with deadline():
            error = best_match(validator.iter_errors(data))
    except CheckTimedOut as exc:
        raise InvalidToolParams(f"the arguments could not be checked: {exc}") from None
    except RecursionError:
        raise InvalidToolParams(
            "the tool's schema cannot be checked: it recurses without end"
        ) from None
    except Exception as exc:  # an unresolvable $ref and the like: a verdict, never a crash
        raise InvalidToolParams(
            f"the tool's schema cannot be checked: {type(exc).__name__}"
        ) from None
    if error is not None:
        raise InvalidToolParams(_describe(error))
    return data
