"""The bench's own adapter runs keep the guard's reminder and stop records to themselves.

Each adapter run that reminds or stops writes one ``WARNING`` record to the
``tool_failure_guard`` logger (:class:`~tool_failure_guard.integrations._api.ActionLog`):
how an application without telemetry learns the guard acted.  An application
that configures no logging sees them on stderr through :data:`logging.lastResort`,
and that is the library's behaviour, unchanged.  The bench triggers reminders
and stops on purpose, hundreds of times, so while it measures the adapters
:func:`guard_records_held` puts a filter on that one logger that drops its own
records: each is still built (the work a user's run does up to its handler),
none reaches a handler or stderr.  A logger filter sees only the records
logged on that logger, so an adapter's fail-open warning (on its child logger,
``tool_failure_guard.integrations.<framework>``) still shows: the bench must
not hide an adapter that observes nothing.  The filter is removed on exit,
whatever happened.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from tool_failure_guard.integrations._api import LOGGER_NAME


def _dropped(record: logging.LogRecord) -> bool:
    return False


@contextmanager
def guard_records_held() -> Iterator[None]:
    """While inside, records logged on ``tool_failure_guard`` itself go nowhere."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.addFilter(_dropped)
    try:
        yield
    finally:
        logger.removeFilter(_dropped)
