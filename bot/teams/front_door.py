"""The front door: what a request must be before the bot does anything with it, checked fast and failing closed.

- The body: JSON of bounded size and nesting depth, every string cleaned (lone surrogates and control
  characters cannot reach the model, a card or the state store).
- The sender: a Bot Framework channel token (RS256, signed by a key the Bot Framework publishes, for this
  bot, from the channel's issuer, within its lifetime, naming the activity's serviceUrl). botbuilder's own
  check fetches the signing keys with a blocking call on the event loop and no timeout, and answers a
  forged token with a traceback; this one fetches them with aiohttp under a timeout, caches them, and
  answers every bad token with one ``Refused`` (401) and one log line.
- Where replies go: the activity's serviceUrl must match an allow-list, part by part (scheme, host labels, port,
  path segments), so a caller cannot make the bot post (with its credentials) to an address of its choosing.
- What the body says of itself: the token signs none of it, so the conversation id's form, its stated type,
  channelData's team and channel, and every tenant named (and the token's, when it names one) must agree.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import jwt
from jwt.algorithms import RSAAlgorithm

log = logging.getLogger(__name__)

MAX_JSON_DEPTH = 24  # real activities nest about 8 deep (a card's inputs inside value inside channelData)
CHANNEL_ISSUER = "https://api.botframework.com"
CLOCK_SKEW_S = 300  # the leeway botbuilder allows
KEYS_FRESH_S = 24 * 3600  # the Bot Framework rotates keys with days of overlap
UNKNOWN_KID_REFRESH_S = 300  # an unknown key id refetches at most this often (forged kids cannot force fetches)
FETCH_TIMEOUT_S = 5.0
FETCH_WAIT_S = 1.0  # how long a request waits for a fetch in progress before it is told to come back (503)
FAILURE_BACKOFF_S = 30.0  # after a failed fetch, requests are refused at once for this long
MAX_DOCUMENT_BYTES = 256_000

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class Refused(Exception):
    """The request is not let in: ``status`` to answer with, ``reason`` for the one log line (never a secret)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def clean_text(text: str) -> str:
    """Lone surrogates become U+FFFD (they cannot be encoded as UTF-8); control characters other than tab and
    newline are dropped (they corrupt cards and confuse the model)."""
    if text.isascii() and text.isprintable():
        return text
    return _CONTROL.sub("", _SURROGATE.sub("\ufffd", text))


def clean_json(value: Any, depth: int = 0) -> Any:
    """``value`` with every string (keys too) cleaned; ``Refused`` (400) when nested deeper than MAX_JSON_DEPTH."""
    if isinstance(value, str):
        return clean_text(value)
    if depth >= MAX_JSON_DEPTH and isinstance(value, dict | list):
        raise Refused(400, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, dict):
        return {clean_text(k): clean_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v, depth + 1) for v in value]
    return value


def parse_body(raw: bytes) -> dict[str, Any]:
    """The activity's JSON, cleaned and bounded; ``Refused`` (400) for anything else."""
    try:
        body = json.loads(raw)
    except RecursionError:  # the C parser's own guard against deep nesting
        raise Refused(400, "JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise Refused(400, "The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise Refused(400, "The body is not a Bot Framework activity (not an object).")
    cleaned: dict[str, Any] = clean_json(body)
    check_shape(cleaned)
    return cleaned


# Identifiers Teams sends are short printable ASCII ("19:...@thread.v2", "29:...", GUIDs); anything else would
# end up in URL paths and headers of the bot's replies.
_IDENTIFIER = re.compile(r"^[\x21-\x7e]{1,512}$")
_LOCALE = re.compile(r"^[A-Za-z]{2,8}(?:-[A-Za-z0-9]{1,8}){0,3}$")
_ACCOUNTS = ("from", "recipient")


def check_shape(body: dict[str, Any]) -> None:
    """The fields the bot and botbuilder read have the types Teams sends; ``Refused`` (400) naming the first
    that does not. botbuilder assumes these shapes and fails deep inside a turn when they are wrong."""
    for name in ("type", "channelId", "serviceUrl"):
        _value(body, name, str, True, "")
    for name in ("id", "replyToId"):
        _identifier(body, name)
    for name in ("text", "name", "textFormat", "timestamp", "localTimestamp"):
        _text(body, name)
    if body.get("locale") is not None and not _LOCALE.match(str(body["locale"])):
        raise Refused(400, "locale is not a language tag")
    conversation = _object(body, "conversation", required=True)
    _identifier(conversation, "id", required=True, where="conversation.")
    _identifier(conversation, "tenantId", where="conversation.")
    _text(conversation, "conversationType", where="conversation.")
    for name in _ACCOUNTS:
        _account(_object(body, name, required=True), name + ".")
    for name in ("membersAdded", "membersRemoved"):
        for member in _list(body, name):
            _account(member if isinstance(member, dict) else None, name + "[].")
    mentions = False
    for entity in _list(body, "entities"):
        if not isinstance(entity, dict) or not isinstance(entity.get("type"), str):
            raise Refused(400, "entities[] must be objects with a type")
        if entity["type"].lower() == "mention":
            mentioned = entity.get("mentioned")
            _account(mentioned if isinstance(mentioned, dict) else None, "entities[].mentioned.")
            _text(mentioned, "name", required=True, where="entities[].mentioned.")
            _text(entity, "text", where="entities[].")
            mentions = True
    if mentions:
        _text(body, "text", required=True)
    channel_data = _object(body, "channelData", required=body["channelId"] == "msteams")  # Teams always sends it
    for name in ("tenant", "team", "channel"):
        inner = _object(channel_data, name, where="channelData.")
        if inner:
            _identifier(inner, "id", required=True, where=f"channelData.{name}.")
    _text(channel_data, "eventType", where="channelData.")
    if body["type"] == "invoke" and body.get("name") == "adaptiveCard/action":  # Universal Actions: value.action
        action = _object(_object(body, "value", required=True), "action", required=True, where="value.")
        _object(action, "data", where="value.action.")
        _text(action, "verb", where="value.action.")


def _value(body: dict[str, Any] | None, name: str, kind: type, required: bool, where: str) -> Any:
    value = (body or {}).get(name)
    if value is None:
        if required:
            raise Refused(400, f"{where}{name} is missing")
        return None
    if not isinstance(value, kind) or (kind is str and not value):
        raise Refused(400, f"{where}{name} must be a {'non-empty string' if kind is str else kind.__name__}")
    return value


def _text(body: dict[str, Any] | None, name: str, *, required: bool = False, where: str = "") -> None:
    value = (body or {}).get(name)
    if value is None and required:
        raise Refused(400, f"{where}{name} is missing")
    if value is not None and not isinstance(value, str):
        raise Refused(400, f"{where}{name} must be a string")


def _identifier(body: dict[str, Any] | None, name: str, *, required: bool = False, where: str = "") -> None:
    value = _value(body, name, str, required, where)
    if value is not None and not _IDENTIFIER.match(value):
        raise Refused(400, f"{where}{name} is not an identifier")


def _object(body: dict[str, Any] | None, name: str, *, required: bool = False, where: str = "") -> dict[str, Any]:
    return _value(body, name, dict, required, where) or {}


def _list(body: dict[str, Any], name: str) -> list[Any]:
    return _value(body, name, list, False, "") or []


def _account(account: dict[str, Any] | None, where: str) -> None:
    if account is None:
        raise Refused(400, f"{where.rstrip('.')} must be an object")
    _identifier(account, "id", required=True, where=where)
    _identifier(account, "aadObjectId", where=where)
    _text(account, "name", where=where)


# What a Teams conversation id says of its conversation, in the forms real Teams traffic and Microsoft's docs and
# SDK tests show (tests/data/teams-payloads/README.md lists them and their sources):
# - a channel's threads: 19:...@thread.tacv2, or @thread.skype in older teams (the form older group chats had too),
#   with ;messageid=<thread root> after the channel's id;
# - group and meeting chats: 19:...@thread.v2 (meetings 19:meeting_...@thread.v2);
# - a personal chat with the bot: a:... (8:... is one person's id);
# - 19:<id>_<id>@unq.gbl.spaces: a chat that began between two (a person and the bot: personal; two people who
#   then added the bot or used its message extension: groupChat, as a real capture shows).
# Ids of other forms (the Agents Playground's, the Emulator's) say nothing.
_THREAD = re.compile(r"^(19:[^;@]+@thread\.(tacv2|skype|v2))(?:;messageid=\d+)?$", re.IGNORECASE)
_ONE_PERSON = re.compile(r"^(?:a:|8:)", re.IGNORECASE)
_TWO_PARTY = re.compile(r"^19:[^;@]+_[^;@]+@unq\.gbl\.spaces$", re.IGNORECASE)
_THREAD_KINDS = {"tacv2": frozenset({"channel"}), "skype": frozenset({"channel", "groupChat"}),
                 "v2": frozenset({"groupChat"})}
_KINDS = ("personal", "groupChat", "channel")
_SCOPED_TYPES = ("message", "invoke", "messageReaction")  # activities in one thread, sent where it is


@dataclass(frozen=True)
class Scope:
    """What an activity's body says of its conversation, once its parts agree: ``kind`` (personal, groupChat,
    channel; None when neither the conversation's type nor its id says), ``tenant`` (lower case; None when the body
    names none) and ``channel`` (the channel the conversation is in: from its id when the id is a channel thread's,
    else channelData's)."""

    kind: str | None
    tenant: str | None
    channel: str | None


def conversation_kinds(conversation_id: str) -> frozenset[str] | None:
    """The kinds of conversation a Teams conversation id can be; None when its form says nothing."""
    thread = _THREAD.match(conversation_id)
    if thread:
        return _THREAD_KINDS[thread.group(2).lower()]
    if _TWO_PARTY.match(conversation_id):
        return frozenset({"personal", "groupChat"})
    return frozenset({"personal"}) if _ONE_PERSON.match(conversation_id) else None


def thread_channel(conversation_id: str) -> str | None:
    """The channel of a channel thread's conversation id ("19:x@thread.tacv2;messageid=1" -> "19:x@thread.tacv2")."""
    thread = _THREAD.match(conversation_id)
    return thread.group(1) if thread and "channel" in _THREAD_KINDS[thread.group(2).lower()] else None


def conversation_scope(body: dict[str, Any]) -> Scope:
    """The conversation's kind, tenant and channel, decided from every part of the body that names them: the
    conversation id's form, conversation.conversationType and isGroup, channelData's team and channel, and every
    tenant the body names (conversation.tenantId, in any spelling, and channelData.tenant). ``Refused`` (403) when
    they disagree: a body that says one thing in one place and another elsewhere is not what the channel sent.
    A body that does not state its type gets the one its id or channelData implies (written into the body, so the
    turn sees it too)."""
    conversation = body["conversation"]
    conversation_id: str = conversation["id"]
    declared = conversation.get("conversationType")
    raw = body.get("channelData")
    channel_data: dict[str, Any] = raw if isinstance(raw, dict) else {}
    in_team = any(isinstance(channel_data.get(name), dict) for name in ("team", "channel"))
    possible = conversation_kinds(conversation_id)
    said = declared if declared in _KINDS else "unknown"  # the reason is logged and answered: no text of the body's
    if declared is not None and possible is not None and declared not in possible:
        raise Refused(403, f"a {said} conversation with the id of a {' or '.join(sorted(possible))} one")
    if in_team and (declared not in (None, "channel") or (possible is not None and "channel" not in possible)):
        raise Refused(403, f"channelData names a team or channel of a {said if declared else 'non-channel'} "
                           "conversation")
    kind = declared or ("channel" if in_team else None)
    if kind is None and possible is not None:
        if len(possible) > 1:
            raise Refused(403, "the conversation's type is not stated and its id does not say it")
        [kind] = possible
    if kind == "personal" and conversation.get("isGroup") is True:
        raise Refused(403, "a personal conversation that says it is a group")
    if declared is None and kind is not None:
        conversation["conversationType"] = kind
    channel = thread_channel(conversation_id)
    named = channel_data.get("channel", {}).get("id") if isinstance(channel_data.get("channel"), dict) else None
    if channel is not None and named is not None and named.lower() != channel.lower() \
            and body.get("type") in _SCOPED_TYPES:
        raise Refused(403, "channelData names another channel than the conversation's")
    named_tenants = [(f"conversation.{key}", value) for key, value in conversation.items() if key.lower() == "tenantid"]
    if isinstance(channel_data.get("tenant"), dict):
        named_tenants.append(("channelData.tenant.id", channel_data["tenant"].get("id")))
    tenants = set()
    for where, value in named_tenants:
        if value is not None:
            if not isinstance(value, str):
                raise Refused(400, f"{where} must be a string")
            tenants.add(value.lower())
    if len(tenants) > 1:
        raise Refused(403, "the activity names more than one tenant")
    return Scope(kind, next(iter(tenants), None), channel or named)


def check_token_tenant(scope: Scope, claims: dict[str, Any]) -> None:
    """``Refused`` (403) when the channel's token names a tenant (tid) and the body another."""
    tenant = claims.get("tid")
    if isinstance(tenant, str) and scope.tenant is not None and tenant.lower() != scope.tenant:
        raise Refused(403, "the token's tenant is not the activity's")


_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
_DEFAULT_PORTS = {"https": 443, "http": 80}


@dataclass(frozen=True)
class _Address:
    """A serviceUrl taken apart: scheme, host (lower case, IPv6 without brackets), port (None: not given), path
    segments. Only what a Bot Framework serviceUrl is: http(s), a DNS name or IP address, an optional port, a
    plain path; no user info, query, fragment, backslash, percent-encoding or dot segment."""

    scheme: str
    host: str
    port: int | None
    segments: tuple[str, ...]

    @staticmethod
    def parse(url: str, *, pattern: bool = False) -> _Address | None:
        if not url.isascii() or any(c in url for c in "?#\\%@") or not url.isprintable() or " " in url:
            return None
        try:
            parts = urlsplit(url)
            port = -1 if pattern and parts.netloc.endswith(":*") else parts.port  # -1: any port given
        except ValueError:  # a port that is not a number, brackets that are not an IPv6 address
            return None
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
        if scheme not in _DEFAULT_PORTS or not host:
            return None
        if ":" in host:  # an IPv6 literal, given in brackets
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                return None
        elif not _HOST.match(host.removeprefix("*.") if pattern else host):
            return None
        if pattern and not parts.path:
            return _Address(scheme, host, port, ("*",))  # no path: any path
        segments = tuple((parts.path or "/").split("/")[1:])
        if any(segment in (".", "..") for segment in segments):
            return None
        return _Address(scheme, host, port, segments)


def _segment_matches(pattern: str, segment: str) -> bool:
    """``*`` in a pattern's path segment stands for any characters of that one segment (never a '/')."""
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), segment) is not None


@dataclass(frozen=True)
class ServiceUrls:
    """The serviceUrls the bot may send to (it posts its replies there, with its credentials), as URL patterns
    matched part by part: the scheme exactly; the host exactly, or ``*.`` + a domain for one or more DNS labels
    under that domain (``https://*.botframework.com/*``); the port exactly (none given: none or the scheme's
    default), or ``:*`` for any port given; the path segment by segment, a ``*`` standing for characters of one
    segment, and a last segment ``*`` for the rest of the path, however long (no path: any path). A serviceUrl
    with user info, a query, a fragment, a backslash, percent-encoding or a dot segment matches nothing."""

    patterns: tuple[str, ...]
    _parsed: tuple[_Address, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parsed = []
        for pattern in self.patterns:
            address = _Address.parse(pattern, pattern=True)
            if address is None or "*" in address.host.removeprefix("*."):
                raise ValueError(f"{pattern[:80]!r} is not a serviceUrl pattern such as https://*.botframework.com/*")
            parsed.append(address)
        object.__setattr__(self, "_parsed", tuple(parsed))

    def allows(self, url: str) -> bool:
        address = _Address.parse(url)
        return address is not None and any(_matches(pattern, address) for pattern in self._parsed)


def _matches(pattern: _Address, url: _Address) -> bool:
    if pattern.scheme != url.scheme:
        return False
    if pattern.host.startswith("*."):  # one or more whole labels (the URL's host is made of valid labels only)
        if not url.host.endswith(pattern.host[1:]) or len(url.host) < len(pattern.host):
            return False
    elif pattern.host != url.host:
        return False
    if pattern.port == -1:
        if url.port is None:
            return False
    elif (pattern.port or _DEFAULT_PORTS[pattern.scheme]) != (url.port or _DEFAULT_PORTS[url.scheme]):
        return False
    wanted, given = pattern.segments, url.segments
    if wanted[-1] == "*":  # the rest of the path, however long
        wanted = wanted[:-1]
        if len(given) < len(wanted):
            return False
        given = given[:len(wanted)]
    return len(wanted) == len(given) and all(_segment_matches(w, g) for w, g in zip(wanted, given, strict=True))


@dataclass
class _Key:
    key: Any
    endorsements: frozenset[str]


@dataclass
class SigningKeys:
    """The Bot Framework's signing keys from its OpenID metadata: fetched with a timeout, cached, refreshed
    when stale or when an unknown key id is seen (rate limited); one fetch at a time, shared by all waiters."""

    metadata_url: str
    timeout_s: float = FETCH_TIMEOUT_S
    wait_s: float = FETCH_WAIT_S
    _keys: dict[str, _Key] = field(default_factory=dict)
    _fetched_at: float = float("-inf")
    _failed_at: float = float("-inf")
    _fetch: asyncio.Task[None] | None = None
    _session: aiohttp.ClientSession | None = None

    async def get(self, kid: str) -> _Key:
        now = time.monotonic()
        stale = now - self._fetched_at > KEYS_FRESH_S
        unknown = kid not in self._keys and now - self._fetched_at > UNKNOWN_KID_REFRESH_S
        if stale or unknown:
            await self._refresh(now)
        key = self._keys.get(kid)
        if key is None:
            raise Refused(401, "token signed with an unknown key")
        return key

    async def problem(self) -> str | None:
        """Why an activity could not be authenticated now (no keys, and none to be fetched), or None (/readyz): keys
        held, even stale ones a failed refresh keeps, or fetched now."""
        now = time.monotonic()
        if self._keys and now - self._fetched_at <= KEYS_FRESH_S:
            return None
        try:
            await self._refresh(now)
        except Refused as refused:
            return refused.reason
        return None if self._keys else "signing keys not fetched yet"

    async def _refresh(self, now: float) -> None:
        if self._fetch is None or self._fetch.done():
            if now - self._failed_at < FAILURE_BACKOFF_S:
                if self._keys:
                    return  # keep using the keys we have
                raise Refused(503, "signing keys unavailable (recent fetch failed)")
            self._fetch = asyncio.get_running_loop().create_task(self._load())
        try:
            await asyncio.wait_for(asyncio.shield(self._fetch), self.wait_s)
        except TimeoutError:
            if not self._keys:
                raise Refused(503, "signing keys not fetched yet") from None
        except Exception:  # noqa: BLE001 - _load logged it
            if not self._keys:
                raise Refused(503, "signing keys unavailable") from None

    async def _load(self) -> None:
        try:
            metadata = await self._document(self.metadata_url)
            jwks = await self._document(str(metadata.get("jwks_uri") or ""))
            keys = {}
            for entry in jwks.get("keys") or []:
                if isinstance(entry, dict) and entry.get("kty") == "RSA" and isinstance(entry.get("kid"), str):
                    endorsed = entry.get("endorsements")
                    keys[entry["kid"]] = _Key(RSAAlgorithm.from_jwk(json.dumps(entry)),
                                              frozenset(endorsed) if isinstance(endorsed, list) else frozenset())
            if not keys:
                raise ValueError("no RSA keys in the key set")
        except Exception as error:
            self._failed_at = time.monotonic()
            log.warning("could not fetch the Bot Framework signing keys: %s", type(error).__name__)
            raise
        self._keys, self._fetched_at = keys, time.monotonic()
        log.info("fetched %d Bot Framework signing keys", len(keys))

    async def _document(self, url: str) -> dict[str, Any]:
        if not url.startswith(("https://", "http://")):
            raise ValueError("no jwks_uri in the OpenID metadata")
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        async with self._session.get(url) as response:
            response.raise_for_status()
            body = await response.content.read(MAX_DOCUMENT_BYTES + 1)
            if len(body) > MAX_DOCUMENT_BYTES:
                raise ValueError("OpenID document too large")
            document = json.loads(body)
        if not isinstance(document, dict):
            raise ValueError("OpenID document is not an object")
        return document

    async def close(self) -> None:
        if self._fetch is not None and not self._fetch.done():
            self._fetch.cancel()
        if self._session is not None:
            await self._session.close()


@dataclass
class ChannelTokens:
    """Checks the Authorization header of an activity from the Bot Framework channel."""

    app_id: str
    keys: SigningKeys
    tenants: frozenset[str] = frozenset()  # a token naming a tenant (tid) must name one of these
    issuers: tuple[str, ...] = (CHANNEL_ISSUER,)

    async def claims(self, authorization: str, channel_id: str | None, service_url: str) -> dict[str, Any]:
        """The token's verified claims; ``Refused`` (401, or 503 when the keys cannot be had) otherwise."""
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused(401, "no bearer token")
        token = token.strip()
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Refused(401, "malformed token") from None
        if header.get("alg") != "RS256":
            raise Refused(401, f"token algorithm {str(header.get('alg'))[:16]!r} not accepted")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise Refused(401, "token names no signing key")
        key = await self.keys.get(kid)
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key.key, algorithms=["RS256"], audience=self.app_id, issuer=list(self.issuers),
                leeway=CLOCK_SKEW_S, options={"require": ["exp", "iss", "aud"]})
        except jwt.PyJWTError as error:
            raise Refused(401, f"token rejected: {type(error).__name__}") from None
        if key.endorsements and (channel_id or "") not in key.endorsements:
            raise Refused(401, "signing key not endorsed for this channel")
        if claims.get("serviceurl") != service_url:
            raise Refused(401, "token does not name this serviceUrl")
        tenant = claims.get("tid")
        if tenant is not None and self.tenants and str(tenant).lower() not in self.tenants:
            raise Refused(401, "token from another tenant")
        return claims | {"aud": self.app_id}  # botbuilder reads the bot's app id from aud (a list is valid JWT)
