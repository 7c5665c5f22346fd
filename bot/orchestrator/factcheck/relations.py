"""Relations an answer states between the records it names, found by looking up what the facts hold.

A relation is only read when both ends are linked to records: an incident (by number, [n] or the heading a
bullet hangs under) and an alert name, a roster person; or a roster person and their team,
shift or phone; or the trend and its peak day; or an entity and when it was first or last seen; or a share of a
counted list. Nothing is guessed: a relation whose other end is not in the facts is left alone (precision first),
except an alert name said to be an incident's alert that no result holds. What is left here is what no record type
declares yet; an entity, a tactic, a technique or a product said of an incident is checked from what the incident
and its detail declare (``declared``).

Each check returns ``Problem``s: the span of the wrong value, what the records say instead, a short note.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.orchestrator.factcheck.claims import FRACTIONS, share_matches
from bot.orchestrator.factcheck.facts import Facts, IncidentFact, RosterFact
from bot.orchestrator.factcheck.identifiers import Identifier

# A name in quotes (each kind closed by its own) or in bold; a bold label ("**Most recent alert:**") is not one.
_QUOTED = re.compile(r"\"([^\"\n]{4,120})\"|“([^”\n]{4,120})”|(?<!\w)'([^'\n]{4,120})'(?!\w)|\*\*([^*\n]{4,120}?)\*\*")
_ALERT_HEADERS = ("alert", "alerts", "alert name", "alert names", "alert title", "detection", "analytics rule")
_ALERT_WORD = re.compile(r"\balerts?\b", re.IGNORECASE)
_NOW_WORDS = re.compile(r"\b(?:now|right now|currently|at the moment|today|at present|on shift|on call|on duty)\b",
                        re.IGNORECASE)
_ON_CALL = re.compile(r"\b(?:on[\s-]call|on shift|on duty)\b", re.IGNORECASE)
_APPOSED_ON_CALL = re.compile(r"^\s*[(,\u2014-]\s*(?:the\s+|who is\s+|currently\s+)*(?:on[\s-]call|on shift)\b",
                              re.IGNORECASE)
_TAKES_OVER = re.compile(r"\b(?:takes? over|is next|up next|next shift|relieves|comes on)\b", re.IGNORECASE)
_NEXT = re.compile(r"\b(?:next|up next|takes over|after (?:her|him|them))\b", re.IGNORECASE)
_SHIFT_END = re.compile(r"\b(?:until|till|ends? at|ending at|off at|through|finishes at)\s+(\d{1,2}):(\d\d)\s*"
                        r"(UTC|GMT|Z)?", re.IGNORECASE)
_PHONE = re.compile(r"(?<![\w.])\+?\d[\d ().-]{6,18}\d(?!\w|\.\d)")
_DATE_OR_TIME = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}:\d{2}\b")
_PEAK = re.compile(r"\b(?:peak(?:ed|s)?|busiest|highest|most alerts|spiked?|maximum)\b(?![\s-]+sev)", re.IGNORECASE)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY = re.compile(r"\b(" + "|".join(_WEEKDAYS) + r")\b", re.IGNORECASE)
_FIRST_LAST = re.compile(r"\b(first|last)[\s-]+(?:seen|observed|appeared|active|activity|sighting)\b", re.IGNORECASE)
_PERCENT = re.compile(r"(?<![\w.])(\d{1,3}(?:\.\d+)?)\s*(?:%|percent\b)", re.IGNORECASE)
_FRACTION = re.compile(r"\b(" + "|".join(sorted(FRACTIONS, key=len, reverse=True)) + r")\b(?:\s+of)?",
                       re.IGNORECASE)
_N_OF_M = re.compile(r"(?<![\w.,#-])(\d{1,5}|one|two|three|four|five|six|seven|eight|nine|ten)\s+(?:out\s+)?of\s+"
                     r"(?:the\s+|all\s+|these\s+|those\s+)?(\d{1,5}|two|three|four|five|six|seven|eight|nine|ten)\b",
                     re.IGNORECASE)
_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_QUALIFIERS = re.compile(r"\b(high|medium|low|informational|closed|resolved|open|active|new|unassigned)\b",
                         re.IGNORECASE)
_NOUN = re.compile(r"\b(incidents?|alerts?)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Problem:
    category: str
    start: int
    end: int
    record: str
    note: str


# -- incident relations ----------------------------------------------------------------------------------------


Near = Callable[[int], list[IncidentFact]]  # the incidents a position in the answer is said of
_REFERENCE_LEAD = re.compile(r"^\[\d{1,4}\]\s*")  # an [n] before a name in a cell cites it: it is not part of it


def alert_names(text: str, offset: int, facts: Facts, near: Near,
                cells: Iterable[tuple[str, str, int]] = ()) -> list[Problem]:
    """A quoted or bold name said to be an alert: it must be an alert a result holds (of the incident, when one
    is named and its detail was read)."""
    candidates: list[tuple[str, int, int]] = []
    for m in _QUOTED.finditer(text):
        name = next(g for g in m.groups() if g is not None).strip()
        if m.group(4) is not None and (name.endswith(":") or _ALERT_WORD.search(name)):
            continue  # a bold label
        around = text[max(0, m.start() - 30):m.end() + 30]
        if _ALERT_WORD.search(around) and len(name.split()) >= 2 and not re.search(r"[#\[@\\/]|\d{3}", name):
            candidates.append((name, offset + m.start(), offset + m.end()))
    for header, value, start in cells:
        if header.lower().strip(" :") in _ALERT_HEADERS and not _QUOTED.search(value):
            name = _REFERENCE_LEAD.sub("", value.strip("*_\"' ")).strip("*_\"' ")  # "[26] Unfamiliar sign-in ..."
            if len(name.split()) >= 2:
                candidates.append((name, start, start + len(value)))
    problems = []
    for name, start, end in candidates:
        key = name.lower()
        if key not in facts.alert_names and any(key in known for known in facts.alert_names):
            continue  # a piece of a known name (a name with quotes inside it)
        if key not in facts.alert_names:
            problems.append(Problem("alert", start, end, f"no query in this conversation returned an alert named "
                                    f"\"{name}\"", "no such alert in the results"))
            continue
        for f in near(start):
            if f.alert_names is not None and key not in f.alert_names:
                problems.append(Problem("alert", start, end, f"\"{name}\" is not one of #{f.number}'s alerts "
                                        f"({f.seen.describe()})", f"not an alert of #{f.number}"))
                break
    return problems


# -- the roster ------------------------------------------------------------------------------------------------


def people(text: str, facts: Facts) -> list[tuple[RosterFact, int, int]]:
    """Roster people named in ``text`` (full name, or first name when it is unique on the roster)."""
    if not facts.roster:
        return []
    names, pattern = _names(tuple(p.name for p in facts.roster.values()))
    found = []
    for m in pattern.finditer(text):
        key = names.get(m.group(0).lower())
        if key is not None and (len(m.group(0).split()) > 1 or not re.match(r"\s+[A-Z]", text[m.end():])):
            found.append((facts.roster[key], m.start(), m.end()))
    return found


@functools.lru_cache(maxsize=64)
def _names(roster: tuple[str, ...]) -> tuple[dict[str, str], re.Pattern[str]]:
    """Every way a roster name is written (the full name; the first name when no one else has it), and one
    pattern that finds them all: built once per roster, not per sentence."""
    names = {name.lower(): name.lower() for name in roster}
    firsts: dict[str, list[str]] = {}
    for name in roster:
        firsts.setdefault(name.split()[0].lower(), []).append(name.lower())
    names.update({first: full[0] for first, full in firsts.items() if len(full) == 1 and first not in names})
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return names, re.compile(rf"\b(?:{alternatives})\b", re.IGNORECASE)


def roster(text: str, offset: int, facts: Facts, asserted: bool) -> list[Problem]:
    """Who is on call now or next, a roster person's team, shift end and phone."""
    named = people(text, facts)
    if not named:
        return []
    problems: list[Problem] = []
    for index, (person, start, end) in enumerate(named):
        clause_end = named[index + 1][1] if index + 1 < len(named) else len(text)
        clause_start = max(text.rfind(sep, 0, start) for sep in (".", ";", "\n")) + 1
        after = text[end:clause_end]
        around = text[clause_start:clause_end]
        problems += _phone(person, after, offset + end, facts)
        if re.search(r"\bnot\b|n't\b|\bno longer\b", around, re.IGNORECASE):
            continue
        if not asserted:  # an instruction may still state a fact beside the name: "page X (on call now)"
            if _APPOSED_ON_CALL.match(after):
                problems += _on_call(person, after[:40], offset + start, offset + end, facts)
            continue
        problems += _team(person, after, offset + end, facts)
        problems += _shift(person, after, offset + end)
        if (_ON_CALL.search(around) or _TAKES_OVER.search(around)
                or re.search(r"on call now", text[:start], re.IGNORECASE)):
            problems += _on_call(person, around, offset + start, offset + end, facts)
    return problems


def _phone(person: RosterFact, after: str, offset: int, facts: Facts) -> list[Problem]:
    # A date or a time ("from 2026-11-20 16:00") has the shape of a phone number too: never read as one.
    m = next((m for m in _PHONE.finditer(after[:60]) if not _DATE_OR_TIME.search(m.group(0))
              and not after.startswith(":", m.end())), None)
    if not m:
        return []
    said = re.sub(r"\D", "", m.group(0))
    real = re.sub(r"\D", "", person.phone)
    if not real or said == real or (len(said) >= 7 and real.endswith(said)):
        return []
    return [Problem("on-call", offset + m.start(), offset + m.end(),
                    f"{person.name}'s phone on the roster is {person.phone}", f"roster: {person.phone}")]


def _team(person: RosterFact, after: str, offset: int, facts: Facts) -> list[Problem]:
    teams = {p.team for p in facts.roster.values() if p.team}
    for team in sorted(teams, key=len, reverse=True):
        m = re.search(rf"\b{re.escape(team)}\b", after[:80], re.IGNORECASE)
        if m and team.lower() != person.team.lower():
            return [Problem("on-call", offset + m.start(), offset + m.end(),
                            f"{person.name} is on {person.team} per the roster", f"roster: {person.team}")]
    return []


def _shift(person: RosterFact, after: str, offset: int) -> list[Problem]:
    m = _SHIFT_END.search(after[:80])
    if not m:
        return []
    hour, minute = int(m.group(1)), int(m.group(2))
    if hour > 24 or minute > 59:
        return []
    said = hour * 60 + minute
    real = person.shift_end.hour * 60 + person.shift_end.minute
    gap = abs(said - real) % (24 * 60)
    gap = min(gap, 24 * 60 - gap)
    if gap <= 5 or (not m.group(3) and gap % 15 <= 1):  # a clock without UTC may be the reader's zone
        return []
    return [Problem("on-call", offset + m.start(1), offset + m.end(2),
                    f"{person.name}'s shift ends at {person.shift_end:%H:%M} UTC per the roster",
                    f"roster: until {person.shift_end:%H:%M} UTC")]


def _on_call(person: RosterFact, around: str, start: int, end: int, facts: Facts) -> list[Problem]:
    on_now = [p for p in facts.roster.values() if p.on_shift]
    if _NEXT.search(around):
        upcoming = sorted((p for p in facts.roster.values() if not p.on_shift and p.shift_start > p.as_of),
                          key=lambda p: p.shift_start)
        first = [p for p in upcoming if p.shift_start == upcoming[0].shift_start] if upcoming else []
        if first and person not in first and not person.on_shift:
            return [Problem("on-call", start, end, f"next on call per the roster: "
                            f"{', '.join(p.name for p in first)} from {first[0].shift_start:%H:%M} UTC",
                            f"roster: next is {first[0].name}")]
        return []
    if _NOW_WORDS.search(around) and not person.on_shift:
        who = ", ".join(p.name for p in on_now) or "nobody"
        return [Problem("on-call", start, end, f"{person.name} is not on shift now per the roster "
                        f"(shift {person.shift_start:%H:%M}-{person.shift_end:%H:%M} UTC); on call now: {who}",
                        "not on call now")]
    return []


# -- the trend, sightings, shares ------------------------------------------------------------------------------


def _days_after(text: str, offset: int, at: int, moments: Iterable[tuple[datetime, int, int]]
                ) -> list[tuple[str, datetime | None, int, int]]:
    """The day named right after position ``at`` (within its clause): a weekday, a date, or both ("Wednesday
    Nov 18"), as (weekday, moment, start, end) with spans in the answer."""
    clause = re.search(r"[;.!?]|\band\b|\bwhile\b|\bbut\b", text[at:])
    stop = at + (clause.start() if clause else len(text) - at)
    stop = min(stop, at + 60)
    found: list[tuple[str, datetime | None, int, int]] = []
    weekday = _WEEKDAY.search(text, at, stop)
    date = next(((m, s, e) for m, s, e in moments if at <= s - offset < stop), None)
    if weekday:
        found.append((weekday.group(1).lower(), None, offset + weekday.start(), offset + weekday.end()))
    if date:
        found.append(("", date[0], date[1], date[2]))
    return found


def trend_peak(text: str, offset: int, facts: Facts, moments: Iterable[tuple[datetime, int, int]],
               clocks: Iterable[tuple[datetime, int, int]] = ()) -> list[Problem]:
    """"Alerts peaked on Tuesday / Nov 18 / at 14:00 UTC": the day (or, for an hourly trend, the hour) with the most
    alerts in the latest trend, named right after the peak word ("quietest was Friday" is another day)."""
    m = _PEAK.search(text) if facts.trend_days else None
    if m is None:
        return []
    hourly = len(facts.trend_bins) > len(facts.trend_days)
    clock = next(((c, s, e) for c, s, e in clocks if 0 <= s - offset - m.end() <= 60), None)
    if hourly and clock is not None:
        totals = {label: sum(row) for label, row in facts.trend_bins.items()}
        top = max(totals.values())
        said = [label for label in totals if label.endswith(f"{clock[0]:%H}:00")]
        if said and all(totals[label] < top for label in said):
            peak_label = max(totals, key=lambda label: totals[label])
            return [Problem("trend", clock[1], clock[2], f"the trend's busiest hour is {peak_label} UTC ({top} alerts)",
                            f"trend peak: {peak_label[-5:]} UTC")]
        return []
    peak = max(facts.trend_days, key=lambda d: facts.trend_days[d])
    peak_day = datetime.fromisoformat(peak)
    record = f"the trend's busiest day is {peak_day:%A %b %d} ({facts.trend_days[peak]} alerts)"
    for weekday, moment, start, end in _days_after(text, offset, m.end(), list(moments)):
        if weekday and weekday != _WEEKDAYS[peak_day.weekday()]:
            return [Problem("trend", start, end, record, f"trend peak: {peak_day:%A}")]
        if moment is not None and f"{moment:%Y-%m-%d}" in facts.trend_days and f"{moment:%Y-%m-%d}" != peak:
            return [Problem("trend", start, end, record, f"trend peak: {peak_day:%b %d}")]
    return []


def sightings(text: str, offset: int, facts: Facts, ids: Iterable[Identifier],
              moments: Iterable[tuple[datetime, int, int]]) -> list[Problem]:
    """"X was first seen on Nov 14 and last seen Nov 20": the top-entities result's first/last sighting of X (a day
    either way), each compared with the day named right after it."""
    matches = list(_FIRST_LAST.finditer(text))
    if not matches:
        return []
    known = [facts.sightings[i.value] for i in ids if i.value in facts.sightings]
    if not known:
        known = [s for key, s in facts.sightings.items()
                 if re.search(rf"(?<![\w.@-]){re.escape(key)}(?![\w@-])", text.lower())]
    if not known:
        return []
    sighting = known[0]
    problems = []
    for m in matches:
        word = m.group(1).lower()
        real = sighting.first if word == "first" else sighting.last
        if real is None:
            continue
        for weekday, moment, start, end in _days_after(text, offset, m.end(), list(moments)):
            near = {_WEEKDAYS[(real + timedelta(days=d)).weekday()] for d in (-1, 0, 1)}
            off_by = abs((moment.date() - real.date()).days) if moment is not None else 0
            if (weekday and weekday not in near) or off_by > 1:
                problems.append(Problem("seen", start, end, f"{word} seen {real:%A %Y-%m-%d %H:%M} UTC per the top "
                                        "entities", f"record: {real:%b %d}"))
                break
    return problems


def shares(text: str, offset: int, facts: Facts) -> list[Problem]:
    """"80% of incidents are High", "half the alerts", "5 of the 93 incidents are closed": computed from the counts
    the bot made of a whole list, within an honest rounding (``claims.share_matches``, as for declared rows). Left
    alone when no counted list has that qualifier."""
    noun_m = _NOUN.search(text)
    quals = {q.lower().replace("resolved", "closed") for q in _QUALIFIERS.findall(text)}
    if not noun_m or not quals or len(quals) > 2:
        return []
    noun = "incidents" if noun_m.group(1).lower().startswith("incident") else "alerts"
    qualifier = frozenset(quals)
    pairs = _pairs(facts, noun, qualifier)
    if not pairs:
        return []
    problems = []
    for m in _PERCENT.finditer(text):
        said = float(m.group(1))
        if not any(share_matches(said, 100 * part / whole) for part, whole in pairs):
            part, whole = pairs[0]
            problems.append(Problem("share", offset + m.start(), offset + m.end(),
                                    f"the results show {part} of {whole} {noun} {' '.join(sorted(quals))} "
                                    f"({100 * part / whole:.0f}%)", f"results: {100 * part / whole:.0f}%"))
    for m in _FRACTION.finditer(text):
        said = FRACTIONS[m.group(1).lower()]
        if not any(share_matches(said, 100 * part / whole, fraction=True) for part, whole in pairs):
            part, whole = pairs[0]
            problems.append(Problem("share", offset + m.start(), offset + m.end(),
                                    f"the results show {part} of {whole} {noun} {' '.join(sorted(quals))}",
                                    f"results: {part} of {whole}"))
    for m in _N_OF_M.finditer(text):
        part_said, whole_said = (_WORDS.get(g.lower()) or int(g) for g in m.groups())
        same_whole = [(p, w) for p, w in pairs if w == whole_said]
        if same_whole and not any(p == part_said for p, _ in same_whole):
            part, whole = same_whole[0]
            problems.append(Problem("share", offset + m.start(), offset + m.end(),
                                    f"the results show {part} of {whole} {noun} {' '.join(sorted(quals))}",
                                    f"results: {part} of {whole}"))
    return problems


def _pairs(facts: Facts, noun: str, qualifier: frozenset[str]) -> list[tuple[int, int]]:
    """(part, whole) per counted scope that has both a total and a count with the qualifier."""
    totals: dict[str, int] = {}
    parts: dict[str, int] = {}
    for c in facts.counts:
        if c.noun != noun or " bin " in c.scope:
            continue
        if not c.qualifiers:
            totals[c.scope] = c.value
        elif c.qualifiers == qualifier:
            parts[c.scope] = c.value
    return [(parts[s], totals[s]) for s in parts if s in totals and totals[s] > 0]
