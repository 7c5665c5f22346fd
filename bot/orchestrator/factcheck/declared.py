"""Statements about declared rows, checked from the declarations alone (no code per record type).

Every record type declares its fields' semantic types, its identity and what it belongs to
(``bot.sentinel.semantics``); ``facts`` keeps its rows. A clause of an answer links **subjects** (identifiers and
plain names in any common form: a UPN's name part, ``DOMAIN\\user``, a host's short name, an [n] that names an
entity; else the heading or lead-in it hangs under, or the previous sentence for "it"/"the account") with
**values** of a semantic type, and each is held to the rows the subjects belong to:

- a value (an IP, a host, an account, a hash, a URL, a file, a country, an app, a cued number such as "port 443"
  or "confidence 90", a level such as "high risk") must be one the field of that type holds on some linked row of
  a kind that declares it; a role read from its cue word ("launched by" -> the parent process, "from" -> the sender)
  narrows the field;
- a count of a kind's rows by one of its nouns ("9 failed sign-ins", "3 connections to 198.51.100.7") must be the
  count (or the sum of the rows' declared weight) of the linked rows that match its qualifiers and the clause's
  other values; "from 3 countries" is a distinct count; a count is only decided over rows whose query returned
  them all, or a query that read the subject and found none;
- a flag stated with its cue verb ("alice clicked the link") must be true on some linked row; a query that read the
  subject and found no row of that kind decides it too.
- "first"/"last" with a kind's noun and a time ("her last sign-in was at 16:43 UTC") must be the earliest or latest
  time the linked rows of that kind hold (a day either way for a date; a whole quarter hour within 14 hours when no
  zone is said);
- a share ("60% of her sign-ins failed", "2 of 5 logons came from 10.1.2.3", "half of ...") must be the part of the
  linked rows of the noun's kind that the words after the noun select (a result word, a value), by rows or by
  declared weight, within an honest rounding (``claims.share_matches``); "N of M" only over a whole of M; hedged
  words ("most", "many") and bounds ("over 60%") state no number and are not read;
- an entity field declared with a cue (a confirmed change's owner, "assigned to") is read only after its cue, and an
  enumerated field (declared ``choices``: a change's classification, severity, status) only as one of its choices
  after its cue ("closed as a true positive").

Precision first: nothing in an instruction, question or hypothetical, nothing negated ("did not click"), nothing
whose subject links no row or whose kind declares no such field (or whose rows hold no value of it) is decided; a
value coordinated with the subject ("alice and WS-FIN-023") is not a relation between them; a value the entities of an
incident the unit names hold is that incident's; a subject some of whose rows were let go past the bound, or a count
over a query that did not return every row, is not decided. A relation wrong at both ends is marked once, over both.
An answer is read up to ``MAX_READ`` characters.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.orchestrator.factcheck import claims as claimed
from bot.orchestrator.factcheck.claims import Claim, Topic
from bot.orchestrator.factcheck.facts import Facts, Kind, RowFact, link_forms
from bot.orchestrator.factcheck.identifiers import Identifier, IdKind
from bot.orchestrator.factcheck.relations import Problem
from bot.orchestrator.factcheck.structure import Cell
from bot.orchestrator.references import References, RefKind
from bot.sentinel.semantics import ENTITY_FAMILIES, FAMILY, ROLE_CUES, Sem

MAX_CLAUSE = 600  # characters of a clause read for its subjects and values: a huge sentence costs no more
MAX_TOKENS = 64  # name-shaped tokens looked up per unit
MAX_READ = 40_000  # characters of one answer checked against declared rows (five of the longest the bot shows)
_SPLIT = re.compile(r";|\s[—–]\s|\.\s|\n|,?\s+(?:while|whereas|but|however|although)\s+", re.IGNORECASE)
_TOKEN = re.compile(r"(?<![\w.@\\/-])[A-Za-z0-9][\w.@\\$-]{1,98}[A-Za-z0-9$](?![\w@\\-])")
_NEGATED = re.compile(r"\b(?:not|no|never|nor|without|neither|none|rather than|instead of|other than|except|unlike|"
                      r"isn't|wasn't|aren't|weren't|didn't|doesn't|don't|hasn't|haven't|hadn't|cannot|can't)\b"
                      r"[^.;]{0,60}$", re.IGNORECASE)
# A ticket line's "field label: value" after a dash or a semicolon: the label names a field, not a subject.
_LABELLED = re.compile(r"^[\s*_]*[A-Za-z][A-Za-z /()-]{1,30}[*_]*:\s", re.IGNORECASE)
_CARRY = re.compile(r"^\W*(?:it|its|they|their|he|she|his|her|this|that|the (?:account|user|host|device|machine|"
                    r"ip|address|process|file|sender|mailbox|row|entity))\b", re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|no(?![-.@\w])|never|nor|without|neither|rather than|instead of|other than|"
                       r"except|unlike)\b|n't\b|\bcannot\b", re.IGNORECASE)
_GENERIC_NOUNS = frozenset({"row", "rows", "result", "results", "match", "matches", "hit", "hits"})
_EDGE = re.compile(r"\b(first|earliest|began|started|starting|last|latest|most recent|final|ended|until)\b",
                   re.IGNORECASE)
_OPEN = re.compile(r"\b(?:if|whether|unless|suppose|assuming|in case)\b", re.IGNORECASE)
_JOINED = re.compile(r"^[\s,()*_`'\"]*(?:and|or|&|/|as well as|plus|nor)?[\s,()*_`'\"]*$", re.IGNORECASE)
_WORD_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                 "ten": 10, "eleven": 11, "twelve": 12, "no": 0, "zero": 0, "a single": 1, "a": 1, "an": 1}
_APPROX = re.compile(r"\b(over|more than|at least|above|under|fewer than|less than|below|about|around|roughly|"
                     r"nearly|almost|approximately|some|~|up to|at most|dozens of|hundreds of)\s*$", re.IGNORECASE)
_NUMBER = r"(\d{1,3}(?:,\d{3})+|\d{1,7}|" + "|".join(sorted(_WORD_NUMBERS, key=len, reverse=True)) + r")"
_NEUTRAL = frozenset({"total", "recent", "separate", "distinct", "different", "unique", "more", "other", "of",
                      "the", "in", "all", "such", "individual", "logged", "recorded", "matching"})
_FAILED = frozenset({"failed", "failing", "unsuccessful", "denied", "rejected", "blocked"})
_SUCCEEDED = frozenset({"successful", "succeeded", "success", "completed"})
# What an answer calls the values of a family when it counts them ("from 3 countries").
_DISTINCT_NOUNS = {"countries": "country", "ips": "ip", "ip addresses": "ip", "addresses": "ip", "apps": "app",
                   "applications": "app", "devices": "host", "hosts": "host", "machines": "host", "endpoints": "host",
                   "accounts": "account", "users": "account", "urls": "url", "links": "url", "domains": "domain",
                   "senders": "account", "recipients": "account", "cities": "city"}
_ID_FAMILIES = {IdKind.IP: ("ip",), IdKind.HOST: ("host", "domain", "account"), IdKind.DOMAIN: ("domain", "host",
                "url"), IdKind.URL: ("url", "domain"), IdKind.ACCOUNT: ("account",), IdKind.HASH: ("hash",),
                IdKind.FILE: ("file",)}
# Countries as sign-in logs write them (ISO 3166 alpha-2) and as analysts do (names).
COUNTRIES = {
    "us": ("united states", "usa", "the us", "u.s."), "gb": ("united kingdom", "uk", "britain", "great britain",
    "england"), "de": ("germany",), "fr": ("france",), "nl": ("netherlands", "the netherlands", "holland"),
    "ie": ("ireland",), "es": ("spain",), "it": ("italy",), "pt": ("portugal",), "be": ("belgium",),
    "ch": ("switzerland",), "at": ("austria",), "se": ("sweden",), "no": ("norway",), "dk": ("denmark",),
    "fi": ("finland",), "pl": ("poland",), "cz": ("czechia", "czech republic"), "ro": ("romania",),
    "bg": ("bulgaria",), "hu": ("hungary",), "gr": ("greece",), "tr": ("turkey", "türkiye"), "ua": ("ukraine",),
    "by": ("belarus",), "ru": ("russia", "russian federation"), "cn": ("china",), "hk": ("hong kong",),
    "tw": ("taiwan",), "jp": ("japan",), "kr": ("south korea", "korea"), "kp": ("north korea",), "in": ("india",),
    "pk": ("pakistan",), "ir": ("iran",), "iq": ("iraq",), "il": ("israel",), "ae": ("united arab emirates", "uae"),
    "sa": ("saudi arabia",), "eg": ("egypt",), "ng": ("nigeria",), "za": ("south africa",), "ke": ("kenya",),
    "br": ("brazil",), "ar": ("argentina",), "mx": ("mexico",), "ca": ("canada",), "au": ("australia",),
    "nz": ("new zealand",), "sg": ("singapore",), "my": ("malaysia",), "id": ("indonesia",), "th": ("thailand",),
    "vn": ("vietnam", "viet nam"), "ph": ("philippines",), "co": ("colombia",), "cl": ("chile",), "pe": ("peru",),
    "ve": ("venezuela",), "ma": ("morocco",), "lt": ("lithuania",), "lv": ("latvia",), "ee": ("estonia",),
    "md": ("moldova",), "rs": ("serbia",), "hr": ("croatia",), "si": ("slovenia",), "sk": ("slovakia",),
    "lu": ("luxembourg",), "is": ("iceland",), "kz": ("kazakhstan",), "bd": ("bangladesh",),
}
_COUNTRY_CODE = {name: code for code, names in COUNTRIES.items() for name in names}
_COUNTRY_NAME = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(_COUNTRY_CODE, key=len, reverse=True)
                                              if n not in ("uk", "the us", "u.s.", "usa", "uae", "korea")) +
                           r"|UK|USA|UAE|the US|U\.S\.)\b(?!-based analysts)", re.IGNORECASE)
# A MITRE ATT&CK technique id ("T1003", "T1110.003"), as alerts' Techniques and SubTechniques hold them.
_TECHNIQUE = re.compile(r"(?<![\w.])T\d{4}(?:\.\d{3})?(?![\w.]\w)")
_COUNTRY_CUE_CODE = re.compile(r"\b(?:from|in|country(?: code)?|location|geo|located in)\s*[:(]?\s*([A-Z]{2})\b(?!-)")
APPS = ("Office 365", "Microsoft Teams", "Azure Portal", "Exchange Online", "SharePoint Online", "OneDrive",
        "Outlook", "Azure CLI", "Microsoft Graph", "Azure PowerShell", "Microsoft Authenticator", "Power BI",
        "Visual Studio", "Dynamics 365", "Microsoft 365 admin center", "My Apps", "Windows Sign In")


@dataclass(frozen=True)
class _Subject:
    forms: frozenset[str]
    start: int
    end: int
    rows: tuple[tuple[RowFact, str], ...]  # the rows it belongs to, with the field that names it


@dataclass(frozen=True)
class _Value:
    families: tuple[str, ...]  # what its text can be; a cued value: ("field:<name>",)
    forms: frozenset[str]
    start: int
    end: int
    role: Sem | None = None


class Reader:
    """Reads one answer's units in order, keeping the subjects each line named for the lines under it."""

    def __init__(self, facts: Facts, references: References, now: datetime) -> None:
        self.facts, self.references, self.now = facts, references, now
        self.by_span: dict[tuple[int, int], list[_Subject]] = {}
        self.previous: list[_Subject] = []
        self.vocabulary = _vocabulary(facts)
        self.named = [(FAMILY[sem], p) for sem in _NAMED if (p := _named(facts.named(sem.value))) is not None]
        self.people = _named(tuple(v for v in facts.named(Sem.ACCOUNT.value) if " " in v.strip()))
        self.cut = set(facts.cut)  # subjects some of whose rows were let go: nothing about them is decided
        self.read = 0  # characters read so far (``MAX_READ``)

    def unit(self, answer: str, start: int, end: int, parents: tuple[tuple[int, int], ...], ids: list[Identifier],
             asserted: bool, kind: str, cells: tuple[Cell, ...] | None = None) -> list[Problem]:
        if (not self.facts.rows and not self.facts.empty) or self.read > MAX_READ:
            return []
        self.read += end - start
        text = answer[start:end]
        own = self._subjects(text, start, ids)
        self.by_span[(start, end)] = own
        above = self._inherited(parents) or (self.previous if _CARRY.search(text) else [])
        if own or kind == "heading":
            self.previous = own or self.previous
        if kind == "heading" or not asserted or not (own or above):
            return []
        problems: list[Problem] = []
        carried = own[:1] if own and not above else above  # a clause naming no subject is about the last one named
        for c_start, c_end in _clauses(text):
            clause = text[c_start:c_end]
            offset = start + c_start
            if _NEGATION.search(clause) or _OPEN.search(clause):
                continue  # "did not", "never", "whether": nothing is stated about these rows
            values = self._values(clause, offset, [i for i in ids if offset <= i.start < start + c_end])
            if _LABELLED.match(clause):
                subjects = carried  # "SRV-BKP-01 — remote ip: 203.0.113.9": a field's label, then its value
            else:
                subjects = [s for s in own if offset <= s.start < start + c_end and not _cued_at(values, s)] or carried
                carried = subjects
            values += self._cell_values(cells or (), offset, offset + len(clause))
            named = self._incident_entities(ids)
            values = [v for v in values if not v.forms & named]  # "#14390 involves 10.13.69.109": the incident's
            problems += self._check_values(answer, subjects, values, above)
            problems += self._counts(answer, clause, offset, subjects or above, values, cells or ())
            problems += self._shares(answer, clause, offset, subjects or above, values)
            problems += self._group_shares(clause, offset, subjects or above, values, cells or ())
            problems += self._flags(clause, offset, subjects or above)
            problems += self._times(answer, clause, offset, subjects or above)
        return problems

    def _incident_entities(self, ids: list[Identifier]) -> set[str]:
        """The entities of the incidents a unit names (their detail, their own title): a value among them may be
        said of them, whatever rows the unit's other subjects have."""
        out: set[str] = set()
        for identifier in ids:
            number = identifier.value if identifier.kind is IdKind.INCIDENT else ""
            if identifier.kind is IdKind.REFERENCE and identifier.value.isdigit():
                reference = self.references.get(int(identifier.value))
                number = reference.key if reference is not None and reference.kind is RefKind.INCIDENT else ""
            fact = self.facts.incidents.get(int(number)) if number.isdigit() else None
            if fact is not None and fact.entities:
                out |= {f for e in fact.entities for f in link_forms(e)}
        return out

    def _cell_values(self, cells: tuple[Cell, ...], low: int, high: int) -> list[_Value]:
        """A table cell or label value read by its header: "| Risk level |" over "medium", "Port: 8080"."""
        out = []
        for cell in cells:
            if not low <= cell.start < high:
                continue
            value = cell.value.strip("*_` ").lower()
            for name, cue, sem in self.vocabulary.cued:
                shape = r"high|medium|low|none" if sem is Sem.LEVEL else r"\d{1,7}"
                if re.search(rf"\b(?:{cue})\b", cell.header, re.IGNORECASE) and re.fullmatch(shape, value):
                    out.append(_Value((f"field:{name}",), frozenset({value}), cell.start, cell.end))
            if re.search(r"countr|location", cell.header, re.IGNORECASE) and re.fullmatch(r"[a-z]{2}", value):
                out.append(_Value(("country",), frozenset({value}), cell.start, cell.end))
            out += self._chosen_cell(cell, value)
        return out

    def _chosen_cell(self, cell: Cell, value: str) -> list[_Value]:
        """An enumerated value under its field's name ("| Severity |" over "High", "Product: Microsoft Sentinel")."""
        header = cell.header.strip("*_` :").lower()
        said = re.sub(r"[\s_-]", "", value)
        for name, _, choices in self.vocabulary.choices:
            noun = name.replace("_", " ").rstrip("s")
            if re.search(rf"\b{re.escape(noun)}", header) and any(said == re.sub(r"[\s_-]", "", c.lower())
                                                                   for c in choices):
                return [_Value((f"field:{name}",), frozenset({said, value}), cell.start, cell.end)]
        return []

    # subjects

    def _subjects(self, text: str, offset: int, ids: list[Identifier]) -> list[_Subject]:
        found: list[_Subject] = []
        taken: list[tuple[int, int]] = []
        for identifier in ids:
            forms = self._forms(identifier)
            rows = self._rows(forms) if not forms & self.cut else ()
            taken.append((identifier.start, identifier.end))
            if rows:
                found.append(_Subject(frozenset(forms), identifier.start, identifier.end, rows))
        for m in self.people.finditer(text[:MAX_CLAUSE * 4]) if self.people is not None else ():
            forms = link_forms(m.group(0))  # a person's name a row belongs to (an on-call entry's "Adele Vance")
            rows = self._rows(forms) if not forms & self.cut else ()
            if rows:
                found.append(_Subject(frozenset(forms), offset + m.start(), offset + m.end(), rows))
                taken.append((offset + m.start(), offset + m.end()))
        for m in _COUNTRY_NAME.finditer(text[:MAX_CLAUSE * 4]):  # a country a grouped row belongs to ("Germany had")
            code = _COUNTRY_CODE.get(m.group(1).lower(), "")
            rows = self._rows({code}) if code and code not in self.cut else ()
            if rows:
                found.append(_Subject(frozenset({code}), offset + m.start(1), offset + m.end(1), rows))
                taken.append((offset + m.start(1), offset + m.end(1)))
        for count, m in enumerate(_TOKEN.finditer(text[:MAX_CLAUSE * 4])):
            if count >= MAX_TOKENS:
                break
            start = offset + m.start()
            if any(s <= start < e for s, e in taken):
                continue
            token = m.group(0).rstrip(".")
            if not re.search(r"[\d.@\\_-]", token):
                continue  # a plain word ("Teams") is no name, even where it is a domain's first label
            forms = link_forms(token)
            rows = self._rows(forms) if not forms & self.cut else ()
            if rows:
                found.append(_Subject(frozenset(forms), start, offset + m.end(), rows))
        return sorted(found, key=lambda s: s.start)

    def _forms(self, identifier: Identifier) -> set[str]:
        if identifier.kind is IdKind.REFERENCE:
            reference = self.references.get(int(identifier.value)) if identifier.value.isdigit() else None
            if reference is not None and reference.kind in (RefKind.INCIDENT, RefKind.ALERT):
                return link_forms(reference.key)  # [2] names an incident or an alert: its declared rows
            if reference is None or reference.kind is not RefKind.ENTITY:
                return set()
            return link_forms(reference.key.partition(":")[2])
        return link_forms(identifier.value)

    def _rows(self, forms: Iterable[str]) -> tuple[tuple[RowFact, str], ...]:
        out: dict[tuple[int, str], tuple[RowFact, str]] = {}
        for form in forms:
            for fact, name in self.facts.linked(form):
                out.setdefault((id(fact), name), (fact, name))
        return tuple(out.values())

    def _inherited(self, parents: tuple[tuple[int, int], ...]) -> list[_Subject]:
        for parent in parents:
            found = [s for span, subjects in self.by_span.items() if parent[0] <= span[0] <= parent[1]
                     for s in subjects]
            if found:
                return found
        return []

    # values

    def _values(self, clause: str, offset: int, ids: list[Identifier]) -> list[_Value]:
        values = [self._cued_entity(clause, offset, i) or _Value(_ID_FAMILIES[i.kind], frozenset(self._forms(i)),
                                                                 i.start, i.end, _role(clause, i.start - offset))
                  for i in ids if i.kind in _ID_FAMILIES]
        for name, cue, choices in self.vocabulary.choices:  # "closed as true positive", "raised it to High"
            for m in _chosen(cue, choices, name).finditer(clause):
                group = 1 if m.group(1) is not None else 2
                said = m.group(group).lower()
                forms = frozenset({re.sub(r"[\s_-]", "", said), re.sub(r"[\s_-]+", " ", said)})  # as rows write it
                values.append(_Value((f"field:{name}",), forms, offset + m.start(group), offset + m.end(group)))
        for m in _TECHNIQUE.finditer(clause):
            values.append(_Value(("technique",), frozenset({m.group(0).lower()}), offset + m.start(), offset + m.end()))
        for m in _COUNTRY_NAME.finditer(clause):
            code = _COUNTRY_CODE.get(m.group(1).lower())
            if code:
                values.append(_Value(("country",), frozenset({code}), offset + m.start(1), offset + m.end(1)))
        for m in _COUNTRY_CUE_CODE.finditer(clause):
            if m.group(1).lower() in COUNTRIES:
                values.append(_Value(("country",), frozenset({m.group(1).lower()}), offset + m.start(1),
                                     offset + m.end(1)))
        for family, named in self.named:  # a delivery location, a detection type, a city: as the rows write them
            for m in named.finditer(clause):
                said = re.sub(r"[\s_-]", "", m.group(0)).lower()
                values.append(_Value((family,), frozenset({said}), offset + m.start(), offset + m.end()))
        pattern = self.vocabulary.apps
        if pattern is not None:
            for m in pattern.finditer(clause):
                values.append(_Value(("app",), frozenset({m.group(0).lower()}), offset + m.start(), offset + m.end()))
        for name, cue, sem in self.vocabulary.cued:
            for m in _cued(cue, sem).finditer(clause):
                group = next(g for g in range(1, (m.re.groups or 1) + 1) if m.group(g) is not None)
                raw = m.group(group).replace(",", "").lower()
                values.append(_Value((f"field:{name}",), frozenset({raw}), offset + m.start(group),
                                     offset + m.end(group)))
        return values

    def _cued_entity(self, clause: str, offset: int, identifier: Identifier) -> _Value | None:
        """An entity value right after a field's cue words ("assigned to bob@contoso.com": a change's owner) is that
        field's value only (a plain account beside an incident is not its owner)."""
        before = clause[max(0, identifier.start - offset - 50):identifier.start - offset]
        for name, cue, family in self.vocabulary.roles:
            if family in _ID_FAMILIES[identifier.kind] and re.search(rf"\b(?:{cue})\s*[:(]?\s*[`'\"*]*$", before,
                                                                     re.IGNORECASE):
                return _Value((f"field:{name}",), frozenset(self._forms(identifier)), identifier.start, identifier.end)
        return None

    def _check_values(self, answer: str, subjects: list[_Subject], values: list[_Value],
                      above: list[_Subject]) -> list[Problem]:
        problems: list[tuple[Problem, list[_Subject]]] = []
        roles = {f for v in values if v.role is not None for f in v.families}
        for value in values:
            if value.role is None and set(value.families) & roles:
                continue  # "svcupd.exe was launched by outlook.exe": the child is the subject of the parent's role
            others = [s for s in subjects if not (s.forms & value.forms) and not (s.start < value.end and
                                                                                value.start < s.end)
                      and not _coordinated(answer, s, value)]
            others = others or [s for s in above if not (s.forms & value.forms)]  # the heading's, when the value
            if not others:                                                          # is the line's only name
                continue
            groups = _groups(answer, others)
            kinds = {r.kind for s in others for r, _ in s.rows}
            held: set[str] = set()
            decided: list[str] = []
            for kind_name in sorted(kinds):
                rows = self._of_kind(kind_name, groups)
                found = self._held(kind_name, rows or [], value) if rows else None
                if found is not None:
                    held |= found
                    decided.append(kind_name)
            if not decided or value.forms & held:
                continue
            shown = ", ".join(sorted(held)[:4]) + (" …" if len(held) > 4 else "")
            what = value.families[0].removeprefix("field:").replace("_", " ")
            subject = " and ".join(answer[g[0].start:g[0].end] for g in groups[:2])
            problems.append((Problem("row", value.start, value.end,
                                     f"the {'/'.join(decided)} rows of {subject} show {what} {shown}",
                                     f"records: {shown}"), others))
        # "alice connected from 192.0.2.77" when neither holds the other: one wrong relation, marked once, over both
        # of its ends (which end is wrong the rows cannot say).
        def against(problem: Problem, used: list[_Subject]) -> bool:
            return any(s.start <= problem.start < s.end for s in used)

        kept: list[Problem] = []
        for p, used in problems:
            if any(q.start > p.start and against(p, theirs) for q, theirs in problems):
                continue  # its other end is marked, over both
            first = min((o.start for o, _ in problems if o.start < p.start and against(o, used)), default=p.start)
            kept.append(dataclasses.replace(p, start=first))
        return kept

    def _held(self, kind_name: str, rows: list[RowFact], value: _Value) -> set[str] | None:
        """Every form the fields of ``value``'s type hold on ``rows`` (of one kind); None when it declares none."""
        kind = self.facts.kinds.get(kind_name)
        if kind is None:
            return None
        fields = [(name, Sem(sem)) for name, (sem, cue) in kind.fields.items() if _fits(name, Sem(sem), cue, value)]
        if not fields:
            return None
        names = dict(fields)
        held = {f for fact in rows for n, v in fact.values if n in names for f in _value_forms(names[n], v)}
        return held or None  # rows that hold no such value (a service logon's empty remote IP) decide nothing

    # counts

    def _counts(self, answer: str, clause: str, offset: int, subjects: list[_Subject],
                values: list[_Value], cells: tuple[Cell, ...]) -> list[Problem]:
        pattern = self.vocabulary.counts
        if pattern is None:
            return []
        problems = []
        for cell in cells:  # "Failed sign-ins: 26", a "| Sign-ins |" column: the header is the count's noun
            value = cell.value.strip("*_` ").replace(",", "")
            heading = pattern.fullmatch(f"1 {cell.header.strip('*_ ').lower()}")
            if not (offset <= cell.start < offset + len(clause)) or heading is None or not value.isdigit():
                continue
            found = self._count(heading.group(3).lower(), re.findall(r"[a-z-]+", (heading.group(2) or "").lower()),
                                _groups(answer, subjects), values, cell.start)
            if found and not _any_matches(int(value), found, ""):
                problems.append(Problem("row count", cell.start, cell.end, _counted(found), f"records: {found[0][0]}"))
        for m in pattern.finditer(clause):
            before = clause[max(0, m.start() - 40):m.start()]
            if re.search(r"(?:\btop|\bfirst|\blast|\bnext|\bpast|\bof the|\bthe|\bthose|\bthese)\s*$", before,
                         re.IGNORECASE) or _NEGATED.search(clause[:m.start()][-40:]) or _PART_OF.search(before):
                continue
            said = _number(m.group(1))
            words = re.findall(r"[a-z-]+", (m.group(2) or "").lower())
            noun = m.group(3).lower()
            approx = _approx(before, m.group(1))
            found = self._count(noun, words, _groups(answer, subjects), values, m.start() + offset)
            if not found or _any_matches(said, found, approx):
                continue
            problems.append(Problem("row count", offset + m.start(1), offset + m.end(3), _counted(found, noun),
                                    f"records: {found[0][0]}"))
        return problems

    def _count(self, noun: str, words: list[str], groups: list[list[_Subject]], values: list[_Value],
               at: int) -> list[_Counted]:
        """What each kind counted by that noun holds for the linked rows (a hunt over 7 days and an investigation
        over 24 hours both count sign-ins): a statement matching any holds. [] when nothing decides it."""
        subjects = [s for g in groups for s in g]
        family = _DISTINCT_NOUNS.get(noun)
        if family is not None:
            return self._distinct(family, [r for s in subjects for r, _ in s.rows])
        candidates: list[_Counted] = []
        for kind_name, kind in self.facts.kinds.items():
            if noun not in (n.lower() for n in kind.nouns):
                continue
            linked = self._of_kind(kind_name, groups)
            if linked is None:
                continue
            for value in values:  # "9 failed sign-ins from 203.0.113.9": the rows of that IP
                if value.start > at and any(_fits(n, Sem(sem), cue, value) for n, (sem, cue) in kind.fields.items()):
                    linked = [r for r in linked if _holds(r, kind, value)]
            selected = _qualified(linked, words, kind)
            if selected is None:
                continue  # "failed" of rows that hold no result: the count is not about this kind
            if not all(r.complete for r in selected):
                return []  # one of the kinds it may be about cannot be counted: the count is not decided
            subject = ", ".join(sorted({min(s.forms, key=len) for s in subjects if s.forms}))
            candidates.append((sum(r.weight for r in selected), len(selected), f"the {kind_name} rows of {subject}"))
        return candidates

    def _of_kind(self, kind_name: str, groups: list[list[_Subject]]) -> list[RowFact] | None:
        """The rows of a kind that every group of subjects (that such a row can name) belongs to: "svcupd.exe on
        SRV-BKP-01" is the rows of both, "alice and bob" the rows of either. [] when a query read a subject and found
        no row of the kind; None when nothing decides (no subject it names, or one with rows of other kinds only)."""
        kind = self.facts.kinds[kind_name]
        families = {FAMILY.get(Sem(kind.fields[n][0])) for n in kind.belongs if n in kind.fields}
        chosen: dict[int, RowFact] | None = None
        for group in groups:
            own = {id(r): r for s in group for r, _ in s.rows if r.kind == kind_name}
            if not own:
                if any((kind_name, f) in self.facts.empty for s in group for f in s.forms):
                    return []
                if any(FAMILY.get(Sem(self.facts.kinds[r.kind].fields[n][0])) in families
                       for s in group for r, n in s.rows if r.kind in self.facts.kinds):
                    return None  # it names rows of other kinds of the same family: its rows of this one are unknown
                continue  # a subject this kind does not name (a host beside a sign-in count)
            chosen = own if chosen is None else {k: v for k, v in chosen.items() if k in own}
        return None if chosen is None else list(chosen.values())

    def _distinct(self, family: str, rows: list[RowFact]) -> list[_Counted]:
        """How many values of a family the rows hold: any one kind's, all kinds', or a declared distinct count."""
        if not rows or not all(r.complete for r in rows):
            return []
        per_kind: dict[str, set[str]] = {}
        declared: list[_Counted] = []
        for fact in rows:
            kind = self.facts.kinds.get(fact.kind)
            if kind is None:
                continue
            for name, value in fact.values:
                sem, cue = kind.fields.get(name, ("", ""))
                if sem == Sem.COUNT.value and "distinct" in cue and value.isdigit():
                    declared.append((int(value), int(value), f"the {fact.kind} row's {name}"))
                elif sem and FAMILY.get(Sem(sem)) == family and not cue:
                    per_kind.setdefault(fact.kind, set()).add(min(_value_forms(Sem(sem), value)))
        if not per_kind:
            return declared
        union = set().union(*per_kind.values())
        return [(len(union), len(union), "the distinct values in the rows"),
                *((len(v), len(v), f"the {k} rows") for k, v in per_kind.items()), *declared]

    # shares

    def _shares(self, answer: str, clause: str, offset: int, subjects: list[_Subject],
                values: list[_Value]) -> list[Problem]:
        """"60% of her sign-ins failed", "2 of 5 sign-ins came from Russia", "half of them were from 203.0.113.9": the
        part of the linked rows of the kind its noun names that the words after the noun select (a result word, a
        value), over all of them (or their declared weight), within an honest rounding. Hedged words ("most",
        "many", "the majority") state no number and are not read; a share whose part names nothing the rows can
        select, or over rows some of which were not returned, is not decided."""
        pattern = self.vocabulary.shares
        if pattern is None or not subjects:
            return []
        problems = []
        for m in pattern.finditer(clause):
            if _NEGATED.search(clause[:m.start()][-40:]):
                continue
            said = _said_share(m)
            if said is None:
                continue
            noun_end = offset + m.end()
            rest = clause[m.end():]
            # The whole's subjects: those before the noun, and its complement ("the sign-ins of olivia.hart").
            of = re.match(r"\s+(?:of|for|by)\s+[`*_(\[]*", rest)
            named = noun_end + of.end() if of else -1
            wholes = [s for s in subjects if s.start < noun_end or s.start == named or
                      (of and named <= s.start <= named + 6 and rest[of.end():].startswith("["))]
            part_words = [w for w in re.findall(r"[a-z-]+", rest.lower()[:60]) if w in _FAILED | _SUCCEEDED][:1]
            part_values = [v for v in values if v.start >= noun_end and not any(s.start == v.start for s in wholes)]
            if not part_words and not part_values:
                continue  # "60% of her sign-ins were interactive": nothing the rows can select
            shares = self._share(m.group("noun").lower(), re.findall(r"[a-z-]+", (m.group("words") or "").lower()),
                                 part_words, part_values, _groups(answer, wholes))
            if said.whole is not None:  # "2 of 5": only a count whose whole is 5 is this one
                shares = [c for c in shares if c[1] == said.whole]
            if not shares or any(_share_matches(said, part, whole) for part, whole, _ in shares):
                continue
            part, whole, scope = shares[0]
            shown = f"{part} of {whole} ({100 * part / whole:.0f}%)"
            problems.append(Problem("row share", offset + m.start(), offset + m.end("share"),
                                    f"{scope}: {shown}", f"records: {shown}"))
        return problems

    def _group_shares(self, clause: str, offset: int, subjects: list[_Subject], values: list[_Value],
                      cells: tuple[Cell, ...]) -> list[Problem]:
        """"China accounts for 5% of the total", "Share: 7%" under a group's heading, a "| Share |" column: a
        percentage said of a subject that a grouped row belongs to (a summarised hunt's key) is that row's part of
        the weight of every row of its result (the rows of its kind with the same columns), all of them returned.
        A share of the subject's own rows ("60% of her sign-ins failed") is ``_shares``'; a bound is not read."""
        said: list[tuple[float, int, int]] = []
        for cell in cells:
            value = cell.value.strip("*_` ")
            m = re.fullmatch(r"(\d{1,3}(?:\.\d)?)\s*%", value)
            inside = offset <= cell.start < offset + len(clause)
            if m and inside and re.search(r"share|percent|%|part", cell.header, re.IGNORECASE):
                said.append((float(m.group(1)), cell.start, cell.end))
        if not said:
            for m in _GROUP_SHARE.finditer(clause):
                before = clause[max(0, m.start() - 25):m.start()]
                after = [v for v in values if v.start >= offset + m.end()]
                selected = any(not any(v.forms & s.forms for s in subjects) for v in after) or (
                    after and any(offset <= s.start < offset + m.start() for s in subjects))
                # "17% of all sign-ins were to Teams", "olivia: 19% of all sign-ins came from 192.0.2.9": a part of
                # the subject's own rows, not the group's part of its result
                if not selected and not _SHARE_BOUND.search(before) and not _SHARE_HEDGE.search(before):
                    said.append((float(m.group(1)), offset + m.start(), offset + m.end()))
        if not said or not subjects:
            return []
        results = self._group_parts(subjects)
        problems = []
        for percent, start, end in said:
            if not results or any(claimed.share_matches(percent, 100 * part / whole) for part, whole, _ in results):
                continue
            part, whole, scope = results[0]
            shown = f"{part} of {whole} ({100 * part / whole:.0f}%)"
            problems.append(Problem("row share", start, end, f"{scope}: {shown}", f"records: {shown}"))
        return problems

    def _group_parts(self, subjects: list[_Subject]) -> list[tuple[int, int, str]]:
        """(the subject's weight, the whole result's weight, what) for each grouped result the subjects' rows are
        in; [] when one of those results was not returned whole."""
        out = []
        seen: set[tuple[str, frozenset[str], frozenset[str]]] = set()
        for subject in subjects:
            for fact, name in subject.rows:
                kind = self.facts.kinds.get(fact.kind)
                columns = {n for n, _ in fact.values}
                key = (fact.kind, frozenset(columns), subject.forms)
                if key in seen or kind is None or not any(Sem(sem) is Sem.COUNT and not cue
                                                          for sem, cue in kind.fields.values()):
                    continue
                seen.add(key)
                result = [r for r in self.facts.rows.values() if r.kind == fact.kind and {n for n, _ in r.values}
                          == columns]
                if not all(r.complete for r in result):
                    return []
                mine = [r for r in result if any(n == name and link_forms(v) & subject.forms for n, v in r.values)]
                whole = sum(r.weight for r in result)
                if whole and len(mine) == 1:  # a group key names one row of its result
                    out.append((sum(r.weight for r in mine), whole, f"the {fact.kind} rows of "
                                                                  f"{min(subject.forms, key=len)}"))
        return out

    def _share(self, noun: str, words: list[str], part_words: list[str], part_values: list[_Value],
               groups: list[list[_Subject]]) -> list[tuple[int, int, str]]:
        """(part, whole, what was counted) per kind counted by ``noun``, by rows and by declared weight; [] when
        nothing decides it."""
        out: list[tuple[int, int, str]] = []
        for kind_name, kind in self.facts.kinds.items():
            if noun not in (n.lower() for n in kind.nouns):
                continue
            linked = self._of_kind(kind_name, groups)
            whole = _qualified(linked, words, kind) if linked else None
            if not whole:
                continue
            if not all(r.complete for r in whole):
                return []
            part = _qualified(whole, part_words, kind) if part_words else whole
            if part is None:
                continue
            for value in part_values:
                if not any(_fits(n, Sem(sem), cue, value) for n, (sem, cue) in kind.fields.items()):
                    part = None
                    break
                part = [r for r in part if _holds(r, kind, value)]
            if part is None:
                continue
            scope = f"the {kind_name} rows"
            out.append((len(part), len(whole), scope))
            if any(r.weight != 1 for r in whole):
                out.append((sum(r.weight for r in part), sum(r.weight for r in whole), f"{scope} (events)"))
        return out

    # first and last times

    def _times(self, answer: str, clause: str, offset: int, subjects: list[_Subject]) -> list[Problem]:
        """"alice's first sign-in was at 09:14 UTC", "last logon on Nov 18": the earliest or latest time the linked
        rows of the kind its noun names hold (every row returned, or nothing is decided)."""
        edge = _EDGE.search(clause)
        if edge is None or not subjects:
            return []
        said = [c for c in claimed.find(clause, offset, self.now) if c.topic is Topic.TIME and c.moment is not None]
        near = clause[max(0, edge.start() - 40):edge.end() + 40].lower()
        if not said:
            return []
        first = edge.group(1).lower() in ("first", "earliest", "began", "started", "starting")
        times: list[int] = []
        for kind_name, kind in self.facts.kinds.items():
            words = {kind_name, *(n.lower() for n in kind.nouns)}
            words |= {w[:-1] for w in words if w.endswith("s")}  # "the last sign-in", "the first process event"
            if not any(re.search(rf"\b{re.escape(w)}\b", near) for w in words - _GENERIC_NOUNS):
                continue
            rows = self._of_kind(kind_name, _groups(answer, subjects))
            if not rows or not all(r.complete for r in rows):
                return []
            stamps = [int(v) for r in rows for n, v in r.values
                      if kind.fields.get(n, ("",))[0] == Sem.TIMESTAMP.value and v.isdigit()]
            if stamps:
                times.append(min(stamps) if first else max(stamps))
        if not times:
            return []
        problems = []
        for claim in said:
            if any(_time_matches(claim, datetime.fromtimestamp(t, UTC)) for t in times):
                continue
            shown = ", ".join(f"{datetime.fromtimestamp(t, UTC):%Y-%m-%d %H:%M} UTC" for t in times)
            problems.append(Problem("row time", claim.start, claim.end,
                                    f"the {'earliest' if first else 'latest'} time in the rows is {shown}",
                                    f"records: {shown}"))
        return problems

    # flags

    def _flags(self, clause: str, offset: int, subjects: list[_Subject]) -> list[Problem]:
        problems = []
        for kind_name, name, cue in self.vocabulary.flags:
            for m in re.finditer(rf"\b(?:{cue})", clause, re.IGNORECASE):
                if _NEGATED.search(clause[:m.start()][-60:]) or re.search(r"\b(?:if|whether|who)\b[^.]*$",
                                                                         clause[:m.start()], re.IGNORECASE):
                    continue
                rows = [r for s in subjects for r, _ in s.rows if r.kind == kind_name]
                queried = any((kind_name, f) in self.facts.empty for s in subjects for f in s.forms)
                if not rows and not queried:
                    continue
                if any(v == "true" for r in rows for n, v in r.values if n == name):
                    continue
                record = (f"{len(rows)} {kind_name} row(s) of the subject, none with {name.replace('_', ' ')}"
                          if rows else f"the {kind_name} query found no row for the subject")
                problems.append(Problem("row flag", offset + m.start(), offset + m.end(), record,
                                        f"no {kind_name} shows this"))
        return problems


@dataclass(frozen=True)
class _Vocabulary:
    apps: re.Pattern[str] | None
    counts: re.Pattern[str] | None
    cued: tuple[tuple[str, str, Sem], ...]  # (field, cue, semantic type) of the numbers and levels read after a cue
    flags: tuple[tuple[str, str, str], ...]  # (kind, field, cue)
    shares: re.Pattern[str] | None = None  # "60% of her sign-ins", "2 of 5 sign-ins", "half of the logons"
    roles: tuple[tuple[str, str, str], ...] = ()  # (field, cue, family) of entity values read after a cue
    choices: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (field, cue, values) of enumerated fields


def _vocabulary(facts: Facts) -> _Vocabulary:
    kinds = tuple(sorted((k, tuple(v.nouns), tuple((n, sem, cue) for n, (sem, cue) in v.fields.items()))
                         for k, v in facts.kinds.items()))
    apps = facts.named(Sem.APP.value)
    choices = tuple(sorted({(n, v.fields[n][1], c) for v in facts.kinds.values() for n, c in v.choices.items()
                            if n in v.fields}))
    return _built(kinds, apps, choices)


@functools.lru_cache(maxsize=32)
def _built(kinds: tuple[tuple[str, tuple[str, ...], tuple[tuple[str, str, str], ...]], ...],
           apps: tuple[str, ...], choices: tuple[tuple[str, str, tuple[str, ...]], ...] = ()) -> _Vocabulary:
    names = sorted({a for a in (*APPS, *apps) if len(a) >= 3}, key=len, reverse=True)
    app = re.compile(r"(?<![\w-])(?:" + "|".join(re.escape(a) for a in names) + r")(?![\w-]|\.\w)", re.IGNORECASE) \
        if names else None
    nouns = sorted({n.lower() for _, ns, _ in kinds for n in ns if n.lower() not in ("alerts", "incidents")} |
                   set(_DISTINCT_NOUNS), key=len, reverse=True)
    alternatives = "|".join(re.escape(n) for n in nouns)
    counts = re.compile(rf"(?<![\w.#$-]){_NUMBER}\s+((?:[A-Za-z-]+\s+){{0,3}}?)({alternatives})\b",
                        re.IGNORECASE) if nouns else None
    cued = tuple(sorted({(n, cue, Sem(sem)) for _, _, fields in kinds for n, sem, cue in fields
                         if cue and Sem(sem) in (Sem.SCORE, Sem.PORT, Sem.COUNT, Sem.LEVEL)}))
    flags = tuple(sorted({(k, n, cue) for k, _, fields in kinds for n, sem, cue in fields
                          if cue and Sem(sem) is Sem.FLAG}))
    shares = re.compile(rf"(?P<share>{_SHARE})\s+(?:of\s+)?(?:(?:the|all|her|his|their|its|these|those)\s+|"
                        rf"\S{{2,98}}'s?\s+)?(?P<words>(?:[A-Za-z-]+\s+){{0,2}}?)(?P<noun>{alternatives})\b",
                        re.IGNORECASE) if nouns else None
    entity_families = {"account", "host", "ip", "url", "domain", "hash", "file"}
    roles = tuple(sorted({(n, cue, FAMILY[Sem(sem)]) for _, _, fields in kinds for n, sem, cue in fields
                          if cue and FAMILY.get(Sem(sem)) in entity_families}))
    return _Vocabulary(app, counts, cued, flags, shares, roles, choices)


# Field types whose values an answer writes as the rows do ("landed in Quarantine", "a leakedCredentials detection",
# "based in Dublin"): read wherever written, held to the linked rows' fields of that type.
_NAMED = (Sem.ACTION, Sem.CITY)


@functools.lru_cache(maxsize=32)
def _named(values: tuple[str, ...]) -> re.Pattern[str] | None:
    """The values in the rows' own capitals ("Inbox", not "inbox": a common word is no value), a camel-case one
    also as separate words ("JunkFolder", "Junk Folder")."""
    words, phrases = [], []
    for value in values:
        text = value.strip()
        if len(text) < 4 or len(text) > 60 or not re.fullmatch(r"[A-Za-z][A-Za-z .'-]*[A-Za-z]", text):
            continue
        spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", text)
        if " " in spaced:
            phrases.append(r"[\s_-]?".join(re.escape(w) for w in spaced.split()))
        else:
            words.append(re.escape(text))
    alternatives = sorted(words, key=len, reverse=True) + sorted(phrases, key=len, reverse=True)
    if not alternatives:
        return None
    return re.compile(r"(?<![\w-])(?:" + "|".join(alternatives) + r")(?![\w-])")


@functools.lru_cache(maxsize=64)
def _chosen(cue: str, choices: tuple[str, ...], name: str = "") -> re.Pattern[str]:
    """An enumerated value after its cue ("closed as a true positive", "severity set to High"), or followed by its
    field's own name ("fired with Low severity"): group 1 or 2."""
    alternatives = "|".join(re.sub(r"(?<=[a-z])(?=[A-Z])", r"[\\s_-]?", re.escape(c))
                            for c in sorted(choices, key=len, reverse=True))
    if not cue:  # read wherever it is written ("maps to Lateral Movement")
        return re.compile(rf"(?<![\w-])({alternatives})(?![\w-])()", re.IGNORECASE)
    noun = re.escape(name.replace("_", " ").rstrip("s")) if name else "(?!)"
    return re.compile(rf"\b(?:{cue})\s*[:(]?\s*[`'\"*]*(?:an?\s+)?({alternatives})\b|"
                      rf"(?<![\w-])({alternatives})[\s-]+{noun}s?\b(?![\s-]+[a-z-]*(?:alerts?|incidents?|events?|"
                      rf"detections?|sign-?ins?|rows?|signals?|items?)\b)", re.IGNORECASE)  # "30 High-severity alerts"


@functools.lru_cache(maxsize=64)
def _cued(cue: str, sem: Sem) -> re.Pattern[str]:
    if sem is Sem.LEVEL:
        return re.compile(rf"\b(?:{cue})\W{{0,3}}(?:(?:was|is|of|at|as|level|=|:)\s*)*\b(high|medium|low|none)\b|"
                          rf"\b(?:is|was|are|were|at|as)\s+(?:a\s+|an\s+)?(high|medium|low)[\s-]+"
                          rf"(?:(?:user|sign-?in|account|overall|identity)[\s-]+)?(?:{cue})\b"
                          r"(?![\s-]+(?:detections?|events?|sign-?ins?|alerts?|signals?|rows?))", re.IGNORECASE)
    if sem is Sem.COUNT:  # also "groups 5 alerts", "3 alerts are grouped under #14391": the noun after a number
        return re.compile(rf"\b(?:{cue})\W{{0,3}}(?:(?:was|is|of|at|=|:)\s*)*(\d{{1,7}})(?!\d|[.:,]\d)|"
                          rf"\b(?:groups|grouping|has|had|have|contains|containing|includes|including|holds|bundles|"
                          rf"comprises|with)\s+(?:only\s+|just\s+)?(\d{{1,7}})\s+(?:{cue})\b{_NOUN_END}|"
                          rf"(?<![\w.#$-])(\d{{1,7}})\s+(?:{cue})\s+(?:are|were|is|was)\s+(?:grouped|included|"
                          rf"contained|bundled)\b", re.IGNORECASE)
    return re.compile(rf"\b(?:{cue})\W{{0,3}}(?:(?:was|is|of|at|=|:)\s*)*(\d{{1,7}})(?!\d|[.:,]\d)()", re.IGNORECASE)


def _cued_at(values: list[_Value], subject: _Subject) -> bool:
    """Whether a subject is the value of a role or a cued field ("parent process: winword.exe")."""
    return any(v.start == subject.start and (v.role is not None or v.families[0].startswith("field:"))
               for v in values)


# A count's cue read after its number ends the noun phrase ("groups 5 alerts." but not "with 4 distinct apps").
_NOUN_END = r"(?=\s*(?:[.,;:)]|$|\s+(?:are|were|is|was|in|across|under|for|on|and|so|since|over|at)\b))"


def _fits(name: str, sem: Sem, cue: str, value: _Value) -> bool:
    """Whether a field can hold ``value``: a cued value only its own field, a role only its role's fields, a plain
    value any field of its family that needs no cue."""
    if value.families[0].startswith("field:"):
        return value.families[0] == f"field:{name}"
    if cue or sem in (Sem.TEXT, Sem.COMMAND, Sem.ID):
        return False
    if value.role is not None:
        return sem is value.role
    if sem is Sem.ENTITY:
        return bool(ENTITY_FAMILIES & set(value.families))
    return FAMILY.get(sem) in value.families


def _holds(fact: RowFact, kind: Kind, value: _Value) -> bool:
    return any(value.forms & _value_forms(Sem(kind.fields[n][0]), v) for n, v in fact.values
               if n in kind.fields and _fits(n, Sem(kind.fields[n][0]), kind.fields[n][1], value))


def _value_forms(sem: Sem, value: str) -> set[str]:
    text = value.strip().lower()
    if sem is Sem.COUNTRY:
        return {_COUNTRY_CODE.get(text, text)}
    if sem is Sem.TECHNIQUE:  # "T1110" is what a row's "T1110.003" refines
        return {text, text.split(".")[0]}
    if FAMILY.get(sem) in ("account", "host", "domain", "url", "file"):
        return link_forms(text) | {text}
    return {text}


def _field_forms(fact: RowFact, name: str) -> set[str]:
    return {f for n, v in fact.values if n == name for f in link_forms(v)}


def _role(clause: str, position: int) -> Sem | None:
    before = clause[max(0, position - 30):position]
    for sem, cue in ROLE_CUES.items():
        if sem is Sem.RECIPIENT or sem is Sem.SENDER:
            continue  # "from"/"to" are too common to tell a role apart on their own
        if re.search(rf"\b(?:{cue})\s*[:(]?\s*[`'\"*]*$", before, re.IGNORECASE):
            return sem
    return None


def _qualified(rows: list[RowFact], words: list[str], kind: Kind) -> list[RowFact] | None:
    """The rows the count's words select ("failed", "successful", an action or app word); None for a word the rows
    cannot decide."""
    for word in words:
        if word in _NEUTRAL:
            continue
        results = [n for n, (sem, _) in kind.fields.items() if sem == Sem.RESULT.value]
        if word in _FAILED | _SUCCEEDED and results:
            want = word in _SUCCEEDED
            rows = [r for r in rows if any(_succeeded(v) == want for n, v in r.values if n in results)]
            continue
        fields = [n for n, (sem, cue) in kind.fields.items()
                  if sem in (Sem.ACTION.value, Sem.APP.value, Sem.RESULT.value) and not cue]
        matching = [r for r in rows if any(word in v.lower() for n, v in r.values if n in fields)]
        if not matching and not any(word in v.lower() for r in rows for n, v in r.values):
            return None  # "interactive", "suspicious": not a field value these rows hold
        rows = matching
    return rows


def _succeeded(value: str) -> bool:
    text = value.strip().lower()
    return text in ("0", "success", "succeeded", "true") or ("success" in text and "fail" not in text)


def _groups(answer: str, subjects: list[_Subject]) -> list[list[_Subject]]:
    """Subjects joined only by "and", "or", commas or a slash form one group ("alice and bob")."""
    groups: list[list[_Subject]] = []
    for subject in sorted(subjects, key=lambda s: s.start):
        if groups:
            last = groups[-1][-1]
            between = answer[last.end:subject.start] if subject.start >= last.end else "x"
            if "(" in between and not re.search(r"\b(?:and|or)\b", between):
                groups.append([subject])  # "powershell.exe (explorer.exe)": the second qualifies the first
                continue
            if len(between) < 40 and _JOINED.match(between):
                groups[-1].append(subject)
                continue
        groups.append([subject])
    return groups


def _coordinated(answer: str, subject: _Subject, value: _Value) -> bool:
    low, high = (subject.end, value.start) if subject.end <= value.start else (value.end, subject.start)
    return high - low < 40 and bool(_JOINED.match(answer[low:high]))


def _clauses(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in _SPLIT.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return [(s, min(e, s + MAX_CLAUSE)) for s, e in spans if e > s]


def _number(text: str) -> int:
    lower = text.lower()
    return _WORD_NUMBERS[lower] if lower in _WORD_NUMBERS else int(text.replace(",", ""))


def _approx(before: str, number: str) -> str:
    m = _APPROX.search(before[-25:])
    if not m:
        return "about" if number.lower() in ("a", "an") else ""
    word = m.group(1).lower()
    if word in ("over", "more than", "at least", "above", "dozens of", "hundreds of"):
        return "over"
    if word in ("under", "fewer than", "less than", "below", "up to", "at most"):
        return "under"
    return "about"


_Counted = tuple[int, int, str]  # (events, rows, what was counted)
# A share as analysts write it: a percentage, "N of M" (the whole said), a fraction word. "most", "many", "the
# majority" are hedged and state no number: not read.
_FRACTIONS = claimed.FRACTIONS
_SHARE = (r"(?:(?<![\w.])(?P<percent>\d{1,3}(?:\.\d)?)\s*(?:%|percent\b)|"
          r"(?<![\w.,#$-])(?P<part>\d{1,5}|" + "|".join(w for w in _WORD_NUMBERS if " " not in w and len(w) > 2) +
          r")\s+(?:out\s+)?of\s+(?:the\s+|all\s+|her\s+|his\s+|their\s+|its\s+)?(?P<whole>\d{1,5})|"
          r"\b(?P<fraction>" + "|".join(sorted(_FRACTIONS, key=len, reverse=True)) + r"))")
_PART_OF = re.compile(r"\b(?:\d{1,5}|" + "|".join(w for w in _WORD_NUMBERS if " " not in w and len(w) > 2) +
                      r")\s+(?:out\s+)?of\s+(?:the\s+|all\s+|her\s+|his\s+|their\s+|its\s+)?$", re.IGNORECASE)
# A percentage said of a group of a summarised result ("accounts for 5% of the total", "5% of the rows were ...").
_GROUP_SHARE = re.compile(r"(?<![\w.])(\d{1,3}(?:\.\d)?)\s*(?:%|percent\b)(?=\s+of\s+(?:the\s+)?(?:total|all\b|"
                          r"rows?\b|results?\b|matches\b|hits\b|volume\b|overall\b)|\s*(?:share\b|$|[).,;]))",
                          re.IGNORECASE)
_SHARE_BOUND = re.compile(r"\b(?:over|more than|under|less than|at least|at most|up to|above|below)\s*$",
                          re.IGNORECASE)
_SHARE_HEDGE = re.compile(r"\b(?:about|around|roughly|nearly|almost|approximately|some|~|over|more than|under|"
                          r"less than|at least|at most|up to)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class _SaidShare:
    percent: float
    fraction: bool = False  # said as a word ("half")
    hedged: bool = False  # "about 60%"
    part: int | None = None  # "N of M"
    whole: int | None = None


def _said_share(m: re.Match[str]) -> _SaidShare | None:
    """The share as written; None for a bound ("over 60%") or what is no share (3 of 2)."""
    before = m.string[max(0, m.start() - 25):m.start()]
    hedge = _SHARE_HEDGE.search(before)
    if hedge and hedge.group(0).strip().lower() in ("over", "more than", "under", "less than", "at least", "at most",
                                                     "up to"):
        return None  # a bound: not a share said
    hedged = hedge is not None
    if m.group("percent"):
        value = float(m.group("percent"))
        return _SaidShare(value, hedged=hedged) if value <= 100 else None
    if m.group("part"):
        part, whole = _number(m.group("part")), int(m.group("whole"))
        if whole == 0 or part > whole:
            return None
        return _SaidShare(100 * part / whole, hedged=hedged, part=part, whole=whole)
    return _SaidShare(_FRACTIONS[m.group("fraction").lower()], fraction=True, hedged=hedged)


def _share_matches(said: _SaidShare, part: int, whole: int) -> bool:
    """A share as written against the rows' (of the same whole, for "N of M"): "N of M" exactly, unless hedged; a
    percentage or a fraction within its rounding (``claims.share_matches``)."""
    if whole == 0:
        return True
    if said.whole is not None and not said.hedged:
        return said.part == part
    return claimed.share_matches(said.percent, 100 * part / whole, fraction=said.fraction, hedged=said.hedged)


def _time_matches(claim: Claim, moment: datetime) -> bool:
    """A time as written against the row's: a day either way for a date; two minutes in UTC; a whole number of
    quarter hours within 14 hours when no zone is said (the reader's own zone)."""
    assert claim.moment is not None
    if claim.precision == "day":
        return abs((moment.date() - claim.moment.date()).days) <= 1
    minutes = (moment - claim.moment).total_seconds() / 60
    if claim.precision in ("utc-clock", "clock"):
        minutes = minutes % (24 * 60)
        minutes = min(minutes, 24 * 60 - minutes)
    if claim.precision.startswith("utc"):
        return abs(minutes) <= 2
    return abs(minutes) <= 14 * 60 and min(minutes % 15, 15 - minutes % 15) <= 2


def _counted(found: list[_Counted], noun: str = "") -> str:
    return "; ".join(f"{scope} count {events} {noun}".rstrip() for events, _, scope in found[:3])


def _any_matches(said: int, found: list[_Counted], approx: str) -> bool:
    """Whether the count is any kind's: its events (the rows' weight) or its rows."""
    return any(claimed.count_matches(said, events, approx) or claimed.count_matches(said, rows, approx)
               for events, rows, _ in found)
