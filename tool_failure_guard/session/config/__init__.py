"""Configuration: env files and refused sources, operator settings, redaction."""
