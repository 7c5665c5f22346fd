"""bot/terminal: the terminal chat."""
