"""A real model behind the agent: any OpenAI-compatible chat-completions endpoint.

:class:`OpenAIChatModel` implements :class:`~tool_failure_guard.session.model.base.StreamingModel`
with the official ``openai`` SDK (``AsyncOpenAI``): one streamed chat-completions
request per model turn, text deltas passed to the prompt step as they arrive
(it shows them as ``agent_message_chunk``), tool calls assembled from their
deltas, usage from the stream's final chunk (``stream_options.include_usage``).

Endpoint and key are ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` from the
session's merged environment: the process environment or a home-level env file
only (operator-only, see :mod:`~tool_failure_guard.session.config.envconfig`: a project ``.env``
that names another endpoint would receive the user's key).  Credentials in the URL
are redacted in every error text.  Rate limits (429), 408/409 and
5xx answers are retried by the SDK with exponential backoff, at most
``max_retries`` times.  Every failure becomes a :class:`ModelError` whose text
names the cause (authentication, unknown model, context length, rate limit,
server error, unreachable endpoint, a malformed or cut-short stream, see
:mod:`~tool_failure_guard.session.model.openai_stream`); the prompt ends with it and nothing about
the turn is recorded but the text already shown, so the history stays valid.

Cancellation: the prompt step cancels the task running :meth:`generate_streaming`;
the stream's ``finally`` closes the HTTP response, which closes the connection
(an unread streamed body is never put back in the pool), so the server sees
the client go away.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs

from tool_failure_guard.line_input import InputTooLarge, read_small_text
from tool_failure_guard.session.config.redact import redact_url
from tool_failure_guard.session.model.base import ModelError, ModelTurn, ModelUsage, TextSink
from tool_failure_guard.session.model.chat_messages import (
    DEFAULT_SYSTEM_PROMPT,
    ChatMessage,
    chat_messages,
    fold_system_context,
    has_later_system,
    tool_definitions,
)
from tool_failure_guard.session.model.openai_stream import (
    MalformedStream,
    StreamAssembly,
    undecodable,
)
from tool_failure_guard.session.persistence.messages import Message
from tool_failure_guard.session.tools.builtin import Tool

if TYPE_CHECKING:
    # The SDK is imported where a request is made or its error read (``import openai``
    # below), not when the agent starts: start-up costs a scripted agent's, and the
    # import moves to the first model request.
    import openai

_log = logging.getLogger("session.openai_model")

BASE_URL_ENV_VAR = "OPENAI_BASE_URL"
API_KEY_ENV_VAR = "OPENAI_API_KEY"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Retries of a 429 / 408 / 409 / 5xx answer (``--model-max-retries``).
DEFAULT_MAX_RETRIES = 2
CONTEXT_LENGTH_CODE = "context_length_exceeded"


#: Bytes of ``--system-prompt-file`` read (a system prompt is a few KiB): ``/dev/zero`` is refused.
MAX_SYSTEM_PROMPT_BYTES = 1 << 20


class SystemPromptError(ValueError):
    """``--system-prompt-file`` cannot be used; the message names the file."""


def read_system_prompt(path: Path | None) -> str:
    """The system prompt: the file's text, or :data:`DEFAULT_SYSTEM_PROMPT`."""
    if path is None:
        return DEFAULT_SYSTEM_PROMPT
    try:
        text = read_small_text(str(path), MAX_SYSTEM_PROMPT_BYTES, "system prompt file")
    except InputTooLarge as exc:
        raise SystemPromptError(str(exc)) from None
    except OSError as exc:
        raise SystemPromptError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise SystemPromptError(f"{path}: not UTF-8 text: {exc.reason}") from exc
    if not text.strip():
        raise SystemPromptError(f"{path}: the system prompt file is empty")
    return text


@attrs.frozen(kw_only=True)
class Sampling:
    """Optional request parameters; None leaves the endpoint's default."""

    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None

    def request_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if self.temperature is not None:
            fields["temperature"] = self.temperature
        if self.seed is not None:
            fields["seed"] = self.seed
        if self.max_tokens is not None:
            fields["max_tokens"] = self.max_tokens
        return fields


@attrs.frozen(kw_only=True)
class OpenAISettings:
    """What selects and reaches one model; the key never appears in a message."""

    model: str
    base_url: str | None = None  #: None: the SDK's default endpoint
    api_key: str | None = attrs.field(default=None, repr=False)
    max_retries: int = DEFAULT_MAX_RETRIES
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    #: Sampling, sent only when set (``--temperature``, ``--seed``, ``--max-tokens``).
    sampling: Sampling = attrs.field(factory=lambda: Sampling())

    @classmethod
    def from_env(
        cls,
        model: str,
        env: Mapping[str, str],
        *,
        max_retries: int = DEFAULT_MAX_RETRIES,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        sampling: Sampling | None = None,
    ) -> OpenAISettings:
        return cls(
            model=model,
            base_url=env.get(BASE_URL_ENV_VAR) or None,
            api_key=env.get(API_KEY_ENV_VAR) or None,
            max_retries=max_retries,
            system_prompt=system_prompt,
            sampling=sampling or Sampling(),
        )


#: Characters of the endpoint's own words kept in an error (a body may be megabytes).
MAX_SERVER_MESSAGE_CHARS = 1000


def server_message(exc: Exception) -> str:
    """The endpoint's own words (``error.message`` of its body), else the SDK's message."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str) and body["message"]:
        text = str(body["message"])
    else:
        text = str(getattr(exc, "message", None) or exc)
    if len(text) <= MAX_SERVER_MESSAGE_CHARS:
        return text
    cut = len(text) - MAX_SERVER_MESSAGE_CHARS
    return f"{text[:MAX_SERVER_MESSAGE_CHARS]}... [{cut} more characters cut]"


def is_context_length_error(exc: Exception) -> bool:
    """The request is longer than the model's context (servers say so by code or in words)."""
    import openai

    if not isinstance(exc, openai.APIStatusError):
        return False
    detail = server_message(exc).lower()
    return (
        exc.code == CONTEXT_LENGTH_CODE
        or CONTEXT_LENGTH_CODE in detail
        or "maximum context length" in detail
    )


def describe_error(exc: Exception, settings: OpenAISettings) -> str:
    """The cause of a failed request, in words a user can act on (never a traceback).

    Credentials in the endpoint URL (``user:secret@``) are redacted.
    """
    return redact_url(_describe_error(exc, settings))


def _describe_error(exc: Exception, settings: OpenAISettings) -> str:
    import openai

    endpoint = settings.base_url or DEFAULT_BASE_URL
    detail = server_message(exc)
    if isinstance(exc, openai.AuthenticationError):
        return f"authentication failed (HTTP 401) at {endpoint}: check {API_KEY_ENV_VAR} ({detail})"
    if isinstance(exc, openai.PermissionDeniedError):
        return f"permission denied (HTTP 403) for model {settings.model!r}: {detail}"
    if isinstance(exc, openai.NotFoundError):
        return (
            f"unknown model {settings.model!r} or wrong endpoint (HTTP 404) at {endpoint}: {detail}"
        )
    if is_context_length_error(exc):
        return (
            f"the conversation exceeds the context length of model {settings.model!r} "
            f"({CONTEXT_LENGTH_CODE}); start a new session: {detail}"
        )
    if isinstance(exc, openai.RateLimitError):
        return f"rate limited (HTTP 429) after {settings.max_retries} retries: {detail}"
    if isinstance(exc, openai.InternalServerError):
        return (
            f"server error (HTTP {exc.status_code}) after {settings.max_retries} retries: {detail}"
        )
    if isinstance(exc, openai.APIStatusError):
        return f"the model endpoint answered HTTP {exc.status_code}: {detail}"
    if isinstance(exc, openai.APITimeoutError):
        return f"the request to {endpoint} timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot reach the model endpoint {endpoint}: {detail}"
    return f"{type(exc).__name__}: {detail}"


class OpenAIChatModel:
    """A :class:`~tool_failure_guard.session.model.base.StreamingModel` over the chat-completions
    API."""

    def __init__(
        self,
        settings: OpenAISettings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._client: openai.AsyncOpenAI | None = None
        #: Set once the endpoint refused mid-conversation ``system`` messages.
        self.fold_system_context = False

    def _connect(self) -> openai.AsyncOpenAI:
        if self._client is None:
            import openai

            if not self.settings.api_key:
                raise ModelError(
                    f"{API_KEY_ENV_VAR} is not set: set it in the environment or an env "
                    "file (a local server that needs no key accepts any value)"
                )
            self._client = openai.AsyncOpenAI(
                api_key=self.settings.api_key,
                base_url=self.settings.base_url or DEFAULT_BASE_URL,
                max_retries=self.settings.max_retries,
            )
        return self._client

    async def generate(self, history: Sequence[Message]) -> ModelTurn:
        """The plain :class:`~tool_failure_guard.session.model.base.Model` entry: no tools, text
        not streamed out."""

        async def ignore(_: str) -> None:
            return None

        return await self.generate_streaming(history, tools=(), on_text=ignore)

    async def generate_streaming(
        self, history: Sequence[Message], *, tools: Sequence[Tool], on_text: TextSink
    ) -> ModelTurn:
        import openai

        client = self._connect()
        messages = chat_messages(history, self.settings.system_prompt)
        if self.fold_system_context:
            messages = fold_system_context(messages)
        try:
            return await self._stream(client, messages, tools, on_text)
        except openai.BadRequestError as exc:
            if (
                self.fold_system_context
                or not has_later_system(messages)
                or is_context_length_error(exc)
            ):
                raise ModelError(describe_error(exc, self.settings)) from None
            # The endpoint may refuse system messages after the first (many chat
            # templates do): fall back, for the rest of this session, to folding them
            # into the leading system message.  Nothing was streamed: 400 comes first.
            _log.warning(
                "the model endpoint refused the request (HTTP 400: %s); retrying with "
                "fixed system context folded into the leading system message",
                redact_url(server_message(exc)),
            )
            self.fold_system_context = True
            try:
                return await self._stream(client, fold_system_context(messages), tools, on_text)
            except openai.OpenAIError as second:
                self.fold_system_context = False
                raise ModelError(describe_error(second, self.settings)) from None
        except openai.OpenAIError as exc:
            raise ModelError(describe_error(exc, self.settings)) from None

    async def _stream(
        self,
        client: openai.AsyncOpenAI,
        messages: list[ChatMessage],
        tools: Sequence[Tool],
        on_text: TextSink,
    ) -> ModelTurn:
        started = self._clock()
        request: dict[str, Any] = {
            "model": self.settings.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            **self.settings.sampling.request_fields(),
        }
        if tools:
            request["tools"] = tool_definitions(tools)
        import openai

        stream = await client.chat.completions.create(**request)
        turn = StreamAssembly()
        chunks = aiter(cast(Any, stream))
        try:
            while True:
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                except openai.OpenAIError:
                    raise
                except Exception as exc:  # the SDK could not decode a data: line
                    raise _malformed(undecodable(exc)) from None
                try:
                    delta = turn.add(chunk)
                except MalformedStream as exc:
                    raise _malformed(exc) from None
                if delta:
                    await on_text(delta)
            try:
                calls = turn.calls()
            except MalformedStream as exc:
                raise _malformed(exc) from None
        finally:
            # Also on cancellation: closing the unread response closes the connection.
            await stream.close()
        latency = self._clock() - started
        usage = turn.usage
        return ModelTurn(
            text="".join(turn.text),
            calls=calls,
            usage=ModelUsage(
                input_tokens=getattr(usage, "prompt_tokens", None),
                output_tokens=getattr(usage, "completion_tokens", None),
                latency_s=latency,
            ),
        )


def _malformed(exc: MalformedStream) -> ModelError:
    _log.warning("the model's stream is malformed: %s", exc)
    return ModelError(f"malformed stream: {exc}")
