"""Who is asking this turn, and what their "[2]" and "that incident" mean: resolved before any query runs.

The model copies what the analyst said into a tool call: ``incident_ref: "[2]"`` or ``"that incident"``,
``owner: "me"``. None of those means anything to a query, so the tools resolve them first, from the
conversation's references and the signed-in analyst, and a reference that names nothing here is a tool
error the model can correct (never "no rows, widen the window").

The command router sets the turn's ``Asking`` once per typed message (``use``), before the model turn
runs in the same task; the tool calls the loop gathers inherit it (asyncio copies the context into each
task). This package cannot see the orchestrator's references, so the router passes a resolver in.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from bot.sentinel.params import SELF_WORDS, InvalidParameter, Me

# "[2]", and the ways people point back at the last incident they looked at.
_REFERENCE = re.compile(r"^\s*\[(\d{1,6})\]\s*$")
_THAT = re.compile(r"^\s*(?:that|this|the same|the last|last|previous|same)(?:\s+one|\s+incident)?\s*$|^\s*it\s*$",
                   re.IGNORECASE)

# n -> the incident number it names, or a sentence saying why it names none ("[7] is an alert ...").
ReferenceLookup = Callable[[int], int | str]


@dataclass(frozen=True)
class Asking:
    me: str | None = None  # the asking analyst's Entra object id (or sign-in name); None where nobody signed in
    reference: ReferenceLookup | None = None
    last_incident: str | None = None  # "that incident": the last one looked at


_NOBODY = Asking()
_ASKING: ContextVar[Asking | None] = ContextVar("asking", default=None)


def use(asking: Asking) -> None:
    """This turn's asker and references, for every tool call made in this task from now on."""
    _ASKING.set(asking)


def current() -> Asking:
    return _ASKING.get() or _NOBODY


def resolve(parameters: tuple[str, ...], arguments: dict[str, Any], asking: Asking | None = None) -> dict[str, Any]:
    """``arguments`` with "[n]"/"that incident" as an incident number and "me" as the analyst;
    InvalidParameter (a tool error the model can correct) when one names nothing here."""
    asking = asking or current()
    out = dict(arguments)
    if "incident_ref" in parameters and isinstance(out.get("incident_ref"), str):
        out["incident_ref"] = incident_number(out["incident_ref"], asking)
    owner = out.get("owner")
    if "owner" in parameters and isinstance(owner, str) and owner.strip().lower() in SELF_WORDS and asking.me:
        out["owner"] = Me(asking.me)  # compared as the id, shown as "mine"
    return out


def incident_number(text: str, asking: Asking) -> Any:
    """The incident "[n]" or "that incident" names; other text unchanged (a number or title words)."""
    if match := _REFERENCE.match(text):
        found = asking.reference(int(match.group(1))) if asking.reference else \
            f"There is no [{match.group(1)}] here: give the incident's number."
        if isinstance(found, str):
            raise InvalidParameter("incident_ref", found)
        return found
    if points_back(text):
        return last_incident_number(text, asking)
    return text


def points_back(text: str) -> bool:
    """"that incident", "this one", "it": the last incident looked at."""
    return bool(_THAT.match(text))


def last_incident_number(text: str, asking: Asking | None = None) -> int:
    last = (asking or current()).last_incident
    if last is None:
        raise InvalidParameter("incident_ref", f"{text.strip()[:40]!r}: no incident has been looked at in this "
                                               "conversation yet; give its number or a [n] from a list")
    return int(last)
