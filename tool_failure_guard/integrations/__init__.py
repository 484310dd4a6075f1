"""Framework adapters: the guard inside agents built on popular Python frameworks.

Each adapter is one more *host* of :mod:`tool_failure_guard.core`: it maps the
framework's events onto the core's calls and applies the core's actions; no
adapter re-implements a rule.  Each lives behind its own optional extra and is
never imported by the agent, the core or :mod:`tool_failure_guard` itself:

- ``tool_failure_guard.integrations.pydantic_ai`` (``pip install
  -e '.[pydantic-ai]'``, from a clone): ``RepeatedToolFailureCapability``.
- ``tool_failure_guard.integrations.openai_agents`` (``pip install
  -e '.[openai-agents]'``, from a clone): ``GuardedRunner``.
- ``tool_failure_guard.integrations.langchain`` (``pip install
  -e '.[langchain]'``, from a clone): ``RepeatedToolFailureMiddleware``.

``docs/integrations.md`` has one section per framework, with its outcome table.
"""
