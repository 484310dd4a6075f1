"""Credentials embedded in a URL never reach an error or a log line.

A model endpoint may carry its credentials in the URL itself
(``https://user:secret@gateway/v1``, ``…/v1?api_key=…``).  :func:`redact_url`
masks the credentials of every URL in a text (the host-neutral
:func:`tool_failure_guard.redaction.redact_text`, which the rollout analysis
uses too); the provider's error texts pass through it, and
:class:`RedactingFilter`, installed on the agent's log handler, applies it to
every log record (the HTTP client's own request lines included).
"""

from __future__ import annotations

import logging

from tool_failure_guard.redaction import redact_text

#: ``text`` with the credentials of every URL in it masked (user information,
#: credential-like query parameters): :func:`tool_failure_guard.redaction.redact_text`.
redact_url = redact_text


class RedactingFilter(logging.Filter):
    """A handler filter: every record's final message has URL credentials redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_url(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            safe = redact_url(text)
            if safe != text:
                record.exc_info, record.exc_text = None, safe
        return True


def install_redaction(logger: logging.Logger | None = None) -> None:
    """Add :class:`RedactingFilter` to every handler of ``logger`` (the root by default)."""
    target = logger if logger is not None else logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
