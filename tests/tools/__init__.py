"""bot/tools: tool schemas and the compact text the model reads."""
