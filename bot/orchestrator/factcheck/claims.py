"""What an answer's sentences state about records: severity, status, owner, classification, times, counts,
changes made. Pure text analysis; ``grounding`` decides which record each claim is about and checks it.

Patterns are deliberately about statements ("is Low severity", "assigned to Chen", "came in overnight",
"57 high alerts", "I've closed it"), not about words: "high confidence", "the #1 concern", "confirmed
the classification" and questions state nothing. A claim that is negated or conditional ("not a false
positive", "once you have checked, close it") is not a claim.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum


class Topic(StrEnum):
    SEVERITY = "severity"
    STATUS = "status"
    OWNER = "owner"
    BENIGN = "classification"  # benign / false positive / approved / "close it" advice
    VERDICT = "verdict"  # true positive, undetermined: wrong but not a reason to act
    TIME = "time"
    COUNT = "count"
    CHANGE = "change"  # the bot (or "someone, just now") changed an incident


@dataclass(frozen=True)
class Claim:
    topic: Topic
    value: str  # normalised: "High", "Closed", "open", an owner, "benign", a count, a change kind
    start: int  # span in the answer
    end: int
    actor: bool = False  # CHANGE: the answer says it made the change ("I closed", "Done", "now")
    noun: str = ""  # COUNT: "incidents", "alerts", or "" when the sentence does not say
    qualifiers: frozenset[str] = frozenset()  # COUNT: "high", "open", ...
    approx: str = ""  # COUNT: "over", "under", "about" or ""
    own: bool = False  # COUNT: "has 4 alerts" about the subject itself
    window: tuple[timedelta, timedelta] | None = None  # TIME relative: the age range it allows
    moment: datetime | None = None  # TIME absolute
    precision: str = ""  # TIME absolute: "day", "minute", "clock" (no date); "utc-" when it says UTC

    @property
    def text_span(self) -> tuple[int, int]:
        return self.start, self.end


_SEV = r"(high|medium|low|informational)"
_NOT_SEVERITY_AFTER = (r"(?![-\s]+(?:confidence|risk|volume|impact|fidelity|level|number|value|alerts?|incidents?|"
                       r"severity|sev|amount|rate|traffic|usage|cpu|memory|privilege|count|bandwidth|entropy))")
_SEVERITY = [
    re.compile(rf"\b{_SEV}[-\s]+(?:sev(?:erity)?|priority)\b(?![-\s]+(?:alerts|incidents|ones|items))",
               re.IGNORECASE),
    re.compile(rf"\bsev(?:erity)?\b\s*(?:is|was|of|:|=|-|level|rating)?\s*(?:only\s+|just\s+|now\s+|still\s+|set\s+to\s+)?"
               rf"{_SEV}\b", re.IGNORECASE),
    re.compile(rf"\b(?:is|was|as|are|were|rated|marked|only|just)\s+(?:only\s+|just\s+|a\s+|an\s+|rated\s+|marked\s+)?"
               rf"{_SEV}\b{_NOT_SEVERITY_AFTER}", re.IGNORECASE),
    re.compile(rf"\b(High|Medium|Low|Informational)\b{_NOT_SEVERITY_AFTER}(?!\s+[A-Z][a-z])"),
    # Sentinel has no Critical: an incident called critical is said to be High
    re.compile(rf"\b(?:is|was|are|were|as|rated|marked)\s+(?:a\s+|an\s+|all\s+)?(critical)\b{_NOT_SEVERITY_AFTER}",
               re.IGNORECASE),
]
_STATUS = [
    re.compile(r"\bstatus\b\s*(?:is|was|:|=|of)?\s*(?:still\s+|now\s+|currently\s+)?(new|active|closed|open|resolved)\b",
               re.IGNORECASE),
    re.compile(r"\b(?:is|was|are|were|been|remains?|stays?|still|already|left)\s+(?:still\s+|now\s+|already\s+|"
               r"currently\s+)?(closed|resolved|open|active|unresolved|in progress)\b", re.IGNORECASE),
    re.compile(r"\b(Active|Closed)\b(?!\s+(?:incidents?|alerts?|ones?|[A-Z][a-z]))"),  # not "Active Directory"
    re.compile(r"\((?:[^()\n]{0,40}?,\s*)?(New|Active|Closed)\b"),
    re.compile(r"\b(?:is|was|are|were|remains?|still)\s+(New)\b(?!\s+[A-Z])"),
    re.compile(r"\b(?:was|were|been|got|has been)\s+(re-?opened)\b", re.IGNORECASE),
    # "Chen Wei closed #14448": a person (not "I", which is a change the bot claims) closed it
    re.compile(r"(?<![.!?]\s)(?<!^)\b(?!I\b|We\b)[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?\s+(closed|resolved)\s+(?=#|\[|incident\b)"),
]
_NAME = r"([\w.+-]+@[\w.-]+\w|[A-Z][\w'\u2019-]+(?:\s+[A-Z][\w'\u2019-]+){0,2}|you|me|nobody|no one|no-one)"
_OWNER = [
    re.compile(rf"\b(?i:assigned\s+to|owned\s+by|belongs\s+to|owner\s*(?:is|:|=|-)?|with)\s+{_NAME}"),
    re.compile(r"\b(unassigned|has no owner|no owner|not assigned to anyone|nobody is assigned|no one is assigned|"
               r"not yet assigned|isn't assigned|is not assigned)\b", re.IGNORECASE),
]
# "This may be benign, but ...", "possibly a false positive": an estimate held open, not a call on the record
_HEDGED = re.compile(r"\b(?:(?:may|might|could)(?:\s+(?:well|also|still|just))?\s+(?:be|have\s+been)|possibly|"
                     r"perhaps|maybe|potentially)\s+(?:an?\s+|the\s+|just\s+|simply\s+)?$", re.IGNORECASE)
_BENIGN = re.compile(
    r"\b(benign(?:\s*positive)?|BenignPositive|false[\s-]*positive|FalsePositive|false alarm|not malicious|harmless|"
    r"approved|authori[sz]ed(?:\s+(?:test|activity|exercise|change))?|sanctioned|red[\s-]*team(?:ing)?(?:\s+exercise)?|"
    r"pen(?:etration)?[\s-]*test(?:ing)?|(?:planned|scheduled)\s+(?:test|exercise|maintenance)|"
    r"(?:expected|normal|routine|legitimate|authori[sz]ed)\s+(?:[a-z-]+\s+){0,2}(?:activity|behaviou?r|traffic|operations?)|known[\s-]good|safe\s+to\s+(?:close|ignore|dismiss)|"
    r"can\s+(?:safely\s+)?be\s+(?:closed|ignored|dismissed)|"
    r"(?:just\s+|simply\s+|go ahead and\s+)?close\s+(?:it|this|them)|"
    r"no\s+(?:further\s+)?action\s+(?:is\s+)?(?:needed|required)|nothing\s+to\s+worry\s+about|can\s+wait|"
    r"legitimate|normal\s+(?:\w+\s+)?(?:activity|behaviou?r)|nothing\s+malicious|not\s+an?\s+(?:real\s+|genuine\s+)?"
    r"(?:threat|attack|incident)|no\s+(?:real\s+)?threat|safe\s+to\s+(?:deprioriti[sz]e|leave))\b",
    re.IGNORECASE)
_VERDICT = re.compile(r"\b(true[\s-]*positive|TruePositive|undetermined)\b", re.IGNORECASE)
# Negation or condition before a claim in the same clause: the sentence does not assert it.
_NEGATED = re.compile(r"(?:\bnot\b|n't\b|\bno evidence\b|\bnever\b|\bnothing\b|\bwithout\b|\brather than\b|\bunless\b|"
                      r"\bif\b|\bonce\b|\bwhen you\b|\bafter you\b|\bbefore\b|\buntil\b|\bwhether\b|\bcannot\b|"
                      r"\bunclear\b|\bunknown\b|\bno sign\b|\bno indication\b|\bonly if\b|\bdon't\b|\bdo not\b)"
                      r"[^.;:!?\n]*$", re.IGNORECASE)

_WORD_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                 "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a few": 3, "a couple of": 2,
                 "several": 5, "no": 0, "zero": 0}
_UNIT = {"minute": timedelta(minutes=1), "min": timedelta(minutes=1), "hour": timedelta(hours=1),
         "hr": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7), "month": timedelta(days=30),
         "m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(days=7)}
_AGO = re.compile(r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a few|a couple of|"
                  r"several)\s*(minute|min|hour|hr|day|week|month|m|h|d|w)s?\s+(?:ago|old)\b", re.IGNORECASE)
_VAGUE = [  # phrase -> allowed age (from, to), lenient for time zones
    (re.compile(r"\b(?:just now|moments? ago|a moment ago|minutes ago|just (?:came|arrived|fired|triggered))\b", re.I),
     (timedelta(0), timedelta(hours=1))),
    (re.compile(r"\b(?:overnight|last night)\b", re.I), (timedelta(0), timedelta(hours=30))),
    (re.compile(r"\b(?:this morning|earlier today|this afternoon|today)\b", re.I), (timedelta(0), timedelta(hours=26))),
    (re.compile(r"\byesterday\b", re.I), (timedelta(hours=4), timedelta(hours=54))),
    (re.compile(r"\bthis week\b", re.I), (timedelta(0), timedelta(days=8))),
    (re.compile(r"\blast week\b", re.I), (timedelta(days=2), timedelta(days=15))),
    (re.compile(r"\b(?:weeks|months) ago\b", re.I), (timedelta(days=6), timedelta(days=400))),
]
_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                        "dec"), start=1)}
_MONTH = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_ISO = re.compile(r"\b(20\d\d)-(\d\d)-(\d\d)(?:[ T](\d\d):(\d\d)(?::\d\d(?:\.\d+)?)?)?")
_AT_CLOCK = r"(?:,?\s+(?:at\s+)?(\d{1,2}):(\d\d))?"
_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(20\d\d))?{_AT_CLOCK}", re.IGNORECASE)
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH}(?:\s+(20\d\d))?{_AT_CLOCK}", re.IGNORECASE)
_CLOCK = re.compile(r"\b(?:at|from|since|around|about)\s+(\d{1,2}):(\d\d)\b(?!:\d)(\s*(?:UTC|GMT|Z)\b)?", re.IGNORECASE)
_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_ON_WEEKDAY = re.compile(r"\b(?:on|since|from|last)\s+((?:mon|tues|wednes|thurs|fri|satur|sun)day)\b(?!,?\s+(?:\d|"
                         r"jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))", re.IGNORECASE)
_UTC_AFTER = re.compile(r"\s*(?:UTC|GMT|Z)\b")

_QUALIFIER = (r"(?:new|open|active|closed|resolved|unassigned|high|medium|low|informational|critical|"
              r"high[- ]severity|medium[- ]severity|low[- ]severity|informational[- ]severity|severity)")
_COUNT = re.compile(
    rf"(?<![\w.,#\[-])(\d{{1,3}}(?:,\d{{3}})+|\d{{1,7}}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
    rf"\s+((?:{_QUALIFIER}(?:\s*(?:,|and|or|/)\s*|\s+))*)(incidents?|alerts?)\b"
    rf"(?:\s+(?:that\s+are\s+|which\s+are\s+|are\s+|were\s+)?(?:still\s+|currently\s+|now\s+)?"
    rf"(open|closed|active|new|unassigned|resolved|in progress)\b)?", re.IGNORECASE)
_COUNT_OF = re.compile(rf"(?<![\w.,#\[-])(\d{{1,7}})\s+(?:of\s+(?:them|these|those)\s+)?(?:are|were|is)\s+(?:still\s+)?"
                       rf"((?:{_QUALIFIER})(?:\s+and\s+{_QUALIFIER})?)\b", re.IGNORECASE)
_APPROX = re.compile(r"\b(over|more than|at least|above|under|fewer than|less than|below|about|around|roughly|"
                     r"nearly|almost|approximately|~|some)\s*$", re.IGNORECASE)
_OWN = re.compile(r"(?:\bhas|\bhad|\bwith|\bcontains?|\bcontaining|\bincludes?|\bincluding|\bacross|\bspans?|"
                  r"\bcarries|\(|:)\s*(?:only\s+|just\s+|a total of\s+)?$", re.IGNORECASE)

# Actions of any kind an answer may say the bot took: incident edits, and what it cannot do or did not log
# (paging, notifying, isolating, disabling, blocking, posting); each is checked against the confirmed changes.
_CHANGE_VERBS = (r"(closed|assigned|reassigned|raised|lowered|escalated|downgraded|upgraded|changed|updated|resolved|"
                 r"set|marked|commented|added a comment|applied|dismissed|paged|notified|alerted|pinged|messaged|"
                 r"emailed|contacted|informed|posted|sent|isolated|disabled|blocked|quarantined|revoked|reset|"
                 r"contained|suspended|locked)")
_CHANGE = [
    re.compile(rf"\b(?:I|we)(?:'ve|\s+have)?\s+(?:now\s+|just\s+|already\s+|successfully\s+|gone ahead and\s+)?"
               rf"{_CHANGE_VERBS}\b", re.IGNORECASE),
    re.compile(rf"\b(?:successfully|now|just been)\s+{_CHANGE_VERBS}\b", re.IGNORECASE),
    re.compile(r"\b(?:is|are)\s+now\s+(closed|assigned|resolved|high|medium|low|informational|active)\b",
               re.IGNORECASE),
    re.compile(r"\b(closed|assigned|resolved)\s+now\b", re.IGNORECASE),
    re.compile(rf"^\W*{_CHANGE_VERBS}\s+(?:#|incident\b|it\b|\[|this\b|that\b|the\b|a\b|an\b|them\b)", re.IGNORECASE),
    re.compile(rf"\b(?:went|gone)\s+ahead\s+and\s+{_CHANGE_VERBS}\b", re.IGNORECASE),
    re.compile(rf"\b{_CHANGE_VERBS}\b[^.;\n]{{0,40}}\b(?:for you|by me|on your behalf)\b", re.IGNORECASE),
]
_CHECKED = re.compile(r"^\W*(✅|✔️?|done\b|all set\b|completed\b)", re.IGNORECASE)  # a list marker, unless...
_PASSIVE_CHANGE = re.compile(rf"\b(?:has|have)\s+been\s+(?:successfully\s+)?{_CHANGE_VERBS}\b", re.IGNORECASE)
CHANGE_KINDS = {"closed": ("status",), "resolved": ("status",), "dismissed": ("status",), "active": ("status",),
                "assigned": ("assign",), "reassigned": ("assign",), "raised": ("severity",), "lowered": ("severity",),
                "downgraded": ("severity",), "upgraded": ("severity",), "high": ("severity",),
                "medium": ("severity",), "low": ("severity",), "informational": ("severity",),
                "commented": ("comment",), "added a comment": ("comment",), "escalated": ("escalate",),
                **dict.fromkeys(("paged", "notified", "alerted", "pinged", "messaged", "emailed", "contacted",
                                 "informed", "posted", "sent"), ("escalate",)),
                # the bot cannot do these: no confirmed change makes them true
                **dict.fromkeys(("isolated", "disabled", "blocked", "quarantined", "revoked", "reset", "contained",
                                 "suspended", "locked"), ())}
ANY_CHANGE = ("status", "assign", "severity", "comment")


def find(sentence: str, offset: int, now: datetime) -> list[Claim]:
    """The claims one sentence makes; spans are relative to the answer (``offset`` is the sentence's start)."""
    if sentence.rstrip().endswith("?"):
        return []
    claims: list[Claim] = []
    claims += _changes(sentence, offset)
    claims += _matches(sentence, offset, _SEVERITY, Topic.SEVERITY,
                       lambda v: "High" if v.lower() == "critical" else v.capitalize())
    claims += _matches(sentence, offset, _STATUS, Topic.STATUS, status_value)
    claims += _owners(sentence, offset)
    claims += _benign(sentence, offset)
    claims += _times(sentence, offset, now)
    claims += _counts(sentence, offset)
    return _without_overlaps(claims)


LOOK_BACK = 240  # how far back a claim's clause is read: a 30,000-character "sentence" must not be read per claim


def _asserted(sentence: str, start: int) -> bool:
    window = max(0, start - LOOK_BACK)
    clause_start = max(sentence.rfind(sep, window, start) for sep in (".", ";", ":", "!", "?", "\n", " but ")) + 1
    return _NEGATED.search(sentence, max(clause_start, window), start) is None


def _matches(sentence: str, offset: int, patterns: list[re.Pattern[str]], topic: Topic, value_of) -> list[Claim]:
    claims = []
    for pattern in patterns:
        for m in pattern.finditer(sentence):
            value = value_of(m.group(1))
            if value and _asserted(sentence, m.start()):
                claims.append(Claim(topic, value, offset + m.start(1), offset + m.end(1)))
    return claims


def status_value(word: str) -> str:
    lower = word.lower()
    if lower in ("closed", "resolved"):
        return "Closed"
    if word in ("Active", "New"):
        return word
    return "open" if lower in ("open", "active", "unresolved", "in progress", "reopened", "re-opened") else ""


def _owners(sentence: str, offset: int) -> list[Claim]:
    claims = []
    for m in _OWNER[0].finditer(sentence):
        name = m.group(1)
        if m.group(0).lower().startswith("with") and "@" not in name:
            continue  # "with High severity": only "with alice@contoso.com" names an owner
        if name.split()[0] in ("High", "Medium", "Low", "Informational", "Active", "Closed", "New", "Microsoft"):
            continue
        if _asserted(sentence, m.start()):
            value = "" if name.lower() in ("nobody", "no one", "no-one") else name
            claims.append(Claim(Topic.OWNER, value, offset + m.start(1), offset + m.end(1)))
    for m in _OWNER[1].finditer(sentence):
        claims.append(Claim(Topic.OWNER, "", offset + m.start(1), offset + m.end(1)))
    return claims


def _benign(sentence: str, offset: int) -> list[Claim]:
    claims = []
    for m in _BENIGN.finditer(sentence):
        if _asserted(sentence, m.start()) and not _HEDGED.search(sentence, max(0, m.start() - 40), m.start()):
            claims.append(Claim(Topic.BENIGN, _classification(m.group(1)), offset + m.start(1), offset + m.end(1)))
    for m in _VERDICT.finditer(sentence):
        if _asserted(sentence, m.start()):
            claims.append(Claim(Topic.VERDICT, _classification(m.group(1)), offset + m.start(1), offset + m.end(1)))
    return claims


def _classification(phrase: str) -> str:
    lower = re.sub(r"[\s-]+", "", phrase.lower())
    if lower.startswith("falsepositive") or lower == "falsealarm":
        return "FalsePositive"
    if lower.startswith("truepositive"):
        return "TruePositive"
    if lower == "undetermined":
        return "Undetermined"
    return "BenignPositive"  # benign, approved, red team, expected, "close it": the record must say benign


def _times(sentence: str, offset: int, now: datetime) -> list[Claim]:
    claims = []
    for m in _AGO.finditer(sentence):
        amount = int(m.group(1)) if m.group(1).isdigit() else _WORD_NUMBERS[m.group(1).lower()]
        age = _UNIT[m.group(2).lower()] * amount
        slack = max(age / 4, _UNIT[m.group(2).lower()])  # rounding, not guessing: "10 days" is 8-12 days
        claims.append(Claim(Topic.TIME, m.group(0), offset + m.start(), offset + m.end(),
                            window=(max(age - slack, timedelta(0)), age + slack)))
    for pattern, window in _VAGUE:
        for m in pattern.finditer(sentence):
            claims.append(Claim(Topic.TIME, m.group(0), offset + m.start(), offset + m.end(), window=window))
    for m in _ISO.finditer(sentence):
        moment = _moment(int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4), m.group(5))
        if moment:
            claims.append(Claim(Topic.TIME, m.group(0), offset + m.start(), offset + m.end(), moment=moment,
                                precision=_minute(m.group(4), sentence, m.end())))
    for pattern, month_group, day_group in ((_MONTH_DAY, 1, 2), (_DAY_MONTH, 2, 1)):
        for m in pattern.finditer(sentence):
            year = int(m.group(3)) if m.group(3) else now.year
            moment = _moment(year, _MONTHS[m.group(month_group).lower()[:3]], int(m.group(day_group)), m.group(4),
                             m.group(5))
            if moment and not m.group(3) and moment > now + timedelta(days=2):
                moment = moment.replace(year=year - 1)  # "Dec 30" said in January
            if moment:
                claims.append(Claim(Topic.TIME, m.group(0), offset + m.start(), offset + m.end(), moment=moment,
                                    precision=_minute(m.group(4), sentence, m.end())))
    for m in _ON_WEEKDAY.finditer(sentence):  # "created on Tuesday": the last such day, a day either way
        back = (now.weekday() - _WEEKDAYS.index(m.group(1).lower()[:3])) % 7
        day = (now - timedelta(days=back)).replace(hour=12, minute=0, second=0, microsecond=0)
        claims.append(Claim(Topic.TIME, m.group(0), offset + m.start(1), offset + m.end(1), moment=day,
                            precision="day"))
    for m in _CLOCK.finditer(sentence):
        hour, minute = int(m.group(1)), int(m.group(2))
        if hour < 24 and minute < 60:
            claims.append(Claim(Topic.TIME, m.group(0), offset + m.start(1), offset + m.end(2),
                                moment=now.replace(hour=hour, minute=minute, second=0, microsecond=0),
                                precision="utc-clock" if m.group(3) else "clock"))
    return claims


def _minute(hour: str | None, sentence: str, end: int) -> str:
    """How exact an absolute time is: a day, a minute in UTC, or a minute in some time zone."""
    if not hour:
        return "day"
    return "utc-minute" if _UTC_AFTER.match(sentence, end) or sentence[end - 1:end] == "Z" else "minute"


def _moment(year: int, month: int, day: int, hour: str | None, minute: str | None) -> datetime | None:
    try:
        return datetime(year, month, day, int(hour or 0), int(minute or 0), tzinfo=UTC)
    except ValueError:
        return None


def _counts(sentence: str, offset: int) -> list[Claim]:
    claims = []
    for m in _COUNT.finditer(sentence):
        before = sentence[max(0, m.start() - LOOK_BACK):m.start()]
        if re.search(r"(?:\btop|\bfirst|\blast|\bnext|\bpast|\bof the|\bthe)\s*$", before, re.IGNORECASE):
            continue  # "the top 5 incidents", "the last 3 alerts": a selection, not a count of results
        noun = "incidents" if m.group(3).lower().startswith("incident") else "alerts"
        claims.append(Claim(Topic.COUNT, str(_number(m.group(1))), offset + m.start(), offset + m.end(), noun=noun,
                            qualifiers=_qualifiers(f"{m.group(2)} {m.group(4) or ''}"), approx=_approx(before),
                            own=bool(_OWN.search(before[-40:]))))
    sentence_noun = ("incidents" if re.search(r"\bincidents?\b", sentence, re.IGNORECASE)
                     else "alerts" if re.search(r"\balerts?\b", sentence, re.IGNORECASE) else "")
    for m in _COUNT_OF.finditer(sentence):
        noun = sentence_noun
        claims.append(Claim(Topic.COUNT, str(_number(m.group(1))), offset + m.start(), offset + m.end(), noun=noun,
                            qualifiers=_qualifiers(m.group(2)),
                            approx=_approx(sentence[max(0, m.start() - 40):m.start()])))
    return claims


def _number(text: str) -> int:
    lower = text.lower()
    return _WORD_NUMBERS[lower] if lower in _WORD_NUMBERS else int(text.replace(",", ""))


def _qualifiers(text: str) -> frozenset[str]:
    words = re.findall(r"[a-z]+", text.lower().replace("in progress", "open"))
    mapped = {"resolved": "closed", "critical": "high"}
    return frozenset(mapped.get(w, w) for w in words if w not in ("severity", "and", "or"))


def count_matches(said: int, real: int, approx: str = "") -> bool:
    """Whether a count as written allows the real one: the one rule for every count the fact check reads (a list's
    total, an incident's alerts, a declared kind's rows). "over"/"under" bound it; "about" allows a quarter either
    way and one more (a small estimate); a plain round number of at least 10 is an honest rounding within a tenth
    ("50 sign-ins" for 47: "about" is often left out); any other plain number is exact."""
    if approx == "over":
        return real >= said
    if approx == "under":
        return real <= said
    if approx == "about":
        return abs(real - said) <= said * 0.25 + 1
    if said >= 10 and said % 10 == 0:
        return abs(real - said) <= said * 0.1
    return real == said


# A share said as a fraction, in percent.
FRACTIONS = {"half": 50.0, "a half": 50.0, "one half": 50.0, "a third": 100 / 3, "one third": 100 / 3,
             "two thirds": 200 / 3, "a quarter": 25.0, "one quarter": 25.0, "three quarters": 75.0, "a fifth": 20.0,
             "one fifth": 20.0}


def share_matches(said: float, real: float, *, fraction: bool = False, hedged: bool = False) -> bool:
    """Whether a share as written (in percent) allows the real one: the one rule for every share the fact check
    reads (of a counted list, of a subject's declared rows). An honest rounding: "60%" for 57% (a round ten: five
    points), "25%" for 24% (a five: 2.5), "33%" for 33.3% (one), a fraction word five points; "about" five more."""
    tolerance = 5.0 if fraction or said % 10 == 0 else 2.5 if said % 5 == 0 else 1.0
    return abs(real - said) <= tolerance + (5.0 if hedged else 0.0) + 1e-9


def _approx(before: str) -> str:
    m = _APPROX.search(before[-25:])
    if not m:
        return ""
    word = m.group(1).lower()
    if word in ("over", "more than", "at least", "above"):
        return "over"
    if word in ("under", "fewer than", "less than", "below"):
        return "under"
    return "about"


def _changes(sentence: str, offset: int) -> list[Claim]:
    claims = []
    for pattern in _CHANGE:
        for m in pattern.finditer(sentence):
            if _asserted(sentence, m.start()):
                claims.append(Claim(Topic.CHANGE, m.group(1).lower(), offset + m.start(), offset + m.end(), actor=True))
    for m in _PASSIVE_CHANGE.finditer(sentence):
        if _asserted(sentence, m.start()):
            claims.append(Claim(Topic.CHANGE, m.group(1).lower(), offset + m.start(), offset + m.end()))
    for m in _CHECKED.finditer(sentence):  # "✅ #14448 closed": a checklist, a claim of change only with a verb
        claims.append(Claim(Topic.CHANGE, m.group(1).lower(), offset + m.start(), offset + m.end()))
    return claims


def _without_overlaps(claims: list[Claim]) -> list[Claim]:
    """One claim per topic and span: the first pattern that matched wins."""
    kept: list[Claim] = []
    taken: dict[Topic, list[tuple[int, int]]] = {}  # per topic, the kept spans, sorted
    for claim in claims:
        spans = taken.setdefault(claim.topic, [])
        index = bisect.bisect_left(spans, (claim.start, claim.end))
        near = spans[max(0, index - 1):index + 1]  # spans do not overlap each other: only the neighbours can
        if any(s < claim.end and claim.start < e for s, e in near):
            continue
        bisect.insort(spans, (claim.start, claim.end))
        kept.append(claim)
    return sorted(kept, key=lambda c: c.start)
