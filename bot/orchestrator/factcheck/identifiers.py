"""Identifiers in free text: incident numbers, [n], IPs, hosts, domains, accounts, hashes, URLs, files, ids.

Used both ways by the fact check: on the model's answer (what it cites) and on the text fields of the
records the tools returned (what it may cite). Each identifier is a whole token, normalised so the same
thing compares equal however it is written: case, defanged forms ("10[.]1[.]2[.]3", "hxxp://"),
trailing punctuation, thousands separators in incident numbers ("14,448"). Counts ("14 are High"),
rankings ("the #1 concern"), percentages, dates and times are not identifiers.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


class IdKind(StrEnum):
    INCIDENT = "incident"
    REFERENCE = "reference"
    IP = "ip"
    HOST = "host"
    DOMAIN = "domain"
    ACCOUNT = "account"
    HASH = "hash"
    URL = "url"
    FILE = "file"
    ALERT_ID = "alert id"


@dataclass(frozen=True)
class Identifier:
    kind: IdKind
    value: str  # normalised: compare these
    start: int  # span in the text it was found in
    end: int

    def describe(self) -> str:
        if self.kind is IdKind.INCIDENT:
            return f"incident #{self.value}"
        if self.kind is IdKind.REFERENCE:
            return f"[{self.value}]"
        return f"{_LABELS.get(self.kind, self.kind.value)} {self.value}"


_LABELS = {IdKind.IP: "IP", IdKind.URL: "URL", IdKind.HASH: "hash", IdKind.FILE: "file"}


# A dot, or one of the ways threat reports defang it.
_DOT = r"(?:\[\.\]|\(\.\)|\{\.\}|\[dot\]|\(dot\)|\.)"
_REFANG = [(re.compile(r"\[\.\]|\(\.\)|\{\.\}|\[dot\]|\(dot\)", re.IGNORECASE), "."),
           (re.compile(r"\[@\]|\[at\]|\(at\)", re.IGNORECASE), "@"),
           (re.compile(r"\[:\]"), ":"),
           (re.compile(r"^hxxp", re.IGNORECASE), "http"),
           (re.compile(r"^fxp", re.IGNORECASE), "ftp")]
_TRAILING = ".,;:!?'\"*_`"

_URL = re.compile(r"\b(?:https?|hxxps?|ftp|fxp)(?:://|\[://\]|\[:\]//)(?:[^\s<>\"'()\[\]`]|\[\.\]|\[dot\])+",
                  re.IGNORECASE)
_EMAIL = re.compile(rf"(?<![\w.+-])[A-Za-z0-9._%+-]{{1,64}}(?:@|\[@\]|\[at\])[A-Za-z0-9-]{{1,63}}"
                    rf"(?:{_DOT}[A-Za-z0-9-]{{1,63}})+")
_DOMAIN_USER = re.compile(r"(?<![\\:/\w.])([A-Za-z][A-Za-z0-9-]{0,14})\\{1,2}([A-Za-z0-9._$-]{1,64})(?![\\\w])")
_GUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_HASH = re.compile(r"(?<![\w-])(?:[0-9a-fA-F]{64}|[0-9a-fA-F]{40}|[0-9a-fA-F]{32})(?![\w-])")
_IPV4 = re.compile(rf"(?<![\w.])\d{{1,3}}(?:{_DOT}\d{{1,3}}){{3}}(?!\w|\.\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?:%\w+)?(?![\w:])")
_FILE_EXTENSIONS = ("exe|dll|ps1|psm1|bat|cmd|vbs|vbe|js|jse|hta|msi|zip|rar|7z|docm|xlsm|docx|doc|xlsx|xls|pdf|"
                    "scr|lnk|sys|iso|img|sh|py|jar|bin|elf|so|tmp|dat|wsf|one|html?|svg|csv|txt|log")
_FILE = re.compile(rf"(?<![\w.-])[\w$~-][\w$~.-]{{0,200}}\.(?:{_FILE_EXTENSIONS})(?![\w-]|\.\w)", re.IGNORECASE)
# A host or domain name; the last label must be a known top-level domain or a common internal suffix, so
# "System.Management" or "Microsoft.SecurityInsights" are not read as domains.
_TLDS = ("com|net|org|io|local|corp|lan|internal|intranet|ad|gov|edu|mil|int|info|biz|xyz|top|co|uk|de|fr|nl|"
         "ru|cn|jp|kr|in|br|au|ca|us|eu|ch|se|no|fi|dk|pl|cz|it|es|pt|ir|kp|ua|by|su|tk|ml|ga|cf|gq|cc|tv|ws|me|"
         "app|dev|cloud|site|online|live|shop|club|icu|buzz|onion|zip|mov|click|link|work|pw|vip|win|host|"
         "microsoft|windows|azure|onmicrosoft")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DOMAIN = re.compile(rf"(?<![\w@.-])(?:{_LABEL}{_DOT})+(?:{_TLDS})(?![\w-]|{_DOT}\w)", re.IGNORECASE)
# Hosts without a domain: upper-case names with a hyphen and a digit (WS-FIN-160, SRV-DC-01), or any name
# right after "host"/"device"/... that has a digit or an inner capital (MSTICAlertsLxVM2).
_HOST_SHAPE = re.compile(r"(?<![\w.-])[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+(?![\w-])")
_HOST_AFTER_WORD = re.compile(r"\b(?:hosts?|devices?|machines?|servers?|workstations?|endpoints?|computers?|laptops?|"
                              r"vms?)\s+(?:named\s+|called\s+)?[`'\"]?([A-Za-z][\w-]{2,62})", re.IGNORECASE)
_NOT_HOSTS = re.compile(r"^(?:CVE|CWE|SHA|MD|AES|RSA|UTF|ISO|RFC|TLS|SSL|KB|MS|INC|TA|T|CAPEC|ID|UTC|GMT|SEV|IPV|"
                        r"HTTP|HTTPS|X|COVID|WIN|PS|NTLM|SMB|RDP|DNS)(?:-|\d|$)")

# Incident numbers: "#14448", "incident 14448", "incident ID: 14448", "incidents 12, 13, and 14", "case 7",
# "INC-14485". A run of numbers continues through commas, "and", "or", "&" and "/".
_NUMBER = r"#?\s?\d{1,3}(?:,\d{3})+(?!\d)|#?\s?\d{1,10}"
_RUN = rf"(?:{_NUMBER})(?:\s*(?:,\s*(?:and|or|&)?|and|or|&|/)\s*(?:{_NUMBER}))*"
_INCIDENT_WORDS = re.compile(
    rf"\b(?:incidents?|cases?|tickets?)(?:\s+|\s*[:#]\s*)(?:(?:id|ids|number|numbers|no\.?|nr\.?)\s*[:#]?\s*)?({_RUN})",
    re.IGNORECASE)
_HASH_RUN = re.compile(rf"(?<![\w&/])#\s?\d[\d,]*(?:\s*(?:,\s*(?:and|or|&)?|and|or|&|/)\s*(?:{_NUMBER}))*")
_INC_PREFIX = re.compile(r"\bINC-?(\d{2,10})\b", re.IGNORECASE)
_ONE_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?!\d)|\d{1,10}")
# What follows a number that makes it a count or a rank, not an incident number.
_COUNTED = re.compile(r"\s*(?:%|percent\b|(?:of\s+(?:them|these|those|the)\b)|(?:are|were|is|was|have|had|has|new|"
                      r"open|active|closed|high|medium|low|informational|incidents?|alerts?|entities|hours?|days?|"
                      r"minutes?|more|times?|in\s+total|total)\b)", re.IGNORECASE)
_COUNTED_NOUN = re.compile(r"\s*(?:%|percent\b|incidents?\b|alerts?\b|entities\b|hours?\b|days?\b)", re.IGNORECASE)
_RANKED = re.compile(r"\s*(?:priority|concern|risk|issue|threat|thing|item|focus|target|offender|spot|place|pick|"
                     r"recommendation|choice|rank|reason|culprit|suspect|lead|source|entity|takeaway|step|"
                     r"finding|question)\b", re.IGNORECASE)
_REFERENCE = re.compile(r"\[(\d{1,4})\](?!\()")

_Add = Callable[["IdKind", str, int, int], None]  # extract()'s collector, for the helpers below


def normalise(kind: IdKind, raw: str) -> str:
    """The comparable form of an identifier of ``kind``."""
    text = raw.strip().rstrip(_TRAILING)
    for pattern, replacement in _REFANG:
        text = pattern.sub(replacement, text)
    if kind is IdKind.URL:
        scheme, _, rest = text.partition("://")
        host, slash, path = rest.partition("/")
        text = f"{scheme.lower()}://{host.lower()}{slash}{path}".rstrip("/")
        return text
    if kind is IdKind.ACCOUNT:
        return text.replace("\\\\", "\\").lower()
    if kind is IdKind.IP:
        try:
            return ipaddress.ip_address(text.split("%")[0]).compressed
        except ValueError:
            return text.lower()
    if kind is IdKind.INCIDENT:
        return text.lstrip("#").replace(",", "").strip()
    return text.lower()


def host_variants(value: str) -> set[str]:
    """A host as its full name and its first label (ws-fin-160.contoso.local is also ws-fin-160)."""
    name = value.strip().lower().rstrip(".")
    return {name, name.split(".", 1)[0]} if name else set()


CACHED_TEXT_CHARS = 512  # titles and entity values: the same ones come back turn after turn


def extract(text: str) -> list[Identifier]:
    """Every identifier in ``text``, in order of position. Overlapping matches keep the most specific kind
    (a URL over the domain inside it, a file name over a domain, an e-mail address over its domain)."""
    if len(text) <= CACHED_TEXT_CHARS:
        # Every tool result's titles and entity values are read again for the fact check, and a conversation asks
        # about the same incidents over and over: a dozen regular expressions over each was a sixth of a turn's CPU.
        return list(_extract_short(text))
    return _extract(text)


@functools.lru_cache(maxsize=8192)
def _extract_short(text: str) -> tuple[Identifier, ...]:
    return tuple(_extract(text))


def _extract(text: str) -> list[Identifier]:
    found: list[Identifier] = []
    taken = bytearray(len(text) + 1)  # 1 where an identifier already is: checking a span costs its length

    def add(kind: IdKind, raw: str, start: int, end: int) -> None:
        if any(taken[start:end]):
            return
        value = normalise(kind, raw)
        if value:
            found.append(Identifier(kind, value, start, end))
            taken[start:end] = b"\x01" * (end - start)

    for m in _URL.finditer(text):
        raw = m.group(0).rstrip(_TRAILING + ")")
        add(IdKind.URL, raw, m.start(), m.start() + len(raw))
    for m in _EMAIL.finditer(text):
        add(IdKind.ACCOUNT, m.group(0), m.start(), m.end())
    for m in _DOMAIN_USER.finditer(text):
        add(IdKind.ACCOUNT, m.group(0), m.start(), m.end())
    for m in _GUID.finditer(text):
        add(IdKind.ALERT_ID, m.group(0), m.start(), m.end())
    for m in _HASH.finditer(text):
        if any(c.isdigit() for c in m.group(0)) and any(c.isalpha() for c in m.group(0)):
            add(IdKind.HASH, m.group(0), m.start(), m.end())
    for m in _IPV4.finditer(text):
        if _is_ip(normalise(IdKind.IP, m.group(0))):
            add(IdKind.IP, m.group(0), m.start(), m.end())
    for m in _IPV6.finditer(text):
        candidate = m.group(0)
        if candidate.count(":") >= 2 and any(c.isalnum() for c in candidate) and _is_ip(candidate.split("%")[0]):
            add(IdKind.IP, candidate, m.start(), m.end())
    for m in _FILE.finditer(text):
        add(IdKind.FILE, m.group(0), m.start(), m.end())
    for m in _DOMAIN.finditer(text):
        add(IdKind.DOMAIN, m.group(0), m.start(), m.end())
    _incidents(text, add)
    for m in _HOST_SHAPE.finditer(text):
        if not _NOT_HOSTS.match(m.group(0)):
            add(IdKind.HOST, m.group(0), m.start(), m.end())
    for m in _HOST_AFTER_WORD.finditer(text):
        name = m.group(1)
        looks_named = any(c.isdigit() for c in name) or any(c.isupper() for c in name[1:])
        if looks_named and not _NOT_HOSTS.match(name.upper()):
            add(IdKind.HOST, name, m.start(1), m.end(1))
    for m in _REFERENCE.finditer(text):
        add(IdKind.REFERENCE, m.group(1), m.start(), m.end())
    return sorted(found, key=lambda i: i.start)


def incident_numbers(text: str) -> list[int]:
    """The incident numbers ``text`` names, in order, each once."""
    return list(dict.fromkeys(int(i.value) for i in extract(text) if i.kind is IdKind.INCIDENT))


def _incidents(text: str, add: _Add) -> None:
    for m in _INC_PREFIX.finditer(text):
        add(IdKind.INCIDENT, m.group(1), m.start(), m.end())
    for m in _INCIDENT_WORDS.finditer(text):
        word = re.match(r"[A-Za-z]+", m.group(0))
        plural = bool(word and word.group(0).lower().endswith("s"))
        if plural and ":" in m.group(0)[:m.start(1) - m.start()] and len(_ONE_NUMBER.findall(m.group(1))) == 1:
            continue  # "Open incidents: 34": a count under its label
        _run(text, m.start(1), m.group(1), add, plural=plural)
    for m in _HASH_RUN.finditer(text):
        _run(text, m.start(), m.group(0), add, plural=False, hashed=True)


def _run(text: str, offset: int, run: str, add: _Add, *, plural: bool, hashed: bool = False) -> None:
    numbers = list(_ONE_NUMBER.finditer(run))
    for index, number in enumerate(numbers):
        start, end = offset + number.start(), offset + number.end()
        after = text[end:end + 40]
        if index == 0 and hashed and _is_rank(text, start, int(number.group(0).replace(",", "")), after):
            return
        if len(numbers) == 1 and plural and _COUNTED.match(after):
            return  # "incidents 14 are High": a count
        if len(numbers) == 1 and _COUNTED_NOUN.match(after):
            return  # "#3 alerts", "incident 14,448 alerts": not an incident number
        mark_start = start - 1 if start > 0 and text[start - 1] == "#" else start
        add(IdKind.INCIDENT, number.group(0), mark_start, end)


def _is_rank(text: str, start: int, number: int, after: str) -> bool:
    """"the #1 concern", "our #2 priority": a rank, not incident 1."""
    if _RANKED.match(after):
        return True
    before = text[max(0, start - 12):start].lower()
    return number <= 10 and bool(re.search(r"\b(?:the|our|your|my|a|top|no\.?|number)\s*#?\s*$", before))


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
