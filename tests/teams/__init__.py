"""bot/teams: the front door, the handler, state and storage, watches, changes and escalation through Teams."""
