"""On-behalf-of mode (QUERY_IDENTITY=user): Teams single sign-on, then each analyst's own token for their reads.

The real app over HTTP in local mode, with fakes at every process boundary: the Bot Connector, the Bot Framework
token service (tests/support/token_service_fake.py, reached by botbuilder's UserTokenClient), Entra's token endpoint
with the on-behalf-of grant (tests/support/entra_fake.py, over HTTPS as azure-identity requires) and Log Analytics
(tests/support/loganalytics_fake.py), which records whose bearer token each query carried.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from azure.core.credentials import AccessToken
from botbuilder.core import MemoryStorage

from bot.app import Components, build_sentinel_client, build_user_sessions, create_app
from bot.audit import AuditedSentinelClient
from bot.config import ConfigError, Settings
from bot.sentinel.changes import WriteError
from bot.sentinel.identity import (
    Analyst,
    AnalystIncidentWriter,
    ManagedIdentityAssertion,
    TokenProblem,
    UserSessions,
    acting_as,
    on_behalf_of,
)
from bot.sentinel.incident_writer import ArmIncidentWriter
from bot.sentinel.loganalytics import LogAnalyticsBackend, create_logs_client
from bot.teams import signin
from bot.teams.server import BOT_KEY, RUNNER_KEY
from bot.teams.signin import OAUTH_CARD, SIGN_IN_TEXT, SIGNED_IN_ASK_AGAIN
from tests.support import connector_fake as teams
from tests.support.arm_fake import FakeArm
from tests.support.connector_fake import TENANT, FakeConnector
from tests.support.entra_fake import SSO_APP_ID, FakeEntra
from tests.support.loganalytics_fake import FakeCredential, FakeLogAnalytics, ServiceLimits, error_body, table_body
from tests.support.token_service_fake import EXCHANGE_URI, FakeTokenService
from tests.teams.test_teams_bot import next_id

WORKSPACE = "11111111-2222-3333-4444-555555555555"
CONNECTION = "sentinel-sso"


@dataclass
class Rig:
    url: str
    app: Any
    connector: FakeConnector
    entra: FakeEntra
    logs: FakeLogAnalytics
    tokens: FakeTokenService
    users: UserSessions | None

    async def post(self, body: dict[str, Any]) -> tuple[int, Any]:
        async with aiohttp.ClientSession() as session, session.post(self.url, json=body) as response:
            text = await response.text()
            return response.status, (json.loads(text) if text else None)

    async def settle(self, before: int) -> list[teams.Sent]:
        await self.connector.wait_for(lambda sent: any(s.type == "message" for s in sent[before:]))
        while self.app[RUNNER_KEY].pending:
            await asyncio.sleep(0.01)  # the connector (this loop) answers the turn's later activities meanwhile
        return [s for s in self.connector.sent[before:] if s.type == "message"]

    async def say(self, text: str, user: str = "alice") -> list[teams.Sent]:
        before = len(self.connector.sent)
        status, _ = await self.post(self.message(text, user))
        assert status == 201
        return await self.settle(before)

    def message(self, text: str, user: str) -> dict[str, Any]:
        return teams.personal(text, activity_id=next_id(), service_url=self.connector.url, user=user,
                              conversation_id=f"a:1personal-chat-{user}")

    def signin_invoke(self, name: str, value: dict[str, Any], user: str = "alice") -> dict[str, Any]:
        body = self.message("", user)
        body.update(type="invoke", name=name, value=value)
        body.pop("text", None)
        return body

    def sign_in(self, user: str, **claims: Any) -> str:
        """The token service already holds ``user``'s sign-in (as after an earlier exchange)."""
        token = self.entra.sso_token(f"aad-{user}", **claims)
        self.tokens.tokens[(f"29:{user}", CONNECTION)] = token
        return token


def oauth_cards(sent: list[teams.Sent]) -> list[dict[str, Any]]:
    return [a["content"] for s in sent for a in s.body.get("attachments") or [] if a.get("contentType") == OAUTH_CARD]


def audit_reads(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.audit for r in caplog.records if r.name == "bot.audit" and r.audit["event"] == "read"]  # type: ignore[attr-defined]


def settings_for(rig_parts: dict[str, Any], identity: str) -> Settings:
    defaults = Settings.from_env({}, dotenv_path=None)
    return replace(
        defaults,
        workspace=replace(defaults.workspace, workspace_id=WORKSPACE, logs_endpoint=rig_parts["logs"].endpoint),
        access=replace(defaults.access, query_identity=identity, login_endpoint=rig_parts["entra"].url,
                       sso_app_id=SSO_APP_ID, sso_client_secret="test-secret", bot_oauth_url=rig_parts["tokens"].url,
                       sso_connection_name=CONNECTION),
        teams=replace(defaults.teams, app_tenant_id=TENANT))


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Any]:
    cleanup: list[Any] = []

    async def run(identity: str = "user") -> Rig:
        entra = await FakeEntra(tls=True).start()
        logs = await FakeLogAnalytics(tmp_path).start()
        logs.trust = lambda bearer: entra.user_of(bearer, audience=logs.endpoint)
        tokens = await FakeTokenService(accepts=lambda t: entra.user_of_sso(t) is not None).start()
        connector = await FakeConnector().start()
        settings = settings_for({"logs": logs, "entra": entra, "tokens": tokens}, identity)
        users = build_user_sessions(settings, connection_verify=entra.ca_file)
        if users is not None:
            sentinel = build_sentinel_client(settings, None, users, connection_verify=str(logs.ca_file))
        else:
            sentinel = AuditedSentinelClient(LogAnalyticsBackend(
                create_logs_client(FakeCredential(), endpoint=logs.endpoint, connection_verify=str(logs.ca_file)),
                WORKSPACE))
        app = create_app(Components(settings, sentinel, None, users=users), MemoryStorage())
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        cleanup.extend([server.close, connector.stop, tokens.stop, logs.stop, entra.stop])
        return Rig(str(server.make_url("/api/messages")), app, connector, entra, logs, tokens, users)

    yield run
    for stop in cleanup:
        await stop()


def no_incidents(logs: FakeLogAnalytics, times: int = 1) -> None:
    for _ in range(times):
        logs.respond(200, table_body("query_incidents", []))


async def test_without_a_token_the_analyst_gets_a_sign_in_card_then_the_question_runs_as_them(
        start: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.audit")
    rig = await start()
    [told, card_message] = await rig.say("incidents 24h")
    assert told.text == SIGN_IN_TEXT and not told.body.get("attachments"), "the text first, the card on its own"
    [card] = oauth_cards([card_message])
    assert card["connectionName"] == CONNECTION and card["buttons"][0]["type"] == "signin"
    assert card["tokenExchangeResource"]["uri"] == EXCHANGE_URI, "Teams exchanges silently through this resource"
    assert not rig.logs.requests, "nothing was read before the analyst signed in"

    no_incidents(rig.logs)
    before = len(rig.connector.sent)
    status, body = await rig.post(rig.signin_invoke("signin/tokenExchange", {
        "id": "exchange-1", "connectionName": CONNECTION, "token": rig.entra.sso_token("aad-alice")}))
    assert status == 200 and body == {"id": "exchange-1", "connectionName": CONNECTION}
    answer = await rig.settle(before)
    assert not oauth_cards(answer) and answer, "the question that asked for the sign-in is answered"
    [query] = rig.logs.requests
    assert query.caller == "aad-alice", "Log Analytics saw the analyst's own token, not the bot's"
    assert rig.entra.on_behalf_of == [("aad-alice", rig.logs.endpoint)]
    [read] = audit_reads(caplog)
    assert read["identity"] == "user" and read["actor_object_id"] == "aad-alice"

    no_incidents(rig.logs, 2)
    await rig.say("incidents 24h")
    await rig.say("incidents 7d")
    assert [r.caller for r in rig.logs.requests] == ["aad-alice"] * 3
    assert rig.users is not None and rig.users.created == 1, "one credential and client per analyst, not per turn"
    assert len(rig.entra.on_behalf_of) == 1, "the analyst's Log Analytics token is cached by their credential"
    assert rig.tokens.requests["get_token"] == 2, "the token service is asked once a minute, not every turn"


async def test_a_failed_exchange_answers_412_so_teams_falls_back_to_the_sign_in_button(start: Any) -> None:
    rig = await start()
    await rig.say("incidents 24h")
    rig.tokens.fail_exchange = True
    status, body = await rig.post(rig.signin_invoke("signin/tokenExchange", {
        "id": "exchange-2", "connectionName": CONNECTION, "token": rig.entra.sso_token("aad-alice")}))
    assert status == 412 and body["id"] == "exchange-2" and body["failureDetail"]
    status, _ = await rig.post(rig.signin_invoke("signin/tokenExchange", {
        "id": "exchange-3", "connectionName": "another-connection", "token": "x"}))
    assert status == 412, "a token for another connection is not exchanged"
    assert not rig.logs.requests


async def test_the_sign_in_button_ends_in_verify_state_and_the_question_runs(start: Any) -> None:
    rig = await start()
    await rig.say("incidents 24h", user="dave")
    rig.tokens.codes["424242"] = rig.entra.sso_token("aad-dave")
    no_incidents(rig.logs)
    before = len(rig.connector.sent)
    status, _ = await rig.post(rig.signin_invoke("signin/verifyState", {"state": "424242"}, user="dave"))
    assert status == 200
    await rig.settle(before)
    assert [r.caller for r in rig.logs.requests] == ["aad-dave"]
    status, _ = await rig.post(rig.signin_invoke("signin/verifyState", {"state": "wrong"}, user="erin"))
    assert status == 404


async def test_a_sign_in_with_nothing_kept_tells_the_analyst_to_ask_again(start: Any) -> None:
    rig = await start()
    before = len(rig.connector.sent)
    status, _ = await rig.post(rig.signin_invoke("signin/tokenExchange", {
        "id": "exchange-4", "connectionName": CONNECTION, "token": rig.entra.sso_token("aad-alice")}))
    assert status == 200
    [told] = await rig.settle(before)
    assert told.text == SIGNED_IN_ASK_AGAIN


async def test_consent_missing_expired_and_revoked_sign_ins_get_clear_messages(start: Any) -> None:
    rig = await start()
    rig.sign_in("bob")
    rig.entra.needs_consent.add("aad-bob")
    [consent] = await rig.say("incidents 24h", user="bob")
    assert consent.text == TokenProblem.CONSENT.message and "administrator" in consent.text
    assert not oauth_cards([consent]), "signing in again would not help: the admin must consent"

    rig.sign_in("carol", lifetime_s=-120, nbf=0, iat=0)
    expired = await rig.say("incidents 24h", user="carol")
    assert expired[0].text == TokenProblem.SIGN_IN_AGAIN.message and oauth_cards(expired)
    assert ("29:carol", CONNECTION) not in rig.tokens.tokens, "the stale token is signed out at the token service"

    rig.sign_in("frank")
    rig.entra.revoked.add("aad-frank")
    revoked = await rig.say("incidents 24h", user="frank")
    assert revoked[0].text == TokenProblem.SIGN_IN_AGAIN.message and oauth_cards(revoked)

    rig.sign_in("gina")
    rig.entra.needs_mfa.add("aad-gina")
    [mfa, _card] = await rig.say("incidents 24h", user="gina")
    assert mfa.text == TokenProblem.INTERACTION.message
    assert not rig.logs.requests, "no refused analyst read anything"
    for sent in rig.connector.sent:
        assert "Traceback" not in json.dumps(sent.body) and "AADSTS" not in json.dumps(sent.body)


async def test_an_analyst_without_a_reader_role_is_told_it_is_their_own_role(start: Any) -> None:
    rig = await start()
    rig.sign_in("hana")
    rig.logs.respond(403, error_body("InsufficientAccessError", "The provided credentials have insufficient access"))
    [refused] = await rig.say("incidents 24h", user="hana")
    shown = json.dumps(refused.body)
    assert "refused your account access" in shown and "Log Analytics Reader" in shown
    assert [r.caller for r in rig.logs.requests] == ["aad-hana"]


async def test_commands_that_read_nothing_need_no_sign_in(start: Any) -> None:
    rig = await start()
    [help_reply] = await rig.say("help")
    assert help_reply.cards and not oauth_cards([help_reply])
    assert rig.tokens.requests["get_token"] == 0


async def test_two_analysts_turns_at_once_never_carry_each_others_token(start: Any) -> None:
    rig = await start()
    rig.logs.latency_s = 0.05
    rig.sign_in("alice")
    rig.sign_in("bob")
    users = rig.users
    assert users is not None
    sentinel = rig.app[BOT_KEY].sentinel
    limits = {"alice": 7, "bob": 9}
    analysts = {user: Analyst(f"aad-{user}", TENANT, rig.tokens.tokens[(f"29:{user}", CONNECTION)])
                for user in limits}

    async def turn(user: str) -> None:
        with acting_as(analysts[user]):
            result = await sentinel.query_incidents(time_window="last_24h", limit=limits[user])
        assert not hasattr(result, "code"), result

    no_incidents(rig.logs, 40)
    await asyncio.gather(*(turn(user) for _ in range(20) for user in limits))
    assert len(rig.logs.requests) == 40
    for request in rig.logs.requests:
        limit = int(re.search(r"\| take (\d+)", request.body["query"]).group(1))  # type: ignore[union-attr]
        owner = next(user for user, n in limits.items() if n == limit)
        assert request.caller == f"aad-{owner}", "a query ran with another analyst's token"
    assert users.created == 2 and len(users) == 2


async def test_each_analyst_has_a_budget_of_their_own(start: Any) -> None:
    """Log Analytics limits each identity: with on-behalf-of, each analyst's queries wait in their own lane."""
    rig = await start()
    rig.logs.limits, rig.logs.gate = ServiceLimits(), asyncio.Event()
    for user in ("alice", "bob"):
        rig.sign_in(user)
    sentinel = rig.app[BOT_KEY].sentinel
    analysts = {user: Analyst(f"aad-{user}", TENANT, rig.tokens.tokens[(f"29:{user}", CONNECTION)])
                for user in ("alice", "bob")}

    async def turn(user: str) -> None:
        with acting_as(analysts[user]):
            result = await sentinel.query_incidents(time_window="last_24h")
        assert not hasattr(result, "code"), result

    no_incidents(rig.logs, 16)
    turns = asyncio.gather(*(turn(user) for _ in range(8) for user in analysts))
    for _ in range(6000):  # bounded: until both analysts' first five run at the fake (an event, not a time)
        if rig.logs.running("aad-alice") == 5 and rig.logs.running("aad-bob") == 5:
            break
        await asyncio.sleep(0.01)
    assert (rig.logs.running("aad-alice"), rig.logs.running("aad-bob")) == (5, 5)
    assert len(rig.logs.requests) == 10, "each analyst's sixth query waits in the bot, not at the service"
    rig.logs.gate.set()
    await turns
    assert len(rig.logs.requests) == 16 and rig.logs.peak_queued == 0


async def test_bot_mode_is_unchanged_the_bot_identity_reads_and_no_one_is_asked_to_sign_in(
        start: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.audit")
    rig = await start("bot")
    no_incidents(rig.logs)
    reply = await rig.say("incidents 24h")
    assert not oauth_cards(reply)
    assert [r.caller for r in rig.logs.requests] == ["bot"]
    assert rig.tokens.requests.total() == 0 and rig.entra.requests["obo"] == 0
    [read] = audit_reads(caplog)
    assert read["identity"] == "bot"


async def test_sessions_are_bounded_expire_and_follow_a_new_sign_in() -> None:
    closed: list[str] = []

    class Credential:
        def __init__(self, analyst: Analyst) -> None:
            self.name = analyst.object_id

        async def close(self) -> None:
            closed.append(self.name)

    now = [0.0]
    sessions = UserSessions(Credential, max_sessions=2, ttl_s=100, retire_grace_s=0, clock=lambda: now[0])
    a, b, c = (Analyst(name, TENANT, f"token-{name}") for name in "abc")
    for analyst in (a, b, a, c):  # b is the least recently used when c arrives
        await sessions._session(analyst)
    assert closed == ["b"] and len(sessions) == 2
    await sessions._session(replace(a, token="a-new-sign-in"))
    assert closed == ["b", "a"], "a new sign-in token replaces the analyst's session"
    now[0] = 150
    await sessions._session(c)
    assert closed == ["b", "a", "c"] and sessions.created == 5, "a session lives at most its TTL"
    await sessions.close()

    closed.clear()  # with a grace, a replaced session stays usable a while (a request may still be running on it)
    graceful = UserSessions(Credential, max_sessions=1, retire_grace_s=0.05)
    await graceful._session(a)
    await graceful._session(b)
    assert closed == [] and len(graceful) == 1
    await asyncio.sleep(0.2)
    assert closed == ["a"]
    await graceful._session(a)
    await graceful.close()
    assert sorted(closed) == ["a", "a", "b"], "closing closes the live and the retiring sessions"


async def test_outside_a_signed_in_turn_on_behalf_of_mode_reads_nothing(start: Any) -> None:
    rig = await start()
    result = await rig.app[BOT_KEY].sentinel.query_incidents(time_window="last_24h")
    assert result.code == TokenProblem.SIGN_IN.value and not rig.logs.requests


async def test_incident_writes_run_with_the_analysts_own_token(tmp_path: Path) -> None:
    entra = await FakeEntra(tls=True).start()
    try:
        async with FakeArm(tmp_path, token=None) as arm:
            name = arm.add_incident(number=42, title="Suspicious sign-in", severity="High")["name"]
            credentials = on_behalf_of(tenant_id=TENANT, client_id=SSO_APP_ID, authority=entra.url,
                                       client_secret="test-secret", connection_verify=entra.ca_file)
            users = UserSessions(credentials, {"arm": lambda own: ArmIncidentWriter(
                credential=own, endpoint=arm.endpoint, transport=arm.transport(), **arm.workspace)})
            writer = AnalystIncidentWriter(users)
            with pytest.raises(WriteError) as outside:
                await writer.read(name)
            assert outside.value.message == TokenProblem.SIGN_IN.message and not arm.requests
            with acting_as(Analyst("aad-alice", TENANT, entra.sso_token("aad-alice"))):
                await writer.add_comment(name, "comment-1", "Looked at it")
            bearer = arm.requests[-1].headers["Authorization"].removeprefix("Bearer ")
            assert entra.user_of(bearer, audience=arm.endpoint) == "aad-alice", "ARM saw the analyst's token"
            entra.needs_consent.add("aad-bob")
            with acting_as(Analyst("aad-bob", TENANT, entra.sso_token("aad-bob"))), \
                    pytest.raises(WriteError) as refused:
                await writer.read(name)
            assert refused.value.kind == "unauthorized" and "administrator" in refused.value.message
            assert "AADSTS" not in refused.value.message and len(arm.requests) == 1
            await users.close()
    finally:
        await entra.stop()


async def test_without_a_secret_the_managed_identity_is_the_client_assertion() -> None:
    class ManagedIdentity:  # what ManagedIdentityCredential gives for api://AzureADTokenExchange
        def __init__(self) -> None:
            self.scopes: list[tuple[str, ...]] = []

        async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
            self.scopes.append(scopes)
            return AccessToken("managed-identity-assertion", int(time.time()) + 3600)

        async def close(self) -> None:
            pass

    entra = await FakeEntra(tls=True).start()
    identity = ManagedIdentity()
    try:
        credentials = on_behalf_of(tenant_id=TENANT, client_id=SSO_APP_ID, authority=entra.url,
                                   assertion=ManagedIdentityAssertion(identity), connection_verify=entra.ca_file)
        users = UserSessions(credentials, scopes=("https://api.loganalytics.io/.default",))
        assert await users.check(Analyst("aad-alice", TENANT, entra.sso_token("aad-alice"))) is None
        assert entra.client_assertions == ["managed-identity-assertion"], "no secret: the identity's token"
        assert identity.scopes == [("api://AzureADTokenExchange/.default",)]
        assert entra.on_behalf_of == [("aad-alice", "https://api.loganalytics.io")]
        await users.close()
    finally:
        await entra.stop()


def test_on_behalf_of_mode_refuses_to_start_without_what_it_needs() -> None:
    with pytest.raises(ConfigError) as missing:
        Settings.from_env({"QUERY_IDENTITY": "user"}, dotenv_path=None)
    for name in ("SENTINEL_WORKSPACE_ID", "MICROSOFT_APP_ID", "SSO_APP_ID", "MICROSOFT_APP_TENANT_ID"):
        assert f"QUERY_IDENTITY=user needs {name}" in str(missing.value)
    base = {"QUERY_IDENTITY": "user", "SENTINEL_WORKSPACE_ID": WORKSPACE, "MICROSOFT_APP_ID": SSO_APP_ID,
            "MICROSOFT_APP_TENANT_ID": TENANT, "SSO_APP_ID": SSO_APP_ID}
    with pytest.raises(ConfigError) as secret:
        Settings.from_env(base | {"MICROSOFT_APP_PASSWORD": "bot-secret"}, dotenv_path=None)
    assert "SSO_CLIENT_SECRET" in str(secret.value) and "bot-secret" not in str(secret.value)
    settings = Settings.from_env(base | {"MICROSOFT_APP_TYPE": "UserAssignedMSI"}, dotenv_path=None)
    assert settings.access.query_identity == "user" and settings.access.sso_client_secret is None
    assert Settings.from_env({}, dotenv_path=None).access.query_identity == "bot", "off by default"


async def test_malformed_sign_in_invokes_get_4xx_never_a_5xx_or_a_traceback(
        start: Any, caplog: pytest.LogCaptureFixture) -> None:
    rig = await start()
    odd: list[Any] = [None, "", 0, [], {}, "x" * 5000, {"nested": {"token": 1}}, True, "\u0000", "\ud800"]
    statuses = set()
    for index in range(60):
        name = ("signin/tokenExchange", "signin/verifyState")[index % 2]
        value: Any = {"id": odd[index % len(odd)], "connectionName": odd[(index + 3) % len(odd)],
                      "token": odd[(index + 5) % len(odd)], "state": odd[(index + 7) % len(odd)]}
        if index % 5 == 0:
            value = odd[index % len(odd)]
        status, _ = await rig.post(rig.signin_invoke(name, value))
        statuses.add(status)
    assert statuses <= {200, 400, 404, 412}, statuses
    assert not rig.logs.requests and not rig.tokens.requests["exchange"], "nothing garbage was exchanged"
    assert not [r for r in caplog.records if r.exc_info], "no traceback"


async def test_a_slow_token_service_gets_a_clear_message_and_a_412_within_the_timeout(
        start: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(signin, "TOKEN_SERVICE_TIMEOUT_S", 0.3)
    rig = await start()
    rig.tokens.delay_s = 60.0  # never answers within the test: each answer below comes from the bot's timeout
    [told] = await rig.say("incidents 24h")
    assert told.text == signin.SIGN_IN_SERVICE_DOWN and rig.tokens.delays_done == 0
    status, _ = await rig.post(rig.signin_invoke("signin/tokenExchange", {
        "id": "exchange-9", "connectionName": CONNECTION, "token": rig.entra.sso_token("aad-alice")}))
    assert status == 412 and rig.tokens.delays_done == 0, "Teams falls back instead of waiting"
    assert not rig.logs.requests
