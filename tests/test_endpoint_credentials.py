"""A project can neither redirect the model endpoint nor see the user's key (issue 15 §1).

The reproduction runs the real agent over ACP stdio with the real OpenAI SDK
against two :class:`openai_server.FakeOpenAI` servers on 127.0.0.1: the
user's endpoint (named in the home ``.env``) and a project's (named in the
cloned project's ``.env``).  The project's gets nothing; the agent warns,
naming the variable and the file.  Credentials embedded in the endpoint URL
never reach an error answer or a log line.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from acp import text_block
from openai_server import Fail, FakeOpenAI, Reply, serve

from tool_failure_guard.session.config.envconfig import load_env, operator_only
from tool_failure_guard.session.config.redact import RedactingFilter, redact_url
from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    project, home = tmp_path / "project", tmp_path / "home"
    (project / ".qwen").mkdir(parents=True)
    (home / ".qwen").mkdir(parents=True)
    return project, home


@pytest.mark.parametrize("relative", [".env", ".qwen/.env"])
def test_a_project_env_cannot_name_the_endpoint_when_only_the_key_is_exported(
    dirs: tuple[Path, Path], relative: str, caplog: pytest.LogCaptureFixture
) -> None:
    project, home = dirs
    (project / relative).write_text("OPENAI_BASE_URL=http://127.0.0.1:9/v1\n")
    with caplog.at_level(logging.WARNING, logger="session.envconfig"):
        config = load_env(project, home=home, environ={"OPENAI_API_KEY": "sk-user"})
    assert config.get("OPENAI_BASE_URL") is None
    assert config.get("OPENAI_API_KEY") == "sk-user"
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "OPENAI_BASE_URL" in warning and str(project / relative) in warning


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "ANTHROPIC_BASE_URL",
        "GEMINI_API_KEY",
        "OPENAI_CUSTOM_HEADERS",
        "AZURE_OPENAI_ENDPOINT",
        "HF_TOKEN",
    ],
)
def test_every_provider_url_key_or_header_is_operator_only(
    dirs: tuple[Path, Path], name: str
) -> None:
    project, home = dirs
    assert operator_only(name)
    (project / ".env").write_text(f"{name}=from-the-project\n")
    (home / ".qwen" / ".env").write_text(f"{name}=from-the-user\n")
    config = load_env(project, home=home, environ={})
    assert config.get(name) == "from-the-user"
    assert [r.variable for r in config.refused] == [name]
    alone = load_env(project, home=home / "nobody", environ={})
    assert alone.get(name) is None  # refused, not merely outranked


def test_ordinary_settings_are_not_operator_only() -> None:
    assert not operator_only("EDITOR") and not operator_only("OPENAI_MODEL_HINT")


def test_url_credentials_are_redacted() -> None:
    text = "cannot reach http://alice:s3cret@gw.example/v1 nor https://tok@h/x; ok http://h/a@b"
    assert redact_url(text) == (
        "cannot reach http://***@gw.example/v1 nor https://***@h/x; ok http://h/a@b"
    )
    record = logging.LogRecord(
        "httpx", logging.INFO, "x", 1, "HTTP Request: POST %s", ("http://u:pw@h/v1",), None
    )
    RedactingFilter().filter(record)
    assert record.getMessage() == "HTTP Request: POST http://***@h/v1"


def _prompt_once(
    root: Path, project: Path, home: Path, env: dict[str, str]
) -> tuple[list[object], str]:
    client = RecordingClient()
    stderr_path = root / "agent.stderr"

    async def go() -> list[object]:
        with stderr_path.open("w") as stderr:
            async with spawn_guarded_agent(
                client,
                mode="shadow",
                state_dir=root / "state",
                home=home,
                scenario=None,
                extra_args=[
                    "--model",
                    "openai:test-model",
                    "--model-max-retries",
                    "0",
                    "--log-level",
                    "INFO",
                ],
                extra_env=env,
                stderr=stderr,
            ) as conn:
                session = await conn.new_session(cwd=str(project), mcp_servers=[])
                try:
                    return [
                        await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
                    ]
                except Exception as exc:  # an error answer is the result here
                    return [exc]

    responses = asyncio.run(asyncio.wait_for(go(), 60))
    return responses, stderr_path.read_text(encoding="utf-8")


def test_a_cloned_projects_endpoint_never_receives_the_users_key(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    project, home = dirs
    with (
        serve(FakeOpenAI(lambda body: Reply(text="from the user's endpoint"))) as user,
        serve(FakeOpenAI(lambda body: Reply(text="from the project's endpoint"))) as theirs,
    ):
        (home / ".env").write_text(f"OPENAI_BASE_URL={user.base_url}\nOPENAI_API_KEY=sk-user\n")
        (project / ".env").write_text(f"OPENAI_BASE_URL={theirs.base_url}\n")
        responses, stderr = _prompt_once(tmp_path, project, home, {})
    assert theirs.requests == [] and theirs.auth == []
    assert len(user.requests) == 1 and user.auth == ["Bearer sk-user"]
    assert getattr(responses[0], "stop_reason", None) == "end_turn"
    refusals = [line for line in stderr.splitlines() if "OPENAI_BASE_URL" in line]
    assert len(refusals) == 1 and str(project / ".env") in refusals[0]


@pytest.mark.parametrize("password", ["hunter2", "pa'SECRET"], ids=["plain", "quote"])
def test_credentials_in_the_endpoint_url_never_reach_an_error_or_a_log_line(
    tmp_path: Path, dirs: tuple[Path, Path], password: str
) -> None:
    """A quote in the password (issue 33 §4) ends no URL: no part of the password shows."""
    project, home = dirs
    with serve(FakeOpenAI(lambda body: Fail(status=404, message="no such model"))) as fake:
        url = fake.base_url.replace("http://", f"http://alice:{password}@")
        responses, stderr = _prompt_once(
            tmp_path, project, home, {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-user"}
        )
    assert len(fake.requests) == 1  # the endpoint was reached and refused
    error = str(getattr(responses[0], "data", responses[0]))
    assert "404" in error and "***@127.0.0.1" in error
    for part in {password, password[:4], password[-6:]}:
        assert part not in error and part not in stderr
