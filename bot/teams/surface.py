"""The Teams surface: the bot and the adapter that runs its turns, the same in the web process and in a queue
worker process, this process's early typing indicators (early_typing.py), and the short notices a turn cut short
sends its user.

``bot.app`` builds it (``build_surface``); the web routes (server.py) and the dispatch of turns (dispatch.py) use it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from botbuilder.integration.aiohttp import CloudAdapter, ConfigurationBotFrameworkAuthentication
from botbuilder.schema import Activity

from bot.config import Settings
from bot.teams.connectors import CachingAuthentication, SentinelAdapter, Unreachable
from bot.teams.early_typing import EarlyTyping
from bot.teams.front_door import ChannelTokens, SigningKeys
from bot.teams.handler import SentinelBot
from bot.turns.contract import Envelope, TurnQueue
from bot.turns.runner import run_with_deadline
from bot.turns.worker import TurnWorker

log = logging.getLogger(__name__)
PARSED_KEPT = 1000  # activities the front parsed, kept for this process's worker (see Surface.hand_over)
ABANDONED_TEXT = ("I was restarted before I could finish answering this, so nothing more will come for it. "
                  "Please send it again.")


@dataclass
class _AuthConfig:
    """The attribute names ConfigurationBotFrameworkAuthentication reads."""

    APP_ID: str
    APP_PASSWORD: str
    APP_TYPE: str
    APP_TENANTID: str
    CHANNEL_SERVICE: str | None = None  # the US Government clouds' value: botbuilder's tokens come from there


def channel_tokens(settings: Settings) -> ChannelTokens | None:
    """The channel token check (None in local mode, without an app id)."""
    if not settings.teams.app_id:
        return None
    return ChannelTokens(settings.teams.app_id, SigningKeys(settings.teams.openid_metadata_url),
                         tenants=settings.access.tenants, issuers=(settings.teams.bot_cloud.token_issuer,))


def create_adapter(settings: Settings, tokens: ChannelTokens | None = None) -> CloudAdapter:
    if not settings.teams.app_id:
        log.warning("MICROSOFT_APP_ID is empty: LOCAL MODE, requests are NOT authenticated. "
                    "Never expose this endpoint; set the bot identity for Teams.")
    app_type = settings.teams.app_type if settings.teams.app_id else "MultiTenant"
    config = _AuthConfig(settings.teams.app_id or "", settings.teams.app_password or "",
                         app_type, settings.teams.app_tenant_id or "", settings.teams.bot_cloud.channel_service)
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
    # This process's early typing indicators: the dispatcher sends them (dispatch.py), a queued turn asks about them.
    typing: EarlyTyping = field(default_factory=EarlyTyping)
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
        if self.bot.addressed_to_bot(activity) and not await self.typing.just_sent(activity):
            try:
                await self.typing.first(activity, auth)()
            except Exception:
                log.info("early feedback not delivered", exc_info=True)
        turn = self.typing.told(activity, self.bot.on_turn)
        await run_with_deadline(lambda: self.adapter.process_activity(auth, activity, turn),
                                self.settings.turns.deadline_seconds, late)

    async def tell(self, envelope: Envelope, text: str) -> None:
        activity = Activity().deserialize(envelope.activity)
        await notice(activity, self.authentication.trusted(envelope.auth), text)()

    def worker(self, turns: TurnQueue) -> TurnWorker:
        return TurnWorker(turns, self.run_queued, self.tell, concurrency=self.settings.turns.workers,
                          max_attempts=self.settings.turns.max_attempts)


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
