"""Durable turns on Azure Storage (TURN_QUEUE=azure, several instances): a queue of turns, and per-conversation
leases, numbers and markers in blobs.

The web front checks an activity, gives it the next number of its conversation (:meth:`AzureTurnQueue.number`, the
offset of a one-byte append to the conversation's counter blob) and puts it on the queue
(:meth:`AzureTurnQueue.put`). Workers take turns with a visibility timeout (:meth:`AzureTurnQueue.take`) and delete each
once it is answered, so a turn whose worker dies is delivered again. For one conversation, a worker holds the
blob lease of its lock blob while it checks and runs a turn (:class:`Lease`), and runs only the turn whose
number is the lock blob's ``next``: so a conversation's turns run one at a time, in arrival order, across
instances. A repeated delivery of an activity is recognised by a marker blob created only if none exists
(``If-None-Match: *``), keyed by conversation and activity id, holding the queue message id of the delivery that
claimed it; a marker older than :data:`MARKER_TTL_S` no longer counts (the ARM template's lifecycle rule also
deletes old ones).

No client clock decides anything (issue 28): leases and visibility timeouts are timed by Storage; a write under a
lease carries its lease id, so Storage refuses it once the lease was lost (:class:`~bot.turns.contract.LeaseLost`);
a deletion or update carries the message's pop receipt, refused once the message was taken again; and a marker's
age is its Last-Modified against the Date of Storage's own answer, not this machine's time.

Clients reach Storage with the bot's identity (a token credential and the account URLs); a connection
string is accepted for local emulators (config.py refuses any other). Every client lives on the event loop
that created it: the front and each worker process build their own :class:`AzureTurnQueue`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from email.utils import parsedate_to_datetime
from typing import Any

from azure.storage.blob.aio import BlobClient, BlobLeaseClient, BlobServiceClient
from azure.storage.queue.aio import QueueClient

from bot.turns.contract import (
    LEASE_S,
    MARKER_TTL_S,
    VISIBILITY_S,
    ConversationLease,
    Envelope,
    LeaseLost,
    LockState,
    RenewedLease,
    Taken,
    TurnQueueError,
)

log = logging.getLogger(__name__)

NUMBER_ATTEMPTS = 5  # tries at the conversation counter (creating it, moving to its next blob) before giving up
NUMBERS_PER_BLOB = 50_000  # Azure's limit on the blocks of one append blob: one block per turn number
MAX_REMEMBERED_SERIES = 10_000  # conversations whose current counter blob a front remembers


def _status(error: BaseException) -> int | None:
    return getattr(error, "status_code", None)


def _error_code(error: BaseException) -> str:
    return str(getattr(error, "error_code", "") or "")


def _age_s(modified: Any, dates: list[str]) -> float:
    """Seconds from a blob's Last-Modified to the Date of Storage's answer (both Storage's clock); 0 when unknown."""
    try:
        return (parsedate_to_datetime(dates[-1]) - modified).total_seconds()
    except (IndexError, TypeError, ValueError):
        return 0.0


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:40]


class Lease(RenewedLease):
    """A held lease on a conversation's lock blob."""

    def __init__(self, blob: BlobClient, lease: BlobLeaseClient) -> None:
        self.blob = blob
        self.lease = lease
        super().__init__()

    async def _renew(self) -> bool:
        try:
            await self.lease.renew()
        except Exception as error:
            if _status(error) in (409, 412):  # another lease on the blob now: this one is gone
                return False
            raise
        return True

    async def _release(self) -> None:
        await self.lease.release()

    async def read(self) -> LockState:
        try:
            stream = await self.blob.download_blob(lease=self.lease)
            return LockState.loads(await stream.readall())
        except Exception as error:
            raise self._lost(error) from error

    async def write(self, state: LockState) -> None:
        try:
            await self.blob.upload_blob(state.dumps(), overwrite=True, lease=self.lease)
        except Exception as error:
            raise self._lost(error) from error

    def _lost(self, error: Exception) -> Exception:
        """Storage refuses the lease id once another worker acquired the blob's lease (409/412): LeaseLost."""
        if _status(error) not in (409, 412):
            return error
        self.lost = True
        return LeaseLost(f"the conversation's lease expired and was taken by another worker ({_error_code(error)})")


class AzureTurnQueue:
    """The queue of turns, its poison queue, and the container of per-conversation blobs."""

    poll_max_s = 1.0  # an idle worker's look is a billed request

    def __init__(self, queue: QueueClient, poison: QueueClient, blobs: BlobServiceClient, container: str,
                 credential: Any = None) -> None:
        self.queue = queue
        self.poison = poison
        self._blobs = blobs
        self.container = blobs.get_container_client(container)
        self._credential = credential  # this queue's own: an async credential is bound to its loop too
        self._series: OrderedDict[str, int] = OrderedDict()  # conversation digest -> its counter blob in use

    @classmethod
    def open(cls, *, queue_name: str, container: str, queue_account_url: str | None = None,
             blob_account_url: str | None = None, credential: Any = None,
             connection_string: str | None = None, **options: Any) -> AzureTurnQueue:
        """With the account URLs and a token credential (Azure), or a connection string (local emulators);
        ``options`` go to every client (e.g. ``connection_verify``: the CA of an emulator served over HTTPS)."""
        if connection_string:
            queues: Any = QueueClient  # the SDK's own type hints give this classmethod the sync client's type
            return cls(queues.from_connection_string(connection_string, queue_name, **options),
                       queues.from_connection_string(connection_string, f"{queue_name}-poison", **options),
                       BlobServiceClient.from_connection_string(connection_string, **options), container)
        if not (queue_account_url and blob_account_url and credential is not None):
            raise ValueError("durable turns need the queue and blob account URLs and a credential, or a "
                             "connection string for a local emulator")
        return cls(QueueClient(queue_account_url, queue_name, credential=credential, **options),
                   QueueClient(queue_account_url, f"{queue_name}-poison", credential=credential, **options),
                   BlobServiceClient(blob_account_url, credential=credential, **options), container, credential)

    async def ensure(self) -> None:
        """Create the queues and the container when missing (the ARM template creates them in Azure)."""
        for create in (self.queue.create_queue, self.poison.create_queue, self.container.create_container):
            try:
                await create()
            except Exception as error:
                if _status(error) not in (204, 409):  # already there (a queue answers 204, a container 409)
                    raise TurnQueueError(f"cannot create the turn queue or its container ({_status(error)}): "
                                         "check the account URLs and the bot identity's data roles") from error

    async def waiting(self) -> int:
        return int((await self.queue.get_queue_properties()).approximate_message_count or 0)

    async def close(self) -> None:
        for client in (self.queue, self.poison, self._blobs, self._credential):
            if client is not None:
                await client.close()

    # ---- the front ----------------------------------------------------------------------------------------

    async def number(self, conversation_id: str) -> int:
        """The conversation's next turn number, taken for good in one request: the offset at which a one-byte block
        lands on the conversation's append blob (Storage appends atomically, so concurrent fronts get distinct,
        dense numbers). An append blob takes at most NUMBERS_PER_BLOB blocks; the next blob carries on."""
        digest = _digest(conversation_id)
        series = self._series.get(digest, 0)
        for _ in range(NUMBER_ATTEMPTS):
            blob = self.container.get_blob_client(f"seq/{digest}/{series}")
            try:
                appended = await blob.append_block(b"\0")
            except Exception as error:
                if _status(error) == 404:  # the conversation's first turn (or first of this series)
                    await self._create_series(blob)
                    continue
                if _status(error) == 409 and "blockcountexceedslimit" in _error_code(error).lower().replace("_", ""):
                    series += 1
                    continue
                raise
            self._series[digest] = series
            while len(self._series) > MAX_REMEMBERED_SERIES:
                self._series.popitem(last=False)
            return series * NUMBERS_PER_BLOB + int(appended["blob_append_offset"])
        raise TurnQueueError("the conversation's turn counter could not be advanced; Teams will retry")

    @staticmethod
    async def _create_series(blob: BlobClient) -> None:
        try:
            await blob.create_append_blob(if_none_match="*")  # never over another front's numbers
        except Exception as error:
            if _status(error) != 409:
                raise

    async def put(self, envelope: Envelope) -> None:
        await self.queue.send_message(envelope.encode())

    async def enqueue(self, conversation_id: str, activity_id: str, activity: dict[str, Any],
                      auth: dict[str, Any], turn: dict[str, Any] | None = None) -> int:
        number = await self.number(conversation_id)
        await self.put(Envelope(conversation_id, activity_id, number, activity, auth, turn))
        return number

    # ---- workers ------------------------------------------------------------------------------------------

    async def take(self, count: int) -> list[Taken]:
        taken: list[Taken] = []
        messages: AsyncIterator[Any] = self.queue.receive_messages(
            messages_per_page=count, max_messages=count, visibility_timeout=VISIBILITY_S)
        async for message in messages:
            try:
                taken.append(Taken(message, Envelope.decode(message.content)))
            except ValueError as error:
                taken.append(Taken(message, None, str(error)))
        return taken

    async def keep(self, taken: Taken, seconds: int = VISIBILITY_S) -> None:
        """Keep a taken message hidden ``seconds`` more (a running turn), or show it again that soon (a deferral)."""
        async with taken.guard:
            taken.message = await self.queue.update_message(taken.message, visibility_timeout=seconds)

    async def done(self, taken: Taken, lease: ConversationLease | None = None, state: LockState | None = None) -> None:
        if lease is not None and state is not None:
            await lease.write(state)
        async with taken.guard:
            try:
                await self.queue.delete_message(taken.message)
            except Exception as error:
                if _status(error) != 404:  # already gone (its visibility lapsed and another worker finished it)
                    raise

    async def move_aside(self, taken: Taken, reason: str) -> None:
        """Put a message that cannot be answered on the poison queue, with why, and take it off the turn queue."""
        content = taken.message.content
        await self.poison.send_message(json.dumps({"reason": reason, "deliveries": taken.deliveries,
                                                   "content": content if isinstance(content, str) else None}))
        await self.done(taken)

    async def lease(self, conversation_id: str) -> Lease | None:
        """The conversation's lease, or None when another worker holds it."""
        blob = self.container.get_blob_client(f"lock/{_digest(conversation_id)}")
        try:
            return Lease(blob, await blob.acquire_lease(lease_duration=LEASE_S))
        except Exception as error:
            if _status(error) == 409:
                return None
            if _status(error) != 404:
                raise
        try:
            await blob.upload_blob(LockState().dumps(), overwrite=False)
        except Exception as error:
            if _status(error) != 409:
                raise
        try:
            return Lease(blob, await blob.acquire_lease(lease_duration=LEASE_S))
        except Exception as error:
            if _status(error) == 409:
                return None
            raise

    async def claim(self, envelope: Envelope, message_id: str, lease: ConversationLease | None = None,
                    state: LockState | None = None) -> bool:
        """True when this delivery may answer the activity: its marker is new, already this message's (a
        redelivery after a crash), or older than MARKER_TTL_S by Storage's clock. False for a repeat of an answered
        activity. (A marker blob cannot be conditioned on the lock blob's lease: the worker writes the lock state
        under the lease just before, and again after the turn.)"""
        if lease is not None and state is not None:
            await lease.write(state)
        if lease is not None and lease.lost:
            raise LeaseLost("the conversation's lease could not be renewed")
        if not envelope.activity_id:
            return True  # nothing to recognise a repeat by (Teams gives every message an id)
        blob = self.container.get_blob_client(
            f"seen/{_digest(envelope.conversation_id)}/{_digest(envelope.activity_id)}")
        try:
            await blob.upload_blob(message_id.encode(), overwrite=False)
            return True
        except Exception as error:
            if _status(error) != 409:
                raise
        dates: list[str] = []  # the Date header of Storage's answer: its time now
        stream = await blob.download_blob(raw_response_hook=lambda response: dates.append(
            str(response.http_response.headers.get("Date") or "")))
        if (await stream.readall()).decode(errors="replace") == message_id:
            return True
        modified = stream.properties.last_modified
        if modified is not None and _age_s(modified, dates) > MARKER_TTL_S:
            await blob.upload_blob(message_id.encode(), overwrite=True)
            return True
        return False
