"""The fact check: every identifier and every claim about a record in an answer, checked against the facts.

``check`` reads the answer's structure (``structure.read``: sentences, list items under their heading or lead-in,
"Label: value" lines, table rows under their headers). Identifiers must be in this conversation's results as
whole, normalised tokens (``facts.Facts.knows``); entity values written as plain words are found by looking them
up. A claim (``claims.find``, or a cell under its header) is tied to the records its unit links to: the
coordinated group it follows ("#a, #b and #c are all High" holds for each), the row's incident, the heading a
bullet hangs under, "it" after one; people to the incidents an ownership verb names. Relations between records
are checked by ``relations``. Instructions, recommendations, hypotheticals and questions assert nothing; a
claim linked to no record, or with a restriction the results cannot count ("each", "in the last 48 hours"), is
left alone. ``annotate`` marks each mismatch at the claim and summarises them above the answer; risky content
(a block of an indicator no result contains, benign or closing advice the record does not support) is withheld
instead of footnoted, never an instruction.
"""
from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from bot.orchestrator.factcheck import claims as claimed
from bot.orchestrator.factcheck import declared, relations, structure, verdicts
from bot.orchestrator.factcheck.claims import Claim, Topic
from bot.orchestrator.factcheck.facts import SEVERITIES, AlertFact, Facts, IncidentFact, Sighting
from bot.orchestrator.factcheck.identifiers import Identifier, IdKind, extract
from bot.orchestrator.references import References, RefKind
from bot.sentinel.models import count_label

NAVIGATION_HOSTS = ("portal.azure.com", "security.microsoft.com", "learn.microsoft.com", "microsoft.com",
                    "azure.com", "office.com", "microsoftonline.com")
_BLOCK = re.compile(r"\b(block(?:list)?|blacklist|deny[- ]?list|ban|isolate|quarantine|sinkhole|firewall|"
                    r"add (?:it |them )?to (?:the )?(?:indicators|ti|threat intel\w*))\b", re.IGNORECASE)
# A sentence that names no record but continues about the last one: "It is ...", "This one has ...".
_CARRY = re.compile(r"^\W*(?:it|its|it's|they|both|which)\b|^\W*(?:this|that)\s+(?:one|incident|case|alert|is|was|has|"
                    r"had)\b|\b(?:it|this incident|that incident|the incident)\b", re.IGNORECASE)
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
    end: int = 0


# Between the mentions of one coordinated group: "#a, #b and #c", "#a/#b", "(#a, #b)".
_JOINED = re.compile(r"^[\s,()*_]*(?:and|or|&|/|as well as|plus)?[\s,()*_]*$", re.IGNORECASE)
_PERSON_BEFORE = re.compile(r"(?:assigned to|owned by|belongs? to|owner\s*[:=-]?|with|worked by|handled by|"
                            r"sits? with|is with|are with|picked up by|taken by)\s*[*_]*$", re.IGNORECASE)
# "Chen owns #a and #b": a person, an ownership verb, then the incidents straight after it.
_PERSON_VERB = re.compile(r"[*_]*\s+(?:already\s+|also\s+|still\s+)?(?:owns|has|holds|is handling|is working(?: on)?|"
                          r"took|picked up|is on|is looking at|handles|is assigned(?: to)?|was assigned(?: to)?|got)"
                          r"\s+(?:both\s+|all\s+|incidents?\s+|cases?\s+)?(?=#|\[|\*\*#|INC-?\d)", re.IGNORECASE)
_COUNT_RESTRICTION = re.compile(r"\b(?:each|per|apiece|average|between|in the (?:last|past) \d+|"
                                r"last \d+ (?:hours?|days?)|past \d+|since|created|opened|in this list|"
                                r"of (?:them|these|those)|own|owns|related|linked|similar|other|more|another|"
                                r"new this)\b", re.IGNORECASE)
_FIELDS = {"severity": "severity", "sev": "severity", "priority": "severity", "status": "status", "state": "status",
           "owner": "owner", "assigned": "owner", "assigned to": "owner", "assignee": "owner", "owned by": "owner"}
_UNOWNED_LABEL = re.compile(r"^\s*(?:unassigned|not assigned|no owner|nobody|unowned)\b", re.IGNORECASE)
_BARE = re.compile(r"^[\s*_>•+-]*(?:\d{1,3}[.)]\s*)?[*_\s]*"
                   r"(High|Medium|Low|Informational|New|Active|Closed|Resolved|Open)[*_\s.]*$", re.IGNORECASE)


class _Check:
    def __init__(self, answer: str, facts: Facts, references: References, now: datetime,
                 context: str = "") -> None:
        self.context = len(context)  # read for subjects only: nothing in it is reported
        self.answer, self.facts, self.references, self.now = context + answer, facts, references, now
        self.findings: list[Finding] = []
        self._grouped: tuple[list[_Mention], list[list[_Mention]]] | None = None
        self._spans: list[tuple[int, int]] = []  # every unit read so far, in order
        self.ids = _linked(self.answer, extract(self.answer), facts)
        self.people = _people(tuple(sorted({f.owner for f in facts.incidents.values() if f.owner} |
                                           {p.name for p in facts.roster.values()})))
        self.rows = declared.Reader(facts, references, now)  # statements about declared rows (evidence, hunts, ...)
        self.sighted: list[tuple[int, int, list[tuple[str, Sighting]]]] = []  # units naming top entities, in order
        self.entities: list[tuple[str, Sighting]] = []  # those the unit being read is about (its own, else above)

    def run(self) -> list[Finding]:
        previous: list[_Mention] = []
        by_span: dict[tuple[int, int], list[_Mention]] = {}
        cursor = 0
        for unit in structure.read(self.answer):
            inside, cursor = self._ids_in(unit.start, unit.end, cursor)
            own = self._mentions(inside)
            by_span[(unit.start, unit.end)] = own
            self._spans.append((unit.start, unit.end))
            self.entities = self._sightings(unit, inside)
            asserted = _asserted(self.answer, unit)
            row_problems = self.rows.unit(self.answer, unit.start, unit.end, unit.parents, inside, asserted, unit.kind,
                                         unit.cells)
            if unit.end > self.context:
                self._problems(row_problems, (unit.start, unit.end))
            inherited = self._inherited(unit, by_span) if not own else []
            if unit.end > self.context:
                self._unit(unit, inside, own, inherited, previous)
            if unit.kind == "heading":  # "### Assessment" under "## #14440": "It ..." below is still #14440
                previous = own or self._ancestors(unit, by_span)
            elif own or inherited:
                previous = own or inherited
        return [replace(f, start=f.start - self.context, end=f.end - self.context,
                        sentence=(f.sentence[0] - self.context, f.sentence[1] - self.context))
                for f in _deduplicated(_one_per_claim(self.findings)) if f.start >= self.context]

    def _ids_in(self, start: int, end: int, cursor: int) -> tuple[list[Identifier], int]:
        """The identifiers in [start, end): the units come in order, so this walks the list once."""
        while cursor < len(self.ids) and self.ids[cursor].start < start:
            cursor += 1
        found = []
        index = cursor
        while index < len(self.ids) and self.ids[index].start < end:
            found.append(self.ids[index])
            index += 1
        return found, index

    def _sightings(self, unit: structure.Unit, inside: list[Identifier]) -> list[tuple[str, Sighting]]:
        """The top entities a unit names (a value, an [n] of an entity), else those of the line it hangs under."""
        own = []
        for identifier in inside:
            value = identifier.value.lower()
            if identifier.kind is IdKind.REFERENCE and identifier.value.isdigit():
                reference = self.references.get(int(identifier.value))
                entity = reference is not None and reference.kind is RefKind.ENTITY
                value = reference.key.partition(":")[2].lower() if reference and entity else ""
            if value in self.facts.sightings:
                own.append((value, self.facts.sightings[value]))
        if own:
            self.sighted.append((unit.start, unit.end, own))
        if own or (unit.kind == "text" and unit.cells is None):
            return own
        for parent in unit.parents:  # the units come in order: the first naming one inside the parent, by bisection
            index = bisect.bisect_left(self.sighted, parent[0], key=lambda s: s[0])
            if index < len(self.sighted) and self.sighted[index][0] <= parent[1]:
                return self.sighted[index][2]
        return []

    def _inherited(self, unit: structure.Unit, by_span: dict[tuple[int, int], list[_Mention]]) -> list[_Mention]:
        """A list item, a label line or a table row is about the record its heading or lead-in names; a sentence
        of prose is not (it continues only with "it", "this incident")."""
        if not unit.parents or (unit.kind == "text" and unit.cells is None):
            return []
        return self._ancestors(unit, by_span)

    def _ancestors(self, unit: structure.Unit, by_span: dict[tuple[int, int], list[_Mention]]) -> list[_Mention]:
        """The mentions of the nearest line above that names a record: its lead-in, its heading, the heading above."""
        starts = self._spans  # in order: the units of a parent line are found by bisection, not by a scan
        for parent in unit.parents:
            index = bisect.bisect_left(starts, (parent[0], 0))
            while index < len(starts) and starts[index][0] <= parent[1]:
                if by_span[starts[index]]:
                    return by_span[starts[index]]
                index += 1
        return []

    def _unit(self, unit: structure.Unit, inside: list[Identifier], own: list[_Mention],
              inherited: list[_Mention], previous: list[_Mention]) -> None:
        span = (unit.start, unit.end)
        text = self.answer[unit.start:unit.end]
        self._identifiers(span, inside)
        asserted = structure.asserts(text) if unit.cells is None else True
        self._problems(relations.roster(text, unit.start, self.facts, asserted), span)
        if unit.kind == "heading":
            return
        cells = list(unit.cells) if unit.cells is not None else None
        if cells is not None and unit.kind != "row" and len(cells) == 1 and self.people and \
                self.people.fullmatch(cells[0].header.strip("*_ ")) and re.match(r"[#\[]\s*\d", cells[0].value):
            # "**Chen Wei**: #14448, #14449": a person's incidents
            cell = cells[0]
            cells = [structure.Cell("owner", cell.header.strip("*_ "), cell.start, cell.end)]
        elif cells is not None and unit.kind != "row" and not any(_FIELDS.get(c.header.lower()) or
                                                                   _cell_kind(c.header) for c in cells):
            cells = None  # "Note: ..." is a sentence with a label
        if cells is None and unit.kind == "item" and (bare := _BARE.match(text)):
            word = bare.group(1)
            header = "severity" if word.capitalize() in SEVERITIES else "status"
            cells = [structure.Cell(header, word, unit.start + bare.start(1), unit.start + bare.end(1))]
        mentions = own
        if cells is not None and unit.kind == "row":
            mentions = own or self._table_subject(cells)
        if not mentions:
            mentions = inherited
        read = claimed.find(text, unit.start, self.now) if cells is None else []
        found = _cell_claims(cells, self.now) if cells is not None else read if asserted else []
        if not mentions and not own and previous and _CARRY.search(text):
            mentions = [_Mention(m.kind, m.key, unit.start, unit.start) for m in previous]
        subject = [f for f in (self._fact(m) for m in mentions) if f is not None]
        for claim in found:
            listed = [m for m in mentions if claim.start <= m.start < claim.end] if cells and unit.kind != "row" else []
            for each in ([m] for m in listed) if len(listed) > 1 else [mentions]:
                self._verify(claim, each, span)  # "**Unassigned**: #a (High), #b (Low)": a label holds for each
        if asserted:
            self._owners(text, unit.start, mentions, span)
            self._relations(unit, text, inside, mentions, subject, cells, span, read)

    def _relations(self, unit: structure.Unit, text: str, inside: list[Identifier], mentions: list[_Mention],
                   subject: list[IncidentFact], cells: list[structure.Cell] | None, span: tuple[int, int],
                   read: list[Claim]) -> None:
        own = [m for m in mentions if unit.start <= m.start < unit.end and m.end > m.start]

        def near(position: int) -> list[IncidentFact]:
            """What a value at ``position`` is said of: the group of incidents before it in its clause, else the
            one after it; the row's or heading's incidents when the unit names none itself."""
            if not own:
                return subject
            group = self._near_group(own, position)
            return [f for f in (self._fact(m) for m in group) if f is not None]

        cell_values = [(c.header, c.value, c.start) for c in cells or []]
        self._problems(relations.alert_names(text, unit.start, self.facts, near, cell_values), span)
        if cells is not None:
            self._row_counts(cells, span)
        moments = [(c.moment, c.start, c.end) for c in read if c.topic is Topic.TIME and c.moment is not None]
        clocks = [(c.moment, c.start, c.end) for c in read
                  if c.topic is Topic.TIME and c.moment is not None and c.precision == "utc-clock"]
        self._problems(relations.trend_peak(text, unit.start, self.facts, moments, clocks), span)
        self._problems(relations.sightings(text, unit.start, self.facts, inside, moments), span)
        self._problems(relations.shares(text, unit.start, self.facts), span)

    def _near_group(self, mentions: list[_Mention], position: int) -> list[_Mention]:
        groups = self._groups(mentions)
        window = max(0, position - claimed.LOOK_BACK)
        clause = max(self.answer.rfind(sep, window, position) for sep in (";", ". ", "\n", ", while", ", whereas"))
        before = [g for g in groups if g[-1].start < position and g[-1].start > clause]
        if before:
            return before[-1]
        after = [g for g in groups if g[0].start > position]
        end = min((i for i in (self.answer.find(sep, position, position + claimed.LOOK_BACK)
                               for sep in (";", ". ", "\n")) if i >= 0), default=position + claimed.LOOK_BACK)
        return after[0] if after and after[0][0].start < end else []

    def _problems(self, problems: list[relations.Problem], sentence: tuple[int, int]) -> None:
        for p in problems:
            self._add(p.category, p.start, p.end, p.record, p.note, False, sentence)

    def _row_counts(self, cells: list[structure.Cell], span: tuple[int, int]) -> None:
        """An entity table's count cells are that row's entity's counts, not any number in the results."""
        sighting = next((self.facts.sightings[c.value.lower()] for c in cells
                         if c.value.lower() in self.facts.sightings), None)
        if sighting is None:
            return
        for c in cells:
            header = c.header.lower()
            if "alert" in header and c.value.replace(",", "").isdigit():
                real = sighting.high if "high" in header else sighting.alerts
                if int(c.value.replace(",", "")) != real:
                    self._add("count", c.start, c.end, f"the top entities count {real} for this row's entity",
                              f"results: {real}", False, span)

    def _owners(self, text: str, offset: int, mentions: list[_Mention], span: tuple[int, int]) -> None:
        """"Chen owns #a and #b", "#a and #b are both with Chen", "X is handling #a, Y has #b": a person linked to
        the group of incidents the sentence's grammar attaches them to."""
        if not mentions:
            return
        groups = self._groups(mentions)
        for m in self.people.finditer(text) if self.people else ():
            name = m.group(0)
            start, end = offset + m.start(), offset + m.end()
            group: list[_Mention] = []
            if _PERSON_VERB.match(text, m.end(), m.end() + 40):
                group = next((g for g in groups if g[0].start >= end), [])
            elif _PERSON_BEFORE.search(text, max(0, m.start() - 40), m.start()):
                group = next((g for g in reversed(groups) if g[-1].start < start), [])
            elif re.match(r"^\s*[:(]", text[m.end():m.end() + 4]) or re.search(
                    r"both\s+(?:with|assigned to)\s*$", text[max(0, m.start() - 30):m.start()]):
                group = next((g for g in groups if g[0].start >= end), [])
            for mention in group:
                fact = self._fact(mention)
                if fact is not None and not _owner_matches(name, fact.owner):
                    self._add("owner", start, end, _describe(fact), f"record: {fact.owner or 'unassigned'}",
                              False, span)
                    break

    def _groups(self, mentions: list[_Mention]) -> list[list[_Mention]]:
        """Mentions joined only by commas and "and" are one coordinated group (worked out once per unit)."""
        if self._grouped is not None and self._grouped[0] is mentions:
            return self._grouped[1]
        groups: list[list[_Mention]] = []
        for mention in mentions:
            if groups and groups[-1][-1].end and _JOINED.match(self.answer[groups[-1][-1].end:mention.start]):
                groups[-1].append(mention)
            else:
                groups.append([mention])
        self._grouped = (mentions, groups)
        return groups

    # identifiers

    def _identifiers(self, sentence: tuple[int, int], inside: list[Identifier]) -> None:
        start, end = sentence
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
        """"#14448 [1]" or "[1] #14448" where [1] is another incident. A reference and an incident number are one
        mention only when nothing but spaces or brackets stands between them: in "[1] #14440, [2] #14430" each
        reference goes with the number after it, and the comma ends the pair (a list, not a claim)."""
        if identifier.kind is not IdKind.REFERENCE:
            return None
        reference = self.references.get(int(identifier.value))
        if reference is None or reference.kind is not RefKind.INCIDENT:
            return None
        after = inside[index + 1] if index + 1 < len(inside) else None
        paired = after if after is not None and self._beside(identifier, after) else None
        if paired is None and index > 0 and self._beside(inside[index - 1], identifier):
            paired = inside[index - 1]
        if paired is not None and paired.kind is IdKind.INCIDENT and reference.key != paired.value:
            return f"[{identifier.value}] is incident #{reference.key}, not #{paired.value}"
        return None

    def _beside(self, first: Identifier, second: Identifier) -> bool:
        """Nothing but spaces and brackets between two identifiers (at most three characters)."""
        gap = self.answer[first.end:second.start]
        return len(gap) <= 3 and not gap.strip(" \t()")

    # subjects

    def _mentions(self, inside: list[Identifier]) -> list[_Mention]:
        mentions: list[_Mention] = []
        for identifier in inside:
            if identifier.kind is IdKind.INCIDENT:
                mentions.append(_Mention(RefKind.INCIDENT, identifier.value, identifier.start, identifier.end))
            elif identifier.kind is IdKind.REFERENCE:
                reference = self.references.get(int(identifier.value))
                known = reference is not None and reference.kind in (RefKind.INCIDENT, RefKind.ALERT)
                if reference is not None and known and not (mentions and mentions[-1].key == reference.key):
                    mentions.append(_Mention(reference.kind, reference.key, identifier.start, identifier.end))
                elif mentions and reference is not None and mentions[-1].key == reference.key:
                    mentions[-1] = replace(mentions[-1], end=identifier.end)  # "#1 [1]": one mention
            elif identifier.kind is IdKind.ALERT_ID and identifier.value in self.facts.alerts:
                mentions.append(_Mention(RefKind.ALERT, identifier.value, identifier.start, identifier.end))
        return mentions

    def _table_subject(self, cells: list[structure.Cell]) -> list[_Mention]:
        """The incident a table row is about: a column headed incident/id/number, or a "#" column whose value is a
        known incident (a "#" column of ranks 1-6 is not)."""
        ordered = sorted(cells, key=lambda c: not re.search(r"incident|^id$|number", c.header, re.IGNORECASE))
        for cell in ordered:
            value = cell.value.strip("*_ ").lstrip("#")
            if not value.isdigit():
                continue
            named = re.search(r"incident|^id$|number", cell.header, re.IGNORECASE)
            if named and not self.facts.knows_incident(int(value)):
                self._add("incident", cell.start, cell.end,
                          f"incident #{value} is not in any query result in this conversation",
                          "not in any result", False, (cell.start, cell.start))
                return [_Mention(RefKind.INCIDENT, value, cell.start, cell.end)]
            if named or (cell.header.strip() in ("#", "") and self.facts.knows_incident(int(value))):
                return [_Mention(RefKind.INCIDENT, value, cell.start, cell.end)]
        return []

    def _subjects(self, claim: Claim, mentions: list[_Mention]) -> list[IncidentFact | AlertFact]:
        """The records a claim is about: the coordinated group before it in its clause, else the one after."""
        if not mentions:
            return []
        groups = self._groups(mentions)
        window = max(0, claim.start - claimed.LOOK_BACK)
        clause = max(self.answer.rfind(sep, window, claim.start) for sep in (";", ". ", "\n")) + 1
        before = [g for g in groups if g[0].start <= claim.start]
        group = before[-1] if before else groups[0]
        after = next((g for g in groups if g[0].start >= claim.end), None)
        if before and group[-1].start < clause and after is not None:
            group = after
        first = group[0]
        between = max(group[-1].end, claim.start - claimed.LOOK_BACK)
        if (first.kind is RefKind.INCIDENT and claim.topic in (Topic.SEVERITY, Topic.STATUS)
                and group[-1].start < claim.start and _ALERT_WORD.search(self.answer, between, claim.start)):
            return []  # "#14440 has 4 alerts, one of them Low": the claim is about an alert
        found: list[IncidentFact | AlertFact] = []
        for mention in group:
            fact: IncidentFact | AlertFact | None = (self._fact(mention) if mention.kind is RefKind.INCIDENT
                                                     else self.facts.alerts.get(mention.key))
            if fact is not None:
                found.append(fact)
        return found

    # claims

    def _verify(self, claim: Claim, mentions: list[_Mention], sentence: tuple[int, int]) -> None:
        subjects = self._subjects(claim, mentions)
        subject = subjects[0] if subjects else None
        if claim.topic is Topic.COUNT:
            if not self._restricted(claim):
                self._report(claim, self._count(claim, subject), sentence)
        elif claim.topic is Topic.CHANGE:
            self._report(claim, self._change(claim, subject, mentions), sentence)
        elif claim.topic is Topic.BENIGN:
            everything = subjects or [f for f in (self._fact(m) for m in mentions) if f is not None]
            for fact in everything:
                if isinstance(fact, IncidentFact) and (unsupported := self._benign(claim, fact)):
                    record, note, withhold = unsupported
                    self._add("classification", claim.start, claim.end, record, note, withhold, sentence)
                    break
        else:
            for fact in subjects:  # a claim about "#a, #b and #c" holds for each of them
                if problem := self._attribute(claim, fact):
                    self._report(claim, problem, sentence)
                    break

    def _report(self, claim: Claim, problem: tuple[str, str] | None, sentence: tuple[int, int]) -> None:
        if problem:
            record, note = problem
            self._add(claim.topic.value, claim.start, claim.end, record, note, False, sentence)

    def _restricted(self, claim: Claim) -> bool:
        """A count with a restriction the counted results cannot give ("each", "in the last 48 hours", an owner's
        name, "between"): unlinked, so left alone."""
        window = (max(0, claim.start - claimed.LOOK_BACK), min(len(self.answer), claim.end + claimed.LOOK_BACK))
        clause_start = max(max(self.answer.rfind(sep, window[0], claim.start) for sep in (";", ". ", "\n")) + 1,
                           window[0])
        clause_end = min((i for i in (self.answer.find(sep, claim.end, window[1]) for sep in (";", ". ", "\n"))
                          if i >= 0), default=window[1])
        clause = self.answer[clause_start:clause_end]
        if _COUNT_RESTRICTION.search(clause):
            return True
        return bool(self.people and self.people.search(clause))

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
        times = fact.times if isinstance(fact, IncidentFact) else tuple(t for t in (fact.time, *fact.activity) if t)
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
            if claimed.count_matches(value, subject.alert_count, claim.approx):
                return None
            alerts = count_label(subject.alert_count, "alert")
            return (f"#{subject.number} has {alerts} ({subject.seen.describe()})", f"record: {alerts}")
        if claim.noun == "alerts" and self.entities and claim.qualifiers <= {"high"}:
            return self._entity_count(claim, value)
        nouns = [claim.noun] if claim.noun else ["incidents", "alerts"]
        candidates = [c for noun in nouns for c in self.facts.counts_for(noun, claim.qualifiers)]
        if any(claimed.count_matches(value, c.value, claim.approx) for c in candidates):
            return None
        words = " ".join([*sorted(claim.qualifiers), claim.noun or "records"])
        if not candidates:
            if claim.qualifiers and any(self.facts.can_count(noun) for noun in nouns):
                return None  # a breakdown the results cannot give: not checked
            return (f"no query in this conversation counted {words}", "no query counted these")
        best = min(candidates, key=lambda c: abs(c.value - value))
        return (f"the results show {best.value} {words} ({best.scope})", f"results: {best.value}")

    def _entity_count(self, claim: Claim, value: int) -> tuple[str, str] | None:
        """"SRV-BKP-01 appears in 39 alerts": the alerts the top entities counted for the entity it names, not a
        query's total."""
        high = "high" in claim.qualifiers
        counts = [(name, s.high if high else s.alerts) for name, s in self.entities]
        if any(claimed.count_matches(value, n, claim.approx) for _, n in counts):
            return None
        name, real = counts[0]
        words = "high-severity alerts" if high else "alerts"
        return f"the top entities count {real} {words} for {name}", f"results: {real}"

    def _change(self, claim: Claim, subject: IncidentFact | AlertFact | None,
                mentions: list[_Mention]) -> tuple[str, str] | None:
        value = claim.value
        if value in ("✅", "✔", "✔️", "done", "all set", "completed"):
            line_end = self.answer.find("\n", claim.end)
            tail = self.answer[claim.end:line_end if line_end >= 0 else len(self.answer)]
            verb = re.search(r"\b(closed|resolved|assigned|raised|lowered|changed|updated|applied|escalated|set)\b",
                             tail, re.IGNORECASE)
            if verb is None:
                return None  # a check-mark bullet, not a claim that something was changed
            value = verb.group(1).lower()
            if (isinstance(subject, IncidentFact) and _state_shows(value, subject)
                    and not re.search(r"\bnow\b|\bjust\b", tail, re.IGNORECASE)):
                return None  # "✅ #14448 closed (BenignPositive)": its record says so; a list of what is done
        kinds = claimed.CHANGE_KINDS.get(value, claimed.ANY_CHANGE)
        number = subject.number if isinstance(subject, IncidentFact) else None
        if kinds and self.facts.change_for(number, kinds) is not None:
            return None
        if not claim.actor and isinstance(subject, IncidentFact) and (
                _state_shows(claim.value, subject) or _set_to_state(self.answer, claim.end, subject)):
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


@functools.lru_cache(maxsize=64)
def _people(names: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern for every owner and roster name (built once per set of names, not per sentence)."""
    if not names:
        return None
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![\w@.])(?:{alternatives})(?![\w@])")


_TOKEN = re.compile(r"(?<![\w.@\\-])[A-Za-z0-9][\w.-]{2,62}[A-Za-z0-9](?![\w@\\-])")


def _linked(answer: str, ids: list[Identifier], facts: Facts) -> list[Identifier]:
    """The identifiers, and the entity values the results returned written as plain words ("ws-fin-160" with no
    host word, in any case): found by looking each name-shaped token up in the facts, not by its shape."""
    taken = bytearray(len(answer) + 1)
    for identifier in ids:
        taken[identifier.start:identifier.end] = b"\x01" * (identifier.end - identifier.start)
    extra = []
    for m in _TOKEN.finditer(answer):
        token = m.group(0).rstrip(".")
        if any(taken[m.start():m.start() + len(token)]) or not re.search(r"[\d.-]", token):
            continue
        if facts.known(token.lower()):
            extra.append(Identifier(IdKind.HOST, token.lower(), m.start(), m.start() + len(token)))
    return sorted(ids + extra, key=lambda i: i.start) if extra else ids


def check(answer: str, facts: Facts, references: References, now: datetime, context: str = "") -> list[Finding]:
    """The statements in ``answer`` that this conversation's records do not back, in order. ``context`` is text
    that came before ``answer`` (a streamed answer's heading, table header, previous sentence): read for what
    ``answer`` is about, never reported."""
    found = _Check(answer, facts, references, now, context).run()
    if facts.verdicts:  # what an answer says about an investigated entity, against the bot's assessment
        found += [Finding("assessment", m.start, m.end, answer[m.start:m.end], m.record, m.note, False, m.sentence)
                  for m in verdicts.mismatches(answer, facts.verdicts.values())]
        found.sort(key=lambda f: f.start)
    return found


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


def _cell_kind(header: str) -> str:
    """The field a column or label states: severity, status, owner, alerts, time; "" for any other."""
    name = header.lower().strip()
    if name in _FIELDS:
        return _FIELDS[name]
    if "sever" in name:
        return "severity"
    if "status" in name or name == "state":
        return "status"
    if "owner" in name or "assign" in name:
        return "owner"
    if "alert" in name and not any(w in name for w in ("name", "title", "alert:")):
        return "alerts"
    if any(w in name for w in ("created", "time", "date", "when", "opened", "modified", "first", "last")):
        return "time"
    return ""


def _cell_claims(cells: list[structure.Cell], now: datetime) -> list[Claim]:
    """A table row or a label states a field per cell: "| 14448 | Low | Active |" under its headers, "Severity: Low"."""
    found: list[Claim] = []
    for cell in cells:
        value = cell.value.strip("*_ ")
        span = (cell.start, cell.end)
        kind = _cell_kind(cell.header)
        if not value:
            continue
        if kind == "severity" and value.split()[0].capitalize() in SEVERITIES:
            found.append(Claim(Topic.SEVERITY, value.split()[0].capitalize(), *span))
        elif kind == "severity" and value.lower() == "critical":
            found.append(Claim(Topic.SEVERITY, "High", *span))
        elif kind == "status":
            word = value.split()[0].strip("(),.")
            value_of = claimed.status_value(word.capitalize() if word.lower() in ("active", "closed", "new") else word)
            if value_of:
                found.append(Claim(Topic.STATUS, value_of, *span))
        elif kind == "owner" and _UNOWNED_LABEL.match(cell.header):
            found.append(Claim(Topic.OWNER, "", *span))  # "**Unassigned**: #a, #b": each has no owner
        elif kind == "owner" and not re.match(r"[#\[]\s*\d", value):  # "Owner: #14448" names no owner
            nobody = value.lower() in ("-", "unassigned", "none", "nobody", "—")
            found.append(Claim(Topic.OWNER, "" if nobody else value, *span))
        elif kind == "alerts" and value.replace(",", "").isdigit():
            found.append(Claim(Topic.COUNT, value.replace(",", ""), *span, noun="alerts", own=True))
        elif kind == "time":
            utc = "utc" in cell.header.lower()  # a header that says UTC means no offset
            for c in claimed.find(value, cell.start + cell.value.find(value), now):
                if c.topic is Topic.TIME:
                    found.append(replace(c, precision="utc-minute") if utc and c.precision == "minute" else c)
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


def _set_to_state(answer: str, end: int, fact: IncidentFact) -> bool:
    """"#14391 has been set to Active" where its record is Active: a statement of its state, true of the record."""
    said = re.match(r"\s+(?:to|as)\s+([A-Za-z]+)\b", answer[end:end + 40])
    if said is None:
        return False
    word = said.group(1).lower()
    return word in (fact.status.lower(), fact.severity.lower()) or (
        claimed.status_value(said.group(1)) == "open" and fact.status != "Closed")


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


_ROW_CATEGORIES = ("row", "row count", "row share", "row flag", "row time")


def _one_per_claim(findings: list[Finding]) -> list[Finding]:
    """A declared row's finding is left out where another check already marked the same words."""
    others: dict[tuple[int, int], list[tuple[int, int]]] = {}  # per sentence: a thousand-row table stays linear
    for f in findings:
        if f.category not in _ROW_CATEGORIES:
            others.setdefault(f.sentence, []).append((f.start, f.end))
    return [f for f in findings if f.category not in _ROW_CATEGORIES or
            not any(s < f.end and f.start < e for s, e in others.get(f.sentence, ()))]


def _deduplicated(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[int, int, str]] = set()
    kept = []
    for finding in sorted(findings, key=lambda f: (f.start, f.end)):
        key = (finding.start, finding.end, finding.category)
        if key not in seen:
            seen.add(key)
            kept.append(finding)
    return kept


def _asserted(answer: str, unit: structure.Unit) -> bool:
    """A unit states facts: a table row or label cells do, unless a single label's value is an instruction
    ("Note: check srv-bkp-01 for 203.0.113.9"); a sentence when it is no instruction, question or hypothetical."""
    if unit.cells is not None:
        if unit.kind == "row" or len(unit.cells) != 1:
            return True
        return not structure.ADVICE_LABEL.match(unit.cells[0].header) and structure.asserts(unit.cells[0].value)
    return structure.asserts(answer[unit.start:unit.end])
