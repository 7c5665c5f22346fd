"""Live progress while a turn runs (docs/teams-streaming.md, docs/teams-limits.md).

- Always a typing indicator at once.
- 1:1 chats: Teams streaming. Informative updates ("Querying incidents...") are typing activities with a
  ``streaminfo`` entity; the first one's id is the stream id; the answer closes the stream as a message
  with ``streamType: final``. If Teams refuses to stream, progress falls back to the typing indicator.
- Group chats and channel threads: one status message, updated in place, finally replaced by the answer.
- At most one update per second per conversation (intermediate statuses are coalesced), and a 429 from
  the connector is retried after its Retry-After.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from botbuilder.core import TurnContext
from botbuilder.schema import Activity, ActivityTypes, Entity

log = logging.getLogger(__name__)

MIN_UPDATE_INTERVAL_S = 1.0
MAX_INFORMATIVE_CHARS = 1000
STREAM_TIME_LIMIT_S = 100.0  # Teams ends a stream after 2 minutes; stop informative updates well before
MAX_RETRY_AFTER_S = 10.0


class StreamInfo(Entity):
    """The ``streaminfo`` entity of Teams streaming, with its fields declared so they are serialised."""

    _attribute_map = {
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


class ConnectorRefused(Exception):
    """The connector rejected a send for a reason other than throttling."""


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


async def send_with_retry(call: Callable[[], Awaitable[Any]], *, retries: int = 2) -> Any:
    """Run a connector call; on 429 wait Retry-After (bounded) and try again."""
    for attempt in range(retries + 1):
        try:
            return await call()
        except Exception as error:  # noqa: BLE001 - connector errors come in several SDK shapes
            status, retry_after = _status_of(error)
            if status == 429 and attempt < retries:
                delay = min(retry_after if retry_after is not None else 1.0 * 2**attempt, MAX_RETRY_AFTER_S)
                log.info("connector throttled (429); retrying in %.1f s", delay)
                await asyncio.sleep(delay)
                continue
            raise
    raise AssertionError("unreachable")  # pragma: no cover


class _Throttled:
    """Coalesces status updates to at most one per interval; the latest status always gets out."""

    def __init__(self, send: Callable[[str], Awaitable[None]], interval_s: float) -> None:
        self._send = send
        self._interval = interval_s
        self._last = 0.0
        self._pending: str | None = None
        self._flusher: asyncio.Task[None] | None = None

    async def push(self, status: str) -> None:
        wait = self._last + self._interval - time.monotonic()
        if wait <= 0 and self._flusher is None:
            await self._emit(status)
            return
        self._pending = status
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush_after(max(wait, 0.0)))

    async def _flush_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        status, self._pending = self._pending, None
        self._flusher = None
        if status is not None:
            await self._emit(status)

    async def _emit(self, status: str) -> None:
        self._last = time.monotonic()
        try:
            await self._send(status)
        except Exception as error:  # noqa: BLE001 - progress is best effort; the answer still goes out
            log.info("progress update not delivered: %s", type(error).__name__)

    async def stop(self) -> None:
        """Cancel a pending update and wait out the interval, so the next send respects the rate."""
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        wait = self._last + self._interval - time.monotonic()
        if self._last and wait > 0:
            await asyncio.sleep(wait)


class Progress:
    """Base: a typing indicator, then the answer as a new message."""

    def __init__(self, context: TurnContext, interval_s: float = MIN_UPDATE_INTERVAL_S) -> None:
        self.context = context
        self.interval_s = interval_s
        self.first_feedback_at: float | None = None

    async def start(self) -> None:
        await self._typing()

    async def update(self, status: str) -> None:
        return None

    async def finish(self, reply: Activity) -> None:
        await send_with_retry(lambda: self.context.send_activity(reply))

    async def _typing(self) -> None:
        try:
            await send_with_retry(lambda: self.context.send_activity(Activity(type=ActivityTypes.typing)))
            self.first_feedback_at = self.first_feedback_at or time.monotonic()
        except Exception as error:  # noqa: BLE001
            log.info("typing indicator not delivered: %s", type(error).__name__)


class StreamingProgress(Progress):
    """1:1 chats: Teams streaming with informative updates."""

    def __init__(self, context: TurnContext, interval_s: float = MIN_UPDATE_INTERVAL_S) -> None:
        super().__init__(context, interval_s)
        self.stream_id: str | None = None
        self._sequence = 0
        self._started_at = 0.0
        self._updates = _Throttled(self._informative, interval_s)

    async def start(self) -> None:
        await self._typing()
        self._started_at = time.monotonic()
        try:
            await self._informative("Working on it...")
        except Exception as error:  # noqa: BLE001 - e.g. 403 ContentStreamNotAllowed
            log.info("streaming refused (%s); falling back to typing", type(error).__name__)
            self.stream_id = None

    async def update(self, status: str) -> None:
        if self.stream_id is None or time.monotonic() - self._started_at > STREAM_TIME_LIMIT_S:
            await self._typing()
            return
        await self._updates.push(status)

    async def finish(self, reply: Activity) -> None:
        await self._updates.stop()
        if self.stream_id is not None:
            # The final message carries no streamSequence (docs/teams-streaming.md).
            reply.entities = list(reply.entities or []) + [StreamInfo(stream_type="final", stream_id=self.stream_id)]
        await super().finish(reply)

    async def _informative(self, status: str) -> None:
        self._sequence += 1
        info = StreamInfo(stream_type="informative", stream_sequence=self._sequence, stream_id=self.stream_id)
        activity = Activity(type=ActivityTypes.typing, text=status[:MAX_INFORMATIVE_CHARS], entities=[info])
        response = await send_with_retry(lambda: self.context.send_activity(activity))
        if self.stream_id is None:
            stream_id = getattr(response, "id", None)
            if not stream_id:
                raise ConnectorRefused("no stream id in the response")
            self.stream_id = stream_id
        self.first_feedback_at = self.first_feedback_at or time.monotonic()


class StatusMessageProgress(Progress):
    """Group chats and channel threads: one status message, updated in place, replaced by the answer."""

    def __init__(self, context: TurnContext, interval_s: float = MIN_UPDATE_INTERVAL_S) -> None:
        super().__init__(context, interval_s)
        self.status_id: str | None = None
        self._updates = _Throttled(self._edit, interval_s)

    async def start(self) -> None:
        await self._typing()
        try:
            response = await send_with_retry(lambda: self.context.send_activity(Activity(
                type=ActivityTypes.message, text="Working on it...")))
            self.status_id = getattr(response, "id", None)
            self._updates._last = time.monotonic()
        except Exception as error:  # noqa: BLE001
            log.info("status message not delivered: %s", type(error).__name__)

    async def update(self, status: str) -> None:
        if self.status_id is not None:
            await self._updates.push(status)

    async def finish(self, reply: Activity) -> None:
        await self._updates.stop()
        if self.status_id is None:
            await super().finish(reply)
            return
        reply.id = self.status_id
        try:
            await send_with_retry(lambda: self.context.update_activity(reply))
            return
        except Exception as error:  # noqa: BLE001 - some clients only take text-only (or one-card) updates
            log.info("could not replace the status message with the whole answer (%s)", type(error).__name__)
        cards = reply.attachments or []
        text_only = Activity(type=ActivityTypes.message, id=self.status_id,
                             text=reply.text or ("Here is what I found:" if cards else "Done."))
        try:
            await send_with_retry(lambda: self.context.update_activity(text_only))
        except Exception as error:  # noqa: BLE001 - last resort: the whole answer as a new message
            log.info("could not update the status message (%s); sending the answer anew", type(error).__name__)
            reply.id = None
            await super().finish(reply)
            return
        if cards:
            follow_up = Activity(type=ActivityTypes.message, attachments=cards, attachment_layout=reply.attachment_layout)
            await send_with_retry(lambda: self.context.send_activity(follow_up))

    async def _edit(self, status: str) -> None:
        activity = Activity(type=ActivityTypes.message, id=self.status_id, text=status)
        await send_with_retry(lambda: self.context.update_activity(activity))


def progress_for(context: TurnContext, conversation_type: str | None) -> Progress:
    if conversation_type == "personal" and context.activity.channel_id == "msteams":
        return StreamingProgress(context)
    if conversation_type in ("channel", "groupChat"):
        return StatusMessageProgress(context)
    return Progress(context)
