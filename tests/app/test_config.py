from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from bot.config import SECTIONS, ConfigError, Settings, StateLocation, variables
from bot.teams.front_door import ServiceUrls

ROOT = Path(__file__).resolve().parents[2]


def settings(**env: str) -> Settings:
    return Settings.from_env(env, dotenv_path=None)


def test_defaults_run_the_demo_locally_without_a_model() -> None:
    s = settings()
    assert s.workspace.uses_demo and s.model.provider is None and not s.teams.authenticates_requests
    assert (s.teams.host, s.teams.port, s.model.max_tool_rounds, s.model.max_turns) == ("127.0.0.1", 3978, 5, 30)
    assert s.storage.state == StateLocation("sqlite", ".data/state.db")


def test_model_providers() -> None:
    azure = settings(AZURE_OPENAI_ENDPOINT="https://soc.openai.azure.com/", AZURE_OPENAI_DEPLOYMENT="gpt-4o")
    assert azure.model.provider == "azure" and azure.model.azure_endpoint == "https://soc.openai.azure.com"
    local = settings(OPENAI_BASE_URL="http://127.0.0.1:11434/v1", OPENAI_MODEL="llama3.1")
    assert local.model.provider == "openai"


def test_every_problem_is_reported_at_once_and_names_its_variable() -> None:
    with pytest.raises(ConfigError) as caught:
        settings(
            AZURE_OPENAI_ENDPOINT="http://not-https.example",
            SENTINEL_WORKSPACE_ID="my-workspace",
            PORT="eighty",
            MAX_TOOL_ROUNDS="0",
            STATE_STORE="redis://x",
            MICROSOFT_APP_TYPE="SomethingElse",
        )
    text = str(caught.value)
    for name in ("AZURE_OPENAI_ENDPOINT", "SENTINEL_WORKSPACE_ID", "PORT", "MAX_TOOL_ROUNDS", "STATE_STORE",
                 "MICROSOFT_APP_TYPE"):
        assert name in text
    assert len(caught.value.problems) == 6
    assert "Workspace ID" in text  # says what to set, not only what is wrong


def test_bot_identity_rules() -> None:
    with pytest.raises(ConfigError, match="MICROSOFT_APP_PASSWORD"):
        settings(MICROSOFT_APP_ID="11111111-1111-1111-1111-111111111111")
    with pytest.raises(ConfigError, match="MICROSOFT_APP_TENANT_ID"):
        settings(MICROSOFT_APP_ID="11111111-1111-1111-1111-111111111111", MICROSOFT_APP_TYPE="userassignedmsi")
    msi = settings(
        MICROSOFT_APP_ID="11111111-1111-1111-1111-111111111111",
        MICROSOFT_APP_TYPE="UserAssignedMSI",
        MICROSOFT_APP_TENANT_ID="22222222-2222-2222-2222-222222222222",
    )
    assert msi.teams.authenticates_requests and msi.teams.app_type == "UserAssignedMSI"


def test_secrets_are_neither_echoed_nor_shown_in_repr() -> None:
    s = settings(AZURE_OPENAI_API_KEY="sk-secret-value", MICROSOFT_APP_PASSWORD="hunter2")
    assert "sk-secret-value" not in repr(s) and "hunter2" not in repr(s)


def test_dotenv_file_is_read_and_the_environment_wins(tmp_path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("PORT=4000\nMAX_TURNS=12\n")
    s = Settings.from_env({"PORT": "5000"}, dotenv_path=dotenv)
    assert (s.teams.port, s.model.max_turns) == (5000, 12)


def test_state_store_forms() -> None:
    assert settings(STATE_STORE="memory").storage.state == StateLocation("memory")
    assert settings(STATE_STORE="sqlite:////var/lib/bot/state.db").storage.state == StateLocation(
        "sqlite", "/var/lib/bot/state.db")


def test_blob_state_needs_its_connection_string() -> None:
    with pytest.raises(ConfigError, match="STATE_BLOB_CONNECTION_STRING"):
        settings(STATE_STORE="blob")
    blob = settings(STATE_STORE="blob", STATE_BLOB_CONNECTION_STRING="UseDevelopmentStorage=true")
    assert blob.storage.state == StateLocation("blob") and blob.storage.blob_container == "bot-state"
    assert "UseDevelopmentStorage" not in repr(blob)
    with pytest.raises(ConfigError, match="cosmos is not supported"):
        settings(STATE_STORE="cosmos")


def test_observability_settings() -> None:
    defaults = settings()
    assert (defaults.telemetry.log_format, defaults.telemetry.connection_string,
            defaults.telemetry.capture_content) == ("text", None, False)
    connection = "InstrumentationKey=00000000-0000-0000-0000-000000000000;IngestionEndpoint=https://x.example/"
    on = settings(LOG_FORMAT="JSON", APPLICATIONINSIGHTS_CONNECTION_STRING=connection,
                  TELEMETRY_CAPTURE_CONTENT="true")
    assert (on.telemetry.log_format, on.telemetry.connection_string, on.telemetry.capture_content) == (
        "json", connection, True)
    assert "InstrumentationKey" not in repr(on)
    with pytest.raises(ConfigError) as caught:
        settings(LOG_FORMAT="xml", APPLICATIONINSIGHTS_CONNECTION_STRING="not-a-connection-string",
                 TELEMETRY_CAPTURE_CONTENT="maybe")
    assert len(caught.value.problems) == 3
    assert "not-a-connection-string" not in str(caught.value), "connection strings are not echoed"
    for name in ("LOG_FORMAT", "APPLICATIONINSIGHTS_CONNECTION_STRING", "TELEMETRY_CAPTURE_CONTENT"):
        assert name in str(caught.value)


def test_write_actions_are_off_by_default_and_need_responders_and_the_workspace_resource() -> None:
    assert not settings().workspace.write_actions_enabled and settings().workspace.write_responders == frozenset()
    on = settings(**{"WRITE_ACTIONS_ENABLED": "true",
                   "WRITE_RESPONDERS": "A636B9CD-EBF1-44B3-8EFC-0A2D01099035, 00000000-0000-0000-0000-0000000000020"})
    assert on.workspace.write_responders == {"a636b9cd-ebf1-44b3-8efc-0a2d01099035",
                                             "00000000-0000-0000-0000-0000000000020"}
    assert on.workspace.api_version == "2025-09-01"
    with pytest.raises(ConfigError) as caught:
        settings(**{"WRITE_ACTIONS_ENABLED": "yes", "SENTINEL_WORKSPACE_ID": "00000000-0000-0000-0000-000000000001",
                  "WRITE_RESPONDERS": "alice@contoso.com", "SENTINEL_RESOURCE_GROUP": "rg-soc",
                  "SENTINEL_API_VERSION": "latest"})
    problems = "\n".join(caught.value.problems)
    assert "WRITE_RESPONDERS has 'alice@contoso.com'" in problems and "object id" in problems
    assert "needs SENTINEL_SUBSCRIPTION_ID, SENTINEL_WORKSPACE_NAME" in problems
    assert "SENTINEL_API_VERSION='latest' is not an API version" in problems
    with pytest.raises(ConfigError, match="needs WRITE_RESPONDERS"):
        settings(**{"WRITE_ACTIONS_ENABLED": "true"})


APP = {"MICROSOFT_APP_ID": "11111111-1111-1111-1111-111111111111", "MICROSOFT_APP_PASSWORD": "hunter2"}


def test_who_may_ask_defaults_to_the_bots_own_tenant_and_fails_closed_without_one() -> None:
    own = settings(**APP, MICROSOFT_APP_TYPE="SingleTenant",
                   MICROSOFT_APP_TENANT_ID="22222222-2222-2222-2222-222222222222")
    assert own.access.tenants == {"22222222-2222-2222-2222-222222222222"}
    assert own.teams.allowed_service_urls[0] == "https://smba.trafficmanager.net/*", "Microsoft's channels with auth on"
    with pytest.raises(ConfigError, match="ALLOWED_TENANTS is not set"):
        settings(**APP)  # a multi-tenant bot must say whose users may ask
    listed = settings(**APP,
                      ALLOWED_TENANTS="33333333-3333-3333-3333-333333333333; 44444444-4444-4444-4444-444444444444",
                      ALLOWED_READERS="A636B9CD-EBF1-44B3-8EFC-0A2D01099035",
                      ALLOWED_READER_GROUPS="0b9d3a51-7a0e-4c35-9d6f-1f4a0a6c2e11",
                      ALLOWED_CONVERSATION_TYPES="personal, Channel", ALLOWED_TEAMS="19:soc@thread.tacv2")
    assert len(listed.access.tenants) == 2 and listed.access.readers == {"a636b9cd-ebf1-44b3-8efc-0a2d01099035"}
    assert listed.access.conversation_types == {"personal", "channel"}
    assert listed.access.teams == {"19:soc@thread.tacv2"} and listed.access.group_cache_seconds == 300
    local = settings()
    assert not local.access.tenants and local.teams.allowed_service_urls[0].startswith("http://127.0.0.1")


def test_the_bot_cloud_names_its_service_urls_signing_keys_and_issuer() -> None:
    tenant = {"ALLOWED_TENANTS": "33333333-3333-3333-3333-333333333333"}
    public = settings(**APP, **tenant)
    urls = ServiceUrls(public.teams.allowed_service_urls)
    for url in ("https://smba.trafficmanager.net/amer/", "https://smba.infra.gcc.teams.microsoft.com/teams",
                "https://canary.botapi.skype.com/amer/"):
        assert urls.allows(url), url
    for url in ("https://smba.infra.gov.teams.microsoft.us/teams", "https://smba.infra.dod.teams.microsoft.us/teams"):
        assert not urls.allows(url), url
    assert public.teams.openid_metadata_url == "https://login.botframework.com/v1/.well-known/openidconfiguration"
    assert public.teams.bot_cloud.channel_service is None
    for cloud, host in (("gcchigh", "smba.infra.gov.teams.microsoft.us"), ("dod", "smba.infra.dod.teams.microsoft.us")):
        chosen = settings(**APP, **tenant, BOT_CLOUD=cloud)
        urls = ServiceUrls(chosen.teams.allowed_service_urls)
        assert urls.allows(f"https://{host}/teams") and not urls.allows("https://smba.trafficmanager.net/amer/")
        assert chosen.teams.openid_metadata_url.startswith("https://login.botframework.azure.us/")
        assert chosen.teams.bot_cloud.token_issuer == "https://api.botframework.us"
        assert chosen.teams.bot_cloud.channel_service == "https://botframework.azure.us"
    gcc = ServiceUrls(settings(**APP, **tenant, BOT_CLOUD="GCC").teams.allowed_service_urls)
    assert gcc.allows("https://smba.infra.gcc.teams.microsoft.com/teams")
    assert not gcc.allows("https://smba.trafficmanager.net/amer/")
    own = settings(**APP, **tenant, BOT_CLOUD="dod", BOT_OPENID_METADATA_URL="http://127.0.0.1:1/openid")
    assert own.teams.openid_metadata_url == "http://127.0.0.1:1/openid", "an explicit one wins"
    with pytest.raises(ConfigError, match="BOT_CLOUD='mooncake' is not one of public, gcc, gcchigh, dod"):
        settings(**APP, **tenant, BOT_CLOUD="mooncake")


def test_access_settings_are_checked() -> None:
    with pytest.raises(ConfigError) as caught:
        settings(ALLOWED_READERS="alice@contoso.com", ALLOWED_READER_GROUPS="0b9d3a51-7a0e-4c35-9d6f-1f4a0a6c2e11",
                 ALLOWED_CONVERSATION_TYPES="meeting", ALLOWED_SERVICE_URLS="smba.trafficmanager.net",
                 HOST="0.0.0.0", MODEL_TURNS_PER_USER_MINUTE="0")
    problems = "\n".join(caught.value.problems)
    for expected in ("ALLOWED_READERS has 'alice@contoso.com'", "ALLOWED_READER_GROUPS needs MICROSOFT_APP_ID",
                     "ALLOWED_CONVERSATION_TYPES has 'meeting'", "ALLOWED_SERVICE_URLS has",
                     "HOST='0.0.0.0' without MICROSOFT_APP_ID", "MODEL_TURNS_PER_USER_MINUTE=0"):
        assert expected in problems, expected
    groups = ",".join(f"{i:08x}-0000-0000-0000-000000000000" for i in range(21))
    with pytest.raises(ConfigError, match="at most 20"):
        settings(**APP, MICROSOFT_APP_TENANT_ID="22222222-2222-2222-2222-222222222222", ALLOWED_READER_GROUPS=groups)


def test_azure_clients_read_proxy_settings_only_when_a_proxy_is_configured() -> None:
    # aiohttp with trust_env looks up .netrc and the proxy variables on a thread for every request.
    assert settings().env_proxies is False
    assert settings(HTTPS_PROXY="http://proxy.contoso.example:3128").env_proxies is True
    assert settings(no_proxy="localhost").env_proxies is False, "no_proxy alone configures no proxy"


DOC_SECTIONS = {"Model": "Model", "Workspace": "Workspace", "Teams identity": "Teams", "Access": "Access",
                "Turns": "Turn", "Storage": "Storage", "Telemetry": "Telemetry", "Demo": "Demo"}


def documented(markdown: str) -> dict[str, list[str]]:
    """The variables each "## Section" of docs/configuration.md lists in its table's first column."""
    listed: dict[str, list[str]] = {}
    for part in re.split(r"^## ", markdown, flags=re.MULTILINE)[1:]:
        heading, _, body = part.partition("\n")
        listed[heading.strip()] = re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", body, flags=re.MULTILINE)
    return listed


def test_the_settings_list_and_env_example_name_exactly_what_the_code_reads() -> None:
    code = variables()
    listed = documented((ROOT / "docs" / "configuration.md").read_text())
    assert {DOC_SECTIONS[h]: names for h, names in listed.items() if h in DOC_SECTIONS} == code, (
        "docs/configuration.md lists each section's variables in the code's order")
    assert not [names for h, names in listed.items() if h not in DOC_SECTIONS and names], "no table elsewhere"
    example = re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), flags=re.MULTILINE)
    assert example == [name for names in code.values() for name in names], ".env.example: every one, once, in order"


def test_each_default_is_written_once_and_reads_back_unchanged() -> None:
    """A field's default is the value read when its variable is unset (no second copy in the reader)."""
    read = Settings.from_env({}, dotenv_path=None)
    for section in SECTIONS:
        name = next(f.name for f in dataclasses.fields(Settings) if f.default_factory is section)
        for f in dataclasses.fields(section):
            if f.name not in ("allowed_service_urls", "queue_path", "openid_metadata_url"):  # derived when unset
                assert getattr(getattr(read, name), f.name) == f.default, (section.__name__, f.name)
