"""The coding-CLI hooks: a host of the core inside Claude Code (and the other CLIs' hooks).

A coding CLI runs one short process per hook event; each process reads one
payload (:mod:`~tool_failure_guard.hooks.payload`), loads the session's state
under a lock (:mod:`~tool_failure_guard.hooks.state`), lets the CLI's module
say what the event means (:mod:`~tool_failure_guard.hooks.claude_code`), has
the one core reduce a settled batch by replaying the prompt's stored batches
(:mod:`~tool_failure_guard.hooks.prompt`), and answers on stdout.  Any internal
error answers nothing (:mod:`~tool_failure_guard.hooks.run`: fail open).
:mod:`~tool_failure_guard.hooks.install` writes the hook's entries into a
settings file.  No rule lives here: every decision is
:class:`tool_failure_guard.core.PromptProtection`'s.
"""
