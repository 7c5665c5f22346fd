"""A generator of answers about declared rows, true and false, for every record type the results hold (issue 38).

The world: investigations of the demo workspace's busiest entities (every evidence row kind, the assessment) and a
few hunts (rows and a summary with its ``Count``), recorded in a conversation as the orchestrator does. The
generator reads each record through its own declaration (``bot.sentinel.semantics``), never through the check:
for each kind it picks a row, a subject the row belongs to (written as analysts write it: full, the UPN's name part,
``DOMAIN\\user``, a host's short name, another case, or the [n] that names it), and states

- a value of one of the row's fields (IP, host, account, country, app, parent process, port, confidence, ...),
- a count of the subject's rows of that kind (by the kind's nouns, "failed" where it has a result), or a distinct
  count ("from 3 countries"),
- a flag with its verb ("clicked the link"), when a subject's clicks were read,

as a sentence, a paragraph that continues with "The account ...", a bullet or label line under the subject's
heading, or a table row. A lie changes exactly that value to one no row of the subject holds (another row's value
of the same type, or a common one); its span is marked « ». Correct samples are the same statements with the real
value, and what analysts write around facts with the false value in it that states nothing: questions,
instructions, hypotheticals, negations, hedged estimates and honest roundings.

Splits: record kinds ``TUNING_KINDS`` (the check was developed looking at these) and every other kind (held out);
wordings: each family's frames are split by index (``HELD_OUT_FRAME``), so a held-out sample uses a frame the
check was never looked at with.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.investigation.models import Investigation
from bot.orchestrator.conversation import Conversation
from bot.orchestrator.factcheck.declared import APPS, COUNTRIES
from bot.orchestrator.factcheck.facts import link_forms
from bot.sentinel import semantics
from bot.sentinel.changes import Classification, ConfirmedChange
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import Incident, QueryResult
from bot.sentinel.params import Severity
from bot.sentinel.semantics import FAMILY, Sem
from bot.tools.toolbox import ToolBox
from tests.support.answer_corpus import unmark

TUNING_KINDS = frozenset({"sign-in", "process", "email", "hunt SigninLogs", "assessment", "change"})
HELD_OUT_FRAME = 2  # frame i of a family is held out when i % 3 == HELD_OUT_FRAME
ENTITIES = ("olivia.hart@contoso.com", "svc-backup@contoso.com", "SRV-BKP-01", "WS-FIN-023", "10.20.30.40",
            "94dce4dd07892e7076e428f7459bfdf4ce2345951d7c13e75a04c78006936213")
HUNTS: tuple[dict[str, Any], ...] = (
    {"table": "SigninLogs", "time_window": "7d", "summarize": ["count()", "dcount(IPAddress)"],
     "by": ["UserPrincipalName"], "take": 60},
    {"table": "DeviceProcessEvents", "time_window": "3d", "summarize": ["count()"], "by": ["DeviceName", "FileName"],
     "take": 100},
)
CHECKED = (Sem.IP, Sem.HOST, Sem.ACCOUNT, Sem.SENDER, Sem.RECIPIENT, Sem.COUNTRY, Sem.APP, Sem.PARENT, Sem.PROCESS,
           Sem.HASH, Sem.PORT, Sem.SCORE, Sem.LEVEL, Sem.DOMAIN, Sem.URL, Sem.FILE)


@dataclass(frozen=True)
class Row:
    kind: str
    declared: semantics.Declaration
    values: tuple[tuple[semantics.Field, str], ...]
    complete: bool


@dataclass
class World:
    now: datetime
    conversation: Conversation
    rows: list[Row] = field(default_factory=list)
    read: dict[str, set[str]] = field(default_factory=dict)  # kind -> subjects a query read (rows or not)


@dataclass(frozen=True)
class Sample:
    kind: str
    category: str  # "value", "count", "flag", "distinct"; "correct: ..." for correct ones
    wording: str  # "tuning" or "held-out"
    text: str
    lie: tuple[int, int] | None


async def build_world(sentinel: SentinelClient, now: datetime) -> World:
    """Investigate the entities and run the hunts, recording every result as the orchestrator does."""
    conversation = Conversation()
    world = World(now, conversation)
    tools = ToolBox(sentinel)
    for entity in ENTITIES:
        run = await tools.run("investigate_entity", json.dumps({"entity": entity}))
        if not run.ok or not isinstance(run.artifact, QueryResult):
            continue
        conversation.remember(run.artifact, now)
        investigation = run.artifact.records[0]
        assert isinstance(investigation, Investigation)
        world.rows += _rows([investigation], True, {})
        for section in investigation.sections:
            complete = not section.error and section.total == len(section.records)
            world.rows += _rows(section.records, complete, {})
            kind = _section_kind(section.name)
            if kind and not section.error:
                world.read.setdefault(kind, set()).update(link_forms(investigation.entity))
    for hunt in HUNTS:
        result = await sentinel.run("hunt", dict(hunt))
        if isinstance(result, QueryResult):
            conversation.remember(result, now)
            complete = not result.metadata.truncated and result.metadata.returned >= result.metadata.total
            world.rows += _rows(result.records, complete, result.metadata.parameters)
    await _changes(world, tools)
    world.rows = list(dict.fromkeys(world.rows))  # a row two investigations read is one row
    return world


async def _changes(world: World, tools: ToolBox) -> None:
    """Incidents listed, then changes to some of them confirmed, recorded as the confirmation desk records them: an
    owner, a closing classification, a severity, an escalation to an account the results name (a sign-in name)."""
    run = await tools.run("query_incidents", json.dumps({"time_window": "last_7d"}))
    if not run.ok or not isinstance(run.artifact, QueryResult):
        return
    world.conversation.remember(run.artifact, world.now)
    incidents = [i for i in run.artifact.records if isinstance(i, Incident)]
    people = sorted({v for r in world.rows for f, v in r.values if f.sem is Sem.ACCOUNT and "@" in v})[:6]
    if len(incidents) < 8 or len(people) < 2:
        return
    classifications = [c.value for c in Classification]
    severities = [s.value for s in Severity]
    for index, incident in enumerate(incidents[:8]):
        kind = ("assign", "status", "severity", "escalate")[index % 4]
        person = people[index % len(people)]
        record = ConfirmedChange(
            incident.number, kind, world.now.replace(microsecond=0), f"{kind} #{incident.number}",
            owner=(person,) if kind == "assign" else (),
            status="Closed" if kind == "status" else incident.status,
            classification=classifications[index % len(classifications)] if kind == "status" else None,
            severity=severities[(severities.index(incident.severity) + 1) % len(severities)]
            if kind == "severity" else incident.severity,
            escalated_to=(person,) if kind == "escalate" else ())
        world.conversation.facts.record_change(
            record.incident, kind, record.summary, record.at, severity=record.severity, status=record.status,
            owner=person if kind == "assign" else incident.owner, classification=record.classification,
            owner_sign_in=person if kind == "assign" else None, escalated_to=record.escalated_to)
        if kind != "assign":  # the facts keep the incident's owner too: the corpus's row says what the facts say
            record = dataclasses.replace(record, owner=(incident.owner,) if incident.owner else ())
        world.rows += _rows([record], True, {})


def _section_kind(name: str) -> str | None:
    from typing import get_type_hints

    from bot.sentinel.queries import spec_of
    try:
        declared = getattr(get_type_hints(spec_of(name).decode).get("return"), "FACTS", None)
    except (KeyError, NameError, TypeError):
        return None
    return declared.kind if isinstance(declared, semantics.Declaration) else None


def rows_of(records: Iterable[Any], complete: bool = True, parameters: dict[str, Any] | None = None) -> list[Row]:
    """The corpus's view of records recorded by hand (a record type a test or a bench declares)."""
    return _rows(records, complete, parameters or {})


def _rows(records: Iterable[Any], complete: bool, parameters: dict[str, Any]) -> list[Row]:
    out = []
    for record in records:
        declared = semantics.declaration(record, parameters)
        if declared is None or declared.kind in ("incident", "alert", "top entity", "trend bin", "on-call entry"):
            continue  # kept by their own recorders and checked by the hand-written relations
        values = tuple((f, v.isoformat() if isinstance(v, datetime) else str(getattr(v, "value", v)).strip())
                       for f, v in semantics.field_values(record, declared))
        out.append(Row(declared.kind, declared, values, complete))
    return out


# -- what the rows hold --------------------------------------------------------------------------------------------


def _forms(sem: Sem, value: str) -> set[str]:
    text = value.lower()
    if sem is Sem.COUNTRY:
        return {_country_code(text)}
    return link_forms(text) | {text}


def _country_code(text: str) -> str:
    return next((code for code, names in COUNTRIES.items() if text == code or text in names), text)


def _belongs(row: Row, subject: str) -> bool:
    forms = link_forms(subject)
    return any(forms & link_forms(v) for f, v in row.values if f.name in row.declared.belongs)


def _held(world: World, subject: str, family: str, role: Sem | None = None) -> set[str]:
    """Every form a field of ``family`` holds on any row the subject belongs to (any kind)."""
    out: set[str] = set()
    for row in world.rows:
        if _belongs(row, subject):
            for f, v in row.values:
                if FAMILY.get(f.sem) == family and (role is None or f.sem is role):
                    out |= _forms(f.sem, v)
    return out


# -- samples -------------------------------------------------------------------------------------------------------


_FRAMES: dict[str, tuple[str, ...]] = {
    # {s} the subject as written, {v} the value (marked when it is the lie), {k} the kind, {n} a noun
    "ip": ("{s} was seen from «{v}».", "Activity for {s} came from «{v}».", "{s} connected with «{v}» in the {k} rows.",
           "The {k} rows tie {s} to «{v}».", "{s} → «{v}»."),
    "host": ("{s} was active on «{v}».", "{s} shows up on «{v}».", "The {k} rows put {s} on «{v}».",
             "We see {s} on device «{v}».", "{s} ran on «{v}»."),
    "account": ("{s} is tied to «{v}».", "{s} involves the account «{v}».", "The {k} rows link {s} with «{v}».",
                "{s} was used by «{v}».", "{s} was used with «{v}»."),
    "mail": ("{s} got mail from «{v}».", "{s} exchanged mail with «{v}».", "The {k} rows pair {s} with «{v}».",
             "{s} corresponded with «{v}».", "Mail between {s} and «{v}» was delivered."),
    "country": ("{s} signed in from «{v}».", "{s} was seen from «{v}».", "{s} had activity in «{v}».",
                "The {k} rows place {s} in «{v}».", "Location of {s}: «{v}»."),
    "app": ("{s} used «{v}».", "{s} signed in to «{v}».", "The {k} rows show {s} in «{v}».",
            "{s} accessed «{v}».", "{s} authenticated to «{v}»."),
    "parent": ("{p} on {s} was launched by «{v}».", "On {s}, {p} was spawned by «{v}».",
               "{p} ({s}) has parent process «{v}».", "{p} was started by «{v}» on {s}.",
               "On {s} the parent of {p} was «{v}»."),
    "file": ("{s} ran «{v}».", "{s} shows «{v}».", "The {k} rows of {s} include «{v}».", "«{v}» ran on {s}.",
             "On {s} we see «{v}»."),
    "hash": ("{s} is linked to hash «{v}».", "The {k} rows of {s} hold «{v}».", "{s} has SHA-256 «{v}».",
             "{s} matches «{v}».", "{s} carries the hash «{v}»."),
    "number": ("{s} shows {c} «{v}».", "For {s}, {c} «{v}».", "{s}: {c} «{v}».", "{s} has {c} of «{v}».",
               "{s} with {c} «{v}»."),
    "level": ("{s} is at «{v}» risk.", "{s}: risk level «{v}».", "{s} has a risk level of «{v}».",
              "{s} was at «{v}» risk.", "{s} carries risk «{v}»."),
    "assessed": ("{s} was assessed as «{v}».", "The bot rated {s} «{v}».", "{s} — assessed «{v}».",
                 "{s} is assessed as «{v}» overall.", "Assessment of {s}: «{v}»."),
    "count": ("{s} had «{v} {n}».", "We found «{v} {n}» for {s}.", "{s}: «{v} {n}» in the window.",
              "There were «{v} {n}» for {s}.", "{s} generated «{v} {n}»."),
    "distinct": ("{s} signed in from «{v} countries».", "{s} was seen from «{v} different countries».",
                 "{s} used «{v} IPs».", "{s} came from «{v} distinct countries».", "{s} used «{v} apps»."),
    "share": ("«{v}» of the {n} of {s} {w}.", "For {s}, «{v}» of {n} {w}.", "«{v}» of {s}'s {n} {w}.",
              "{s}: «{v}» of the {n} {w}.", "Looking at {s}, «{v}» of all {n} {w}.", "Of the {n} of {s}, «{v}» {w}."),
    "share of": ("«{v}» {n} of {s} {w}.", "{s}: «{v}» {n} {w}.", "For {s}, «{v}» {n} {w}.",
                 "We saw that «{v}» {n} of {s} {w}.", "{s} — «{v}» {n} {w}.", "Among {s}'s {n}, «{v}» {w}."),
    "change owner": ("I assigned #{n} to «{v}».", "#{n} is now assigned to «{v}».", "Done: #{n} assigned to «{v}».",
                     "I've assigned #{n} to «{v}» as asked.", "#{n} was reassigned to «{v}».",
                     "Confirmed: #{n} now owned by «{v}»."),
    "change classification": ("I closed #{n} as a «{v}».", "#{n} was closed as «{v}».", "Done — #{n} closed as «{v}».",
                              "#{n} is now classified as «{v}».", "Closed #{n} as «{v}» per your call.",
                              "#{n} was resolved as «{v}»."),
    "change severity": ("I lowered #{n} to «{v}».", "#{n}: severity set to «{v}».",
                        "Done: #{n} severity changed to «{v}».", "The severity of #{n} is now «{v}».",
                        "#{n} was raised to «{v}».", "I set #{n} to «{v}»."),
    "change escalated_to": ("I escalated #{n} to «{v}».", "#{n} was escalated to «{v}».",
                            "Escalated #{n} to «{v}» (on call).", "Done: #{n} escalated to «{v}».",
                            "I paged «{v}» about #{n}.", "#{n} has been handed over to «{v}»."),
    "flag": ("{s} «clicked» the link.", "{s} «clicked through» to the site.", "The user {s} «clicked» it.",
             "{s} then «clicked» the URL.", "{s} «opened the link»."),
}
_NOT_CLAIMS = (
    "Did {s} {verb} «{v}»?", "Check whether {s} {verb} «{v}».", "If {s} had {verbed} «{v}», that would matter.",
    "{s} did not {verb} «{v}».", "Confirm that {s} never {verbed} «{v}».", "I'd verify {s} against «{v}» next.",
)
_VERBS = {"ip": ("connect from", "connected from"), "host": ("log on to", "logged on to"),
          "account": ("work with", "worked with"), "country": ("sign in from", "signed in from"),
          "app": ("sign in to", "signed in to"), "parent": ("run", "run"), "file": ("run", "run"),
          "hash": ("match", "matched"), "number": ("show", "shown"), "level": ("reach", "reached"),
          "assessed": ("reach", "reached"),
          "flag": ("click", "clicked")}
_CUE_WORDS = {Sem.PORT: "port", Sem.SCORE: "confidence"}


class _Gen:
    def __init__(self, world: World, seed: int) -> None:
        self.w, self.rng = world, random.Random(seed)
        self.refs = world.conversation.references

    def frame(self, family: str, held_out: bool) -> tuple[str, str]:
        frames = _FRAMES[family]
        chosen = [i for i in range(len(frames)) if (i % 3 == HELD_OUT_FRAME) == held_out]
        return frames[self.rng.choice(chosen)], "held-out" if held_out else "tuning"

    def written(self, subject: str, sem: Sem) -> str:
        """The subject as an analyst writes it: as is, in another case, the UPN's name part, DOMAIN\\user, a host's
        short name, or its [n]."""
        options = [subject, subject.lower(), subject.upper() if FAMILY.get(sem) == "host" else subject]
        if "@" in subject:
            local, _, domain = subject.partition("@")
            options += [local, f"{domain.split('.')[0].upper()}\\{local}"]
        if FAMILY.get(sem) == "host" and "." in subject and not subject.replace(".", "").isdigit():
            options.append(subject.split(".")[0].upper())
        n = next((self.refs.ref_for("entity", f"{t}:{subject}") for t in ("account", "host", "ip", "file", "filehash")
                  if self.refs.ref_for("entity", f"{t}:{subject}")), None)
        if n is not None:
            options.append(f"[{n}] {subject}")
        return self.rng.choice(options)

    def structure(self, subject: str, sentence: str, label: str, value: str, header: tuple[str, str] | None) -> str:
        """A sentence, a paragraph, a bullet or label line under the subject's heading, or a table row."""
        shape = self.rng.randrange(5)
        if shape == 1:
            return f"I looked at the evidence. {sentence}"
        if shape == 2:
            return f"### {subject}\n- {sentence}"
        if shape == 3:
            return f"### {subject}\n- {label}: {value}"
        if shape == 4 and header is not None:
            return f"| {header[0]} | {header[1]} |\n|---|---|\n| {subject} | {value} |"
        return sentence

    def pick_row(self, kinds: set[str], want: Callable[[Row], bool]) -> Row | None:
        rows = [r for r in self.w.rows if r.kind in kinds and want(r)]
        return self.rng.choice(rows) if rows else None

    # one statement

    def value(self, kinds: set[str], held_out: bool, lie: bool) -> Sample | None:
        row = self.pick_row(kinds, lambda r: any(f.sem in CHECKED for f, _ in r.values) and
                            any(f.name in r.declared.belongs for f, _ in r.values))
        if row is None:
            return None
        subjects = [(f, v) for f, v in row.values if f.name in row.declared.belongs and FAMILY.get(f.sem) in
                    ("account", "host", "ip", "file", "hash") and v]
        fields = [(f, v) for f, v in row.values if f.sem in CHECKED and v and v != "0" and
                  (not f.cue or f.sem in (Sem.PORT, Sem.SCORE, Sem.LEVEL))]
        self.rng.shuffle(fields)
        for f, v in fields:
            others = [(sf, sv) for sf, sv in subjects if sf.name != f.name and
                      (FAMILY.get(sf.sem) != FAMILY.get(f.sem) or {sf.sem, f.sem} == {Sem.SENDER, Sem.RECIPIENT})]
            if not others:
                continue
            sf, subject = self.rng.choice(others)
            family = "mail" if {sf.sem, f.sem} == {Sem.SENDER, Sem.RECIPIENT} else _family(f)
            if family is None:
                continue
            child = next((cv for cf, cv in row.values if cf.sem is Sem.PROCESS), "") if f.sem is Sem.PARENT else ""
            if f.sem is Sem.PARENT and (not child or sf.sem is Sem.PROCESS):
                continue
            if f.sem is Sem.PARENT:
                child_rows = [r for r in self.w.rows if r.kind == row.kind and _belongs(r, subject)
                              and any(cf.sem is Sem.PROCESS and cv.lower() == child.lower() for cf, cv in r.values)]
                real = {cv.lower() for r in child_rows for cf, cv in r.values if cf.sem is Sem.PARENT}
            else:
                real = _held(self.w, subject, FAMILY[f.sem]) if not f.cue else self._cued_real(subject, f, row.kind)
            shown = self._lie(f, real) if lie else _shown(f, v)
            if shown is None:
                continue
            template, wording = self.frame(family, held_out)
            written = self.written(subject, sf.sem)
            c = _CUE_WORDS.get(f.sem, f.name.replace("_", " "))
            sentence = template.format(s=written, v=shown, k=row.kind, p=child, c=c)
            label = {"country": "Country", "app": "App", "parent": f"Parent of {child}", "level": "Risk level",
                     "assessed": "Assessment",
                     "number": c.capitalize()}.get(family, f.name.replace("_", " ").capitalize())
            header = (sf.name.replace("_", " ").capitalize(), label) if family not in ("parent",) else None
            text = self.structure(written, sentence, label, f"«{shown}»", header)
            body, span = unmark(text)
            return Sample(row.kind, "value", wording, body, span if lie else None)
        return None

    def _cued_real(self, subject: str, f: semantics.Field, kind: str) -> set[str]:
        return {v.lower() for r in self.w.rows if _belongs(r, subject) for rf, v in r.values if rf.name == f.name}

    def _lie(self, f: semantics.Field, real: set[str]) -> str | None:
        family = FAMILY.get(f.sem)
        if f.sem is Sem.COUNTRY:
            pool = [names[0].title() for code, names in COUNTRIES.items() if code not in real]
        elif f.sem is Sem.APP:
            pool = [a for a in APPS if a.lower() not in real]
        elif f.sem is Sem.LEVEL:
            pool = [x for x in ("high", "medium", "low") if x not in real]
        elif f.cue:
            pool = [str(n) for n in (8443, 3389, 22, 4444, 55, 15, 35) if str(n) not in real]
        else:
            pool = sorted({v for r in self.w.rows for rf, v in r.values if FAMILY.get(rf.sem) == family and v and
                           not (_forms(rf.sem, v) & real) and (f.sem is not Sem.PARENT or rf.sem is Sem.PARENT)})
        return self.rng.choice(pool) if pool else None

    def count(self, kinds: set[str], held_out: bool, lie: bool) -> Sample | None:
        row = self.pick_row(kinds, lambda r: r.complete and bool(r.declared.nouns) and
                            any(f.name in r.declared.belongs for f, _ in r.values))
        if row is None:
            return None
        subject_field, subject = next((f, v) for f, v in row.values if f.name in row.declared.belongs)
        rows = [r for r in self.w.rows if r.kind == row.kind and _belongs(r, subject)]
        noun = row.declared.nouns[0]
        if not all(r.complete for r in self.w.rows if _belongs(r, subject) and noun in r.declared.nouns):
            return None  # another query counted these too and did not return them all: no one truth
        results = [f.name for f in row.declared.fields if f.sem is Sem.RESULT]
        failed = bool(results) and self.rng.random() < 0.5
        if failed:
            rows = [r for r in rows if any(f.name in results and v.lower() not in ("0", "success") and
                                           "success" not in v.lower() for f, v in r.values)]
        weight = row.declared.weight
        real = sum(int(v) for r in rows for f, v in r.values if f.name == weight) if weight else len(rows)
        truths = {real, len(rows)} | self._other_counts(subject, noun)
        said = real if not lie else next(n for n in range(real + self.rng.choice((3, 5, 7, 11)), 10**6)
                                         if all(abs(n - t) > t * 0.25 + 1 for t in truths) and n % 10)
        if noun in ("rows", "results", "matches", "hits"):
            return None
        template, wording = self.frame("count", held_out)
        written = self.written(subject, subject_field.sem)
        noun_text = ("failed " if failed else "") + noun
        sentence = template.format(s=written, v=said, n=noun_text)
        text = self.structure(written, sentence, noun_text.capitalize(), f"«{said}»", None) \
            if self.rng.random() < 0.3 else sentence
        body, span = unmark(text)
        return Sample(row.kind, "count", wording, body, span if lie else None)

    def _other_counts(self, subject: str, noun: str) -> set[int]:
        """What every kind counted by ``noun`` holds for the subject: a lie is none of them."""
        out: set[int] = set()
        for kind in {r.kind for r in self.w.rows if noun in r.declared.nouns}:
            rows = [r for r in self.w.rows if r.kind == kind and _belongs(r, subject)]
            weight = rows[0].declared.weight if rows else ""
            out |= {len(rows), sum(int(v) for r in rows for f, v in r.values if f.name == weight and v.isdigit())}
        return out

    def distinct(self, kinds: set[str], held_out: bool, lie: bool) -> Sample | None:
        """"from 3 countries", "5 IPs": how many values of a family the subject's rows hold."""
        wanted = {"country": "countries", "ip": "IPs", "app": "apps"}
        row = self.pick_row(kinds, lambda r: r.complete and any(FAMILY.get(f.sem) in wanted and not f.cue
                                                                for f, _ in r.values))
        if row is None:
            return None
        family = self.rng.choice(sorted({FAMILY[f.sem] for f, _ in row.values if FAMILY.get(f.sem) in wanted}))
        subjects = [(f, v) for f, v in row.values if f.name in row.declared.belongs and FAMILY.get(f.sem) != family]
        if not subjects:
            return None
        sf, subject = self.rng.choice(subjects)
        linked = [r for r in self.w.rows if _belongs(r, subject)]
        if not all(r.complete for r in linked):
            return None
        per_kind: dict[str, set[str]] = {}
        truths: set[int] = set()
        for r in linked:
            for f, v in r.values:
                if FAMILY.get(f.sem) == family and not f.cue:
                    per_kind.setdefault(r.kind, set()).add(min(_forms(f.sem, v)))
                if f.sem is Sem.COUNT and "distinct" in f.cue and v.isdigit():
                    truths.add(int(v))
        real = len(per_kind.get(row.kind, set()))
        truths |= {len(v) for v in per_kind.values()} | {len(set().union(*per_kind.values()))}
        said = real if not lie else next(n for n in range(max(truths) + 3, 999) if n % 10)
        if said < 2:
            return None
        noun = wanted[family]
        template = self.rng.choice([f"{{s}} was seen from «{{v}} {noun}».", f"{{s}} used «{{v}} different {noun}».",
                                    f"We saw {{s}} with «{{v}} distinct {noun}».", f"{{s}}: «{{v}} {noun}» in all."])
        wording = "held-out" if held_out else "tuning"
        body, span = unmark(template.format(s=self.written(subject, sf.sem), v=said))
        return Sample(row.kind, "distinct", wording, body, span if lie else None)

    def edge_time(self, kinds: set[str], held_out: bool, lie: bool) -> Sample | None:
        """"olivia.hart's last sign-in was at 2026-11-19 16:43 UTC": the latest (or earliest) time of the subject's
        rows of one kind, when every row was returned."""
        row = self.pick_row(kinds, lambda r: r.complete and any(f.sem is Sem.TIMESTAMP for f, _ in r.values))
        if row is None or not row.declared.nouns or row.declared.nouns[0] in ("rows", "results"):
            return None
        sf, subject = next(((f, v) for f, v in row.values if f.name in row.declared.belongs), (None, ""))
        if sf is None:
            return None
        noun = row.declared.nouns[0]
        same = [r for r in self.w.rows if _belongs(r, subject) and noun in r.declared.nouns]
        if not all(r.complete for r in same):
            return None
        stamps: dict[str, list[datetime]] = {}
        for r in same:
            stamps.setdefault(r.kind, []).extend(datetime.fromisoformat(v) for f, v in r.values
                                                 if f.sem is Sem.TIMESTAMP and _iso(v))
        first = self.rng.random() < 0.5
        edges = [min(v) if first else max(v) for v in stamps.values() if v]
        mine = stamps.get(row.kind)
        if not mine or not edges:
            return None
        real = min(mine) if first else max(mine)
        said = real if not lie else real + timedelta(hours=self.rng.choice((3, 5, 26)), minutes=7)
        if lie and any(abs((said - e).total_seconds()) < 3 * 3600 for e in edges):
            return None
        word = "first" if first else "last"
        template = self.rng.choice([f"{{s}}'s {word} {{n}} was at «{{t}}».", f"The {word} {{n}} of {{s}}: «{{t}}».",
                                    f"{{s}} — {word} {{n}} «{{t}}»."])
        text = template.format(s=self.written(subject, sf.sem), n=noun.rstrip("s") if noun.endswith("s") else noun,
                               t=f"{said:%Y-%m-%d %H:%M} UTC")
        body, span = unmark(text)
        return Sample(row.kind, "first/last time", "held-out" if held_out else "tuning", body, span if lie else None)

    def flag(self, kinds: set[str], held_out: bool, lie: bool) -> Sample | None:
        flagged = [(k, f) for r in self.w.rows if r.kind in kinds for f in r.declared.fields
                   if f.sem is Sem.FLAG and f.cue for k in (r.kind,)]
        kinds_with_flags = {k for k, _ in flagged}
        for kind in kinds_with_flags:
            readers = self.w.read.get(kind, set())
            truthful = {v for r in self.w.rows if r.kind == kind and any(f.sem is Sem.FLAG and v == "True"
                                                                         for f, v in r.values)
                        for f, v in r.values if f.name in r.declared.belongs and "@" in v}
            pool = sorted({s for s in readers if "@" in s and s not in truthful}) if lie else sorted(truthful)
            if not pool:
                continue
            subject = self.rng.choice(pool)
            template, wording = self.frame("flag", held_out)
            body, span = unmark(template.format(s=self.written(subject, Sem.ACCOUNT)))
            return Sample(kind, "flag", wording, body, span if lie else None)
        return None

    def share(self, kinds: set[str], held_out: bool, lie: bool | None) -> Sample | None:
        """"40% of the sign-ins of olivia.hart failed", "2 of 5 logons came from 10.1.2.3", "half of ...": the part
        of the subject's rows of a kind that a result word or a value selects, over all of them (rows, or their
        declared weight). ``lie`` None: a hedged word ("most") over a share it does not fit, which states no number."""
        row = self.pick_row(kinds, lambda r: r.complete and bool(r.declared.nouns) and
                            r.declared.nouns[0] not in ("rows", "results", "matches", "hits") and
                            any(f.name in r.declared.belongs for f, _ in r.values))
        if row is None:
            return None
        subjects = [(f, v) for f, v in row.values if f.name in row.declared.belongs and v and
                    FAMILY.get(f.sem) in ("account", "host", "ip")]
        if not subjects:
            return None
        sf, subject = self.rng.choice(subjects)
        noun = row.declared.nouns[0]
        rows = [r for r in self.w.rows if r.kind == row.kind and _belongs(r, subject)]
        if len(rows) < 2 or not all(r.complete for r in self.w.rows if _belongs(r, subject) and
                                    noun in r.declared.nouns):
            return None
        selector = self._selector(row, sf, rows)
        if selector is None:
            return None
        words, picks = selector
        weight = row.declared.weight
        events = [sum(int(v) for f, v in r.values if f.name == weight and v.isdigit()) if weight else 1 for r in rows]
        truths = [(sum(1 for r in rows if picks(r)), len(rows)),
                  (sum(e for r, e in zip(rows, events, strict=True) if picks(r)), sum(events))]
        truths = [(p, w) for p, w in truths if w]
        part, whole = truths[-1]
        shares = [100 * p / w for p, w in truths]
        written = self.written(subject, sf.sem)
        rng = self.rng
        if lie is None:
            if max(shares) > 30:
                return None
            text = f"Most of the {noun} of {written} {words}."
            return Sample(row.kind, "hedged share", "held-out" if held_out else "tuning", text, None)
        form = rng.randrange(3)
        if form == 0:  # N of M, the whole the rows' own
            part, whole = truths[0]
            said_part = part if not lie else next((n for n in rng.sample(range(whole + 1), whole + 1)
                                                   if all(n != p for p, w in truths if w == whole)), None)
            if said_part is None:
                return None
            share = f"{said_part} of {whole}" if rng.random() < 0.5 else f"{said_part} out of {whole}"
            template, _ = self.frame("share of", held_out)
            text = template.format(v=share, n=noun, s=written, w=words)
        else:
            real = 100 * part / whole
            if lie:
                said = next((n for n in rng.sample(range(5, 100, 5), 19) if all(abs(n - t) > 15 for t in shares)),
                            None)
                if said is None:
                    return None
                said_text = f"{said}%"
            else:
                said_text = f"{real:.0f}%" if form == 1 else f"{real:.0f} percent"
            template, _ = self.frame("share", held_out)
            text = template.format(v=said_text, n=noun, s=written, w=words)
        body, span = unmark(text)
        return Sample(row.kind, "share", "held-out" if held_out else "tuning", body, span if lie else None)

    def _selector(self, row: Row, subject_field: semantics.Field, rows: list[Row]
                  ) -> tuple[str, Callable[[Row], bool]] | None:
        """What selects part of the rows, as an answer says it: "failed" (a result field), "came from Russia", "were
        to Office 365", "were on WS-FIN-023"; None when no such part is neither none nor all of them."""
        results = [f.name for f in row.declared.fields if f.sem is Sem.RESULT]
        options: list[tuple[str, Callable[[Row], bool]]] = []
        if results:
            def failed(r: Row) -> bool:
                return any(f.name in results and v.lower() not in ("0", "success") and "success" not in v.lower()
                           for f, v in r.values)
            options.append(("failed", failed))
        for f in row.declared.fields:
            if f.cue or f.name == subject_field.name or f.sem not in (Sem.COUNTRY, Sem.APP, Sem.IP, Sem.HOST):
                continue
            held = sorted({v for r in rows for rf, v in r.values if rf.name == f.name and v})
            for value in held[:3]:
                shown = _shown(f, value)
                verb = {Sem.COUNTRY: "came from", Sem.IP: "came from", Sem.APP: "were to", Sem.HOST: "were on"}[f.sem]

                def holds(r: Row, name: str = f.name, v: str = value) -> bool:
                    return any(rf.name == name and rv == v for rf, rv in r.values)
                options.append((f"{verb} {shown}", holds))
        options = [(w, p) for w, p in options if 0 < sum(1 for r in rows if p(r)) < len(rows)]
        return self.rng.choice(options) if options else None

    def change(self, kinds: set[str], held_out: bool, lie: bool) -> Sample | None:
        """"I assigned #900002 to alice@contoso.com", "#900001 was closed as a true positive", "I lowered #900003 to
        Low", "I escalated #900004 to dana@contoso.com": what a confirmed change set, read after its cue words."""
        row = self.pick_row(kinds, lambda r: any(f.choices or (f.cue and FAMILY.get(f.sem) == "account")
                                                 for f, _ in r.values))
        if row is None:
            return None
        number = next((v for f, v in row.values if f.name in row.declared.belongs), "")
        kind = next((v for f, v in row.values if f.name == "kind"), "")
        wanted = {"assign": "owner", "status": "classification", "severity": "severity",
                  "escalate": "escalated_to"}.get(kind)
        field_ = next((f for f, _ in row.values if f.name == wanted), None)
        real = [v for f, v in row.values if f.name == wanted]
        if field_ is None or not real or not number:
            return None
        if field_.choices:
            pool = [c for c in field_.choices if c not in real] if lie else real
            shown = _spaced(self.rng.choice(pool)) if pool else None
        else:
            known = sorted({v for r in self.w.rows for f, v in r.values if FAMILY.get(f.sem) == "account" and "@" in v})
            pool = [a for a in known if a.lower() not in {v.lower() for v in real}] if lie else real
            shown = self.rng.choice(pool) if pool else None
        if shown is None:
            return None
        template, wording = self.frame(f"change {wanted}", held_out)
        body, span = unmark(template.format(n=number, v=shown))
        return Sample(row.kind, "change", wording, body, span if lie else None)

    def not_claim(self, kinds: set[str], held_out: bool) -> Sample | None:
        """A false value in a question, an instruction, a hypothetical, a negation: nothing is claimed."""
        sample = self.value(kinds, held_out, True)
        if sample is None or sample.lie is None:
            return None
        value = sample.text[sample.lie[0]:sample.lie[1]]
        row_subject = sample.text.split("\n")[0].lstrip("#| ").split(" ")[0]
        family = "country" if _country_code(value.lower()) in COUNTRIES else "ip"
        verb, verbed = _VERBS[family]
        template = self.rng.choice(_NOT_CLAIMS)
        body, _ = unmark(template.format(s=row_subject, v=value, verb=verb, verbed=verbed))
        return Sample(sample.kind, "not a claim", sample.wording, body, None)

    def rounding(self, kinds: set[str], held_out: bool) -> Sample | None:
        """A hedged estimate or an honest rounding of a true count."""
        sample = self.count(kinds, held_out, False)
        if sample is None:
            return None
        for word in sample.text.split():
            if word.isdigit():
                real = int(word)
                if real < 4:
                    return None
                rounded = round(real, -1) if real >= 15 else real + self.rng.choice((-1, 1))
                said = f"about {rounded}" if rounded != real else f"roughly {real}"
                return Sample(sample.kind, "estimate", sample.wording, sample.text.replace(word, said, 1), None)
        return None


def _family(f: semantics.Field) -> str | None:
    if f.sem is Sem.PARENT:
        return "parent"
    if f.sem is Sem.LEVEL:
        return "assessed" if "assess" in f.cue else "level" if "risk" in f.cue else None
    if f.sem in (Sem.PORT, Sem.SCORE):
        return "number" if f.cue else None
    family = FAMILY.get(f.sem)
    return {"account": "account", "host": "host", "ip": "ip", "country": "country", "app": "app", "file": "file",
            "hash": "hash", "domain": "host", "url": None}.get(family or "")


def _spaced(value: str) -> str:
    """An enumeration's value as an answer writes it: "TruePositive" as "true positive"."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", value).lower() if value[1:].lower() != value[1:] else value


def _iso(value: str) -> bool:
    try:
        return datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


def _shown(f: semantics.Field, value: str) -> str:
    if f.sem is Sem.COUNTRY:
        code = _country_code(value.lower())
        return COUNTRIES[code][0].title() if code in COUNTRIES else value
    return value


def kinds(world: World) -> list[str]:
    return sorted({r.kind for r in world.rows})


def samples(world: World, seed: int, kind: str, held_out_wording: bool) -> list[Sample]:
    """One seed's samples about one kind: lies and correct statements of each category it can make, then what
    analysts write around facts (questions, instructions, estimates), never fewer correct than lies."""
    gen = _Gen(world, seed * 7919 + sum(map(ord, kind)))
    out: list[Sample] = []
    for make in (gen.value, gen.count, gen.distinct, gen.edge_time, gen.flag, gen.share, gen.change):
        for lie in (True, False):
            sample = make({kind}, held_out_wording, lie)
            if sample is not None:
                out.append(sample)
    hedged = gen.share({kind}, held_out_wording, None)
    if hedged is not None:
        out.append(hedged)
    for extra in (gen.not_claim, gen.rounding):
        sample = extra({kind}, held_out_wording)
        if sample is not None:
            out.append(sample)
    return out


@dataclass
class Score:
    """Per kind and category: lies caught at the claim, elsewhere, missed; correct answers marked."""

    rows: dict[tuple[str, str], Counter[str]] = field(default_factory=dict)
    misses: list[str] = field(default_factory=list)

    def add(self, sample: Sample, findings: list[Any]) -> None:
        category = sample.category if sample.lie is not None else f"correct: {sample.category}"
        tally = self.rows.setdefault((sample.kind, category), Counter())
        tally["cases"] += 1
        if sample.lie is None:
            tally["marked"] += bool(findings)
            if findings:
                self.misses.append(f"MARKED {sample.kind}: {sample.text!r} {[f.record for f in findings]}")
            return
        start, end = sample.lie
        at_claim = any((f.start < end and start < f.end) or (f.withhold and f.sentence[0] <= start < f.sentence[1])
                       for f in findings)
        tally["at claim" if at_claim else "elsewhere" if findings else "missed"] += 1
        if not at_claim:
            self.misses.append(f"MISSED {sample.kind}: {sample.text!r} {[f.record for f in findings]}")

    def totals(self, kinds: Iterable[str] | None = None) -> tuple[int, int, int, int]:
        """(lies, lies caught at the claim, correct answers, correct answers marked)"""
        wanted = set(kinds) if kinds is not None else None
        lies = [t for (k, c), t in self.rows.items() if not c.startswith("correct") and (wanted is None or k in wanted)]
        right = [t for (k, c), t in self.rows.items() if c.startswith("correct") and (wanted is None or k in wanted)]
        return (sum(t["cases"] for t in lies), sum(t["at claim"] for t in lies), sum(t["cases"] for t in right),
                sum(t["marked"] for t in right))


def score(world: World, seeds: Iterable[int], kinds_: Iterable[str], held_out_wording: bool,
          check: Callable[[str], list[Any]]) -> Score:
    result = Score()
    for seed in seeds:
        for kind in kinds_:
            for sample in samples(world, seed, kind, held_out_wording):
                result.add(sample, check(sample.text))
    return result
