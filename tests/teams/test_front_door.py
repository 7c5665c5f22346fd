"""The front door with authentication on: the real app and token check, a fake OpenID/JWKS endpoint
(tests/support/entra_fake.py) and a fake Bot Connector, over HTTP.

Forged tokens get 401 with one log line each; a hanging or failing metadata endpoint gets quick 503s while
/healthz answers; serviceUrls off the allow-list, oversized and deeply nested bodies get 4xx; text is
cleaned before the turn; /readyz tells anonymous callers only ready or not. Timings are measured in
bench/bench_teams.py, not asserted here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from botbuilder.core import MemoryStorage

from bot.app import Components, create_app
from bot.config import Settings
from bot.sentinel.client import SentinelClient
from bot.teams.front_door import clean_text
from tests.support import connector_fake as teams
from tests.support.connector_fake import FakeConnector
from tests.support.entra_fake import APP_ID, TENANT, FakeEntra, forged_headers
from tests.teams.test_teams_bot import next_id, start_bot


def auth_settings(entra: FakeEntra, **more: str) -> Settings:
    return Settings.from_env({"MICROSOFT_APP_ID": APP_ID, "MICROSOFT_APP_PASSWORD": "not-used",
                              "MICROSOFT_APP_TYPE": "SingleTenant", "MICROSOFT_APP_TENANT_ID": TENANT,
                              "BOT_OPENID_METADATA_URL": entra.metadata_url,
                              "ALLOWED_SERVICE_URLS": "http://127.0.0.1:*"} | more, dotenv_path=None)


@dataclass
class Door:
    url: str  # the server's base URL
    entra: FakeEntra
    service_url: str

    async def post(self, body: dict | bytes, authorization: str = "") -> tuple[int, str]:
        headers = {"Content-Type": "application/json"} | ({"Authorization": authorization} if authorization else {})
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with (aiohttp.ClientSession() as session,
                    session.post(self.url + "/api/messages", data=data, headers=headers) as response):
            return response.status, await response.text()

    def quiet_activity(self) -> dict:
        """A channel message not addressed to the bot: accepted, and nothing is sent back."""
        return teams.channel_mention("chatter", activity_id=next_id(), service_url=self.service_url) | {
            "entities": []}


@pytest.fixture
async def entra() -> AsyncIterator[FakeEntra]:
    fake = await FakeEntra().start()
    yield fake
    await fake.stop()


@pytest.fixture
async def door(entra: FakeEntra, demo_client: SentinelClient) -> AsyncIterator[Door]:
    connector = await FakeConnector().start()
    app = create_app(Components(auth_settings(entra), demo_client, None), MemoryStorage())
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield Door(str(server.make_url("")).rstrip("/"), entra, connector.url)
    await server.close()
    await connector.stop()


def _our_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name != "aiohttp.access"]


async def test_a_valid_channel_token_is_accepted(door: Door) -> None:
    activity = door.quiet_activity()
    status, _ = await door.post(activity, "Bearer " + door.entra.channel_token(door.service_url))
    assert status == 201
    assert door.entra.requests["metadata"] == 1 and door.entra.requests["keys"] == 1
    status, _ = await door.post(door.quiet_activity(), "Bearer " + door.entra.channel_token(door.service_url))
    assert status == 201 and door.entra.requests["metadata"] == 1, "the keys are cached"


async def test_every_forged_token_gets_401_and_one_log_line(door: Door, caplog: pytest.LogCaptureFixture) -> None:
    await door.post(door.quiet_activity(), "Bearer " + door.entra.channel_token(door.service_url))  # keys cached
    variants = forged_headers(door.entra, door.service_url)
    assert len(variants) >= 25
    for name, authorization in variants:
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            status, body = await door.post(door.quiet_activity(), authorization)
        assert status == 401, (name, status, body)
        lines = _our_lines(caplog)
        assert len(lines) == 1 and not lines[0].exc_info, (name, [r.getMessage() for r in lines])
        assert "Traceback" not in body and "not authenticated" in body
    assert door.entra.requests["metadata"] == 1, "forged key ids do not make the bot refetch"


async def test_a_key_not_endorsed_for_the_channel_is_refused(door: Door) -> None:
    activity = door.quiet_activity() | {"channelId": "slack"}
    status, _ = await door.post(activity, "Bearer " + door.entra.channel_token(door.service_url))
    assert status == 401


async def test_a_hanging_metadata_endpoint_gets_503_quickly_and_health_answers(
        door: Door, caplog: pytest.LogCaptureFixture) -> None:
    door.entra.hang_metadata = True
    token = "Bearer " + door.entra.channel_token(door.service_url)
    posts = [asyncio.create_task(door.post(door.quiet_activity(), token)) for _ in range(5)]
    async with aiohttp.ClientSession() as session:
        while not all(p.done() for p in posts):
            async with session.get(door.url + "/healthz") as alive:
                assert alive.status == 200
            await asyncio.sleep(0.05)
    assert [(await p)[0] for p in posts] == [503] * 5
    assert door.entra.requests["metadata"] == 1, "one fetch shared by every waiting request"
    assert not [r for r in caplog.records if r.exc_info], "no traceback"


async def test_a_failed_fetch_is_not_retried_at_once_and_a_later_one_recovers(door: Door) -> None:
    door.entra.fail_metadata = True
    token = "Bearer " + door.entra.channel_token(door.service_url)
    assert (await door.post(door.quiet_activity(), token))[0] == 503
    assert (await door.post(door.quiet_activity(), token))[0] == 503
    assert door.entra.requests["metadata"] == 1, "refused at once during the back-off"


async def test_a_service_url_off_the_allow_list_is_refused(door: Door, entra: FakeEntra) -> None:
    for service_url in ("http://169.254.169.254/metadata/", "https://evil.example/", "http://10.0.0.5:8080/"):
        activity = door.quiet_activity() | {"serviceUrl": service_url}
        status, body = await door.post(activity, "Bearer " + entra.channel_token(service_url))
        assert status == 403 and "serviceUrl" in body, service_url


async def test_oversized_and_deeply_nested_bodies_get_4xx(door: Door) -> None:
    token = "Bearer " + door.entra.channel_token(door.service_url)
    assert (await door.post(b"{" + b'"a":' * 1 + b'"' + b"x" * 300_000 + b'"}', token))[0] == 413
    deep = json.dumps(door.quiet_activity() | {"value": "DEEP"}).encode().replace(b'"DEEP"', b"[" * 200 + b"]" * 200)
    status, body = await door.post(deep, token)
    assert status == 400 and "nested" in body
    deeper = b'{"type": "message", "value": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert (await door.post(deeper, token))[0] in (400, 413)


def _outward_address() -> str | None:
    """This machine's address on its network (not loopback), or None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent, the route picks the source address
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


async def test_readyz_tells_anonymous_callers_only_ready_or_not(entra: FakeEntra, demo_client: SentinelClient) -> None:
    address = _outward_address()
    if address is None:
        pytest.skip("no network address besides loopback")
    app = create_app(Components(auth_settings(entra), demo_client, None), MemoryStorage())
    server = TestServer(app, host=address)  # reached on that address, the caller is not on loopback
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(server.make_url("/readyz")) as ready:
                assert ready.status == 200 and await ready.json() == {"status": "ready"}
            async with session.get(server.make_url("/healthz")) as alive:
                assert await alive.json() == {"status": "alive"}
    finally:
        await server.close()


def test_text_is_cleaned_of_lone_surrogates_and_control_characters() -> None:
    assert clean_text("ok \ud800 bad\x00\x07 tab\tnew\nline\x1b[31m") == "ok \ufffd bad tab\tnew\nline[31m"
    assert clean_text("plain") == "plain"
    "done \ufffd".encode()  # encodable


async def test_local_mode_ignores_tokens_and_replies_only_on_loopback(demo_client: SentinelClient) -> None:
    connector = await FakeConnector().start()
    running, server = await start_bot(connector, demo_client, None, MemoryStorage())
    try:
        activity = teams.personal("help", activity_id=next_id(), service_url=connector.url)
        status, _, _ = await running.post(activity | {"serviceUrl": "http://169.254.169.254/"})
        assert status == 403
        status, _, _ = await running.post(activity)
        assert status == 201
        await connector.wait_for(lambda sent: any(s.type == "message" for s in sent))
        text = "incidents\ud800 24h\x00"
        status, _, _ = await running.post(teams.personal(text, activity_id=next_id(), service_url=connector.url))
        assert status == 201
        await connector.wait_for(lambda sent: len([s for s in sent if s.type == "message"]) >= 2)
    finally:
        await server.close()
        await connector.stop()


def test_settings_refuse_to_listen_beyond_loopback_without_an_app_id() -> None:
    from bot.config import ConfigError

    with pytest.raises(ConfigError, match="INSECURE_ALLOW_UNAUTHENTICATED"):
        Settings.from_env({"HOST": "0.0.0.0"}, dotenv_path=None)
    insecure = Settings.from_env({"HOST": "0.0.0.0", "INSECURE_ALLOW_UNAUTHENTICATED": "true"}, dotenv_path=None)
    teams = insecure.teams
    assert teams.insecure_allow_unauthenticated and teams.allowed_service_urls[0].startswith("http://127")
    assert replace(insecure, teams=replace(teams, host="127.0.0.1")).teams.host == "127.0.0.1"


async def test_a_us_government_cloud_takes_tokens_from_its_own_issuer(entra: FakeEntra,
                                                                       demo_client: SentinelClient) -> None:
    """BOT_CLOUD=gcchigh: the channel's tokens name https://api.botframework.us; a public cloud token is refused."""
    connector = await FakeConnector().start()
    app = create_app(Components(auth_settings(entra, BOT_CLOUD="gcchigh"), demo_client, None), MemoryStorage())
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    door = Door(str(server.make_url("")).rstrip("/"), entra, connector.url)
    try:
        gov = entra.channel_token(connector.url, iss="https://api.botframework.us")
        assert (await door.post(door.quiet_activity(), "Bearer " + gov))[0] == 201
        public = entra.channel_token(connector.url)
        assert (await door.post(door.quiet_activity(), "Bearer " + public))[0] == 401
    finally:
        await server.close()
        await connector.stop()
