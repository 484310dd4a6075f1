"""Telemetry sinks: counter and diagnostic log, outcome records, OTLP files."""
