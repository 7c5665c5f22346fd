"""The counterparties an investigated entity touched, read from its evidence rows: the addresses and domains it
connected to or signed in from, the URLs it clicked, the senders that mailed it, the files (hashes) it ran or wrote.
An investigation looks them up in threat intelligence in a second round (``evidence_counterparty_intel``), and the
assessment cites, for a listed one, both the indicator and the rows that touched it. Pure.

How a row touched a counterparty decides how much a listed one says (``Touch``): an outbound connection made, a
click let through, a process run or file written with its hash is contact ("contact"); a successful sign-in or logon
from its address is a sign-in ("signin"); a delivered message from it is mail ("mail"); a failed, blocked or inbound
connection, a failed sign-in or logon, a risk detection's or UEBA activity's address is an attempt ("attempt").
Values are log data, attacker-writable: only valid IPs, domains, URLs, hashes and
e-mail addresses are kept (``counterparty_intel.counterparty``), private and loopback addresses are left out (no
feed lists them), and so is the entity itself (``evidence_threat_intel`` reads it)."""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from bot.investigation.models import Section
from bot.sentinel.evidence import (
    BehaviorEvent,
    EmailMessage,
    FileEvent,
    LogonEvent,
    NetworkEvent,
    ProcessEvent,
    RiskDetection,
    SigninGroup,
    UrlClick,
)
from bot.sentinel.queries.evidence.counterparty_intel import MAX_COUNTERPARTIES, counterparty

TOOL = "evidence_counterparty_intel"


class Touch(enum.IntEnum):
    ATTEMPT = 1
    MAIL = 2
    SIGNIN = 3
    CONTACT = 4


@dataclass(frozen=True)
class Touched:
    """One counterparty a row touched: its value (lower case), the row ("E12") and how."""

    value: str
    ref: str
    touch: Touch


_LOCAL = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16",
    "::1/128", "fc00::/7", "fe80::/10"))


def _local(value: str) -> bool:
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return False
    return any(address in network for network in _LOCAL if network.version == address.version)


def _values(value: str) -> Iterable[str]:
    """A cell's counterparties: the value, and a URL's host too (feeds list a domain more often than a URL)."""
    yield value
    if "://" in value:
        try:
            host = urlsplit(value).hostname
        except ValueError:
            host = None
        if host:
            yield host


def _row(record: object) -> Iterable[tuple[str, Touch]]:
    """(cell, how) of the counterparties one evidence row names."""
    if isinstance(record, NetworkEvent):
        # A connection the device made; one it refused or failed, or one that came in to it, is the other side's try.
        attempt = any(w in record.action.lower() for w in ("fail", "block", "inbound"))
        how = Touch.ATTEMPT if attempt else Touch.CONTACT
        yield from ((v, how) for v in (record.remote_ip, record.remote_url))
    elif isinstance(record, SigninGroup):
        yield record.ip, Touch.SIGNIN if record.succeeded else Touch.ATTEMPT
    elif isinstance(record, LogonEvent):
        yield record.remote_ip, Touch.SIGNIN if "success" in record.action.lower() else Touch.ATTEMPT
    elif isinstance(record, UrlClick):
        through = record.clicked_through or record.action.lower() == "clickallowed"
        yield record.url, Touch.CONTACT if through else Touch.ATTEMPT
    elif isinstance(record, EmailMessage):
        delivered = record.delivery_action.lower() == "delivered"
        yield record.sender, Touch.MAIL if delivered else Touch.ATTEMPT
        if "@" in record.sender:
            yield record.sender.rsplit("@", 1)[1], Touch.MAIL if delivered else Touch.ATTEMPT
    elif isinstance(record, (ProcessEvent, FileEvent)):
        yield record.sha256, Touch.CONTACT
    elif isinstance(record, RiskDetection):
        yield record.ip, Touch.ATTEMPT
    elif isinstance(record, BehaviorEvent):
        yield record.source_ip, Touch.ATTEMPT


def touched(sections: Iterable[Section], own: Iterable[str] = ()) -> list[Touched]:
    """Every (counterparty, row, how) of the sections' rows, in the order the investigation shows them; ``own``: the
    entity's own keys, left out."""
    mine = {v.lower() for v in own}
    found: list[Touched] = []
    for section in sections:
        for index, record in enumerate(section.records):
            for cell, how in _row(record):
                for value in _values(cell) if cell else ():
                    valid = counterparty(value)
                    if valid and valid not in mine and not _local(valid):
                        found.append(Touched(valid, section.ref(index), how))
    return found


def lookup_values(sections: Iterable[Section], own: Iterable[str] = ()) -> tuple[str, ...]:
    """The counterparties to look up, at most MAX_COUNTERPARTIES: those contacted first, then sign-ins, mail and
    attempts (each in the order shown)."""
    found = touched(sections, own)
    ordered = sorted(range(len(found)), key=lambda i: (-found[i].touch, i))
    return tuple(dict.fromkeys(found[i].value for i in ordered))[:MAX_COUNTERPARTIES]
