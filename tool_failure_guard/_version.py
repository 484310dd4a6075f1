"""The version of the installed ``tool-failure-guard`` distribution.

Read from the distribution's own metadata (``importlib.metadata``), so it is the
version pip installed, never a second copy to keep in step.  Run from a source
tree that was never installed, there is no metadata: the version is then
``0+unknown`` (a valid PEP 440 version that sorts below every release).
"""

from __future__ import annotations

from importlib import metadata

#: The distribution name (``pyproject.toml``'s ``[project] name``).
DISTRIBUTION = "tool-failure-guard"
#: The version when no installed distribution's metadata can be found.
UNKNOWN_VERSION = "0+unknown"


def installed_version() -> str:
    """The installed distribution's version, or :data:`UNKNOWN_VERSION`."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return UNKNOWN_VERSION
