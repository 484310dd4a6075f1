"""Importing the ACP SDK when the agent starts: the same models, built when first used.

``acp.schema`` declares some 270 pydantic models, and importing it was three
quarters of the agent's start-up (``docs/performance.md``).  Two things cost:

* their config asks for attribute docstrings (``use_attribute_docstrings``);
  on Python < 3.13 pydantic finds each class's source by walking frames and
  tokenizing and parsing the class block, twice per class;
* pydantic builds every model's validator and serializer at class creation,
  though one agent uses a few dozen of them.

:func:`import_acp` imports the SDK with two changes in *how*, none in *what*,
both undone as soon as ``acp`` is imported:

1. the attribute docstrings of ``acp.schema``'s top-level classes are read
   from one parse of that file, with pydantic's own visitor
   (``DocstringVisitor``) on each class statement -- what pydantic reads from
   the class block it finds, so every field keeps its description;
2. pydantic's default ``defer_build`` is on: each model's validator and
   serializer is built the first time it is used (pydantic's documented
   deferral), which is what answering ``initialize`` then pays for the few
   models it touches.

The models' fields, descriptions, configs and JSON schemas, and so the wire,
are those of a plain import (``tests/test_sdk_import.py`` compares every
model).  Where this pydantic lacks either hook, or ``acp`` is already imported,
it is a plain ``import acp``.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCHEMA_MODULE = "acp.schema"


def _schema_docstrings(visitor: Callable[[], Any]) -> dict[str, dict[str, str]] | None:
    """Attribute docstrings of each top-level class of acp/schema.py, without importing acp."""
    spec = importlib.util.find_spec("acp")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations)), "schema.py")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    found: dict[str, dict[str, str]] = {}
    repeated: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            reader = visitor()
            reader.generic_visit(node)
            if node.name in found:
                repeated.add(node.name)
            found[node.name] = reader.attrs
    for name in repeated:  # which one a class is only its frame knows: pydantic's own way
        del found[name]
    return found


def import_acp() -> None:
    """``import acp``, its docstrings read from one parse and its models built on first use."""
    if "acp" in sys.modules:
        return
    try:
        from pydantic._internal import _config, _docs_extraction, _fields
    except ImportError:  # pragma: no cover - another pydantic layout
        _config = _docs_extraction = _fields = None  # type: ignore[assignment]
    undo: list[Callable[[], None]] = []
    try:
        original = getattr(_fields, "extract_docstrings_from_cls", None)
        visitor = getattr(_docs_extraction, "DocstringVisitor", None)
        documented = _schema_docstrings(visitor) if original and visitor else None
        if original is not None and documented is not None:

            def docstrings(cls: type[Any], use_inspect: bool = False) -> dict[str, str]:
                if cls.__module__ == SCHEMA_MODULE and cls.__qualname__ in documented:
                    return dict(documented[cls.__qualname__])
                return original(cls, use_inspect)  # type: ignore[no-any-return]

            setattr(_fields, "extract_docstrings_from_cls", docstrings)  # noqa: B010
            undo.append(lambda: setattr(_fields, "extract_docstrings_from_cls", original))
        defaults = getattr(_config, "config_defaults", None)
        if isinstance(defaults, dict) and defaults.get("defer_build") is False:
            defaults["defer_build"] = True
            undo.append(lambda: defaults.__setitem__("defer_build", False))
        import acp  # noqa: F401
    finally:
        for step in reversed(undo):
            step()
