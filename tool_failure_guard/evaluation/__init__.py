"""The real-model evaluation behind ``make eval`` (docs/evaluation.md).

Never imported by the agent: it drives the agent from outside, as a client,
over ACP stdio.
"""
