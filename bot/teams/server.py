"""The web app: POST /api/messages (Bot Framework), GET /healthz and /readyz, graceful shutdown.

Requests are checked before the adapter sees them, so a malformed request gets a 4xx with a short
JSON reason and never a 500 with a traceback. The adapter authenticates real traffic (JWT) when an app
id is configured; with none, the bot runs in local mode without authentication, loudly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from botbuilder.core import Storage, TurnContext
from botbuilder.core.serializer_helper import serializer_helper
from botbuilder.integration.aiohttp import CloudAdapter, ConfigurationBotFrameworkAuthentication
from botbuilder.schema import Activity

from bot.config import Settings
from bot.orchestrator.confirmations import ConfirmationDesk
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.memory import Memory, MemoryPolicy, TokenCounter
from bot.sentinel.client import SentinelClient
from bot.sentinel.identity import UserSessions
from bot.teams.access import TokenSource, TurnLimits, access_policy
from bot.teams.connectors import CachingAuthentication, auth_record
from bot.teams.front_door import ChannelTokens, Refused, ServiceUrls, SigningKeys, parse_body
from bot.teams.handler import PLACE_STATE_KEY, SentinelBot
from bot.teams.progress import send_with_retry, shows_typing
from bot.teams.signin import SignIn
from bot.teams.state import StateStore
from bot.teams.storage import EscapedBlobStorage
from bot.teams.watches import AdapterSender, BlobLease, StoreLease, WatchPoller, WatchStore, sentinel_feed
from bot.turns.contract import Envelope, TurnQueue
from bot.turns.runner import Place, TurnRunner, run_with_deadline
from bot.turns.supervisor import WorkerProcesses
from bot.turns.worker import TurnWorker

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 256_000  # a Teams activity is a few KB; files arrive as links, not in the body
FEEDBACK_WAIT_S = 0.1  # the longest a queued turn's typing indicator waits for the acknowledgements in flight
LOOPBACK_REMOTES = ("127.0.0.1", "::1")  # the operator on the machine sees /readyz's details
BOT_KEY = web.AppKey("bot", SentinelBot)
RUNNER_KEY = web.AppKey("runner", TurnRunner)
POLLER_KEY = web.AppKey("watch_poller", WatchPoller)


@dataclass
class _AuthConfig:
    """The attribute names ConfigurationBotFrameworkAuthentication reads."""

    APP_ID: str
    APP_PASSWORD: str
    APP_TYPE: str
    APP_TENANTID: str


def channel_tokens(settings: Settings) -> ChannelTokens | None:
    """The channel token check (None in local mode, without an app id)."""
    if not settings.microsoft_app_id:
        return None
    return ChannelTokens(settings.microsoft_app_id, SigningKeys(settings.openid_metadata_url),
                         tenants=settings.allowed_tenants)


def create_adapter(settings: Settings, tokens: ChannelTokens | None = None) -> CloudAdapter:
    if not settings.microsoft_app_id:
        log.warning("MICROSOFT_APP_ID is empty: LOCAL MODE, requests are NOT authenticated. "
                    "Never expose this endpoint; set the bot identity for Teams.")
    app_type = settings.microsoft_app_type if settings.microsoft_app_id else "MultiTenant"
    config = _AuthConfig(settings.microsoft_app_id or "", settings.microsoft_app_password or "",
                         app_type, settings.microsoft_app_tenant_id or "")
    adapter = CloudAdapter(CachingAuthentication(ConfigurationBotFrameworkAuthentication(config), tokens))

    async def on_error(context: Any, error: Exception) -> None:
        # Errors inside a turn are handled there; this catches adapter-level failures.
        log.error("adapter error: %s", type(error).__name__, exc_info=error)

    adapter.on_turn_error = on_error
    return adapter


@dataclass
class Surface:
    """The bot and the adapter that runs its turns: the same in the web process and in a queue worker process."""

    bot: SentinelBot
    adapter: CloudAdapter
    tokens: ChannelTokens | None
    settings: Settings

    @property
    def authentication(self) -> CachingAuthentication:
        authentication = self.adapter.bot_framework_authentication
        assert isinstance(authentication, CachingAuthentication)
        return authentication

    async def run_queued(self, envelope: Envelope) -> None:
        """A queued turn, as the web process would run it: typing first, then the turn within its deadline."""
        activity = Activity().deserialize(envelope.activity)
        auth = self.authentication.trusted(envelope.auth)
        if self.bot.addressed_to_bot(activity):
            try:
                await _typing_first(activity, auth, self.bot)()
            except Exception:
                log.info("early feedback not delivered", exc_info=True)
        late = notice(activity, auth, deadline_text(self.settings.turn_deadline_seconds))
        await run_with_deadline(lambda: self.adapter.process_activity(auth, activity, self.bot.on_turn),
                                self.settings.turn_deadline_seconds, late)

    async def tell(self, envelope: Envelope, text: str) -> None:
        activity = Activity().deserialize(envelope.activity)
        await notice(activity, self.authentication.trusted(envelope.auth), text)()

    def worker(self, turns: TurnQueue) -> TurnWorker:
        return TurnWorker(turns, self.run_queued, self.tell, concurrency=self.settings.turn_workers,
                          max_attempts=self.settings.turn_max_attempts)


def create_surface(settings: Settings, *, sentinel: SentinelClient, orchestrator: Orchestrator | None,
                   storage: Storage, runner: TurnRunner, desk: ConfirmationDesk | None = None,
                   graph_token: TokenSource | None = None, users: UserSessions | None = None) -> Surface:
    """The bot and its adapter; clients that live on the runner's loop are closed there at stop. With ``users``
    (QUERY_IDENTITY=user) turns that read sign the analyst in and run with their own token."""
    closer = getattr(storage, "close", None)
    if closer is not None:
        runner.add_cleanup(closer)  # its clients live on the runner's loop
    memory = orchestrator.memory if orchestrator is not None else Memory(
        TokenCounter(), MemoryPolicy(max_turns=settings.max_turns, history_tokens=settings.max_history_tokens))
    access = access_policy(settings, graph_token)
    runner.add_cleanup(access.close)  # its Graph clients live on the runner's loop, where turns check access
    limits = TurnLimits(settings.model_turns_per_user_minute, settings.model_turns_per_conversation_minute,
                        settings.model_tokens_per_user_minute, settings.model_tokens_per_conversation_minute)
    bot = SentinelBot(sentinel=sentinel, orchestrator=orchestrator, state=StateStore(storage),
                      runner=runner, memory=memory, capture_content=settings.telemetry_capture_content, desk=desk,
                      access=access, limits=limits,
                      watches=WatchStore(storage) if settings.watches_enabled else None,
                      signin=SignIn(settings.sso_connection_name, users, oauth_url=settings.bot_oauth_url,
                                    local_app_id=settings.sso_app_id) if users is not None else None)
    tokens = channel_tokens(settings)
    surface = Surface(bot, create_adapter(settings, tokens), tokens, settings)
    runner.add_cleanup(surface.authentication.sessions.close)  # the turns' replies go out on the runner's loop
    return surface


def create_app(settings: Settings, *, sentinel: SentinelClient, orchestrator: Orchestrator | None,
               storage: Storage, runner: TurnRunner | None = None, desk: ConfirmationDesk | None = None,
               graph_token: TokenSource | None = None, turn_queue: OpenQueue | None = None,
               poll_watches: bool = False, users: UserSessions | None = None,
               worker_processes: WorkerProcesses | None = None) -> web.Application:
    """The web app. ``graph_token`` gives the bot's Microsoft Graph token for reader groups (default: its app id
    and secret by the client credentials grant). With ``turn_queue`` (TURN_QUEUE=azure or local: it opens a TurnQueue
    on the calling loop), turns are queued durably instead of run here, and taken by workers (this process's too,
    with TURN_WORKER_IN_WEB)."""
    runner = runner or TurnRunner(deadline_s=settings.turn_deadline_seconds)
    surface = create_surface(settings, sentinel=sentinel, orchestrator=orchestrator, storage=storage, runner=runner,
                             desk=desk, graph_token=graph_token, users=users)
    bot, adapter, tokens = surface.bot, surface.adapter, surface.tokens
    authentication = surface.authentication
    durable = _Durable(turn_queue, surface, runner) if turn_queue is not None else None
    poller = _watch_poller(surface, sentinel, storage, desk) if poll_watches else None
    watching: concurrent.futures.Future[None] | None = None
    service_urls = ServiceUrls(settings.allowed_service_urls)
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[BOT_KEY], app[RUNNER_KEY] = bot, runner  # for benchmarks and operations
    if poller is not None:
        app[POLLER_KEY] = poller

    async def messages(request: web.Request) -> web.StreamResponse:
        if durable is None:
            return await handle(request)
        durable.arrived()
        try:
            return await handle(request)
        finally:
            durable.answered()

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            activity, body = await _read_activity(request, service_urls)
        except Refused as refused:
            log.info("refused a request: %s (%d)", refused.reason, refused.status)
            return _problem(refused.status, refused.reason)
        # The turn's place in its conversation's line is taken now, on arrival, before any network call
        # (authentication may fetch signing keys; the typing indicator is sent before the turn runs). A queued
        # message's place is its number in the conversation instead (durable.enqueue), and the runner's thread is
        # not woken for it.
        place = None if durable is not None and activity.type != "invoke" else runner.reserve(activity.conversation.id)
        try:
            return await accept(activity, body, place, request.headers.get("Authorization", ""))
        finally:
            if place is not None:
                runner.release(place)  # a no-op once the turn was submitted

    async def accept(activity: Activity, body: dict[str, Any], place: Place | None,
                     authorization: str) -> web.StreamResponse:
        try:
            # Local mode ignores any header: nothing could check it, and botbuilder would try (and block).
            auth = await authentication.authenticate_request(activity, authorization if tokens else "")
        except Refused as refused:  # one line, no traceback: forged tokens must not flood the log
            log.warning("refused an activity: %s (%d)", refused.reason, refused.status)
            return _problem(refused.status, "The request is not authenticated for this bot." if refused.status == 401
                            else "The bot cannot check credentials just now; retry later.")
        except PermissionError:
            log.warning("refused an activity: not authenticated (401)")
            return _problem(401, "The request is not authenticated for this bot.")
        except Exception as error:  # noqa: BLE001 - never a traceback to the caller, nor a 500 Teams retries
            log.error("could not authenticate an activity: %s", type(error).__name__)
            return _problem(503, "The bot could not authenticate the activity; retry later.")
        if activity.type == "invoke":
            # Invokes need their answer in this response (card actions are acknowledged at once); the turn
            # an invoke starts (handler.on_invoke_activity) runs at this place.
            async def logic(context: TurnContext) -> None:
                context.turn_state[PLACE_STATE_KEY] = place
                await bot.on_turn(context)

            try:
                response = await runner.call(adapter.process_activity(auth, activity, logic))
            except Exception:
                log.exception("could not process an invoke")
                return _problem(500, "The bot could not process the invoke.")
            if response is None:
                return web.Response(status=200)
            if response.status == 501:  # an invoke this bot does not handle: the caller's mistake, not a fault
                return _problem(400, "This bot does not handle that invoke.")
            return web.json_response(serializer_helper(response.body), status=response.status)
        if runner.is_duplicate(activity.conversation.id, activity.id):
            log.info("dropping a repeated delivery of activity %s", activity.id)
            return web.Response(status=200)
        if durable is not None:
            response = await durable.enqueue(activity, body, auth)
            if response.status >= 500:
                runner.forget(activity.conversation.id, activity.id)
            elif bot.addressed_to_bot(activity):
                # The typing indicator goes out from here, once the turn is safely queued: the user sees it even
                # while every worker is busy (the worker sends its own when the turn starts).
                durable.feedback(_typing_first(activity, auth, bot))
            return response
        addressed = bot.addressed_to_bot(activity)
        first = _typing_first(activity, auth, bot) if addressed else None
        abandoned = notice(activity, auth, ABANDONED_TEXT) if addressed else None
        late = notice(activity, auth, deadline_text(settings.turn_deadline_seconds)) if addressed else None
        if not runner.submit(place or activity.conversation.id,
                             lambda: adapter.process_activity(auth, activity, bot.on_turn), first=first,
                             on_abandon=abandoned, on_timeout=late):
            runner.forget(activity.conversation.id, activity.id)
            return _problem(503, "The bot is restarting or overloaded; Teams will retry.")
        return web.Response(status=201)

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def readyz(request: web.Request) -> web.Response:
        checks: dict[str, str] = {}
        try:
            await asyncio.wait_for(runner.call(storage.read(["readyz-probe"])), timeout=5)
            checks["state"] = "ok"
        except Exception as error:  # noqa: BLE001
            checks["state"] = f"failed: {type(error).__name__}"
        checks["workspace"] = "demo" if sentinel.is_demo else "log_analytics"
        checks["language_model"] = "configured" if orchestrator is not None else "not configured (commands only)"
        checks["accepting_turns"] = "yes" if runner.can_accept() else "no"
        ready = checks["state"] == "ok" and runner.can_accept()
        if durable is not None and durable.front is not None:
            try:  # the front can queue nothing without it: Teams' deliveries would get 503s
                waiting = await asyncio.wait_for(durable.front.waiting(), timeout=5)
                checks["turn_queue"] = f"ok, {waiting} turn(s) queued"
            except Exception as error:  # noqa: BLE001
                checks["turn_queue"] = f"failed: {type(error).__name__}"
                ready = False
        workers_short = worker_processes is not None and worker_processes.alive < worker_processes.count
        if worker_processes is not None:
            checks["worker_processes"] = (f"{worker_processes.alive} of {worker_processes.count} running, "
                                          f"{worker_processes.restarts} restart(s)")
        saves = bot.state.health
        if request.remote not in LOOPBACK_REMOTES:
            # Anonymous callers (anyone who can reach the port) learn ready or not, nothing about the setup.
            return web.json_response({"status": "ready" if ready else "not ready"}, status=200 if ready else 503)
        if ready and (saves.degraded or workers_short):
            # Still answering, so still 200: with one instance, taking it out of rotation would stop every turn,
            # only a turn's save can show that saving works again, and a worker process that died is restarted.
            checks["state"] = saves.describe()
            return web.json_response({"status": "degraded", "checks": checks}, status=200)
        return web.json_response({"status": "ready" if ready else "not ready", "checks": checks},
                                 status=200 if ready else 503)

    async def start_runner(_: web.Application) -> None:
        # Everything built at start-up (SDK clients, the demo workspace, tokenizer tables) lives as long as the
        # process; freezing it keeps garbage collection from rescanning it, which otherwise stalls every
        # thread for ~80 ms at each full collection (seen as acknowledgement outliers in bench_teams).
        gc.collect()
        gc.freeze()
        runner.start()
        if durable is not None:
            await durable.start()
        if poller is not None:  # on the runner's loop, where the store, workspace and connector clients live
            nonlocal watching
            watching = runner.background(poller.run())

    async def drain(_: web.Application) -> None:
        grace = settings.shutdown_grace_seconds
        started = time.monotonic()
        if durable is not None:
            await durable.stop()  # the queue's own turns are not lost: unfinished ones reappear for another worker
        if poller is not None and watching is not None:
            runner.call_soon(poller.stop)
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(watching)
        # One grace for both, so the platform's stop time (WEBSITES_CONTAINER_STOP_TIME_LIMIT) still covers it.
        cancelled = await runner.stop(max(0.0, grace - (time.monotonic() - started)))
        log.info("shutdown: running turns finished%s", f"; {cancelled} abandoned after {grace} s" if cancelled else "")

    app.router.add_post("/api/messages", messages)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    async def close_keys(_: web.Application) -> None:
        await authentication.sessions.close()  # early typing indicators went out on this loop
        if tokens is not None:
            await tokens.keys.close()

    app.on_startup.append(start_runner)
    app.on_shutdown.append(drain)
    app.on_cleanup.append(close_keys)
    return app


OpenQueue = Callable[[], TurnQueue]  # opens a TurnQueue whose clients live on the calling loop


def _watch_poller(surface: Surface, sentinel: SentinelClient, storage: Storage,
                  desk: ConfirmationDesk | None) -> WatchPoller | None:
    """The watches' poller (WATCH_POLL_SECONDS; 0: none): one query per interval, under a lease so that one instance
    polls (a blob lease with Blob state, else an item of the state store), posting as the bot through the adapter."""
    settings, store = surface.settings, surface.bot.watches
    if store is None:
        return None
    interval = settings.watch_poll_seconds
    return WatchPoller(store, sentinel_feed(sentinel), AdapterSender(surface.adapter, settings.microsoft_app_id or ""),
                       BlobLease(storage.container()) if isinstance(storage, EscapedBlobStorage)
                       else StoreLease(storage, seconds=2 * interval + 10), interval_s=interval, demo=sentinel.is_demo,
                       changes_buttons=desk is not None and desk.enabled, access=surface.bot.access)


class _Durable:
    """TURN_QUEUE=azure or local in the web process: the front's queue client, and this process's worker if it
    runs one."""

    def __init__(self, open_queue: OpenQueue, surface: Surface, runner: TurnRunner) -> None:
        self._open = open_queue
        self._surface = surface
        self._runner = runner
        self.front: TurnQueue | None = None
        self._worker: TurnWorker | None = None
        self._working: concurrent.futures.Future[None] | None = None
        self._feedback: set[asyncio.Task[None]] = set()
        self._in_flight = 0  # requests on /api/messages being checked and queued
        self._quiet = asyncio.Event()

    async def start(self) -> None:
        self.front = self._open()
        await self.front.ensure()
        if self._surface.settings.web_runs_worker:
            self._working = self._runner.background(self._work())

    async def _work(self) -> None:  # on the runner's loop, where the turns' clients live
        turns = self._open()
        self._worker = self._surface.worker(turns)
        try:
            await self._worker.run(self._surface.settings.shutdown_grace_seconds)
        finally:
            await turns.close()

    async def stop(self) -> None:
        if self._working is not None:
            worker = self._worker
            if worker is not None:
                self._runner.call_soon(worker.stop)
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(self._working)
        if self.front is not None:
            await self.front.close()

    def arrived(self) -> None:
        self._in_flight += 1
        self._quiet.clear()

    def answered(self) -> None:
        self._in_flight -= 1
        if not self._in_flight:
            self._quiet.set()

    def feedback(self, send: Callable[[], Awaitable[None]]) -> None:
        """Send early feedback on this (the web) loop once the requests in flight are answered (at most
        :data:`FEEDBACK_WAIT_S` later): in a burst, every acknowledgement goes out before the typing indicators."""
        async def sending() -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._quiet.wait(), FEEDBACK_WAIT_S)
            try:
                await send()
            except Exception:  # the worker sends typing again when the turn starts
                log.info("early feedback for a queued turn not delivered", exc_info=True)

        task = asyncio.get_running_loop().create_task(sending())
        self._feedback.add(task)
        task.add_done_callback(self._feedback.discard)

    async def enqueue(self, activity: Activity, body: dict[str, Any], auth: Any) -> web.Response:
        """Number the activity in its conversation and queue it (its checked and cleaned JSON: msrest's serialize()
        would drop what its models do not declare, such as a mention's ``mentioned``), acknowledged only once it
        is durable."""
        assert self.front is not None
        conversation = activity.conversation.id
        try:
            await self.front.enqueue(conversation, activity.id or "", body, auth_record(auth))
        except Exception as error:  # noqa: BLE001 - not queued: Teams retries on a 5xx
            log.warning("could not queue a turn (%s)", type(error).__name__)
            return _problem(503, "The bot could not queue the activity; Teams will retry.")
        return web.Response(status=201)


async def _read_activity(request: web.Request, service_urls: ServiceUrls) -> tuple[Activity, dict[str, Any]]:
    """The request's activity and its cleaned JSON, checked before anything else sees them; ``Refused`` otherwise."""
    if "application/json" not in request.headers.get("Content-Type", ""):
        raise Refused(415, "Send the activity as application/json.")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise Refused(413, f"The body is larger than {MAX_BODY_BYTES} bytes.") from None
    body = parse_body(raw)
    if not isinstance(body.get("type"), str) or not body["type"]:
        raise Refused(400, "The body is not a Bot Framework activity (no type).")
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
    return activity, body


def _typing_first(activity: Activity, auth: Any, bot: SentinelBot) -> Callable[[], Awaitable[None]]:
    """The typing indicator, sent as soon as the turn is queued, before it waits for anything."""

    async def send() -> None:
        if not shows_typing(activity):
            return
        connector = await auth.connector_factory.create(activity.service_url, auth.audience)
        typing = Activity(type="typing", from_property=activity.recipient, recipient=activity.from_property,
                          conversation=activity.conversation, channel_id=activity.channel_id,
                          service_url=activity.service_url, reply_to_id=activity.id)
        await send_with_retry(lambda: connector.conversations.send_to_conversation(activity.conversation.id, typing))
        bot.early_typing[(activity.conversation.id, activity.id or "")] = True
        del_over = len(bot.early_typing) - 1000  # turns that never started must not leak
        for key in list(bot.early_typing)[:max(del_over, 0)]:
            bot.early_typing.pop(key, None)

    return send


ABANDONED_TEXT = ("I was restarted before I could finish answering this, so nothing more will come for it. "
                  "Please send it again.")


def deadline_text(deadline_s: int) -> str:
    return (f"I stopped working on this after {deadline_s} s, the longest one answer may take, so nothing more will "
            "come for it. Ask again, perhaps for a shorter time range or fewer results; your other messages are "
            "answered as usual.")


def notice(activity: Activity, auth: Any, text: str) -> Callable[[], Awaitable[None]]:
    """A one-line message to the activity's sender when its turn is cut short (shutdown, deadline, given up), so
    the user learns to resend instead of waiting for nothing."""

    async def send() -> None:
        connector = await auth.connector_factory.create(activity.service_url, auth.audience)
        notice = Activity(type="message", text=text, from_property=activity.recipient,
                          recipient=activity.from_property, conversation=activity.conversation,
                          channel_id=activity.channel_id, service_url=activity.service_url,
                          reply_to_id=activity.id)
        await connector.conversations.send_to_conversation(activity.conversation.id, notice)

    return send


def _problem(status: int, detail: str) -> web.Response:
    return web.Response(status=status, text=json.dumps({"error": detail}), content_type="application/json")
