"""A small round-robin HTTP proxy on 127.0.0.1, as a load balancer in front of several bot instances.

Each request goes to the next backend in turn; one that refuses the connection (a killed instance) is skipped
for the next. A request with the header ``X-Deliver-Twice`` is also delivered to the following backend after the
first answers, as Teams re-sending an activity that lands on another instance.
"""

from __future__ import annotations

import itertools

import aiohttp
from aiohttp import web

from tests.support.serving import serve

TWICE_HEADER = "X-Deliver-Twice"
_HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", TWICE_HEADER.lower()}


class RoundRobin:
    def __init__(self, backends: list[str]) -> None:
        self.backends = backends  # base URLs, e.g. http://127.0.0.1:8001
        self._turn = itertools.count()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""
        self.repeated = 0  # second deliveries made

    async def start(self) -> RoundRobin:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._forward)
        self._runner, port = await serve(app, access_log=None, shutdown_timeout=0.5)
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        first = next(self._turn)
        response, used = await self._deliver(first, request, headers, body)
        if request.headers.get(TWICE_HEADER) and response.status < 500:
            self.repeated += 1
            await self._deliver(used + 1, request, headers, body)
        return response

    async def _deliver(self, start: int, request: web.Request, headers: dict[str, str],
                       body: bytes) -> tuple[web.Response, int]:
        assert self._session is not None
        for attempt in range(start, start + len(self.backends)):
            backend = self.backends[attempt % len(self.backends)]
            try:
                async with self._session.request(request.method, backend + request.path_qs, headers=headers,
                                                 data=body) as answer:
                    return web.Response(status=answer.status, body=await answer.read(),
                                        content_type=answer.content_type), attempt
            except aiohttp.ClientConnectionError:
                continue  # a stopped instance: the next one takes it, as a load balancer's health check would
        return web.Response(status=502, text="no backend answered"), start
