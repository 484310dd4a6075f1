"""``tool-failure-guard transcripts``: what the guard would have done on agents' own logs.

An importer per agent (:mod:`tool_failure_guard.transcripts.importers`) maps
that agent's session log onto :class:`~tool_failure_guard.transcripts.model.Run`
values (turns, each with the batch of tool calls one assistant message made,
each call already on the outcome contract); the command replays them through
the same core as the live hosts.  Never imported by the agent or the adapters.
"""
