"""Bodies that lie about themselves, through the real front: the aiohttp app, the fake Bot Connector, and with
authentication on the fake OpenID/JWKS endpoint and channel tokens as tests/teams/test_front_door.py makes them.

The channel signs its token (the serviceUrl, sometimes the tenant), not the body: a serviceUrl must match the
allow-list part by part, and the body's conversation id, conversation type, channelData and tenants must agree
with each other and with the token. Every case here must be refused: a 4xx, or the access policy's refusal,
and never an answer.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from botbuilder.core import MemoryStorage

from bot.app import Components, create_app
from bot.config import DEFAULT_SERVICE_URLS, LOOPBACK_SERVICE_URLS, Settings
from bot.sentinel.client import SentinelClient
from bot.teams.access import REFUSAL_TEXT
from bot.teams.front_door import Refused, ServiceUrls, conversation_scope
from bot.teams.server import RUNNER_KEY
from tests.support import connector_fake as teams
from tests.support.connector_fake import TENANT, FakeConnector
from tests.support.entra_fake import FakeEntra
from tests.teams.test_front_door import auth_settings
from tests.teams.test_teams_bot import next_id

OTHER_TENANT = "00000000-0000-0000-0000-0000000000ff"

# serviceUrls an attacker would put in a body: each must match none of the default patterns.
FORGED_SERVICE_URLS = [
    "https://evil.example/x.botframework.com/", "https://evil.example/.botframework.com/",
    "https://evil.example?x.botframework.com/", "https://evil.example/?x.botframework.com/",
    "https://evil.example#.botframework.com/", "https://evil.example/#.botframework.com/",
    "https://x.botframework.com@evil.example/", "https://evil.example\\.botframework.com/",
    "https://evil.example%2f.botframework.com/", "https://a.botframework.com.evil.example/",
    "https://smba.trafficmanager.net.evil.example/amer/", "https://smba.trafficmanager.net:8443/amer/",
    "http://smba.trafficmanager.net/amer/", "https://smba.trafficmanager.net/amer/?next=https://evil.example/",
    "https://smba.trafficmanager.net/../evil/", "https://botframework.com/", "https://.botframework.com/",
]


def test_service_url_patterns_match_scheme_host_port_and_path_segments_exactly() -> None:
    microsoft = ServiceUrls(DEFAULT_SERVICE_URLS)
    for url in ("https://smba.trafficmanager.net/amer/", "https://smba.trafficmanager.net/teams",
                "https://SMBA.trafficmanager.net/emea/", "https://smba.trafficmanager.net:443/amer/",
                "https://europe.webchat.botframework.com/", "https://a.b.botframework.com/v3/x",
                "https://smba.infra.gcc.teams.microsoft.com/amer/"):
        assert microsoft.allows(url), url
    for url in FORGED_SERVICE_URLS:
        assert not microsoft.allows(url), url
    loopback = ServiceUrls(LOOPBACK_SERVICE_URLS)
    for url in ("http://127.0.0.1:5555/", "http://localhost:1/_connector/", "http://[::1]:8080/"):
        assert loopback.allows(url), url
    for url in ("http://127.0.0.1/", "http://127.0.0.1.evil.example:80/", "http://127.0.0.1:80@evil.example/",
                "https://127.0.0.1:5/", "http://[::2]:8080/"):
        assert not loopback.allows(url), url
    paths = ServiceUrls(("https://example.com/teams/*", "https://example.org/a*/b"))
    assert paths.allows("https://example.com/teams/x/y") and not paths.allows("https://example.com/other/")
    assert paths.allows("https://example.org/abc/b") and not paths.allows("https://example.org/a/x/b")
    for pattern in ("https://ev*il.example/", "https://a.*.example/", "https://example.com/?q", "ftp://example.com/"):
        with pytest.raises(ValueError, match="not a serviceUrl pattern"):
            ServiceUrls((pattern,))


@dataclass
class Door:
    url: str
    entra: FakeEntra
    service_url: str

    async def post(self, body: dict[str, Any], token: str) -> tuple[int, str]:
        headers = {"Content-Type": "application/json", "Authorization": "Bearer " + token}
        async with aiohttp.ClientSession() as session, session.post(
                self.url, data=json.dumps(body).encode(), headers=headers) as response:
            return response.status, await response.text()


@pytest.fixture
async def door(demo_client: SentinelClient) -> AsyncIterator[Door]:
    """Authentication on, Microsoft's serviceUrl patterns (the defaults) and loopback, two allowed tenants."""
    entra = await FakeEntra().start()
    connector = await FakeConnector().start()
    settings = auth_settings(entra, ALLOWED_SERVICE_URLS=",".join((*DEFAULT_SERVICE_URLS, "http://127.0.0.1:*")),
                             ALLOWED_TENANTS=f"{TENANT},{OTHER_TENANT}")
    server = TestServer(create_app(Components(settings, demo_client, None), MemoryStorage()), host="127.0.0.1")
    await server.start_server()
    yield Door(str(server.make_url("/api/messages")), entra, connector.url)
    await server.close()
    await connector.stop()
    await entra.stop()


def quiet(service_url: str) -> dict[str, Any]:
    """A channel message not addressed to the bot: accepted with 201, and nothing is sent back."""
    return teams.channel_mention("chatter", activity_id=next_id(), service_url=service_url) | {"entities": []}


async def test_forged_service_urls_are_refused_even_with_a_token_naming_them(door: Door) -> None:
    assert (await door.post(quiet(door.service_url), door.entra.channel_token(door.service_url)))[0] == 201
    for url in FORGED_SERVICE_URLS:
        status, body = await door.post(quiet(url), door.entra.channel_token(url))
        assert status == 403 and "serviceUrl" in body, url


async def test_a_token_naming_another_service_url_is_refused(door: Door) -> None:
    allowed_too = "https://smba.trafficmanager.net/amer/"
    status, _ = await door.post(quiet(door.service_url), door.entra.channel_token(allowed_too))
    assert status == 401


async def test_tenants_of_the_body_and_the_token_must_agree(door: Door) -> None:
    token = door.entra.channel_token(door.service_url, tid=TENANT)
    assert (await door.post(quiet(door.service_url), token))[0] == 201, "the same tenant everywhere"
    other = quiet(door.service_url)
    other["conversation"]["tenantId"] = other["channelData"]["tenant"]["id"] = OTHER_TENANT
    assert (await door.post(other, door.entra.channel_token(door.service_url)))[0] == 201, "no tid in the token"
    status, body = await door.post(other, token)
    assert status == 403 and "tenant" in body, "both tenants allowed, but the token's is not the body's"
    mixed = quiet(door.service_url)
    mixed["conversation"]["tenantId"] = OTHER_TENANT
    status, body = await door.post(mixed, door.entra.channel_token(door.service_url))
    assert status == 403 and "tenant" in body, "conversation.tenantId and channelData.tenant disagree"


# ---- the body's own facts, in local mode (no token), where an answer can be seen --------------------------------


@dataclass
class Local:
    url: str
    connector: FakeConnector
    app: Any

    async def outcome(self, body: dict[str, Any]) -> str:
        """What became of an activity asking for "help": "answered", "refused" (the policy's message), or the
        HTTP status of a request the front refused."""
        before = len(self.connector.sent)
        async with aiohttp.ClientSession() as session, session.post(self.url, json=body) as response:
            if response.status >= 400:
                return str(response.status)
        await self.connector.wait_for(lambda sent: any(s.type == "message" for s in sent[before:]))
        while self.app[RUNNER_KEY].pending:
            await self.connector.wait_for(lambda _: True, timeout=0.05)
        texts = [s.text for s in self.connector.sent[before:] if s.type == "message"]
        return "refused" if any(text in REFUSAL_TEXT.values() for text in texts) else "answered"


@pytest.fixture
async def local(demo_client: SentinelClient) -> AsyncIterator[Any]:
    started: list[tuple[TestServer, FakeConnector]] = []

    async def start(**access: Any) -> Local:
        connector = await FakeConnector().start()
        defaults = Settings.from_env({}, dotenv_path=None)
        settings = replace(defaults, access=replace(defaults.access, **access))
        app = create_app(Components(settings, demo_client, None), MemoryStorage())
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        started.append((server, connector))
        return Local(str(server.make_url("/api/messages")), connector, app)

    yield start
    for server, connector in started:
        await server.close()
        await connector.stop()


def channel_thread(service_url: str, conversation_type: str | None, *, channel_data: bool = True) -> dict[str, Any]:
    """A war-room thread's @mention asking for help, labelled ``conversation_type`` (None: no label)."""
    body = teams.channel_mention("help", activity_id=next_id(), service_url=service_url)
    if conversation_type is None:
        del body["conversation"]["conversationType"]
    else:
        body["conversation"]["conversationType"] = conversation_type
    if not channel_data:
        body["channelData"] = {"tenant": {"id": TENANT}}
    return body


async def test_a_channel_thread_is_a_channel_whatever_its_label_says(local: Any) -> None:
    bot = await local(conversation_types=frozenset({"personal", "groupChat"}))
    url = bot.connector.url
    assert await bot.outcome(teams.personal("help", activity_id=next_id(), service_url=url)) == "answered"
    assert await bot.outcome(channel_thread(url, "channel")) == "refused", "channels are not allowed"
    outcomes = {(label, data): await bot.outcome(channel_thread(url, label, channel_data=data))
                for label in ("personal", "groupChat", None) for data in (True, False)}
    assert not [case for case, outcome in outcomes.items() if outcome == "answered"], outcomes


async def test_the_conversation_id_type_and_channel_data_must_agree(local: Any) -> None:
    bot = await local()
    url = bot.connector.url
    group = teams.group_chat("help", activity_id=next_id(), service_url=url)
    assert await bot.outcome(copy.deepcopy(group)) == "answered"
    as_personal = copy.deepcopy(group)
    as_personal["conversation"]["conversationType"] = "personal"
    assert await bot.outcome(as_personal) == "403", "a group chat's id labelled personal"
    with_team = copy.deepcopy(group)
    with_team["channelData"]["team"] = {"id": "19:soc@thread.tacv2"}
    assert await bot.outcome(with_team) == "403", "a group chat with a team"
    chat = teams.personal("help", activity_id=next_id(), service_url=url)
    chat["conversation"]["id"] = "19:war-room@thread.tacv2;messageid=1"
    assert await bot.outcome(chat) == "403", "a channel thread's id labelled personal"
    grouped = teams.personal("help", activity_id=next_id(), service_url=url)
    grouped["conversation"]["isGroup"] = True
    assert await bot.outcome(grouped) == "403", "a personal chat that says it is a group"


async def test_a_channel_is_decided_by_the_thread_the_reply_goes_to(local: Any) -> None:
    bot = await local(channels=frozenset({"19:allowed@thread.tacv2"}))
    url = bot.connector.url
    thread = channel_thread(url, "channel")
    thread["channelData"]["channel"]["id"] = "19:allowed@thread.tacv2"
    assert await bot.outcome(thread) == "403", "channelData names another channel than the conversation's"
    allowed = channel_thread(url, "channel")
    allowed["conversation"]["id"] = "19:allowed@thread.tacv2;messageid=1"
    allowed["channelData"]["channel"]["id"] = "19:allowed@thread.tacv2"
    assert await bot.outcome(allowed) == "answered"


async def test_tenants_named_by_the_body_must_agree(local: Any) -> None:
    bot = await local(tenants=frozenset({TENANT}))
    url = bot.connector.url
    assert await bot.outcome(teams.personal("help", activity_id=next_id(), service_url=url)) == "answered"
    mixed = teams.personal("help", activity_id=next_id(), service_url=url)
    mixed["conversation"]["tenantId"] = OTHER_TENANT  # channelData.tenant stays the allowed one
    assert await bot.outcome(mixed) == "403"
    spelled = teams.personal("help", activity_id=next_id(), service_url=url)
    spelled["conversation"]["tenantID"] = OTHER_TENANT  # the spelling botbuilder's model reads
    assert await bot.outcome(spelled) == "403"


def test_a_refusal_names_no_text_of_the_body() -> None:
    """The reason is logged and answered: a label of the attacker's choosing must not reach either."""
    body = teams.personal("help", activity_id=next_id(), service_url="http://127.0.0.1:1/")
    body["conversation"]["conversationType"] = "x" * 5_000
    with pytest.raises(Refused) as refused:
        conversation_scope(body)
    assert refused.value.status == 403 and "xx" not in refused.value.reason and len(refused.value.reason) < 100


def test_settings_refuse_service_url_patterns_the_front_door_cannot_match() -> None:
    """Said at start-up as a configuration problem, not a traceback from the app."""
    from bot.config import ConfigError

    for pattern in ("https://ev*il.example/", "https://a.*.example/*", "https://example.com/?q", "https://u@x.com/",
                    "https://example.com/../x"):
        with pytest.raises(ConfigError, match="ALLOWED_SERVICE_URLS has"):
            Settings.from_env({"ALLOWED_SERVICE_URLS": pattern}, dotenv_path=None)
    for pattern in (*DEFAULT_SERVICE_URLS, *LOOPBACK_SERVICE_URLS):
        assert Settings.from_env({"ALLOWED_SERVICE_URLS": pattern}, dotenv_path=None).teams.allowed_service_urls
