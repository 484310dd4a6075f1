"""Rollout evidence: the shadow invariants and promotion gates, from exported telemetry.

An optional package (``pip install -e '.[rollout]'``): the agent
never imports it.  ``docs/rollout.md`` is the operator's guide.
"""
