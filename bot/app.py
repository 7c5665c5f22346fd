"""Composition root: reads Settings, builds every client, and wires them together.

Nothing else constructs SDK clients or credentials; everything below receives what it needs, which is
how tests put fakes at the process boundary without patching. One Azure credential is shared by every
Azure client (Log Analytics, Azure OpenAI with Entra ID) and created only when something needs it.

The order it builds in: the clients (``build``: credential, ``UserSessions`` with ``QUERY_IDENTITY=user``, the
workspace client, audited: Log Analytics or the demo workspace of ``bot.demo``, the confirmation desk and its
writer, the orchestrator) and the state store (``set_up``, shared by ``serve`` and ``worker``); the surface
(``build_surface``: access policy, the bot, the adapter); the dispatcher of turns; the watch poller
(``build_poller``); then the web routes. Whoever builds a thing closes it, so this module closes everything: one
``contextlib.AsyncExitStack`` per event loop, closed in reverse order of building (in the web process, the web
loop's and the turns' loop's, which the runner closes on its own loop once its turns are drained).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bot import telemetry
from bot.audit import AuditedSentinelClient
from bot.config import Settings
from bot.orchestrator.changes import ConfirmationDesk, WritePolicy
from bot.orchestrator.changes.escalation import Brake, EscalationLedger
from bot.orchestrator.llm import ChatModel, create_client
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.memory import Memory, MemoryPolicy, TokenCounter
from bot.sentinel.client import SentinelClient
from bot.sentinel.identity import UserSessions
from bot.sentinel.scheduler import QueryLimits, QueryScheduler
from bot.tools.toolbox import ToolBox

if TYPE_CHECKING:  # the Teams surface and durable turns are imported where they are built: `chat` needs neither
    from aiohttp import web

    from bot.teams.access import TokenSource
    from bot.teams.dispatch import Dispatcher, OpenQueue, QueuedTurns
    from bot.teams.handler import SentinelBot
    from bot.teams.links import Workspace
    from bot.teams.surface import Surface
    from bot.teams.watches import WatchPoller
    from bot.turns.runner import TurnRunner
    from bot.turns.supervisor import Supervised, WorkerProcesses
    from bot.turns.worker import TurnWorker

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class Components:
    """The clients every surface shares, built once by :func:`build`."""

    settings: Settings
    sentinel: SentinelClient
    orchestrator: Orchestrator | None = None  # None when no language model is configured
    desk: ConfirmationDesk | None = None  # incident changes (its writer is None when write actions are off)
    users: UserSessions | None = None  # QUERY_IDENTITY=user: each analyst's own credential and clients


def _closed_by(closes: AsyncExitStack, thing: T) -> T:
    """``thing`` (when there is one), its close left to ``closes``: the stack of the loop its clients live on."""
    if thing is not None:
        closes.push_async_callback(thing.close)  # type: ignore[attr-defined]
    return thing


class _LazyCredential:
    """DefaultAzureCredential, created on first use (the demo without Azure never needs one)."""

    def __init__(self) -> None:
        self.credential: Any = None

    def get(self) -> Any:
        if self.credential is None:
            from azure.identity.aio import DefaultAzureCredential

            self.credential = DefaultAzureCredential()
        return self.credential

    async def close(self) -> None:
        if self.credential is not None:
            await self.credential.close()


async def build(settings: Settings, closes: AsyncExitStack) -> Components:
    """Every client, each closed by ``closes`` (in reverse order of building) on the loop that will use them."""
    credential = _closed_by(closes, _LazyCredential())
    users = _closed_by(closes, build_user_sessions(settings))
    sentinel = _closed_by(closes, build_sentinel_client(settings, credential, users))
    await sentinel.prepare()
    desk = build_action_desk(settings, sentinel, credential, users)
    _closed_by(closes, desk.writer)
    orchestrator = build_orchestrator(settings, sentinel, credential, desk)
    _closed_by(closes, orchestrator.model if orchestrator is not None else None)
    return Components(settings, sentinel, orchestrator, desk, users)


def build_user_sessions(settings: Settings, **credential_options: Any) -> UserSessions | None:
    """QUERY_IDENTITY=user: each analyst's on-behalf-of credential, from their Teams single sign-on token, for the
    app registration SSO_APP_ID (with its secret, or with the bot's managed identity as its federated credential).
    ``credential_options`` go to each credential (tests: a transport trusting a fake's certificate)."""
    if settings.access.query_identity != "user":
        return None
    from bot.sentinel import identity
    from bot.sentinel.loganalytics import DEFAULT_ENDPOINT

    tenant_id, access = settings.teams.app_tenant_id, settings.access
    assert access.sso_app_id and tenant_id
    assertion = None
    if not access.sso_client_secret:
        from azure.identity.aio import ManagedIdentityCredential

        assertion = identity.ManagedIdentityAssertion(ManagedIdentityCredential(client_id=settings.teams.app_id))
    factory = identity.on_behalf_of(tenant_id=tenant_id, client_id=access.sso_app_id,
                                    authority=access.login_endpoint, client_secret=access.sso_client_secret,
                                    assertion=assertion, **credential_options)
    scopes = [f"{settings.workspace.logs_endpoint or DEFAULT_ENDPOINT}/.default"]
    if settings.workspace.write_actions_enabled:
        scopes.append(f"{settings.workspace.arm_endpoint}/.default")
    log.info("Reads%s run with each analyst's own permissions (on-behalf-of, app registration %s)",
             " and writes" if settings.workspace.write_actions_enabled else "", settings.access.sso_app_id)
    return identity.UserSessions(factory, scopes=tuple(scopes))


def build_sentinel_client(settings: Settings, credential: _LazyCredential | None = None,
                          users: UserSessions | None = None, **client_options: Any) -> SentinelClient:
    """The workspace client: Log Analytics when SENTINEL_WORKSPACE_ID is set, else the demo workspace."""
    if settings.workspace.uses_demo:
        from bot.demo import changes as demo_changes
        from bot.demo.backend import DemoBackend

        log.debug("No SENTINEL_WORKSPACE_ID set: using the demo workspace (generated data, seed %s)",
                 settings.demo.seed)
        inbox = Path(settings.demo.inbox) if settings.demo.inbox else None
        # With worker processes, serve generates the demo once (at start-up, before they start) and they copy it.
        shared = Path(settings.turns.queue_path).parent / f"demo-workspace-{settings.demo.seed}.sqlite" \
            if settings.turns.worker_processes else None
        # Incident changes are kept beside the inbox, for every process of this demo and the next start.
        changes = demo_changes.beside(inbox) if inbox is not None else None
        return AuditedSentinelClient(DemoBackend(seed=settings.demo.seed, inbox=inbox, shared=shared,
                                                 changes=changes))

    from bot.sentinel.loganalytics import LogAnalyticsBackend, create_logs_client

    assert settings.workspace.workspace_id is not None
    client_options = {"use_env_settings": settings.env_proxies} | client_options
    client = create_logs_client((credential or _LazyCredential()).get(), endpoint=settings.workspace.logs_endpoint,
                                **client_options)
    if users is not None:  # each analyst's queries through their own client (client_options: tests' transport)
        users.add_client("logs", lambda own: create_logs_client(own, endpoint=settings.workspace.logs_endpoint,
                                                                **client_options))
    backend = LogAnalyticsBackend(client, settings.workspace.workspace_id,
                                  server_timeout_s=settings.workspace.query_timeout_seconds, users=users,
                                  scheduler=QueryScheduler(query_limits(settings)))
    return AuditedSentinelClient(backend)  # every read audited with who asked


def query_limits(settings: Settings) -> QueryLimits:
    """This process's share of each identity's Log Analytics budget: every process of the deployment (each
    instance's web process and its worker processes, unless LOGS_BUDGET_SHARES says) takes an equal part."""
    workspace = settings.workspace
    shares = workspace.logs_budget_shares or settings.turns.instance_count * (1 + settings.turns.worker_processes)
    limits = QueryLimits(concurrent=workspace.logs_concurrent_queries, per_window=workspace.logs_queries_per_window,
                         window_s=workspace.logs_window_seconds, queue_wait_s=workspace.logs_queue_wait_seconds)
    share = limits.share(shares)
    log.info("Log Analytics budget per identity in this process: %d at once, %d per %d s (1 of %d share(s))",
             share.concurrent, share.per_window, workspace.logs_window_seconds, shares)
    return share


def build_action_desk(settings: Settings, sentinel: SentinelClient, credential: _LazyCredential | None = None,
                      users: UserSessions | None = None, **writer_options: Any) -> ConfirmationDesk:
    """Incident changes: the demo workspace's own writer, or Sentinel's REST API on Azure Resource Manager.

    With WRITE_ACTIONS_ENABLED off there is no writer at all, and every request to change an incident is
    refused with what the administrator would need to turn it on.
    """
    policy = WritePolicy(settings.workspace.write_actions_enabled, settings.workspace.write_responders)
    if not settings.workspace.write_actions_enabled:
        return ConfirmationDesk(sentinel, None, policy)
    if sentinel.is_demo:
        from bot.demo.writer import DemoIncidentWriter

        log.info("Write actions enabled on the demo workspace for %d responder(s)", len(policy.responders))
        return ConfirmationDesk(sentinel, DemoIncidentWriter.for_client(sentinel), policy)
    from bot.sentinel.incident_writer import ArmIncidentWriter

    assert settings.workspace.writes_configured
    place: dict[str, Any] = {
        "endpoint": settings.workspace.arm_endpoint, "subscription_id": settings.workspace.subscription_id,
        "resource_group": settings.workspace.resource_group, "workspace_name": settings.workspace.workspace_name,
        "api_version": settings.workspace.api_version, "use_env_settings": settings.env_proxies} | writer_options
    writer: Any
    if users is not None:  # each analyst's changes with their own token: Sentinel names them, their roles apply
        from bot.sentinel.identity import AnalystIncidentWriter

        users.add_client("arm", lambda own: ArmIncidentWriter(credential=own, **place))
        writer = AnalystIncidentWriter(users)
    else:
        writer = ArmIncidentWriter(credential=(credential or _LazyCredential()).get(), **place)
    log.info("Write actions enabled (workspace %s) for %d responder(s)", settings.workspace.workspace_name,
             len(policy.responders))
    return ConfirmationDesk(sentinel, writer, policy)


def build_orchestrator(settings: Settings, sentinel: SentinelClient, credential: _LazyCredential | None = None,
                       desk: ConfirmationDesk | None = None) -> Orchestrator | None:
    if settings.model.provider is None:
        log.debug("No language model configured: only commands will be answered")
        return None
    needs_credential = settings.model.provider == "azure" and not settings.model.azure_api_key
    client = create_client(
        azure_endpoint=settings.model.azure_endpoint,
        azure_deployment=settings.model.azure_deployment,
        api_version=settings.model.azure_api_version,
        azure_api_key=settings.model.azure_api_key,
        credential=(credential or _LazyCredential()).get() if needs_credential else None,
        openai_api_key=settings.model.openai_api_key,
        base_url=settings.model.openai_base_url,
    )
    memory = Memory(TokenCounter(), MemoryPolicy(max_turns=settings.model.max_turns,
                                                 history_tokens=settings.model.max_history_tokens))
    return Orchestrator(ChatModel(client, settings.model.name), ToolBox(sentinel), memory,
                        max_rounds=settings.model.max_tool_rounds, max_turn_tokens=settings.model.max_turn_tokens,
                        demo=sentinel.is_demo, desk=desk)


# Automatic instrumentations left off: web frameworks the bot does not use, and database drivers whose spans
# carry SQL text. The ones kept (Azure SDK, httpx, requests, urllib, urllib3) record method, sanitised URL and
# status, never request or response bodies, so prompts and query text stay out of the exported telemetry.
DISABLED_INSTRUMENTATIONS = ("django", "fastapi", "flask", "psycopg2")
SERVICE_NAME = "sentinel-teams-assistant"


def configure_telemetry(settings: Settings) -> bool:
    """Export traces, metrics and the bot's own logs to Application Insights when its connection string is set.

    Without it nothing is installed: the OpenTelemetry API's no-op tracer and meter take the spans and
    measurements the code makes. Once per process (OpenTelemetry's global providers are set once).
    """
    if not settings.telemetry.connection_string:
        log.debug("APPLICATIONINSIGHTS_CONNECTION_STRING is not set: no traces or metrics are exported")
        return False
    from azure.monitor.opentelemetry import configure_azure_monitor
    from opentelemetry.sdk.resources import Resource

    configure_azure_monitor(
        connection_string=settings.telemetry.connection_string,
        resource=Resource.create({"service.name": SERVICE_NAME}),
        logger_name="bot",  # our log lines only: they are written to carry no content; SDKs' lines may not be
        instrumentation_options={name: {"enabled": False} for name in DISABLED_INSTRUMENTATIONS},
    )
    telemetry.add_correlation(logging.getLogger("bot"))  # the exported log records carry the correlation id
    log.info("Exporting traces, metrics and logs to Application Insights%s",
             " (with question text: TELEMETRY_CAPTURE_CONTENT=true)" if settings.telemetry.capture_content else "")
    return True


def managed_identity_graph_token(settings: Settings) -> Any:
    """A Microsoft Graph token source for reader groups when the bot's identity is a managed identity (with an app
    secret, the Teams surface gets its own token)."""
    if not settings.access.reader_groups or settings.teams.app_type != "UserAssignedMSI":
        return None
    from azure.identity.aio import ManagedIdentityCredential

    credential = ManagedIdentityCredential(client_id=settings.teams.app_id)

    async def token() -> str:
        return (await credential.get_token("https://graph.microsoft.com/.default")).token

    return token


def turn_queue_opener(settings: Settings) -> Any:
    """TURN_QUEUE=azure or local: a function that opens the turn queue on the calling loop (Azure: with its own
    credential, or the emulator's connection string; local: the SQLite file); None otherwise."""
    if settings.turns.queue == "local":
        from bot.turns.local_queue import LocalTurnQueue

        return lambda: LocalTurnQueue.open(settings.turns.queue_path)
    if settings.turns.queue != "azure":
        return None
    from bot.turns.azure_queue import AzureTurnQueue

    def open_queue() -> AzureTurnQueue:
        credential = None
        if not settings.storage.blob_connection_string:
            from azure.identity.aio import DefaultAzureCredential

            credential = DefaultAzureCredential()
        return AzureTurnQueue.open(queue_name=settings.turns.queue_name, container=settings.turns.blob_container,
                                   queue_account_url=settings.turns.queue_account_url,
                                   blob_account_url=settings.storage.blob_account_url, credential=credential,
                                   connection_string=settings.storage.blob_connection_string,
                                   use_env_settings=settings.env_proxies)

    return open_queue


def _state_storage(settings: Settings, closes: AsyncExitStack) -> Any:
    """The conversation state store; Blob storage by account URL is reached as the bot's identity."""
    from bot.teams.storage import create_storage

    credential = None
    if settings.storage.state.kind == "blob" and not settings.storage.blob_connection_string:
        from azure.identity.aio import DefaultAzureCredential

        credential = _closed_by(closes, DefaultAzureCredential())
    return create_storage(settings.storage.state.kind, sqlite_path=settings.storage.state.path,
                          blob_connection_string=settings.storage.blob_connection_string,
                          blob_container=settings.storage.blob_container,
                          blob_account_url=settings.storage.blob_account_url, credential=credential,
                          use_env_settings=settings.env_proxies)


async def set_up(settings: Settings, closes: AsyncExitStack) -> tuple[Components, Any]:
    """What ``serve`` and ``worker`` share: telemetry, the clients and the state store, closed by ``closes``: the
    stack of the loop where turns run."""
    configure_telemetry(settings)
    parts = await build(settings, closes)
    return parts, _state_storage(settings, closes)


def build_surface(parts: Components, storage: Any, closes: AsyncExitStack,
                  graph_token: TokenSource | None = None) -> Surface:
    """The bot and its adapter. Their clients (the state store's, Graph's for access, the Bot Connector's) live on
    the loop where turns run, whose stack is ``closes``. ``graph_token``: the bot's Microsoft Graph token for reader
    groups (default: its app id and secret by the client credentials grant)."""
    from bot.teams.surface import Surface, channel_tokens, create_adapter

    if hasattr(storage, "close"):
        _closed_by(closes, storage)
    tokens = channel_tokens(parts.settings)
    surface = Surface(_bot(parts, storage, closes, graph_token), create_adapter(parts.settings, tokens), tokens,
                      parts.settings)
    closes.push_async_callback(surface.authentication.sessions.close)  # the turns' replies go out on that loop
    return surface


def _bot(parts: Components, storage: Any, closes: AsyncExitStack, graph_token: TokenSource | None) -> SentinelBot:
    from bot.teams.access import access_policy
    from bot.teams.handler import SentinelBot
    from bot.teams.state import StateStore
    from bot.teams.storage import create_only_tag
    from bot.teams.watches import WatchStore

    settings = parts.settings
    if parts.desk is not None:  # the escalation brake's record is shared through the state store
        parts.desk.ledger = EscalationLedger(storage, Brake(
            timedelta(minutes=settings.workspace.escalation_repeat_minutes),
            timedelta(seconds=settings.workspace.escalation_cooldown_seconds)), create_only=create_only_tag(storage))
    return SentinelBot(sentinel=parts.sentinel, orchestrator=parts.orchestrator, state=StateStore(storage),
                       memory=_memory(parts), capture_content=settings.telemetry.capture_content, desk=parts.desk,
                       access=_closed_by(closes, access_policy(settings, graph_token)), limits=_turn_limits(settings),
                       watches=WatchStore(storage) if settings.watches_enabled else None,
                       signin=_signin(settings, parts.users), links=_link_workspace(settings))


def _link_workspace(settings: Settings) -> Workspace:
    """The workspace and tenants a pasted portal link must name to unfurl (the demo's own, with the demo)."""
    from bot.demo.catalog import RESOURCE_GROUP, SUBSCRIPTION_ID, TENANT_ID, WORKSPACE_NAME
    from bot.teams.links import Workspace

    workspace, tenants = settings.workspace, frozenset(t.lower() for t in settings.access.tenants)
    if workspace.uses_demo:
        return Workspace(SUBSCRIPTION_ID, RESOURCE_GROUP, WORKSPACE_NAME, tenants | {TENANT_ID})
    return Workspace(workspace.subscription_id or "", workspace.resource_group or "", workspace.workspace_name or "",
                     tenants)


def _memory(parts: Components) -> Memory:
    if parts.orchestrator is not None:
        return parts.orchestrator.memory
    model = parts.settings.model
    policy = MemoryPolicy(max_turns=model.max_turns, history_tokens=model.max_history_tokens)
    return Memory(TokenCounter(), policy)


def _turn_limits(settings: Settings) -> Any:
    from bot.teams.access import TurnLimits

    return TurnLimits(settings.access.turns_per_user_minute, settings.access.turns_per_conversation_minute,
                      settings.access.tokens_per_user_minute, settings.access.tokens_per_conversation_minute)


def _signin(settings: Settings, users: UserSessions | None) -> Any:
    """QUERY_IDENTITY=user: turns that read sign the analyst in and run with their own token."""
    if users is None:
        return None
    from bot.teams.signin import SignIn

    return SignIn(settings.access.sso_connection_name, users, oauth_url=settings.access.bot_oauth_url,
                  local_app_id=settings.access.sso_app_id)


def build_poller(surface: Surface, storage: Any) -> WatchPoller | None:
    """The watches' poller (WATCH_POLL_SECONDS): one query per interval, under a lease so that one instance polls (a
    blob lease with Blob state, else an item of the state store), posting as the bot through the adapter."""
    from bot.investigation.triage import triage
    from bot.teams.storage import EscapedBlobStorage
    from bot.teams.watches import AdapterSender, BlobLease, StoreLease, WatchPoller, sentinel_feed

    settings, bot = surface.settings, surface.bot
    if bot.watches is None:
        return None
    interval = settings.turns.watch_poll_seconds
    lease = BlobLease(storage.container()) if isinstance(storage, EscapedBlobStorage) \
        else StoreLease(storage, seconds=2 * interval + 10)
    return WatchPoller(bot.watches, sentinel_feed(bot.sentinel),
                       AdapterSender(surface.adapter, settings.teams.app_id or ""), lease, interval_s=interval,
                       demo=bot.sentinel.is_demo, changes_buttons=bot.desk is not None and bot.desk.enabled,
                       access=bot.access, triage=functools.partial(triage, bot.sentinel))


def create_app(parts: Components, storage: Any, *, runner: TurnRunner | None = None,
               turn_queue: OpenQueue | None = None, poll_watches: bool = False, workers: WorkerProcesses | None = None,
               graph_token: TokenSource | None = None) -> web.Application:
    """The web app as ``serve`` runs it: the surface, the dispatcher of turns and the watch poller, started and
    stopped with the app; what turns use is closed by ``runner.closes``, on the turns' loop. With ``turn_queue``
    (TURN_QUEUE=azure or local: it opens a TurnQueue on the calling loop), turns are queued durably instead of run
    here, and taken by workers (this process's too, with TURN_WORKER_IN_WEB)."""
    from bot.teams.dispatch import Dispatcher, QueuedTurns
    from bot.teams.front_door import ServiceUrls
    from bot.teams.server import POLLER_KEY, WebParts, web_app
    from bot.turns.runner import TurnRunner

    turns = _TurnsLoop(runner or TurnRunner(deadline_s=parts.settings.turns.deadline_seconds))
    surface = build_surface(parts, storage, turns.runner.closes, graph_token)
    dispatcher = Dispatcher(surface, turns.runner, QueuedTurns(turn_queue) if turn_queue is not None else None)
    poller = build_poller(surface, storage) if poll_watches else None
    app = web_app(WebParts(dispatcher, storage, ServiceUrls(parts.settings.teams.allowed_service_urls), workers))
    if poller is not None:
        app[POLLER_KEY] = poller
    app.cleanup_ctx.append(functools.partial(_running, dispatcher, turns, poller, workers))
    return app


@dataclass
class _TurnsLoop:
    """The turn runner's loop in the web process, and what runs there in the background (the web process's queue
    worker, the watch poller)."""

    runner: TurnRunner
    background: list[tuple[Callable[[], Any], concurrent.futures.Future[None]]] = field(default_factory=list)

    def run(self, coroutine: Any, stop: Callable[[], Any]) -> None:
        self.background.append((stop, self.runner.background(coroutine)))

    async def stop(self, grace_s: float) -> None:
        """The background work first (a queue worker's unfinished turns reappear for another worker), then the
        turns: one grace for both, so the platform's stop time (WEBSITES_CONTAINER_STOP_TIME_LIMIT) still covers it."""
        started = time.monotonic()
        for stop, _ in self.background:
            self.runner.call_soon(stop)
        for _, running in self.background:
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(running)
        cancelled = await self.runner.stop(max(0.0, grace_s - (time.monotonic() - started)))
        log.info("shutdown: running turns finished%s",
                 f"; {cancelled} abandoned after {grace_s} s" if cancelled else "")


async def _running(dispatcher: Dispatcher, turns: _TurnsLoop, poller: WatchPoller | None,
                   workers: WorkerProcesses | None, _: web.Application) -> AsyncIterator[None]:
    """The web app's life on the web loop: one stack stops and closes, in reverse, all that starts here."""
    surface, grace = dispatcher.surface, dispatcher.surface.settings.turns.shutdown_grace_seconds
    async with AsyncExitStack() as stack:
        stack.push_async_callback(surface.authentication.sessions.close)  # early typing indicators go out here
        _closed_by(stack, surface.tokens.keys if surface.tokens is not None else None)
        _freeze_start_up_objects()
        turns.runner.start()
        stack.push_async_callback(turns.stop, grace)
        if dispatcher.queued is not None:
            await _start_queue(dispatcher.queued, surface, turns, stack)
        if poller is not None:  # on the runner's loop, where the store, workspace and connector clients live
            turns.run(poller.run(), poller.stop)
        if workers is not None:  # stopped first: a turn they cut short goes back on the queue for the next start
            workers.start()
            stack.push_async_callback(workers.stop, grace)
        yield


def _freeze_start_up_objects() -> None:
    """Everything built at start-up (SDK clients, the demo workspace, tokenizer tables) lives as long as the process;
    freezing it keeps garbage collection from rescanning it, which otherwise stalls every thread for ~80 ms at each
    full collection (seen as acknowledgement outliers in bench_teams)."""
    gc.collect()
    gc.freeze()


async def _start_queue(queued: QueuedTurns, surface: Surface, turns: _TurnsLoop, stack: AsyncExitStack) -> None:
    """The front's queue client on this loop; with TURN_WORKER_IN_WEB, a worker on the runner's loop, where the
    turns' clients live (its own queue client too, closed there). A client bound to no loop (the local queue's:
    one connection, one thread) serves both, so the front's enqueues never wait on SQLite's lock for this process's
    worker (its busy wait sleeps in steps of milliseconds); it is closed once the worker has stopped."""
    front = queued.open()
    shared = getattr(front, "loop_free", False) and surface.settings.turns.web_runs_worker
    queued.front = _closed_by(turns.runner.closes if shared else stack, front)
    await front.ensure()
    if surface.settings.turns.web_runs_worker:
        opened = (lambda: front) if shared else queued.open
        worker = await turns.runner.call(_queue_worker(surface, opened, None if shared else turns.runner.closes))
        turns.run(worker.run(surface.settings.turns.shutdown_grace_seconds), worker.stop)
        queued.wake = worker.wake  # the turns this front queues are taken at once, not at the worker's next poll


async def _queue_worker(surface: Surface, open_queue: OpenQueue, closes: AsyncExitStack | None) -> TurnWorker:
    """A queue worker and its queue client, made on the calling loop (the client's close left to ``closes``, or to
    whoever shares it)."""
    turns = open_queue()
    return surface.worker(_closed_by(closes, turns) if closes is not None else turns)


def _on_signals(callback: Any) -> None:
    import signal

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, callback)


async def _until_signalled() -> None:
    stop = asyncio.Event()
    _on_signals(stop.set)
    await stop.wait()
    log.info("shutting down")


def unusable_files(settings: Settings) -> list[str]:
    """What is wrong with the SQLite files serve and worker would open (the state, the local queue), each with what
    to do; checked before anything starts, so a damaged file is one message, not a traceback."""
    from bot.turns.sqlite import unusable

    files = []
    if settings.storage.state.kind == "sqlite" and settings.storage.state.path:
        files.append((Path(settings.storage.state.path), "The conversation state (STATE_STORE)"))
    if settings.turns.queue == "local":
        files.append((Path(settings.turns.queue_path), "The turn queue (TURN_QUEUE_PATH)"))
    return [problem for path, what in files if (problem := unusable(path, what)) is not None]


async def serve(settings: Settings) -> None:
    """python -m bot serve: the Teams endpoint, until SIGINT/SIGTERM, then a graceful shutdown."""
    from aiohttp import web

    from bot.turns.runner import TurnRunner
    from bot.turns.supervisor import WorkerProcesses

    runner = TurnRunner(deadline_s=settings.turns.deadline_seconds)
    parts, storage = await set_up(settings, runner.closes)  # their clients live on the turns' loop, closed there
    workers = WorkerProcesses(settings.turns.worker_processes) if settings.turns.worker_processes else None
    app = create_app(parts, storage, runner=runner,
                     turn_queue=turn_queue_opener(settings), poll_watches=True, workers=workers,
                     graph_token=managed_identity_graph_token(settings))
    site = web.AppRunner(app, access_log=None)
    await site.setup()
    try:
        await web.TCPSite(site, settings.teams.host, settings.teams.port).start()
        _log_listening(settings, parts)
        await _until_signalled()
    finally:
        await site.cleanup()  # the app's stack: worker processes, background work, turns, then clients


def _log_listening(settings: Settings, parts: Components) -> None:
    """What this process runs, said once at start-up, one line each: a turn adds nothing to the console unless
    something goes wrong."""
    log.info("Sentinel assistant listening on http://%s:%s/api/messages", settings.teams.host, settings.teams.port)
    for line in running(settings):
        log.info("  %s", line)


def running(settings: Settings) -> list[str]:
    """What serve runs, in words: the workspace, the model (endpoint and deployment or model), the state store, the
    turn queue, the audit records, telemetry. No secrets (keys and connection strings are named, never shown)."""
    workspace, storage, telemetry_settings = settings.workspace, settings.storage, settings.telemetry
    if workspace.uses_demo:
        inbox = f"; new incidents from {settings.demo.inbox}" if settings.demo.inbox else ""
        where = f"the demo workspace (generated sample data, seed {settings.demo.seed}){inbox}"
    else:
        where = f"Log Analytics workspace {workspace.workspace_id}" + (
            f" ({workspace.workspace_name})" if workspace.workspace_name else "")
    state = {"sqlite": f"SQLite {storage.state.path}", "memory": "in memory (lost when the bot stops)",
             "blob": f"Azure Blob Storage, container {storage.blob_container}"}.get(storage.state.kind,
                                                                                    storage.state.kind)
    turns = {"local": f"queued in {settings.turns.queue_path}",
             "azure": f"queued on Azure Storage, queue {settings.turns.queue_name}"}.get(
        settings.turns.queue, "run in this process, not queued")
    if settings.turns.worker_processes:
        turns += f", {settings.turns.worker_processes} worker processes"
    audit = telemetry_settings.audit_file or "the log (stderr), one JSON line per query"
    exported = "to Application Insights" if telemetry_settings.connection_string else \
        "not exported (APPLICATIONINSIGHTS_CONNECTION_STRING unset)"
    return [f"workspace: {where}", f"model: {describe_model(settings)}", f"state: {state}", f"turns: {turns}",
            f"audit: {audit}", f"telemetry: {exported}"]


def describe_model(settings: Settings) -> str:
    """The language model in words: who serves it, where, and which deployment or model is asked."""
    model = settings.model
    if model.provider == "azure":
        auth = "API key" if model.azure_api_key else "Entra ID"
        deployment = model.azure_deployment or "(AZURE_OPENAI_DEPLOYMENT unset)"
        return (f"Azure OpenAI {model.azure_endpoint}, deployment {deployment} (API version "
                f"{model.azure_api_version}, {auth})")
    if model.provider == "openai":
        name = model.name + ("" if model.openai_model else " (the default: OPENAI_MODEL unset)")
        if model.openai_base_url:
            return f"OpenAI-compatible server {model.openai_base_url}, model {name}"
        return f"OpenAI, model {name}"
    return "none, commands only (questions need AZURE_OPENAI_ENDPOINT or OPENAI_BASE_URL: see the README)"


async def work(settings: Settings, supervised: Supervised | None = None) -> None:
    """python -m bot worker: take queued turns (TURN_QUEUE=azure or local) until SIGINT/SIGTERM, without a web
    endpoint; ``supervised``: started by serve (TURN_WORKER_PROCESSES), stopping when it is gone and telling it once
    turns are taken."""
    opener = turn_queue_opener(settings)
    if opener is None:
        raise SystemExit("python -m bot worker needs TURN_QUEUE=local or azure: without a queue, turns run in the web "
                         "process")
    async with AsyncExitStack() as closes:  # one loop: every client lives, and is closed, on it
        parts, storage = await set_up(settings, closes)
        surface = build_surface(parts, storage, closes, managed_identity_graph_token(settings))
        worker = await _queue_worker(surface, opener, closes)
        await worker.turns.ensure()
        _on_signals(worker.stop)
        log.info("Sentinel assistant worker taking turns from %s (%d at once)",
                 settings.turns.queue_path if settings.turns.queue == "local" else f"queue {settings.turns.queue_name}",
                 settings.turns.workers)
        if supervised is not None:
            closes.callback(asyncio.ensure_future(supervised.watch(worker.stop)).cancel)
            supervised.taking_turns()
        await worker.run(settings.turns.shutdown_grace_seconds)
