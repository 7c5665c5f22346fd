"""bot/cards: every card valid, safe with hostile text, and laid out where it is seen (this folder also holds the
Adaptive Cards renderer, a node package)."""
