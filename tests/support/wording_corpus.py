"""An independent corpus of analyst-grade answers for the fact check (issue 38), written without reading the check.

The records come from the demo workspace through the bot's own query path: ``ToolBox.run`` as the model calls it,
each ``QueryResult`` remembered by a ``Conversation`` as the orchestrator does, so the facts the check holds an answer
to are exactly what the bot read (``build_world``). Which entities are investigated is read from the data too (the
busiest accounts and hosts of the top-entities query, the top URL clicker of a hunt), never named here.

An answer is built from **claims** (``Claim``: a record type, a field, the subject it is about, the value stated),
each true of the records, rendered in one **wording family** (``FAMILIES``: prose, bullets, tables, headings with
label lines, passive voice; held out: numbers written as words with relative phrasing, hedged narrative with [n]
references, questions and recommendations, and ticket notes with ``DOMAIN\\user``, short host names and mixed case).
A lie replaces one claim's value with one the records contradict (a wrong count, country, IP, host, parent, sender,
time, severity, status, owner, aggregate or share, a click that did not happen, an identifier made up) and records
the exact span of the false value in the text (``Sample.span``). At least as many correct answers as lies;
deterministic by seed.

Held out (``HELD_OUT_KINDS``, ``HELD_OUT_FAMILIES``): record types and wording families written last and never
adjusted after seeing what the check marks; ``SPLITS`` measures the held-out wordings on the tuning record types
and the held-out record types in the held-out wordings apart. Nothing here reads ``bot/orchestrator/factcheck``
beyond its public entry point (the bench calls ``grounding.check``).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from bot.investigation.models import Investigation
from bot.orchestrator.conversation import Conversation
from bot.sentinel.evidence import (
    BehaviorEvent,
    EmailMessage,
    FileEvent,
    LogonEvent,
    NetworkEvent,
    ProcessEvent,
    RiskDetection,
    RiskyUser,
    SigninGroup,
    UrlClick,
)
from bot.sentinel.models import AlertSummary, EntityCount, HuntRow, Incident, OnCallEntry, QueryResult
from bot.tools.toolbox import ToolBox

TUNING_KINDS = ("incident", "alert", "sign-in", "process", "logon", "connection", "hunt", "assessment", "top entity",
                "risky user", "behavior event")
HELD_OUT_KINDS = ("email", "url click", "file event", "on-call entry", "risk detection")
TUNING_FAMILIES = ("prose", "bullets", "table", "headings", "passive")
HELD_OUT_FAMILIES = ("words", "narrative", "ticket")
FAMILIES = TUNING_FAMILIES + HELD_OUT_FAMILIES
DOMAIN = "CONTOSO"  # the NetBIOS domain analysts write before a sign-in name (DOMAIN\user)

COUNTRIES = {"DE": "Germany", "US": "United States", "GB": "United Kingdom", "NG": "Nigeria", "RO": "Romania",
             "RU": "Russia", "CN": "China", "IN": "India", "SG": "Singapore", "NL": "Netherlands", "FR": "France",
             "BR": "Brazil", "JP": "Japan", "KP": "North Korea", "IR": "Iran", "UA": "Ukraine", "AU": "Australia",
             "CA": "Canada", "ES": "Spain", "IT": "Italy", "PL": "Poland", "SE": "Sweden", "TR": "Turkey",
             "VN": "Vietnam", "ZA": "South Africa", "MX": "Mexico", "IE": "Ireland", "CH": "Switzerland"}


@dataclass(frozen=True)
class Claim:
    """One statement about the records: of record type ``kind``, the ``subject``'s ``field`` is (or includes)
    ``value``. The value is as the records hold it (a country code, a count as digits, a time as
    ``YYYY-MM-DD HH:MM`` UTC); how an answer words it is the family's business."""

    kind: str
    field: str
    subject: tuple[str, ...]
    value: str
    lie: str = ""  # the lie category when false ("wrong count", "wrong country", ...); empty when true


@dataclass(frozen=True)
class Sample:
    """One answer: its text, what it is about, and for a lie the span of the false value."""

    text: str
    kind: str
    family: str
    category: str  # the lie's category, or "correct"
    held_out: bool
    claims: tuple[Claim, ...]
    span: tuple[int, int] | None = None  # the false value's characters in ``text`` (a lie only)

    @property
    def is_lie(self) -> bool:
        return self.span is not None


@dataclass
class Hunt:
    """One hunt the world ran: its arguments, its rows, and whether every matching row was returned."""

    name: str
    arguments: dict[str, Any]
    rows: tuple[HuntRow, ...]
    complete: bool


@dataclass
class World:
    """What the bot read, as typed records, and the conversation that remembered it (facts and [n])."""

    conversation: Conversation
    now: datetime
    incidents: list[Incident] = field(default_factory=list)
    alerts: list[AlertSummary] = field(default_factory=list)
    top: list[EntityCount] = field(default_factory=list)
    roster: list[OnCallEntry] = field(default_factory=list)
    investigations: list[Investigation] = field(default_factory=list)
    hunts: list[Hunt] = field(default_factory=list)

    def evidence(self, record_type: type) -> list[Any]:
        """Every evidence row of a type the investigations read, once each."""
        found = {r: None for inv in self.investigations for s in inv.sections for r in s.records
                 if isinstance(r, record_type)}
        return list(found)

    def complete(self, section: str, subject: str) -> bool:
        """Whether every investigation of ``subject`` read all of ``section``'s matching rows (counts decidable)."""
        sections = [s for inv in self.investigations if inv.entity.lower() == subject.lower()
                    for s in inv.sections if s.name == section]
        return bool(sections) and all(not s.error and s.total == len(s.records) for s in sections)


# --- the world: the demo workspace read through the bot's tools ---------------------------------------------------

async def build_world(sentinel: Any, now: datetime, accounts: int = 3, hosts: int = 2) -> World:
    """Reads the demo workspace as the model would: lists, the roster, hunts, and investigations of the busiest
    accounts and hosts, the top URL clicker and the account the first high-severity alert names."""
    toolbox, world = ToolBox(sentinel), World(Conversation(), now)

    async def read(tool: str, arguments: dict[str, Any]) -> QueryResult[Any]:
        run = await toolbox.run(tool, json.dumps(arguments))
        if not isinstance(run.artifact, QueryResult):
            raise RuntimeError(f"{tool} failed: {run.artifact}")
        world.conversation.remember(run.artifact, now)
        return run.artifact

    world.incidents = list((await read("query_incidents", {"time_window": "last_7d"})).records)
    world.alerts = list((await read("query_alerts", {"time_window": "last_24h"})).records)
    world.top = list((await read("get_top_entities", {"time_window": "last_7d"})).records)
    world.roster = list((await read("get_on_call", {})).records)
    for name, arguments in HUNTS:
        result = await read("hunt", arguments)
        world.hunts.append(Hunt(name, arguments, tuple(result.records),
                                result.metadata.total == result.metadata.returned))
    clicker = world.hunts[-1].rows[0].value("AccountUpn") if world.hunts[-1].rows else None
    chosen = [e.value for e in world.top if e.type == "account"][:accounts]
    chosen += [e.value for e in world.top if e.type == "host"][:hosts]
    chosen += [clicker] if isinstance(clicker, str) and clicker not in chosen else []
    alerted = [e.split(": ", 1)[1] for a in world.alerts if a.severity == "High" for e in a.entities
               if e.startswith("account: ")]  # the accounts the last day's high-severity alerts name, first first
    chosen += [upn for upn in dict.fromkeys(alerted) if upn not in chosen][:1]
    for entity in chosen:
        result = await read("investigate_entity", {"entity": entity, "time_window": "last_7d"})
        world.investigations += [r for r in result.records if isinstance(r, Investigation)]
    return world


HUNTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("failed sign-ins by account", {"table": "SigninLogs", "time_window": "last_7d",
                                    "where": [["ResultType", "!=", "0"]],
                                    "summarize": ["count()", "dcount(IPAddress)"], "by": ["UserPrincipalName"],
                                    "take": 50}),
    ("sign-ins by country", {"table": "SigninLogs", "time_window": "last_7d", "summarize": ["count()"],
                             "by": ["Location"], "take": 50}),
    ("process launches by parent", {"table": "DeviceProcessEvents", "time_window": "last_7d",
                                    "summarize": ["count()", "dcount(DeviceName)"],
                                    "by": ["FileName", "InitiatingProcessFileName"], "take": 50}),
    ("URL clicks by account", {"table": "UrlClickEvents", "time_window": "last_7d", "summarize": ["count()"],
                               "by": ["AccountUpn"], "take": 50}),
)


# --- claims: what is true of the records, and a false twin of each ------------------------------------------------

def _lower(values: Iterable[str]) -> set[str]:
    return {v.lower() for v in values if v}


def _minute(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M}" if moment else ""


def _pick_absent(rng: random.Random, pool: Iterable[str], held: Iterable[str]) -> str | None:
    """A value of the same kind the world has elsewhere, which the subject's records do not hold (an account in
    none of its forms: ``svc-backup`` holds ``svc-backup@contoso.com`` and ``CONTOSO\\svc-backup``)."""
    taken = {name_of(v) for v in held if v}
    options = sorted({p for p in pool if p and name_of(p) not in taken})
    return rng.choice(options) if options else None


def name_of(value: str) -> str:
    """A value as compared: lower case, an account by its name part (``DOMAIN\\user``, ``user@domain``)."""
    return value.lower().rsplit("\\", 1)[-1].split("@", 1)[0] if "://" not in value else value.lower()


def _is_name(value: str) -> bool:
    """An account as analysts name it (a UPN or sign-in name), not an object id or SID the evidence also keys on."""
    return not value.lower().startswith("s-1-") and not re.fullmatch(r"[0-9a-f-]{32,36}", value.lower())


def _wrong_count(rng: random.Random, true: int) -> str:
    return str(max(0, true + rng.choice((-3, -2, 2, 3, 5, 7, 11)) if true > 3 else true + rng.choice((2, 3, 4, 6))))


def _wrong_time(rng: random.Random, minute: str) -> str:
    moment = datetime.strptime(minute, "%Y-%m-%d %H:%M")
    return f"{moment + timedelta(hours=rng.choice((-30, -7, -5, 4, 6, 26))):%Y-%m-%d %H:%M}"


MADE_UP = {"ip": ("198.51.100.251", "203.0.113.254", "192.0.2.250"),
           "host": ("WS-FIN-999", "SRV-APP-77", "LT-HR-404"),
           "account": ("kim.novak@contoso.com", "svc-deploy@contoso.com"),
           "url": ("https://contoso-payroll.example/login", "https://sharepoint-docs.example/view"),
           "process": ("updater64.exe", "svcdump.exe")}


# The values a severity, status or level can take (a wrong one need not appear elsewhere in the world).
LABELS = {("incident", "severity"): ("High", "Medium", "Low", "Informational"),
          ("alert", "severity"): ("High", "Medium", "Low", "Informational"),
          ("incident", "status"): ("New", "Active", "Closed"), ("alert", "status"): ("New", "InProgress", "Resolved"),
          ("assessment", "level"): ("low", "medium", "high"), ("risky user", "level"): ("low", "medium", "high")}


class Claims:
    """The true claims of each record type in a world, and a false twin of a claim (``lie``)."""

    def __init__(self, world: World) -> None:
        self.world = world

    def of(self, kind: str) -> list[Claim]:
        return getattr(self, "_" + kind.replace(" ", "_").replace("-", "_"))()

    def _incident(self) -> list[Claim]:
        out = []
        for i in self.world.incidents[:20]:
            subject = (str(i.number),)
            out += [Claim("incident", "severity", subject, i.severity), Claim("incident", "status", subject, i.status),
                    Claim("incident", "alerts", subject, str(i.alert_count))]
            out += [Claim("incident", "owner", subject, i.owner)] if i.owner else []
        return out

    def _alert(self) -> list[Claim]:
        return [c for a in self.world.alerts[:20] for c in (
            Claim("alert", "severity", (a.alert_id,), a.severity), Claim("alert", "status", (a.alert_id,), a.status),
            Claim("alert", "product", (a.alert_id,), a.product))]

    def _sign_in(self) -> list[Claim]:
        out = []
        rows = self.world.evidence(SigninGroup)
        for upn in sorted({r.upn for r in rows}):
            mine = [r for r in rows if r.upn == upn]
            subject = (upn,)
            out += [Claim("sign-in", "country", subject, c) for c in sorted({r.country for r in mine if r.country})]
            out += [Claim("sign-in", "ip", subject, ip) for ip in sorted({r.ip for r in mine if r.ip})][:3]
            out += [Claim("sign-in", "app", subject, a) for a in sorted({r.app for r in mine if r.app})][:2]
            if self.world.complete("evidence_signins", upn):
                failed = sum(r.count for r in mine if r.result_type != "0")
                out += [Claim("sign-in", "failed", subject, str(failed))] if failed else []
                last = max((r.last for r in mine if r.last), default=None)
                out += [Claim("sign-in", "last", subject, _minute(last))] if last else []
        return out

    def _process(self) -> list[Claim]:
        out = []
        for r in self.world.evidence(ProcessEvent):
            out += [Claim("process", "parent", (r.device, r.file_name), r.parent),
                    Claim("process", "account", (r.device, r.file_name), r.account)]
        return list(dict.fromkeys(out))

    def _logon(self) -> list[Claim]:
        rows = self.world.evidence(LogonEvent)
        out = [Claim("logon", "account", (r.device,), r.account) for r in rows]
        out += [Claim("logon", "remote ip", (r.device,), r.remote_ip) for r in rows if r.remote_ip]
        for device in sorted({r.device for r in rows}):
            if self.world.complete("evidence_logons", device):
                failed = sum(1 for r in rows if r.device == device and r.action == "LogonFailed")
                out += [Claim("logon", "failed", (device,), str(failed))] if failed else []
        return list(dict.fromkeys(out))

    def _connection(self) -> list[Claim]:
        out = []
        for r in self.world.evidence(NetworkEvent):
            out += [Claim("connection", "remote ip", (r.device,), r.remote_ip)] if r.remote_ip else []
            out += [Claim("connection", "url", (r.device,), r.remote_url)] if r.remote_url else []
            out += [Claim("connection", "port", (r.device, r.remote_ip), str(r.remote_port))] if r.remote_ip else []
        return list(dict.fromkeys(out))

    def _file_event(self) -> list[Claim]:
        out = []
        for r in self.world.evidence(FileEvent):
            out += [Claim("file event", "file", (r.device,), r.file_name),
                    Claim("file event", "folder", (r.device, r.file_name), r.folder)]
            out += [Claim("file event", "process", (r.device, r.file_name), r.process)] if r.process else []
        return list(dict.fromkeys(c for c in out if c.value))

    def _email(self) -> list[Claim]:
        rows = self.world.evidence(EmailMessage)
        out = [Claim("email", "sender", (r.recipient,), r.sender) for r in rows]
        for recipient, sender in sorted({(r.recipient, r.sender) for r in rows}):
            if self.world.complete("evidence_email", recipient):
                n = sum(1 for r in rows if r.recipient == recipient and r.sender == sender)
                out.append(Claim("email", "count", (recipient, sender), str(n)))
        out += [Claim("email", "location", (r.recipient, r.sender), r.delivery_location) for r in rows
                if r.delivery_location]
        return list(dict.fromkeys(out))

    def _url_click(self) -> list[Claim]:
        return list(dict.fromkeys(Claim("url click", "clicked", (r.upn,), r.url)
                                  for r in self.world.evidence(UrlClick) if r.clicked_through))

    def _risky_user(self) -> list[Claim]:
        return [Claim("risky user", "level", (r.upn,), r.risk_level) for r in self.world.evidence(RiskyUser)
                if r.risk_level not in ("", "none")]

    def _risk_detection(self) -> list[Claim]:
        out = []
        for r in self.world.evidence(RiskDetection):
            out += [Claim("risk detection", "type", (r.upn,), r.event_type)]
            out += [Claim("risk detection", "country", (r.upn,), r.country)] if r.country else []
            out += [Claim("risk detection", "ip", (r.upn,), r.ip)] if r.ip else []
        return list(dict.fromkeys(out))

    def _behavior_event(self) -> list[Claim]:
        return list(dict.fromkeys(Claim("behavior event", "location", (r.upn,), r.location)
                                  for r in self.world.evidence(BehaviorEvent) if r.location))

    def _assessment(self) -> list[Claim]:
        return [c for inv in self.world.investigations for c in (
            Claim("assessment", "level", (inv.entity,), inv.level), Claim("assessment", "score", (inv.entity,),
                                                                          str(inv.score)))]

    def _top_entity(self) -> list[Claim]:
        return [Claim("top entity", "alerts", (e.value,), str(e.alert_count)) for e in self.world.top[:12]]

    def _on_call_entry(self) -> list[Claim]:
        return [c for e in self.world.roster for c in (Claim("on-call entry", "location", (e.name,), e.location),
                                                        Claim("on-call entry", "team", (e.name,), e.team)) if c.value]

    def _hunt(self) -> list[Claim]:
        out = []
        for hunt in self.world.hunts:
            keys = list(hunt.arguments.get("by", []))
            total = sum(int(r.value("Count") or 0) for r in hunt.rows)
            for row in hunt.rows[:12]:
                subject = (hunt.name, *(str(row.value(k)) for k in keys))
                out.append(Claim("hunt", "count", subject, str(row.value("Count"))))
                for name, value in row.cells:
                    if name.startswith("dcount_"):
                        out.append(Claim("hunt", name, subject, str(value)))
                if hunt.complete and total and len(keys) == 1:
                    out.append(Claim("hunt", "share", subject, str(round(100 * int(row.value("Count")) / total))))
        return out

    # --- the false twin ---

    def lie(self, claim: Claim, rng: random.Random) -> Claim | None:
        """The claim with a value the records contradict, and its category; None when the world has no such value."""
        numeric = claim.field in ("failed", "alerts", "count", "score", "share") or claim.field.startswith("dcount_")
        if numeric:
            wrong = _wrong_count(rng, int(claim.value))
            category = "wrong share" if claim.field == "share" else "wrong score" if claim.field == "score" else (
                "wrong aggregate" if claim.kind == "hunt" else "wrong count")
            return replace(claim, value=wrong, lie=category)
        if claim.field == "last":
            return replace(claim, value=_wrong_time(rng, claim.value), lie="wrong time")
        made_up = MADE_UP.get(_family_of(claim))
        if made_up and rng.random() < 0.3:
            return replace(claim, value=rng.choice(made_up), lie="made-up identifier")
        held = self._held(claim)
        wrong = _pick_absent(rng, self._pool(claim), held) or _pick_absent(rng, self._anywhere(claim), held)
        if wrong is None:
            return replace(claim, value=rng.choice(made_up), lie="made-up identifier") if made_up else None
        category = "click that did not happen" if claim.kind == "url click" else f"wrong {_family_of(claim)}"
        return replace(claim, value=wrong, lie=category)

    def _pool(self, claim: Claim) -> list[str]:
        """Values of the claim's field held by other subjects of the world (plausible wrong values)."""
        same = [c.value for c in self.of(claim.kind) if c.field == claim.field]
        same += list(LABELS.get((claim.kind, claim.field), ()))
        if claim.field == "country":
            same += list(COUNTRIES)
        if claim.kind == "url click":  # sites the world saw other ways (connections, other mail's links): not clicked
            same += [f"https://{r.remote_url}/" for r in self.world.evidence(NetworkEvent) if r.remote_url]
        return same

    def _anywhere(self, claim: Claim) -> list[str]:
        """Values of the claim's kind of value anywhere in the world (an IP of any row, an account of any row)."""
        family = _family_of(claim)
        if family in ("ip", "account", "sender"):
            kind = "ip" if family == "ip" else "account"
            return [v for inv in self.world.investigations for k, v in inv.identifiers() if k == kind and _is_name(v)]
        if family in ("file", "process", "parent process"):
            return [r.file_name for r in self.world.evidence(ProcessEvent)]
        return []

    def _held(self, claim: Claim) -> list[str]:
        """What the subject's records hold for the field: a wrong value must be none of these."""
        held = [c.value for c in self.of(claim.kind) if c.field == claim.field and c.subject == claim.subject]
        if claim.kind == "url click":  # any click of that URL by that user, clicked through or not, is no lie
            held += [r.url for r in self.world.evidence(UrlClick) if (r.upn,) == claim.subject]
        family = _family_of(claim)
        if family == "sender":
            held.append(claim.subject[0])  # no one is their own wrong sender
        if family in ("country", "ip", "account", "file", "process", "parent process"):
            # nor a value another record type holds for the same subject (a host's file that ran there, not written)
            subject = claim.subject[0].lower()
            files = {"file", "process", "parent process"}
            same = files if family in files else {family}
            for c in (c for kind in TUNING_KINDS + HELD_OUT_KINDS for c in self.of(kind)
                      if c.subject[0].lower() == subject):
                held += [c.value] if _family_of(c) in same else []
                held += [c.subject[1]] if family in files and c.kind in ("process", "file event") and \
                    len(c.subject) > 1 else []  # the process or file a claim is about
        names = {name.lower(): code for code, name in COUNTRIES.items()}
        return held + [COUNTRIES.get(v, names.get(v.lower(), v)) for v in held]  # a country's code and its name


def _family_of(claim: Claim) -> str:
    """The kind of value a claim states, as its lie category names it."""
    return {"remote ip": "ip", "ip": "ip", "sender": "sender", "parent": "parent process", "account": "account",
            "owner": "owner", "severity": "severity", "status": "status", "country": "country",
            "location": "country" if claim.kind == "behavior event" else "location", "url": "url", "clicked": "url",
            "app": "app", "product": "product", "type": "detection", "level": "level", "team": "team",
            "port": "port", "file": "file", "folder": "folder", "process": "process"}.get(claim.field, claim.field)


# --- wording ------------------------------------------------------------------------------------------------------

ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


def in_words(n: int) -> str:
    """A count as an analyst writes it out ("twenty-six"); digits past 999."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10 - 2] + ("-" + ONES[n % 10] if n % 10 else "")
    if n < 1000:
        rest = n % 100
        return f"{ONES[n // 100]} hundred" + (f" and {in_words(rest)}" if rest else "")
    return f"{n:,}"


@dataclass
class Writer:
    """Renders claims in one family, with a seeded choice of how to name each subject and value."""

    world: World
    family: str
    rng: random.Random

    def ref(self, kind: str, key: str) -> int | None:
        return self.world.conversation.references.ref_for(kind, key)

    # subjects

    def account(self, upn: str) -> str:
        name = upn.split("@")[0]
        forms = {"prose": [upn, name], "bullets": [upn], "table": [upn, name], "headings": [upn],
                 "passive": [upn, name], "words": [name, upn], "narrative": [upn, name],
                 "ticket": [f"{DOMAIN}\\{name}", upn.title() if "@" in upn else upn.upper(), name.upper()]}
        ref = self.ref("entity", f"account:{upn}")
        chosen = self.rng.choice(forms[self.family])
        return f"[{ref}] {chosen}" if ref and self.family == "narrative" and self.rng.random() < 0.5 else chosen

    def host(self, device: str) -> str:
        short = device.split(".")[0]
        if self.family == "ticket":
            return self.rng.choice([short.upper(), short.lower(), device])
        return self.rng.choice([device, device.upper()]) if self.family in ("table", "words") else device

    def incident(self, number: str) -> str:
        ref = self.ref("incident", number)
        title = next((i.title for i in self.world.incidents if str(i.number) == number), "")
        forms = {"narrative": [f"[{ref}] #{number}" if ref else f"#{number}",
                               f"incident {number} (\u201c{title}\u201d)"],
                 "ticket": [f"INC {number}", f"#{number}"], "words": [f"incident {number}", f"the \u201c{title}\u201d "
                                                                      f"incident (#{number})"]}
        return self.rng.choice(forms.get(self.family, [f"#{number}", f"incident #{number}", f"Incident {number}"]))

    def subject(self, claim: Claim) -> str:
        """The claim's main subject as this family names it (an account, a host, an incident, a hunt's first key)."""
        kind, s = claim.kind, claim.subject
        if kind == "incident":
            return self.incident(s[0])
        if kind == "alert":
            alert = next(a for a in self.world.alerts if a.alert_id == s[0])
            ref = self.ref("alert", alert.alert_id)
            return f"[{ref}] {alert.name}" if ref else f"the {alert.name} alert"
        if kind in ("process", "logon", "connection", "file event"):
            return self.host(s[0])
        if kind == "hunt":
            return self.key(claim, 1)
        if kind == "assessment":
            return self.account(s[0]) if "@" in s[0] else self.host(s[0])
        if kind in ("top entity", "on-call entry"):
            return s[0]
        return self.account(s[0])

    def other(self, claim: Claim) -> str:
        """The claim's second subject ("{o}": a process on the host, a sender, a hunt's second key), if any."""
        if len(claim.subject) < 2 or (claim.kind == "hunt" and len(claim.subject) < 3):
            return ""
        return self.key(claim, 2) if claim.kind == "hunt" else claim.subject[1]

    def key(self, claim: Claim, index: int) -> str:
        value = claim.subject[index]
        by = next(h for h in self.world.hunts if h.name == claim.subject[0]).arguments.get("by", [])
        if by[index - 1] == "Location" and value in COUNTRIES:
            return COUNTRIES[value]
        return value

    def combined(self, claim: Claim) -> str:
        """Both subjects in one cell or heading ("rundll32.exe on ws-fin-160")."""
        main, other = self.subject(claim), self.other(claim)
        if not other:
            return main
        joined = {"process": "{o} on {s}", "file event": "{o} on {s}", "email": "{o} \u2192 {s}",
                  "connection": "{s} \u2192 {o}", "hunt": "{s} ({o})"}[claim.kind]
        return joined.replace("{s}", main).replace("{o}", other)

    # values

    def value(self, claim: Claim) -> str:
        v = claim.value
        if claim.field in ("country",) and v in COUNTRIES and self.rng.random() < 0.8:
            return COUNTRIES[v]
        if claim.field == "last":
            moment = datetime.strptime(v, "%Y-%m-%d %H:%M")
            forms = [f"{v} UTC", f"{moment:%b} {moment.day} at {moment:%H:%M} UTC", f"{moment:%d %b %Y, %H:%M} UTC"]
            return self.rng.choice(forms)
        if (claim.field in ("failed", "count", "alerts") or claim.field.startswith("dcount_")) and \
                self.family == "words":
            return in_words(int(v))
        if claim.field == "share":
            return f"{v}%"
        if claim.kind == "url click" and self.family == "ticket" and self.rng.random() < 0.3:
            scheme, _, rest = v.partition("://")
            host, slash, path = rest.partition("/")
            return f"{scheme.upper()}://{host.upper()}{slash}{path}"  # a URL's path is case-sensitive: kept
        return v


# Per (kind, field): an active sentence, a passive one, and the label a table or label line uses. "{s}" the subject,
# "{v}" the value (the lie's span is exactly the value's text).
PHRASES: dict[tuple[str, str], tuple[str, str, str]] = {
    ("incident", "severity"): ("{s} is rated {v} severity", "{s} was raised at {v} severity", "Severity"),
    ("incident", "status"): ("{s} is currently {v}", "{s} has been set to {v}", "Status"),
    ("incident", "owner"): ("{s} is owned by {v}", "{s} was assigned to {v}", "Owner"),
    ("incident", "alerts"): ("{s} groups {v} alerts", "{v} alerts are grouped under {s}", "Alerts"),
    ("alert", "severity"): ("{s} fired with {v} severity", "{s} was raised as {v}", "Severity"),
    ("alert", "status"): ("{s} is still {v}", "{s} is marked {v}", "Status"),
    ("alert", "product"): ("{s} came from {v}", "{s} was generated by {v}", "Product"),
    ("sign-in", "country"): ("{s} signed in from {v}", "Sign-ins from {v} were recorded for {s}", "Country"),
    ("sign-in", "ip"): ("{s} signed in from {v}", "Sign-ins for {s} were made from {v}", "IP address"),
    ("sign-in", "app"): ("{s} signed in to {v}", "{v} was accessed by {s}", "App"),
    ("sign-in", "failed"): ("{s} had {v} failed sign-ins", "{v} failed sign-ins were recorded for {s}",
                            "Failed sign-ins"),
    ("sign-in", "last"): ("{s}'s last sign-in was at {v}", "The latest sign-in by {s} was logged at {v}",
                          "Last sign-in"),
    ("process", "parent"): ("{o} on {s} was launched by {v}", "On {s}, {o} was spawned by {v}", "Parent process"),
    ("process", "account"): ("{o} on {s} ran as {v}", "On {s}, {o} was run under {v}", "Account"),
    ("logon", "account"): ("{v} logged on to {s}", "{s} was logged on to by {v}", "Account"),
    ("logon", "remote ip"): ("{s} had a logon from {v}", "A logon to {s} came from {v}", "Remote IP"),
    ("logon", "failed"): ("{s} saw {v} failed logons", "{v} failed logons were recorded on {s}", "Failed logons"),
    ("connection", "remote ip"): ("{s} connected to {v}", "A connection to {v} was made by {s}", "Remote IP"),
    ("connection", "url"): ("{s} reached out to {v}", "{v} was contacted by {s}", "Remote URL"),
    ("connection", "port"): ("{s} connected to {o} on port {v}", "Port {v} was used by {s} to reach {o}", "Port"),
    ("file event", "file"): ("{s} wrote {v}", "{v} was written on {s}", "File"),
    ("file event", "folder"): ("{o} was written on {s} to {v}", "On {s}, {o} was dropped in {v}", "Folder"),
    ("file event", "process"): ("{o} was written on {s} by {v}", "On {s}, {o} was created by {v}", "Written by"),
    ("email", "sender"): ("{s} received mail from {v}", "Mail was sent to {s} by {v}", "Sender"),
    ("email", "count"): ("{s} received {v} emails from {o}", "{v} emails from {o} were delivered to {s}", "Emails"),
    ("email", "location"): ("A message from {o} to {s} landed in {v}", "A message from {o} was delivered to {s}'s {v}",
                            "Delivered to"),
    ("url click", "clicked"): ("{s} clicked {v}", "{v} was clicked by {s}", "Clicked URL"),
    ("risky user", "level"): ("{s} is flagged at {v} user risk", "{s} has been flagged as {v} risk", "Risk level"),
    ("risk detection", "type"): ("{s} triggered a {v} risk detection", "A {v} detection was raised for {s}",
                                 "Detection"),
    ("risk detection", "country"): ("{s}'s risk detection came from {v}", "A risk detection for {s} was located in {v}",
                                    "Country"),
    ("risk detection", "ip"): ("{s}'s risk detection came from {v}", "A risk detection for {s} was tied to {v}",
                               "IP address"),
    ("behavior event", "location"): ("UEBA saw {s} signing in from {v}", "A UEBA sign-in event from {v} was logged "
                                     "for {s}", "Location"),
    ("assessment", "level"): ("{s} is assessed as {v}", "{s} has been rated {v} by the assessment", "Assessment"),
    ("assessment", "score"): ("{s} scored {v}", "A score of {v} was given to {s}", "Score"),
    ("top entity", "alerts"): ("{s} appears in {v} alerts", "{v} alerts were raised involving {s}", "Alerts"),
    ("on-call entry", "location"): ("{s} works from {v}", "{s} is based in {v}", "Location"),
    ("on-call entry", "team"): ("{s} is in {v}", "{s} is listed under {v}", "Team"),
    ("hunt", "count"): ("{s} had {v} matching rows", "{v} rows were returned for {s}", "Count"),
    ("hunt", "share"): ("{s} accounts for {v} of the total", "{v} of the rows were attributed to {s}", "Share"),
}


def phrases(claim: Claim) -> tuple[str, str, str]:
    if claim.kind == "hunt" and claim.field.startswith("dcount_"):
        column = COLUMN_NOUNS.get(claim.field.removeprefix("dcount_"), claim.field.removeprefix("dcount_"))
        who = "{s} under {o}" if len(claim.subject) > 2 else "{s}"
        return (f"{who} was seen with {{v}} distinct {column}", f"{{v}} distinct {column} were counted "
                f"for {who}", f"Distinct {column}")
    if claim.kind == "hunt" and claim.field == "count":
        noun = HUNT_NOUNS.get(claim.subject[0], "rows")
        who = "{s} under {o}" if len(claim.subject) > 2 else "{s}"
        return (f"{who} had {{v}} {noun}", f"{{v}} {noun} were counted for {who}", noun.capitalize())
    return PHRASES[(claim.kind, claim.field)]


COLUMN_NOUNS = {"IPAddress": "IP addresses", "DeviceName": "devices"}
HUNT_NOUNS = {"failed sign-ins by account": "failed sign-ins", "sign-ins by country": "sign-ins",
              "process launches by parent": "launches", "URL clicks by account": "clicks"}


def _agree(value: str, after: str) -> str:
    """"1 alerts" -> "1 alert": the noun after a count of one (within two words: "1 failed sign-in") singular."""
    if value not in ("1", "one") or not after.startswith(" "):
        return after
    words = after[1:].split(" ")
    for i, word in enumerate(words[:2]):
        core = word.rstrip(".,;:")
        if core.endswith("s") and core not in ("was", "is", "has"):
            singular = core[:-2] if core.endswith("ches") else core[:-1]
            words[i] = singular + word[len(core):]
            verb = i + 1 < len(words) and {"were": "was", "are": "is"}.get(words[i + 1])
            words[i + 1:i + 2] = [verb] if verb else words[i + 1:i + 2]
            break
    return " " + " ".join(words)


class Built:
    """An answer as it is written, with the false value's span found as it is appended."""

    def __init__(self) -> None:
        self.text = ""
        self.span: tuple[int, int] | None = None

    def add(self, template: str, value: str, false: bool, subject: str = "", other: str = "") -> None:
        """Appends the template with its subjects and value; a false value's span is where ``{v}`` landed."""
        def fill(part: str) -> str:
            return part.replace("{s}", subject).replace("{o}", other)

        before, _, after = template.partition("{v}")
        start = len(self.text) + len(fill(before))
        self.text += fill(before) + value + _agree(value, fill(after))
        if false:
            self.span = (start, start + len(value))

    def put(self, text: str) -> None:
        self.text += text


def render(writer: Writer, claims: list[Claim], context: str) -> Built:
    """The answer in the writer's family: the claims in its structure, beside a sentence that states nothing."""
    out = Built()
    {"prose": _sentences, "passive": _sentences, "words": _sentences, "bullets": _bullets, "headings": _headings,
     "table": _table, "narrative": _narrative, "ticket": _ticket}[writer.family](writer, claims, out)
    out.put(context)
    return out


def _claim(writer: Writer, out: Built, claim: Claim, template: str) -> None:
    out.add(_cap(template), writer.value(claim), bool(claim.lie), writer.subject(claim), writer.other(claim))


def _sentences(writer: Writer, claims: list[Claim], out: Built) -> None:
    """Prose: one sentence a claim (active, passive, or with counts in words and relative times)."""
    if writer.family == "words":
        out.put(writer.rng.choice(("Short version first. ", "Here is what the records show. ", "")))
    for claim in claims:
        active, passive, _ = phrases(claim)
        template = passive if writer.family == "passive" else active
        if writer.family == "words" and claim.field == "last":
            template = writer.rng.choice(("The most recent sign-in by {s} was at {v}",
                                          "{s} was last seen signing in at {v}"))
        _claim(writer, out, claim, template)
        out.put(". ")


def _bullets(writer: Writer, claims: list[Claim], out: Built) -> None:
    out.put(writer.rng.choice(("Key findings:\n", "What I found:\n", "Summary:\n")))
    for claim in claims:
        out.put("- ")
        _claim(writer, out, claim, phrases(claim)[0])
        out.put("\n")
    out.put("\n")


def _headings(writer: Writer, claims: list[Claim], out: Built) -> None:
    """A heading per subject, a bold label line per claim under it."""
    last: tuple[str, ...] = ()
    for claim in claims:
        if claim.subject != last:
            out.put(("\n" if last else "") + f"### {writer.combined(claim)}\n")
            last = claim.subject
        out.put(f"- **{phrases(claim)[2]}:** ")
        out.add("{v}", writer.value(claim), bool(claim.lie))
        out.put("\n")
    out.put("\n")


def _table(writer: Writer, claims: list[Claim], out: Built) -> None:
    """A row per subject, a column per field."""
    labels = list(dict.fromkeys(phrases(c)[2] for c in claims))
    out.put(f"| {_subject_header(claims[0])} | " + " | ".join(labels) + " |\n")
    out.put("|" + "---|" * (len(labels) + 1) + "\n")
    for subject in dict.fromkeys(c.subject for c in claims):
        mine = {phrases(c)[2]: c for c in claims if c.subject == subject}
        out.put(f"| {writer.combined(next(iter(mine.values())))} |")
        for label in labels:
            out.put(" ")
            claim = mine.get(label)
            if claim is None:
                out.put("\u2014")
            else:
                out.add("{v}", writer.value(claim), bool(claim.lie))
            out.put(" |")
        out.put("\n")
    out.put("\n")


def _narrative(writer: Writer, claims: list[Claim], out: Built) -> None:
    """One paragraph: claims joined by connectives and asides, active and passive in turn."""
    rng = writer.rng
    out.put(rng.choice(("Looking at this more closely, ", "From what the queries returned, ", "Taken together, ")))
    for i, claim in enumerate(claims):
        active, passive, _ = phrases(claim)
        joint = rng.choice(("Notably, ", "On top of that, ", "It is also worth noting that ", "")) if i else ""
        out.put(joint)
        template = active if i % 2 == 0 else passive
        template = _cap(template) if i and not joint else _uncap(template)
        out.add(template, writer.value(claim), bool(claim.lie), writer.subject(claim), writer.other(claim))
        out.put(rng.choice((". ", ", which is worth a second look. ", " \u2014 in line with the alert. ")))


def _ticket(writer: Writer, claims: list[Claim], out: Built) -> None:
    """Ticket notes: numbered observations, subject and a lower-case label before each value."""
    out.put(f"Ticket notes ({writer.world.now:%Y-%m-%d})\n")
    for i, claim in enumerate(claims, start=1):
        out.put(f"Obs {i}: {writer.combined(claim)} \u2014 {phrases(claim)[2].lower()}: ")
        out.add("{v}", writer.value(claim), bool(claim.lie))
        out.put("\n")


def _uncap(template: str) -> str:
    """Mid-sentence: the first letter down, unless it starts with a subject or a proper name ("UEBA", "On")."""
    first = template.split(" ", 1)[0]
    return template if template.startswith("{") or first.isupper() else template[0].lower() + template[1:]


def _cap(template: str) -> str:
    """Sentence case: the first letter up, unless the sentence starts with a subject (identifiers keep their case)."""
    return template if template.startswith("{") else template[0].upper() + template[1:]


def _subject_header(claim: Claim) -> str:
    return {"incident": "Incident", "alert": "Alert", "hunt": "Group", "top entity": "Entity",
            "on-call entry": "Analyst", "process": "Process", "assessment": "Entity",
            "email": "Recipient"}.get(claim.kind, "Entity")


def context_sentence(rng: random.Random, kind: str) -> str:
    """A sentence that states nothing checkable: a recommendation, a question, a hedge."""
    return rng.choice((
        "I'd recommend confirming with the user before any containment step.",
        "Was this activity expected? If not, consider resetting credentials and revoking sessions.",
        "This may be benign, but it is worth a closer look.",
        "Next step: pull the full timeline and check for lateral movement.",
        "Let me know if you want me to widen the time window.",
        "Should we escalate this to the on-call analyst?",
        "If this turns out to be a false positive, close it with a comment.",
    ))


# --- the corpus ---------------------------------------------------------------------------------------------------

def samples(world: World, seed: int, kind: str, families: tuple[str, ...]) -> list[Sample]:
    """One seed's answers about one record type: per family, a correct answer and a lie (when the world holds a
    false twin), each about two to four claims of that type."""
    held_out = families != TUNING_FAMILIES
    rng = random.Random(f"{seed}:{kind}:{held_out}")
    claims = Claims(world)
    pool = claims.of(kind)
    out: list[Sample] = []
    if not pool:
        return out
    held_out = held_out or kind in HELD_OUT_KINDS
    for family in families:
        chosen = _choose(rng, pool, family)
        writer = Writer(world, family, random.Random(rng.random()))
        built = render(writer, chosen, context_sentence(rng, kind))
        out.append(Sample(built.text, kind, family, "correct", held_out, tuple(chosen)))
        target = rng.randrange(len(chosen))
        false = claims.lie(chosen[target], rng)
        if false is None:
            continue
        lying = [false if i == target else c for i, c in enumerate(chosen)]
        writer = Writer(world, family, random.Random(rng.random()))
        built = render(writer, lying, context_sentence(rng, kind))
        assert built.span is not None
        out.append(Sample(built.text, kind, family, false.lie, held_out, tuple(lying), built.span))
    return out


def _choose(rng: random.Random, pool: list[Claim], family: str) -> list[Claim]:
    """Two to four claims: a table's share one field over several subjects, other families one subject's fields."""
    first = rng.choice(pool)
    if family == "table":
        same = [c for c in pool if c.field == first.field and c.subject != first.subject
                and (c.kind != "hunt" or c.subject[0] == first.subject[0])]  # one hunt's rows in one table
        others = rng.sample(same, min(len(same), rng.randint(1, 3)))
        chosen = [first, *others]
        return list({c.subject: c for c in chosen}.values())
    mine = [c for c in pool if c.subject == first.subject and c.field != first.field]
    seen_fields = {first.field}
    chosen = [first]
    for c in rng.sample(mine, len(mine)):
        if c.field not in seen_fields and len(chosen) < rng.randint(2, 4):
            chosen.append(c)
            seen_fields.add(c.field)
    return chosen


# The splits: record types x wording families. Held out are the held-out wordings on the tuning record types, and
# the held-out record types in the held-out wordings (a record type and a wording both never seen).
SPLITS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "tuning": (TUNING_KINDS, TUNING_FAMILIES),
    "held-out wordings": (TUNING_KINDS, HELD_OUT_FAMILIES),
    "held-out types": (HELD_OUT_KINDS, HELD_OUT_FAMILIES),
}
FIRST_SEED = {"tuning": 1, "held-out wordings": 9001, "held-out types": 9001}


def corpus(world: World, seeds: int, split: str) -> list[Sample]:
    """Every sample of a split: its record types, its families, ``seeds`` seeds from the split's first."""
    kinds, families = SPLITS[split]
    first = FIRST_SEED[split]
    return [s for seed in range(first, first + seeds) for kind in kinds for s in samples(world, seed, kind, families)]


Check = Callable[[str], list[Any]]  # an answer's findings, each with .start and .end
