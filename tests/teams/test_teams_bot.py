"""The Teams bot as a component: real CloudAdapter and handler over HTTP, a fake Bot Connector, the demo
workspace, and the rule-based model behind the fake Chat Completions server.

Activities are shaped as Teams sends them (mention entities, `;messageid=` thread ids, channelData).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import sqlite3
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from botbuilder.core import MemoryStorage, Storage

from bot.app import Components, create_app
from bot.config import Settings
from bot.orchestrator.conversation import Conversation
from bot.orchestrator.llm import ChatModel, create_client, to_wire
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.memory import Memory, TokenCounter
from bot.sentinel.client import SentinelClient
from bot.teams import progress
from bot.teams.server import RUNNER_KEY
from bot.teams.state import STATE_PROPERTY
from bot.tools.toolbox import ToolBox
from tests.support import connector_fake as teams
from tests.support import rule_model
from tests.support.connector_fake import FakeConnector
from tests.support.openai_fake import FakeOpenAI

_ids = itertools.count(1)


def next_id() -> str:
    return f"1700000{next(_ids):06d}"


@dataclass
class Bot:
    url: str
    connector: FakeConnector
    storage: Storage
    app: web.Application

    async def read(self, keys: list[str]) -> dict:
        """Read state as the bot does: on its turn loop, where the store's clients live."""
        return await self.app[RUNNER_KEY].call(self.storage.read(keys))

    async def post(self, activity: dict, *, raw: bytes | None = None, content_type: str = "application/json"):
        async with aiohttp.ClientSession() as session:
            started = time.monotonic()
            async with session.post(self.url, data=raw if raw is not None else None,
                                    json=None if raw is not None else activity,
                                    headers={"Content-Type": content_type} if raw is not None else None) as response:
                body = await response.text()
                return response.status, body, time.monotonic() - started


async def start_bot(connector: FakeConnector, sentinel: SentinelClient, fake_llm: FakeOpenAI | None,
                    storage: Storage, settings: Settings | None = None, turn_queue: Any = None
                    ) -> tuple[Bot, TestServer]:
    await sentinel.prepare()  # as `serve` does at start-up
    orchestrator = None
    if fake_llm is not None:
        fake_llm.brain = rule_model.brain
        client = create_client(openai_api_key="sk-test", base_url=f"{fake_llm.endpoint}/v1")
        orchestrator = Orchestrator(ChatModel(client, "rule-model"), ToolBox(sentinel), Memory(TokenCounter()),
                                    demo=sentinel.is_demo)
    app = create_app(Components(settings or Settings.from_env({}, dotenv_path=None), sentinel, orchestrator),
                     storage, turn_queue=turn_queue)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return Bot(str(server.make_url("/api/messages")), connector, storage, app), server


async def start_queued_bot(connector: FakeConnector, sentinel: SentinelClient, folder: Path,
                           fake_llm: FakeOpenAI | None = None) -> tuple[Bot, TestServer, Any]:
    """The bot as ``serve`` composes it by default (the local turn queue beside SQLite state in ``folder``, turns taken
    by the web process's worker), and a second view of its queue (``waiting()``: turns not done yet); close both."""
    from bot.app import turn_queue_opener
    from bot.teams.storage import SqliteStorage
    from bot.turns.local_queue import LocalTurnQueue

    settings = Settings.from_env({"STATE_STORE": f"sqlite:///{folder / 'state.db'}", "TURN_QUEUE": "local",
                                  "TURN_QUEUE_PATH": str(folder / "turns.db")}, dotenv_path=None)
    storage = SqliteStorage(str(folder / "state.db"))
    running, server = await start_bot(connector, sentinel, fake_llm, storage, settings,
                                      turn_queue=turn_queue_opener(settings))
    return running, server, LocalTurnQueue.open(folder / "turns.db")


@pytest.fixture
async def bot(connector: FakeConnector, demo_client: SentinelClient, fake_openai: FakeOpenAI) -> AsyncIterator[Bot]:
    running, server = await start_bot(connector, demo_client, fake_openai, MemoryStorage())
    yield running
    await server.close()


def final_messages(sent: list[teams.Sent]) -> list[teams.Sent]:
    return [s for s in sent if s.type == "message" and (s.stream_info or {}).get("streamType") != "informative"]


async def answered_after(bot: Bot, activity: dict[str, Any]) -> str:
    """A barrier for a check that something did not happen: posts "help" after ``activity``, in its conversation
    (an @mention where the bot needs one), and waits for its answer. Turns of one conversation run one at a time
    in arrival order, so anything ``activity`` would have sent has been sent by then. Returns the help's id."""
    barrier = copy.deepcopy(activity)
    barrier.update(id=next_id(), text=("<at>Sentinel</at> " if barrier["conversation"].get("isGroup") else "") + "help")
    if barrier["conversation"].get("isGroup"):
        barrier["entities"] = [{"type": "mention", "text": "<at>Sentinel</at>",
                                "mentioned": {"id": teams.BOT_ID, "name": "Sentinel"}}]
    await bot.post(barrier)
    await bot.connector.wait_for(lambda s: any(x.body.get("replyToId") == barrier["id"] for x in final_messages(s)))
    return str(barrier["id"])


def card_text(card: dict) -> str:
    return json.dumps(card)


async def test_personal_question_streams_progress_then_answers_with_cards(bot: Bot, fake_openai: FakeOpenAI) -> None:
    fake_openai.latency_s = 0.3  # a model call takes time, so the turn outlasts the progress grace period
    status, _, _ = await bot.post(teams.personal("what high-severity incidents came in this week?",
                                                 activity_id=next_id(), service_url=bot.connector.url))
    # At once: the request is answered before the turn's answer is sent (events, not a wall bound)
    assert status in (200, 201, 202) and not [s for s in bot.connector.sent if s.type == "message"]
    sent = await bot.connector.wait_for(lambda s: any(x.type == "message" for x in s))
    typing = [s for s in sent if s.type == "typing"]
    assert typing and not typing[0].stream_info, "a plain typing indicator first"
    informative = [s for s in typing if s.stream_info and s.stream_info["streamType"] == "informative"]
    assert informative[0].text == "Querying incidents..." and informative[0].stream_info["streamSequence"] == 1
    stream_id = informative[0].activity_id
    assert all(s.stream_info.get("streamId") == stream_id for s in informative[1:])
    [answer] = [s for s in sent if s.type == "message"]
    assert answer.stream_info == {"type": "streaminfo", "streamId": stream_id, "streamType": "final"}
    assert "most severe first: [1] #" in answer.text
    table, footer = answer.cards[0], answer.cards[-1]
    assert "[1]" in card_text(table) and "incident_detail" in card_text(table)
    assert "Data sources" in card_text(footer) and "query_incidents" in card_text(footer)
    assert "Demo" in card_text(footer) or "DEMO" in card_text(footer)


async def test_a_fast_command_gets_typing_then_the_answer_without_progress_chatter(
        bot: Bot, monkeypatch: pytest.MonkeyPatch) -> None:
    # The pacing's interval made long, so being held back by it would take that long: a bound from the input, not
    # from the machine's speed (under load a command alone can take a second)
    interval_s = 10.0
    monkeypatch.setitem(progress.Progress.__init__.__kwdefaults__, "interval_s", interval_s)
    started = time.monotonic()
    await bot.post(teams.personal("incidents 24h", activity_id=next_id(), service_url=bot.connector.url))
    sent = await bot.connector.wait_for(lambda s: any(x.type == "message" for x in s))
    assert [s.type for s in sent] == ["typing", "message"] and not sent[1].stream_info
    assert time.monotonic() - started < interval_s / 2, "not held back by the one-update-per-interval pacing"


async def test_channel_mention_is_answered_in_its_thread(bot: Bot, fake_openai: FakeOpenAI) -> None:
    fake_openai.latency_s = 0.3
    activity = teams.channel_mention("which hosts were hit most this week?", activity_id=next_id(),
                                     service_url=bot.connector.url)
    await bot.post(activity)
    thread = activity["conversation"]["id"]
    sent = await bot.connector.wait_for(lambda s: any(x.method == "PUT" and x.cards for x in s))
    assert {s.conversation_id for s in sent} == {thread}, "everything goes into the thread"
    status_message = next(s for s in sent if s.type == "message" and s.method == "POST")
    assert status_message.text.startswith("Working on it: ")
    final = [s for s in sent if s.method == "PUT"][-1]
    assert final.activity_id == status_message.activity_id, "the status message is replaced by the answer"
    assert "Most targeted" in final.body["text"] and final.cards
    asked = [m["content"] for m in fake_openai.chat_requests[0].messages if m["role"] == "user"]
    assert asked == ["which hosts were hit most this week?"], "the @mention is stripped"


async def test_channel_message_without_mention_is_ignored(bot: Bot) -> None:
    activity = teams.channel_mention("incidents 24h", activity_id=next_id(), service_url=bot.connector.url)
    activity["entities"] = []
    activity["text"] = "incidents 24h"
    status, _, _ = await bot.post(activity)
    barrier = await answered_after(bot, activity)
    assert status in (200, 201) and [s for s in bot.connector.sent if s.body.get("replyToId") != barrier
                                     and s.method == "POST"] == []


async def test_group_chat_command_with_mention(bot: Bot) -> None:
    activity = teams.group_chat("incidents 24h high", activity_id=next_id(), service_url=bot.connector.url)
    await bot.post(activity)
    sent = await bot.connector.wait_for(lambda s: any(x.type == "message" and x.cards for x in s))
    final = [s for s in sent if s.type == "message"][-1]
    assert {s.conversation_id for s in sent} == {activity["conversation"]["id"]}
    assert "Data sources" in card_text(final.cards[-1]) and "min_severity=High" in card_text(final.cards[-1])


async def test_card_submit_and_invoke_show_incident_detail(bot: Bot, demo_client: SentinelClient) -> None:
    listed = await demo_client.query_incidents(time_window="last_7d", limit=1)
    number = listed.records[0].number
    await bot.post(teams.personal("", activity_id=next_id(), service_url=bot.connector.url,
                                  value={"action": "incident_detail", "incident": number}))
    await bot.connector.wait_for(lambda s: any(f"#{number}" in card_text(c) for x in s for c in x.cards))
    bot.connector.sent.clear()
    status, body, _ = await bot.post(teams.invoke({"action": "incident_detail", "incident": number},
                                                  activity_id=next_id(), service_url=bot.connector.url))
    assert status == 200 and '"statusCode": 200' in body.replace('"statusCode":200', '"statusCode": 200')
    sent = await bot.connector.wait_for(lambda s: any(f"#{number}" in card_text(c) for x in s for c in x.cards))
    detail = next(c for x in sent for c in x.cards if f"#{number}" in card_text(c))
    assert "Open in Sentinel" in card_text(detail)


async def test_installation_sends_a_welcome_card(bot: Bot) -> None:
    await bot.post(teams.bot_added(activity_id=next_id(), service_url=bot.connector.url))
    sent = await bot.connector.wait_for(lambda s: any(x.cards for x in s))
    welcome = card_text(sent[-1].cards[0])
    assert "incidents" in welcome.lower() and "Action.Submit" in welcome


async def test_the_same_activity_twice_is_processed_once(bot: Bot, fake_openai: FakeOpenAI) -> None:
    activity = teams.personal("incidents 24h", activity_id=next_id(), service_url=bot.connector.url)
    await bot.post(activity)
    await bot.post(activity)
    await bot.connector.wait_for(lambda s: len(final_messages(s)) >= 1)
    barrier = await answered_after(bot, activity)
    assert len([s for s in final_messages(bot.connector.sent) if s.body.get("replyToId") != barrier]) == 1


async def test_two_messages_at_once_are_answered_in_order(bot: Bot, fake_openai: FakeOpenAI) -> None:
    fake_openai.latency_s = 0.2
    first = teams.personal("what incidents came in this week?", activity_id=next_id(), service_url=bot.connector.url)
    second = teams.personal("which hosts were hit most this week?", activity_id=next_id(),
                            service_url=bot.connector.url)
    await asyncio.gather(bot.post(first), bot.post(second))
    sent = await bot.connector.wait_for(lambda s: len(final_messages(s)) >= 2, timeout=20)
    answers = final_messages(sent)
    users = await _saved_user_messages(bot, first["conversation"]["id"], 2)
    # Sent at the same moment, they reach the bot in either order; the bot keeps the order they arrived in.
    assert sorted(users) == ["what incidents came in this week?", "which hosts were hit most this week?"]
    expected = ["Most targeted" if "hosts" in question else "incidents;" for question in users]
    assert [marker in answer.text for marker, answer in zip(expected, answers, strict=True)] == [True, True], \
        "answered one at a time, in the order received, nothing lost"


async def test_the_same_activity_id_in_two_conversations_is_answered_in_both(bot: Bot) -> None:
    """Teams message ids are unique only within a conversation: two chats can send the same id at once."""
    activity_id = next_id()
    alice = teams.personal("incidents 24h", activity_id=activity_id, service_url=bot.connector.url, user="alice",
                           conversation_id="a:1personal-chat-alice")
    bob = teams.personal("incidents 24h", activity_id=activity_id, service_url=bot.connector.url, user="bob",
                         conversation_id="a:1personal-chat-bob")
    statuses = await asyncio.gather(bot.post(alice), bot.post(bob))
    assert [status for status, _, _ in statuses] == [201, 201], "both accepted"
    sent = await bot.connector.wait_for(lambda s: len(final_messages(s)) >= 2)
    answered = sorted(s.conversation_id for s in final_messages(sent))
    assert answered == ["a:1personal-chat-alice", "a:1personal-chat-bob"]
    assert all(len([s for s in sent if s.conversation_id == c and s.type == "typing"]) >= 1 for c in answered)
    # A re-sent delivery is still dropped, in either conversation.
    assert [(await bot.post(activity))[0] for activity in (alice, bob)] == [200, 200]
    barriers = [await answered_after(bot, activity) for activity in (alice, bob)]
    assert len([s for s in final_messages(bot.connector.sent) if s.body.get("replyToId") not in barriers]) == 2
    # The dropped deliveries gave their place in line back: the next message is answered.
    await bot.post(teams.personal("help", activity_id=next_id(), service_url=bot.connector.url))
    await bot.connector.wait_for(lambda s: len(final_messages(s)) >= 3)


async def test_back_to_back_messages_are_answered_in_arrival_order_when_typing_is_slow(bot: Bot) -> None:
    """Each message's typing indicator (a network call before its turn) is slow, the first one slowest: the
    turns still run in the order the messages arrived."""
    ids = [next_id() for _ in range(10)]
    held: set[str] = set()

    def typing_delay(body: dict) -> float:
        reply_to = str(body.get("replyToId") or "")
        if reply_to not in ids or reply_to in held:
            return 0.0
        held.add(reply_to)  # only the early indicator, sent as the message arrives
        return 0.05 * (len(ids) - ids.index(reply_to))

    bot.connector.typing_delay = typing_delay
    for n, activity_id in enumerate(ids):
        status, _, _ = await bot.post(teams.personal(f"incidents {n + 1}d", activity_id=activity_id,
                                                     service_url=bot.connector.url))
        assert status == 201
    sent = await bot.connector.wait_for(lambda s: len(final_messages(s)) >= len(ids), timeout=20)
    answers = final_messages(sent)
    assert [a.body.get("replyToId") for a in answers] == ids, "answered one at a time, in arrival order"
    early = [s.body["replyToId"] for s in sent if s.type == "typing" and not s.stream_info]
    assert early.index(ids[-1]) < early.index(ids[0]), "the typing indicators finished out of order; the turns did not"


async def test_a_card_press_waits_for_the_message_before_it(bot: Bot, demo_client: SentinelClient) -> None:
    """An invoke (Action.Execute) takes its place in line when it arrives, like a message does."""
    number = (await demo_client.query_incidents(time_window="last_7d", limit=1)).records[0].number
    message_id = next_id()
    bot.connector.typing_delay = lambda body: 0.4 if body.get("replyToId") == message_id else 0.0
    await bot.post(teams.personal("help", activity_id=message_id, service_url=bot.connector.url))
    status, _, _ = await bot.post(teams.invoke({"action": "incident_detail", "incident": number},
                                               activity_id=next_id(), service_url=bot.connector.url))
    assert status == 200
    sent = await bot.connector.wait_for(lambda s: len(final_messages(s)) >= 2)
    help_answer, detail = final_messages(sent)
    assert help_answer.body.get("replyToId") == message_id and f"#{number}" in card_text(detail.cards[0])


async def test_streaming_refused_falls_back_to_typing(bot: Bot) -> None:
    bot.connector.refuse_streaming = True
    await bot.post(teams.personal("incidents 24h", activity_id=next_id(), service_url=bot.connector.url))
    sent = await bot.connector.wait_for(lambda s: any(x.type == "message" for x in s))
    [answer] = [s for s in sent if s.type == "message"]
    assert answer.stream_info is None and answer.cards and any(s.type == "typing" for s in sent)


async def test_connector_429_is_retried_after_retry_after(bot: Bot) -> None:
    bot.connector.throttle = [0.6]
    started = time.monotonic()
    await bot.post(teams.personal("help", activity_id=next_id(), service_url=bot.connector.url))
    await bot.connector.wait_for(lambda s: any(x.type == "message" for x in s))
    assert time.monotonic() - started >= 0.6


async def test_a_failing_turn_tells_the_user_and_keeps_the_conversation(connector: FakeConnector) -> None:
    class Broken:
        source = "demo"

        async def execute(self, query, kql_text):
            raise RuntimeError("disk on fire")

        async def prepare(self):
            return None

        async def close(self):
            return None

    running, server = await start_bot(connector, SentinelClient(Broken()), None, MemoryStorage())
    try:
        await running.post(teams.personal("incidents 24h", activity_id=next_id(), service_url=connector.url))
        sent = await connector.wait_for(lambda s: any(x.cards for x in s if x.type == "message"))
        error = card_text(next(x for x in sent if x.type == "message").cards[0])
        assert "Something went wrong" in error and "reference" in error and "disk on fire" not in error
        history = await _history(running, "a:1personal-chat-alice")
        assert history == [] or history[0]["role"] == "user"
    finally:
        await server.close()


@pytest.mark.parametrize("raw, content_type, status", [
    (b"{not json", "application/json", 400),
    (b'{"text": "no type"}', "application/json", 400),
    (b'["a list"]', "application/json", 400),
    (b'{"type": "message", "text": "hi"}', "application/json", 400),
    (b"type=message", "application/x-www-form-urlencoded", 415),
    # Shapes botbuilder would trip over inside the turn: refused at the door instead.
    *((json.dumps(teams.personal("hi", activity_id="1", service_url="http://127.0.0.1:1/") | bent).encode(),
       "application/json", 400) for bent in ({"recipient": None}, {"entities": [None]}, {"channelData": None},
                                             {"from": {"id": ""}}, {"conversation": {"id": "a b"}},
                                             {"entities": [{"type": "mention", "mentioned": "x"}]},
                                             {"locale": "en\r\nX-Injected: 1"}, {"text": {"a": 1}})),
])
async def test_malformed_requests_get_a_4xx(bot: Bot, raw: bytes, content_type: str, status: int) -> None:
    got, body, _ = await bot.post({}, raw=raw, content_type=content_type)
    assert got == status and "Traceback" not in body and "error" in body


async def test_health_and_readiness(bot: Bot) -> None:
    base = bot.url.removesuffix("/api/messages")
    async with aiohttp.ClientSession() as session:
        async with session.get(base + "/healthz") as alive:
            assert alive.status == 200
        async with session.get(base + "/readyz") as ready:
            report = await ready.json()
            assert ready.status == 200 and report["checks"]["state"] == "ok"
            assert report["checks"]["workspace"] == "demo"


async def test_restart_with_sqlite_state_keeps_the_conversation(connector: FakeConnector, demo_client: SentinelClient,
                                                                 fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    from bot.teams.storage import SqliteStorage

    path = str(tmp_path / "state.db")
    first, server = await start_bot(connector, demo_client, fake_openai, SqliteStorage(path))
    await first.post(teams.personal("what incidents came in this week?", activity_id=next_id(),
                                    service_url=connector.url))
    await connector.wait_for(lambda s: len(final_messages(s)) >= 1)
    await server.close()
    second, server = await start_bot(connector, demo_client, fake_openai, SqliteStorage(path))
    try:
        await second.post(teams.personal("tell me more about [1]", activity_id=next_id(), service_url=connector.url))
        sent = await connector.wait_for(lambda s: len(final_messages(s)) >= 2)
        assert "Open in Sentinel" in card_text(final_messages(sent)[-1].cards[0])
        users = await _saved_user_messages(second, "a:1personal-chat-alice", 2)
        assert users == ["what incidents came in this week?", "tell me more about [1]"]
    finally:
        await server.close()


async def _saved_user_messages(bot: Bot, conversation_id: str, count: int, timeout: float = 5.0) -> list[str]:
    """The user messages in the saved state, once ``count`` are there (state is saved after the answer)."""
    deadline = time.monotonic() + timeout
    while True:
        users = [m["content"] for m in await _history(bot, conversation_id) if m["role"] == "user"]
        if len(users) >= count or time.monotonic() > deadline:
            return users
        await asyncio.sleep(0.05)


async def _history(bot: Bot, conversation_id: str) -> list[dict]:
    key = f"msteams/conversations/{conversation_id}"
    stored = (await bot.read([key])).get(key)
    if stored is None:
        return []
    data = stored.get(STATE_PROPERTY) if isinstance(stored, dict) else getattr(stored, STATE_PROPERTY, None)
    # The stored history is typed items; read it back as the messages the model is sent.
    return to_wire(Conversation.from_dict((data or {}).get("conversation")).history)


async def test_blob_state_against_azurite(azurite: str, connector: FakeConnector, demo_client: SentinelClient,
                                          fake_openai: FakeOpenAI) -> None:
    """Several instances share Blob state: an answer given by one instance is remembered by the next."""
    from bot.teams.storage import create_storage

    first, server = await start_bot(connector, demo_client, fake_openai,
                                    create_storage("blob", blob_connection_string=azurite, blob_container="bot-state"))
    await first.post(teams.channel_mention("what incidents came in this week?", activity_id=next_id(),
                                           service_url=connector.url))
    await connector.wait_for(lambda s: any(x.type == "message" and x.cards for x in s))
    thread = "19:war-room@thread.tacv2;messageid=1700000000000"
    await _saved_user_messages(first, thread, 1)
    await server.close()  # stops its turn loop, closing its Blob client there
    other = create_storage("blob", blob_connection_string=azurite, blob_container="bot-state")
    second, server = await start_bot(connector, demo_client, fake_openai, other)
    try:
        await second.post(teams.channel_mention("tell me more about [1]", activity_id=next_id(),
                                                service_url=connector.url))
        sent = await connector.wait_for(
            lambda s: any("Open in Sentinel" in card_text(c) for x in s for c in x.cards))
        assert all(s.conversation_id == thread for s in sent)
        users = await _saved_user_messages(second, thread, 2)
        assert users == ["what incidents came in this week?", "tell me more about [1]"]
    finally:
        await server.close()


class FlakyStorage(MemoryStorage):
    """Memory state whose next ``failures`` writes raise as a full disk does."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0
        self.writes = 0

    async def write(self, changes):
        self.writes += 1
        if self.failures > 0:
            self.failures -= 1
            raise OSError(28, "No space left on device")
        await super().write(changes)


async def _readyz(bot: Bot) -> tuple[int, dict]:
    async with (aiohttp.ClientSession() as session,
                session.get(bot.url.removesuffix("/api/messages") + "/readyz") as response):
        return response.status, await response.json()


async def _turn(bot: Bot, text: str, count: int) -> list[teams.Sent]:
    """Post a message and wait until the connector has ``count`` final messages and the turn has ended."""
    await bot.post(teams.personal(text, activity_id=next_id(), service_url=bot.connector.url))
    await bot.connector.wait_for(lambda s: len(final_messages(s)) >= count)
    while bot.app[RUNNER_KEY].pending:  # the state save (and any notice) comes after the answer
        await asyncio.sleep(0.02)
    return final_messages(bot.connector.sent)


async def test_a_save_that_fails_once_is_retried_and_nobody_is_bothered(connector: FakeConnector,
                                                                        demo_client: SentinelClient) -> None:
    storage = FlakyStorage()
    running, server = await start_bot(connector, demo_client, None, storage)
    try:
        storage.failures = 1
        finals = await _turn(running, "incidents 24h", 1)
        assert storage.writes == 2, "the failed write was tried again"
        assert len(finals) == 1 and finals[0].cards, "the answer alone, no notice"
        key = "msteams/conversations/a:1personal-chat-alice"
        assert (await running.read([key]))[key][STATE_PROPERTY]["recent_activity_ids"], "the turn was saved"
        status, report = await _readyz(running)
        assert status == 200 and report["status"] == "ready" and report["checks"]["state"] == "ok"
    finally:
        await server.close()


async def test_a_full_disk_tells_the_user_and_readiness_until_a_save_succeeds(connector: FakeConnector,
                                                                             demo_client: SentinelClient,
                                                                             tmp_path: Path) -> None:
    from bot.teams.storage import SqliteStorage

    storage = SqliteStorage(tmp_path / "state.db")
    running, server = await start_bot(connector, demo_client, None, storage)
    try:
        # A full disk: the database may not grow past its current size, and filler rows take what room is
        # left in its pages, so every save fails with SQLITE_FULL ("database or disk is full").
        async def fill() -> None:
            connection = storage._connection
            pages = connection.execute("PRAGMA page_count").fetchone()[0]
            connection.execute(f"PRAGMA max_page_count = {pages}")
            for n, size in enumerate([2000, 500, 100, 20, 1] * 4):
                with contextlib.suppress(sqlite3.OperationalError):
                    connection.execute("INSERT INTO bot_state VALUES (?, '', ?, '')", (f"filler-{n}", "x" * size))

        async def free() -> None:
            storage._connection.execute("PRAGMA max_page_count = 1073741823")

        await running.app[RUNNER_KEY].call(fill())
        finals = await _turn(running, "incidents 24h", 2)
        answer, notice = finals
        assert answer.cards and "may not remember your last message" in notice.text
        status, report = await _readyz(running)
        assert status == 200 and report["status"] == "degraded"
        assert report["checks"]["state"].startswith("degraded: 1 conversation save(s) failed")
        assert "OperationalError" in report["checks"]["state"]

        await running.app[RUNNER_KEY].call(free())  # space again
        finals = await _turn(running, "incidents 7d", 3)
        assert finals[-1].cards and "may not remember" not in finals[-1].text, "answered, no notice"
        status, report = await _readyz(running)
        assert status == 200 and report["status"] == "ready" and report["checks"]["state"] == "ok"
        assert await _saved_activity_ids(running, "a:1personal-chat-alice") == 1, "the new turn is saved"
    finally:
        await server.close()


async def _saved_activity_ids(bot: Bot, conversation_id: str) -> int:
    key = f"msteams/conversations/{conversation_id}"
    stored = (await bot.read([key])).get(key) or {}
    return len(stored.get(STATE_PROPERTY, {}).get("recent_activity_ids", []))


async def test_a_turn_cut_short_by_shutdown_tells_its_user_to_resend(bot: Bot, fake_openai: FakeOpenAI) -> None:
    from bot.teams.surface import ABANDONED_TEXT

    fake_openai.latency_s = 5.0  # the model is still thinking when the bot shuts down
    activity_id = next_id()
    await bot.post(teams.personal("what high-severity incidents came in this week?", activity_id=activity_id,
                                  service_url=bot.connector.url))
    await bot.connector.wait_for(lambda s: any(x.type == "typing" for x in s))
    cancelled = await bot.app[RUNNER_KEY].stop(0.1)
    assert cancelled == 1
    sent = await bot.connector.wait_for(lambda s: any(x.type == "message" for x in s))
    [notice] = [s for s in sent if s.type == "message"]
    assert notice.text == ABANDONED_TEXT and notice.body.get("replyToId") == activity_id


async def test_a_turn_past_its_deadline_is_stopped_its_user_told_and_the_next_message_answered(
        connector: FakeConnector, demo_client: SentinelClient, fake_openai: FakeOpenAI) -> None:
    from bot.teams.surface import deadline_text

    running, server = await start_bot(connector, demo_client, fake_openai, MemoryStorage(),
                                      Settings.from_env({"TURN_DEADLINE_SECONDS": "1"}, dotenv_path=None))
    try:
        fake_openai.latency_s = 30.0  # a throttled model: far longer than the turn may take
        slow, quick = next_id(), next_id()
        await running.post(teams.personal("what high-severity incidents came in this week?", activity_id=slow,
                                          service_url=connector.url))
        await running.post(teams.personal("help", activity_id=quick, service_url=connector.url))
        sent = await connector.wait_for(lambda s: sum(x.body.get("replyToId") == quick for x in final_messages(s)) >= 1)
        finals = final_messages(sent)
        told = [n for n, s in enumerate(finals) if s.text == deadline_text(1) and s.body.get("replyToId") == slow]
        answered = [n for n, s in enumerate(finals) if s.body.get("replyToId") == quick]
        assert told and answered and told[0] < answered[0], "the slow turn is closed first, then the next one runs"
    finally:
        await server.close()


async def test_an_unknown_reference_is_answered_at_once_with_the_references_there_are(
        bot: Bot, fake_openai: FakeOpenAI) -> None:
    async def say(text: str) -> teams.Sent:
        bot.connector.sent.clear()
        await bot.post(teams.personal(text, activity_id=next_id(), service_url=bot.connector.url))
        sent = await bot.connector.wait_for(lambda s: bool(final_messages(s)))
        return final_messages(sent)[-1]

    empty = await say("tell me more about [2]")
    assert empty.text.startswith("There is no [2] in this conversation.")
    assert "incidents 24h" in empty.text and fake_openai.chat_requests == [], "answered without the model"

    await say("incidents 30d")
    listed = await say("tell me more about [2] and [998], then [999]")
    assert listed.text.startswith("There is no [998] or [999] in this conversation. References here: [11] incident #")
    assert "[20] incident #" in listed.text and "[10]" not in listed.text, "the ten most recent"
    assert listed.text.endswith("(and 10 older).")
    assert fake_openai.chat_requests == [] and not listed.cards

    await say("tell me more about [2]")  # it exists: the model looks it up as before
    assert len(fake_openai.chat_requests) >= 1
