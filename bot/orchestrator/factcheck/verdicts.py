"""The investigations' assessments as facts, and the one claim checked against them: a sentence that names an
investigated entity and calls it compromised (malicious, breached, taken over, ...) or states its assessment level,
when the bot's assessment says otherwise. "alice is compromised" after an assessment of low or none is marked, with
the assessment and its signals; "no sign alice was compromised" is not a claim of compromise. So is a named signal the
assessment does not have: "alice had an MFA-fatigue pattern" when the assessment holds no such signal (NAMED_SIGNALS:
the phrases that name a signal, and the assessment titles that back them).

Kept apart from the incident claims (``claims``, ``grounding``): it needs only the sentence and the verdicts, and
``grounding.check`` adds its findings to the others'."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

MAX_VERDICTS = 20
_SENTENCES = re.compile(r"(?:[^.!?\n]|[.!?](?=\S))+[.!?]?")  # "bob@contoso.com" does not end a sentence
_COMPROMISED = re.compile(r"\b(compromised|malicious|breached|hacked|taken over|owned by (?:an )?attacker|infected|"
                          r"confirmed (?:attack|breach|compromise))\b", re.IGNORECASE)
# Entra's own "risk level" (a sign-in's, a risky user's) is not the bot's assessment: rows declare it apart.
_LEVEL = re.compile(r"\b(?:assessment|assessed|verdict|(?<!risk )level)\b.{0,40}?\b(none|low|medium|high)\b",
                    re.IGNORECASE)
_NEGATED = re.compile(r"\b(not|no|never|nothing|without|isn't|wasn't|aren't|weren't|unlikely|doesn't|didn't|"
                      r"cannot|can't|no sign|no evidence)\b", re.IGNORECASE)
_SERIOUS = ("medium", "high")
# A signal as an answer names it -> the start of the assessment titles (assessment.py) that back the claim.
NAMED_SIGNALS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), titles) for pattern, titles in (
        (r"\bmfa[- ]?fatigue|\b(?:mfa |push )(?:bombing|spamming|fatigue)", ("MFA-fatigue",)),
        (r"\bthreat[- ]intel(?:ligence)?(?: feed)? (?:match|hit)|\bmatch(?:es|ed)? (?:a )?threat[- ]intel(?:ligence)?",
         ("Threat-intelligence",)),
        (r"\b(?:sign-?ins?|logins?|logons?) from a new country|\bnew (?:sign-?in )?country", ("Sign-ins from a new",)),
        (r"\b(?:new|added to an?|granted an?) (?:privileged |admin(?:istrator)? )?role\b",
         ("New privileged", "New role")),
        (r"\bmalicious process|\bencoded powershell", ("Malicious process",)),
        (r"\bcredential dumping", ("Malicious process", "Credential dumping")),
        (r"\brisky user(?![\s-]+(?:records?|rows?|entr(?:y|ies)|list|table|query))|\bflagged as risky",
         ("Risky user",)),
    ))


@dataclass(frozen=True)
class VerdictFact:
    """The bot's assessment of one investigated entity, when it was made and by which tool."""

    entity: str
    kind: str
    level: str
    score: int
    signals: tuple[str, ...]  # the signals' titles
    tool: str
    at: datetime

    def describe(self) -> str:
        signals = ", ".join(self.signals) if self.signals else "no signal"
        return (f"the bot's assessment of {self.kind} {self.entity} is {self.level} (score {self.score}: {signals}; "
                f"per {self.tool} at {self.at:%H:%M} UTC)")

    def to_dict(self) -> dict[str, Any]:
        return {"entity": self.entity, "kind": self.kind, "level": self.level, "score": self.score,
                "signals": list(self.signals), "tool": self.tool, "at": self.at.isoformat()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VerdictFact:
        return cls(str(data["entity"]), str(data["kind"]), str(data["level"]), int(data["score"]),
                   tuple(str(s) for s in data.get("signals", [])), str(data["tool"]),
                   datetime.fromisoformat(str(data["at"])))


@dataclass(frozen=True)
class VerdictMismatch:
    """A sentence's claim about an investigated entity that its assessment does not back."""

    start: int
    end: int
    record: str
    note: str
    sentence: tuple[int, int]


def mismatches(answer: str, verdicts: Iterable[VerdictFact]) -> list[VerdictMismatch]:
    """Each compromise or level claim about an investigated entity that its assessment contradicts."""
    known = [v for v in verdicts if v.entity]
    found: list[VerdictMismatch] = []
    for sentence in _SENTENCES.finditer(answer):
        text = sentence.group(0)
        lower = text.lower()
        for verdict in known:
            if verdict.entity.lower() not in lower:
                continue
            found += _claims(text, sentence.start(), verdict, (sentence.start(), sentence.end()))
    return found


def _claims(text: str, offset: int, verdict: VerdictFact, span: tuple[int, int]) -> list[VerdictMismatch]:
    out = []
    # The assessment's own signals named as given ("Malicious email delivered (+15)" in a low assessment): their
    # words are the bot's, not a claim that the entity is compromised.
    titled = [m.span() for title in verdict.signals if title
              for m in re.finditer(re.escape(title), text, re.IGNORECASE)]
    for match in _COMPROMISED.finditer(text):
        if any(start <= match.start() and match.end() <= end for start, end in titled):
            continue
        if verdict.level not in _SERIOUS and not _NEGATED.search(text[:match.start()]):
            out.append(VerdictMismatch(offset + match.start(), offset + match.end(), verdict.describe(),
                                       f"assessment: {verdict.level}", span))
    for pattern, titles in NAMED_SIGNALS:
        for match in pattern.finditer(text):
            backed = any(title.startswith(titles) for title in verdict.signals)
            if not backed and not _NEGATED.search(text[:match.start()]):
                out.append(VerdictMismatch(offset + match.start(), offset + match.end(), verdict.describe(),
                                           f"no such signal in the assessment ({verdict.level})", span))
    for match in _LEVEL.finditer(text):
        if match.group(1).lower() != verdict.level and not _NEGATED.search(text[:match.start()]):
            out.append(VerdictMismatch(offset + match.start(1), offset + match.end(1), verdict.describe(),
                                       f"assessment: {verdict.level}", span))
    return out
