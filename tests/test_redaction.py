"""One redaction for the agent and the analysis: no credential in a URL reaches a message.

The agent's error texts and log lines (``tool_failure_guard/session/config/redact.py``) and the
rollout analysis's ``--clickhouse`` messages both go through
``tool_failure_guard/redaction.py``; these tests hold each to the same cases.
"""

from __future__ import annotations

import ast
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from tool_failure_guard import redaction
from tool_failure_guard.commands.cli import main
from tool_failure_guard.redaction import is_credential_parameter, redact_text, redact_url
from tool_failure_guard.session.config import redact as agent_redact

ROOT = Path(__file__).resolve().parents[1]

#: (URL, what a message may show of it)
CASES = [
    ("http://user:p@ssw0rd@host:8123/db", "http://***@host:8123/db"),
    ("https://tok@h/x", "https://***@h/x"),
    ("http://u:a@b@c@[::1]:8123/", "http://***@[::1]:8123/"),
    (
        "http://host/db?access_token=TOK1&user=bob&API-Key=TOK2",
        "http://host/db?access_token=***&user=bob&API-Key=***",
    ),
    ("https://h/v1?Token=TOK3;password=TOK4", "https://h/v1?Token=***;password=***"),
    ("https://h/cb#id_token=TOK5&state=s", "https://h/cb#id_token=***&state=s"),
    ("https://h/x?private_token=TOK6&keyboard=us", "https://h/x?private_token=***&keyboard=us"),
    ("http://u:pa/ss@host/db", "http://***"),  # a raw "/" in the password: all masked
    ("http://host:8123/a@b", "http://host:8123/a@b"),  # an "@" in the path is not userinfo
    ("http://[::1]:8123/", "http://[::1]:8123/"),
    ("http://host/?key=", "http://host/?key="),
    ("http://user:pa'SECRET@host/v1", "http://***@host/v1"),  # a quote in the password
    (
        "https://h/t?accessToken=TOK7&clientSecret=TOK8&refreshToken=TOK9&privateKey=TOKA",
        "https://h/t?accessToken=***&clientSecret=***&refreshToken=***&privateKey=***",
    ),
]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "model request failed: http://user:pa'SECRET@host/v1: refused",
            "model request failed: http://***@host/v1: refused",
        ),
        ("URL('http://user:pa'SECRET@host/v1')", "URL('http://***@host/v1')"),
        ("at http://u:pa'/SECRET@host/v1 now", "at http://*** now"),  # unsplittable, masked on
        ("'http://host:8080' and \"http://h/a\"", "'http://host:8080' and \"http://h/a\""),
    ],
)
def test_a_quote_in_a_password_ends_no_url_in_a_text(text: str, shown: str) -> None:
    assert redact_text(text) == shown
    assert "SECRET" not in redact_text(text)


@pytest.mark.parametrize(("url", "shown"), CASES)
def test_every_credential_in_a_url_is_masked(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    for secret in ("ssw0rd", "TOK", "pa/ss", "a@b@c", "SECRET"):
        if secret not in shown:
            assert secret not in redact_url(url)


def test_the_credential_parameters_are_a_documented_set() -> None:
    for name in ("access_token", "token", "password", "key", "secret", "api_key", "API-KEY"):
        assert is_credential_parameter(name), name
    for name in ("x-amz-signature", "client_secret", "refresh_token", "my_api_key"):
        assert is_credential_parameter(name), name
    for name in ("accessToken", "clientSecret", "refreshToken", "privateKey", "apiKey"):
        assert is_credential_parameter(name), name  # camelCase read as snake_case
    for name in ("user", "database", "keyboard", "tokenizer", "format", "query_id", "keyName"):
        assert not is_credential_parameter(name), name
    documented = (ROOT / "docs" / "rollout.md").read_text(encoding="utf-8")
    for name in sorted(redaction.CREDENTIAL_PARAMETERS):
        assert f"`{name}`" in documented, name


def test_the_agent_redacts_with_the_same_helper() -> None:
    """A password holding "@" and a key in the query leak nothing from the agent either."""
    text = "POST http://alice:p@ssw0rd@gw.example/v1?api_key=SECRETKEY failed."
    assert agent_redact.redact_url(text) == "POST http://***@gw.example/v1?api_key=*** failed."
    record = logging.LogRecord(
        "httpx", logging.INFO, "x", 1, "HTTP Request: POST %s", (text.split()[1],), None
    )
    agent_redact.RedactingFilter().filter(record)
    assert record.getMessage() == "HTTP Request: POST http://***@gw.example/v1?api_key=***"
    assert agent_redact.redact_url is redact_text


def test_the_analysis_prints_no_credential_of_its_clickhouse_url(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Nothing listens on port 1: the message names the server, never the credentials."""
    for url, shown in [
        ("http://alice:p@ssTAIL@127.0.0.1:1/db", "http://***@127.0.0.1:1/db"),
        ("http://127.0.0.1:1/db?access_token=TOKEN123", "http://127.0.0.1:1/db?access_token=***"),
    ]:
        assert main(["rollout", "check", "--clickhouse", url]) == 2
        captured = capsys.readouterr()
        assert shown in captured.err and captured.out == ""
        assert "TAIL" not in captured.err and "TOKEN123" not in captured.err


def test_the_helper_is_host_neutral_and_the_analysis_loads_no_agent_stack() -> None:
    tree = ast.parse((ROOT / "tool_failure_guard" / "redaction.py").read_text(encoding="utf-8"))
    nodes = list(ast.walk(tree))
    imported = {a.name for n in nodes if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in nodes if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "re"}, imported
    probe = (
        "import sys, tool_failure_guard.rollout.cli, tool_failure_guard.rollout.executors\n"
        "print(sorted(m for m in sys.modules if m == 'acp' or m.startswith(('acp.', "
        "'tool_failure_guard.session.config.redact', 'tool_failure_guard.session.transport', "
        "'tool_failure_guard.session.pipeline', 'tool_failure_guard.session.model'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"
