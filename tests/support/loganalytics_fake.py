"""A fake Log Analytics query endpoint that the real LogsQueryClient talks to over HTTPS.

It speaks the service's wire format (POST /v1/workspaces/{id}/query; tables with typed columns;
dynamic values as JSON strings, datetimes with 7 fractional digits; OneAPI error bodies; partial
errors), records every request, and answers either from a script of responses or from a table of
known queries. TLS comes from a throwaway CA (trustme): the SDK refuses bearer tokens over plain HTTP.

With ``limits`` (``ServiceLimits``) it enforces the service's throttling per caller (the bot, or each user): at most
``concurrent`` queries run at once and the rest wait in its queue (429 past ``max_queued`` waiting or past
``max_queue_s`` of waiting), and at most ``per_window`` queries are accepted per ``window_s`` (429 past it, with a
Retry-After or, as the service may send it, without one). It counts what it saw (``served``, ``throttled``,
``peak``, ``peak_in_flight``), so tests compare events and counts, never times; scaled limits (a window of a
second) keep them quick.
``gate``: an event every query waits for once running, so a test decides when queries finish.
"""

from __future__ import annotations

import asyncio
import json
import math
import ssl
import time
from collections import Counter, defaultdict, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import trustme
from aiohttp import web
from azure.core.credentials import AccessToken
from azure.core.pipeline.transport import AioHttpTransport

from bot.sentinel.queries import QUERIES, spec_of
from tests.support.serving import serve

# The typed columns each query returns, from its declaration (``QuerySpec.result``): the fake serves every declared
# query with no table of its own.
RESULT_TYPES: dict[str, tuple[tuple[str, str], ...]] = {spec.name: spec.result for spec in QUERIES}

TOKEN = "fake-token-for-tests"


class FakeCredential:
    """An AsyncTokenCredential that hands out a fixed token (what a managed identity would do)."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, ...]] = []

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken(TOKEN, int(datetime.now(UTC).timestamp()) + 3600)

    async def close(self) -> None:
        pass

    async def __aenter__(self) -> FakeCredential:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


def encode_value(value: Any, kind: str, dynamic_as_text: bool = True) -> Any:
    """A Python value as the service puts it on the wire."""
    if value is None:
        return None
    if kind == "datetime":
        text = value.isoformat() if isinstance(value, datetime) else str(value)
        # 2026-11-21T14:03:07.123456Z -> 2026-11-21T14:03:07.1234560Z
        return text.replace("+00:00", "Z").replace("Z", "0Z") if "." in text else text
    if kind == "dynamic":
        parsed = json.loads(value) if isinstance(value, str) else value
        return json.dumps(parsed, separators=(",", ":")) if dynamic_as_text else parsed
    return value


def table_body(tool: str, rows: Sequence[Mapping[str, Any]], *, dynamic_as_text: bool = True) -> dict[str, Any]:
    columns = spec_of(tool).result  # a query a test registered too
    return {
        "tables": [
            {
                "name": "PrimaryResult",
                "columns": [{"name": n, "type": t} for n, t in columns],
                "rows": [[encode_value(row.get(n), t, dynamic_as_text) for n, t in columns] for row in rows],
            }
        ]
    }


def error_body(code: str, message: str, inner_code: str | None = None, inner_message: str | None = None) -> dict:
    error: dict[str, Any] = {"code": code, "message": message}
    if inner_code:
        error["innererror"] = {"code": inner_code, "message": inner_message or message}
    return {"error": error}


@dataclass
class Scripted:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    received_at: float = 0.0  # time.monotonic()
    caller: str = "bot"  # "bot" (the bot's TOKEN), or the user object id a user's bearer names (``trust``)


@dataclass(frozen=True)
class ServiceLimits:
    """The service's per-identity throttling (Microsoft Learn, Azure Monitor service limits: log queries)."""

    concurrent: int = 5
    per_window: int = 200
    window_s: float = 30.0
    max_queued: int = 200
    max_queue_s: float = 180.0
    retry_after: bool = True  # a 429 for the rate says when the window has room again


@dataclass
class _Caller:
    """One identity's throttling state in the fake."""

    accepted: deque[float] = field(default_factory=deque)  # arrival times within the window
    running: int = 0
    queued: int = 0
    room: asyncio.Condition = field(default_factory=asyncio.Condition)


class FakeLogAnalytics:
    def __init__(self, tmp_path: Path) -> None:
        self.requests: list[RecordedRequest] = []
        self.script: list[Scripted] = []  # answered first, in order
        self.known: dict[str, dict[str, Any]] = {}  # query text -> 200 body
        self.latency_s = 0.0  # added to every answer (concurrency tests, benchmarks)
        self.answered_at: list[float] = []  # time.monotonic() as each answer's latency ended (it is sent then)
        self.delays_done = 0  # scripted delays that ran to their end: 0 means no client waited one out
        # On-behalf-of tests: reads a user's bearer token (the user object id it names, or None: 401).
        self.trust: Callable[[str], str | None] | None = None
        self.limits: ServiceLimits | None = None  # enforce the service's throttling
        self.gate: asyncio.Event | None = None  # running queries wait for it (tests decide when they finish)
        self.served: Counter[str] = Counter()  # answered (not throttled) queries, by caller
        self.throttled: Counter[str] = Counter()  # 429s for the limits, by reason: rate, queue_full, queue_wait
        self.peak = 0  # most queries of one caller running at once
        self.peak_queued = 0  # most waiting in the fake's queue at once
        self.peak_in_flight = 0  # most of one caller's queries in the fake at once, running or queued
        self._callers: defaultdict[str, _Caller] = defaultdict(_Caller)
        ca = trustme.CA()
        self.ca_file = tmp_path / "fake-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        self._server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(self._server_ssl)
        self._runner: web.AppRunner | None = None
        self.endpoint = ""

    async def start(self) -> FakeLogAnalytics:
        app = web.Application()
        app.router.add_post("/v1/workspaces/{workspace}/query", self._query)
        # a scripted delay still running at stop is cut short, not waited for
        self._runner, port = await serve(app, ssl_context=self._server_ssl, shutdown_timeout=0.5)
        self.endpoint = f"https://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def transport(self) -> AioHttpTransport:
        """An azure-core transport that trusts the fake's CA with one SSL context, so connections are reused.

        (``connection_verify=<CA file>`` would build a new SSL context, and so a new TLS connection, per
        request; production verifies with the default context and reuses connections.)
        """
        context = ssl.create_default_context(cafile=str(self.ca_file))
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context))
        return AioHttpTransport(session=session, session_owner=True)

    def running(self, caller: str) -> int:
        """Queries of ``caller`` running now (with ``limits``)."""
        return self._callers[caller].running if caller in self._callers else 0

    def respond(self, status: int, body: Any, headers: dict[str, str] | None = None, delay_s: float = 0.0) -> None:
        self.script.append(Scripted(status, body, headers or {}, delay_s))

    async def _query(self, request: web.Request) -> web.Response:
        body = await request.json()
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        caller = "bot" if bearer == TOKEN else (self.trust(bearer) if self.trust is not None and bearer else None)
        self.requests.append(RecordedRequest(request.path, dict(request.headers), body, time.monotonic(),
                                             caller or "unknown"))
        if self.limits is not None and caller is not None:
            return await self._limited(caller, lambda: self._answer(body, caller))
        return await self._answer(body, caller)

    async def _answer(self, body: dict[str, Any], caller: str | None) -> web.Response:
        if self.gate is not None:
            await self.gate.wait()
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        self.answered_at.append(time.monotonic())
        if caller is None:
            return web.json_response(error_body("AuthorizationRequiredError", "Valid authentication was not provided"),
                                     status=401)
        if self.script:
            step = self.script.pop(0)
            if step.delay_s:
                await asyncio.sleep(step.delay_s)
                self.delays_done += 1
            if isinstance(step.body, bytes):  # a body that is not JSON (a proxy's page, a cut stream) or none
                return web.Response(body=step.body or None, status=step.status,
                                    headers={"Content-Type": "text/html", **step.headers})
            return web.json_response(step.body, status=step.status, headers=step.headers)
        if body.get("query") in self.known:
            return web.json_response(self.known[body["query"]])
        return web.json_response(
            error_body("BadArgumentError", "The request had some invalid properties", "SemanticError",
                       "The fake has no answer scripted for this query"),
            status=400,
        )

    async def _limited(self, caller: str, answer: Callable[[], Awaitable[web.Response]]) -> web.Response:
        """The service's throttling around one query: the rate checked on arrival, then a place among the running."""
        assert self.limits is not None
        limits, state, now = self.limits, self._callers[caller], time.monotonic()
        while state.accepted and state.accepted[0] <= now - limits.window_s:
            state.accepted.popleft()
        if len(state.accepted) >= limits.per_window:
            wait = state.accepted[0] + limits.window_s - now
            return self._throttle("rate", {"Retry-After": str(max(1, math.ceil(wait)))} if limits.retry_after else {})
        state.accepted.append(now)
        async with state.room:
            if state.running >= limits.concurrent:
                if state.queued >= limits.max_queued:
                    return self._throttle("queue_full", {})
                state.queued += 1
                self.peak_queued = max(self.peak_queued, state.queued)
                self.peak_in_flight = max(self.peak_in_flight, state.queued + state.running)
                try:
                    await asyncio.wait_for(state.room.wait_for(lambda: state.running < limits.concurrent),
                                           limits.max_queue_s)
                except TimeoutError:
                    return self._throttle("queue_wait", {})
                finally:
                    state.queued -= 1
            state.running += 1
            self.peak = max(self.peak, state.running)
            self.peak_in_flight = max(self.peak_in_flight, state.queued + state.running)
        try:
            response = await answer()
            self.served[caller] += 1
            return response
        finally:
            async with state.room:
                state.running -= 1
                state.room.notify_all()

    def _throttle(self, reason: str, headers: dict[str, str]) -> web.Response:
        self.throttled[reason] += 1
        return web.json_response(error_body("ThrottledError", f"Too many requests ({reason})"), status=429,
                                 headers=headers)
