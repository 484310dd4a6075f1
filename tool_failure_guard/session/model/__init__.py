"""Models: the interface, the scripted model, the OpenAI-compatible provider."""
