"""What a record type's fields mean, declared beside the record type, so the fact check can hold answers to any
record without knowing it.

A record type declares (``FACTS``, a class attribute built with ``declare``):

- its **kind** ("sign-in") and the **nouns** an answer counts its rows by ("sign-ins", "logins");
- each field's **semantic type** (``Sem``: account, host, IP, country, app, process, parent process, count, ...);
- its **identity** (the fields that tell two rows apart) and the records it **belongs to** (``belongs``: the
  fields whose values are its subjects: a sign-in belongs to its account and IP, a process to its device, account,
  file and parent);
- what it is **counted by**, when a row stands for several events (a sign-in group's ``count``), else each row is one.

A record whose fields depend on the row (a hunt row's columns) declares per row with a ``facts()`` method.
``declaration(record)`` reads either; ``field_values(record, declared)`` gives (field, semantic type, text).

Nothing here checks anything: the fact check (``bot/orchestrator/factcheck/declared.py``) reads these. A new record
type is checked as soon as it declares its fields; free text (titles, command lines, subjects) is declared as
``Sem.TEXT`` or ``Sem.COMMAND`` and never confirms a claim.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


class Sem(enum.StrEnum):
    """The semantic type of a field: what an answer says with a value of it."""

    ACCOUNT = "account"
    SENDER = "sender"
    RECIPIENT = "recipient"
    HOST = "host"
    IP = "ip"
    HASH = "hash"
    URL = "url"
    DOMAIN = "domain"
    COUNTRY = "country"
    CITY = "city"
    APP = "app"
    PROCESS = "process"
    PARENT = "parent process"
    FILE = "file"
    PATH = "file path"
    COMMAND = "command line"
    EMAIL = "email address"
    COUNT = "count"
    DURATION = "duration"
    TIMESTAMP = "timestamp"
    SEVERITY = "severity"
    STATUS = "status"
    RESULT = "result"
    ACTION = "action"
    ERROR = "error code"
    LEVEL = "level"
    SCORE = "score"
    PORT = "port"
    FLAG = "flag"  # a yes/no the row states ("clicked through"): ``cue`` names the verb an answer uses
    ENTITY = "entity"  # an entity value of any kind the record names in full (an incident's entities)
    TACTIC = "tactic"  # a MITRE ATT&CK tactic
    PRODUCT = "product"  # the security product that raised it
    TECHNIQUE = "technique"  # a MITRE ATT&CK technique id ("T1110", "T1110.003": a sub-technique refines it)
    TEXT = "text"  # attacker-writable free text: cited, never evidence
    ID = "id"


# The families an answer's value is recognised in: a file name may be a process, its parent or a file.
FAMILY: dict[Sem, str] = {
    Sem.ACCOUNT: "account", Sem.SENDER: "account", Sem.RECIPIENT: "account", Sem.EMAIL: "account",
    Sem.PROCESS: "file", Sem.PARENT: "file", Sem.FILE: "file",
    Sem.HOST: "host", Sem.IP: "ip", Sem.HASH: "hash", Sem.URL: "url", Sem.DOMAIN: "domain",
    Sem.COUNTRY: "country", Sem.CITY: "city", Sem.APP: "app", Sem.ACTION: "action", Sem.RESULT: "result",
    Sem.LEVEL: "level", Sem.SCORE: "number", Sem.PORT: "number", Sem.COUNT: "number", Sem.ERROR: "error",
    Sem.SEVERITY: "severity", Sem.STATUS: "status", Sem.TIMESTAMP: "time", Sem.FLAG: "flag",
    Sem.ENTITY: "entity", Sem.TACTIC: "tactic", Sem.PRODUCT: "product", Sem.TECHNIQUE: "technique",
}
# The families an ENTITY field holds values of: it is held to a value of any of them.
ENTITY_FAMILIES = frozenset({"account", "host", "ip", "domain", "url", "hash", "file"})
# Roles an answer names with a cue word before the value ("launched by", "from", "to"): the field is read only so.
ROLE_CUES: dict[Sem, str] = {
    Sem.PARENT: r"parent(?:\s+process)?(?:\s+of\s+\S+)?(?:\s*(?:was|is|=|:))?|launched by|spawned by|started by|"
                r"child of|created by|run by|executed by|invoked by|opened by|dropped by|written by",
    Sem.SENDER: r"from|sent by|sender(?:\s+(?:was|is))?",
    Sem.RECIPIENT: r"to|recipient(?:\s+(?:was|is))?|sent to|delivered to|received by",
}


@dataclass(frozen=True)
class Field:
    name: str
    sem: Sem
    cue: str = ""  # a regex of the words an answer uses with it (a flag's verb, a number's label: "port")
    choices: tuple[str, ...] = ()  # the values it can take (an enumeration: a status, a classification)


@dataclass(frozen=True)
class Declaration:
    kind: str
    nouns: tuple[str, ...]
    fields: tuple[Field, ...]
    identity: tuple[str, ...] = ()
    belongs: tuple[str, ...] = ()
    weight: str = ""  # a COUNT field: how many events the row stands for

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


def declare(kind: str, nouns: tuple[str, ...], /, *, identity: tuple[str, ...] = (), belongs: tuple[str, ...] = (),
            counted_by: str = "", cues: dict[str, str] | None = None,
            choices: dict[str, tuple[str, ...]] | None = None, **fields: Sem) -> Declaration:
    """``declare("sign-in", ("sign-ins",), upn=Sem.ACCOUNT, ip=Sem.IP, belongs=("upn", "ip"))``.

    ``cues``: a field read only after these words (a number's label, a flag's verb, a role: "assigned to" for a
    change's owner). ``choices``: the values an enumerated field can take, read after its cue, or wherever they are
    written when it has none (names as distinctive as MITRE's tactics)."""
    return declare_fields(kind, nouns, fields, identity=identity, belongs=belongs, counted_by=counted_by, cues=cues,
                          choices=choices)


def declare_fields(kind: str, nouns: tuple[str, ...], fields: dict[str, Sem], *, identity: tuple[str, ...] = (),
                   belongs: tuple[str, ...] = (), counted_by: str = "", cues: dict[str, str] | None = None,
                   choices: dict[str, tuple[str, ...]] | None = None) -> Declaration:
    """``declare`` with the fields as a mapping (names that are not Python identifiers: a hunt's columns)."""
    cues, choices = cues or {}, choices or {}
    unknown = (set(identity) | set(belongs) | set(cues) | set(choices) | ({counted_by} - {""})) - set(fields)
    if unknown:
        raise ValueError(f"{kind}: {sorted(unknown)} are not declared fields")
    return Declaration(kind, nouns, tuple(Field(n, s, cues.get(n, ""), tuple(choices.get(n, ())))
                                          for n, s in fields.items()), identity, belongs, counted_by)


def declaration(record: Any, parameters: dict[str, Any] | None = None) -> Declaration | None:
    """What ``record`` declares: its own ``facts(parameters)`` (fields that depend on the row and on the query's
    ``parameters``), else its type's ``FACTS``."""
    per_row = getattr(record, "facts", None)
    if callable(per_row):
        found = per_row(parameters or {})
        return found if isinstance(found, Declaration) else None
    found = getattr(type(record), "FACTS", None)
    return found if isinstance(found, Declaration) else None


def field_values(record: Any, declared: Declaration) -> Iterator[tuple[Field, Any]]:
    """Each declared field with its value (a tuple field gives one pair per item); empty values are left out."""
    value_of = getattr(record, "value", None) if getattr(record, "cells", None) is not None else None
    for f in declared.fields:
        value = value_of(f.name) if callable(value_of) else getattr(record, f.name, None)
        items = value if isinstance(value, (tuple, list)) else (value,)
        for item in items:
            if item is None or item == "":
                continue
            yield f, getattr(item, "value", item) if isinstance(item, enum.Enum) else item
