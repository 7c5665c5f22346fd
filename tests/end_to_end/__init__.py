"""End to end: the bot in the Microsoft 365 Agents Playground and on its rendered page (tests/e2e holds the Playground's
node package)."""
