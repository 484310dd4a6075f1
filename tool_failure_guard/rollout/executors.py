"""The seam between the analysis and ClickHouse: execute SQL, return rows.

:class:`ConnectExecutor` is the production path (``clickhouse-connect`` over
HTTP); :class:`ChdbExecutor` is ClickHouse in-process (``chdb``) for the tests.
Every failure is an :class:`~tool_failure_guard.rollout.errors.EngineError`
(bad input, exit 2) whose message names the server with its credentials
masked (:func:`tool_failure_guard.redaction.redact_url`).
"""

from __future__ import annotations

import json
from typing import Any

from tool_failure_guard._extras import require_extra
from tool_failure_guard.redaction import redact_text, redact_url
from tool_failure_guard.rollout.errors import EngineError, Row, first_line

#: ``url`` with its credentials masked (the name the analysis's messages use).
redact = redact_url


class ChdbExecutor:
    """ClickHouse in-process (``chdb``): a session whose tables the tests fill."""

    def __init__(self, path: str | None = None) -> None:
        from chdb import session

        self.session: Any = session.Session(path) if path else session.Session()  # type: ignore[no-untyped-call]

    def __call__(self, text: str) -> list[Row]:
        try:
            result = self.session.query(text, "JSONCompact")
        except Exception as error:  # chdb raises its own error types
            raise EngineError(f"ClickHouse (chdb): {first_line(error)}") from error
        data = result.bytes()
        if not data:
            return []
        return [tuple(r) for r in json.loads(data)["data"]]

    def command(self, text: str) -> None:
        try:
            self.session.query(text)
        except Exception as error:
            raise EngineError(f"ClickHouse (chdb): {first_line(error)}") from error

    def close(self) -> None:
        self.session.close()


def check_url(url: str) -> None:
    """Refuse a ``--clickhouse`` URL no client can use (a bad port, a bad IPv6 literal)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError as error:  # its text may quote the URL: name the fault in our words
        fault = (
            "an IPv6 address that is not [bracketed]"
            if "IPv6" in str(error)
            else "its port is not a number from 0 to 65535"
        )
        raise EngineError(f"{redact(url)} is not a ClickHouse URL: {fault}") from None
    if not parts.scheme or not parts.hostname:
        raise EngineError(
            f"{redact(url)} is not a ClickHouse URL (expected http[s]://[user:password@]host[:port]"
            "[/database])"
        )


class ConnectExecutor:
    """A ClickHouse server through ``clickhouse-connect`` (HTTP), the production path."""

    def __init__(self, url: str, *, connect_timeout: float = 10.0, query_timeout: float = 600.0):
        check_url(url)
        # Without the extra: MissingExtra (its install line, exit 2), never "internal error".
        require_extra("clickhouse", "clickhouse_connect")
        import clickhouse_connect
        from clickhouse_connect.driver.exceptions import ClickHouseError

        self._error = ClickHouseError
        try:
            self.client = clickhouse_connect.get_client(
                dsn=url,
                compress=False,
                connect_timeout=connect_timeout,
                send_receive_timeout=query_timeout,
                autogenerate_session_id=False,
            )
        except Exception as error:  # a bad URL, DNS, TLS, the server's refusal: "cannot reach"
            raise EngineError(
                f"cannot reach ClickHouse at {redact(url)}: {redact_text(first_line(error))}"
            ) from None
        self.url = url

    def __call__(self, text: str) -> list[Row]:
        try:
            return [tuple(r) for r in self.client.query(text).result_rows]
        except self._error as error:
            raise EngineError(
                f"ClickHouse at {redact(self.url)}: {redact_text(first_line(error))}"
            ) from None

    def close(self) -> None:
        self.client.close()
