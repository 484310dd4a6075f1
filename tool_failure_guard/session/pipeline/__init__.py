"""The prompt pipeline: session, prompt, batch, input boundary, outcome records."""
