"""Local fakes of the model APIs the real coding-agent CLIs speak, on 127.0.0.1.

``anthropic_messages`` answers Claude Code (the Anthropic Messages API, streamed
as server-sent events); ``openai_responses`` answers the Codex CLI (the OpenAI
Responses API, streamed as server-sent events); ``gemini_api`` answers Gemini CLI
(``generateContent`` / ``streamGenerateContent``, the latter as server-sent
events).  Each plays a script of model
turns (a turn: some text and the tool calls of one assistant message), chosen
by how many assistant turns the request's conversation already holds, so the
agent's own retries and side requests never shift the script.
"""
