"""The adapter drivers the shared API set runs against (see ``tests/adapter_api.py``)."""

from __future__ import annotations

import importlib
import os

from adapter_api import ApiDriver

#: One line per adapter driver module.
ADAPTERS: tuple[str, ...] = (
    "pydantic_ai",
    "langchain",
    "openai_agents",
)


def drivers() -> list[ApiDriver]:
    """Every adapter's driver; ``ADAPTER_API_ONLY=name[,name]`` narrows the set (local work)."""
    only = os.environ.get("ADAPTER_API_ONLY")
    names = ADAPTERS if not only else tuple(n for n in ADAPTERS if n in only.split(","))
    return [importlib.import_module(f"adapter_hosts.{name}").DRIVER for name in names]
