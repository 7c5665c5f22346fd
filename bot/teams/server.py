"""The web routes: POST /api/messages (Bot Framework), GET /healthz and /readyz, given parts bot.app built.

Requests are checked before the adapter sees them, so a malformed request gets a 4xx with a short
JSON reason and never a 500 with a traceback. The adapter authenticates real traffic (JWT) when an app
id is configured; with none, the bot runs in local mode without authentication, loudly. An accepted activity's
turn goes to the dispatcher (dispatch.py): run here in the background, or queued durably.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from botbuilder.core import Storage
from botbuilder.core.serializer_helper import serializer_helper
from botbuilder.schema import Activity, ActivityTypes

from bot.teams.dispatch import Dispatcher, problem
from bot.teams.front_door import Refused, Scope, ServiceUrls, check_token_tenant, conversation_scope, parse_body
from bot.teams.handler import SentinelBot
from bot.teams.watches import WatchPoller
from bot.turns.runner import Place, TurnRunner
from bot.turns.supervisor import WorkerProcesses

log = logging.getLogger(__name__)
KNOWN_TYPES = frozenset(kind.value for kind in ActivityTypes)  # the Bot Framework's activity types
MAX_BODY_BYTES = 256_000  # a Teams activity is a few KB; files arrive as links, not in the body
LOOPBACK_REMOTES = ("127.0.0.1", "::1")  # the operator on the machine sees /readyz's details
BOT_KEY = web.AppKey("bot", SentinelBot)
RUNNER_KEY = web.AppKey("runner", TurnRunner)
POLLER_KEY = web.AppKey("watch_poller", WatchPoller)
MIN_FREE_BYTES = 16 * 1024 * 1024  # less free space beside the local queue: enqueues are about to fail
QUEUE_FAILED_S = 10.0  # after a failed enqueue, /readyz says not ready this long (then the next retry tells again)


def free_bytes(folder: Path) -> int:
    """Free space on the disk holding ``folder`` (tests replace it)."""
    return shutil.disk_usage(folder).free


@dataclass
class WebParts:
    """What the routes need, built by bot.app: where turns go, the state store /readyz probes, the serviceUrl
    allow-list, and the worker processes /readyz reports (TURN_WORKER_PROCESSES)."""

    dispatcher: Dispatcher
    storage: Storage
    service_urls: ServiceUrls
    workers: WorkerProcesses | None = None


class _ServerLog(logging.LoggerAdapter):
    """aiohttp's server logger, but a request it could not parse (a header line over its 8,190-byte limit, a malformed
    request line: anyone who reaches the port can send one) is one line, not a traceback per request. aiohttp has
    answered it 400 already; every other error it logs is logged as before."""

    def log(self, level: int, msg: object, *args: object, exc_info: Any = None, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            log.info("refused a request aiohttp could not read: %s (%s)", type(exc_info).__name__,
                     exc_info.code or 400)
            return
        super().log(level, msg, *args, exc_info=exc_info, **kwargs)


def web_app(parts: WebParts) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES,
                          handler_args={"logger": _ServerLog(logging.getLogger("aiohttp.server"), {})})
    app[BOT_KEY], app[RUNNER_KEY] = parts.dispatcher.surface.bot, parts.dispatcher.runner  # benchmarks, operations
    routes = _Routes(parts)
    app.router.add_post("/api/messages", routes.messages)
    app.router.add_get("/healthz", routes.healthz)
    app.router.add_get("/readyz", routes.readyz)
    return app


class _Routes:
    def __init__(self, parts: WebParts) -> None:
        self.parts = parts
        self.dispatcher = parts.dispatcher
        self.surface = parts.dispatcher.surface

    async def messages(self, request: web.Request) -> web.StreamResponse:
        with self.dispatcher.request():
            try:
                activity, body, scope = await _read_activity(request, self.parts.service_urls)
            except Refused as refused:
                log.info("refused a request: %s (%d)", refused.reason, refused.status)
                return problem(refused.status, refused.reason)
            place = self.dispatcher.reserve(activity)
            try:
                return await self._accept(activity, body, scope, place, request.headers.get("Authorization", ""))
            finally:
                if place is not None:
                    self.dispatcher.runner.release(place)  # a no-op once the turn was submitted

    async def _accept(self, activity: Activity, body: dict[str, Any], scope: Scope, place: Place | None,
                      authorization: str) -> web.StreamResponse:
        auth = await self._authenticate(activity, authorization)
        if isinstance(auth, web.Response):
            return auth
        try:
            check_token_tenant(scope, getattr(auth.claims_identity, "claims", None) or {})
        except Refused as refused:
            log.info("refused a request: %s (%d)", refused.reason, refused.status)
            return problem(refused.status, refused.reason)
        if activity.type == "invoke":
            return await self._invoke(activity, body, auth, place)
        if activity.type not in KNOWN_TYPES:  # botbuilder would run a turn that does nothing, silently
            log.info("ignored an activity of a kind this bot does not know: %r", activity.type[:32])
            return web.Response(status=200)
        return await self.dispatcher.dispatch(activity, body, auth, place)

    async def _authenticate(self, activity: Activity, authorization: str) -> Any:
        """The activity's authentication result, or the response refusing it."""
        try:
            # Local mode ignores any header: nothing could check it, and botbuilder would try (and block).
            return await self.surface.authentication.authenticate_request(
                activity, authorization if self.surface.tokens else "")
        except Refused as refused:  # one line, no traceback: forged tokens must not flood the log
            log.warning("refused an activity: %s (%d)", refused.reason, refused.status)
            return problem(refused.status, "The request is not authenticated for this bot." if refused.status == 401
                           else "The bot cannot check credentials just now; retry later.")
        except PermissionError:
            log.warning("refused an activity: not authenticated (401)")
            return problem(401, "The request is not authenticated for this bot.")
        except Exception as error:  # noqa: BLE001 - never a traceback to the caller, nor a 500 Teams retries
            log.error("could not authenticate an activity: %s", type(error).__name__)
            return problem(503, "The bot could not authenticate the activity; retry later.")

    async def _invoke(self, activity: Activity, body: dict[str, Any], auth: Any, place: Place | None
                      ) -> web.Response:
        try:
            response = await self.dispatcher.invoke(activity, body, auth, place)
        except Exception:
            log.exception("could not process an invoke")
            return problem(500, "The bot could not process the invoke.")
        if response is None:
            return web.Response(status=200)
        if response.status == 501:  # an invoke this bot does not handle: 501, as Bot Framework SDKs answer
            log.info("an invoke this bot does not handle: %r (501)", (activity.name or "")[:64])
            return problem(501, "This bot does not handle that invoke.")
        return web.json_response(serializer_helper(response.body), status=response.status)

    async def healthz(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def readyz(self, request: web.Request) -> web.Response:
        checks, ready = await self._checks()
        if request.remote not in LOOPBACK_REMOTES:
            # Anonymous callers (anyone who can reach the port) learn ready or not, nothing about the setup.
            return web.json_response({"status": "ready" if ready else "not ready"}, status=200 if ready else 503)
        workers = self.parts.workers
        saves = self.surface.bot.state.health
        if ready and (saves.degraded or (workers is not None and workers.taking < workers.count)):
            # Still answering, so still 200: with one instance, taking it out of rotation would stop every turn,
            # only a turn's save can show that saving works again, and a worker process that died is restarted.
            checks["state"] = saves.describe()
            return web.json_response({"status": "degraded", "checks": checks}, status=200)
        return web.json_response({"status": "ready" if ready else "not ready", "checks": checks},
                                 status=200 if ready else 503)

    async def _checks(self) -> tuple[dict[str, str], bool]:
        runner, bot = self.dispatcher.runner, self.surface.bot
        checks: dict[str, str] = {}
        try:
            await asyncio.wait_for(runner.call(self.parts.storage.read(["readyz-probe"])), timeout=5)
            checks["state"] = "ok"
        except Exception as error:  # noqa: BLE001
            checks["state"] = f"failed: {type(error).__name__}"
        checks["workspace"] = "demo" if bot.sentinel.is_demo else "log_analytics"
        checks["language_model"] = "configured" if bot.orchestrator is not None else "not configured (commands only)"
        checks["accepting_turns"] = "yes" if runner.can_accept() else "no"
        queue_ok = await self._queue_check(checks)
        keys_ok = await self._keys_check(checks)
        ready = checks["state"] == "ok" and runner.can_accept() and queue_ok and keys_ok
        if self.parts.workers is not None:
            workers = self.parts.workers
            checks["worker_processes"] = f"{workers.alive} of {workers.count} running, {workers.restarts} restart(s)"
            checks["workers_taking_turns"] = f"{workers.taking} of {workers.count}"
            if not workers.taking and not self.surface.settings.turns.web_runs_worker:
                ready = False  # turns would be queued with nobody to take them (starting, or every worker down)
        return checks, ready

    async def _queue_check(self, checks: dict[str, str]) -> bool:
        """The front can queue nothing without its queue: Teams' deliveries would get 503s."""
        queued = self.dispatcher.queued
        if queued is None or queued.front is None:
            return True
        try:
            waiting = await asyncio.wait_for(queued.front.waiting(), timeout=5)
        except Exception as error:  # noqa: BLE001
            checks["turn_queue"] = f"failed: {type(error).__name__}"
            return False
        turns = self.surface.settings.turns
        failed_s = time.monotonic() - queued.failed_at
        if failed_s < QUEUE_FAILED_S:
            checks["turn_queue"] = f"failed: an activity could not be queued {failed_s:.0f} s ago, {waiting} queued"
            return False
        if turns.queue == "local":
            folder = Path(turns.queue_path).parent
            try:
                free = free_bytes(folder)
            except OSError as error:
                checks["turn_queue"] = f"failed: {type(error).__name__} on {folder}"
                return False
            if free < MIN_FREE_BYTES:
                checks["turn_queue"] = f"failed: {free // 1024} KB free on the queue's disk ({folder})"
                return False
        checks["turn_queue"] = f"ok, {waiting} turn(s) queued"
        return True

    async def _keys_check(self, checks: dict[str, str]) -> bool:
        """With an app id every activity's token is checked against the Bot Framework's signing keys: without any,
        every delivery would get 503."""
        tokens = self.surface.tokens
        if tokens is None:
            return True
        problem_text = await tokens.keys.problem()
        checks["signing_keys"] = "ok" if problem_text is None else f"failed: {problem_text}"
        return problem_text is None


async def _read_activity(request: web.Request, service_urls: ServiceUrls
                         ) -> tuple[Activity, dict[str, Any], Scope]:
    """The request's activity, its cleaned JSON and what its parts agree its conversation is, checked before anything
    else sees them; ``Refused`` otherwise."""
    if "application/json" not in request.headers.get("Content-Type", ""):
        raise Refused(415, "Send the activity as application/json.")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise Refused(413, f"The body is larger than {MAX_BODY_BYTES} bytes.") from None
    body = parse_body(raw)
    if not isinstance(body.get("type"), str) or not body["type"]:
        raise Refused(400, "The body is not a Bot Framework activity (no type).")
    scope = conversation_scope(body)  # may state the conversation's type the body left out, so before the activity
    try:
        activity = Activity().deserialize(body)
    except Exception:  # noqa: BLE001 - msrest raises several types for malformed fields
        raise Refused(400, "The activity could not be read.") from None
    if not activity.conversation or not isinstance(activity.conversation.id, str) or not activity.conversation.id \
            or not isinstance(activity.service_url, str) or not activity.service_url:
        raise Refused(400, "The activity has no conversation or serviceUrl.")
    if not service_urls.allows(activity.service_url):
        # The bot would post its reply, with its credentials, wherever serviceUrl points.
        raise Refused(403, "The activity's serviceUrl is not one this bot replies to.")
    return activity, body, scope
