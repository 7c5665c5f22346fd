"""What an investigated value is: an account (UPN, DOMAIN\\user or SID; its Entra object id with entity_type), a host
(its name, FQDN, or Defender or Entra device id with entity_type), an IP, a file hash (MD5, SHA-1, SHA-256), a URL or a
domain, detected from the value or checked against the kind the caller gives. Each is then looked for in every column
the table catalog names for its kind (an account's UPN, SID and object id columns alike).

The value is attacker-reachable text (it comes from alerts, through the model), so anything that is not plainly one
of these kinds is refused with a message that says what would be accepted: control characters, spaces, quotes and
pipes, non-ASCII letters (look-alikes: a Cyrillic or full-width "a"), over-long values, and single words
that could be an account or a host alike. An accepted value still reaches KQL only as an escaped literal.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from dataclasses import dataclass

from bot.sentinel.params import InvalidParameter


class EntityKind(enum.Enum):
    ACCOUNT = "account"
    HOST = "host"
    IP = "ip"
    HASH = "hash"
    URL = "url"
    DOMAIN = "domain"


MAX_VALUE_LENGTH = 512  # a URL an analyst pastes; longer text is not one entity
_HASH_LENGTHS = {32: "MD5", 40: "SHA1", 64: "SHA256"}
_HEX = re.compile(r"[0-9a-fA-F]+")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DOMAIN = re.compile(rf"(?:{_LABEL}\.)+[A-Za-z][A-Za-z0-9-]{{0,62}}")
_HOST = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_SIGN_IN_NAME = re.compile(r"[A-Za-z0-9._%+'-]{1,64}")  # a UPN's part before the "@" ("victor.alvarez")
_UPN = re.compile(rf"{_SIGN_IN_NAME.pattern}@{_DOMAIN.pattern}")
_DOWN_LEVEL = re.compile(r"[A-Za-z0-9._-]{1,64}\\[A-Za-z0-9._ -]{1,64}")
_URL = re.compile(r"https?://[\x21-\x7e]+", re.IGNORECASE)
_SID = re.compile(r"S-1-\d{1,13}(?:-\d{1,10}){1,15}", re.IGNORECASE)  # a Windows security identifier: an account
_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_URL_FORBIDDEN = set("\"'`<>\\|{}^")  # characters no URL needs unescaped, and that quote or pipe text
KINDS_TEXT = ", ".join(k.value for k in EntityKind)


@dataclass(frozen=True)
class Entity:
    """An investigated entity: its kind and its value as the tables hold it (hashes lower case)."""

    kind: EntityKind
    value: str

    @property
    def hash_algorithm(self) -> str:
        """MD5, SHA1 or SHA256 for a hash; "" otherwise."""
        return _HASH_LENGTHS.get(len(self.value), "") if self.kind is EntityKind.HASH else ""

    @property
    def label(self) -> str:
        return f"{self.kind.value} {self.value}"


def parse_kind(value: object) -> EntityKind | None:
    """The kind a caller names (also "user", "file", "filehash", "device"), or None to detect it."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InvalidParameter("entity_type", f"must be one of: {KINDS_TEXT}")
    word = value.strip().lower()
    word = {"user": "account", "upn": "account", "file": "hash", "filehash": "hash", "device": "host",
            "machine": "host", "address": "ip", "dns": "domain"}.get(word, word)
    try:
        return EntityKind(word)
    except ValueError:
        raise InvalidParameter("entity_type", f"{value[:40]!r} is not one of: {KINDS_TEXT}") from None


def detect(value: object, kind: EntityKind | None = None) -> Entity:
    """The entity ``value`` names (of ``kind`` when given); InvalidParameter saying what is accepted otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidParameter("entity", "give an account (UPN), host, IP, file hash, URL or domain")
    text = value.strip()
    if len(text) > MAX_VALUE_LENGTH:
        raise InvalidParameter("entity", f"is {len(text):,} characters long (at most {MAX_VALUE_LENGTH}): "
                                         "give one account, host, IP, hash, URL or domain")
    if not text.isascii():
        raise InvalidParameter("entity", f"{_shown(text)} has non-ASCII characters (look-alike letters?): type the "
                                         "value as the logs hold it, e.g. alice@contoso.com or WS-FIN-042")
    if any(ch.isspace() or not ch.isprintable() for ch in text) and not _DOWN_LEVEL.fullmatch(text):
        raise InvalidParameter("entity", f"{_shown(text)} has spaces or control characters: give one value")
    found = _detected(text)
    if kind is None:
        if found is None:
            raise InvalidParameter("entity", f"{_shown(text)} is not an account, host, IP, hash, URL or domain "
                                             "I can recognise; give entity_type if it is one")
        if found is _OBJECT_ID:
            raise InvalidParameter("entity", f"{_shown(text)} is an object id: an account's (Entra user) or a "
                                             "device's; give entity_type (account or host)")
        if not isinstance(found, EntityKind):
            raise InvalidParameter("entity", f"{_shown(text)} could be an account or a host: give entity_type "
                                             "(account or host), or the account's UPN (name@domain)")
        kind = found
    elif found in _PLAIN and found is not kind and not (found is EntityKind.HASH and kind is EntityKind.HOST):
        # "10.0.0.5" given as an account: refused with the form to send. (A host's Defender device id is 40 hex
        # digits, as a SHA-1 is: a hash-like value stays a host when given as one.)
        raise InvalidParameter("entity", f"{_shown(text)} is {_ARTICLE[found]}, not {_ARTICLE[kind]}: send it without "
                                         f"a type (investigate {text}), or give {_FORMS[kind]}")
    if not _fits(text, kind):
        raise InvalidParameter("entity", f"{_shown(text)} is not a valid {kind.value}")
    return Entity(kind, text.lower() if kind is EntityKind.HASH else text)


# Kinds a value plainly is whatever type it was given as (an address, a hash, a URL cannot be an account or host).
_PLAIN = (EntityKind.IP, EntityKind.HASH, EntityKind.URL)
_ARTICLE = {EntityKind.ACCOUNT: "an account", EntityKind.HOST: "a host", EntityKind.IP: "an IP address",
            EntityKind.HASH: "a file hash", EntityKind.URL: "a URL", EntityKind.DOMAIN: "a domain"}
_FORMS = {EntityKind.ACCOUNT: "the account as a UPN (name@domain), DOMAIN\\name, sign-in name or SID",
          EntityKind.HOST: "the host's name or FQDN", EntityKind.IP: "an IPv4 or IPv6 address",
          EntityKind.HASH: "an MD5, SHA-1 or SHA-256 hash", EntityKind.URL: "the whole URL (https://...)",
          EntityKind.DOMAIN: "the domain name (example.com)"}
_AMBIGUOUS = object()
_OBJECT_ID = object()


def _detected(text: str) -> EntityKind | object | None:
    """The one kind ``text`` plainly is, _AMBIGUOUS for a single word, None when nothing fits."""
    for kind in (EntityKind.IP, EntityKind.HASH, EntityKind.URL, EntityKind.DOMAIN):
        if _fits(text, kind):
            return kind
    if _UPN.fullmatch(text) or _DOWN_LEVEL.fullmatch(text) or _SID.fullmatch(text):
        return EntityKind.ACCOUNT
    if _GUID.fullmatch(text):  # an Entra object id: a user's or a device's
        return _OBJECT_ID
    if re.fullmatch(_LABEL, text):
        # "WS-FIN-042" (digits or hyphens) reads as a machine; "alice" could be either.
        return EntityKind.HOST if re.search(r"[\d-]", text) else _AMBIGUOUS
    return None


def _fits(text: str, kind: EntityKind) -> bool:
    match kind:
        case EntityKind.IP:
            try:
                ipaddress.ip_address(text)
            except ValueError:
                return False
            return True
        case EntityKind.HASH:
            return len(text) in _HASH_LENGTHS and _HEX.fullmatch(text) is not None
        case EntityKind.URL:
            return _URL.fullmatch(text) is not None and not _URL_FORBIDDEN.intersection(text)
        case EntityKind.ACCOUNT:
            return bool(_UPN.fullmatch(text) or _DOWN_LEVEL.fullmatch(text) or re.fullmatch(_LABEL, text)
                        or _SIGN_IN_NAME.fullmatch(text))
        case EntityKind.DOMAIN:
            return len(text) <= 253 and _DOMAIN.fullmatch(text) is not None and not _fits(text, EntityKind.IP)
        case EntityKind.HOST:
            return len(text) <= 253 and _HOST.fullmatch(text) is not None and not _fits(text, EntityKind.IP)
    return False


def is_sign_in_name(text: str) -> bool:
    """A sign-in name alone, without its domain ("victor.alvarez", "alice"): not a UPN, DOMAIN\\name, SID or id."""
    return _SIGN_IN_NAME.fullmatch(text) is not None and not _SID.fullmatch(text) and not _GUID.fullmatch(text)


def _shown(text: str) -> str:
    return repr(text[:60] + ("…" if len(text) > 60 else ""))
