"""No credential in an index or endpoint URL reaches the evaluation's messages (issue 41.1).

The set-up used its own redaction, which masked a URL's user information only: an index
URL carrying its credential in the query (``?token=...``, ``access_token=...``, as
private indexes hand them out) was printed whole when the set-up failed.  It now uses
:func:`tool_failure_guard.redaction.redact_url`, the one the agent and the rollout
analysis use.  The set-up runs here as ``make eval-setup`` runs it: ``python -m
tool_failure_guard.evaluation.setup_model`` from the checkout, without site-packages
(it must run before anything is installed), against a local index on 127.0.0.1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_eval_setup import _serve

from tool_failure_guard.evaluation import pinned_sdist, server

ROOT = Path(__file__).resolve().parents[1]
CLOSED_PORT = "127.0.0.1:9"  # nothing listens: connection refused at once


def _leaks(secret: str, text: str) -> list[str]:
    """Every 4-character piece of ``secret`` that appears in ``text``."""
    return [secret[i : i + 4] for i in range(len(secret) - 3) if secret[i : i + 4] in text]


def _set_up(index_url: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env.update(
        PIP_INDEX_URL=index_url,
        PIP_EXTRA_INDEX_URL="",
        PIP_CONFIG_FILE=os.devnull,
        TFG_EVAL_CACHE=str(cache),
    )
    command = [sys.executable, "-S", "-m", "tool_failure_guard.evaluation.setup_model"]
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("query", "secrets"),
    [
        ("?token=Tq7vXw9Zk2Lm", ["Tq7vXw9Zk2Lm"]),
        ("?access_token=Ab3dEf5hIj7k&page=1", ["Ab3dEf5hIj7k"]),
        ("?accessToken=Zy9xWv8uTs7r", ["Zy9xWv8uTs7r"]),
    ],
    ids=["token", "access_token", "camelCase"],
)
@pytest.mark.parametrize("reached", [True, False], ids=["index-404", "refused"])
def test_the_set_ups_failure_names_the_index_without_its_credential(
    tmp_path: Path, query: str, secrets: list[str], reached: bool
) -> None:
    login = "eval:Pw4sSecretPw"
    serving = _serve()
    index = next(serving)
    try:
        host = index.url.removeprefix("http://") if reached else f"{CLOSED_PORT}/simple/"
        done = _set_up(f"http://{login}@{host}{query}", tmp_path / "cache")
    finally:
        serving.close()
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "eval set-up failed: " in done.stderr
    assert ("no index lists" in output) == reached
    assert "***" in output  # the URL is named, its credentials masked
    for secret in [*secrets, login.split(":")[1]]:
        assert _leaks(secret, output) == [], output
    if reached:  # the index was asked, with the query as pip was given it
        assert index.requests and index.requests[0][0].startswith("/simple/" + query)


def test_pinned_sdist_keeps_no_redaction_of_its_own() -> None:
    assert not hasattr(pinned_sdist, "redact")
    assert pinned_sdist.redact_url is server.redact_url


def test_a_slot_erase_that_fails_names_the_endpoint_without_its_credential() -> None:
    with pytest.raises(server.EndpointError) as failed:
        server.erase_slot(f"http://user:Pw4sSecretPw@{CLOSED_PORT}/v1?api_key=Kq8wEr7tYu6i")
    message = str(failed.value)
    assert message.startswith(f"POST http://***@{CLOSED_PORT}/") and "api_key=***" in message
    assert _leaks("Pw4sSecretPw", message) == [] and _leaks("Kq8wEr7tYu6i", message) == []
