"""bot/orchestrator: the tool loop, the model client, prompts, memory, the fact check."""
