"""The command line's room: ``tool-failure-guard`` (:mod:`tool_failure_guard.commands.cli`)
and one module per subcommand (the benchmarks live beside the tests, in ``benches/``).

The top of the house: a command may import any room below it (the library's core and
telemetry, the hosts, the rollout and evaluation tools); nothing imports a command but
:mod:`~tool_failure_guard.commands.cli` and another command (``tests/test_import_graph.py``).
"""
