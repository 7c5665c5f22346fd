"""Watches on the Teams surface: kept in the bot's state store, polled, posted and updated proactively.

- :class:`WatchStore` keeps each conversation's watches with its conversation reference, an index of the
  conversations that have any, the poller's cursor, and what it posted (a record per card, and per incident
  the cards showing it), all as items of the state store (SQLite by default, Azure Blob with several instances).
- Only one instance polls: :class:`BlobLease` with Blob state (a blob lease: Azure keeps its time), else
  :class:`StoreLease`, an item of the store taken and renewed by conditional writes (the e_tag read), so two
  instances cannot both take it; one that dies stops renewing and another takes over when it expires.
- :class:`WatchPoller`: each interval, under the lease, ONE query for the incidents changed since the cursor,
  whatever the number of watches; ``bot.commands.watches.plan`` decides what to post and update; the
  :class:`Sender` posts and updates through the Bot Framework adapter (``continue_conversation``). The cursor
  moves only once everything of the poll is delivered (a failed post is tried again next time; what was
  posted is recorded first, so it is not posted twice); a failed query is one log line, and the next poll
  catches up from the same cursor.
- Triage on arrival: a new incident's card goes out at once saying its triage is coming; the poller then runs the
  ``Triager`` it was given (the entity investigation's ``triage``: main entities assessed, related open incidents),
  at most :data:`TRIAGE_BUDGET_S`, and updates that card in place. The triage is kept with the card's record, so
  later updates of the card (the incident changed) keep it; it never holds up a post or the poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from botbuilder.core import BotAdapter, Storage, TurnContext
from botbuilder.schema import ConversationReference

from bot import audit
from bot.cards.watches import watched_digest, watched_incident
from bot.commands.parser import Command
from bot.commands.watches import (
    MAX_WATCHES_PER_CONVERSATION,
    Cursor,
    Plan,
    Post,
    Posted,
    Snapshot,
    Subscriber,
    Update,
    Watch,
    plan,
    watch_filter,
)
from bot.investigation.models import Triage
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import ChangedIncident, QueryError
from bot.sentinel.params import InvalidParameter
from bot.sentinel.scheduler import Priority, query_priority
from bot.teams import replies
from bot.teams.access import AccessPolicy, Where
from bot.teams.connectors import OwnTurn
from bot.teams.progress import _status_of, send_with_retry

log = logging.getLogger(__name__)
Clock = Callable[[], datetime]
INDEX_KEY = "watches/index"
CURSOR_KEY = "watches/cursor"
LEASE_KEY = "watches/lease"
_CONFLICT_RETRIES = 5
POLLER_ASKER = audit.Asker(None, "watch poller", "", "poller")
# Conversations with watches, at most: what the poller records per posted incident (the cards showing it) stays
# well under the state store's item cap, and one eventful poll stays a few seconds.
MAX_CONVERSATIONS = 1000
SEND_CONCURRENCY = 8  # posts and updates in flight at once, to different conversations
TRIAGE_BUDGET_S = 20.0  # a triage slower than this is dropped (the card then says nothing more)
Triager = Callable[[int], Awaitable[Triage | None]]  # a new incident's number -> its triage (None: nothing to say)
_GONE = (403, 404)  # the bot was removed from the conversation: its posts can never be delivered


def _conversation_key(conversation_id: str) -> str:
    return f"watches/conversation/{conversation_id}"


def _incident_key(number: int) -> str:
    return f"watches/incident/{number}"


def _card_key(conversation_id: str, activity_id: str) -> str:
    return f"watches/card/{conversation_id}/{activity_id}"


# ---- the store ------------------------------------------------------------------------------------------------


class WatchStore:
    """Watches and the poller's records, as items of a botbuilder ``Storage`` (read-modify-write with e_tags)."""

    def __init__(self, storage: Storage, clock: Clock = lambda: datetime.now(UTC)) -> None:
        self.storage = storage
        self.clock = clock
        # Incident records as the lease holder last read or wrote them (only it writes them): the cards of a poll
        # add to them without reading each again.
        self._records: dict[str, dict[str, Any]] = {}

    async def command(self, command: Command, *, conversation_id: str, reference: ConversationReference,
                      user_name: str | None, user_aad_id: str | None, where: Where | None = None) -> str:
        """The reply to watch / watches / unwatch in a conversation."""
        if command.name == "watches":
            return self.describe(await self.watches(conversation_id))
        if command.name == "unwatch":
            return await self.unwatch(conversation_id, command.arguments.get("number"))
        try:
            checked = watch_filter(command.arguments, user_aad_id, user_name)
        except InvalidParameter as problem:
            return f"I could not make that watch: {problem}"
        watch = Watch(checked, user_name or "someone", self.clock(), user_aad_id,
                      dataclasses.asdict(where) if where is not None else {})
        return await self.add(conversation_id, reference, watch)

    async def add(self, conversation_id: str, reference: ConversationReference, watch: Watch) -> str:
        key = _conversation_key(conversation_id)
        watching = (await self._read(INDEX_KEY)).get("conversations", [])
        if conversation_id not in watching and len(watching) >= MAX_CONVERSATIONS:
            return (f"This bot already posts new incidents to {len(watching)} conversations, the most it keeps; "
                    'ask for one of them to "unwatch", or watch from one of those conversations.')
        answer = ""

        def change(item: dict[str, Any]) -> bool:
            nonlocal answer
            watches = [Watch.from_dict(w) for w in item.get("watches", [])]
            if any(w.filter.arguments == watch.filter.arguments for w in watches):
                answer = f'This conversation already watches for {watch.filter.label}. "watches" lists them.'
                return False
            if len(watches) >= MAX_WATCHES_PER_CONVERSATION:
                answer = (f"This conversation has {len(watches)} watches, the most it may have. "
                          '"unwatch N" stops one ("watches" lists them).')
                return False
            item["watches"] = [*item.get("watches", []), watch.to_dict()]
            item["reference"] = reference.serialize()
            answer = (f"Watching for {watch.filter.label}: new incidents that match are posted here as they "
                      'arrive. "watches" lists this conversation\'s watches; "unwatch" stops them.')
            return True

        if await self._change(key, change):
            await self._change(INDEX_KEY, lambda index: _add_to_index(index, conversation_id))
            audit.record("watch.created", filter=watch.filter.arguments)  # as the turn's analyst
        return answer

    async def unwatch(self, conversation_id: str, number: int | None) -> str:
        key = _conversation_key(conversation_id)
        answer = ""

        def change(item: dict[str, Any]) -> bool:
            nonlocal answer
            watches = list(item.get("watches", []))
            if not watches:
                answer = 'This conversation has no watches. "watch high" starts one.'
                return False
            if number is None:
                item["watches"] = []
                answer = f"Stopped {len(watches)} watch{'es' if len(watches) != 1 else ''} in this conversation."
                return True
            if not 1 <= number <= len(watches):
                answer = f'There is no watch {number} here. {self.describe([Watch.from_dict(w) for w in watches])}'
                return False
            stopped = Watch.from_dict(watches.pop(number - 1))
            item["watches"] = watches
            answer = f"Stopped watching for {stopped.filter.label}."
            return True

        if await self._change(key, change):
            audit.record("watch.stopped", conversation=conversation_id, number=number)
            if not (await self._read(key)).get("watches"):
                await self._change(INDEX_KEY, lambda index: _remove_from_index(index, conversation_id))
        return answer

    async def watches(self, conversation_id: str) -> list[Watch]:
        item = await self._read(_conversation_key(conversation_id))
        return [Watch.from_dict(w) for w in item.get("watches", [])]

    @staticmethod
    def describe(watches: Sequence[Watch]) -> str:
        if not watches:
            return 'This conversation has no watches. "watch high" (or any filter of "incidents") starts one.'
        return "Watches here:\n" + "\n".join(w.describe(n) for n, w in enumerate(watches, 1)) + \
            '\n"unwatch N" stops one, "unwatch" all.'

    async def subscribers(self) -> list[Subscriber]:
        """Every conversation with watches: one read of the index, one batched read of their items."""
        index = await self._read(INDEX_KEY)
        keys = [_conversation_key(c) for c in index.get("conversations", [])]
        items = await self.storage.read(keys) if keys else {}
        out = []
        for conversation_id in index.get("conversations", []):
            item = items.get(_conversation_key(conversation_id)) or {}
            try:
                watches = tuple(Watch.from_dict(w) for w in item.get("watches", []))
            except (KeyError, TypeError, ValueError):
                log.warning("skipping unreadable watches of one conversation")
                continue
            if watches and isinstance(item.get("reference"), dict):
                out.append(Subscriber(conversation_id, item["reference"], watches))
        return out

    async def cursor(self) -> Cursor:
        return Cursor.from_dict(await self._read(CURSOR_KEY))

    async def save_cursor(self, cursor: Cursor) -> None:
        await self.storage.write({CURSOR_KEY: cursor.to_dict()})

    async def posted(self, numbers: Sequence[int], *, polling: bool = False) -> dict[int, list[Posted]]:
        """The cards showing each of these incidents (two batched reads whatever their number). ``polling``: the
        poller's own read at the start of a poll, which its ``record_card`` calls then build on."""
        if not numbers:
            return {}
        records = await self.storage.read([_incident_key(n) for n in numbers])
        if polling:
            self._records = {k: dict(v) for k, v in records.items()}
        card_keys = sorted({k for r in records.values() for k in r.get("cards", [])})
        card_items = await self.storage.read(card_keys) if card_keys else {}
        out: dict[int, list[Posted]] = {}
        for number in numbers:
            for key in (records.get(_incident_key(number)) or {}).get("cards", []):
                item = card_items.get(key)
                if item:
                    out.setdefault(number, []).append(_posted(key, item))
        return out

    async def card(self, key: str) -> dict[str, Any]:
        return await self._read(key)

    async def record_card(self, key: str, item: dict[str, Any], numbers: Sequence[int]) -> None:
        """A posted (or updated) card, and for each incident it shows, that it shows it: one write (one transaction
        in SQLite). Only the lease holder writes these records, one card at a time, so no e_tag is needed."""
        changes = {key: {k: v for k, v in item.items() if k != "e_tag"}}
        missing = [_incident_key(n) for n in numbers if _incident_key(n) not in self._records]
        if missing:
            self._records |= {k: dict(v) for k, v in (await self.storage.read(missing)).items()}
        records = {}
        for number in numbers:
            record = dict(self._records.get(_incident_key(number)) or {})
            if _add_card(record, key):
                records[_incident_key(number)] = record
        await self.storage.write(changes | {k: v | {"e_tag": "*"} for k, v in records.items()})
        self._records |= records  # only once written

    async def _read(self, key: str) -> dict[str, Any]:
        return dict((await self.storage.read([key])).get(key) or {})

    async def _change(self, key: str, change: Callable[[dict[str, Any]], bool]) -> bool:
        """Read, change, write with the e_tag read; again on a conflict. False when ``change`` wrote nothing."""
        for _ in range(_CONFLICT_RETRIES):
            item = await self._read(key)
            if not change(item):
                return False
            item.setdefault("e_tag", "*")
            try:
                await self.storage.write({key: item})
                return True
            except KeyError:  # written by someone else since we read it: read again
                continue
        raise RuntimeError(f"{key} kept changing under us; try again")


def _add_to_index(index: dict[str, Any], conversation_id: str) -> bool:
    conversations = list(index.get("conversations", []))
    if conversation_id in conversations:
        return False
    index["conversations"] = [*conversations, conversation_id]
    return True


def _remove_from_index(index: dict[str, Any], conversation_id: str) -> bool:
    conversations = list(index.get("conversations", []))
    if conversation_id not in conversations:
        return False
    index["conversations"] = [c for c in conversations if c != conversation_id]
    return True


def _add_card(record: dict[str, Any], key: str) -> bool:
    if key in record.get("cards", []):
        return False
    record["cards"] = [*record.get("cards", []), key]
    return True


def _posted(key: str, item: dict[str, Any]) -> Posted:
    return Posted(key, str(item.get("conversation", "")),
                  tuple(Snapshot.from_dict(s) for s in item.get("incidents", [])))


# ---- the lease ------------------------------------------------------------------------------------------------


class StoreLease:
    """Who polls: an item holding the holder's id and when its hold expires, changed only by a conditional write
    with the e_tag read (a conflict means someone else wrote first: they hold it)."""

    def __init__(self, storage: Storage, *, seconds: float, holder: str | None = None,
                 clock: Clock = lambda: datetime.now(UTC), key: str = LEASE_KEY) -> None:
        self.storage = storage
        self.seconds = seconds
        self.holder = holder or uuid.uuid4().hex
        self.clock = clock
        self.key = key

    async def hold(self) -> bool:
        """Take the lease, or renew it if ours: True when this instance holds it for the next ``seconds``."""
        item = (await self.storage.read([self.key])).get(self.key)
        if item is None:
            # Created free first (the same by whoever writes it), so the hold below is always conditional.
            await self.storage.write({self.key: {"holder": "", "until": ""}})
            item = (await self.storage.read([self.key])).get(self.key) or {}
        now = self.clock()
        until = item.get("until") or ""
        if item.get("holder") not in ("", self.holder) and until > now.isoformat():
            return False
        taken = {"holder": self.holder, "until": (now + timedelta(seconds=self.seconds)).isoformat(),
                 "e_tag": item.get("e_tag") or "*"}
        try:
            await self.storage.write({self.key: taken})
        except KeyError:
            return False
        return True

    async def release(self) -> None:
        item = (await self.storage.read([self.key])).get(self.key)
        if item and item.get("holder") == self.holder:
            with contextlib.suppress(KeyError):
                await self.storage.write({self.key: {"holder": "", "until": "", "e_tag": item.get("e_tag") or "*"}})


class BlobLease:
    """With Azure Blob state: a blob lease on the poller's lock blob in the state container. Azure keeps the lease's
    time (60 s, its longest finite lease; renewed at each poll and while one runs), so the instances' clocks do not
    matter; a lease that lapses between polls is taken again by whichever instance polls next."""

    seconds = 60.0

    def __init__(self, container: Any, name: str = "watches-poller.lock") -> None:
        self.container = container
        self.blob = container.get_blob_client(name)
        self._lease: Any = None

    async def hold(self) -> bool:
        if self._lease is not None:
            try:
                await self._lease.renew()
                return True
            except Exception:  # noqa: BLE001 - it lapsed and someone took it, or the blob went: acquire anew
                self._lease = None
        for _ in range(2):
            try:
                self._lease = await self.blob.acquire_lease(lease_duration=int(self.seconds))
                return True
            except Exception as error:
                status = getattr(error, "status_code", None)
                if status == 409:  # another instance holds it
                    return False
                if status != 404:
                    raise
            await self._create()  # the first poll ever: the container or the lock blob does not exist yet
        return False

    async def _create(self) -> None:
        for create in (self.container.create_container, lambda: self.blob.upload_blob(b"", overwrite=False)):
            try:
                await create()
            except Exception as error:
                if getattr(error, "status_code", None) != 409:  # 409: it exists already
                    raise

    async def release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            with contextlib.suppress(Exception):
                await lease.release()


class Lease(Protocol):
    seconds: float

    async def hold(self) -> bool: ...

    async def release(self) -> None: ...


# ---- sending --------------------------------------------------------------------------------------------------


class Sender(Protocol):
    async def post(self, reference: dict[str, Any], card: dict[str, Any]) -> str: ...

    async def update(self, reference: dict[str, Any], activity_id: str, card: dict[str, Any]) -> None: ...


class AdapterSender:
    """Proactive messages through the Bot Framework adapter, as the bot (its app id), to a stored reference."""

    def __init__(self, adapter: BotAdapter, app_id: str) -> None:
        self.adapter = adapter
        self.app_id = app_id

    async def post(self, reference: dict[str, Any], card: dict[str, Any]) -> str:
        """The posted card's activity id; raises what the connector answered when it could not be posted (the poller
        then keeps it for the next poll, or stops the conversation's watches when the bot was removed)."""
        sent: list[str] = []

        async def send(context: TurnContext) -> None:
            response = await send_with_retry(lambda: context.send_activity(replies.message(card_list=[card])))
            sent.append(str(getattr(response, "id", "") or ""))

        await self._continue(reference, send)
        return sent[0] if sent else ""

    async def update(self, reference: dict[str, Any], activity_id: str, card: dict[str, Any]) -> None:
        async def send(context: TurnContext) -> None:
            activity = replies.message(card_list=[card])
            activity.id = activity_id
            await send_with_retry(lambda: context.update_activity(activity))

        await self._continue(reference, send)

    async def _continue(self, reference: dict[str, Any], send: Callable[[TurnContext], Awaitable[None]]) -> None:
        # The adapter would hand a failed send to its on_turn_error and return as if it went out: OwnTurn keeps it.
        turn = OwnTurn(send)
        await self.adapter.continue_conversation(ConversationReference().deserialize(reference), turn, self.app_id)
        turn.raise_kept()


# ---- the poller -----------------------------------------------------------------------------------------------

ChangeFeed = Callable[[datetime], Awaitable[Sequence[Snapshot]]]  # incidents changed since; raises when it cannot


class FeedError(Exception):
    """The changed incidents could not be read (Log Analytics' answer, as the data layer says it)."""


def sentinel_feed(sentinel: SentinelClient) -> ChangeFeed:
    """The change feed of the workspace: ``incident_changes`` (one query, after analysts' queries, before triage's
    in the identity's budget), as snapshots."""

    async def changes(since: datetime) -> list[Snapshot]:
        with query_priority(Priority.WATCH):
            result = await sentinel.incident_changes(since)
        if isinstance(result, QueryError):
            raise FeedError(f"{result.code}: {result.detail or result.message}")
        return [Snapshot.of(record) for record in result.records if isinstance(record, ChangedIncident)]

    return changes


@dataclass
class PollReport:
    """What one poll did (for logs, tests and the benchmark)."""

    polled: bool = False  # False: another instance holds the lease
    queries: int = 0
    changed: int = 0
    posted: int = 0  # cards posted (a digest counts once)
    updated: int = 0
    failed: str | None = None  # why the poll could not read or deliver everything (the cursor stayed)
    seconds: float = 0.0


class WatchPoller:
    def __init__(self, store: WatchStore, changes: ChangeFeed, sender: Sender, lease: Lease, *,
                 interval_s: float, demo: bool, changes_buttons: bool = False,
                 clock: Clock = lambda: datetime.now(UTC), access: AccessPolicy | None = None,
                 triage: Triager | None = None) -> None:
        self.store = store
        self.triage = triage
        self.triaging: set[asyncio.Task[None]] = set()  # the triages under way (after their cards were posted)
        self.access = access
        self.changes = changes
        self.sender = sender
        self.lease = lease
        self.interval_s = interval_s
        self.demo = demo
        self.changes_buttons = changes_buttons
        self.clock = clock
        self._stop = asyncio.Event()
        self.polls = 0
        # Cards go to several conversations at once (each conversation gets at most one per poll, or a digest);
        # the records of what was posted are written one card at a time.
        self._sending = asyncio.Semaphore(SEND_CONCURRENCY)
        self._recording = asyncio.Lock()

    def stop(self) -> None:
        self._stop.set()
        for task in list(self.triaging):
            task.cancel()

    async def run(self) -> None:
        """Poll every interval until stopped; nothing a poll raises stops the loop."""
        self._stop = asyncio.Event()
        try:
            while not self._stop.is_set():
                try:
                    await self.poll()
                except Exception as error:  # noqa: BLE001 - one line; the next poll tries again
                    log.warning("watch poll failed (%s: %s); trying again in %.0f s", type(error).__name__, error,
                                self.interval_s)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.interval_s)
        finally:
            with contextlib.suppress(Exception):
                await self.lease.release()

    async def poll(self) -> PollReport:
        """One poll under the lease: the changed incidents, then what they mean for every watch."""
        started = time.perf_counter()
        report = PollReport()
        if not await self.lease.hold():
            return report
        report.polled = True
        self.polls += 1
        renewing = asyncio.ensure_future(self._renew())
        try:
            with audit.asking(POLLER_ASKER):  # its one read per poll is audited as the poller's
                await self._poll(report)
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await renewing
            report.seconds = time.perf_counter() - started
        return report

    async def _renew(self) -> None:
        """Keep the lease while a poll runs longer than a third of it."""
        while True:
            await asyncio.sleep(self.lease.seconds / 3)
            await self.lease.hold()

    async def _poll(self, report: PollReport) -> None:
        cursor = await self.store.cursor()
        now = self.clock()
        if cursor.at is None:  # the first poll ever: from now on (kept, so a failing first query misses nothing)
            cursor.at = now
            await self.store.save_cursor(cursor)
        report.queries += 1
        try:
            rows = await self.changes(cursor.since(now))
        except Exception as error:  # noqa: BLE001 - Log Analytics down or throttled: the cursor stays
            report.failed = f"query: {error}"
            log.warning("watch poll: could not read changed incidents (%s); the next poll catches up",
                        str(error)[:200] or type(error).__name__)
            return
        fresh = cursor.fresh(rows)
        report.changed = len(fresh)
        if not fresh:
            cursor.advance(rows, now)
            await self.store.save_cursor(cursor)
            return
        subscribers = await self.admitted(await self.store.subscribers())
        todo = plan(fresh, subscribers, await self.store.posted([i.number for i in fresh], polling=True))
        delivered = await self._deliver(todo, report)
        if delivered:
            cursor.advance(fresh, now)
            await self.store.save_cursor(cursor)

    async def admitted(self, subscribers: Sequence[Subscriber]) -> list[Subscriber]:
        """The watches whose place the access policy still admits (tenant, conversation type, team, channel, and
        their maker as a reader), checked at each poll with changes: a watch made where the bot may no longer
        answer posts nothing there."""
        if self.access is None:
            return list(subscribers)
        decided: dict[tuple[Any, ...], bool] = {}
        out = []
        for subscriber in subscribers:
            kept = []
            for watch in subscriber.watches:
                w = watch.where
                where = Where(w.get("tenant_id"), w.get("object_id"), w.get("conversation_type") or "personal",
                              w.get("team_id"), w.get("channel_id"))
                key = dataclasses.astuple(where)
                if key not in decided:  # a watch kept from before places were recorded is admitted
                    decided[key] = not w or await self.access.refusal(where) is None
                if decided[key]:
                    kept.append(watch)
                else:
                    log.info("watch: not posting to %s, where the access policy no longer admits it", subscriber.key)
            if kept:
                out.append(dataclasses.replace(subscriber, watches=tuple(kept)))
        return out

    async def _deliver(self, todo: Plan, report: PollReport) -> bool:
        """Post and update; True when nothing is left to try again (a removed bot's posts never will be)."""
        attempts = [self._attempt(self._update, update, report) for update in todo.updates]
        attempts += [self._attempt(self._post, post, report) for post in todo.posts]
        return all(await asyncio.gather(*attempts))

    async def _attempt(self, action: Callable[[Any, PollReport], Awaitable[None]], item: Post | Update,
                       report: PollReport) -> bool:
        try:
            async with self._sending:
                await action(item, report)
            return True
        except Exception as error:  # noqa: BLE001 - one conversation's failure must not stop the others
            status, _ = _status_of(error)
            where = item.conversation if isinstance(item, Post) else item.card.conversation
            if status in _GONE and isinstance(item, Update):  # that card was deleted: nothing left to update
                log.info("watch: a posted card in %s is gone (HTTP %s); not updated", where, status)
                return True
            if status in _GONE:
                log.warning("watch: conversation %s refuses the bot's messages (HTTP %s): its watches are stopped",
                            where, status)
                with contextlib.suppress(Exception):
                    await self.store.unwatch(where, None)
                return True
            report.failed = f"delivery: {type(error).__name__}"
            log.warning("watch: could not deliver to %s (%s); trying again next poll", where,
                        type(error).__name__)
            return False

    async def _post(self, post: Post, report: PollReport) -> None:
        triaged = self._triaged(post.incidents)
        card = self.card(post.incidents, post.label, pending=triaged)
        activity_id = await self.sender.post(post.reference, card)
        item = {"conversation": post.conversation, "reference": post.reference, "activity_id": activity_id,
                "label": post.label, "incidents": [i.to_dict() for i in post.incidents]}
        key = _card_key(post.conversation, activity_id or uuid.uuid4().hex)
        async with self._recording:
            await self.store.record_card(key, item, [i.number for i in post.incidents])
        report.posted += 1
        if triaged and activity_id:  # after the post, never before it: the card is updated when the triage is done
            task = asyncio.ensure_future(self._triage_card(key, post.incidents[0].number))
            self.triaging.add(task)
            task.add_done_callback(self.triaging.discard)

    def _triaged(self, incidents: Sequence[Snapshot]) -> bool:
        """A single new incident, still open, gets a triage (a digest or a closed one does not)."""
        return self.triage is not None and len(incidents) == 1 and \
            incidents[0].incident().status.strip().lower() != "closed"

    async def _triage_card(self, key: str, number: int) -> None:
        """Run the triage (bounded), then show it on the posted card and keep it with the card's record."""
        assert self.triage is not None
        started = time.perf_counter()
        try:
            found = await asyncio.wait_for(self.triage(number), TRIAGE_BUDGET_S)
        except Exception as error:  # noqa: BLE001 - includes the timeout: the card is shown without a triage
            log.warning("watch: triage of incident %s failed (%s)", number, type(error).__name__)
            found = None
        try:
            async with self._recording:
                item = await self.store.card(key)
                if found is not None:
                    item["triage"] = found.to_dict()
                item["triaged"] = True
                await self.store.record_card(key, item, ())
            snapshots = [Snapshot.from_dict(i) for i in item.get("incidents") or []]
            card = self.card(snapshots, str(item.get("label") or ""), triage=found)
            await self.sender.update(item["reference"], str(item["activity_id"]), card)
            log.info("watch: incident %s triaged (%s) and its card updated %.2f s after the post", number,
                     found.level.value if found else "nothing to add", time.perf_counter() - started)
        except Exception as error:  # noqa: BLE001 - the card stays as posted
            log.warning("watch: could not show incident %s's triage (%s)", number, type(error).__name__)

    async def _update(self, update: Update, report: PollReport) -> None:
        item = await self.store.card(update.card.key)
        if not item.get("activity_id"):
            return
        card = self.card(update.incidents, str(item.get("label") or ""), triage=Triage.from_dict(item.get("triage")),
                         pending=self._triaged(update.incidents) and not item.get("triaged"))
        await self.sender.update(item["reference"], str(item["activity_id"]), card)
        async with self._recording:  # a triage recorded meanwhile stays
            item = await self.store.card(update.card.key) | {"incidents": [i.to_dict() for i in update.incidents]}
            await self.store.record_card(update.card.key, item, ())
        report.updated += 1

    def card(self, incidents: Sequence[Snapshot], label: str, *, triage: Triage | None = None,
             pending: bool = False) -> dict[str, Any]:
        now = self.clock()
        if len(incidents) == 1:
            return watched_incident(incidents[0].incident(), watch=label, now=now, demo=self.demo,
                                    changes=self.changes_buttons, triage=triage, triage_pending=pending)
        return watched_digest([i.incident() for i in incidents], watch=label, now=now, demo=self.demo)

