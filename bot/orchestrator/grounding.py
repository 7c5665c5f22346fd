"""The grounding check: identifiers in an answer must come from this conversation's tool results.

Checked: incident numbers ("#1234", "incident 1234", "incidents 12, 13 and 14"), [n] references, IPv4
addresses and alert ids (GUIDs). Anything the conversation's results do not contain is reported so the
reply can flag it to the analyst instead of presenting it as fact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from bot.orchestrator.conversation import Conversation

_HASH_NUMBER = re.compile(r"(?<![\w&])#\s?(\d{1,10})\b")
_INCIDENT_RUN = re.compile(
    r"\bincidents?\s+(?:number\s+|no\.?\s*|nr\.?\s*)?((?:#?\d{1,10}(?:\s*(?:,|and|&|or|/)\s*)?)+)", re.IGNORECASE
)
_NUMBER = re.compile(r"\d{1,10}")
_REFERENCE = re.compile(r"\[(\d{1,4})\]")
_IPV4 = re.compile(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\d.])")
_GUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")


@dataclass(frozen=True)
class Unverified:
    kind: str  # incident, reference, ip, id
    value: str

    def describe(self) -> str:
        return {"incident": f"incident #{self.value}", "reference": f"[{self.value}]", "ip": f"IP {self.value}",
                "id": f"id {self.value}"}[self.kind]


def incident_numbers(text: str) -> list[int]:
    found = [int(m.group(1)) for m in _HASH_NUMBER.finditer(text)]
    for run in _INCIDENT_RUN.finditer(text):
        found += [int(n) for n in _NUMBER.findall(run.group(1))]
    return list(dict.fromkeys(found))


def check(answer: str, conversation: Conversation, tool_texts: Iterable[str] = ()) -> list[Unverified]:
    """Identifiers in ``answer`` that nothing in this conversation's results backs up."""
    known_numbers = set(conversation.known_incidents)
    known_values = {v.lower() for v in conversation.known_values}
    corpus = "\n".join(tool_texts).lower()
    if conversation.summary:
        corpus += "\n" + conversation.summary.lower()
    problems: list[Unverified] = []
    for number in incident_numbers(answer):
        if number not in known_numbers and f"#{number}" not in corpus and f"|{number}|" not in corpus:
            problems.append(Unverified("incident", str(number)))
    for n in dict.fromkeys(int(x) for x in _REFERENCE.findall(answer)):
        if conversation.references.get(n) is None:
            problems.append(Unverified("reference", str(n)))
    for ip in dict.fromkeys(_IPV4.findall(answer)):
        if ip.lower() not in known_values and ip.lower() not in corpus:
            problems.append(Unverified("ip", ip))
    for guid in dict.fromkeys(_GUID.findall(answer)):
        if guid.lower() not in known_values and guid.lower() not in corpus:
            problems.append(Unverified("id", guid))
    return problems


def flag(problems: list[Unverified]) -> str:
    items = ", ".join(p.describe() for p in problems[:10])
    more = f" and {len(problems) - 10} more" if len(problems) > 10 else ""
    return (
        f"Unverified: {items}{more} did not come from any query in this conversation. "
        "Treat it as unconfirmed and check it in Sentinel."
    )
