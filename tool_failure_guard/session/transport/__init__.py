"""The ACP transport: the agent on stdio, the frame filter, the recording client."""
