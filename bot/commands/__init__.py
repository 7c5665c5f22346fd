"""Typed commands that answer without the language model, shared by every surface (Teams, terminal).

``parser`` reads "incidents 24h high", "incident [2]", "assign [2] to me" ... into a ``Command``;
``router`` decides what a line of text asks for and runs what can run here (queries, clear, prefer),
handing back a typed ``Routed`` for the surface to render.
"""
