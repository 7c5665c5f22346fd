"""bot/investigation: the entity investigation, its assessment and triage."""
