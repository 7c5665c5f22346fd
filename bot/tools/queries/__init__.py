"""The read tools declared in modules of their own: each refers to its query's declaration (``bot.sentinel.queries``)
and adds what only the model and the surfaces need: the description, status text, compact text and card."""
