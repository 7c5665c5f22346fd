"""Watches through the real Teams surface: the bot's web app with its poller (a one-second interval), a fake Bot
Connector that records what is posted and updated, and the demo workspace with incidents injected while it runs.

"watch high" in a channel thread; a new High incident is posted there as a card within one interval; its Assign to
me button goes through the confirmed-write flow, and the assignment updates the posted card in place; a restart in
between posts no duplicate and misses nothing."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from botbuilder.schema import ChannelAccount, ConversationAccount, ConversationReference

from bot.app import Components, create_app
from bot.commands.parser import parse
from bot.config import Settings
from bot.demo.backend import DemoBackend
from bot.demo.writer import DemoIncidentWriter
from bot.orchestrator.changes.confirmations import ConfirmationDesk, WritePolicy
from bot.sentinel.client import SentinelClient
from bot.sentinel.loganalytics import LogAnalyticsBackend, create_logs_client
from bot.teams.server import POLLER_KEY
from bot.teams.storage import SqliteStorage
from bot.teams.surface import create_adapter
from bot.teams.watches import AdapterSender, StoreLease, WatchPoller, WatchStore, sentinel_feed
from tests.support import connector_fake as teams
from tests.support.connector_fake import FakeConnector
from tests.support.loganalytics_fake import FakeCredential, FakeLogAnalytics, error_body, table_body

INTERVAL_S = 1
FIRST_POLL_S = 15  # the first poll waits for the live demo to be built (it generates the activity tables too)
HOSTILE = "<at>Bob</at> **Ransomware** on [FIN-DB](https://evil.example/x) _now_"
THREAD = "19:war-room@thread.tacv2;messageid=1700000000000"


class Bot:
    def __init__(self, connector: FakeConnector, sentinel: SentinelClient, state: Path) -> None:
        self.connector, self.sentinel, self.state = connector, sentinel, state
        self.server: TestServer | None = None
        self.ids = iter(range(1, 10_000))

    async def start(self) -> Bot:
        # As `serve` does at start-up: the demo workspace is generated before the first poll (seconds with the
        # investigation's activity tables), so a poll takes its interval, not the generation's time.
        await self.sentinel.prepare()
        settings = Settings.from_env({"WATCH_POLL_SECONDS": str(INTERVAL_S)}, dotenv_path=None)
        # Changes on, for the fake connector's alice (her object id is aad-alice): the demo workspace's own writer.
        desk = ConfirmationDesk(self.sentinel, DemoIncidentWriter.for_client(self.sentinel),
                                WritePolicy(True, frozenset({"aad-alice"})))
        app = create_app(Components(settings, self.sentinel, None, desk=desk), SqliteStorage(self.state),
                         poll_watches=True)
        self.server = TestServer(app, host="127.0.0.1")
        await self.server.start_server()
        return self

    async def stop(self) -> None:
        assert self.server is not None
        await self.server.close()

    @property
    def polls(self) -> int:
        assert self.server is not None
        return self.server.app[POLLER_KEY].polls

    async def post(self, activity: dict) -> None:
        assert self.server is not None
        async with aiohttp.ClientSession() as session, \
                session.post(str(self.server.make_url("/api/messages")), json=activity) as response:
            assert response.status in (200, 201), await response.text()

    async def say(self, text: str) -> None:
        await self.post(teams.channel_mention(text, activity_id=f"17000{next(self.ids):08d}",
                                              service_url=self.connector.url))

    async def click(self, value: dict, reply_to: str) -> None:
        await self.post(teams.submit(value, activity_id=f"17000{next(self.ids):08d}",
                                     service_url=self.connector.url, reply_to_id=reply_to, conversation="channel"))


@pytest.fixture
async def connector():
    fake = await FakeConnector().start()
    yield fake
    await fake.stop()


@pytest.fixture
def live_demo() -> SentinelClient:
    """The demo workspace on the real clock: the poller's cursor and the injected rows' times are the same time."""
    backend = DemoBackend(seed=7)
    client = SentinelClient(backend)
    client.demo = backend  # type: ignore[attr-defined] - where the test injects incidents
    return client


def watch_cards(connector: FakeConnector) -> list[teams.Sent]:
    return [s for s in connector.messages(THREAD) if s.method == "POST" and "Watch: " in json.dumps(s.cards)]


async def watch_high_in_thread(store: WatchStore, connector: FakeConnector) -> None:
    """Alice's "watch high" in the war-room thread, as the command stores it (for tests driving the poller alone)."""
    reference = ConversationReference(conversation=ConversationAccount(id=THREAD, conversation_type="channel"),
                                      channel_id="msteams", service_url=connector.url,
                                      bot=ChannelAccount(id=teams.BOT_ID), user=ChannelAccount(id="29:alice"))
    command = parse("watch high")
    assert command is not None
    await store.command(command, conversation_id=THREAD, reference=reference, user_name="Alice",
                        user_aad_id="aad-alice")


async def inject(sentinel: SentinelClient, title: str, severity: str = "High") -> int:
    backend = sentinel.demo  # type: ignore[attr-defined]
    return await asyncio.to_thread(backend.inject_incident, title, severity)


@pytest.mark.slow
async def test_a_watch_in_a_channel_posts_new_incidents_updates_them_and_survives_a_restart(
        connector: FakeConnector, live_demo: SentinelClient, tmp_path: Path) -> None:
    bot = await Bot(connector, live_demo, tmp_path / "state.db").start()
    try:
        await bot.say("watch high")
        await connector.wait_for(lambda sent: any("Watching for high" in s.text for s in sent))
        polls = bot.polls
        # the watch is in place before the injection (the first poll builds the live demo: seconds on a busy machine)
        await connector.wait_for(lambda _: bot.polls > polls, timeout=FIRST_POLL_S)

        low = await inject(live_demo, "Low noise", "Low")
        number = await inject(live_demo, HOSTILE)
        injected = time.monotonic()
        await connector.wait_for(lambda _: len(watch_cards(connector)) == 1, timeout=INTERVAL_S + 4)
        [posted] = watch_cards(connector)
        assert posted.at - injected <= INTERVAL_S + 1.5, "posted within one poll interval (plus the poll itself)"
        card = json.dumps(posted.cards, ensure_ascii=False)
        assert f"New incident #{number}" in card and f"#{low}" not in card
        assert "<at>" not in card and "](" not in card and "**" not in card, "a hostile title stays inert"

        # Assign to me, from the posted card: the existing confirmation flow, then the card updated in place.
        await bot.click({"action": "change_propose", "tool": "assign_incident",
                         "arguments": {"incident_ref": str(number), "assignee": "me"}}, posted.activity_id)
        confirm = await _confirmation(connector)
        await bot.click({"action": "change_confirm", "id": confirm[0]}, confirm[1])
        await connector.wait_for(lambda sent: any(
            s.method == "PUT" and s.activity_id == posted.activity_id and "Alice" in json.dumps(s.cards)
            for s in sent), timeout=INTERVAL_S + 6)
    finally:
        await bot.stop()

    # Down: one incident arrives while no instance polls.
    missed = await inject(live_demo, "Arrived while the bot was down")
    bot = await Bot(connector, live_demo, tmp_path / "state.db").start()
    try:
        await connector.wait_for(lambda _: len(watch_cards(connector)) == 2, timeout=INTERVAL_S + 4)
        polls = bot.polls
        await connector.wait_for(lambda _: bot.polls >= polls + 2, timeout=3 * INTERVAL_S + 3)
        numbers = [n for c in watch_cards(connector) for n in (number, missed) if f"#{n}" in json.dumps(c.cards)]
        assert numbers == [number, missed], "nothing missed, nothing posted twice"
    finally:
        await bot.stop()


@pytest.mark.slow
async def test_watches_are_listed_and_stopped_in_the_conversation(connector: FakeConnector,
                                                                 live_demo: SentinelClient, tmp_path: Path) -> None:
    bot = await Bot(connector, live_demo, tmp_path / "state.db").start()
    try:
        for text in ("watch medium open", "watch unassigned high", "watches", "unwatch 1", "watches", "unwatch"):
            await bot.say(text)
        await connector.wait_for(lambda sent: len([s for s in sent if s.method == "POST" and s.text]) >= 6)
        replies = [s.text for s in connector.messages(THREAD) if s.method == "POST" and s.text]
        assert replies[0].startswith("Watching for medium+ open")
        assert "1. medium+ open (by Alice" in replies[2] and "2. high unassigned" in replies[2]
        assert replies[3] == "Stopped watching for medium+ open."
        assert "1. high unassigned" in replies[4]
        assert replies[5].startswith("Stopped 1 watch")
    finally:
        await bot.stop()


async def _confirmation(connector: FakeConnector) -> tuple[str, str]:
    def found() -> tuple[str, str] | None:
        for sent in connector.sent:
            for card in sent.cards:
                text = json.dumps(card)
                if '"change_confirm"' in text:
                    data = _find(card, "change_confirm")
                    if data is not None:
                        return data, sent.activity_id
        return None

    await connector.wait_for(lambda _: found() is not None)
    result = found()
    assert result is not None
    return result


def _find(node, action: str) -> str | None:
    if isinstance(node, dict):
        data = node.get("data")
        if isinstance(data, dict) and data.get("action") == action:
            return str(data["id"])
        return next((f for v in node.values() if (f := _find(v, action))), None)
    if isinstance(node, list):
        return next((f for v in node if (f := _find(v, action))), None)
    return None


async def test_log_analytics_errors_are_survived_and_the_next_poll_catches_up(
        connector: FakeConnector, fake_logs: FakeLogAnalytics, tmp_path: Path) -> None:
    """Through the real LogsQueryClient: a poll whose query fails (503 after the SDK's retries, then a throttled
    429) posts nothing and keeps the cursor; the next one posts what arrived meanwhile, once."""
    logs = create_logs_client(FakeCredential(), endpoint=fake_logs.endpoint, transport=fake_logs.transport(),
                              retry_backoff_factor=0.01)
    sentinel = SentinelClient(LogAnalyticsBackend(logs, "00000000-0000-0000-0000-000000000001"))
    storage = SqliteStorage(tmp_path / "state.db")
    clock = {"now": datetime.now(UTC)}
    store = WatchStore(storage, clock=lambda: clock["now"])
    await watch_high_in_thread(store, connector)
    adapter = create_adapter(Settings.from_env({}, dotenv_path=None))
    poller = WatchPoller(store, sentinel_feed(sentinel), AdapterSender(adapter, ""), StoreLease(storage, seconds=30),
                         interval_s=60, demo=False, clock=lambda: clock["now"])
    try:
        fake_logs.respond(200, table_body("incident_changes", []))
        assert (await poller.poll()).failed is None
        arrived = clock["now"] + timedelta(seconds=20)
        for status, code in ((503, "ServiceUnavailable"), (503, "ServiceUnavailable"), (503, "ServiceUnavailable"),
                             (429, "TooManyRequests"), (429, "TooManyRequests"), (429, "TooManyRequests")):
            fake_logs.respond(status, error_body(code, "try later"), headers={"Retry-After": "0"})
        for _ in range(2):
            clock["now"] += timedelta(minutes=4)
            report = await poller.poll()
            assert report.failed and report.posted == 0 and report.queries == 1
        clock["now"] += timedelta(minutes=4)  # 12 minutes after the incident: beyond the overlap of now
        fake_logs.respond(200, table_body("incident_changes", [_row(424242, arrived)]))
        asked = len(fake_logs.requests)
        # Asked from the cursor kept through the failures (the first poll's time, less the overlap), not from now.
        kept = (await store.cursor()).since(clock["now"])
        report = await poller.poll()
        assert report.posted == 1 and len(fake_logs.requests) == asked + 1
        assert kept < arrived and f"TimeGenerated > datetime({kept:%Y-%m-%dT%H:%M:%S}" in \
            fake_logs.requests[-1].body["query"]
        cards = [s for s in connector.messages(THREAD) if "New incident #424242" in json.dumps(s.cards)]
        assert len(cards) == 1
    finally:
        await adapter.bot_framework_authentication.sessions.close()
        await sentinel.close()
        await storage.close()


def _row(number: int, at: datetime) -> dict:
    return {"IncidentNumber": number, "Title": "Ransomware on FIN-DB", "Severity": "High", "Status": "New",
            "Owner": "", "CreatedTime": at, "LastModifiedTime": at, "AlertCount": 1, "Tactics": [], "Products": [],
            "IncidentUrl": "", "Classification": "", "TimeGenerated": at, "Description": "", "TotalMatched": 1}


@pytest.mark.slow
@pytest.mark.parametrize(("shape", "conversation"), [("personal", "a:1personal-chat-alice"),
                                                     ("group", "19:group-chat-soc@thread.v2")])
async def test_a_watch_in_a_chat_posts_there(connector: FakeConnector, live_demo: SentinelClient, tmp_path: Path,
                                             shape: str, conversation: str) -> None:
    bot = await Bot(connector, live_demo, tmp_path / "state.db").start()
    try:
        make = teams.personal if shape == "personal" else teams.group_chat
        await bot.post(make("watch medium open", activity_id="1700000000001", service_url=connector.url))
        await connector.wait_for(lambda sent: any("Watching for medium+ open" in s.text for s in sent))
        polls = bot.polls
        await connector.wait_for(lambda _: bot.polls > polls, timeout=5)
        number = await inject(live_demo, "Credential dumping on WS-HR-07", "Medium")
        await connector.wait_for(lambda sent: any(
            s.conversation_id == conversation and f"New incident #{number}" in json.dumps(s.cards) for s in sent),
            timeout=INTERVAL_S + 4)
    finally:
        await bot.stop()


async def test_with_blob_state_the_poller_takes_a_blob_lease_and_with_sqlite_a_store_lease(
        azurite: str, live_demo: SentinelClient, tmp_path: Path) -> None:
    from bot.teams.storage import create_storage
    from bot.teams.watches import BlobLease

    settings = Settings.from_env({"WATCH_POLL_SECONDS": "1"}, dotenv_path=None)
    blob = create_storage("blob", blob_connection_string=azurite, blob_container="watch-app")
    sqlite = SqliteStorage(tmp_path / "state.db")
    try:
        for storage, kind in ((blob, BlobLease), (sqlite, StoreLease)):
            app = create_app(Components(settings, live_demo, None), storage, poll_watches=True)
            assert isinstance(app[POLLER_KEY].lease, kind)
    finally:
        await blob.close()
        await sqlite.close()


def card_updates(connector: FakeConnector, activity_id: str) -> list[teams.Sent]:
    return [s for s in connector.messages(THREAD) if s.method == "PUT" and s.activity_id == activity_id]


@pytest.mark.slow
async def test_a_new_incident_is_posted_at_once_then_its_card_shows_the_triage(
        connector: FakeConnector, live_demo: SentinelClient, tmp_path: Path) -> None:
    from bot.cards.watches import TRIAGE_PENDING

    bot = await Bot(connector, live_demo, tmp_path / "state.db").start()
    try:
        await bot.say("watch high")
        await connector.wait_for(lambda sent: any("Watching for high" in s.text for s in sent))
        polls = bot.polls
        await connector.wait_for(lambda _: bot.polls > polls, timeout=5)
        number = await inject(live_demo, "Beacon from WS-FIN-042")
        await connector.wait_for(lambda _: len(watch_cards(connector)) == 1, timeout=INTERVAL_S + 4)
        [posted] = watch_cards(connector)
        assert TRIAGE_PENDING in json.dumps(posted.cards, ensure_ascii=False), "posted first, saying triage comes"
        await connector.wait_for(lambda _: bool(card_updates(connector, posted.activity_id)), timeout=10)
        [updated] = card_updates(connector, posted.activity_id)
        card = json.dumps(updated.cards, ensure_ascii=False)
        assert f"New incident #{number}" in card and "Triage: " in card and TRIAGE_PENDING not in card
        card = card.replace("\u200b", "")  # long values may break at any character (cards.breakable)
        assert "IP" in card and "WS-FIN-042" in card and "lena.fischer@contoso.com" in card, \
            "the injected alert's host and account"
        assert updated.at - posted.at < 5.0, "the triage of one incident takes seconds at most"
        print(f"\nwatch post -> triage on the card: {updated.at - posted.at:.2f} s")
    finally:
        await bot.stop()


@pytest.mark.slow
async def test_a_slow_or_failing_triage_never_holds_up_the_post(connector: FakeConnector, live_demo: SentinelClient,
                                                              tmp_path: Path) -> None:
    from bot.cards.watches import TRIAGE_PENDING
    from bot.teams.server import POLLER_KEY as KEY

    release = asyncio.Event()
    asked: list[int] = []

    async def slow(number: int) -> None:  # the seam: a triage that takes as long as the test says
        asked.append(number)
        await release.wait()
        raise RuntimeError("the assessment failed")

    bot = await Bot(connector, live_demo, tmp_path / "state.db").start()
    assert bot.server is not None
    bot.server.app[KEY].triage = slow
    try:
        await bot.say("watch high")
        await connector.wait_for(lambda sent: any("Watching for high" in s.text for s in sent))
        polls = bot.polls
        await connector.wait_for(lambda _: bot.polls > polls, timeout=5)
        number = await inject(live_demo, "Slow to assess")
        injected = time.monotonic()
        await connector.wait_for(lambda _: len(watch_cards(connector)) == 1, timeout=INTERVAL_S + 4)
        [posted] = watch_cards(connector)
        assert posted.at - injected <= INTERVAL_S + 1.5, "posted on time"
        await connector.wait_for(lambda _: asked == [number], timeout=2)  # the triage is asked for after the post
        polls = bot.polls
        await connector.wait_for(lambda _: bot.polls >= polls + 2, timeout=3 * INTERVAL_S + 3)
        assert card_updates(connector, posted.activity_id) == [], "nothing until the triage ends"
        release.set()
        await connector.wait_for(lambda _: bool(card_updates(connector, posted.activity_id)), timeout=5)
        [updated] = card_updates(connector, posted.activity_id)
        card = json.dumps(updated.cards, ensure_ascii=False)
        assert TRIAGE_PENDING not in card and "Triage: " not in card, "a failed triage: the card without it"
    finally:
        await bot.stop()


async def test_a_card_the_connector_refuses_is_not_taken_for_posted(connector: FakeConnector,
                                                                   live_demo: SentinelClient, tmp_path: Path) -> None:
    """Through the real adapter: a post the Bot Connector answers 500 fails the poll (the adapter would have handed
    the error to its on_turn_error and returned as if the card went out), and the next poll posts it, once; a 403
    (the bot removed from the thread) stops the thread's watches instead of posting into the void every poll."""
    storage = SqliteStorage(tmp_path / "state.db")
    store = WatchStore(storage)
    await watch_high_in_thread(store, connector)
    adapter = create_adapter(Settings.from_env({}, dotenv_path=None))
    poller = WatchPoller(store, sentinel_feed(live_demo), AdapterSender(adapter, ""), StoreLease(storage, seconds=30),
                         interval_s=60, demo=True)
    try:
        assert (await poller.poll()).failed is None
        number = await inject(live_demo, "Beacon from WS-FIN-042")
        connector.fail_next = [500]
        report = await poller.poll()
        assert report.failed == "delivery: ConnectorError" and report.posted == 0, report
        assert not watch_cards(connector)
        report = await poller.poll()
        assert report.failed is None and report.posted == 1, report
        assert [f"New incident #{number}" in json.dumps(s.cards) for s in watch_cards(connector)] == [True]
        await inject(live_demo, "Beacon from WS-FIN-043")
        connector.fail_next = [403]
        assert (await poller.poll()).posted == 0
        assert not await store.watches(THREAD)
    finally:
        await adapter.bot_framework_authentication.sessions.close()
        await storage.close()
