"""The guarded ACP session: the only layer of tool-failure-guard that does IO."""
