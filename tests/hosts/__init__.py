"""The host drivers the shared behaviour set runs against (see ``tests/host_behaviour.py``).

Adding a host: write ``tests/hosts/<name>.py`` defining ``DRIVER``, then add
``"<name>"`` to :data:`HOSTS`.
"""

from __future__ import annotations

import importlib

from host_behaviour import HostDriver

#: One line per host driver module.
HOSTS: tuple[str, ...] = (
    "acp",
    "own_loop",
    "pydantic_ai",
    "openai_agents",
    "langchain",
)


def drivers() -> list[HostDriver]:
    return [importlib.import_module(f"hosts.{name}").DRIVER for name in HOSTS]
