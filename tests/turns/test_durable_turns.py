"""Durable turns (issue 13): queue, leases, numbers, markers, workers, on both queues: Azure Storage (against
Azurite) and the SQLite file of one machine (TURN_QUEUE=local).

The workers here run test turns (a coroutine recording what it ran) on the real queues and TurnWorker; the rig tests
run real bot processes behind a round-robin proxy and kill one (tests/support/durable_rig.py).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import pytest
import trustme

from bot.config import Settings
from bot.turns.azure_queue import AzureTurnQueue
from bot.turns.contract import Envelope, TurnQueue
from bot.turns.local_queue import LocalTurnQueue
from bot.turns.worker import GIVEN_UP_TEXT, TurnWorker
from tests.support import connector_fake as teams
from tests.support import durable_rig
from tests.support.azurite import Azurite, require_azurite
from tests.support.connector_fake import FakeConnector

_names = iter(range(1, 1000))


@pytest.fixture(params=["azure", "local"])
async def queues(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[TurnQueue]]:
    """Two queues on one fresh store: two instances' (Azure) or two processes' (local) view of the same turns."""
    opened: list[TurnQueue]
    if request.param == "azure":
        azurite = request.getfixturevalue("azurite")
        name = f"turns-{next(_names)}"
        opened = [AzureTurnQueue.open(queue_name=name, container=name, connection_string=azurite) for _ in range(2)]
    else:
        opened = [LocalTurnQueue.open(tmp_path / "turns.db") for _ in range(2)]
    await opened[0].ensure()
    yield opened
    for turns in opened:
        await turns.close()


async def put_unreadable(turns: TurnQueue, content: str) -> None:
    """A queue message as an older or broken writer may have left it."""
    if isinstance(turns, AzureTurnQueue):
        await turns.queue.send_message(content)
    else:
        assert isinstance(turns, LocalTurnQueue)
        with sqlite3.connect(turns.path) as db:
            db.execute("INSERT INTO turns (conversation, body) VALUES ('', ?)", (content,))


async def set_aside(turns: TurnQueue) -> list[dict[str, Any]]:
    if isinstance(turns, AzureTurnQueue):
        return [json.loads(m.content) async for m in turns.poison.receive_messages(max_messages=10)]
    assert isinstance(turns, LocalTurnQueue)
    return await turns.set_aside()


class Recorder:
    """Test turns: records (conversation, activity id) as each runs; ``hang`` ids never finish."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []
        self.told: list[tuple[str, str]] = []
        self.hang: set[str] = set()

    async def run(self, envelope: Envelope) -> None:
        self.ran.append((envelope.conversation_id, envelope.activity_id))
        if envelope.activity_id in self.hang:
            await asyncio.sleep(3600)
        await asyncio.sleep(0.01)

    async def tell(self, envelope: Envelope, text: str) -> None:
        self.told.append((envelope.activity_id, text))


async def queue_turn(turns: TurnQueue, conversation: str, activity_id: str) -> int:
    return await turns.enqueue(conversation, activity_id, {"type": "message", "id": activity_id}, {})


async def until(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def working(*workers: TurnWorker) -> list[asyncio.Task[None]]:
    return [asyncio.ensure_future(worker.run(grace_s=0)) for worker in workers]


async def stopped(tasks: list[asyncio.Task[None]], *workers: TurnWorker) -> None:
    for worker in workers:
        worker.stop()
    await asyncio.gather(*tasks)


async def test_turn_numbers_are_unique_and_dense_under_contention(queues: list[TurnQueue]) -> None:
    numbers = await asyncio.gather(*(queue_turn(queues[n % 2], "a:busy", str(n)) for n in range(12)))
    assert sorted(numbers) == list(range(12))
    assert await queue_turn(queues[0], "a:other", "1") == 0, "each conversation counts on its own"
    taken = await queues[1].take(32)
    assert sorted((t.envelope.conversation_id, t.envelope.number) for t in taken if t.envelope) == sorted(
        [("a:busy", n) for n in range(12)] + [("a:other", 0)]), "every numbered turn is on the queue"


async def test_a_marker_claims_an_activity_once_but_lets_its_own_redelivery_through(queues: list[TurnQueue]) -> None:
    envelope = Envelope("a:chat", "1700000000001", 0, {}, {})
    assert await queues[0].claim(envelope, "message-1")
    assert await queues[1].claim(envelope, "message-1"), "the same queue message again: a crashed worker's turn"
    assert not await queues[1].claim(envelope, "message-2"), "another delivery of the same activity"
    other = Envelope("a:other-chat", "1700000000001", 0, {}, {})
    assert await queues[1].claim(other, "message-3"), "the same activity id in another conversation"


async def test_two_workers_answer_each_turn_once_in_order_and_set_aside_what_they_cannot_read(
        queues: list[TurnQueue]) -> None:
    recorder = Recorder()
    expected: dict[str, list[str]] = {f"a:chat-{c}": [f"{c}-{m}" for m in range(5)] for c in range(3)}
    for conversation, ids in expected.items():
        for activity_id in ids:
            await queue_turn(queues[0], conversation, activity_id)
    await queue_turn(queues[1], "a:chat-0", "0-2")  # Teams re-sent it to the other instance
    await put_unreadable(queues[0], "{not json")
    await put_unreadable(queues[0], json.dumps({"v": 99}))
    workers = [TurnWorker(turns, recorder.run, recorder.tell, concurrency=4) for turns in queues]
    tasks = await working(*workers)
    try:
        await until(lambda: len(recorder.ran) >= 15)
        # A barrier, not a pause: one more turn per conversation, queued after everything above. Each conversation's
        # turns run in order, so once these ran, a wrong second answer would have shown.
        for conversation in expected:
            await queue_turn(queues[0], conversation, "barrier")
        await until(lambda: len([a for _, a in recorder.ran if a == "barrier"]) >= len(expected))
    finally:
        await stopped(tasks, *workers)
    for conversation, ids in expected.items():
        ran = [a for c, a in recorder.ran if c == conversation]
        assert ran[-1] == "barrier"
        assert ran[:-1] == ids, "each once, in arrival order"
    aside = await set_aside(queues[0])
    assert sorted(m["content"] for m in aside) == sorted(["{not json", json.dumps({"v": 99})])
    assert all(m["reason"].startswith(("not a turn envelope", "unknown envelope version")) for m in aside)


async def test_a_turn_that_never_finishes_is_retried_then_set_aside_with_its_user_told(
        queues: list[TurnQueue]) -> None:
    recorder = Recorder()
    recorder.hang.add("poison")
    await queue_turn(queues[0], "a:chat", "poison")
    await queue_turn(queues[0], "a:chat", "after")
    for attempt in range(1, 4):  # each attempt's worker "dies": cancelled with the turn running
        worker = TurnWorker(queues[attempt % 2], recorder.run, recorder.tell, max_attempts=3)
        tasks = await working(worker)
        await until(lambda attempt=attempt: len(recorder.ran) >= attempt)
        await stopped(tasks, worker)
    assert recorder.ran == [("a:chat", "poison")] * 3
    worker = TurnWorker(queues[0], recorder.run, recorder.tell, max_attempts=3)
    tasks = await working(worker)
    try:
        await until(lambda: ("a:chat", "after") in recorder.ran)
    finally:
        await stopped(tasks, worker)
    assert recorder.told == [("poison", GIVEN_UP_TEXT.format(tries=3))]
    [aside] = await set_aside(queues[0])
    assert aside["reason"] == "started 3 times without finishing"


# Azure only: a local enqueue numbers and queues a turn in one transaction, so no number is ever taken alone.
@pytest.mark.parametrize("queues", ["azure"], indirect=True)
async def test_a_number_taken_but_never_queued_is_skipped_after_the_gap_wait(queues: list[TurnQueue]) -> None:
    assert isinstance(queues[0], AzureTurnQueue)
    recorder = Recorder()
    await queue_turn(queues[0], "a:chat", "first")
    await queues[0].number("a:chat")  # a front that died between numbering and queueing
    await queue_turn(queues[0], "a:chat", "third")
    worker = TurnWorker(queues[1], recorder.run, recorder.tell, gap_s=1.0)
    tasks = await working(worker)
    try:
        await until(lambda: len(recorder.ran) == 2)
    finally:
        await stopped(tasks, worker)
    assert recorder.ran == [("a:chat", "first"), ("a:chat", "third")]


class _TestToken:
    """A bearer token as Entra ID would issue one for Storage; Azurite's OAuth mode checks its claims, not its
    signature. Stands for DefaultAzureCredential at the process boundary."""

    async def get_token(self, *scopes: str, **_: Any) -> Any:
        now = int(time.time())
        claims = {"aud": "https://storage.azure.com", "iss": "https://sts.windows.net/ab1f708d-50f6-404c-a006-d71b2ac7a606/",
                  "iat": now, "nbf": now, "exp": now + 3600, "oid": "bot-identity", "tid": "tenant"}
        token = jwt.encode(claims, "not-checked-by-the-emulator-" * 2, algorithm="HS256")
        return type("AccessToken", (), {"token": token, "expires_on": now + 3600})()

    async def close(self) -> None:
        pass


async def test_queue_and_blobs_are_reached_with_a_token_over_https(tmp_path: Path) -> None:
    """The managed-identity path: account URLs and a token credential, no key (Azurite --oauth basic, HTTPS)."""
    require_azurite()
    authority = trustme.CA()
    cert = authority.issue_cert("127.0.0.1", "localhost")
    cert.private_key_pem.write_to_path(tmp_path / "key.pem")
    cert.cert_chain_pems[0].write_to_path(tmp_path / "cert.pem")
    authority.cert_pem.write_to_path(tmp_path / "ca.pem")
    emulator = Azurite(tmp_path, cert=tmp_path / "cert.pem", key=tmp_path / "key.pem")
    turns = AzureTurnQueue.open(queue_name="turns", container="turns", queue_account_url=emulator.queue_url,
                           blob_account_url=emulator.blob_url, credential=_TestToken(),
                           connection_verify=str(tmp_path / "ca.pem"))
    try:
        await turns.ensure()
        await queue_turn(turns, "a:chat", "1")
        [taken] = await turns.take(1)
        assert taken.envelope is not None and taken.envelope.activity_id == "1"
        lease = await turns.lease("a:chat")
        assert lease is not None
        await lease.release()
        await turns.done(taken)
    finally:
        await turns.close()
        emulator.stop()


def test_connection_strings_are_for_local_emulators_only() -> None:
    from bot.config import ConfigError

    local = Settings.from_env({"STATE_STORE": "blob", "TURN_QUEUE": "azure",
                               "STATE_BLOB_CONNECTION_STRING": "UseDevelopmentStorage=true"}, dotenv_path=None)
    assert local.turns.queue == "azure"
    remote = ("DefaultEndpointsProtocol=https;AccountName=contoso;AccountKey=a2V5;"
              "BlobEndpoint=https://contoso.blob.core.windows.net/")
    with pytest.raises(ConfigError, match="connection strings are for local emulators only"):
        Settings.from_env({"STATE_STORE": "blob", "STATE_BLOB_CONNECTION_STRING": remote}, dotenv_path=None)
    with pytest.raises(ConfigError, match="TURN_QUEUE=azure needs STATE_STORE=blob"):
        Settings.from_env({"TURN_QUEUE": "azure", "TURN_QUEUE_ACCOUNT_URL": "https://contoso.queue.core.windows.net"},
                          dotenv_path=None)


@pytest.mark.slow
async def test_two_instances_one_killed_lose_repeat_and_reorder_nothing(tmp_path: Path) -> None:
    """Repeated deliveries are answered once; a turn the killed instance was running is answered once, after the kill.
    Only a turn whose answer had gone out in the instant before the kill, before it was recorded, may be answered
    again (delivery is at least once: durable_rig.COMMIT_WINDOW_S); that is counted apart, never as lost or twice."""
    require_azurite()
    figures = await durable_rig.run(tmp_path, conversations=4, messages=6, answer_timeout_s=90)
    assert (figures.lost, figures.twice, figures.out_of_order) == (0, 0, 0), figures
    assert figures.repeated > 0 and figures.held_at_kill >= 2, "deliveries repeated, turns running at the kill"


@pytest.mark.slow
async def test_two_processes_of_one_machine_on_the_local_queue_one_killed_lose_repeat_and_reorder_nothing(
        tmp_path: Path) -> None:
    """TURN_QUEUE=local: two web processes share the SQLite queue and state, each starting its own worker process
    (TURN_WORKER_PROCESSES=1); one is killed with its worker (SIGKILL to the process group) and restarted. Every
    third activity is a card press (issue 36), which keeps its place among the messages as they do."""
    figures = await durable_rig.run(tmp_path, conversations=4, messages=6, answer_timeout_s=90, separate_workers=True,
                                    queue="local", presses=True)
    assert (figures.lost, figures.twice, figures.out_of_order) == (0, 0, 0), figures
    assert figures.repeated > 0 and figures.held_at_kill >= 2, "deliveries repeated, turns running at the kill"


@pytest.mark.slow
async def test_with_the_default_settings_a_bot_killed_mid_turn_answers_the_turn_after_its_restart(
        tmp_path: Path) -> None:
    """python -m bot serve with nothing set (issue 28): each acknowledged turn is on disk, so SIGKILL mid-turn loses
    none (with TURN_QUEUE=off, the old default, all 4 were lost), card presses included (issue 36: they ran in the web
    process, and both presses were lost)."""
    figures = await durable_rig.kill_with_defaults(tmp_path, conversations=4, presses=True)
    assert figures.answered_before_kill == 0, "the kill lands while every turn runs"
    assert (figures.lost, figures.twice) == (0, 0), figures


def test_an_activity_refused_with_503_is_not_dropped_as_a_repeat_when_teams_retries() -> None:
    from bot.turns.runner import TurnRunner

    runner = TurnRunner()
    assert not runner.is_duplicate("a:chat", "1")
    runner.forget("a:chat", "1")  # the front answered 503: not queued
    assert not runner.is_duplicate("a:chat", "1"), "Teams' retry is taken"
    assert runner.is_duplicate("a:chat", "1"), "and a further repeat is dropped"


async def test_the_front_queues_a_channel_mention_and_the_web_process_worker_answers_it(
        azurite: str, demo_client: Any) -> None:
    """In one process, as `serve` composes it: the queued turn keeps what msrest's models do not declare (the
    mention's `mentioned`), so a channel @mention is still for the bot when a worker runs it."""
    from aiohttp.test_utils import TestServer

    from bot.app import Components, create_app, turn_queue_opener
    from bot.teams.storage import create_storage
    from tests.support import connector_fake as teams

    settings = Settings.from_env({"STATE_STORE": "blob", "TURN_QUEUE": "azure", "STATE_BLOB_CONNECTION_STRING": azurite,
                                  "TURN_QUEUE_NAME": "front-turns", "TURN_BLOB_CONTAINER": "front-turns"},
                                 dotenv_path=None)
    await demo_client.prepare()
    connector = await teams.FakeConnector().start()
    storage = create_storage("blob", blob_connection_string=azurite, blob_container="front-state")
    app = create_app(Components(settings, demo_client, None), storage, turn_queue=turn_queue_opener(settings))
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        url = str(server.make_url("/api/messages"))
        async with aiohttp.ClientSession() as session:
            for body in (teams.channel_mention("incidents 24h", activity_id="1700000000101", service_url=connector.url),
                         teams.personal("help", activity_id="1700000000102", service_url=connector.url)):
                async with session.post(url, json=body) as answer:
                    assert answer.status == 201
        await connector.wait_for(lambda sent: {s.body.get("replyToId") for s in sent if s.type == "message"}
                                 >= {"1700000000101", "1700000000102"}, timeout=20)
    finally:
        await server.close()
        await connector.stop()


@pytest.mark.parametrize("queue", ["off", "local"])
async def test_card_presses_keep_their_place_among_messages_and_a_replayed_press_runs_once(
        tmp_path: Path, demo_client: Any, queue: str) -> None:
    """Issue 36: an Action.Execute press goes the way a message does (with the default local queue: queued, and its
    invoke answered once that is committed), so it waits for the slow message before it, and the same press delivered
    twice (Teams' retry) is answered once, its state saved once."""
    from botbuilder.core import MemoryStorage

    from tests.teams.test_teams_bot import card_text, final_messages, start_bot, start_queued_bot

    connector = await FakeConnector().start()
    looking = None
    if queue == "off":
        bot, server = await start_bot(connector, demo_client, None, MemoryStorage())
    else:
        bot, server, looking = await start_queued_bot(connector, demo_client, tmp_path)
    numbers = [r.number for r in (await demo_client.query_incidents(time_window="last_7d", limit=2)).records]
    slow, press, replayed, last = "1700000090001", "f:press-1", "f:press-2", "1700000090002"
    connector.typing_delay = lambda body: 0.5 if body.get("replyToId") == slow else 0.0
    try:
        assert (await bot.post(teams.personal("help", activity_id=slow, service_url=connector.url)))[0] == 201
        for activity_id, number in ((press, numbers[0]), (replayed, numbers[1]), (replayed, numbers[1])):
            status, body, _ = await bot.post(teams.invoke({"action": "incident_detail", "incident": number},
                                                          activity_id=activity_id, service_url=connector.url))
            assert status == 200 and "Working on it" in body, body
        assert (await bot.post(teams.personal("help", activity_id=last, service_url=connector.url)))[0] == 201
        # Turns of a conversation run in order: a second answer to the replayed press would come before the last's.
        sent = await connector.wait_for(lambda s: len(final_messages(s)) >= 4, timeout=30)
        answers = final_messages(sent)
    finally:
        await server.close()
        await connector.stop()
        if looking is not None:
            await looking.close()
    assert len(answers) == 4, [card_text(c)[:80] for a in answers for c in a.cards]
    assert answers[0].body.get("replyToId") == slow and answers[3].body.get("replyToId") == last
    assert f"#{numbers[0]}" in card_text(answers[1].cards[0]) and f"#{numbers[1]}" in card_text(answers[2].cards[0])
    assert not [s for s in sent if s.type == "message" and "could not save" in (s.text or "")]


def test_the_kill_rig_counts_apart_only_an_answer_repeated_across_the_kill() -> None:
    """The rig's own accounting: a repeat whose first copy went out just before the kill is the at-least-once window;
    one whose first copy is older, or both copies after the kill, is a defect and stays counted as twice."""
    from tests.support.connector_fake import Sent

    def answer(reply_to: str, at: float) -> Sent:
        return Sent("POST", "a:c", f"r-{reply_to}-{at}", {"type": "message", "replyToId": reply_to}, at)

    connector = FakeConnector()
    killed_at = 100.0
    connector.sent = [answer("1", 95.0), answer("1", 130.0)]
    assert durable_rig._answered_again_at_kill(connector, "a:c", killed_at) == 1
    connector.sent = [answer("1", 50.0), answer("1", 130.0)]  # answered long before the kill: a real repeat
    assert durable_rig._answered_again_at_kill(connector, "a:c", killed_at) == 0
    connector.sent = [answer("1", 110.0), answer("1", 130.0)]  # both after the kill
    assert durable_rig._answered_again_at_kill(connector, "a:c", killed_at) == 0
