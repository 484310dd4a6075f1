"""Benchmarks run by `make bench` (each a module: `python -m benches.NAME`)."""
