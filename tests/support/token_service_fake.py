"""A fake Bot Framework token service (what botbuilder's UserTokenClient talks to), on 127.0.0.1.

Speaks the Token API the bot uses for Teams single sign-on: ``GET /api/usertoken/GetToken`` (200 with the stored
token, 404 without), ``POST /api/usertoken/exchange`` (the Teams SSO token in, stored for the user and returned;
400 when ``fail_exchange`` or the token is not one ``accepts`` takes), ``DELETE /api/usertoken/SignOut`` and
``GET /api/botsignin/GetSignInResource`` (the sign-in link and token exchange resource of an OAuthCard). Tokens are
kept per (user id, connection name); ``codes`` maps a magic code (the Sign in button's verifyState) to a token.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support.serving import serve

EXCHANGE_URI = "api://botid-5f0b9a9e-1c2d-4e3f-8a9b-0c1d2e3f4a5b"


@dataclass
class FakeTokenService:
    accepts: Callable[[str], bool] = lambda token: bool(token)
    fail_exchange: bool = False
    delay_s: float = 0.0  # added to every answer (a slow or hanging token service)
    delays_done: int = 0  # delayed answers that were sent: 0 means no client waited one out
    tokens: dict[tuple[str, str], str] = field(default_factory=dict)  # (user id, connection) -> token
    codes: dict[str, str] = field(default_factory=dict)  # magic code -> token
    requests: Counter[str] = field(default_factory=Counter)
    url: str = ""

    def __post_init__(self) -> None:
        self._runner: web.AppRunner | None = None

    async def start(self) -> FakeTokenService:
        app = web.Application(middlewares=[self._slow])
        app.router.add_get("/api/usertoken/GetToken", self._get_token)
        app.router.add_post("/api/usertoken/exchange", self._exchange)
        app.router.add_delete("/api/usertoken/SignOut", self._sign_out)
        app.router.add_get("/api/botsignin/GetSignInResource", self._sign_in_resource)
        self._runner, port = await serve(app, access_log=None, shutdown_timeout=0.2)
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _slow(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
            self.delays_done += 1
        return await handler(request)

    def _key(self, request: web.Request) -> tuple[str, str]:
        return request.query.get("userId", ""), request.query.get("connectionName", "")

    def _token_response(self, request: web.Request, token: str) -> web.Response:
        return web.json_response({"channelId": request.query.get("channelId"),
                                  "connectionName": request.query.get("connectionName"), "token": token,
                                  "expiration": "2099-01-01T00:00:00Z"})

    async def _get_token(self, request: web.Request) -> web.Response:
        self.requests["get_token"] += 1
        code = request.query.get("code")
        if code and code in self.codes:
            self.tokens[self._key(request)] = self.codes.pop(code)
        token = self.tokens.get(self._key(request))
        if token is None:
            return web.json_response({}, status=404)
        return self._token_response(request, token)

    async def _exchange(self, request: web.Request) -> web.Response:
        self.requests["exchange"] += 1
        body = await request.json()
        token = str(body.get("token") or "")
        if self.fail_exchange or not self.accepts(token):
            return web.json_response({"error": {"code": "ExchangeFailed", "message": "token exchange failed"}},
                                     status=400)
        self.tokens[self._key(request)] = token
        return self._token_response(request, token)

    async def _sign_out(self, request: web.Request) -> web.Response:
        self.requests["sign_out"] += 1
        self.tokens.pop(self._key(request), None)
        return web.Response(status=200)

    async def _sign_in_resource(self, request: web.Request) -> web.Response:
        self.requests["sign_in_resource"] += 1
        body: dict[str, Any] = {"signInLink": f"{self.url}/signin?state={request.query.get('state', '')[:40]}",
                                "tokenExchangeResource": {"id": "exchange-1", "uri": EXCHANGE_URI,
                                                          "providerId": "provider-1"}}
        return web.json_response(body)
