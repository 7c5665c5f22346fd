"""What a filtered list was narrowed by, for its card title ("open · owner alice · "qakbot""): a filtered
list must not read like the whole queue."""

from __future__ import annotations

from typing import Any

from bot.cards.common import plain


def filter_label(parameters: dict[str, Any]) -> str:
    """The filters in a query's parameters, in words; "" when there are none."""
    parts = []
    if parameters.get("status"):
        parts.append(plain(str(parameters["status"]), 12))
    if parameters.get("owner"):
        owner = str(parameters["owner"])
        parts.append(owner if owner in ("unassigned", "mine") else f"owner {plain(owner, 40)}")
    if parameters.get("severity"):
        parts.append("/".join(plain(str(s), 13) for s in parameters["severity"]))
    if parameters.get("entity"):
        parts.append(f"involving {plain(str(parameters['entity']), 60)}")
    if parameters.get("search"):
        parts.append(f"“{plain(str(parameters['search']), 40)}”")
    if parameters.get("product"):
        parts.append(f"product {plain(str(parameters['product']), 40)}")
    for name in ("tactic", "classification"):
        if parameters.get(name):
            parts.append(plain(str(parameters[name]), 30))
    if parameters.get("from"):
        parts.append(f"from {plain(str(parameters['from']), 20).replace('T', ' ').replace(':00Z', ' UTC')}")
    if parameters.get("to"):
        parts.append(f"until {plain(str(parameters['to']), 20).replace('T', ' ').replace(':00Z', ' UTC')}")
    if parameters.get("sort") == "newest":
        parts.append("newest first")
    elif parameters.get("sort") == "most_alerts":
        parts.append("most alerts first")
    return " · ".join(parts)


def titled(what: str, parameters: dict[str, Any]) -> str:
    """"12 incidents · open · unassigned" or just "12 incidents"."""
    label = filter_label(parameters)
    return f"{what} · {label}" if label else what
