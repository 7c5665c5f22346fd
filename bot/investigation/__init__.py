"""The entity investigation: which evidence queries fit an entity, running them concurrently (``run``), the typed
result (``models``) and the deterministic assessment computed from it (``assessment``, pure). It sits above the data
layer (it imports only ``bot.sentinel``) and below the tools, which offer it to the model as ``investigate_entity``."""
