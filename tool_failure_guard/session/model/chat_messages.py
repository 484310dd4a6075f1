"""Session history -> OpenAI-compatible chat-completions messages (and tool definitions).

The mapping, in order (documented in ``docs/session.md``):

* a leading ``system`` message: the coding-agent system prompt;
* a prompt (``kind="prompt"``): one ``user`` message, its texts and any queued
  input left from an earlier prompt (already prefixed
  ``[User message received during tool execution]: ``);
* a model turn: one ``assistant`` message, its text as ``content`` and its
  function calls as ``tool_calls`` (arguments re-encoded as a JSON object);
* function responses: one ``tool`` message per call, in the model's call
  order (a call the history never answered -- an agent that died mid-batch --
  gets a fixed "no result" answer, so the request stays valid);
* fixed system context (the corrective reminder, the stop notices, the todo
  reminder and continuation): a ``system`` message holding the fixed text,
  exactly, at its place in the conversation.  It is the role that says "this
  is not the user"; a ``user`` message would pass the agent's own words off as
  the user's;
* mid-turn input drained between batches: a ``user`` message (it is the
  user's), with its prefix.

Some chat templates (Qwen3's and Llama's, as served by vLLM, and others) refuse a
``system`` message anywhere but first.  :func:`fold_system_context` is the
fallback for such servers: every later fixed system context is moved, verbatim
and oldest first, into the leading system message (still ``system``, still
never ``user``).  The provider switches to it when a request carrying
mid-conversation system context is answered 400 (``session.openai_model``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tool_failure_guard.session.persistence.messages import Message, Part
from tool_failure_guard.session.tools.builtin import Tool

#: The short coding-agent system prompt sent first (``--system-prompt-file`` replaces it).
DEFAULT_SYSTEM_PROMPT = """\
You are a coding agent working in the user's project directory through the tools you \
are given (read_file, write_file, list_directory, run_shell_command). Paths are \
relative to the project directory. Work in small steps: look before you change \
anything, and check the result of each tool call before the next. When a tool fails, \
read the error and change your approach instead of repeating the same call. When the \
task is done, or you are blocked, say so briefly and stop calling tools.
"""

#: What the model is told for a call the history holds no result for.
UNANSWERED_CALL_TEXT = "[no result: the call did not settle before the conversation moved on]"
#: The heading of the folded fixed system context (fallback mapping).
FOLDED_CONTEXT_HEADING = "Fixed system context added during the conversation, oldest first:"

ChatMessage = dict[str, Any]


def tool_definitions(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """The ``tools`` of a request: each tool's one schema, as declared."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.parameters_schema),
            },
        }
        for tool in tools
    ]


def response_text(part: Part) -> str:
    """The content of one ``tool`` message: the output, or the classified failure."""
    if part.status == "success":
        return part.text or "(no output)"
    label = part.status or "error"
    if part.error_type:
        label = f"{label}: {part.error_type}"
    return f"[{label}] {part.text}".rstrip()


def _call(part: Part) -> dict[str, Any]:
    return {
        "id": part.call_id,
        "type": "function",
        "function": {
            "name": part.name,
            "arguments": json.dumps(dict(part.args), ensure_ascii=False),
        },
    }


def _system(text: str) -> ChatMessage:
    return {"role": "system", "content": text}


def _user(texts: Sequence[str]) -> ChatMessage:
    return {"role": "user", "content": "\n\n".join(texts)}


def chat_messages(history: Sequence[Message], system_prompt: str) -> list[ChatMessage]:
    """Map ``history`` to chat messages, fixed system context in place (role ``system``)."""
    messages: list[ChatMessage] = [_system(system_prompt)]
    pending: list[str] = []  # call ids of the last assistant message still unanswered

    def close_calls() -> None:
        for call_id in pending:
            messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": UNANSWERED_CALL_TEXT}
            )
        pending.clear()

    for message in history:
        if message.role == "model":
            close_calls()
            calls = [part for part in message.parts if part.kind == "function_call"]
            text = "".join(message.texts("text"))
            assistant: ChatMessage = {"role": "assistant", "content": text or None}
            if calls:
                assistant["tool_calls"] = [_call(part) for part in calls]
                pending.extend(part.call_id for part in calls)
            elif not text:
                assistant["content"] = ""
            messages.append(assistant)
            continue
        # A user-side message: responses first (they answer the last assistant message),
        # then prompt text, fixed system context and queued input in their recorded order.
        answers = {part.call_id: part for part in message.parts if part.kind == "function_response"}
        for call_id in list(pending):  # the model's call order, whatever the recorded order
            if call_id in answers:
                pending.remove(call_id)
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": response_text(answers[call_id]),
                    }
                )
        close_calls()
        texts: list[str] = []
        for part in message.parts:
            if part.kind in ("text", "queued_input"):
                texts.append(part.text)
            elif part.kind in ("system", "notice"):
                if texts:
                    messages.append(_user(texts))
                    texts = []
                messages.append(_system(part.text))
        if texts:
            messages.append(_user(texts))
    close_calls()
    return messages


def has_later_system(messages: Sequence[ChatMessage]) -> bool:
    return any(m["role"] == "system" for m in messages[1:])


def fold_system_context(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The fallback: every later ``system`` message moves, verbatim, into the first one."""
    head, rest = messages[0], messages[1:]
    folded = [str(m["content"]) for m in rest if m["role"] == "system"]
    if not folded:
        return list(messages)
    content = "\n\n".join([str(head["content"]).rstrip(), FOLDED_CONTEXT_HEADING, *folded])
    return [_system(content), *(m for m in rest if m["role"] != "system")]
