"""Framework adapters of the guard: optional extras, never imported by the agent or the core."""
