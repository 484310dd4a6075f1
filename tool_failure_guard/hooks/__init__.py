"""The guard as coding CLIs' command hooks: hosts of the one core (``docs/hooks.md``)."""
