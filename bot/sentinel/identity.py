"""Whose permissions a read or a write runs with: the bot's own identity, or the analyst's (on-behalf-of).

With ``QUERY_IDENTITY=user`` the Teams surface gets the analyst's single sign-on token for the turn and puts it
in :func:`acting_as`; the workspace client and the incident writer then run that turn's requests with the
analyst's own Azure tokens, obtained by the OAuth 2.0 on-behalf-of flow (azure-identity's
``OnBehalfOfCredential``). Sentinel's RBAC then applies to the person, and Log Analytics' and Azure's own logs
name them.

Each analyst gets one credential and one set of clients (``UserSessions``: least recently used first out, with a
time to live), never shared with another analyst: azure-core's bearer policy keeps the token it got inside the
client, so a client shared between users would send one user's token for another. A new sign-in token for the
same analyst replaces their session. Entra's refusals become a ``TokenProblem`` that says what the analyst (or
their administrator) can do; never a stack trace.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError

log = logging.getLogger(__name__)

LOGS_SCOPE = "https://api.loganalytics.io/.default"
ARM_SCOPE = "https://management.azure.com/.default"
TOKEN_EXCHANGE_AUDIENCE = "api://AzureADTokenExchange/.default"  # a managed identity's token as a client assertion
MAX_SESSIONS = 256
SESSION_TTL_S = 3600.0
RETIRE_GRACE_S = 120.0  # a turn still using a replaced session finishes before its clients are closed


@dataclass(frozen=True)
class Analyst:
    """The signed-in analyst of a turn and their single sign-on token (the on-behalf-of flow's user assertion)."""

    object_id: str
    tenant_id: str | None
    token: str = field(repr=False)

    @property
    def key(self) -> str:
        return f"{(self.tenant_id or '').lower()}/{self.object_id.lower()}"

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.token.encode()).hexdigest()[:16]


_analyst: ContextVar[Analyst | None] = ContextVar("bot_sentinel_analyst", default=None)


@contextmanager
def acting_as(analyst: Analyst | None) -> Iterator[None]:
    """Reads and writes inside (tasks started inside too: they copy the context) run with ``analyst``'s token."""
    token = _analyst.set(analyst)
    try:
        yield
    finally:
        _analyst.reset(token)


def current_analyst() -> Analyst | None:
    return _analyst.get()


def running_as() -> str:
    """For the audit record: ``user`` when this turn's requests carry the analyst's token, else ``bot``."""
    return "user" if _analyst.get() is not None else "bot"


class TokenProblem(StrEnum):
    """Why Entra would not give the analyst's token, each with what to do about it."""

    SIGN_IN = "sign_in_required"  # no token for this turn (on-behalf-of mode, outside a signed-in turn)
    SIGN_IN_AGAIN = "sign_in_again"  # the sign-in expired or was revoked (invalid_grant)
    CONSENT = "consent_required"  # AADSTS65001: the tenant has not consented to the delegated permissions
    INTERACTION = "interaction_required"  # MFA or Conditional Access wants the analyst in person
    UNAVAILABLE = "identity_unavailable"  # Entra could not be reached, or refused the bot's own credential

    @property
    def message(self) -> str:
        return _MESSAGES[self]

    @property
    def retry_possible(self) -> bool:
        return self in (TokenProblem.SIGN_IN, TokenProblem.SIGN_IN_AGAIN, TokenProblem.UNAVAILABLE)


_MESSAGES = {
    TokenProblem.SIGN_IN: "This bot reads Sentinel with your own permissions, and you are not signed in to it: "
                          "sign in on the card I sent, then ask again.",
    TokenProblem.SIGN_IN_AGAIN: "Your sign-in to this bot has expired or was revoked. Sign in again on the card "
                                "I sent, then ask again.",
    TokenProblem.CONSENT: "Your organisation has not yet allowed this bot to read Sentinel on your behalf "
                          "(admin consent for Log Analytics Data.Read and Azure Resource Manager "
                          "user_impersonation). Ask your Entra administrator to grant consent to the bot's app "
                          "registration; nothing was read.",
    TokenProblem.INTERACTION: "Your organisation requires you to sign in again interactively (multi-factor "
                              "authentication or a Conditional Access policy) before this bot may read Sentinel for "
                              "you. Sign out of Teams and back in, or sign in on the card I sent, then ask again.",
    TokenProblem.UNAVAILABLE: "I could not get a token to read Sentinel on your behalf just now (Entra ID did not "
                              "answer, or refused the bot's own credential). Try again in a minute; if it keeps "
                              "happening, tell your administrator.",
}

# Entra error codes (AADSTS...) and OAuth errors, by what the analyst can do about them.
_CONSENT_CODES = ("AADSTS65001", "AADSTS65004", "AADSTS90094", "consent_required")
_INTERACTION_CODES = ("AADSTS50076", "AADSTS50079", "AADSTS53003", "AADSTS50158", "interaction_required")
_SIGN_IN_AGAIN_CODES = ("invalid_grant", "AADSTS50013", "AADSTS500133", "AADSTS700082", "AADSTS50173")


def token_problem(error: BaseException) -> TokenProblem:
    """What an on-behalf-of failure means for the analyst, from Entra's error code in the message."""
    text = str(getattr(error, "message", None) or error)
    for codes, problem in ((_CONSENT_CODES, TokenProblem.CONSENT), (_INTERACTION_CODES, TokenProblem.INTERACTION),
                           (_SIGN_IN_AGAIN_CODES, TokenProblem.SIGN_IN_AGAIN)):
        if any(code in text for code in codes):
            return problem
    return TokenProblem.UNAVAILABLE


CredentialFactory = Callable[[Analyst], Any]  # an AsyncTokenCredential for one analyst's assertion
ClientFactory = Callable[[Any], Any]  # a client (with close()) using that credential


class _Session:
    """One analyst's credential and the clients built on it, for one sign-in token."""

    def __init__(self, analyst: Analyst, credential: Any, created: float) -> None:
        self.fingerprint = analyst.fingerprint
        self.credential = credential
        self.created = created
        self.clients: dict[str, Any] = {}

    async def close(self) -> None:
        for client in self.clients.values():
            await _quietly(client.close)
        await _quietly(self.credential.close)


class UserSessions:
    """Per-analyst credentials and clients: bounded (least recently used out), each living at most ``ttl_s``.

    ``credential_for(analyst)`` builds an ``OnBehalfOfCredential`` (see :func:`on_behalf_of`); ``clients`` name the
    client kinds ("logs", "arm") and how to build each from a credential.
    """

    def __init__(self, credential_for: CredentialFactory, clients: dict[str, ClientFactory] | None = None, *,
                 scopes: tuple[str, ...] = (LOGS_SCOPE,), max_sessions: int = MAX_SESSIONS,
                 ttl_s: float = SESSION_TTL_S, retire_grace_s: float = RETIRE_GRACE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._credential_for = credential_for
        self._factories = dict(clients or {})
        self.scopes = scopes  # what check() asks for up front
        self._max = max_sessions
        self._ttl = ttl_s
        self._clock = clock
        # Only synchronous steps touch the table, so turns on one event loop need no lock around it.
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._grace = retire_grace_s
        self._retiring: set[_Session] = set()
        self.created = 0  # sessions built (tests and figures: one per analyst and sign-in, not per request)

    def add_client(self, kind: str, factory: ClientFactory) -> None:
        self._factories[kind] = factory

    async def client(self, kind: str, analyst: Analyst) -> Any:
        """``analyst``'s own client of ``kind``, built once per session."""
        session = await self._session(analyst)
        client = session.clients.get(kind)
        if client is None:
            client = session.clients[kind] = self._factories[kind](session.credential)
        return client

    async def check(self, analyst: Analyst) -> TokenProblem | None:
        """Get the analyst's tokens now (cached by the credential afterwards), so a refusal is known before
        anything runs: None when they can be had, else the problem."""
        session = await self._session(analyst)
        for scope in self.scopes:
            try:
                await session.credential.get_token(scope)
            except ClientAuthenticationError as error:
                problem = token_problem(error)
                log.info("on-behalf-of token refused: %s (%s)", problem.value, _first_code(error))
                if problem is not TokenProblem.UNAVAILABLE:
                    await self.forget(analyst)  # a new sign-in token will build a new session
                return problem
        return None

    async def forget(self, analyst: Analyst) -> None:
        session = self._sessions.pop(analyst.key, None)
        if session is not None:
            await self._retire([session])

    async def close(self) -> None:
        sessions = [*self._sessions.values(), *self._retiring]
        self._sessions, self._retiring = OrderedDict(), set()
        for session in sessions:
            await session.close()

    def __len__(self) -> int:
        return len(self._sessions)

    async def _session(self, analyst: Analyst) -> _Session:
        retired: list[_Session] = []
        now = self._clock()
        session = self._sessions.get(analyst.key)
        stale = session is not None and now - session.created > self._ttl
        if session is not None and (stale or session.fingerprint != analyst.fingerprint):
            retired.append(self._sessions.pop(analyst.key))
            session = None
        if session is None:
            session = _Session(analyst, self._credential_for(analyst), now)
            self.created += 1
        self._sessions[analyst.key] = session
        self._sessions.move_to_end(analyst.key)
        while len(self._sessions) > self._max:
            retired.append(self._sessions.popitem(last=False)[1])
        await self._retire(retired)
        return session

    async def _retire(self, sessions: list[_Session]) -> None:
        """Close replaced sessions: at once without a grace, else after it (a request may still be using them)."""
        if not self._grace:
            for old in sessions:
                await old.close()
            return
        loop = asyncio.get_running_loop()
        for old in sessions:
            self._retiring.add(old)
            loop.call_later(self._grace, self._later, loop, old)

    def _later(self, loop: asyncio.AbstractEventLoop, session: _Session) -> None:
        loop.create_task(self._close_retired(session))

    async def _close_retired(self, session: _Session) -> None:
        if session in self._retiring:
            self._retiring.discard(session)
            await session.close()


def on_behalf_of(*, tenant_id: str, client_id: str, authority: str, client_secret: str | None = None,
                 assertion: ManagedIdentityAssertion | None = None, **options: Any) -> CredentialFactory:
    """A factory of ``OnBehalfOfCredential`` for the app registration ``client_id`` (the one Teams single sign-on
    issues tokens to), authenticating with its secret or with ``assertion`` (the bot's managed identity, trusted by
    the registration as a federated credential: no secret). ``options`` go to the credential (``transport``)."""
    from azure.identity.aio import OnBehalfOfCredential

    if not client_secret and assertion is None:
        raise ValueError("on-behalf-of needs the app registration's secret or the managed identity's assertion")

    def build(analyst: Analyst) -> Any:
        tenant = analyst.tenant_id or tenant_id
        if client_secret:
            return OnBehalfOfCredential(tenant, client_id, user_assertion=analyst.token, authority=authority,
                                        client_secret=client_secret, **options)
        assert assertion is not None
        inner = OnBehalfOfCredential(tenant, client_id, user_assertion=analyst.token, authority=authority,
                                     client_assertion_func=assertion, **options)
        return AnalystCredential(inner, assertion.refresh)

    return build


class ManagedIdentityAssertion:
    """The bot's managed identity token for ``api://AzureADTokenExchange``, as the app registration's client
    assertion (no secret anywhere). azure-identity asks for the assertion synchronously, so it is fetched
    asynchronously beforehand (``refresh``, called before every on-behalf-of request) and handed over from memory."""

    def __init__(self, credential: Any) -> None:
        self._credential = credential
        self._token: AccessToken | None = None

    async def refresh(self) -> None:
        if self._token is None or self._token.expires_on - time.time() < 300:
            self._token = await self._credential.get_token(TOKEN_EXCHANGE_AUDIENCE)

    def __call__(self) -> str:
        if self._token is None:
            raise ClientAuthenticationError("the managed identity's client assertion is not ready")
        return self._token.token

    async def close(self) -> None:
        await self._credential.close()


class AnalystCredential:
    """An AsyncTokenCredential that refreshes a client assertion before each request of the inner credential."""

    def __init__(self, inner: Any, before: Callable[[], Awaitable[None]]) -> None:
        self._inner = inner
        self._before = before

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        try:
            await self._before()
        except Exception as error:  # the bot's own identity failed: not the analyst's problem
            raise ClientAuthenticationError(f"the bot's client assertion failed ({type(error).__name__})") from error
        return await self._inner.get_token(*scopes, **kwargs)

    async def close(self) -> None:
        await self._inner.close()


class AnalystIncidentWriter:
    """The incident writer in on-behalf-of mode: each analyst's changes go through their own ARM writer (built by
    the ``arm`` client factory of ``users``), so Sentinel records the change as theirs and applies their roles."""

    is_demo = False

    def __init__(self, users: UserSessions) -> None:
        self._users = users

    async def read(self, incident_name: str) -> Any:
        return await self._call("read", incident_name)

    async def update(self, incident: Any, change: Any) -> Any:
        return await self._call("update", incident, change)

    async def add_comment(self, incident_name: str, comment_id: str, message: str) -> None:
        await self._call("add_comment", incident_name, comment_id, message)

    async def close(self) -> None:
        return None  # the sessions (and their writers) are closed with the workspace client

    async def _call(self, operation: str, *arguments: Any) -> Any:
        from bot.sentinel.changes import WriteError

        analyst = current_analyst()
        if analyst is None:
            raise WriteError("unauthorized", TokenProblem.SIGN_IN.message)
        writer = await self._users.client("arm", analyst)
        try:
            return await getattr(writer, operation)(*arguments)
        except WriteError as error:
            if error.kind != "unauthorized":
                raise
            problem = token_problem(Exception(error.detail))  # the writer names the bot's identity: say why for them
            raise WriteError("unauthorized", problem.message.replace("read Sentinel", "change Sentinel incidents"),
                             detail=error.detail, retry_possible=problem.retry_possible) from None


def _first_code(error: BaseException) -> str:
    text = str(getattr(error, "message", None) or error)
    for word in text.replace(":", " ").replace(",", " ").split():
        if word.startswith("AADSTS") or word in ("invalid_grant", "interaction_required", "consent_required"):
            return word[:20]
    return type(error).__name__


async def _quietly(close: Callable[[], Awaitable[Any]]) -> None:
    try:
        await close()
    except Exception:
        log.debug("closing a retired on-behalf-of client failed", exc_info=True)
