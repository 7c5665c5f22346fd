"""The fact check: every identifier and every claim about a record in an answer, checked against the facts.

``check`` reads the answer sentence by sentence (and markdown tables row by row). Identifiers must be in
this conversation's results as whole, normalised tokens (``facts.Facts.knows``). Claims (``claims.find``)
are tied to the incident or alert the sentence names (by number, ``[n]`` or "it" after one) and compared
with its record: severity, status, owner, classification, times; counts with what the bot computed from
the results; "I closed it" with the changes this conversation confirmed. ``annotate`` marks each mismatch
at the claim and summarises them above the answer; risky content (a block of an indicator no result
contains, benign or closing advice the record does not support) is withheld instead of footnoted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.orchestrator.factcheck import claims as claimed
from bot.orchestrator.factcheck import verdicts
from bot.orchestrator.factcheck.claims import Claim, Topic
from bot.orchestrator.factcheck.facts import AlertFact, Facts, IncidentFact
from bot.orchestrator.factcheck.identifiers import Identifier, IdKind, extract
from bot.orchestrator.references import References, RefKind
from bot.sentinel.models import count_label

NAVIGATION_HOSTS = ("portal.azure.com", "security.microsoft.com", "learn.microsoft.com", "microsoft.com",
                    "azure.com", "office.com", "microsoftonline.com")
_BLOCK = re.compile(r"\b(block(?:list)?|blacklist|deny[- ]?list|ban|isolate|quarantine|sinkhole|firewall|"
                    r"add (?:it |them )?to (?:the )?(?:indicators|ti|threat intel\w*))\b", re.IGNORECASE)
_CARRY = re.compile(r"^\W*(?:it|its|it's|this|that|they|both|which|the incident|this incident|that incident)\b|"
                    r"\b(?:it|this incident|that incident|the incident)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z#\[*(\d✅⚠])")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_ALERT_WORD = re.compile(r"\balerts?\b", re.IGNORECASE)
MAX_SUMMARY_LINES = 6


@dataclass(frozen=True)
class Finding:
    """One statement in the answer that the records do not back."""

    category: str  # "incident", "ip", ... for identifiers; "severity", "status", ... for claims
    start: int  # the claim's span in the answer
    end: int
    claimed: str  # as the answer wrote it
    record: str  # what the records say instead, with where that came from
    note: str  # the short inline mark
    withhold: bool = False  # risky: the sentence is replaced, not footnoted
    sentence: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class _Mention:
    kind: RefKind  # incident or alert
    key: str
    start: int


class _Check:
    def __init__(self, answer: str, facts: Facts, references: References, now: datetime) -> None:
        self.answer, self.facts, self.references, self.now = answer, facts, references, now
        self.findings: list[Finding] = []
        self.ids = extract(answer)

    def run(self) -> list[Finding]:
        units = list(_units(self.answer))
        named = [self._mentions((start, end)) for start, end, _ in units]  # what each sentence or row names
        everything = [m for mentions in named for m in mentions]
        previous: list[_Mention] = []
        for (start, end, cells), mentions in zip(units, named, strict=True):
            self._identifiers((start, end))
            if cells is not None:
                mentions = mentions or self._table_subject(cells)
                found = _cell_claims(cells, self.now)
            else:
                found = claimed.find(self.answer[start:end], start, self.now)
                if not mentions and previous and _CARRY.search(self.answer[start:end]):
                    mentions = [_Mention(previous[-1].kind, previous[-1].key, start)]
            for claim in found:
                self._verify(claim, mentions, everything, (start, end))
            previous = mentions or previous
        return _deduplicated(self.findings)

    # identifiers

    def _identifiers(self, sentence: tuple[int, int]) -> None:
        start, end = sentence
        inside = [i for i in self.ids if start <= i.start < end]
        risky = bool(_BLOCK.search(self.answer[start:end]))
        for index, identifier in enumerate(inside):
            problem = self._unknown(identifier) or self._mismatched_reference(identifier, inside, index)
            if problem:
                withhold = risky and identifier.kind not in (IdKind.INCIDENT, IdKind.REFERENCE)
                record = (f"a sentence advising to block {identifier.describe()}, which no query in this "
                          "conversation returned" if withhold else problem)
                self._add(identifier.kind.value, identifier.start, identifier.end, record,
                          "not in any result" if "not in any" in problem else problem, withhold, sentence)

    def _unknown(self, identifier: Identifier) -> str | None:
        if identifier.kind is IdKind.REFERENCE:
            return None if self.references.get(int(identifier.value)) else \
                f"[{identifier.value}] is not a reference in this conversation"
        if identifier.kind in (IdKind.URL, IdKind.DOMAIN) and _navigation(identifier.value):
            return None
        if self.facts.knows(identifier.kind, identifier.value):
            return None
        return f"{identifier.describe()} is not in any query result in this conversation"

    def _mismatched_reference(self, identifier: Identifier, inside: list[Identifier], index: int) -> str | None:
        """"#14448 [1]" where [1] is another incident."""
        if identifier.kind is not IdKind.REFERENCE or index == 0:
            return None
        before = inside[index - 1]
        reference = self.references.get(int(identifier.value))
        if (before.kind is IdKind.INCIDENT and identifier.start - before.end <= 3 and reference is not None
                and reference.kind is RefKind.INCIDENT and reference.key != before.value):
            return f"[{identifier.value}] is incident #{reference.key}, not #{before.value}"
        return None

    # subjects

    def _mentions(self, sentence: tuple[int, int]) -> list[_Mention]:
        start, end = sentence
        mentions = []
        for identifier in self.ids:
            if not start <= identifier.start < end:
                continue
            if identifier.kind is IdKind.INCIDENT:
                mentions.append(_Mention(RefKind.INCIDENT, identifier.value, identifier.start))
            elif identifier.kind is IdKind.REFERENCE:
                reference = self.references.get(int(identifier.value))
                known = reference is not None and reference.kind in (RefKind.INCIDENT, RefKind.ALERT)
                if reference is not None and known and not (mentions and mentions[-1].key == reference.key):
                    mentions.append(_Mention(reference.kind, reference.key, identifier.start))  # "#1 [1]": one
            elif identifier.kind is IdKind.ALERT_ID and identifier.value in self.facts.alerts:
                mentions.append(_Mention(RefKind.ALERT, identifier.value, identifier.start))
        return mentions

    def _table_subject(self, cells: list[tuple[str, str, int, int]]) -> list[_Mention]:
        for header, value, start, _ in cells:
            if re.search(r"incident|number|^#$|^id$", header, re.IGNORECASE) and value.strip().lstrip("#").isdigit():
                number = value.strip().lstrip("#")
                if not self.facts.knows_incident(int(number)):
                    self._add("incident", start, start + len(value.strip()),
                              f"incident #{number} is not in any query result in this conversation",
                              "not in any result", False, (start, start))
                return [_Mention(RefKind.INCIDENT, number, start)]
        return []

    def _subject(self, claim: Claim, mentions: list[_Mention]) -> IncidentFact | AlertFact | None:
        before = [m for m in mentions if m.start <= claim.start]
        mention = before[-1] if before else (mentions[0] if mentions else None)
        if mention is None:
            return None
        if (mention.kind is RefKind.INCIDENT and claim.topic in (Topic.SEVERITY, Topic.STATUS)
                and mention.start < claim.start and _ALERT_WORD.search(self.answer[mention.start:claim.start])):
            return None  # "#14440 has 4 alerts, one of them Low": the claim is about an alert
        if mention.kind is RefKind.INCIDENT:
            return self.facts.incidents.get(int(mention.key)) if mention.key.isdigit() else None
        return self.facts.alerts.get(mention.key)

    # claims

    def _verify(self, claim: Claim, mentions: list[_Mention], everything: list[_Mention],
                sentence: tuple[int, int]) -> None:
        subject = self._subject(claim, mentions)
        if claim.topic is Topic.COUNT:
            problem = self._count(claim, subject)
        elif claim.topic is Topic.CHANGE:
            problem = self._change(claim, subject, mentions)
        elif claim.topic is Topic.BENIGN:
            subjects = [subject] if subject else [self._fact(m) for m in everything if m.kind is RefKind.INCIDENT]
            for fact in subjects:
                if isinstance(fact, IncidentFact) and (unsupported := self._benign(claim, fact)):
                    record, note, withhold = unsupported
                    self._add("classification", claim.start, claim.end, record, note, withhold, sentence)
                    break
            return
        elif subject is None:
            return
        else:
            problem = self._attribute(claim, subject)
        if problem:
            record, note = problem
            self._add(claim.topic.value, claim.start, claim.end, record, note, False, sentence)

    def _fact(self, mention: _Mention) -> IncidentFact | None:
        return self.facts.incidents.get(int(mention.key)) if mention.key.isdigit() else None

    def _attribute(self, claim: Claim, fact: IncidentFact | AlertFact) -> tuple[str, str] | None:
        record = _describe(fact)
        if claim.topic is Topic.SEVERITY:
            return None if fact.severity == claim.value else (record, f"record: {fact.severity}")
        if claim.topic is Topic.STATUS:
            return None if _status_matches(claim.value, fact.status) else (record, f"record: {fact.status}")
        if claim.topic is Topic.OWNER and isinstance(fact, IncidentFact):
            return None if _owner_matches(claim.value, fact.owner) else \
                (record, f"record: {fact.owner or 'unassigned'}")
        if claim.topic is Topic.VERDICT and isinstance(fact, IncidentFact):
            return None if fact.classification == claim.value else \
                (record, f"record: {fact.classification or 'not classified'}")
        if claim.topic is Topic.TIME:
            return self._time(claim, fact)
        return None

    def _time(self, claim: Claim, fact: IncidentFact | AlertFact) -> tuple[str, str] | None:
        times = fact.times if isinstance(fact, IncidentFact) else tuple(t for t in (fact.time,) if t)
        if not times or any(_time_matches(claim, t, self.now) for t in times):
            return None
        main = (fact.created if isinstance(fact, IncidentFact) else fact.time) or times[0]
        age = _age(self.now - main)
        name = f"#{fact.number}" if isinstance(fact, IncidentFact) else "the alert"
        verb = "was created" if isinstance(fact, IncidentFact) else "fired"
        return (f"{name} {verb} {main:%Y-%m-%d %H:%M} UTC, {age} ago ({fact.seen.describe()})",
                f"record: {main:%Y-%m-%d %H:%M} UTC, {age} ago")

    def _count(self, claim: Claim, subject: IncidentFact | AlertFact | None) -> tuple[str, str] | None:
        value = int(claim.value)
        if claim.own and isinstance(subject, IncidentFact) and claim.noun == "alerts" and not claim.qualifiers:
            if _count_matches(value, subject.alert_count, claim.approx):
                return None
            alerts = count_label(subject.alert_count, "alert")
            return (f"#{subject.number} has {alerts} ({subject.seen.describe()})", f"record: {alerts}")
        nouns = [claim.noun] if claim.noun else ["incidents", "alerts"]
        candidates = [c for noun in nouns for c in self.facts.counts_for(noun, claim.qualifiers)]
        if any(_count_matches(value, c.value, claim.approx) for c in candidates):
            return None
        words = " ".join([*sorted(claim.qualifiers), claim.noun or "records"])
        if not candidates:
            if claim.qualifiers and any(self.facts.can_count(noun) for noun in nouns):
                return None  # a breakdown the results cannot give: not checked
            return (f"no query in this conversation counted {words}", "no query counted these")
        best = min(candidates, key=lambda c: abs(c.value - value))
        return (f"the results show {best.value} {words} ({best.scope})", f"results: {best.value}")

    def _change(self, claim: Claim, subject: IncidentFact | AlertFact | None,
                mentions: list[_Mention]) -> tuple[str, str] | None:
        if claim.value in ("✅", "✔", "✔️", "done", "all set", "completed") and not (
                mentions or re.search(r"\b(closed|assigned|changed|updated|resolved|severity|status|owner|applied)\b",
                                      self.answer[claim.start:claim.start + 200], re.IGNORECASE)):
            return None  # a check-mark bullet, not a claim that something was changed
        kinds = claimed.CHANGE_KINDS.get(claim.value, claimed.ANY_CHANGE)
        number = subject.number if isinstance(subject, IncidentFact) else None
        if kinds and self.facts.change_for(number, kinds) is not None:
            return None
        if not claim.actor and isinstance(subject, IncidentFact) and _state_shows(claim.value, subject):
            return None  # "has been closed" about an incident whose record says Closed: a fact, not an action
        target = f"#{number}" if number else "any incident"
        record = f"no change to {target} was confirmed in this conversation"
        if isinstance(subject, IncidentFact):
            record += f"; {_describe(subject)}"
        return record, "nothing was changed"

    @staticmethod
    def _benign(claim: Claim, fact: IncidentFact) -> tuple[str, str, bool] | None:
        """A benign claim the record does not support: (record, note, withhold). Withheld when the record is
        open or not closed as benign; only marked when it was closed as the other benign classification."""
        harmless = ("BenignPositive", "FalsePositive")
        if fact.classification == claim.value or (claim.value == "BenignPositive" and fact.classification in harmless):
            return None
        if fact.classification in harmless:
            return _describe(fact), f"record: {fact.classification}", False
        state = f"{fact.severity}, {fact.status}, " + (f"classified {fact.classification}" if fact.classification
                                                        else "not classified")
        return (f"a sentence calling #{fact.number} benign, approved, or safe to close or leave; its record is "
                f"{state} ({fact.seen.describe()})", "withheld", True)

    def _add(self, category: str, start: int, end: int, record: str, note: str, withhold: bool,
             sentence: tuple[int, int]) -> None:
        self.findings.append(Finding(category, start, end, self.answer[start:end], record, note, withhold, sentence))


def check(answer: str, facts: Facts, references: References, now: datetime) -> list[Finding]:
    """The statements in ``answer`` that this conversation's records do not back, in order."""
    found = _Check(answer, facts, references, now).run()
    found += [Finding("assessment", m.start, m.end, answer[m.start:m.end], m.record, m.note, False, m.sentence)
              for m in verdicts.mismatches(answer, facts.verdicts.values())]
    return sorted(found, key=lambda f: f.start)


def annotate(answer: str, findings: list[Finding]) -> str:
    """The answer with each finding marked where it is, withheld sentences replaced, and a summary on top."""
    if not findings:
        return answer
    text, shown = _marked(answer, findings)
    lines = [f"⚠ Fact check: {_statements(len(shown))} in this answer "
             f"{'does' if len(shown) == 1 else 'do'} not match Sentinel's records (marked ⚠ below):"]
    for finding in shown[:MAX_SUMMARY_LINES]:
        said = "Withheld: " if finding.withhold else f"\"{_quote(finding.claimed)}\": "
        lines.append(f"- {said}{finding.record}")
    if len(shown) > MAX_SUMMARY_LINES:
        lines.append(f"- and {len(shown) - MAX_SUMMARY_LINES} more, marked below")
    return "\n".join(lines) + "\n\n" + text


def mark(answer: str, findings: list[Finding]) -> str:
    """The answer with the marks and withheld sentences only (no summary): what a streamed answer shows."""
    return _marked(answer, findings)[0] if findings else answer


def _marked(answer: str, findings: list[Finding]) -> tuple[str, list[Finding]]:
    """The marked text, and the findings the summary lists: a withheld sentence covers what was in it."""
    withheld: set[tuple[int, int]] = set()
    edits: list[tuple[int, int, str]] = []
    shown: list[Finding] = []
    for finding in findings:
        if finding.withhold and finding.sentence not in withheld:
            withheld.add(finding.sentence)
            edits.append((*finding.sentence, f"⚠ [Withheld: {finding.record}. Check it in Sentinel before acting.]"))
            shown.append(finding)
    for finding in findings:
        if not any(s <= finding.start < e for s, e in withheld):
            edits.append((finding.end, finding.end, f" ⚠({finding.note})"))
            shown.append(finding)
    pieces, position = [], 0
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1])):
        pieces += [answer[position:start], replacement]
        position = max(position, end)
    return "".join(pieces) + answer[position:], sorted(shown, key=lambda f: f.start)


def summary_notice(findings: list[Finding]) -> str:
    """The one line the Data sources footnote carries."""
    withheld = sum(1 for f in findings if f.withhold)
    extra = f", {withheld} withheld" if withheld else ""
    return (f"Fact check: {_statements(len(findings))} did not match this conversation's query results{extra}; "
            "they are marked ⚠ in the answer. Check them in Sentinel.")


# helpers


def _units(answer: str) -> Iterator[tuple[int, int, list[tuple[str, str, int, int]] | None]]:
    """Sentences, and markdown table rows (with their cells under their headers)."""
    headers: list[str] | None = None
    offset = 0
    lines = answer.split("\n")
    for index, line in enumerate(lines):
        start = offset
        offset += len(line) + 1
        if line.lstrip().startswith("|"):
            following = lines[index + 1] if index + 1 < len(lines) else ""
            if headers is None and _TABLE_RULE.match(following):
                headers = [c.strip() for c in line.strip().strip("|").split("|")]
                continue
            if _TABLE_RULE.match(line):
                continue
            yield start, start + len(line), _cells(line, start, headers or [])
            continue
        headers = None
        for s, e in _split(line, start):
            yield s, e, None


def _split(line: str, offset: int) -> Iterator[tuple[int, int]]:
    position = 0
    for m in _SENTENCE_END.finditer(line):
        yield offset + position, offset + m.start()
        position = m.end()
    if line[position:].strip():
        yield offset + position, offset + len(line)


def _cells(line: str, offset: int, headers: list[str]) -> list[tuple[str, str, int, int]]:
    cells = []
    position = line.index("|") + 1
    for index, cell in enumerate(line.strip().strip("|").split("|")):
        start = line.index(cell, position) if cell else position
        cells.append((headers[index] if index < len(headers) else "", cell, offset + start, offset + start + len(cell)))
        position = start + len(cell) + 1
    return cells


def _cell_claims(cells: list[tuple[str, str, int, int]], now: datetime) -> list[Claim]:
    """A table row states a field per column: "| 14448 | Low | Active |" under its headers."""
    found: list[Claim] = []
    for header, value, start, _ in cells:
        name, cell = header.lower(), value.strip()
        lead = start + (len(value) - len(value.lstrip()))
        span = (lead, lead + len(cell))
        if not cell:
            continue
        if "sever" in name and cell.capitalize() in ("High", "Medium", "Low", "Informational"):
            found.append(Claim(Topic.SEVERITY, cell.capitalize(), *span))
        elif "status" in name or name == "state":
            word = cell.split()[0].strip("(),")
            value_of = claimed.status_value(word.capitalize() if word.lower() in ("active", "closed", "new") else word)
            if value_of:
                found.append(Claim(Topic.STATUS, value_of, *span))
        elif "owner" in name or "assign" in name:
            nobody = cell.lower() in ("-", "unassigned", "none", "nobody")
            found.append(Claim(Topic.OWNER, "" if nobody else cell, *span))
        elif "alert" in name and cell.replace(",", "").isdigit():
            found.append(Claim(Topic.COUNT, cell.replace(",", ""), *span, noun="alerts", own=True))
        elif any(w in name for w in ("created", "time", "date", "when", "opened", "modified", "first", "last")):
            found += [c for c in claimed.find(cell, lead, now) if c.topic is Topic.TIME]
    return found


def _describe(fact: IncidentFact | AlertFact) -> str:
    if isinstance(fact, IncidentFact):
        return f"{fact.describe()} ({fact.seen.describe()})"
    return f"the alert is {fact.severity}, {fact.status} ({fact.seen.describe()})"


def _status_matches(claimed_status: str, status: str) -> bool:
    closed = status in ("Closed", "Resolved", "Dismissed")
    if claimed_status == "Closed":
        return closed
    if claimed_status == "open":
        return not closed
    return claimed_status == status


def _owner_matches(claimed_owner: str, owner: str | None) -> bool:
    if not claimed_owner:
        return owner is None
    if claimed_owner.lower() in ("you", "me"):
        return owner is not None  # who "you" is is not known here; only "assigned to you" while unassigned is wrong
    if owner is None:
        return False
    said = set(re.split(r"[\s._@'-]+", claimed_owner.lower().split("@")[0])) - {""}
    real = set(re.split(r"[\s._@'-]+", owner.lower().split("@")[0])) - {""}
    return bool(said) and said <= real


def _state_shows(verb: str, fact: IncidentFact) -> bool:
    if verb in ("closed", "resolved", "dismissed"):
        return fact.status == "Closed"
    if verb in ("assigned", "reassigned"):
        return fact.owner is not None
    return False


def _time_matches(claim: Claim, moment: datetime, now: datetime) -> bool:
    if claim.window is not None:
        low, high = claim.window
        return low - timedelta(minutes=5) <= now - moment <= high
    if claim.moment is None:
        return True
    if claim.precision == "day":
        return abs((moment.date() - claim.moment.date()).days) <= 1
    minutes = (moment - claim.moment).total_seconds() / 60
    if claim.precision == "utc-clock":
        minutes = minutes % (24 * 60)
        return min(minutes, 24 * 60 - minutes) <= 2
    if claim.precision == "utc-minute":
        return abs(minutes) <= 2
    # A time may be written in the reader's time zone: offsets are whole quarter hours within 14 hours.
    if claim.precision == "clock":
        minutes = minutes % (24 * 60)
        return min(minutes % 15, 15 - minutes % 15) <= 1
    return abs(minutes) <= 14 * 60 and min(minutes % 15, 15 - minutes % 15) <= 1


def _count_matches(said: int, real: int, approx: str) -> bool:
    if approx == "over":
        return real >= said
    if approx == "under":
        return real <= said
    if approx == "about":
        return abs(real - said) <= said * 0.2 + 1
    return real == said


def _age(delta: timedelta) -> str:
    seconds = max(delta.total_seconds(), 0)
    if seconds < 3600:
        return f"{int(seconds // 60)} minutes"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} hours"
    return f"{seconds / 86400:.0f} days"


def _navigation(value: str) -> bool:
    host = value.split("://", 1)[-1].split("/", 1)[0]
    return any(host == h or host.endswith("." + h) for h in NAVIGATION_HOSTS)


def _statements(n: int) -> str:
    return "1 statement" if n == 1 else f"{n} statements"


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:59] + "…"


def _deduplicated(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[int, int, str]] = set()
    kept = []
    for finding in sorted(findings, key=lambda f: (f.start, f.end)):
        key = (finding.start, finding.end, finding.category)
        if key not in seen:
            seen.add(key)
            kept.append(finding)
    return kept
