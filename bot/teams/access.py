"""Who may ask, and how often: checked on every activity before anything runs.

- Tenants: only users of the allowed Entra tenants (by default the bot's own).
- Readers: when object ids or groups are listed, only those users, or members of those groups. Membership
  is read from Microsoft Graph (``checkMemberGroups``, transitive) with the bot's own identity and kept for
  a TTL; when Graph cannot answer, the user is refused for now (fail closed), and not remembered as refused.
- Where: allowed conversation types, and in channels only the allowed teams and channels when listed.
- How often: model turns per minute, per analyst and per conversation (commands run without the model and
  are not counted).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import aiohttp

from bot.config import Settings

log = logging.getLogger(__name__)
GRAPH_TIMEOUT_S = 5.0
MAX_GROUPS = 20  # checkMemberGroups takes at most 20 group ids per call
MAX_CACHED_USERS = 10_000
TokenSource = Callable[[], Awaitable[str]]  # an access token for Microsoft Graph, with the bot's identity


class Refusal(StrEnum):
    TENANT = "tenant_not_allowed"
    SCOPE = "conversation_not_allowed"
    READER = "not_a_reader"
    UNCHECKED = "membership_not_checked"  # Graph could not answer


REFUSAL_TEXT = {
    Refusal.TENANT: "Sorry, I only answer people in my own organization.",
    Refusal.SCOPE: "Sorry, I'm not enabled here. Ask me in a chat or channel where your administrator has "
                   "enabled me.",
    Refusal.READER: "Sorry, you're not on the list of people who may use this assistant to read Microsoft "
                    "Sentinel data. If you need access, ask your SOC administrator to add you.",
    Refusal.UNCHECKED: "Sorry, I couldn't check your access just now, so I can't answer. Please try again in a "
                       "minute.",
}


@dataclass(frozen=True)
class Where:
    """The facts of an activity the policy decides on."""

    tenant_id: str | None
    object_id: str | None
    conversation_type: str
    team_id: str | None = None
    channel_id: str | None = None


class ClientCredentials:
    """An app-only token by the OAuth 2.0 client credentials grant (the bot's app id and secret), cached
    until a minute before it expires."""

    def __init__(self, login_endpoint: str, tenant_id: str, client_id: str, secret: str, scope: str) -> None:
        self._url = f"{login_endpoint.rstrip('/')}/{tenant_id}/oauth2/v2.0/token"
        self._form = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret,
                      "scope": scope}
        self._token: tuple[str, float] | None = None
        self._session: aiohttp.ClientSession | None = None

    async def __call__(self) -> str:
        if self._token is not None and time.monotonic() < self._token[1]:
            return self._token[0]
        async with self._client().post(self._url, data=self._form) as response:
            body = await response.json(content_type=None)
            if response.status != 200 or not isinstance(body, dict) or not body.get("access_token"):
                raise PermissionError(f"token endpoint answered {response.status}")
        lifetime = float(body.get("expires_in") or 300)
        self._token = (str(body["access_token"]), time.monotonic() + max(lifetime - 60, 30))
        return self._token[0]

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=GRAPH_TIMEOUT_S))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


@dataclass
class ReaderGroups:
    """Whether a user is in any of ``groups`` (transitively), from Microsoft Graph, cached for ``ttl_s``."""

    graph_endpoint: str
    groups: frozenset[str]
    token: TokenSource
    ttl_s: float = 300.0
    clock: Callable[[], float] = time.monotonic
    lookups: int = 0  # Graph calls made (for tests and operations)
    _known: dict[str, tuple[bool, float]] = field(default_factory=dict)
    _session: aiohttp.ClientSession | None = None

    async def member(self, object_id: str) -> bool:
        """Raises when Graph cannot answer (the caller refuses for now)."""
        known = self._known.get(object_id)
        if known is not None and self.clock() < known[1]:
            return known[0]
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=GRAPH_TIMEOUT_S))
        self.lookups += 1
        url = f"{self.graph_endpoint.rstrip('/')}/v1.0/directoryObjects/{object_id}/checkMemberGroups"
        headers = {"Authorization": f"Bearer {await self.token()}"}
        async with self._session.post(url, json={"groupIds": sorted(self.groups)}, headers=headers) as response:
            if response.status == 404:  # no such user in the directory: not a member of anything
                found: Any = {"value": []}
            else:
                response.raise_for_status()
                found = await response.json(content_type=None)
        values = found.get("value") if isinstance(found, dict) else None
        if not isinstance(values, list):
            raise ValueError("checkMemberGroups answered without a value list")
        member = bool(self.groups & {str(v).lower() for v in values})
        if len(self._known) >= MAX_CACHED_USERS:
            self._known.clear()
        self._known[object_id] = (member, self.clock() + self.ttl_s)
        return member

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


@dataclass
class AccessPolicy:
    tenants: frozenset[str] = frozenset()  # empty: any tenant (local mode only; config requires one otherwise)
    readers: frozenset[str] = frozenset()
    groups: ReaderGroups | None = None
    conversation_types: frozenset[str] = frozenset({"personal", "groupChat", "channel"})
    teams: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()
    hunters: frozenset[str] = frozenset()  # Entra object ids who may run their own KQL (the kql command)

    @property
    def readers_listed(self) -> bool:
        return bool(self.readers) or self.groups is not None

    async def refusal(self, where: Where) -> Refusal | None:
        """Why this activity may not run anything, or None when it may."""
        if self.tenants and (where.tenant_id or "").lower() not in self.tenants:
            return Refusal.TENANT
        if where.conversation_type not in self.conversation_types:
            return Refusal.SCOPE
        if where.conversation_type == "channel" and (
                (self.teams and where.team_id not in self.teams)
                or (self.channels and where.channel_id not in self.channels)):
            return Refusal.SCOPE
        if not self.readers_listed:
            return None
        user = (where.object_id or "").lower()
        if not user:
            return Refusal.READER
        if user in self.readers:
            return None
        if self.groups is None:
            return Refusal.READER
        try:
            return None if await self.groups.member(user) else Refusal.READER
        except Exception as error:  # noqa: BLE001 - fail closed, say so in one line
            log.warning("could not check group membership: %s", type(error).__name__)
            return Refusal.UNCHECKED

    async def close(self) -> None:
        if self.groups is not None:
            await self.groups.close()
            closer = getattr(self.groups.token, "close", None)
            if closer is not None:
                await closer()


def access_policy(settings: Settings, graph_token: TokenSource | None = None) -> AccessPolicy:
    """The policy the settings describe. Group checks use ``graph_token``, else the bot's app id and secret."""
    groups = None
    if settings.access.reader_groups:
        token = graph_token
        if token is None:
            if not (settings.teams.app_id and settings.teams.app_password):
                raise ValueError("reader groups need the bot's identity to ask Microsoft Graph")
            token = ClientCredentials(settings.access.login_endpoint, settings.teams.app_tenant_id or "organizations",
                                      settings.teams.app_id, settings.teams.app_password,
                                      "https://graph.microsoft.com/.default")
        groups = ReaderGroups(settings.access.graph_endpoint, settings.access.reader_groups, token,
                              ttl_s=settings.access.group_cache_seconds)
    return AccessPolicy(tenants=settings.access.tenants, readers=settings.access.readers, groups=groups,
                        conversation_types=settings.access.conversation_types, teams=settings.access.teams,
                        channels=settings.access.channels, hunters=settings.access.kql_analysts)


class _Window:
    """What one analyst or conversation used in a sliding window: (when, how much) entries, oldest first."""

    def __init__(self) -> None:
        self.entries: deque[tuple[float, int]] = deque()

    def wait(self, limit: int, now: float, window_s: float) -> float | None:
        """Seconds until the window's total falls under ``limit``; None when it is under it now (or 0: no limit)."""
        while self.entries and self.entries[0][0] <= now - window_s:
            self.entries.popleft()
        total = sum(amount for _, amount in self.entries)
        if not limit or total < limit:
            return None
        for at, amount in self.entries:  # the oldest use leaves the window first
            total -= amount
            if total < limit:
                return at + window_s - now
        return window_s  # not reached: the total falls to 0, under any limit

    def idle(self, now: float, window_s: float) -> bool:
        return not self.entries or self.entries[-1][0] <= now - window_s


@dataclass
class TurnLimits:
    """Model turns and model tokens per minute, per analyst and per conversation (sliding windows).

    A turn's tokens are known only once it is answered (:meth:`spend`), so the token limits refuse the next turn
    once a window's spending has reached them: one long turn may go over, the one after it waits.
    ``tokens_per_user``/``tokens_per_conversation`` of 0 leave tokens unlimited.
    """

    per_user: int
    per_conversation: int
    tokens_per_user: int = 0
    tokens_per_conversation: int = 0
    window_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _used: dict[tuple[str, str, str], _Window] = field(default_factory=lambda: defaultdict(_Window))
    last_refusal: str = ""  # "turns" or "tokens": what the last refused take() ran into

    def take(self, user: str, conversation: str) -> float | None:
        """Count one model turn; or, over a limit, the seconds until the turn may run (nothing counted)."""
        now = self.clock()
        limits = (("user", user, "turns", self.per_user), ("user", user, "tokens", self.tokens_per_user),
                  ("conversation", conversation, "turns", self.per_conversation),
                  ("conversation", conversation, "tokens", self.tokens_per_conversation))
        waits = [(wait, kind) for who, key, kind, limit in limits
                 if (window := self._used.get((who, key, kind))) is not None
                 and (wait := window.wait(limit, now, self.window_s)) is not None]
        if waits:
            wait, self.last_refusal = max(waits)
            return wait
        for who, key in (("user", user), ("conversation", conversation)):
            self._used[(who, key, "turns")].entries.append((now, 1))
        if len(self._used) > MAX_CACHED_USERS:  # idle keys go; a busy one is recreated at its next turn
            for idle in [k for k, window in self._used.items() if window.idle(now, self.window_s)]:
                del self._used[idle]
        return None

    def spend(self, user: str, conversation: str, tokens: int) -> None:
        """Record what an answered turn cost (prompt and completion tokens of all its model calls)."""
        if tokens <= 0 or not (self.tokens_per_user or self.tokens_per_conversation):
            return
        now = self.clock()
        for who, key in (("user", user), ("conversation", conversation)):
            self._used[(who, key, "tokens")].entries.append((now, tokens))

    def message(self, wait_s: float) -> str:
        what = (f"the language model's token budget ({self.tokens_per_user:,} tokens a minute per person, "
                f"{self.tokens_per_conversation:,} per conversation)" if self.last_refusal == "tokens" else
                f"questions for the language model ({self.per_user} a minute per person, {self.per_conversation} "
                "per conversation)")
        return (f"You've reached the limit on {what}. Please ask again in about {max(1, round(wait_s))} seconds; "
                'commands such as "incidents 24h" work now.')

