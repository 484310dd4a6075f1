"""The benchmarks behind ``make bench``: beside the tests, never installed.

``python -m benches`` times the guard, the core, start-up, history, ``transcripts`` and the
framework adapters (:mod:`benches.guard` says how); ``python -m benches.rollout`` times the
rollout analysis; ``python -m benches.hooks`` the coding-CLI hooks' cost per event; the
adapter benches also run alone (``python -m benches.adapters``).  They print numbers and
assert nothing about time; ``tests/test_bench*.py`` check what they compare.
"""
