"""bot/commands: the command parser and router, and the first hour of a new user."""
