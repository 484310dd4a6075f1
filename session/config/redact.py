"""Credentials embedded in a URL never reach an error or a log line.

A model endpoint may carry its credentials in the URL itself
(``https://user:secret@gateway/v1``).  :func:`redact_url` replaces the user
information of every URL in a text with ``***``; the provider's error texts
pass through it, and :class:`RedactingFilter`, installed on the agent's log
handler, applies it to every log record (the HTTP client's own request lines
included).
"""

from __future__ import annotations

import logging
import re

_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]*@")


def redact_url(text: str) -> str:
    """``text`` with the credentials of every URL in it (``user:secret@``) replaced."""
    return _URL_USERINFO.sub(r"\g<scheme>***@", text)


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
