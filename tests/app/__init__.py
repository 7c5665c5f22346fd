"""bot's top-level modules: the composition (app.py), settings (config.py), telemetry, the Teams app package."""
