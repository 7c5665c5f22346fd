"""Bodies that lie about themselves, through the real front: the aiohttp app, the fake Bot Connector, and with
authentication on the fake OpenID/JWKS endpoint and channel tokens as tests/test_front_door.py makes them.

The channel signs its token (the serviceUrl, sometimes the tenant), not the body: a serviceUrl must match the
allow-list part by part, and the body's conversation id, conversation type, channelData and tenants must agree
with each other and with the token. Every case here must be refused: a 4xx, or the access policy's refusal,
and never an answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from botbuilder.core import MemoryStorage

from bot.app import Components, create_app
from bot.config import DEFAULT_SERVICE_URLS, LOOPBACK_SERVICE_URLS
from bot.sentinel.client import SentinelClient
from bot.teams.front_door import ServiceUrls
from tests.support import connector_fake as teams
from tests.support.connector_fake import TENANT, FakeConnector
from tests.support.entra_fake import FakeEntra
from tests.test_front_door import auth_settings
from tests.test_teams_bot import next_id

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
