"""The Teams surface: the bot and the adapter that runs its turns, the same in the web process and in a queue
worker process, and the short notices a turn cut short sends its user.

``bot.app`` builds it (``build_surface``); the web routes (server.py) and the dispatch of turns (dispatch.py) use it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from botbuilder.integration.aiohttp import CloudAdapter, ConfigurationBotFrameworkAuthentication
from botbuilder.schema import Activity

from bot.config import Settings
from bot.teams.connectors import CachingAuthentication, SentinelAdapter, Unreachable
from bot.teams.front_door import ChannelTokens, SigningKeys
from bot.teams.handler import SentinelBot
from bot.teams.progress import send_with_retry, shows_typing
from bot.turns.contract import Envelope, TurnQueue
from bot.turns.runner import run_with_deadline
from bot.turns.worker import TurnWorker

log = logging.getLogger(__name__)
# A queued turn's worker sends no typing indicator of its own when its web front sent one this recently (Teams shows
# one for about 3 s, or until the next message).
TYPING_FRESH_S = 2.0
FRONT_TYPING_WAIT_S = 0.5  # the longest a queued turn waits for the typing indicator its front is sending
EARLY_TYPING_KEPT = 1000  # typing indicators remembered for turns not started yet: turns that never start must not leak
PARSED_KEPT = 1000  # activities the front parsed, kept for this process's worker; as many as typing indicators
ABANDONED_TEXT = ("I was restarted before I could finish answering this, so nothing more will come for it. "
                  "Please send it again.")


@dataclass
class _AuthConfig:
    """The attribute names ConfigurationBotFrameworkAuthentication reads."""

    APP_ID: str
    APP_PASSWORD: str
    APP_TYPE: str
    APP_TENANTID: str


def channel_tokens(settings: Settings) -> ChannelTokens | None:
    """The channel token check (None in local mode, without an app id)."""
    if not settings.teams.app_id:
        return None
    return ChannelTokens(settings.teams.app_id, SigningKeys(settings.teams.openid_metadata_url),
                         tenants=settings.access.tenants)


def create_adapter(settings: Settings, tokens: ChannelTokens | None = None) -> CloudAdapter:
    if not settings.teams.app_id:
        log.warning("MICROSOFT_APP_ID is empty: LOCAL MODE, requests are NOT authenticated. "
                    "Never expose this endpoint; set the bot identity for Teams.")
    app_type = settings.teams.app_type if settings.teams.app_id else "MultiTenant"
    config = _AuthConfig(settings.teams.app_id or "", settings.teams.app_password or "",
                         app_type, settings.teams.app_tenant_id or "")
    adapter = SentinelAdapter(CachingAuthentication(ConfigurationBotFrameworkAuthentication(config), tokens))
    adapter.on_turn_error = _on_adapter_error
    return adapter


async def _on_adapter_error(context: Any, error: Exception) -> None:
    # Errors inside a turn are handled there; this catches adapter-level failures.
    if isinstance(error, Unreachable):  # e.g. a welcome card to a serviceUrl that cannot be reached
        log.warning("adapter error: %s", error)
        return
    log.error("adapter error: %s", type(error).__name__, exc_info=error)


@dataclass
class Surface:
    """The bot and the adapter that runs its turns: the same in the web process and in a queue worker process."""

    bot: SentinelBot
    adapter: CloudAdapter
    tokens: ChannelTokens | None
    settings: Settings
    # (conversation id, activity id) -> done once this process's front has sent (or failed to send) the turn's early
    # typing indicator; set on the web loop, awaited on the turns' loop.
    typing_sending: dict[tuple[str, str], concurrent.futures.Future[None]] = field(default_factory=dict)
    # (conversation id, activity id) -> the activity as this process's front parsed it, for its own worker
    # (TURN_WORKER_IN_WEB): the queued turn is then not parsed again from its envelope (see :meth:`hand_over`).
    parsed: OrderedDict[tuple[str, str], Activity] = field(default_factory=OrderedDict)

    @property
    def authentication(self) -> CachingAuthentication:
        authentication = self.adapter.bot_framework_authentication
        assert isinstance(authentication, CachingAuthentication)
        return authentication

    def hand_over(self, activity: Activity) -> None:
        """Keep an activity this process's front parsed and is queueing, for this process's worker to run without
        parsing it again (msrest's deserialize is most of an activity's parsing); only the newest
        :data:`PARSED_KEPT` are kept, so activities other processes take do not pile up."""
        if self.settings.turns.web_runs_worker:
            self.parsed[(activity.conversation.id, activity.id or "")] = activity
            while len(self.parsed) > PARSED_KEPT:
                self.parsed.popitem(last=False)

    def _activity(self, envelope: Envelope) -> Activity:
        """The envelope's activity: as this process's front parsed it (:meth:`hand_over`), else read from the JSON."""
        activity = self.parsed.pop((envelope.conversation_id, envelope.activity_id), None)
        return activity if activity is not None else Activity().deserialize(envelope.activity)

    async def run_queued(self, envelope: Envelope) -> None:
        """A queued turn, as the web process would run it: typing first, then the turn within its deadline; for an
        invoke (answered by the front), the turn it started (its ``turn``: a card press's text and value)."""
        activity = self._activity(envelope)
        auth = self.authentication.trusted(envelope.auth)
        late = notice(activity, auth, deadline_text(self.settings.turns.deadline_seconds))
        if envelope.turn is not None:
            text, value = envelope.turn.get("text"), envelope.turn.get("value")
            await run_with_deadline(lambda: self.bot.answer_started(
                self.adapter, auth.claims_identity, auth.audience, activity, text if isinstance(text, str) else "",
                value if isinstance(value, dict) else None), self.settings.turns.deadline_seconds, late)
            return
        if self.bot.addressed_to_bot(activity) and not await self._typing_just_sent(activity):
            try:
                await typing_first(activity, auth, self.bot)()
            except Exception:
                log.info("early feedback not delivered", exc_info=True)
        await run_with_deadline(lambda: self.adapter.process_activity(auth, activity, self.bot.on_turn),
                                self.settings.turns.deadline_seconds, late)

    async def _typing_just_sent(self, activity: Activity) -> bool:
        """Whether this process's web front sent the turn's typing indicator within :data:`TYPING_FRESH_S` (its
        worker, taking the turn at once, need not send another; one that waited longer sends its own). While the
        front is still sending it, wait for that (at most :data:`FRONT_TYPING_WAIT_S`)."""
        key = (activity.conversation.id, activity.id or "")
        sending = self.typing_sending.get(key)
        if sending is not None:
            with contextlib.suppress(TimeoutError, concurrent.futures.CancelledError):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(sending)), FRONT_TYPING_WAIT_S)
        sent_at = self.bot.early_typing.get(key)
        return sent_at is not None and time.monotonic() - sent_at < TYPING_FRESH_S

    async def tell(self, envelope: Envelope, text: str) -> None:
        activity = Activity().deserialize(envelope.activity)
        await notice(activity, self.authentication.trusted(envelope.auth), text)()

    def worker(self, turns: TurnQueue) -> TurnWorker:
        return TurnWorker(turns, self.run_queued, self.tell, concurrency=self.settings.turns.workers,
                          max_attempts=self.settings.turns.max_attempts)


def typing_first(activity: Activity, auth: Any, bot: SentinelBot) -> Callable[[], Awaitable[None]]:
    """The typing indicator, sent as soon as the turn is queued, before it waits for anything."""

    async def send() -> None:
        if not shows_typing(activity):
            return
        connector = await auth.connector_factory.create(activity.service_url, auth.audience)
        typing = Activity(type="typing", from_property=activity.recipient, recipient=activity.from_property,
                          conversation=activity.conversation, channel_id=activity.channel_id,
                          service_url=activity.service_url, reply_to_id=activity.id)
        try:
            await send_with_retry(
                lambda: connector.conversations.send_to_conversation(activity.conversation.id, typing))
        except Unreachable as error:  # the turn's answer fails the same way and reports it once
            log.debug("early typing not delivered: %s", error)
            return
        _remember_typing(bot, (activity.conversation.id, activity.id or ""))

    return send


def _remember_typing(bot: SentinelBot, key: tuple[str, str]) -> None:
    bot.early_typing[key] = time.monotonic()
    for old in list(bot.early_typing)[:max(len(bot.early_typing) - EARLY_TYPING_KEPT, 0)]:
        bot.early_typing.pop(old, None)


def deadline_text(deadline_s: int) -> str:
    return (f"I stopped working on this after {deadline_s} s, the longest one answer may take, so nothing more will "
            "come for it. Ask again, perhaps for a shorter time range or fewer results; your other messages are "
            "answered as usual.")


def notice(activity: Activity, auth: Any, text: str) -> Callable[[], Awaitable[None]]:
    """A one-line message to the activity's sender when its turn is cut short (shutdown, deadline, given up), so
    the user learns to resend instead of waiting for nothing."""

    async def send() -> None:
        connector = await auth.connector_factory.create(activity.service_url, auth.audience)
        notice = Activity(type="message", text=text, from_property=activity.recipient,
                          recipient=activity.from_property, conversation=activity.conversation,
                          channel_id=activity.channel_id, service_url=activity.service_url,
                          reply_to_id=activity.id)
        await connector.conversations.send_to_conversation(activity.conversation.id, notice)

    return send
