"""Tools: the built-ins, the executor's outcome contract, MCP servers and their tools."""
