"""Live progress while a turn runs.

Teams facts used here come from Microsoft Learn: "Stream bot messages"
(learn.microsoft.com/microsoftteams/platform/bots/streaming-ux: 1:1 chats only, informative text of at
most 1,000 characters, a stream ends after 2 minutes, no streamSequence on the final message) and "Rate
limiting for bots" (learn.microsoft.com/microsoftteams/platform/bots/how-to/rate-limit: 429 and retries).

- A typing indicator at once (sent by the server before the turn even starts), except in channels: Teams
  shows none in a channel thread, and the Agents Playground's page fails on one there (its typing state
  knows chats and channels, not threads: the page restarts its websocket and drops the reply that follows).
- When the turn outlasts a short grace period (a tool loop, a slow query):
  - 1:1 chats: Teams streaming. Informative updates ("Querying incidents...") are typing activities with
    a ``streaminfo`` entity; the first one's id is the stream id; the answer closes the stream as a
    message with ``streamType: final``. If Teams refuses to stream, progress falls back to typing.
  - Group chats and channel threads: one status message, updated in place, replaced by the answer.
- At most one update per second per conversation (intermediate statuses are coalesced), and a 429 from
  the connector is retried after its Retry-After.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Generic, TypeVar

from botbuilder.core import TurnContext
from botbuilder.schema import Activity, ActivityTypes, Entity

from bot.teams.connectors import Unreachable

log = logging.getLogger(__name__)

MIN_UPDATE_INTERVAL_S = 1.0
PROGRESS_GRACE_S = 0.4  # a turn that takes longer gets streamed / status-message progress
MAX_INFORMATIVE_CHARS = 1000
MAX_STREAMED_CHARS = 8000  # the answer text shown while it streams (the final message has the whole answer)
STREAM_TIME_LIMIT_S = 100.0  # Teams ends a stream after 2 minutes; stop informative updates well before
MAX_RETRY_AFTER_S = 10.0


class StreamInfo(Entity):
    """The ``streaminfo`` entity of Teams streaming, with its fields declared so they are serialised."""

    _attribute_map: ClassVar[dict[str, dict[str, str]]] = {
        **Entity._attribute_map,
        "stream_id": {"key": "streamId", "type": "str"},
        "stream_type": {"key": "streamType", "type": "str"},
        "stream_sequence": {"key": "streamSequence", "type": "int"},
    }

    def __init__(self, *, stream_type: str, stream_sequence: int | None = None, stream_id: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(type="streaminfo", **kwargs)
        self.stream_type = stream_type
        self.stream_sequence = stream_sequence
        self.stream_id = stream_id


def shows_typing(activity: Activity) -> bool:
    """Whether a typing indicator belongs in this activity's conversation (not in channels: see above)."""
    conversation = activity.conversation
    return getattr(conversation, "conversation_type", None) != "channel"


def _status_of(error: BaseException) -> tuple[int | None, float | None]:
    """HTTP status and Retry-After of a connector error (msrest and aiohttp shapes)."""
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None) or getattr(response, "status", None)
    headers = getattr(response, "headers", None) or {}
    retry_after = None
    try:
        value = headers.get("Retry-After") if hasattr(headers, "get") else None
        retry_after = float(value) if value is not None else None
    except (TypeError, ValueError):
        retry_after = None
    return status, retry_after


def _not_delivered(what: str, error: BaseException) -> None:
    """A best-effort send failed: one line. An unreachable serviceUrl is only a debug line here, because the
    answer's delivery fails the same way and reports it once for the turn."""
    if isinstance(error, Unreachable):
        log.debug("%s not delivered: %s", what, error)
    else:
        log.info("%s not delivered: %s", what, type(error).__name__)


async def send_with_retry(call: Callable[[], Awaitable[Any]], *, retries: int = 2) -> Any:
    """Run a connector call; on 429 wait Retry-After (bounded) and try again."""
    for attempt in range(retries + 1):
        try:
            return await call()
        except Exception as error:  # connector errors come in several SDK shapes
            status, retry_after = _status_of(error)
            if status == 429 and attempt < retries:
                delay = min(retry_after if retry_after is not None else 1.0 * 2**attempt, MAX_RETRY_AFTER_S)
                log.info("connector throttled (429); retrying in %.1f s", delay)
                await asyncio.sleep(delay)
                continue
            raise
    raise AssertionError("unreachable")  # pragma: no cover


Update = TypeVar("Update")


class _Paced(Generic[Update]):
    """Status updates at most one per interval, the first only after a grace period, the latest always last.

    The grace keeps fast answers free of progress chatter: a command answered in 100 ms needs only the
    typing indicator. ``stop`` waits out the interval after a sent update, so the answer respects the
    rate too.
    """

    def __init__(self, send: Callable[[Update], Awaitable[None]], interval_s: float, first_after_s: float) -> None:
        self._send = send
        self._interval = interval_s
        self._next = time.monotonic() + first_after_s
        self._pending: Update | None = None
        self._flusher: asyncio.Task[None] | None = None
        self.sent = False

    async def push(self, status: Update) -> None:
        self._pending = status
        if self._flusher is None:
            wait = self._next - time.monotonic()
            if wait <= 0:
                await self._flush()
            else:
                self._flusher = asyncio.create_task(self._flush_after(wait))

    async def _flush_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self._flusher = None
        await self._flush()

    async def _flush(self) -> None:
        status, self._pending = self._pending, None
        if status is None:
            return
        self._next = time.monotonic() + self._interval
        try:
            await self._send(status)
            self.sent = True
        except Exception as error:  # noqa: BLE001 - progress is best effort; the answer still goes out
            _not_delivered("progress update", error)

    async def stop(self) -> None:
        """No more updates: drop a pending one; after a sent update, wait out the interval."""
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        self._pending = None
        wait = self._next - time.monotonic()
        if self.sent and wait > 0:
            await asyncio.sleep(wait)


class Progress:
    """Base: a typing indicator (unless one was already sent for this turn), then the answer."""

    def __init__(self, context: TurnContext, *, typing_sent: bool = False,
                 interval_s: float = MIN_UPDATE_INTERVAL_S, grace_s: float = PROGRESS_GRACE_S) -> None:
        self.context = context
        self.typing_sent = typing_sent
        self.interval_s = interval_s
        self.grace_s = grace_s

    async def start(self) -> None:
        if not self.typing_sent:
            await self._typing()

    async def update(self, status: str) -> None:
        return None

    async def finish(self, reply: Activity) -> str | None:
        """Send the answer; the id of the message that shows it (None when the channel gave none)."""
        response = await send_with_retry(lambda: self.context.send_activity(reply))
        return getattr(response, "id", None)

    async def close(self, reply: Activity) -> None:
        """The turn has nothing new to say (its answer is a card updated in place): ``reply`` goes out only to close
        progress that is showing (a stream, a status message); a typing indicator ends by itself."""
        if await self._stopped():
            await self.finish(reply)

    async def _stopped(self) -> bool:
        """Stop further updates; whether any progress was shown that only a message can close."""
        return False

    async def _typing(self) -> None:
        if not shows_typing(self.context.activity):
            return
        try:
            await send_with_retry(lambda: self.context.send_activity(Activity(type=ActivityTypes.typing)))
            self.typing_sent = True
        except Exception as error:  # noqa: BLE001
            _not_delivered("typing indicator", error)


class StreamingProgress(Progress):
    """1:1 chats: Teams streaming. Informative updates once the turn outlasts the grace period, then the
    answer's text as the model writes it (each update the whole text so far), then the final message."""

    def __init__(self, context: TurnContext, **options: Any) -> None:
        super().__init__(context, **options)
        self.stream_id: str | None = None
        self.refused = False
        self.streamed = ""  # the answer text shown so far: every later update must start with it
        self._sequence = 0
        self._started_at = time.monotonic()
        self._updates = _Paced(self._send, self.interval_s, self.grace_s)

    @property
    def _open(self) -> bool:
        return not self.refused and time.monotonic() - self._started_at <= STREAM_TIME_LIMIT_S

    async def update(self, status: str) -> None:
        if not self._open:
            await self._typing()  # keeps the indicator alive where streaming is not possible
            return
        if not self.streamed:  # once the answer streams, it is the progress
            await self._updates.push(("informative", status))

    async def text(self, so_far: str) -> None:
        """The answer's text so far. Teams wants each update to contain what was streamed before; an answer that
        does not (the model began again after a tool call) is left to the final message."""
        if self._open and so_far.startswith(self.streamed) and so_far != self.streamed:
            await self._updates.push(("streaming", so_far[:MAX_STREAMED_CHARS]))

    async def _send(self, update: tuple[str, str]) -> None:
        kind, value = update
        if kind == "streaming" and not value.startswith(self.streamed):
            return
        await self._stream(kind, value)
        if kind == "streaming":
            self.streamed = value

    async def finish(self, reply: Activity) -> str | None:
        await self._updates.stop()
        if self.stream_id is not None:
            # The final message carries no streamSequence (Microsoft Learn, "Stream bot messages").
            reply.entities = list(reply.entities or []) + [StreamInfo(stream_type="final", stream_id=self.stream_id)]
        return await super().finish(reply)

    async def _stopped(self) -> bool:
        await self._updates.stop()
        return self.stream_id is not None

    async def _stream(self, kind: str, value: str) -> None:
        self._sequence += 1
        info = StreamInfo(stream_type=kind, stream_sequence=self._sequence, stream_id=self.stream_id)
        text = value[:MAX_INFORMATIVE_CHARS] if kind == "informative" else value
        activity = Activity(type=ActivityTypes.typing, text=text, entities=[info])
        try:
            response = await send_with_retry(lambda: self.context.send_activity(activity))
        except Exception as error:  # e.g. 403 ContentStreamNotAllowed
            if isinstance(error, Unreachable):  # not a refusal: typing would not get through either
                _not_delivered("streaming update", error)
                self.refused = True
                return
            if self.stream_id is None:
                log.info("streaming refused (%s); falling back to typing", type(error).__name__)
                self.refused = True
                await self._typing()
                return
            raise
        if self.stream_id is None:
            self.stream_id = getattr(response, "id", None)
            if not self.stream_id:
                self.refused = True


class StatusMessageProgress(Progress):
    """Group chats and channel threads: one status message (once the turn outlasts the grace period),
    updated in place and finally replaced by the answer."""

    def __init__(self, context: TurnContext, **options: Any) -> None:
        super().__init__(context, **options)
        self.status_id: str | None = None
        self._updates = _Paced(self._show, self.interval_s, self.grace_s)

    async def update(self, status: str) -> None:
        await self._updates.push(status)

    async def finish(self, reply: Activity) -> str | None:
        await self._updates.stop()
        if self.status_id is None:
            return await super().finish(reply)
        reply.id = self.status_id
        try:
            await send_with_retry(lambda: self.context.update_activity(reply))
            return self.status_id
        except Unreachable:  # the fallbacks below would fail the same way
            raise
        except Exception as error:  # noqa: BLE001 - some clients only take text-only (or one-card) updates
            log.info("could not replace the status message with the whole answer (%s)", type(error).__name__)
        cards = reply.attachments or []
        text_only = Activity(type=ActivityTypes.message, id=self.status_id,
                             text=reply.text or ("Here is what I found:" if cards else "Done."))
        try:
            await send_with_retry(lambda: self.context.update_activity(text_only))
        except Unreachable:
            raise
        except Exception as error:  # noqa: BLE001 - last resort: the whole answer as a new message
            log.info("could not update the status message (%s); sending the answer anew", type(error).__name__)
            reply.id = None
            return await super().finish(reply)
        if not cards:
            return self.status_id
        follow_up = Activity(type=ActivityTypes.message, attachments=cards, attachment_layout=reply.attachment_layout)
        response = await send_with_retry(lambda: self.context.send_activity(follow_up))
        return getattr(response, "id", None)

    async def _stopped(self) -> bool:
        await self._updates.stop()
        return self.status_id is not None

    async def _show(self, status: str) -> None:
        if self.status_id is None:
            response = await send_with_retry(lambda: self.context.send_activity(
                Activity(type=ActivityTypes.message, text=f"Working on it: {status}")))
            self.status_id = getattr(response, "id", None)
            return
        activity = Activity(type=ActivityTypes.message, id=self.status_id, text=f"Working on it: {status}")
        await send_with_retry(lambda: self.context.update_activity(activity))


def progress_for(context: TurnContext, conversation_type: str | None, *, typing_sent: bool = False) -> Progress:
    if conversation_type == "personal" and context.activity.channel_id == "msteams":
        return StreamingProgress(context, typing_sent=typing_sent)
    if conversation_type in ("channel", "groupChat"):
        return StatusMessageProgress(context, typing_sent=typing_sent)
    return Progress(context, typing_sent=typing_sent)
