"""Settings: one frozen object built from the environment (and a .env file), validated up front.

This is the only module that reads environment variables. Every problem is collected and reported
together, each naming its variable and what to set, so a misconfigured deployment fails at start-up
with one readable message instead of at the first analyst's question.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
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
# Where the Bot Framework's public cloud sends from (Teams and the Azure Bot Service), as URL patterns.
DEFAULT_SERVICE_URLS = ("https://smba.trafficmanager.net/*", "https://*.botframework.com/*",
                        "https://smba.infra.gcc.teams.microsoft.com/*")
# Without an app id the only callers are local tools (the Agents Playground, tests) on this machine.
LOOPBACK_SERVICE_URLS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_STORAGE_NAME = re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")  # Azure queue and container names
_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
T = TypeVar("T")


class ConfigError(ValueError):
    """Invalid settings; ``problems`` holds one line per variable."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("Configuration problems:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class StateStore:
    kind: str  # memory, sqlite, blob
    path: str | None = None  # for sqlite


@dataclass(frozen=True)
class Settings:
    # Language model: Azure OpenAI, else OpenAI or an OpenAI-compatible server.
    azure_openai_endpoint: str | None = None
    azure_openai_deployment: str | None = None
    azure_openai_api_version: str = DEFAULT_AZURE_OPENAI_API_VERSION
    azure_openai_api_key: str | None = field(default=None, repr=False)
    openai_api_key: str | None = field(default=None, repr=False)
    openai_base_url: str | None = None
    openai_model: str | None = None
    # Sentinel: unset workspace id means the embedded demo workspace.
    sentinel_workspace_id: str | None = None
    logs_endpoint: str | None = None
    query_timeout_seconds: int = 60
    sentinel_subscription_id: str | None = None
    sentinel_resource_group: str | None = None
    sentinel_workspace_name: str | None = None
    arm_endpoint: str = "https://management.azure.com"
    sentinel_api_version: str = DEFAULT_SENTINEL_API_VERSION
    # Incident write actions: off unless enabled, and then only for the listed responders (Entra object ids).
    write_actions_enabled: bool = False
    write_responders: frozenset[str] = frozenset()
    demo_data_seed: int = 42
    demo_inbox: str | None = None  # a file: incidents `python -m bot demo new-incident` adds to the running demo
    # Bot identity and web server.
    microsoft_app_id: str | None = None
    microsoft_app_password: str | None = field(default=None, repr=False)
    microsoft_app_type: str = "MultiTenant"
    microsoft_app_tenant_id: str | None = None
    host: str = "127.0.0.1"
    port: int = 3978
    # The front door: an explicit opt-in to serve unauthenticated beyond loopback, where replies may go, and
    # where the Bot Framework's signing keys are published.
    insecure_allow_unauthenticated: bool = False
    allowed_service_urls: tuple[str, ...] = LOOPBACK_SERVICE_URLS
    openid_metadata_url: str = DEFAULT_OPENID_METADATA_URL
    # Who may ask: tenants, readers (object ids) and reader groups (checked through Microsoft Graph),
    # and where (conversation types, teams, channels). Empty reader lists: anyone in an allowed tenant.
    allowed_tenants: frozenset[str] = frozenset()
    allowed_readers: frozenset[str] = frozenset()
    allowed_reader_groups: frozenset[str] = frozenset()
    allowed_conversation_types: frozenset[str] = frozenset(CONVERSATION_TYPES)
    allowed_teams: frozenset[str] = frozenset()
    allowed_channels: frozenset[str] = frozenset()
    graph_endpoint: str = "https://graph.microsoft.com"
    login_endpoint: str = "https://login.microsoftonline.com"
    group_cache_seconds: int = 300
    # Whose permissions reads and writes run with: the bot's identity, or each analyst's own (on-behalf-of, after
    # Teams single sign-on through the Azure Bot's OAuth connection; an app registration whose API Teams signs in to).
    query_identity: str = "bot"
    sso_connection_name: str = "sentinel-sso"
    sso_app_id: str | None = None
    sso_client_secret: str | None = field(default=None, repr=False)
    bot_oauth_url: str | None = None  # the Bot Framework token service (default: botbuilder's); tests, sovereign clouds
    # Cost and abuse: model turns per minute, per analyst and per conversation.
    model_turns_per_user_minute: int = 6
    model_turns_per_conversation_minute: int = 20
    model_tokens_per_user_minute: int = 60_000  # 0: no token limit
    model_tokens_per_conversation_minute: int = 150_000
    # Conversation state and the tool loop.
    state_store: StateStore = StateStore("sqlite", ".data/state.db")
    state_blob_connection_string: str | None = field(default=None, repr=False)
    state_blob_container: str = "bot-state"
    state_blob_account_url: str | None = None  # https://<account>.blob.core.windows.net, reached as the bot's identity
    # Turns: one overall deadline each; the drain at shutdown; durable turns on an Azure Storage queue.
    turn_deadline_seconds: int = 120
    shutdown_grace_seconds: int = 20
    # off: turns run in the web process; azure: queued on Azure Storage (several instances); local: queued in a SQLite
    # file for worker processes on this machine (one instance, its cores).
    turn_queue: str = "off"
    turn_queue_path: str = ".data/turns.db"  # TURN_QUEUE=local
    turn_queue_account_url: str | None = None  # https://<account>.queue.core.windows.net
    turn_queue_name: str = "bot-turns"
    turn_blob_container: str = "bot-turns"  # per-conversation leases, sequence numbers, duplicate markers
    turn_workers: int = 8  # turns one worker process runs at once
    web_runs_worker: bool = True  # the web process also takes turns from the queue
    turn_worker_processes: int = 0  # python -m bot worker processes that serve starts, watches and restarts
    turn_max_attempts: int = 3  # deliveries of one turn before it is moved aside and its user told
    watch_poll_seconds: int = 60  # how often watches look for new incidents (one query whatever their number); 0: off
    instance_count: int = 1  # instances serving this bot (the deployment's scale-out), to refuse per-instance state
    # Whether the Azure SDK clients read proxy settings from the environment. aiohttp then looks up .netrc and the
    # proxy variables on a thread for every request (two thread hops each): only done when a proxy is configured.
    env_proxies: bool = False
    max_tool_rounds: int = 5
    max_turns: int = 30
    max_history_tokens: int = 24_000
    log_level: str = "INFO"
    log_format: str = "text"  # text, or json (one object per line) for log collectors
    # Observability: OpenTelemetry to Application Insights when its connection string is set.
    applicationinsights_connection_string: str | None = field(default=None, repr=False)
    telemetry_capture_content: bool = False  # adds the question text to the turn span; off by default

    @property
    def uses_demo_workspace(self) -> bool:
        return self.sentinel_workspace_id is None

    @property
    def watches_enabled(self) -> bool:
        """Watches poll with the bot's own read access: nobody is signed in when it looks for new incidents."""
        return self.watch_poll_seconds > 0 and self.query_identity == "bot"

    @property
    def llm_provider(self) -> str | None:
        """"azure", "openai", or None when no language model is configured."""
        if self.azure_openai_endpoint:
            return "azure"
        if self.openai_api_key or self.openai_base_url:
            return "openai"
        return None

    @property
    def model_name(self) -> str:
        """The model (OpenAI) or deployment (Azure OpenAI) the bot asks."""
        if self.llm_provider == "azure":
            return self.azure_openai_deployment or ""
        return self.openai_model or "gpt-4o"

    @property
    def writes_configured(self) -> bool:
        """The workspace's Azure resource path is known (needed to change incidents through Azure Resource Manager)."""
        return bool(self.sentinel_subscription_id and self.sentinel_resource_group and self.sentinel_workspace_name)

    @property
    def authenticates_requests(self) -> bool:
        return bool(self.microsoft_app_id)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, dotenv_path: str | Path | None = ".env") -> Settings:
        """Settings from ``environ`` (default: the process environment) over the values in ``dotenv_path``."""
        values: dict[str, str] = {}
        if dotenv_path and Path(dotenv_path).is_file():
            values.update({k: v for k, v in dotenv_values(dotenv_path).items() if v is not None})
        values.update(os.environ if environ is None else environ)
        return _Reader(values).settings()


LLM_HELP = (
    "Natural-language answers need a language model. Set AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_DEPLOYMENT "
    "(plus AZURE_OPENAI_API_KEY, or sign in for Entra ID), or OPENAI_API_KEY (with OPENAI_BASE_URL and "
    "OPENAI_MODEL for an OpenAI-compatible server such as vLLM, Ollama or LM Studio)."
)


_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NETRC")


class _Reader:
    """Reads and checks each variable, collecting every problem before failing."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = values
        self.problems: list[str] = []

    def text(self, name: str) -> str | None:
        value = self._values.get(name)
        if value is None:
            return None
        value = value.strip()
        return value or None

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

    def choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        raw = (self.text(name) or default).lower()
        if raw not in choices:
            self.problems.append(f"{name}={raw!r} is not one of {', '.join(choices)}.")
            return default
        return raw

    def checked(self, name: str, check: Callable[[str], bool], advice: str) -> str | None:
        value = self.text(name)
        if value is not None and not check(value):
            self.problems.append(f"{name}={_shown(name, value)} {advice}")
            return None
        return value

    def url(self, name: str, *, https_only: bool) -> str | None:
        schemes = ("https",) if https_only else ("https", "http")
        value = self.checked(
            name,
            lambda v: urlparse(v).scheme in schemes and bool(urlparse(v).netloc),
            f"is not a valid {'https://' if https_only else 'http(s)://'} URL: set it to the service's base URL.",
        )
        return value.rstrip("/") if value else None

    def guid(self, name: str, what: str) -> str | None:
        return self.checked(name, lambda v: bool(_GUID.match(v)), f"is not a GUID: set it to {what}.")

    def settings(self) -> Settings:
        azure_endpoint = self.url("AZURE_OPENAI_ENDPOINT", https_only=True)
        azure_deployment = self.text("AZURE_OPENAI_DEPLOYMENT")
        if azure_endpoint and not azure_deployment:
            self.problems.append(
                "AZURE_OPENAI_DEPLOYMENT is not set: set it to the name of your model deployment "
                "(AZURE_OPENAI_ENDPOINT is set)."
            )
        openai_base_url = self.url("OPENAI_BASE_URL", https_only=False)
        app_type = self._app_type()
        app_id = self.text("MICROSOFT_APP_ID")
        tenant_id = self.guid("MICROSOFT_APP_TENANT_ID", "your Entra tenant id")
        password = self.text("MICROSOFT_APP_PASSWORD")
        if app_id and app_type in ("SingleTenant", "UserAssignedMSI") and not tenant_id:
            self.problems.append(f"MICROSOFT_APP_TENANT_ID is not set: {app_type} bots need the tenant id.")
        if app_id and app_type != "UserAssignedMSI" and not password:
            self.problems.append(
                f"MICROSOFT_APP_PASSWORD is not set: a {app_type} bot needs its client secret "
                "(or use MICROSOFT_APP_TYPE=UserAssignedMSI with a managed identity)."
            )
        host = self.text("HOST") or "127.0.0.1"
        insecure = self.flag("INSECURE_ALLOW_UNAUTHENTICATED", False)
        if not app_id and host not in LOOPBACK_HOSTS and not insecure:
            self.problems.append(
                f"HOST={host!r} without MICROSOFT_APP_ID would serve unauthenticated requests beyond this machine: "
                "set the bot identity (MICROSOFT_APP_ID), listen on 127.0.0.1, or set "
                "INSECURE_ALLOW_UNAUTHENTICATED=true for an isolated test network only.")
        tenants = self._ids("ALLOWED_TENANTS", "an Entra tenant id")
        if app_id and not tenants:
            if tenant_id:
                tenants = frozenset({tenant_id.lower()})  # by default only the bot's own tenant may ask
            else:
                self.problems.append("ALLOWED_TENANTS is not set: with MICROSOFT_APP_ID, list the Entra tenant ids "
                                     "whose users may ask (or set MICROSOFT_APP_TENANT_ID, the default).")
        groups = self._ids("ALLOWED_READER_GROUPS", "an Entra group object id")
        if len(groups) > 20:
            self.problems.append(f"ALLOWED_READER_GROUPS lists {len(groups)} groups: at most 20 (Microsoft Graph "
                                 "checks up to 20 at a time); use a group that contains the others.")
        if groups and not app_id:
            self.problems.append("ALLOWED_READER_GROUPS needs MICROSOFT_APP_ID: group membership is read from "
                                 "Microsoft Graph with the bot's identity.")
        settings = Settings(
            azure_openai_endpoint=azure_endpoint,
            azure_openai_deployment=azure_deployment,
            azure_openai_api_version=self.text("AZURE_OPENAI_API_VERSION") or DEFAULT_AZURE_OPENAI_API_VERSION,
            azure_openai_api_key=self.text("AZURE_OPENAI_API_KEY"),
            openai_api_key=self.text("OPENAI_API_KEY"),
            openai_base_url=openai_base_url,
            openai_model=self.text("OPENAI_MODEL"),
            sentinel_workspace_id=self.guid(
                "SENTINEL_WORKSPACE_ID", "the Workspace ID from the Log Analytics workspace's Overview page"
            ),
            logs_endpoint=self.url("LOGS_ENDPOINT", https_only=True),
            query_timeout_seconds=self.number("QUERY_TIMEOUT_SECONDS", 60, 5, 600),
            sentinel_subscription_id=self.guid("SENTINEL_SUBSCRIPTION_ID", "the workspace's subscription id"),
            sentinel_resource_group=self.text("SENTINEL_RESOURCE_GROUP"),
            sentinel_workspace_name=self.text("SENTINEL_WORKSPACE_NAME"),
            arm_endpoint=self.url("ARM_ENDPOINT", https_only=True) or "https://management.azure.com",
            sentinel_api_version=self.checked(
                "SENTINEL_API_VERSION", lambda v: bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}(-preview)?", v)),
                "is not an API version: use a date such as 2025-09-01.") or DEFAULT_SENTINEL_API_VERSION,
            write_actions_enabled=self.flag("WRITE_ACTIONS_ENABLED", False),
            write_responders=self._responders(),
            demo_data_seed=self.number("DEMO_DATA_SEED", 42, 0, 2**31 - 1),
            demo_inbox=self.text("DEMO_INBOX"),
            microsoft_app_id=app_id,
            microsoft_app_password=password,
            microsoft_app_type=app_type,
            microsoft_app_tenant_id=tenant_id,
            host=host,
            port=self.number("PORT", 3978, 1, 65535),
            insecure_allow_unauthenticated=insecure,
            allowed_service_urls=self._service_urls(bool(app_id)),
            openid_metadata_url=self.url("BOT_OPENID_METADATA_URL", https_only=False) or DEFAULT_OPENID_METADATA_URL,
            allowed_tenants=tenants,
            allowed_readers=self._ids("ALLOWED_READERS", "an Entra user object id"),
            allowed_reader_groups=groups,
            allowed_conversation_types=self._conversation_types(),
            allowed_teams=self._names("ALLOWED_TEAMS"),
            allowed_channels=self._names("ALLOWED_CHANNELS"),
            graph_endpoint=self.url("GRAPH_ENDPOINT", https_only=False) or "https://graph.microsoft.com",
            login_endpoint=self.url("ENTRA_LOGIN_ENDPOINT", https_only=False) or "https://login.microsoftonline.com",
            group_cache_seconds=self.number("READER_GROUP_CACHE_SECONDS", 300, 0, 86_400),
            query_identity=self.choice("QUERY_IDENTITY", ("bot", "user"), "bot"),
            sso_connection_name=self.checked("SSO_CONNECTION_NAME", lambda v: bool(re.fullmatch(r"[\w.-]{1,80}", v)),
                                             "is not a connection name: use the OAuth connection's name on the Azure "
                                             "Bot (letters, digits, '.', '_' and '-').") or "sentinel-sso",
            sso_app_id=self.guid("SSO_APP_ID", "the client id of the app registration Teams single sign-on "
                                 "issues tokens to"),
            sso_client_secret=self.text("SSO_CLIENT_SECRET"),
            bot_oauth_url=self.url("BOT_OAUTH_URL", https_only=False),
            watch_poll_seconds=self.number("WATCH_POLL_SECONDS", 60, 0, 3600),
            model_turns_per_user_minute=self.number("MODEL_TURNS_PER_USER_MINUTE", 6, 1, 1000),
            model_turns_per_conversation_minute=self.number("MODEL_TURNS_PER_CONVERSATION_MINUTE", 20, 1, 1000),
            model_tokens_per_user_minute=self.number("MODEL_TOKENS_PER_USER_MINUTE", 60_000, 0, 10_000_000),
            model_tokens_per_conversation_minute=self.number("MODEL_TOKENS_PER_CONVERSATION_MINUTE", 150_000, 0,
                                                             10_000_000),
            state_store=self._state_store(),
            state_blob_connection_string=self._storage_connection_string(),
            state_blob_container=self.text("STATE_BLOB_CONTAINER") or "bot-state",
            state_blob_account_url=self.url("STATE_BLOB_ACCOUNT_URL", https_only=False),
            turn_deadline_seconds=self.number("TURN_DEADLINE_SECONDS", 120, 1, 3600),
            shutdown_grace_seconds=self.number("SHUTDOWN_GRACE_SECONDS", 20, 0, 110),
            turn_queue=self._turn_queue(),
            turn_queue_path=self.text("TURN_QUEUE_PATH") or self._beside_state("turns.db"),
            turn_queue_account_url=self.url("TURN_QUEUE_ACCOUNT_URL", https_only=False),
            turn_queue_name=self.checked("TURN_QUEUE_NAME", lambda v: bool(_STORAGE_NAME.match(v)),
                                         "is not a valid queue name: 3-63 lowercase letters, digits and single "
                                         "hyphens.") or "bot-turns",
            turn_blob_container=self.checked("TURN_BLOB_CONTAINER", lambda v: bool(_STORAGE_NAME.match(v)),
                                             "is not a valid container name: 3-63 lowercase letters, digits and "
                                             "single hyphens.") or "bot-turns",
            turn_workers=self.number("TURN_WORKERS", 8, 1, 256),
            web_runs_worker=self.flag("TURN_WORKER_IN_WEB", True),
            turn_worker_processes=self._worker_processes(),
            turn_max_attempts=self.number("TURN_MAX_ATTEMPTS", 3, 1, 20),
            instance_count=self._instance_count(),
            env_proxies=any(self.text(name) for name in _PROXY_VARIABLES),
            max_tool_rounds=self.number("MAX_TOOL_ROUNDS", 5, 1, 20),
            max_turns=self.number("MAX_TURNS", 30, 2, 500),
            max_history_tokens=self.number("MAX_HISTORY_TOKENS", 24_000, 2_000, 500_000),
            log_level=self._log_level(),
            log_format=self.choice("LOG_FORMAT", LOG_FORMATS, "text"),
            applicationinsights_connection_string=self.checked(
                "APPLICATIONINSIGHTS_CONNECTION_STRING", lambda v: "InstrumentationKey=" in v,
                "is not an Application Insights connection string: copy it from the resource's Overview page "
                "(it starts with InstrumentationKey=)."),
            telemetry_capture_content=self.flag("TELEMETRY_CAPTURE_CONTENT", False),
        )
        if settings.write_actions_enabled:
            self._check_writes(settings)
        if settings.query_identity == "user":
            self._check_on_behalf_of(settings)
        if self.problems:
            raise ConfigError(self.problems)
        return settings

    def _responders(self) -> frozenset[str]:
        return self._ids("WRITE_RESPONDERS", "an Entra object id",
                         "list the analysts' object ids (Entra admin center > Users > Object ID), separated by commas.")

    def _names(self, name: str) -> frozenset[str]:
        """A list separated by commas, semicolons or spaces."""
        return frozenset(part.strip() for part in re.split(r"[,;\s]+", self.text(name) or "") if part.strip())

    def _ids(self, name: str, what: str, advice: str = "list them separated by commas.") -> frozenset[str]:
        ids = {i.lower() for i in self._names(name)}
        wrong = sorted(i for i in ids if not _OBJECT_ID.match(i))
        if wrong:
            self.problems.append(f"{name} has {', '.join(repr(w[:60]) for w in wrong[:3])}, which is not {what}: "
                                 f"{advice}")
        return frozenset(i for i in ids if _OBJECT_ID.match(i))

    def _service_urls(self, authenticated: bool) -> tuple[str, ...]:
        patterns = sorted(self._names("ALLOWED_SERVICE_URLS"))
        wrong = [p for p in patterns if urlparse(p).scheme not in ("https", "http") or not urlparse(p).netloc]
        if wrong:
            self.problems.append(f"ALLOWED_SERVICE_URLS has {wrong[0][:80]!r}, which is not a URL pattern such as "
                                 "https://smba.trafficmanager.net/*.")
        if patterns and not wrong:
            return tuple(patterns)
        return DEFAULT_SERVICE_URLS if authenticated else LOOPBACK_SERVICE_URLS

    def _conversation_types(self) -> frozenset[str]:
        names = self._names("ALLOWED_CONVERSATION_TYPES")
        by_lower = {kind.lower(): kind for kind in CONVERSATION_TYPES}
        wrong = sorted(n for n in names if n.lower() not in by_lower)
        if wrong:
            self.problems.append(f"ALLOWED_CONVERSATION_TYPES has {wrong[0][:40]!r}: use "
                                 f"{', '.join(CONVERSATION_TYPES)}.")
        kinds = frozenset(by_lower[n.lower()] for n in names if n.lower() in by_lower)
        return kinds or frozenset(CONVERSATION_TYPES)

    def _check_writes(self, settings: Settings) -> None:
        if not settings.write_responders:
            self.problems.append("WRITE_ACTIONS_ENABLED=true needs WRITE_RESPONDERS: the Entra object ids of the "
                                 "analysts allowed to change incidents, separated by commas.")
        if not settings.uses_demo_workspace and not settings.writes_configured:
            missing = [name for name, value in (("SENTINEL_SUBSCRIPTION_ID", settings.sentinel_subscription_id),
                                                ("SENTINEL_RESOURCE_GROUP", settings.sentinel_resource_group),
                                                ("SENTINEL_WORKSPACE_NAME", settings.sentinel_workspace_name))
                       if not value]
            self.problems.append(f"WRITE_ACTIONS_ENABLED=true needs {', '.join(missing)}: the workspace's Azure "
                                 "resource, where incidents are changed (Azure Resource Manager).")

    def _check_on_behalf_of(self, settings: Settings) -> None:
        """QUERY_IDENTITY=user: Teams single sign-on, then the on-behalf-of flow, need all of these."""
        needs = [(name, why) for name, missing, why in (
            ("SENTINEL_WORKSPACE_ID", settings.uses_demo_workspace,
             "the demo workspace has no permissions to apply per analyst"),
            ("MICROSOFT_APP_ID", not settings.microsoft_app_id, "Teams signs analysts in to a registered bot only"),
            ("SSO_APP_ID", not settings.sso_app_id, "the app registration whose API Teams signs analysts in to"),
            ("MICROSOFT_APP_TENANT_ID", not settings.microsoft_app_tenant_id, "the tenant of that app registration"),
        ) if missing]
        for name, why in needs:
            self.problems.append(f"QUERY_IDENTITY=user needs {name}: {why}.")
        if not settings.sso_client_secret and settings.microsoft_app_type != "UserAssignedMSI":
            self.problems.append("QUERY_IDENTITY=user needs SSO_CLIENT_SECRET (the app registration's client secret),"
                                 " or MICROSOFT_APP_TYPE=UserAssignedMSI with the managed identity as the "
                                 "registration's federated credential.")

    def _app_type(self) -> str:
        raw = self.text("MICROSOFT_APP_TYPE")
        if raw is None:
            return "MultiTenant"
        for app_type in APP_TYPES:
            if raw.lower() == app_type.lower():
                return app_type
        self.problems.append(f"MICROSOFT_APP_TYPE={raw!r} is not one of {', '.join(APP_TYPES)}.")
        return "MultiTenant"

    def _storage_connection_string(self) -> str | None:
        """STATE_BLOB_CONNECTION_STRING, accepted for local emulators only: Azure accounts are reached as the bot's
        identity (an account key would be the deployment's only secret)."""
        return self.checked("STATE_BLOB_CONNECTION_STRING", is_emulator_connection_string,
                            "points at an Azure account: connection strings are for local emulators only. "
                            "Set STATE_BLOB_ACCOUNT_URL (and TURN_QUEUE_ACCOUNT_URL) and give the bot's identity "
                            "the Storage Blob (and Queue) Data Contributor role.")

    def _state_store(self) -> StateStore:
        raw = self.text("STATE_STORE") or DEFAULT_STATE_STORE
        if raw == "blob" and not (self.text("STATE_BLOB_ACCOUNT_URL") or self.text("STATE_BLOB_CONNECTION_STRING")):
            self.problems.append("STATE_STORE=blob needs STATE_BLOB_ACCOUNT_URL (https://<account>.blob.core.windows"
                                 ".net, reached as the bot's identity) or, for a local emulator, "
                                 "STATE_BLOB_CONNECTION_STRING; optionally STATE_BLOB_CONTAINER (default bot-state).")
        if raw == "cosmos":
            self.problems.append("STATE_STORE=cosmos is not supported yet: use blob (several instances) or sqlite.")
        if raw in ("memory", "blob", "cosmos"):
            return StateStore(raw)
        if raw.startswith("sqlite:///") and len(raw) > len("sqlite:///"):
            return StateStore("sqlite", raw.removeprefix("sqlite:///"))
        self.problems.append(
            f"STATE_STORE={raw!r} is not understood: use memory, sqlite:///path/to/state.db or blob."
        )
        return StateStore("memory")

    def _instance_count(self) -> int:
        count = self.number("INSTANCE_COUNT", 1, 1, 100)
        store = self.text("STATE_STORE") or DEFAULT_STATE_STORE
        if count > 1 and (store != "blob" or (self.text("TURN_QUEUE") or "off").lower() != "azure"):
            # TURN_QUEUE=local too: its file is one machine's, and SQLite's locks do not hold over network shares.
            self.problems.append(f"INSTANCE_COUNT={count} needs STATE_STORE=blob and TURN_QUEUE=azure: SQLite and "
                                 "memory state are per instance, and without the queue two instances could answer "
                                 "one message twice or out of order.")
        return count

    def _turn_queue(self) -> str:
        kind = self.choice("TURN_QUEUE", ("off", "azure", "local"), "off")
        if kind == "local" and (self.text("STATE_STORE") or DEFAULT_STATE_STORE) == "memory":
            self.problems.append("TURN_QUEUE=local needs STATE_STORE=sqlite:///... (or blob): worker processes must "
                                 "see each conversation's state.")
        if kind == "azure":
            if not (self.text("TURN_QUEUE_ACCOUNT_URL") or self.text("STATE_BLOB_CONNECTION_STRING")):
                self.problems.append("TURN_QUEUE=azure needs TURN_QUEUE_ACCOUNT_URL (https://<account>.queue.core."
                                     "windows.net) or, for a local emulator, STATE_BLOB_CONNECTION_STRING.")
            if (self.text("STATE_STORE") or DEFAULT_STATE_STORE) != "blob":
                self.problems.append("TURN_QUEUE=azure needs STATE_STORE=blob: every instance must see each "
                                     "conversation's state, and the turns' leases live beside it.")
        return kind

    def _beside_state(self, name: str) -> str:
        """A file next to the SQLite state (.data/ by default)."""
        raw = self.text("STATE_STORE") or DEFAULT_STATE_STORE
        folder = raw.removeprefix("sqlite:///").rpartition("/")[0] if raw.startswith("sqlite:///") else ".data"
        return f"{folder}/{name}" if folder else name

    def _worker_processes(self) -> int:
        count = self.number("TURN_WORKER_PROCESSES", 0, 0, 64)
        if count and (self.text("TURN_QUEUE") or "off").lower() == "off":
            self.problems.append(f"TURN_WORKER_PROCESSES={count} needs TURN_QUEUE=local (this machine) or azure: "
                                 "worker processes take their turns from the queue.")
        return count

    def _log_level(self) -> str:
        raw = (self.text("LOG_LEVEL") or "INFO").upper()
        if raw not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            self.problems.append(f"LOG_LEVEL={raw!r} is not one of DEBUG, INFO, WARNING, ERROR.")
            return "INFO"
        return raw


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
