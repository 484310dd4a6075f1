"""Telemetry, below every host: what the ACP agent and each adapter report, and how.

A room beside :mod:`tool_failure_guard.core`: it imports the guard and the core's values,
never a host, a tool or a command (``tests/test_import_graph.py``).  The vocabulary
(:mod:`~tool_failure_guard.telemetry.names`), the record values and sink protocols
(:mod:`~tool_failure_guard.telemetry.records`) and the OpenTelemetry sink
(:mod:`~tool_failure_guard.telemetry.sink`) need only the OpenTelemetry API (the lean
install); building a sink by name (:mod:`~tool_failure_guard.telemetry.build`) and the OTLP
JSON files (:mod:`~tool_failure_guard.telemetry.otlp_file`) need the SDK, the ``telemetry``
extra, imported only when used.
"""
