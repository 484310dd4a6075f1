"""Persistence: the append-only history, the pending-input log, load replay."""
