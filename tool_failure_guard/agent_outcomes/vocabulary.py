"""The importers' outcome vocabulary: the execution error types they emit, and bounded error text.

The error types are the project's (docs/outcome-contract.md);
``tests/test_transcripts_docs.py`` checks that docs/transcripts.md's mapping
tables name exactly these.  A call's error text is kept for the peers' "same
error text" rule, cut to :data:`MAX_ERROR_TEXT` characters.
"""

from __future__ import annotations

from typing import Final

#: The most of a call's error text kept (characters); the rest is cut, marked by an ellipsis.
MAX_ERROR_TEXT: Final = 4096

FILE_NOT_FOUND: Final = "file_not_found"
SHELL_EXECUTE_ERROR: Final = "shell_execute_error"
EXECUTION_TIMEOUT: Final = "execution_timeout"
INVALID_TOOL_PARAMS: Final = "invalid_tool_params"
TOOL_NOT_REGISTERED: Final = "tool_not_registered"
PERMISSION_DENIED: Final = "permission_denied"
MCP_TOOL_ERROR: Final = "mcp_tool_error"
#: A failure the log records as an error but says nothing more about (the original's generic type).
EXECUTION_FAILED: Final = "execution_failed"


def bounded_text(text: str) -> str:
    """``text``, cut to :data:`MAX_ERROR_TEXT` characters (the last one then ``…``)."""
    if len(text) <= MAX_ERROR_TEXT:
        return text
    return text[: MAX_ERROR_TEXT - 1] + "…"
