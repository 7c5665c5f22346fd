"""Composition root: reads Settings, builds every client, and wires them together.

Nothing else constructs SDK clients or credentials; everything below receives what it needs, which is
how tests put fakes at the process boundary without patching. One Azure credential is shared by every
Azure client (Log Analytics, Azure OpenAI with Entra ID) and created only when something needs it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import telemetry
from bot.audit import AuditedSentinelClient
from bot.config import Settings
from bot.orchestrator.confirmations import ConfirmationDesk, WritePolicy
from bot.orchestrator.llm import ChatModel, create_client
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.memory import Memory, MemoryPolicy, TokenCounter
from bot.sentinel.client import SentinelClient
from bot.sentinel.identity import UserSessions
from bot.tools.toolbox import ToolBox

log = logging.getLogger(__name__)


@dataclass
class Components:
    settings: Settings
    sentinel: SentinelClient
    orchestrator: Orchestrator | None  # None when no language model is configured
    desk: ConfirmationDesk | None = None  # incident changes (its writer is None when write actions are off)
    users: UserSessions | None = None  # QUERY_IDENTITY=user: each analyst's own credential and clients
    _closers: list[Any] = field(default_factory=list)

    async def close(self) -> None:
        if self.orchestrator is not None:
            await self.orchestrator.model.close()
        if self.desk is not None and self.desk.writer is not None:
            await self.desk.writer.close()
        await self.sentinel.close()
        for closer in self._closers:
            await closer.close()


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


async def build(settings: Settings) -> Components:
    credential = _LazyCredential()
    users = build_user_sessions(settings)
    sentinel = build_sentinel_client(settings, credential, users)
    await sentinel.prepare()
    desk = build_action_desk(settings, sentinel, credential, users)
    orchestrator = build_orchestrator(settings, sentinel, credential, desk)
    return Components(settings, sentinel, orchestrator, desk, users, [credential])


def build_user_sessions(settings: Settings, **credential_options: Any) -> UserSessions | None:
    """QUERY_IDENTITY=user: each analyst's on-behalf-of credential, from their Teams single sign-on token, for the
    app registration SSO_APP_ID (with its secret, or with the bot's managed identity as its federated credential).
    ``credential_options`` go to each credential (tests: a transport trusting a fake's certificate)."""
    if settings.query_identity != "user":
        return None
    from bot.sentinel import identity
    from bot.sentinel.loganalytics import DEFAULT_ENDPOINT

    assert settings.sso_app_id and settings.microsoft_app_tenant_id
    assertion = None
    if not settings.sso_client_secret:
        from azure.identity.aio import ManagedIdentityCredential

        assertion = identity.ManagedIdentityAssertion(ManagedIdentityCredential(client_id=settings.microsoft_app_id))
    factory = identity.on_behalf_of(tenant_id=settings.microsoft_app_tenant_id, client_id=settings.sso_app_id,
                                    authority=settings.login_endpoint, client_secret=settings.sso_client_secret,
                                    assertion=assertion, **credential_options)
    scopes = [f"{settings.logs_endpoint or DEFAULT_ENDPOINT}/.default"]
    if settings.write_actions_enabled:
        scopes.append(f"{settings.arm_endpoint}/.default")
    log.info("Reads%s run with each analyst's own permissions (on-behalf-of, app registration %s)",
             " and writes" if settings.write_actions_enabled else "", settings.sso_app_id)
    return identity.UserSessions(factory, scopes=tuple(scopes))


def build_sentinel_client(settings: Settings, credential: _LazyCredential | None = None,
                          users: UserSessions | None = None, **client_options: Any) -> SentinelClient:
    """The workspace client: Log Analytics when SENTINEL_WORKSPACE_ID is set, else the demo workspace."""
    if settings.uses_demo_workspace:
        from bot.sentinel.demo.backend import DemoBackend

        log.info("No SENTINEL_WORKSPACE_ID set: using the demo workspace (generated data, seed %s)",
                 settings.demo_data_seed)
        inbox = Path(settings.demo_inbox) if settings.demo_inbox else None
        return AuditedSentinelClient(DemoBackend(seed=settings.demo_data_seed, inbox=inbox))

    from bot.sentinel.loganalytics import LogAnalyticsBackend, create_logs_client

    assert settings.sentinel_workspace_id is not None
    client_options = {"use_env_settings": settings.env_proxies} | client_options
    client = create_logs_client((credential or _LazyCredential()).get(), endpoint=settings.logs_endpoint,
                                **client_options)
    if users is not None:  # each analyst's queries through their own client (client_options: tests' transport)
        users.add_client("logs", lambda own: create_logs_client(own, endpoint=settings.logs_endpoint, **client_options))
    backend = LogAnalyticsBackend(client, settings.sentinel_workspace_id,
                                  server_timeout_s=settings.query_timeout_seconds, users=users)
    return AuditedSentinelClient(backend)  # every read audited with who asked


def build_action_desk(settings: Settings, sentinel: SentinelClient, credential: _LazyCredential | None = None,
                      users: UserSessions | None = None, **writer_options: Any) -> ConfirmationDesk:
    """Incident changes: the demo workspace's own writer, or Sentinel's REST API on Azure Resource Manager.

    With WRITE_ACTIONS_ENABLED off there is no writer at all, and every request to change an incident is
    refused with what the administrator would need to turn it on.
    """
    policy = WritePolicy(settings.write_actions_enabled, settings.write_responders)
    if not settings.write_actions_enabled:
        return ConfirmationDesk(sentinel, None, policy)
    if sentinel.is_demo:
        from bot.sentinel.demo.writer import DemoIncidentWriter

        log.info("Write actions enabled on the demo workspace for %d responder(s)", len(policy.responders))
        return ConfirmationDesk(sentinel, DemoIncidentWriter.for_client(sentinel), policy)
    from bot.sentinel.incident_writer import ArmIncidentWriter

    assert settings.sentinel_subscription_id and settings.sentinel_resource_group and settings.sentinel_workspace_name
    place: dict[str, Any] = {
        "endpoint": settings.arm_endpoint, "subscription_id": settings.sentinel_subscription_id,
        "resource_group": settings.sentinel_resource_group, "workspace_name": settings.sentinel_workspace_name,
        "api_version": settings.sentinel_api_version, "use_env_settings": settings.env_proxies} | writer_options
    writer: Any
    if users is not None:  # each analyst's changes with their own token: Sentinel names them, their roles apply
        from bot.sentinel.identity import AnalystIncidentWriter

        users.add_client("arm", lambda own: ArmIncidentWriter(credential=own, **place))
        writer = AnalystIncidentWriter(users)
    else:
        writer = ArmIncidentWriter(credential=(credential or _LazyCredential()).get(), **place)
    log.info("Write actions enabled (workspace %s) for %d responder(s)", settings.sentinel_workspace_name,
             len(policy.responders))
    return ConfirmationDesk(sentinel, writer, policy)


def build_orchestrator(settings: Settings, sentinel: SentinelClient, credential: _LazyCredential | None = None,
                       desk: ConfirmationDesk | None = None) -> Orchestrator | None:
    if settings.llm_provider is None:
        log.warning("No language model configured: only commands will be answered")
        return None
    needs_credential = settings.llm_provider == "azure" and not settings.azure_openai_api_key
    client = create_client(
        azure_endpoint=settings.azure_openai_endpoint,
        azure_deployment=settings.azure_openai_deployment,
        api_version=settings.azure_openai_api_version,
        azure_api_key=settings.azure_openai_api_key,
        credential=(credential or _LazyCredential()).get() if needs_credential else None,
        openai_api_key=settings.openai_api_key,
        base_url=settings.openai_base_url,
    )
    memory = Memory(TokenCounter(), MemoryPolicy(max_turns=settings.max_turns,
                                                 history_tokens=settings.max_history_tokens))
    return Orchestrator(ChatModel(client, settings.model_name), ToolBox(sentinel), memory,
                        max_rounds=settings.max_tool_rounds, demo=sentinel.is_demo, desk=desk)


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
    if not settings.applicationinsights_connection_string:
        log.info("APPLICATIONINSIGHTS_CONNECTION_STRING is not set: no traces or metrics are exported")
        return False
    from azure.monitor.opentelemetry import configure_azure_monitor
    from opentelemetry.sdk.resources import Resource

    configure_azure_monitor(
        connection_string=settings.applicationinsights_connection_string,
        resource=Resource.create({"service.name": SERVICE_NAME}),
        logger_name="bot",  # our log lines only: they are written to carry no content; SDKs' lines may not be
        instrumentation_options={name: {"enabled": False} for name in DISABLED_INSTRUMENTATIONS},
    )
    telemetry.add_correlation(logging.getLogger("bot"))  # the exported log records carry the correlation id
    log.info("Exporting traces, metrics and logs to Application Insights%s",
             " (with question text: TELEMETRY_CAPTURE_CONTENT=true)" if settings.telemetry_capture_content else "")
    return True


def managed_identity_graph_token(settings: Settings) -> Any:
    """A Microsoft Graph token source for reader groups when the bot's identity is a managed identity (with an app
    secret, the Teams surface gets its own token)."""
    if not settings.allowed_reader_groups or settings.microsoft_app_type != "UserAssignedMSI":
        return None
    from azure.identity.aio import ManagedIdentityCredential

    credential = ManagedIdentityCredential(client_id=settings.microsoft_app_id)

    async def token() -> str:
        return (await credential.get_token("https://graph.microsoft.com/.default")).token

    return token


def _state_storage(settings: Settings, closers: list[Any]) -> Any:
    """The conversation state store; Blob storage by account URL is reached as the bot's identity."""
    from bot.teams.storage import create_storage

    credential = None
    if settings.state_store.kind == "blob" and not settings.state_blob_connection_string:
        from azure.identity.aio import DefaultAzureCredential

        credential = DefaultAzureCredential()
        closers.append(credential.close)
    return create_storage(settings.state_store.kind, sqlite_path=settings.state_store.path,
                          blob_connection_string=settings.state_blob_connection_string,
                          blob_container=settings.state_blob_container,
                          blob_account_url=settings.state_blob_account_url, credential=credential,
                          use_env_settings=settings.env_proxies)


def turn_queue_opener(settings: Settings) -> Any:
    """TURN_QUEUE=azure or local: a function that opens the turn queue on the calling loop (Azure: with its own
    credential, or the emulator's connection string; local: the SQLite file); None otherwise."""
    if settings.turn_queue == "local":
        from bot.turns.local_queue import LocalTurnQueue

        return lambda: LocalTurnQueue.open(settings.turn_queue_path)
    if settings.turn_queue != "azure":
        return None
    from bot.turns.azure_queue import AzureTurnQueue

    def open_queue() -> AzureTurnQueue:
        credential = None
        if not settings.state_blob_connection_string:
            from azure.identity.aio import DefaultAzureCredential

            credential = DefaultAzureCredential()
        return AzureTurnQueue.open(queue_name=settings.turn_queue_name, container=settings.turn_blob_container,
                                   queue_account_url=settings.turn_queue_account_url,
                                   blob_account_url=settings.state_blob_account_url, credential=credential,
                                   connection_string=settings.state_blob_connection_string,
                                   use_env_settings=settings.env_proxies)

    return open_queue


def _on_signals(callback: Any) -> None:
    import asyncio
    import signal

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, callback)


async def serve(settings: Settings) -> None:
    """python -m bot serve: the Teams endpoint, until SIGINT/SIGTERM, then a graceful shutdown."""
    import asyncio

    from aiohttp import web

    from bot.teams.server import create_app
    from bot.turns.runner import TurnRunner
    from bot.turns.supervisor import WorkerProcesses

    configure_telemetry(settings)
    components = await build(settings)
    turns = TurnRunner(deadline_s=settings.turn_deadline_seconds)
    closers: list[Any] = []
    storage = _state_storage(settings, closers)
    for closer in closers:
        turns.add_cleanup(closer)
    turns.add_cleanup(components.close)  # the model and Log Analytics clients are used on the turns' loop
    workers = WorkerProcesses(settings.turn_worker_processes) if settings.turn_worker_processes else None
    app = create_app(settings, sentinel=components.sentinel, orchestrator=components.orchestrator, storage=storage,
                     runner=turns, desk=components.desk, graph_token=managed_identity_graph_token(settings),
                     turn_queue=turn_queue_opener(settings), poll_watches=True, users=components.users,
                     worker_processes=workers)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, settings.host, settings.port).start()
    if workers is not None:
        workers.start()
    where = "the demo workspace" if components.sentinel.is_demo else "Log Analytics"
    log.info("Sentinel assistant listening on http://%s:%s/api/messages (%s, state: %s, model: %s, turns: %s)",
             settings.host, settings.port, where, settings.state_store.kind,
             settings.llm_provider or "none, commands only",
             {"azure": "queued on Azure Storage", "local": f"queued in {settings.turn_queue_path}"}.get(
                 settings.turn_queue, "in this process")
             + (f", {settings.turn_worker_processes} worker processes" if settings.turn_worker_processes else ""))
    stop = asyncio.Event()
    _on_signals(stop.set)
    await stop.wait()
    log.info("shutting down")
    # The workers first: a turn they cut short goes back on the queue, where the next start finds it.
    if workers is not None:
        await workers.stop(settings.shutdown_grace_seconds)
    await runner.cleanup()


async def work(settings: Settings) -> None:
    """python -m bot worker: take queued turns (TURN_QUEUE=azure) until SIGINT/SIGTERM, without a web endpoint."""
    from bot.teams.server import create_surface
    from bot.turns.runner import TurnRunner

    opener = turn_queue_opener(settings)
    if opener is None:
        raise SystemExit("python -m bot worker needs TURN_QUEUE=local or azure: without a queue, turns run in the web "
                         "process")
    configure_telemetry(settings)
    components = await build(settings)
    closers: list[Any] = []
    storage = _state_storage(settings, closers)
    runner = TurnRunner(deadline_s=settings.turn_deadline_seconds)  # never started: it only closes clients here
    for closer in closers:
        runner.add_cleanup(closer)
    runner.add_cleanup(components.close)
    surface = create_surface(settings, sentinel=components.sentinel, orchestrator=components.orchestrator,
                             storage=storage, runner=runner, desk=components.desk,
                             graph_token=managed_identity_graph_token(settings), users=components.users)
    turns = opener()
    try:
        await turns.ensure()
        worker = surface.worker(turns)
        _on_signals(worker.stop)
        log.info("Sentinel assistant worker taking turns from %s (%d at once)",
                 settings.turn_queue_path if settings.turn_queue == "local" else f"queue {settings.turn_queue_name}",
                 settings.turn_workers)
        await worker.run(settings.shutdown_grace_seconds)
    finally:
        await turns.close()
        await runner.stop(0)
