"""Serve a fake's aiohttp app on a port of this machine (a free one unless one is given)."""

from __future__ import annotations

import ssl
from typing import Any

from aiohttp import web


async def serve(app: web.Application, *, host: str = "127.0.0.1", port: int = 0,
                ssl_context: ssl.SSLContext | None = None, **runner_options: Any) -> tuple[web.AppRunner, int]:
    """The started runner (``cleanup()`` stops it) and the port it listens on. ``runner_options`` go to
    ``web.AppRunner`` (``shutdown_timeout``, ``access_log``)."""
    runner = web.AppRunner(app, **runner_options)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    return runner, int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
