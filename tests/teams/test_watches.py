"""Watches without Teams or a workspace: the commands, the filters (as the incidents query decides), the poll plan,
the store and cursor across restarts, the lease, and a poller that survives a failing change feed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botbuilder.core import MemoryStorage
from botbuilder.schema import ChannelAccount, ConversationAccount, ConversationReference

from bot.cards.common import plain
from bot.commands.parser import CommandError, parse
from bot.commands.watches import DIGEST_OVER, Snapshot, Watch, WatchFilter, plan, watch_filter
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import Incident, QueryResult
from bot.sentinel.params import InvalidParameter
from bot.teams.storage import SqliteStorage
from bot.teams.watches import StoreLease, WatchPoller, WatchStore
from tests.cards.test_cards import assert_valid

NOW = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)


# ---- commands ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "name", "arguments"), [
    ("watch high", "watch", {"min_severity": "High"}),
    ("watch medium open", "watch", {"min_severity": "Medium", "status": "open"}),
    ("watch unassigned high", "watch", {"owner": "unassigned", "min_severity": "High"}),
    ("watch mine", "watch", {"owner": "me"}),
    ("watch search ransomware", "watch", {"search": "ransomware"}),
    ("watch", "watch", {}),
    ("watches", "watches", {}),
    ("unwatch", "unwatch", {}),
    ("unwatch 2", "unwatch", {"number": 2}),
])
def test_watch_commands_parse_with_the_incidents_filters(text: str, name: str, arguments: dict) -> None:
    command = parse(text)
    assert command is not None and (command.name, command.arguments) == (name, arguments)


def test_a_sentence_starting_with_watch_is_a_question_and_bad_words_say_the_usage() -> None:
    assert parse("watch out for phishing mails from the finance team") is None
    with pytest.raises(CommandError, match="Usage: watch"):
        parse("watch purple")


@pytest.mark.parametrize("arguments", [{"time_window": "last_24h"}, {"limit": 5}, {"sort": "newest"},
                                       {"entity": "10.1.2.3"}, {"min_severity": "Critical"},
                                       {"product": "Defender"}, {"tactic": "Impact"}, {"classification": "bad"}])
def test_what_a_watch_cannot_take_is_refused_when_it_is_made(arguments: dict) -> None:
    with pytest.raises(InvalidParameter):
        watch_filter(arguments, "aad-alice")


def test_mine_is_the_creator() -> None:
    mine = watch_filter({"owner": "me"}, "aad-alice", "Alice Ng")
    assert mine.arguments["owner"] == "aad-alice" and mine.label == "mine"
    assert mine.matches(snapshot(1, owner_id="aad-alice"))
    assert mine.matches(snapshot(2, owner_name="Alice Ng"))  # an owner listed by name only
    assert not mine.matches(snapshot(3, owner_id="aad-bob", owner_name="Bob"))
    with pytest.raises(InvalidParameter):
        watch_filter({"owner": "me"}, None)


# ---- the filters decide as the incidents query does ------------------------------------------------------------


@pytest.mark.parametrize("arguments", [
    {"min_severity": "High"}, {"min_severity": "Medium", "status": "open"}, {"status": "Closed"},
    {"owner": "unassigned"}, {"severity": "Low,Informational", "status": "New"},
    {"status": "Active", "min_severity": "Low"},
    {"classification": "benign positive"},
])
async def test_python_matching_agrees_with_the_demo_workspace_query(demo_client: SentinelClient,
                                                                     arguments: dict) -> None:
    window = {"time_window": "last_24h", "limit": 100}
    everything = await demo_client.run("query_incidents", window)
    wanted = await demo_client.run("query_incidents", window | arguments)
    assert isinstance(everything, QueryResult) and isinstance(wanted, QueryResult)
    assert everything.metadata.total <= 100, "the comparison needs every incident of the window"
    check = watch_filter(arguments, None)
    ours = {i.number for i in everything.records if check.matches(of_incident(i))}
    assert ours == {i.number for i in wanted.records}
    assert ours, "a filter that matches nothing proves little"


async def test_an_owner_by_name_matches_as_the_query_does(demo_client: SentinelClient) -> None:
    window = {"time_window": "last_24h", "limit": 100}
    everything = await demo_client.run("query_incidents", window)
    assert isinstance(everything, QueryResult)
    owner = next(i.owner for i in everything.records if i.owner)
    wanted = await demo_client.run("query_incidents", window | {"owner": owner.upper()})
    assert isinstance(wanted, QueryResult)
    check = watch_filter({"owner": owner.upper()}, None)
    assert {i.number for i in everything.records if check.matches(of_incident(i))} == \
        {i.number for i in wanted.records}


# ---- the plan ---------------------------------------------------------------------------------------------------


def test_each_conversation_gets_its_new_matches_once_and_many_make_a_digest() -> None:
    high = subscriber("channel", {"min_severity": "High"})
    medium_open = subscriber("chat", {"min_severity": "Medium", "status": "open"})
    changed = [snapshot(1, "High"), snapshot(2, "Medium"), snapshot(3, "Low"), snapshot(4, "High", status="Closed")]
    todo = plan(changed, [high, medium_open], {})
    assert sorted((p.conversation, [i.number for i in p.incidents]) for p in todo.posts) == [
        ("channel", [1]), ("channel", [4]), ("chat", [1]), ("chat", [2])]
    many = [snapshot(n, "High") for n in range(10, 10 + DIGEST_OVER + 1)]
    [digest] = plan(many, [high], {}).posts
    assert digest.digest and len(digest.incidents) == DIGEST_OVER + 1


def test_an_incident_older_than_the_watch_is_not_new() -> None:
    watcher = subscriber("channel", {"min_severity": "High"})
    old = snapshot(1, "High", created=NOW - timedelta(days=2))
    assert plan([old], [watcher], {}).posts == []


def test_a_posted_incident_that_is_closed_or_reassigned_updates_its_card_and_is_not_posted_again() -> None:
    from bot.commands.watches import Posted

    watcher = subscriber("channel", {"min_severity": "High"})
    first = snapshot(1, "High")
    card = Posted("card-1", "channel", (first,))
    closed = snapshot(1, "High", status="Closed", owner_name="Dana")
    todo = plan([closed], [watcher], {1: [card]})
    assert todo.posts == []
    [update] = todo.updates
    assert update.card.key == "card-1" and update.incidents[0].status == "Closed"
    assert plan([first], [watcher], {1: [card]}).updates == []  # nothing shown changed


# ---- cards ------------------------------------------------------------------------------------------------------

HOSTILE = "<at>Bob</at> **urgent** [click](https://evil.example/x) # heading _x_ &lt;at&gt;"


def test_hostile_titles_stay_inert_in_posted_cards() -> None:
    poller = WatchPoller(WatchStore(MemoryStorage()), _feed([]), RecordingSender(),
                         StoreLease(MemoryStorage(), seconds=30), interval_s=1, demo=True, changes_buttons=True,
                         clock=lambda: NOW)
    for incidents in ([snapshot(1, "High", title=HOSTILE)],
                      [snapshot(n, "High", title=HOSTILE) for n in range(1, 8)]):
        card = poller.card(incidents, "high")
        assert_valid(card)
        texts = json.dumps(card, ensure_ascii=False)
        assert "<at>" not in texts and "](" not in texts and "**" not in texts and "&lt;" not in texts
        assert plain(HOSTILE, 200)[:20] in texts


def test_a_posted_card_has_details_assign_and_close_and_a_closed_one_only_details() -> None:
    poller = WatchPoller(WatchStore(MemoryStorage()), _feed([]), RecordingSender(),
                         StoreLease(MemoryStorage(), seconds=30), interval_s=1, demo=True, changes_buttons=True,
                         clock=lambda: NOW)
    titles = buttons(poller.card([snapshot(1, "High")], "high"))
    assert titles[:3] == ["Details", "Assign to me", "Close…"]
    assert "Assign to me" not in buttons(poller.card([snapshot(1, "High", status="Closed")], "high"))


# ---- store, poller, restarts, failures, lease --------------------------------------------------------------------


async def test_watch_list_unwatch_through_the_store() -> None:
    store = WatchStore(MemoryStorage(), clock=lambda: NOW)
    reply = await store.command(parse("watch high open"), **where("chat"))
    assert reply.startswith("Watching for high open")
    assert "already watches" in await store.command(parse("watch high open"), **where("chat"))
    await store.command(parse("watch medium"), **where("chat"))
    listed = await store.command(parse("watches"), **where("chat"))
    assert "1. high open (by Alice" in listed and "2. medium+" in listed
    assert "no watch 5" in await store.command(parse("unwatch 5"), **where("chat"))
    assert await store.command(parse("unwatch 1"), **where("chat")) == "Stopped watching for high open."
    assert [s.key for s in await store.subscribers()] == ["chat"]
    assert "Stopped 1 watch" in await store.command(parse("unwatch"), **where("chat"))
    assert await store.subscribers() == []
    assert "I could not make that watch" in await store.command(parse("watch 24h high"), **where("chat"))


async def test_restart_posts_no_duplicate_and_misses_nothing(tmp_path) -> None:
    path = tmp_path / "state.db"
    rows: list[Snapshot] = []
    clock = Clock()
    sender = RecordingSender()

    def poller(storage: SqliteStorage) -> WatchPoller:
        return WatchPoller(WatchStore(storage, clock=clock), _feed(rows), sender,
                           StoreLease(storage, seconds=30, clock=clock), interval_s=1, demo=True, clock=clock)

    storage = SqliteStorage(path)
    await WatchStore(storage, clock=clock).command(parse("watch high"), **where("channel"))
    rows.append(snapshot(1, "High", created=clock.now, at=clock.tick()))
    first = poller(storage)
    assert (await first.poll()).posted == 1
    await first.lease.release()
    await storage.close()
    # Down for half an hour: one incident arrives early in the outage, far beyond the overlap of the restart's now.
    rows.append(snapshot(2, "High", created=clock.tick(60), at=clock.now))
    clock.tick(1800)
    storage = SqliteStorage(path)
    second = poller(storage)
    report = await second.poll()
    assert report.posted == 1 and report.queries == 1
    assert [posted_numbers(c) for c in sender.posts] == [[1], [2]]
    assert (await second.poll()).posted == 0
    await storage.close()


async def test_a_failing_change_feed_keeps_the_cursor_and_the_next_poll_catches_up() -> None:
    storage = MemoryStorage()
    clock = Clock()
    rows = [snapshot(1, "High", created=clock.now, at=clock.tick())]
    failing = {"left": 2}

    async def feed(since: datetime) -> Sequence[Snapshot]:
        if failing["left"]:
            failing["left"] -= 1
            raise RuntimeError("throttled: Log Analytics said 429")
        return [r for r in rows if r.time_generated and r.time_generated > since]

    sender = RecordingSender()
    store = WatchStore(storage, clock=clock)
    await store.command(parse("watch high"), **where("channel"))
    poller = WatchPoller(store, feed, sender, StoreLease(storage, seconds=30, clock=clock), interval_s=1, demo=True,
                         clock=clock)
    cursors = []
    for _ in range(2):
        report = await poller.poll()
        assert report.failed and report.posted == 0
        cursors.append((await store.cursor()).at)
        clock.tick(60)
    assert cursors[0] == cursors[1] is not None
    clock.tick(600)  # ten minutes of outage
    assert (await poller.poll()).posted == 1
    assert [posted_numbers(c) for c in sender.posts] == [[1]]


async def test_a_failed_post_is_tried_again_without_posting_the_others_twice() -> None:
    storage = MemoryStorage()
    clock = Clock()
    rows = [snapshot(1, "High", created=clock.now, at=clock.tick())]
    sender = RecordingSender(fail_for={"chat"})
    store = WatchStore(storage, clock=clock)
    await store.command(parse("watch high"), **where("channel"))
    await store.command(parse("watch high"), **where("chat"))
    poller = WatchPoller(store, _feed(rows), sender, StoreLease(storage, seconds=30, clock=clock), interval_s=1,
                         demo=True, clock=clock)
    assert (await poller.poll()).failed
    sender.fail_for.clear()
    await poller.poll()
    assert sorted(c for c, _ in sender.post_log) == ["channel", "chat"]


async def test_closed_and_reassigned_incidents_update_their_card_in_place() -> None:
    storage = MemoryStorage()
    clock = Clock()
    rows = [snapshot(1, "High", created=clock.now, at=clock.tick())]
    sender = RecordingSender()
    store = WatchStore(storage, clock=clock)
    await store.command(parse("watch high open"), **where("channel"))
    poller = WatchPoller(store, _feed(rows), sender, StoreLease(storage, seconds=30, clock=clock), interval_s=1,
                         demo=True, clock=clock)
    await poller.poll()
    rows.append(snapshot(1, "High", owner_name="Dana Whitfield", created=rows[0].created, at=clock.tick(),
                         modified=clock.now))
    assert (await poller.poll()).updated == 1
    rows.append(snapshot(1, "High", status="Closed", owner_name="Dana Whitfield", created=rows[0].created,
                         at=clock.tick(), modified=clock.now))
    assert (await poller.poll()).updated == 1
    assert len(sender.posts) == 1
    [(activity_id, card)] = sender.updates[-1:]
    assert activity_id == "activity-1"
    text = json.dumps(card)
    assert "Incident #1 closed" in text and "Dana Whitfield" in text


async def test_only_one_of_two_instances_polls_and_the_other_takes_over_when_the_lease_expires() -> None:
    storage = MemoryStorage()
    clock = Clock()
    queries = {"n": 0}

    async def feed(since: datetime) -> Sequence[Snapshot]:
        queries["n"] += 1
        return []

    store = WatchStore(storage, clock=clock)
    one = WatchPoller(store, feed, RecordingSender(), StoreLease(storage, seconds=30, clock=clock), interval_s=10,
                      demo=True, clock=clock)
    two = WatchPoller(store, feed, RecordingSender(), StoreLease(storage, seconds=30, clock=clock), interval_s=10,
                      demo=True, clock=clock)
    for _ in range(3):
        assert (await one.poll()).polled and not (await two.poll()).polled
        clock.tick(10)
    assert queries["n"] == 3
    clock.tick(31)  # the first instance died: its lease runs out
    assert (await two.poll()).polled and not (await one.poll()).polled


async def test_a_lease_race_has_one_winner() -> None:
    import asyncio

    storage = MemoryStorage()
    leases = [StoreLease(storage, seconds=30) for _ in range(5)]
    won = await asyncio.gather(*(lease.hold() for lease in leases))
    assert sum(won) == 1


# ---- helpers ----------------------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float = 5) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


class RecordingSender:
    def __init__(self, fail_for: set[str] | None = None) -> None:
        self.posts: list[dict[str, Any]] = []
        self.post_log: list[tuple[str, str]] = []
        self.updates: list[tuple[str, dict[str, Any]]] = []
        self.fail_for = fail_for or set()

    async def post(self, reference: dict[str, Any], card: dict[str, Any]) -> str:
        conversation = reference["conversation"]["id"]
        if conversation in self.fail_for:
            raise ConnectionError("connector unreachable")
        self.posts.append(card)
        self.post_log.append((conversation, json.dumps(card)))
        return f"activity-{len(self.posts)}"

    async def update(self, reference: dict[str, Any], activity_id: str, card: dict[str, Any]) -> None:
        self.updates.append((activity_id, card))


def _feed(rows: list[Snapshot]):
    async def feed(since: datetime) -> Sequence[Snapshot]:
        return [r for r in rows if r.time_generated and r.time_generated > since]

    return feed


def snapshot(number: int, severity: str = "High", *, status: str = "New", owner_id: str = "", owner_name: str = "",
             title: str = "Suspicious sign-in", created: datetime | None = None, at: datetime | None = None,
             modified: datetime | None = None) -> Snapshot:
    created = created or NOW
    return Snapshot(number=number, title=title, severity=severity, status=status, created=created,
                    last_modified=modified or created, time_generated=at or created, owner_id=owner_id,
                    owner_name=owner_name, url=f"https://portal.azure.com/#incident/{number}")


def of_incident(i: Incident) -> Snapshot:
    return Snapshot(number=i.number, title=i.title, severity=i.severity, status=i.status, created=i.created,
                    owner_name=i.owner or "", classification=i.classification or "")


def subscriber(key: str, arguments: dict):
    from bot.commands.watches import Subscriber

    return Subscriber(key, {"conversation": {"id": key}},
                      (Watch(WatchFilter(arguments), "Alice", NOW - timedelta(minutes=1)),))


def where(conversation: str) -> dict[str, Any]:
    reference = ConversationReference(conversation=ConversationAccount(id=conversation), channel_id="msteams",
                                      service_url="https://smba.example/", bot=ChannelAccount(id="28:bot"),
                                      user=ChannelAccount(id="29:alice"))
    return {"conversation_id": conversation, "reference": reference, "user_name": "Alice", "user_aad_id": "aad-alice"}


def buttons(card: dict[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type", "").startswith("Action."):
                found.append(node.get("title", ""))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(card)
    return found


def posted_numbers(card: dict[str, Any]) -> list[int]:
    text = json.dumps(card)
    import re

    return sorted({int(n) for n in re.findall(r"#(\d+)", text)})


async def test_a_conversation_that_removed_the_bot_loses_its_watches() -> None:
    from types import SimpleNamespace

    class Forbidden(Exception):
        response = SimpleNamespace(status_code=403, headers={})

    class Refusing(RecordingSender):
        async def post(self, reference: dict[str, Any], card: dict[str, Any]) -> str:
            if reference["conversation"]["id"] == "chat":
                raise Forbidden("the bot is not a member of this conversation")
            return await super().post(reference, card)

    storage = MemoryStorage()
    clock = Clock()
    store = WatchStore(storage, clock=clock)
    for where_ in ("channel", "chat"):
        await store.command(parse("watch high"), **where(where_))
    sender = Refusing()
    poller = WatchPoller(store, _feed([snapshot(1, "High", created=clock.now, at=clock.tick())]), sender,
                         StoreLease(storage, seconds=30, clock=clock), interval_s=1, demo=True, clock=clock)
    report = await poller.poll()
    assert report.posted == 1 and report.failed is None, "the cursor moves on: that post can never be delivered"
    assert [s.key for s in await store.subscribers()] == ["channel"]


async def test_watches_cursor_and_blob_lease_in_blob_storage(azurite: str) -> None:
    """The store several instances share (Azure Blob, here Azurite): keys with '/' and ';', and the poller's blob
    lease (Azure keeps its time): one instance polls, the other only once the lease is released or lapses."""
    from bot.teams.storage import create_storage
    from bot.teams.watches import BlobLease

    def blob():
        return create_storage("blob", blob_connection_string=azurite, blob_container="watch-test")

    one, two = blob(), blob()
    try:
        clock = Clock()
        thread = "19:war-room@thread.tacv2;messageid=1700000000000"
        store = WatchStore(one, clock=clock)
        await store.command(parse("watch high"), **where(thread))
        sender = RecordingSender()
        rows = [snapshot(7, "High", created=clock.now, at=clock.tick())]
        first = WatchPoller(store, _feed(rows), sender, BlobLease(one.container()), interval_s=1, demo=True,
                            clock=clock)
        second = WatchPoller(WatchStore(two, clock=clock), _feed(rows), sender, BlobLease(two.container()),
                             interval_s=1, demo=True, clock=clock)
        assert (await first.poll()).posted == 1
        assert (await first.poll()).polled, "renewed by its holder"
        assert not (await second.poll()).polled, "the other instance holds the lease"
        await first.lease.release()  # as at shutdown (a dead instance's lease lapses after 60 s)
        assert (await second.poll()).polled and not (await first.poll()).polled
        assert len(sender.posts) == 1, "taken over: nothing posted twice"
        import asyncio

        stores = [blob() for _ in range(4)]
        try:
            leases = [BlobLease(s.container(), name="race.lock") for s in stores]
            assert sum(await asyncio.gather(*(lease.hold() for lease in leases))) == 1
        finally:
            for s in stores:
                await s.close()
    finally:
        await one.close()
        await two.close()


async def test_a_digest_card_is_updated_in_place_when_one_of_its_incidents_closes() -> None:
    storage = MemoryStorage()
    clock = Clock()
    rows = [snapshot(n, "High", created=clock.now, at=clock.tick(1)) for n in range(1, DIGEST_OVER + 2)]
    sender = RecordingSender()
    store = WatchStore(storage, clock=clock)
    await store.command(parse("watch high"), **where("channel"))
    poller = WatchPoller(store, _feed(rows), sender, StoreLease(storage, seconds=30, clock=clock), interval_s=1,
                         demo=True, clock=clock)
    assert (await poller.poll()).posted == 1
    assert f"{DIGEST_OVER + 1} new incidents" in json.dumps(sender.posts[0])
    rows.append(snapshot(3, "High", status="Closed", created=rows[2].created, at=clock.tick(), modified=clock.now))
    assert (await poller.poll()).updated == 1
    [(activity_id, card)] = sender.updates
    assert activity_id == "activity-1" and "Closed" in json.dumps(card) and len(sender.posts) == 1


def test_a_stored_filter_that_no_longer_reads_matches_nothing_and_breaks_nothing() -> None:
    broken = Watch(WatchFilter({"min_severity": "Critical"}), "Alice", NOW - timedelta(minutes=1))
    assert not broken.wants(snapshot(1, "High"))


async def test_the_number_of_watching_conversations_is_bounded(monkeypatch) -> None:
    from bot.teams import watches

    monkeypatch.setattr(watches, "MAX_CONVERSATIONS", 2)
    store = WatchStore(MemoryStorage(), clock=lambda: NOW)
    for conversation in ("one", "two"):
        assert (await store.command(parse("watch high"), **where(conversation))).startswith("Watching")
    assert (await store.command(parse("watch medium"), **where("two"))).startswith("Watching")
    assert "already posts new incidents to 2 conversations" in await store.command(parse("watch high"),
                                                                                    **where("three"))
    assert [s.key for s in await store.subscribers()] == ["one", "two"]


async def test_making_and_stopping_a_watch_and_each_poll_are_audited(caplog) -> None:
    import logging

    from bot import audit

    caplog.set_level(logging.INFO, logger="bot.audit")
    storage = MemoryStorage()
    store = WatchStore(storage, clock=lambda: NOW)
    with audit.asking(audit.Asker("aad-alice", "Alice", "chat", "groupChat")):
        await store.command(parse("watch high open"), **where("chat"))
        await store.command(parse("unwatch"), **where("chat"))
    poller = WatchPoller(store, _feed([]), RecordingSender(), StoreLease(storage, seconds=30), interval_s=1,
                         demo=True, clock=lambda: NOW)

    async def reading(since: datetime) -> Sequence[Snapshot]:
        audit.record("read", tool="incident_changes")  # what AuditedSentinelClient records for the query
        return []

    poller.changes = reading
    await poller.poll()
    records = [r.audit for r in caplog.records if hasattr(r, "audit")]  # type: ignore[attr-defined]
    assert [(r["event"], r.get("actor")) for r in records] == [
        ("watch.created", "Alice"), ("watch.stopped", "Alice"), ("read", "watch poller")]
    assert records[0]["filter"] == {"min_severity": "High", "status": "open"}


async def test_a_deleted_card_is_not_updated_and_its_conversation_keeps_its_watches() -> None:
    from types import SimpleNamespace

    class NotFound(Exception):
        response = SimpleNamespace(status_code=404, headers={})

    class Deleted(RecordingSender):
        async def update(self, reference: dict[str, Any], activity_id: str, card: dict[str, Any]) -> None:
            raise NotFound("the message was deleted")

    storage = MemoryStorage()
    clock = Clock()
    store = WatchStore(storage, clock=clock)
    await store.command(parse("watch high"), **where("channel"))
    rows = [snapshot(1, "High", created=clock.now, at=clock.tick())]
    poller = WatchPoller(store, _feed(rows), Deleted(), StoreLease(storage, seconds=30, clock=clock), interval_s=1,
                         demo=True, clock=clock)
    await poller.poll()
    rows.append(snapshot(1, "High", status="Closed", created=rows[0].created, at=clock.tick(), modified=clock.now))
    report = await poller.poll()
    assert report.failed is None and report.updated == 0
    assert [s.key for s in await store.subscribers()] == ["channel"]


async def test_a_watch_posts_only_where_the_access_policy_still_admits_it() -> None:
    """Made in two channels; the administrator then allows only one (ALLOWED_CHANNELS): the other gets nothing."""
    from bot.teams.access import AccessPolicy, Where

    storage = MemoryStorage()
    clock = Clock()
    store = WatchStore(storage, clock=clock)
    for channel in ("19:war-room@thread.tacv2", "19:general@thread.tacv2"):
        await store.command(parse("watch high"), **where(channel + ";messageid=1"),
                            where=Where("tenant", "aad-alice", "channel", "19:soc@thread.tacv2", channel))
    sender = RecordingSender()
    poller = WatchPoller(store, _feed([snapshot(1, "High", created=clock.now, at=clock.tick())]), sender,
                         StoreLease(storage, seconds=30, clock=clock), interval_s=1, demo=True, clock=clock,
                         access=AccessPolicy(channels=frozenset({"19:war-room@thread.tacv2"})))
    assert (await poller.poll()).posted == 1
    assert [c for c, _ in sender.post_log] == ["19:war-room@thread.tacv2;messageid=1"]
