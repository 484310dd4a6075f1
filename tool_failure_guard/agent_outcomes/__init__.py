"""How coding agents' tool results map onto the outcome contract, as pure rules.

Two kinds of code read what a coding agent (Claude Code, the Codex CLI, ...)
says about a tool call: the ``transcripts`` importers, over the logs a finished
run left, and the coding-CLI hooks, live, one hook payload at a time.  Both must
type the same result the same way, so the rules live here once, below both:
:mod:`.vocabulary` (the error types, the original's strings where it has one),
:mod:`.claude_code` and :mod:`.codex` (each agent's texts and flags, tried in
order; the first rule that matches decides).  Sans-IO: text in, outcome out.
"""
