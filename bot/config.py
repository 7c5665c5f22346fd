"""Settings: one frozen object built from the environment (and a .env file), validated up front.

This is the only module that reads environment variables. Settings come in typed sections (model, workspace,
Teams identity, access, turns, storage, telemetry, demo); each field names its variable, its default and how it
is read, once, with ``env()``, and ``variables()`` lists every name (docs/configuration.md and .env.example are
tested against it). Every problem is collected and reported together, each naming its variable and what to set,
so a misconfigured deployment fails at start-up with one readable message instead of at the first analyst's
question.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dotenv import dotenv_values

APP_TYPES = ("MultiTenant", "SingleTenant", "UserAssignedMSI")
DEFAULT_STATE_STORE = "sqlite:///.data/state.db"
DEFAULT_AZURE_OPENAI_API_VERSION = "2024-10-21"
DEFAULT_SENTINEL_API_VERSION = "2025-09-01"
_OBJECT_ID = re.compile(r"^[0-9a-fA-F-]{8,64}$")
LOG_FORMATS = ("text", "json")
CONVERSATION_TYPES = ("personal", "groupChat", "channel")
DEFAULT_OPENID_METADATA_URL = "https://login.botframework.com/v1/.well-known/openidconfiguration"
GOV_OPENID_METADATA_URL = "https://login.botframework.azure.us/v1/.well-known/openidconfiguration"
GOV_CHANNEL_SERVICE = "https://botframework.azure.us"  # botbuilder's ChannelService value for US Government
_GCC_SERVICE_URL = "https://smba.infra.gcc.teams.microsoft.com/*"
# Where the Bot Framework's public cloud sends from (Teams, its canary ring, the Azure Bot Service; GCC tenants' Teams
# uses the public Bot Framework too), as URL patterns.
DEFAULT_SERVICE_URLS = ("https://smba.trafficmanager.net/*", "https://*.botframework.com/*", _GCC_SERVICE_URL,
                        "https://canary.botapi.skype.com/*")


@dataclass(frozen=True)
class BotCloud:
    """A Bot Framework cloud (BOT_CLOUD): where its channels send from (the default ALLOWED_SERVICE_URLS), where its
    channel tokens' signing keys are published and who issues them, and botbuilder's ChannelService for it (None:
    the public cloud; the US Government value makes botbuilder get the bot's own tokens from login.microsoftonline.us
    for https://api.botframework.us). Sources in docs/configuration.md."""

    service_urls: tuple[str, ...]
    openid_metadata_url: str
    token_issuer: str
    channel_service: str | None


BOT_CLOUDS = {
    "public": BotCloud(DEFAULT_SERVICE_URLS, DEFAULT_OPENID_METADATA_URL, "https://api.botframework.com", None),
    "gcc": BotCloud((_GCC_SERVICE_URL, "https://*.botframework.com/*"), DEFAULT_OPENID_METADATA_URL,
                    "https://api.botframework.com", None),
    "gcchigh": BotCloud(("https://smba.infra.gov.teams.microsoft.us/*", "https://*.botframework.azure.us/*"),
                        GOV_OPENID_METADATA_URL, "https://api.botframework.us", GOV_CHANNEL_SERVICE),
    "dod": BotCloud(("https://smba.infra.dod.teams.microsoft.us/*", "https://*.botframework.azure.us/*"),
                    GOV_OPENID_METADATA_URL, "https://api.botframework.us", GOV_CHANNEL_SERVICE),
}
# Without an app id the only callers are local tools (the Agents Playground, tests) on this machine.
LOOPBACK_SERVICE_URLS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# What bot.teams.front_door.ServiceUrls can match: a host of DNS labels (the first may be "*": one or more labels) or
# an IPv6 literal, a port or ":*", a plain path ("*" within a segment); no user info, query or fragment.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_SERVICE_URL_PATTERN = re.compile(
    rf"^https?://(?:(?:\*\.)?{_LABEL}(?:\.{_LABEL})*|\[[0-9A-Fa-f:.]+\])(?::(?:[0-9]{{1,5}}|\*))?(?:/[!$&'()*+,;=:\w.~-]*)*$")
_STORAGE_NAME = re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")  # Azure queue and container names
_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class ConfigError(ValueError):
    """Invalid settings; ``problems`` holds one line per variable."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("Configuration problems:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class StateLocation:
    """Where conversation state lives (STATE_STORE): memory, sqlite (with its file) or blob."""

    kind: str  # memory, sqlite, blob
    path: str | None = None  # for sqlite


DEFAULT_STATE = StateLocation("sqlite", ".data/state.db")  # STATE_STORE's default, sqlite:///.data/state.db


def env(name: str, default: Any = None, read: str = "text", *args: Any, secret: bool = False) -> Any:
    """A setting read from the variable ``name`` by the ``_Reader`` method ``read`` (with ``args``), or ``default``.

    The one place a setting's name and default are written; secrets are kept out of ``repr``.
    """
    return field(default=default, repr=not secret, metadata={"env": name, "read": read, "args": args})


def _storage_name(value: str) -> bool:
    return bool(_STORAGE_NAME.match(value))


_QUEUE_NAME_ADVICE = "is not a valid queue name: 3-63 lowercase letters, digits and single hyphens."
_CONTAINER_ADVICE = "is not a valid container name: 3-63 lowercase letters, digits and single hyphens."


@dataclass(frozen=True)
class ModelSettings:
    """The language model: Azure OpenAI, else OpenAI or an OpenAI-compatible server; the tool loop's bounds."""

    azure_endpoint: str | None = env("AZURE_OPENAI_ENDPOINT", None, "url", True)
    azure_deployment: str | None = env("AZURE_OPENAI_DEPLOYMENT")
    azure_api_version: str = env("AZURE_OPENAI_API_VERSION", DEFAULT_AZURE_OPENAI_API_VERSION)
    azure_api_key: str | None = env("AZURE_OPENAI_API_KEY", secret=True)
    openai_api_key: str | None = env("OPENAI_API_KEY", secret=True)
    openai_base_url: str | None = env("OPENAI_BASE_URL", None, "url", False)
    openai_model: str | None = env("OPENAI_MODEL")
    max_tool_rounds: int = env("MAX_TOOL_ROUNDS", 5, "number", 1, 20)
    # One question's own token bound: no tool round that would take its model calls past it (0: only the rounds).
    max_turn_tokens: int = env("MAX_TURN_TOKENS", 60_000, "number", 0, 10_000_000)
    max_turns: int = env("MAX_TURNS", 30, "number", 2, 500)
    max_history_tokens: int = env("MAX_HISTORY_TOKENS", 24_000, "number", 2_000, 500_000)

    @property
    def provider(self) -> str | None:
        """"azure", "openai", or None when no language model is configured."""
        if self.azure_endpoint:
            return "azure"
        if self.openai_api_key or self.openai_base_url:
            return "openai"
        return None

    @property
    def name(self) -> str:
        """The model (OpenAI) or deployment (Azure OpenAI) the bot asks."""
        if self.provider == "azure":
            return self.azure_deployment or ""
        return self.openai_model or "gpt-4o"


@dataclass(frozen=True)
class WorkspaceSettings:
    """The Sentinel workspace (unset id: the embedded demo workspace) and incident changes."""

    workspace_id: str | None = env("SENTINEL_WORKSPACE_ID", None, "guid",
                                   "the Workspace ID from the Log Analytics workspace's Overview page")
    logs_endpoint: str | None = env("LOGS_ENDPOINT", None, "url", True)
    query_timeout_seconds: int = env("QUERY_TIMEOUT_SECONDS", 60, "number", 5, 600)
    # Each identity's Log Analytics budget (the service's: 5 at once, 200 per 30 s), shared by the deployment's
    # processes (0: INSTANCE_COUNT x (1 + TURN_WORKER_PROCESSES)), and how long a query may wait for its turn.
    logs_concurrent_queries: int = env("LOGS_CONCURRENT_QUERIES", 5, "number", 1, 100)
    logs_queries_per_window: int = env("LOGS_QUERIES_PER_WINDOW", 200, "number", 1, 100_000)
    logs_window_seconds: int = env("LOGS_QUERY_WINDOW_SECONDS", 30, "number", 1, 3600)
    logs_budget_shares: int = env("LOGS_BUDGET_SHARES", 0, "number", 0, 1000)
    logs_queue_wait_seconds: int = env("LOGS_QUEUE_WAIT_SECONDS", 60, "number", 1, 600)
    subscription_id: str | None = env("SENTINEL_SUBSCRIPTION_ID", None, "guid", "the workspace's subscription id")
    resource_group: str | None = env("SENTINEL_RESOURCE_GROUP")
    workspace_name: str | None = env("SENTINEL_WORKSPACE_NAME")
    arm_endpoint: str = env("ARM_ENDPOINT", "https://management.azure.com", "url", True)
    api_version: str = env("SENTINEL_API_VERSION", DEFAULT_SENTINEL_API_VERSION, "checked",
                           lambda v: bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}(-preview)?", v)),
                           "is not an API version: use a date such as 2025-09-01.")
    # Incident changes: off unless enabled, and then only for the listed responders (Entra object ids).
    write_actions_enabled: bool = env("WRITE_ACTIONS_ENABLED", False, "flag")
    write_responders: frozenset[str] = env(
        "WRITE_RESPONDERS", frozenset(), "ids", "an Entra object id",
        "list the analysts' object ids (Entra admin center > Users > Object ID), separated by commas.")
    # The escalation brake: an incident is escalated to one analyst at most once this long (one open escalation per
    # incident and person), and one analyst is paged at most once per cool-down, whatever the incident.
    escalation_repeat_minutes: int = env("ESCALATION_REPEAT_MINUTES", 60, "number", 0, 1440)  # 0: off
    escalation_cooldown_seconds: int = env("ESCALATION_COOLDOWN_SECONDS", 120, "number", 0, 3600)

    @property
    def uses_demo(self) -> bool:
        return self.workspace_id is None

    @property
    def writes_configured(self) -> bool:
        """The workspace's Azure resource path is known (needed to change incidents through Azure Resource Manager)."""
        return bool(self.subscription_id and self.resource_group and self.workspace_name)


@dataclass(frozen=True)
class TeamsSettings:
    """The bot's identity, its web server and front door."""

    app_id: str | None = env("MICROSOFT_APP_ID")
    app_password: str | None = env("MICROSOFT_APP_PASSWORD", secret=True)
    app_type: str = env("MICROSOFT_APP_TYPE", "MultiTenant", "app_type")
    app_tenant_id: str | None = env("MICROSOFT_APP_TENANT_ID", None, "guid", "your Entra tenant id")
    host: str = env("HOST", "127.0.0.1")
    port: int = env("PORT", 3978, "number", 1, 65535)
    # An explicit opt-in to serve unauthenticated beyond loopback, where replies may go (unset: Microsoft's channels
    # with an app id, else loopback), and where the Bot Framework's signing keys are published.
    insecure_allow_unauthenticated: bool = env("INSECURE_ALLOW_UNAUTHENTICATED", False, "flag")
    # The Bot Framework cloud the bot is registered in: its channels' serviceUrls, signing keys and token issuer.
    cloud: str = env("BOT_CLOUD", "public", "choice", tuple(BOT_CLOUDS))
    allowed_service_urls: tuple[str, ...] = env("ALLOWED_SERVICE_URLS", LOOPBACK_SERVICE_URLS, "service_urls")
    openid_metadata_url: str = env("BOT_OPENID_METADATA_URL", "", "url", False)  # unset: the cloud's

    @property
    def bot_cloud(self) -> BotCloud:
        return BOT_CLOUDS[self.cloud]

    @property
    def authenticates_requests(self) -> bool:
        return bool(self.app_id)


@dataclass(frozen=True)
class AccessSettings:
    """Who may ask (tenants, readers, reader groups through Microsoft Graph) and where; whose permissions reads
    run with (and Teams single sign-on for it); model turns and tokens per minute. Empty reader lists: anyone in an
    allowed tenant."""

    tenants: frozenset[str] = env("ALLOWED_TENANTS", frozenset(), "ids", "an Entra tenant id")
    readers: frozenset[str] = env("ALLOWED_READERS", frozenset(), "ids", "an Entra user object id")
    reader_groups: frozenset[str] = env("ALLOWED_READER_GROUPS", frozenset(), "ids", "an Entra group object id")
    group_cache_seconds: int = env("READER_GROUP_CACHE_SECONDS", 300, "number", 0, 86_400)
    # Who may run their own KQL (the kql command); empty: nobody.
    kql_analysts: frozenset[str] = env("ALLOWED_KQL_ANALYSTS", frozenset(), "ids", "an Entra user object id")
    conversation_types: frozenset[str] = env("ALLOWED_CONVERSATION_TYPES", frozenset(CONVERSATION_TYPES),
                                             "conversation_types")
    teams: frozenset[str] = env("ALLOWED_TEAMS", frozenset(), "names")
    channels: frozenset[str] = env("ALLOWED_CHANNELS", frozenset(), "names")
    graph_endpoint: str = env("GRAPH_ENDPOINT", "https://graph.microsoft.com", "url", False)
    login_endpoint: str = env("ENTRA_LOGIN_ENDPOINT", "https://login.microsoftonline.com", "url", False)
    # bot: reads and writes as the bot's identity; user: as each analyst (on-behalf-of, after Teams single sign-on).
    query_identity: str = env("QUERY_IDENTITY", "bot", "choice", ("bot", "user"))
    # Teams single sign-on through the Azure Bot's OAuth connection, for QUERY_IDENTITY=user.
    sso_app_id: str | None = env("SSO_APP_ID", None, "guid",
                                 "the client id of the app registration Teams single sign-on issues tokens to")
    sso_client_secret: str | None = env("SSO_CLIENT_SECRET", secret=True)
    sso_connection_name: str = env("SSO_CONNECTION_NAME", "sentinel-sso", "checked",
                                   lambda v: bool(re.fullmatch(r"[\w.-]{1,80}", v)),
                                   "is not a connection name: use the OAuth connection's name on the Azure Bot "
                                   "(letters, digits, '.', '_' and '-').")
    # The Bot Framework token service (default: botbuilder's); tests, sovereign clouds.
    bot_oauth_url: str | None = env("BOT_OAUTH_URL", None, "url", False)
    # Cost and abuse: model turns and tokens per minute, per analyst and per conversation (tokens 0: no limit).
    turns_per_user_minute: int = env("MODEL_TURNS_PER_USER_MINUTE", 6, "number", 1, 1000)
    turns_per_conversation_minute: int = env("MODEL_TURNS_PER_CONVERSATION_MINUTE", 20, "number", 1, 1000)
    tokens_per_user_minute: int = env("MODEL_TOKENS_PER_USER_MINUTE", 60_000, "number", 0, 10_000_000)
    tokens_per_conversation_minute: int = env("MODEL_TOKENS_PER_CONVERSATION_MINUTE", 150_000, "number", 0,
                                              10_000_000)


@dataclass(frozen=True)
class TurnSettings:
    """Turns: one overall deadline each, the drain at shutdown, and where they run. Queue off: in the web process;
    azure: on Azure Storage (several instances); local: in a SQLite file for worker processes on this machine; and
    the watches' poll, the turns the bot starts itself."""

    deadline_seconds: int = env("TURN_DEADLINE_SECONDS", 120, "number", 1, 3600)
    shutdown_grace_seconds: int = env("SHUTDOWN_GRACE_SECONDS", 20, "number", 0, 110)
    # Unset: local (durable on this machine), or off with STATE_STORE=memory (workers could not see the state).
    queue: str = env("TURN_QUEUE", "local", "turn_queue")
    queue_path: str = env("TURN_QUEUE_PATH", ".data/turns.db", "queue_path")  # unset: beside the SQLite state
    queue_account_url: str | None = env("TURN_QUEUE_ACCOUNT_URL", None, "url", False)  # https://<account>.queue...
    queue_name: str = env("TURN_QUEUE_NAME", "bot-turns", "checked", _storage_name, _QUEUE_NAME_ADVICE)
    # Per-conversation leases, sequence numbers, duplicate markers.
    blob_container: str = env("TURN_BLOB_CONTAINER", "bot-turns", "checked", _storage_name, _CONTAINER_ADVICE)
    # Turns one worker runs at once: as many as the web process's runner (turns wait on the model, not the CPU).
    workers: int = env("TURN_WORKERS", 32, "number", 1, 256)
    web_runs_worker: bool = env("TURN_WORKER_IN_WEB", True, "flag")  # the web process also takes queued turns
    # python -m bot worker processes that serve starts, watches and restarts.
    worker_processes: int = env("TURN_WORKER_PROCESSES", 0, "number", 0, 64)
    max_attempts: int = env("TURN_MAX_ATTEMPTS", 3, "number", 1, 20)  # deliveries before a turn is set aside
    # Instances serving this bot (the deployment's scale-out), to refuse per-instance state.
    instance_count: int = env("INSTANCE_COUNT", 1, "number", 1, 100)
    # How often watches look for new incidents (one query whatever their number); 0: off.
    watch_poll_seconds: int = env("WATCH_POLL_SECONDS", 60, "number", 0, 3600)


@dataclass(frozen=True)
class StorageSettings:
    """Conversation state: memory, a SQLite file, or Azure Blob Storage reached as the bot's identity."""

    state: StateLocation = env("STATE_STORE", DEFAULT_STATE, "state_location")  # noqa: RUF009 (a field)
    blob_account_url: str | None = env("STATE_BLOB_ACCOUNT_URL", None, "url", False)  # https://<account>.blob...
    blob_container: str = env("STATE_BLOB_CONTAINER", "bot-state")
    # Accepted for local emulators only: Azure accounts are reached as the bot's identity.
    blob_connection_string: str | None = env("STATE_BLOB_CONNECTION_STRING", None, "emulator_connection",
                                             secret=True)


@dataclass(frozen=True)
class TelemetrySettings:
    """Logs, and OpenTelemetry to Application Insights when its connection string is set."""

    log_level: str = env("LOG_LEVEL", "INFO", "log_level")
    log_format: str = env("LOG_FORMAT", "text", "choice", LOG_FORMATS)  # json: one object per line
    connection_string: str | None = env(
        "APPLICATIONINSIGHTS_CONNECTION_STRING", None, "checked", lambda v: "InstrumentationKey=" in v,
        "is not an Application Insights connection string: copy it from the resource's Overview page "
        "(it starts with InstrumentationKey=).", secret=True)
    capture_content: bool = env("TELEMETRY_CAPTURE_CONTENT", False, "flag")  # the question text on the turn span
    # Local runs: log lines to a file instead of stderr (./run chat: not inside the conversation), and the audit
    # records (JSON lines) to a file of their own instead of the log (./run: not a JSON line per query on the
    # console). Unset: both go to stderr, where a container's log collector and the exporter read them.
    log_file: str | None = env("LOG_FILE")
    audit_file: str | None = env("AUDIT_LOG_FILE")


@dataclass(frozen=True)
class DemoSettings:
    """The embedded demo workspace."""

    seed: int = env("DEMO_DATA_SEED", 42, "number", 0, 2**31 - 1)
    inbox: str | None = env("DEMO_INBOX")  # a file: incidents `python -m bot demo new-incident` adds to the demo


SECTIONS: tuple[type, ...] = (ModelSettings, WorkspaceSettings, TeamsSettings, AccessSettings, TurnSettings,
                              StorageSettings, TelemetrySettings, DemoSettings)


@dataclass(frozen=True)
class Settings:
    model: ModelSettings = field(default_factory=ModelSettings)
    workspace: WorkspaceSettings = field(default_factory=WorkspaceSettings)
    teams: TeamsSettings = field(default_factory=TeamsSettings)
    access: AccessSettings = field(default_factory=AccessSettings)
    turns: TurnSettings = field(default_factory=TurnSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    demo: DemoSettings = field(default_factory=DemoSettings)
    # Whether the Azure SDK clients read proxy settings from the environment. aiohttp then looks up .netrc and the
    # proxy variables on a thread for every request (two thread hops each): only done when a proxy is configured.
    env_proxies: bool = False

    @property
    def watches_enabled(self) -> bool:
        """Watches poll with the bot's own read access: nobody is signed in when it looks for new incidents."""
        return self.turns.watch_poll_seconds > 0 and self.access.query_identity == "bot"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, dotenv_path: str | Path | None = ".env") -> Settings:
        """Settings from ``environ`` (default: the process environment) over the values in ``dotenv_path``."""
        values: dict[str, str] = {}
        if dotenv_path and Path(dotenv_path).is_file():
            values.update({k: v for k, v in dotenv_values(dotenv_path).items() if v is not None})
        values.update(os.environ if environ is None else environ)
        return _Reader(values).settings()


def _env_fields(section: type) -> list[Field[Any]]:
    return [f for f in fields(section) if "env" in f.metadata]


def variables() -> dict[str, list[str]]:
    """Every environment variable the bot reads, by section (the section class's name without "Settings")."""
    return {section.__name__.removesuffix("Settings"): [f.metadata["env"] for f in _env_fields(section)]
            for section in SECTIONS}


LLM_HELP = (
    "Natural-language answers need a language model. Set AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_DEPLOYMENT "
    "(plus AZURE_OPENAI_API_KEY, or sign in for Entra ID), or OPENAI_API_KEY (with OPENAI_BASE_URL and "
    "OPENAI_MODEL for an OpenAI-compatible server such as vLLM, Ollama or LM Studio)."
)


_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NETRC")


class _Reader:
    """Reads and checks each variable, collecting every problem before failing.

    Each reading method takes the variable's name and default (then the arguments ``env()`` gave it) and returns
    the default when the variable is unset or wrong; a wrong value also adds a problem.
    """

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = values
        self.problems: list[str] = []

    def settings(self) -> Settings:
        sections = {f.name: self.section(f.default_factory) for f in fields(Settings)
                    if f.default_factory in SECTIONS}
        settings = self._derived(Settings(**sections, env_proxies=any(self.text(n) for n in _PROXY_VARIABLES)))
        for check in (self._check_model, self._check_identity, self._check_access, self._check_writes,
                      self._check_on_behalf_of, self._check_storage, self._check_turns):
            check(settings)
        if self.problems:
            raise ConfigError(self.problems)
        return settings

    def section(self, section: Any) -> Any:
        """One section, each field read from its variable."""
        return section(**{f.name: getattr(self, f.metadata["read"])(f.metadata["env"], f.default, *f.metadata["args"])
                          for f in _env_fields(section)})

    @staticmethod
    def _derived(settings: Settings) -> Settings:
        """Defaults that follow from other settings."""
        teams, access, turns = settings.teams, settings.access, settings.turns
        if not teams.allowed_service_urls:
            urls = teams.bot_cloud.service_urls if teams.authenticates_requests else LOOPBACK_SERVICE_URLS
            teams = replace(teams, allowed_service_urls=urls)
        if not teams.openid_metadata_url:
            teams = replace(teams, openid_metadata_url=teams.bot_cloud.openid_metadata_url)
        if teams.app_id and not access.tenants and teams.app_tenant_id:
            access = replace(access, tenants=frozenset({teams.app_tenant_id.lower()}))  # the bot's own tenant
        if not turns.queue:  # durable by default: a turn acknowledged is on disk, and a kill -9 does not lose it
            turns = replace(turns, queue="off" if settings.storage.state.kind == "memory" else "local")
        if not turns.queue_path:
            turns = replace(turns, queue_path=_beside(settings.storage.state, "turns.db"))
        return replace(settings, teams=teams, access=access, turns=turns)

    # Reading one variable.

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self._values.get(name)
        if value is None:
            return default
        return value.strip() or default

    def number(self, name: str, default: int, low: int, high: int) -> int:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            self.problems.append(f"{name}={raw!r} is not a whole number: set it to a number from {low} to {high}.")
            return default
        if not low <= value <= high:
            self.problems.append(f"{name}={value} is out of range: set it to a number from {low} to {high}.")
            return default
        return value

    def flag(self, name: str, default: bool) -> bool:
        raw = self.text(name)
        if raw is None:
            return default
        if raw.lower() in ("true", "1", "yes", "on"):
            return True
        if raw.lower() in ("false", "0", "no", "off"):
            return False
        self.problems.append(f"{name}={raw!r} is not a boolean: set it to true or false.")
        return default

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        raw = (self.text(name) or default).lower()
        if raw not in choices:
            self.problems.append(f"{name}={raw!r} is not one of {', '.join(choices)}.")
            return default
        return raw

    def checked(self, name: str, default: str | None, check: Callable[[str], bool], advice: str) -> str | None:
        value = self.text(name)
        if value is not None and not check(value):
            self.problems.append(f"{name}={_shown(name, value)} {advice}")
            return default
        return value if value is not None else default

    def url(self, name: str, default: str | None, https_only: bool) -> str | None:
        schemes = ("https",) if https_only else ("https", "http")
        value = self.checked(
            name, None,
            lambda v: urlparse(v).scheme in schemes and bool(urlparse(v).netloc),
            f"is not a valid {'https://' if https_only else 'http(s)://'} URL: set it to the service's base URL.",
        )
        return value.rstrip("/") if value else default

    def guid(self, name: str, default: str | None, what: str) -> str | None:
        return self.checked(name, default, lambda v: bool(_GUID.match(v)), f"is not a GUID: set it to {what}.")

    def names(self, name: str, default: frozenset[str] = frozenset()) -> frozenset[str]:
        """A list separated by commas, semicolons or spaces."""
        listed = frozenset(part.strip() for part in re.split(r"[,;\s]+", self.text(name) or "") if part.strip())
        return listed or default

    def ids(self, name: str, default: frozenset[str], what: str,
            advice: str = "list them separated by commas.") -> frozenset[str]:
        ids = {i.lower() for i in self.names(name)}
        wrong = sorted(i for i in ids if not _OBJECT_ID.match(i))
        if wrong:
            self.problems.append(f"{name} has {', '.join(repr(w[:60]) for w in wrong[:3])}, which is not {what}: "
                                 f"{advice}")
        return frozenset(i for i in ids if _OBJECT_ID.match(i)) or default

    def app_type(self, name: str, default: str) -> str:
        raw = self.text(name)
        if raw is None:
            return default
        for app_type in APP_TYPES:
            if raw.lower() == app_type.lower():
                return app_type
        self.problems.append(f"{name}={raw!r} is not one of {', '.join(APP_TYPES)}.")
        return default

    def service_urls(self, name: str, _default: tuple[str, ...]) -> tuple[str, ...]:
        """URL patterns; none (unset or wrong) until ``_derived`` picks Microsoft's channels or loopback."""
        patterns = sorted(self.names(name))
        wrong = [p for p in patterns if urlparse(p).scheme not in ("https", "http") or not urlparse(p).netloc
                 or not _SERVICE_URL_PATTERN.match(p) or any(s in (".", "..") for s in urlparse(p).path.split("/"))]
        if wrong:
            self.problems.append(f"{name} has {wrong[0][:80]!r}, which is not a URL pattern such as "
                                 "https://smba.trafficmanager.net/*.")
        return tuple(patterns) if patterns and not wrong else ()

    def conversation_types(self, name: str, default: frozenset[str]) -> frozenset[str]:
        names = self.names(name)
        by_lower = {kind.lower(): kind for kind in CONVERSATION_TYPES}
        wrong = sorted(n for n in names if n.lower() not in by_lower)
        if wrong:
            self.problems.append(f"{name} has {wrong[0][:40]!r}: use {', '.join(CONVERSATION_TYPES)}.")
        kinds = frozenset(by_lower[n.lower()] for n in names if n.lower() in by_lower)
        return kinds or default

    def state_location(self, name: str, default: StateLocation) -> StateLocation:
        raw = self.text(name) or DEFAULT_STATE_STORE
        if raw == "cosmos":
            self.problems.append(f"{name}=cosmos is not supported yet: use blob (several instances) or sqlite.")
        elif raw in ("memory", "blob"):
            return StateLocation(raw)
        elif raw.startswith("sqlite:///") and len(raw) > len("sqlite:///"):
            return StateLocation("sqlite", raw.removeprefix("sqlite:///"))
        else:
            self.problems.append(
                f"{name}={raw!r} is not understood: use memory, sqlite:///path/to/state.db or blob.")
        return default

    def emulator_connection(self, name: str, default: str | None) -> str | None:
        """A storage connection string, accepted for local emulators only: Azure accounts are reached as the bot's
        identity (an account key would be the deployment's only secret)."""
        return self.checked(name, default, is_emulator_connection_string,
                            "points at an Azure account: connection strings are for local emulators only. "
                            "Set STATE_BLOB_ACCOUNT_URL (and TURN_QUEUE_ACCOUNT_URL) and give the bot's identity "
                            "the Storage Blob (and Queue) Data Contributor role.")

    def log_level(self, name: str, default: str) -> str:
        raw = (self.text(name) or default).upper()
        if raw not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            self.problems.append(f"{name}={raw!r} is not one of DEBUG, INFO, WARNING, ERROR.")
            return default
        return raw

    def turn_queue(self, name: str, default: str) -> str:
        """TURN_QUEUE; unset: empty until ``_derived`` picks local, or off with memory state."""
        return self.choice(name, default, ("off", "azure", "local")) if self.text(name) is not None else ""

    def queue_path(self, name: str, _default: str) -> str:
        """TURN_QUEUE_PATH; unset: empty until ``_derived`` puts it beside the SQLite state."""
        return self.text(name) or ""

    # Rules across settings.

    def _check_model(self, settings: Settings) -> None:
        if settings.model.azure_endpoint and not settings.model.azure_deployment:
            self.problems.append("AZURE_OPENAI_DEPLOYMENT is not set: set it to the name of your model deployment "
                                 "(AZURE_OPENAI_ENDPOINT is set).")

    def _check_identity(self, settings: Settings) -> None:
        teams = settings.teams
        if teams.app_id and teams.app_type in ("SingleTenant", "UserAssignedMSI") and not teams.app_tenant_id:
            self.problems.append(f"MICROSOFT_APP_TENANT_ID is not set: {teams.app_type} bots need the tenant id.")
        if teams.app_id and teams.app_type != "UserAssignedMSI" and not teams.app_password:
            self.problems.append(
                f"MICROSOFT_APP_PASSWORD is not set: a {teams.app_type} bot needs its client secret "
                "(or use MICROSOFT_APP_TYPE=UserAssignedMSI with a managed identity).")
        if not teams.app_id and teams.host not in LOOPBACK_HOSTS and not teams.insecure_allow_unauthenticated:
            self.problems.append(
                f"HOST={teams.host!r} without MICROSOFT_APP_ID would serve unauthenticated requests beyond this "
                "machine: set the bot identity (MICROSOFT_APP_ID), listen on 127.0.0.1, or set "
                "INSECURE_ALLOW_UNAUTHENTICATED=true for an isolated test network only.")

    def _check_access(self, settings: Settings) -> None:
        app_id, access = settings.teams.app_id, settings.access
        if app_id and not access.tenants:
            self.problems.append("ALLOWED_TENANTS is not set: with MICROSOFT_APP_ID, list the Entra tenant ids "
                                 "whose users may ask (or set MICROSOFT_APP_TENANT_ID, the default).")
        if len(access.reader_groups) > 20:
            self.problems.append(f"ALLOWED_READER_GROUPS lists {len(access.reader_groups)} groups: at most 20 "
                                 "(Microsoft Graph checks up to 20 at a time); use a group that contains the others.")
        if access.reader_groups and not app_id:
            self.problems.append("ALLOWED_READER_GROUPS needs MICROSOFT_APP_ID: group membership is read from "
                                 "Microsoft Graph with the bot's identity.")

    def _check_writes(self, settings: Settings) -> None:
        workspace = settings.workspace
        if not workspace.write_actions_enabled:
            return
        if not workspace.write_responders:
            self.problems.append("WRITE_ACTIONS_ENABLED=true needs WRITE_RESPONDERS: the Entra object ids of the "
                                 "analysts allowed to change incidents, separated by commas.")
        if not workspace.uses_demo and not workspace.writes_configured:
            missing = [name for name, value in (("SENTINEL_SUBSCRIPTION_ID", workspace.subscription_id),
                                                ("SENTINEL_RESOURCE_GROUP", workspace.resource_group),
                                                ("SENTINEL_WORKSPACE_NAME", workspace.workspace_name))
                       if not value]
            self.problems.append(f"WRITE_ACTIONS_ENABLED=true needs {', '.join(missing)}: the workspace's Azure "
                                 "resource, where incidents are changed (Azure Resource Manager).")

    def _check_on_behalf_of(self, settings: Settings) -> None:
        """QUERY_IDENTITY=user: Teams single sign-on, then the on-behalf-of flow, need all of these."""
        if settings.access.query_identity != "user":
            return
        teams = settings.teams
        needs = [(name, why) for name, missing, why in (
            ("SENTINEL_WORKSPACE_ID", settings.workspace.uses_demo,
             "the demo workspace has no permissions to apply per analyst"),
            ("MICROSOFT_APP_ID", not teams.app_id, "Teams signs analysts in to a registered bot only"),
            ("SSO_APP_ID", not settings.access.sso_app_id, "the app registration whose API Teams signs analysts in to"),
            ("MICROSOFT_APP_TENANT_ID", not teams.app_tenant_id, "the tenant of that app registration"),
        ) if missing]
        for name, why in needs:
            self.problems.append(f"QUERY_IDENTITY=user needs {name}: {why}.")
        if not settings.access.sso_client_secret and teams.app_type != "UserAssignedMSI":
            self.problems.append("QUERY_IDENTITY=user needs SSO_CLIENT_SECRET (the app registration's client secret),"
                                 " or MICROSOFT_APP_TYPE=UserAssignedMSI with the managed identity as the "
                                 "registration's federated credential.")

    def _check_storage(self, settings: Settings) -> None:
        storage = settings.storage
        if storage.state.kind == "blob" and not (storage.blob_account_url or storage.blob_connection_string):
            self.problems.append("STATE_STORE=blob needs STATE_BLOB_ACCOUNT_URL (https://<account>.blob.core.windows"
                                 ".net, reached as the bot's identity) or, for a local emulator, "
                                 "STATE_BLOB_CONNECTION_STRING; optionally STATE_BLOB_CONTAINER (default bot-state).")

    def _check_turns(self, settings: Settings) -> None:
        turns, state = settings.turns, settings.storage.state.kind
        if turns.queue == "local" and state == "memory":
            self.problems.append("TURN_QUEUE=local needs STATE_STORE=sqlite:///... (or blob): worker processes must "
                                 "see each conversation's state.")
        if turns.queue == "azure":
            if not (turns.queue_account_url or settings.storage.blob_connection_string):
                self.problems.append("TURN_QUEUE=azure needs TURN_QUEUE_ACCOUNT_URL (https://<account>.queue.core."
                                     "windows.net) or, for a local emulator, STATE_BLOB_CONNECTION_STRING.")
            if state != "blob":
                self.problems.append("TURN_QUEUE=azure needs STATE_STORE=blob: every instance must see each "
                                     "conversation's state, and the turns' leases live beside it.")
        if turns.worker_processes and turns.queue == "off":
            self.problems.append(f"TURN_WORKER_PROCESSES={turns.worker_processes} needs TURN_QUEUE=local (this "
                                 "machine) or azure: worker processes take their turns from the queue.")
        if turns.instance_count > 1 and (state != "blob" or turns.queue != "azure"):
            # TURN_QUEUE=local too: its file is one machine's, and SQLite's locks do not hold over network shares.
            self.problems.append(f"INSTANCE_COUNT={turns.instance_count} needs STATE_STORE=blob and TURN_QUEUE=azure:"
                                 " SQLite and memory state are per instance, and without the queue two instances "
                                 "could answer one message twice or out of order.")


def _beside(state: StateLocation, name: str) -> str:
    """A file next to the SQLite state (.data/ by default)."""
    folder = (state.path or "").rpartition("/")[0] if state.kind == "sqlite" else ".data"
    return f"{folder}/{name}" if folder else name


def is_emulator_connection_string(value: str) -> bool:
    """True for Azurite's shortcut or a connection string whose every endpoint is on this machine."""
    if value.strip().lower().rstrip(";") == "usedevelopmentstorage=true":
        return True
    endpoints = [part.split("=", 1)[1] for part in value.split(";")
                 if part.lower().split("=", 1)[0].endswith("endpoint")]
    return bool(endpoints) and all(urlparse(url).hostname in ("127.0.0.1", "localhost", "::1") for url in endpoints)


def _shown(name: str, value: str) -> str:
    """A rejected value as shown in an error; secrets are never echoed."""
    if any(word in name for word in ("KEY", "PASSWORD", "SECRET", "CONNECTION_STRING")):
        return "(hidden)"
    return repr(value if len(value) <= 80 else value[:77] + "...")
